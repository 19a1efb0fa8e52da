//! Clients no one here wrote, end to end against `hermes -p work gateway run --no-supervise`:
//! the official `openai` Python SDK (streamed and not) and `hermes-agent-api-client` (PyPI).
//!
//! Words used here:
//! * *upstream* — the fake OpenAI-compatible provider `clients/fake_upstream.py`; it answers
//!   `echo: <last user message>` (JSON or SSE chunks ending `data: [DONE]`) and records every
//!   request it receives, so the test can check what the gateway sent (SOUL.md first, the
//!   configured model and key, the session history).
//! * *driver* — `clients/drive_clients.py`, which runs one client against the gateway and
//!   prints what it got as one JSON document; all assertions are made here.
//! * *venv* — a virtual environment made with `python -m venv` and filled with
//!   `pip install`, cached under `$CARGO_TARGET_TMPDIR` so later runs are fast.
//!
//! The suite is opt-in, because it downloads from PyPI: `HERMES_TEST_PYPI=1` runs it, and so
//! does strict mode (`.ci/run`), where a venv that cannot be made is a failure, not a skip.
//!
//! Coverage of `hermes-agent-api-client` 0.3: it offers `probe_capabilities()`
//! (`GET /v1/capabilities`) and `stream_chat_events()` (streamed
//! `POST /v1/chat/completions` with `X-Hermes-Session-Id`); both are covered, with
//! sessions and a wrong key. The package needs Python >= 3.13: without one, that test skips
//! and says so.
//!
//! Usage in streams (`stream_options.include_usage`): the fake upstream reports usage the way
//! providers do (OpenAI's `choices: []` chunk when asked, on the finish chunk unasked); both
//! clients must parse the usage of a stream that asked for it (values checked), and a stream
//! that did not ask must carry none.

// `skipping: <reason>` and cleanup notices go to the test's stderr on purpose.
#![allow(clippy::print_stderr)]

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::TestContext;

/// The client key the gateway requires (`API_SERVER_KEY`).
const KEY: &str = "clients-e2e-key-0123456789";
/// The provider key the gateway must send upstream (`model.api_key`).
const UPSTREAM_KEY: &str = "upstream-secret";
/// The model configured in `config.yaml`; clients send other names, which must be replaced.
const MODEL: &str = "fake-model-1";
const SOUL: &str = "You are the clients end-to-end soul.";
/// A client-side system prompt: it must arrive after the system prompt that starts with
/// SOUL.md, before the user's message.
const CLIENT_SYSTEM: &str = "Answer briefly.";

/// What gets installed. Bump `VENV_REVISION` when this changes, so the cache is rebuilt.
const OPENAI_REQ: &str = "openai>=1.40";
const AGENT_CLIENT_REQ: &str = "hermes-agent-api-client>=0.3.3,<0.4";
const VENV_REVISION: &str = "v1";

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/clients")
}

// ---------------------------------------------------------------------------------------
// Child processes: always stopped, on every path.

/// A child process that is killed when dropped, so a failing assertion never leaves a
/// gateway or an upstream behind; [`Proc::terminate`] is the clean stop (SIGTERM first).
struct Proc {
    child: Child,
    name: &'static str,
}

impl Proc {
    fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits i32"))
    }

    /// SIGTERM, then waits up to 30 s; SIGKILL after that. Returns the exit status.
    fn terminate(&mut self) -> Option<ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        let _ = nix::sys::signal::kill(self.pid(), nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            eprintln!("killed {} (pid {}) on cleanup", self.name, self.child.id());
        }
    }
}

/// Runs `cmd` to completion within `limit` (killed after it), with stdout and stderr
/// captured to files in `dir` (no pipe can fill and stall the child).
fn run_limited(mut cmd: Command, limit: Duration, dir: &Path, tag: &str) -> Result<Ran, String> {
    let out_path = dir.join(format!("{tag}.stdout"));
    let err_path = dir.join(format!("{tag}.stderr"));
    let out = fs::File::create(&out_path).map_err(|e| e.to_string())?;
    let err = fs::File::create(&err_path).map_err(|e| e.to_string())?;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let mut proc = Proc { child, name: "run" };
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Ok(Some(status)) = proc.child.try_wait() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = proc.child.kill();
            let _ = proc.child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let ran = Ran {
        status,
        stdout: fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: fs::read_to_string(&err_path).unwrap_or_default(),
    };
    let _ = fs::remove_file(&out_path);
    let _ = fs::remove_file(&err_path);
    Ok(ran)
}

struct Ran {
    /// `None`: killed at the time limit.
    status: Option<ExitStatus>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    fn tail(&self) -> String {
        let lines: Vec<&str> = self.stderr.lines().collect();
        let from = lines.len().saturating_sub(15);
        let status = self
            .status
            .map_or_else(|| "killed at the time limit".into(), |s| s.to_string());
        format!("{status}\n{}", lines[from..].join("\n").trim_end())
    }
}

// ---------------------------------------------------------------------------------------
// Python and the cached venv.

/// `(major, minor)` of a Python interpreter, if it runs.
fn python_version(exe: &Path) -> Option<(u32, u32)> {
    let out = Command::new(exe)
        .args([
            "-c",
            "import sys; print(sys.version_info[0], sys.version_info[1])",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace().map(str::parse::<u32>);
    Some((parts.next()?.ok()?, parts.next()?.ok()?))
}

/// Interpreters to consider: `HERMES_TEST_PYTHON`, versioned names on `PATH`, pyenv's
/// installed versions (a pyenv shim for a version that is not active does not run), and
/// plain `python3`.
fn python_candidates() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("HERMES_TEST_PYTHON") {
        found.push(PathBuf::from(p));
    }
    for name in ["python3.14", "python3.13"] {
        found.push(PathBuf::from(name));
    }
    let pyenv_root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pyenv")));
    if let Some(root) = pyenv_root
        && let Ok(entries) = fs::read_dir(root.join("versions"))
    {
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path().join("bin/python3"))
            .filter(|p| p.exists())
            .collect();
        dirs.sort();
        found.extend(dirs);
    }
    found.push(PathBuf::from("python3"));
    found
}

/// The newest interpreter at least `min`, if any.
fn find_python(min: (u32, u32)) -> Option<(PathBuf, (u32, u32))> {
    python_candidates()
        .into_iter()
        .filter_map(|exe| python_version(&exe).map(|v| (exe, v)))
        .filter(|(_, v)| *v >= min)
        .max_by_key(|(_, v)| *v)
}

/// A ready venv: its interpreter and whether `hermes-agent-api-client` is in it.
#[derive(Clone)]
pub(crate) struct Venv {
    pub(crate) python: PathBuf,
    has_agent_client: bool,
}

/// The venv shared by both tests (made once per test process).
fn venv() -> &'static Result<Venv, String> {
    static VENV: OnceLock<Result<Venv, String>> = OnceLock::new();
    VENV.get_or_init(make_venv)
}

fn make_venv() -> Result<Venv, String> {
    // `hermes-agent-api-client` needs 3.13; the openai SDK alone is fine on 3.9.
    let (base, version, has_agent_client) = match find_python((3, 13)) {
        Some((exe, v)) => (exe, v, true),
        None => match find_python((3, 9)) {
            Some((exe, v)) => (exe, v, false),
            None => return Err("no Python >= 3.9 found (set `HERMES_TEST_PYTHON`)".into()),
        },
    };
    let mut reqs = vec![OPENAI_REQ];
    if has_agent_client {
        reqs.push(AGENT_CLIENT_REQ);
    }
    let stamp = format!(
        "{VENV_REVISION} python{}.{} {}",
        version.0,
        version.1,
        reqs.join(" ")
    );

    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gateway-clients");
    fs::create_dir_all(&cache).map_err(|e| format!("cannot create `{}`: {e}", cache.display()))?;
    let dir = cache.join(format!("venv-py{}.{}", version.0, version.1));
    let python = dir.join("bin/python");
    let imports = if has_agent_client {
        "import openai, hermes_agent_api_client"
    } else {
        "import openai"
    };
    // The stamp says what was installed; the import proves the venv still works (its
    // interpreter is a link to the base one, which an upgrade may have removed).
    let usable = || {
        Command::new(&python)
            .args(["-c", imports])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if fs::read_to_string(dir.join("ready")).ok().as_deref() == Some(stamp.as_str()) && usable() {
        return Ok(Venv {
            python,
            has_agent_client,
        });
    }

    // Build next to the cache entry and rename into place, so an interrupted install is
    // never mistaken for a ready one and concurrent test processes cannot mix their files.
    let tmp = cache.join(format!("venv-build-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    let mut make = Command::new(&base);
    make.args(["-m", "venv"]).arg(&tmp);
    let ran = run_limited(
        make,
        Duration::from_secs(300),
        &cache,
        &format!("venv-{}", std::process::id()),
    )?;
    if !ran.success() {
        let _ = fs::remove_dir_all(&tmp);
        return Err(format!(
            "`{} -m venv` failed: {}",
            base.display(),
            ran.tail()
        ));
    }
    let mut pip = Command::new(tmp.join("bin/python"));
    pip.args(["-m", "pip", "install", "--disable-pip-version-check", "-q"])
        .args(&reqs);
    let ran = run_limited(
        pip,
        Duration::from_secs(900),
        &cache,
        &format!("pip-{}", std::process::id()),
    )?;
    if !ran.success() {
        let _ = fs::remove_dir_all(&tmp);
        return Err(format!(
            "`pip install {}` failed: {}",
            reqs.join(" "),
            ran.tail()
        ));
    }
    fs::write(tmp.join("ready"), &stamp).map_err(|e| e.to_string())?;
    let _ = fs::remove_dir_all(&dir);
    if let Err(e) = fs::rename(&tmp, &dir) {
        let _ = fs::remove_dir_all(&tmp);
        // Another test process may have won the race with an equally good venv.
        if fs::read_to_string(dir.join("ready")).ok().as_deref() != Some(stamp.as_str()) {
            return Err(format!(
                "cannot move the venv into `{}`: {e}",
                dir.display()
            ));
        }
    }
    Ok(Venv {
        python,
        has_agent_client,
    })
}

// ---------------------------------------------------------------------------------------
// The fake upstream and the gateway.

struct Upstream {
    proc: Proc,
    port: u16,
    record: PathBuf,
}

impl Upstream {
    fn start(python: &Path, dir: &Path) -> Upstream {
        let record = dir.join("upstream-requests.jsonl");
        let stderr = fs::File::create(dir.join("upstream.stderr")).unwrap();
        let child = Command::new(python)
            .arg(clients_dir().join("fake_upstream.py"))
            .arg(&record)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start the fake upstream");
        let mut proc = Proc {
            child,
            name: "fake upstream",
        };
        let stdout = proc.child.stdout.take().expect("upstream stdout");
        // Read the `PORT n` line on a thread so a hung interpreter cannot hang the test.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse::<u16>().ok());
        let Some(port) = port else {
            proc.terminate();
            panic!(
                "the fake upstream did not report its port (got {line:?}):\n{}",
                fs::read_to_string(dir.join("upstream.stderr")).unwrap_or_default()
            );
        };
        Upstream { proc, port, record }
    }

    /// Every request the upstream received, in order.
    fn requests(&self) -> Vec<Value> {
        fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("upstream record line is JSON"))
            .collect()
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().unwrap().port()
}

/// A `GET` on 127.0.0.1 with a short timeout: `(status, body)`.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let status = raw.split_whitespace().nth(1)?.parse().ok()?;
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

struct Gateway {
    proc: Proc,
    port: u16,
    log: PathBuf,
}

impl Gateway {
    /// Creates profile `work` (SOUL.md, `.env`, `config.yaml` pointing at `upstream`) and
    /// runs `hermes -p work gateway run --no-supervise` until `/health` answers. A port
    /// taken between `free_port` and the gateway's bind (other tests run in parallel) is
    /// retried with a new port, up to three times.
    fn start(t: &TestContext, upstream: &Upstream) -> Gateway {
        t.ok(&["profile", "create", "work", "--no-alias"]);
        let profile = t.root().join("profiles/work");
        fs::write(profile.join("SOUL.md"), format!("{SOUL}\n")).unwrap();
        fs::write(
            profile.join("config.yaml"),
            format!(
                "model:\n  default: {MODEL}\n  base_url: http://127.0.0.1:{}/v1\n  api_key: {UPSTREAM_KEY}\n",
                upstream.port
            ),
        )
        .unwrap();

        let mut last = String::new();
        for attempt in 1..=3 {
            let port = free_port();
            fs::write(
                profile.join(".env"),
                format!("API_SERVER_PORT={port}\nAPI_SERVER_KEY={KEY}\n"),
            )
            .unwrap();
            let log = t.dir.path().join(format!("gateway-{attempt}.log"));
            let out = fs::File::create(&log).unwrap();
            let err = out.try_clone().unwrap();
            let child = t
                .cmd(&["-p", "work", "gateway", "run", "--no-supervise"])
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .expect("start `hermes gateway run`");
            let mut gw = Gateway {
                proc: Proc {
                    child,
                    name: "gateway",
                },
                port,
                log,
            };
            match gw.wait_healthy() {
                Ok(()) => return gw,
                Err(log) if log.contains("already in use") => last = log,
                Err(log) => panic!("the gateway exited early:\n{log}"),
            }
        }
        panic!("no free port for the gateway after three attempts:\n{last}");
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls for up to 90 s (a loaded CI machine may be slow to start a debug binary) until
    /// `/health` answers *and* the gateway's own output names `127.0.0.1:<port>`, so an
    /// unrelated server that took the port cannot pass for ours. `Err(log)` if it exits.
    fn wait_healthy(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(90);
        let addr = format!("127.0.0.1:{}", self.port);
        loop {
            if let Ok(Some(status)) = self.proc.child.try_wait() {
                return Err(format!("({status})\n{}", self.log()));
            }
            if self.log().contains(&addr)
                && let Some((200, body)) = http_get(self.port, "/health")
            {
                let health: Value = serde_json::from_str(&body).expect("/health is JSON");
                assert_eq!(health["status"], "ok", "{health}");
                assert_eq!(health["profile"], "work", "{health}");
                assert_eq!(health["model_configured"], true, "{health}");
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "the gateway did not report listening on {addr} and answer /health within 90 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// SIGTERM must stop the gateway cleanly: exit 0.
    fn stop_cleanly(mut self) {
        let status = self.proc.terminate();
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "the gateway should exit 0 on SIGTERM:\n{}",
            self.log()
        );
    }
}

/// Runs the driver in `mode` against the gateway and returns its JSON report.
fn drive(venv: &Venv, mode: &str, gw: &Gateway, dir: &Path) -> Value {
    let mut cmd = Command::new(&venv.python);
    cmd.arg(clients_dir().join("drive_clients.py"))
        .args([mode, &gw.base_url(), KEY])
        // Loopback only: a proxy from the environment must not be asked to reach it.
        .env_remove("HTTP_PROXY")
        .env_remove("HTTPS_PROXY")
        .env_remove("ALL_PROXY")
        .env_remove("http_proxy")
        .env_remove("https_proxy")
        .env_remove("all_proxy")
        .env("NO_PROXY", "127.0.0.1,localhost")
        // Only the venv's own packages: nothing from the caller's Python set-up.
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONHOME")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let ran = run_limited(cmd, Duration::from_secs(300), dir, mode).expect("run the driver");
    assert!(
        ran.success(),
        "driver `{mode}` failed: {}\n{}\n--- gateway log ---\n{}",
        ran.tail(),
        ran.stdout,
        gw.log()
    );
    serde_json::from_str(ran.stdout.trim())
        .unwrap_or_else(|e| panic!("driver `{mode}` printed no JSON ({e}):\n{}", ran.stdout))
}

/// The venv, or `None` after saying why the test skips. Opt-in (it downloads from PyPI):
/// `HERMES_TEST_PYPI=1`, or strict mode (CI).
pub(crate) fn venv_or_skip() -> Option<Venv> {
    if !hermes_test_support::opt_in(
        "HERMES_TEST_PYPI",
        "the Python client suite installs its clients from PyPI",
    ) {
        return None;
    }
    match venv() {
        Ok(v) => Some(v.clone()),
        Err(reason) => {
            hermes_test_support::skip(reason);
            None
        }
    }
}

// ---------------------------------------------------------------------------------------
// Checks on what reached the upstream.

/// The upstream chat request whose last user message is `text`.
fn upstream_request_for<'a>(requests: &'a [Value], text: &str) -> &'a Value {
    requests
        .iter()
        .find(|r| {
            r["body"]["messages"]
                .as_array()
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .is_some_and(|m| m["content"] == text)
        })
        .unwrap_or_else(|| panic!("no upstream request ended with {text:?}: {requests:#?}"))
}

/// Every chat request upstream: our path, the provider key, the configured model, and
/// the system prompt (which starts with SOUL.md) as the very first message.
fn assert_every_request_is_well_formed(requests: &[Value]) {
    assert!(!requests.is_empty(), "the upstream received nothing");
    for r in requests {
        assert_eq!(r["path"], "/v1/chat/completions", "{r}");
        assert_eq!(r["authorization"], format!("Bearer {UPSTREAM_KEY}"), "{r}");
        assert_eq!(
            r["body"]["model"], MODEL,
            "the gateway must send its own model: {r}"
        );
        let first = &r["body"]["messages"][0];
        assert_eq!(
            first["role"], "system",
            "the system prompt must come first: {r}"
        );
        assert!(
            first["content"]
                .as_str()
                .is_some_and(|c| c.starts_with(SOUL)),
            "the system prompt must start with SOUL.md: {r}"
        );
    }
}

/// Messages of an upstream request without the leading system prompt, as `(role, content)`.
fn roles_and_contents(request: &Value) -> Vec<(String, String)> {
    request["body"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .skip(1)
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The usage the fake upstream reports for `request` answered with `answer`
/// (`fake_upstream.py` `usage_of`: one prompt token per message, one completion token per
/// word).
fn expected_usage(request: &Value, answer: &str) -> Value {
    let prompt = request["body"]["messages"].as_array().map_or(0, Vec::len);
    let completion = answer.split(' ').count();
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// The tests.

/// The official `openai` SDK: models, a plain and a streamed chat, a two-turn session and a
/// wrong key, through the real `hermes` binary.
#[test]
fn openai_sdk_talks_to_the_gateway() {
    let Some(venv) = venv_or_skip() else { return };
    let t = TestContext::new();
    let upstream = Upstream::start(&venv.python, t.dir.path());
    let gw = Gateway::start(&t, &upstream);

    let report = drive(&venv, "openai", &gw, t.dir.path());

    assert_eq!(report["models"], json!([MODEL]), "{report:#}");

    let plain = &report["plain"];
    assert_eq!(plain["text"], "echo: ping plain", "{report:#}");
    assert_eq!(plain["role"], "assistant", "{report:#}");
    assert_eq!(plain["finish_reason"], "stop", "{report:#}");
    assert_eq!(plain["model"], MODEL, "{report:#}");

    let stream = &report["stream"];
    assert_eq!(stream["text"], "echo: ping streamed words", "{report:#}");
    assert!(
        stream["deltas"].as_array().is_some_and(|d| d.len() >= 4),
        "the answer must arrive in several deltas: {report:#}"
    );
    assert_eq!(stream["finish_reason"], "stop", "{report:#}");
    // Not asked: no usage, although the upstream put it on the finish chunk.
    assert_eq!(stream["usages"], json!([]), "{report:#}");

    // Asked: the SDK parses exactly one usage, the upstream's counts.
    let with_usage = &report["stream_usage"];
    assert_eq!(with_usage["text"], "echo: ping usage words", "{report:#}");
    assert_eq!(with_usage["finish_reason"], "stop", "{report:#}");

    let turns = &report["session"]["turns"];
    assert_eq!(turns[0]["text"], "echo: remember apples", "{report:#}");
    assert_eq!(turns[1]["text"], "echo: what did I ask", "{report:#}");
    for turn in turns.as_array().unwrap() {
        assert_eq!(turn["session_header"], "openai-sdk.e2e", "{report:#}");
    }

    assert_eq!(
        report["wrong_key"],
        json!({"error": "AuthenticationError", "status": 401, "code": "invalid_api_key"}),
        "{report:#}"
    );

    let requests = upstream.requests();
    assert_every_request_is_well_formed(&requests);
    let usage_up = upstream_request_for(&requests, "ping usage words");
    assert_eq!(
        usage_up["body"]["stream_options"],
        json!({"include_usage": true}),
        "the client's wish goes upstream: {usage_up:#}"
    );
    assert_eq!(
        with_usage["usages"],
        json!([expected_usage(usage_up, "echo: ping usage words")]),
        "{report:#}"
    );
    assert!(
        upstream_request_for(&requests, "ping streamed words")["body"]
            .get("stream_options")
            .is_none(),
        "nothing is added upstream"
    );
    // The plain request carried a client system prompt: after the system prompt (appended to
    // its message after a blank line, as the original does, or as the next message), then the
    // user's message.
    let plain_up = upstream_request_for(&requests, "ping plain");
    assert_eq!(
        plain["usage"],
        expected_usage(plain_up, "echo: ping plain"),
        "a plain answer keeps its usage: {report:#}"
    );
    let system = plain_up["body"]["messages"][0]["content"]
        .as_str()
        .unwrap_or_default();
    let expected_rest = if system.ends_with(&format!("\n\n{CLIENT_SYSTEM}")) {
        pairs(&[("user", "ping plain")])
    } else {
        pairs(&[("system", CLIENT_SYSTEM), ("user", "ping plain")])
    };
    assert_eq!(roles_and_contents(plain_up), expected_rest, "{plain_up:#}");
    assert_eq!(
        upstream_request_for(&requests, "ping streamed words")["body"]["stream"],
        true
    );
    // The second session turn sent only its new message; the gateway added the first.
    let second = upstream_request_for(&requests, "what did I ask");
    assert_eq!(
        roles_and_contents(second),
        pairs(&[
            ("user", "remember apples"),
            ("assistant", "echo: remember apples"),
            ("user", "what did I ask"),
        ]),
        "{second:#}"
    );
    assert!(
        !requests
            .iter()
            .any(|r| r["body"].to_string().contains("must not pass")),
        "a request with a wrong key reached the upstream"
    );

    drop(upstream.proc);
    gw.stop_cleanly();
}

/// `hermes-agent-api-client`: capability probe, two streamed turns in one session, and a
/// wrong key, through the real `hermes` binary.
#[test]
fn hermes_agent_api_client_talks_to_the_gateway() {
    let Some(venv) = venv_or_skip() else { return };
    if !venv.has_agent_client {
        hermes_test_support::skip(
            "hermes-agent-api-client needs Python >= 3.13 and none was found",
        );
        return;
    }
    let t = TestContext::new();
    let upstream = Upstream::start(&venv.python, t.dir.path());
    let gw = Gateway::start(&t, &upstream);

    let report = drive(&venv, "agent-client", &gw, t.dir.path());

    // The probe parses our `GET /v1/capabilities` and reports the configured model.
    assert_eq!(report["capabilities"]["error"], Value::Null, "{report:#}");
    assert_eq!(report["capabilities"]["model"], json!(MODEL), "{report:#}");

    let turns = report["turns"].as_array().expect("turns");
    assert_eq!(turns[0]["text"], "echo: ping agent stream", "{report:#}");
    assert_eq!(turns[1]["text"], "echo: and again", "{report:#}");
    for turn in turns {
        let events = turn["events"].as_array().expect("events");
        assert!(
            events.iter().filter(|e| e["type"] == "delta").count() >= 3,
            "the answer must arrive in several deltas: {turn:#}"
        );
        assert_eq!(
            events.last(),
            Some(&json!({"type": "terminal", "outcome": "success", "partial": false})),
            "a stream must end with exactly one success terminal: {turn:#}"
        );
        assert!(
            !events.iter().any(|e| e["type"] == "usage"),
            "no usage unasked (the upstream sent it on the finish chunk): {turn:#}"
        );
    }

    // Asked for usage: the client's parser accepts the stream and reports it, before the
    // success terminal.
    let usage_turn = &report["usage_turn"];
    assert_eq!(usage_turn["text"], "echo: ping agent usage", "{report:#}");
    let events = usage_turn["events"].as_array().expect("events");
    let usages: Vec<&Value> = events.iter().filter(|e| e["type"] == "usage").collect();
    assert_eq!(usages.len(), 1, "{usage_turn:#}");
    assert_eq!(
        events.last(),
        Some(&json!({"type": "terminal", "outcome": "success", "partial": false})),
        "{usage_turn:#}"
    );

    assert_eq!(
        report["wrong_key"],
        json!({"error": "HermesAuthenticationError", "status_code": 401}),
        "{report:#}"
    );

    let requests = upstream.requests();
    assert_every_request_is_well_formed(&requests);
    assert_eq!(
        requests.len(),
        3,
        "three streamed turns, nothing else: {requests:#?}"
    );
    let usage_up = upstream_request_for(&requests, "ping agent usage");
    let expected = expected_usage(usage_up, "echo: ping agent usage");
    assert_eq!(
        *usages[0],
        json!({
            "type": "usage",
            "input_tokens": expected["prompt_tokens"],
            "output_tokens": expected["completion_tokens"],
            "total_tokens": expected["total_tokens"],
        }),
        "{usage_turn:#}"
    );
    assert_eq!(requests[0]["body"]["stream"], true);
    // The client sent only the new message; the session supplied the first turn.
    assert_eq!(
        roles_and_contents(&requests[1]),
        pairs(&[
            ("user", "ping agent stream"),
            ("assistant", "echo: ping agent stream"),
            ("user", "and again"),
        ]),
        "{:#}",
        requests[1]
    );

    drop(upstream.proc);
    gw.stop_cleanly();
}
