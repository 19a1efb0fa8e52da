//! The real agents serve the socket the supervisor holds: hermes-agent 0.19.0 (PyPI) and 0.20.1
//! (the fixture source tree), each started as the agent engine starts it
//! ([`hermes_services::agent::gateway_command`], supervised) with its API server on, a listener
//! of this test passed as fd 3 (`LISTEN_FDS=1`, `LISTEN_FDNAMES=api`, `LISTEN_PID` its own pid).
//!
//! Checked for each: `/health` answers on that socket, the agent listens on nothing else on its
//! port, the socket is close-on-exec in the agent and held by no other process; on SIGTERM a
//! request in flight (held up by a slow provider) is answered in full while a connection made
//! after the signal is left waiting, and the next instance answers it; a connection made while
//! the agent is killed (SIGKILL) is not refused and the instance after answers it. Without the
//! variables, the installed hook changes nothing: the agent binds its port itself.
//!
//! The hook is installed into the cached venvs of `hermes_test_support` (it does nothing
//! without `LISTEN_FDS`, so the other suites using them are not affected). 0.19.0 from PyPI
//! lacks aiohttp (the image installs its `messaging` extra): the version the full image pins
//! (`docker/agent-requirements.txt`) is added once with the agent's own pip into a directory
//! under the test target dir, given as `PYTHONPATH`.

use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use hermes_services::agent::{Agent, gateway_command};
use hermes_services::agent_hook;
use hermes_test_support::{OriginalAgent, poll};
use nix::sys::signal::Signal;

use crate::support::{
    KEY, O_CLOEXEC, Proc, descends_from, fds_of, holders, http, listener, listening_inodes,
    read_all, send, service, socket_inode,
};

/// How long an agent may take to serve (a cold start on a loaded 2-core runner).
const START: Duration = Duration::from_secs(120);

/// How long the slow provider holds each request.
const PROVIDER_DELAY: &str = "3";

/// An agent with the hook installed, and what its interpreter needs on `PYTHONPATH`.
struct Engine {
    agent: Agent,
    pythonpath: Option<PathBuf>,
}

impl Engine {
    fn of(original: OriginalAgent) -> Engine {
        let agent = Agent::at(&original.hermes).unwrap();
        let site = agent_hook::site_packages(&agent).expect("the agent's site-packages");
        agent_hook::install(&site).unwrap();
        assert!(agent_hook::is_installed(&agent));
        let pythonpath = aiohttp_for(&agent.python);
        Engine { agent, pythonpath }
    }
}

/// `None` when `python` imports aiohttp; else a directory holding the version the full image
/// pins, made once per target dir.
fn aiohttp_for(python: &Path) -> Option<PathBuf> {
    static MADE: OnceLock<PathBuf> = OnceLock::new();
    let imports = |path: Option<&Path>| {
        let mut command = Command::new(python);
        if let Some(path) = path {
            command.env("PYTHONPATH", path);
        }
        command
            .args(["-c", "import aiohttp"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if imports(None) {
        return None;
    }
    Some(
        MADE.get_or_init(|| {
            let lock = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docker/agent-requirements.txt"),
            )
            .unwrap();
            let version = lock
                .lines()
                .find_map(|l| l.strip_prefix("aiohttp=="))
                .and_then(|rest| rest.split_whitespace().next())
                .expect("docker/agent-requirements.txt pins aiohttp")
                .to_owned();
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("agent-hook-aiohttp-{version}"));
            if !imports(Some(&dir)) {
                let partial = dir.with_extension("partial");
                let _ = std::fs::remove_dir_all(&partial);
                let out = Command::new(python)
                    .args(["-m", "pip", "install", "--disable-pip-version-check"])
                    .args(["--no-input", "-q", "--target"])
                    .arg(&partial)
                    .arg(format!("aiohttp=={version}"))
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "pip install aiohttp=={version}:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::rename(&partial, &dir).unwrap();
                assert!(imports(Some(&dir)), "aiohttp in {} imports", dir.display());
            }
            dir
        })
        .clone(),
    )
}

/// A volume whose default profile the agent serves: its API server on 127.0.0.1:`port` with the
/// test key, the model a custom provider at `provider`, nothing fetched from the network.
struct Volume {
    dir: tempfile::TempDir,
    port: u16,
}

impl Volume {
    fn new(port: u16, provider: u16) -> Volume {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".env"),
            format!(
                "API_SERVER_ENABLED=true\nAPI_SERVER_HOST=127.0.0.1\nAPI_SERVER_PORT={port}\n\
                 API_SERVER_KEY={KEY}\n"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            format!(
                "model:\n  default: m\n  provider: custom\n  base_url: http://127.0.0.1:{provider}/v1\n  \
                 api_key: provider-key\n  context_length: 131072\n\
                 security:\n  tirith_enabled: false\n"
            ),
        )
        .unwrap();
        Volume { dir, port }
    }

    /// The agent's gateway for the default profile, as the agent engine runs it under the
    /// supervisor, with `listener` passed as the supervisor passes it (or none).
    fn start(&self, engine: &Engine, listener: Option<&TcpListener>, name: &str) -> Proc {
        let (argv, mut env) = gateway_command(&engine.agent, self.dir.path(), "default", true);
        env.push((
            "HOME".into(),
            self.dir.path().to_string_lossy().into_owned(),
        ));
        env.push(("HERMES_GATEWAY_DRAIN_TIMEOUT".into(), "30".into()));
        if let Some(path) = &engine.pythonpath {
            env.push(("PYTHONPATH".into(), path.to_string_lossy().into_owned()));
        }
        let command = service(&argv, &env, listener.map(|l| (l, "api")));
        Proc::spawn(command, self.dir.path().join(format!("{name}.log")))
    }

    /// Waits until `agent` answers `/health` on the port; the answer.
    fn wait_serving(&self, agent: &mut Proc, what: &str) -> String {
        poll::until(what, START, || {
            agent.assert_running(what);
            http(self.port, "GET", "/health", "").filter(|r| r.contains(" 200 "))
        })
    }
}

/// The slow OpenAI-compatible provider (`slow_upstream.py`), killed on drop.
struct Provider {
    _proc: Proc,
    port: u16,
    record: PathBuf,
}

impl Provider {
    fn start(python: &Path, dir: &Path) -> Provider {
        let record = dir.join("provider-requests");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services/slow_upstream.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(PROVIDER_DELAY)
            .arg(&record)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the slow provider said {line:?}"));
        let log = dir.join("provider.log");
        Provider {
            _proc: Proc { child, log },
            port,
            record,
        }
    }

    fn requests(&self) -> usize {
        std::fs::read_to_string(&self.record)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }
}

fn serves_the_supervisors_socket(engine: &Engine) {
    let work = tempfile::tempdir().unwrap();
    let provider = Provider::start(&engine.agent.python, work.path());
    let listener = listener();
    let port = listener.local_addr().unwrap().port();
    let inode = socket_inode(&listener);
    let volume = Volume::new(port, provider.port);

    // --- it serves the socket it was given, and nothing else on its port -----------------------
    let mut first = volume.start(engine, Some(&listener), "first");
    let health = volume.wait_serving(&mut first, "the agent answers /health on the passed socket");
    assert!(health.contains("hermes-agent"), "{health}");
    let output = first.output();
    assert!(
        output.contains(&format!(
            "hermes: serving the supervisor's socket 127.0.0.1:{port}\n"
        )),
        "{output}"
    );
    assert_eq!(
        listening_inodes(port),
        [inode],
        "only the passed socket listens on {port}"
    );
    let fds = fds_of(first.pid(), inode);
    assert!(!fds.is_empty(), "the agent holds the socket");
    for (fd, flags) in &fds {
        assert_ne!(
            flags & O_CLOEXEC,
            0,
            "fd {fd} of the agent is close-on-exec: {fds:?}"
        );
    }
    // The agents start no child by now, so what keeps the socket from their tools is its
    // close-on-exec flag above (the hook's tests start a child that would inherit it). Still:
    // no holder descends from the agent. (Others may be this test's own children caught
    // between fork and exec: other tests spawn processes too.)
    let held_by = holders(inode);
    assert!(held_by.contains(&first.pid()), "{held_by:?}");
    let inherited: Vec<i32> = held_by
        .iter()
        .copied()
        .filter(|pid| descends_from(*pid, first.pid()))
        .collect();
    assert!(
        inherited.is_empty(),
        "the agent's children hold the socket: {inherited:?}"
    );

    // --- SIGTERM: a request in flight is answered; a new connection waits for the next --------
    let chat = std::thread::spawn(move || {
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hello drain"}]}"#;
        http(port, "POST", "/v1/chat/completions", body)
    });
    poll::until_true("the chat request at the provider", START, || {
        provider.requests() > 0
    });
    first.signal(Signal::SIGTERM);
    // Once the hook has taken the signal, the agent accepts nothing more.
    poll::until_true("the hook to take SIGTERM", Duration::from_secs(30), || {
        first
            .output()
            .contains("hermes: SIGTERM: draining 1 API request(s) in flight")
    });
    let mut late = TcpStream::connect(("127.0.0.1", port)).expect("not refused after SIGTERM");
    send(&mut late, "GET", "/health", "");
    first.wait_exit(
        "the first agent to stop after SIGTERM",
        Duration::from_secs(90),
    );
    let answer = chat.join().unwrap().expect("the chat request is answered");
    assert!(answer.contains(" 200 "), "{answer}");
    assert!(
        answer.contains("echo: hello drain"),
        "answered in full, not interrupted: {answer}"
    );
    let output = first.output();
    assert!(
        output.contains("hermes: SIGTERM: draining 1 API request(s) in flight"),
        "{output}"
    );
    assert!(
        output.contains("hermes: drained the API requests in flight in "),
        "{output}"
    );
    // The first instance neither answered nor closed the late connection.
    late.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let unanswered = late.read(&mut byte);
    assert!(
        matches!(&unanswered, Err(e) if e.kind() == ErrorKind::WouldBlock),
        "the late connection waits in the backlog: {unanswered:?}"
    );
    late.set_nonblocking(false).unwrap();

    let mut second = volume.start(engine, Some(&listener), "second");
    let answer = read_all(&mut late, START);
    assert!(
        answer.contains(" 200 ") && answer.contains("hermes-agent"),
        "the next instance answers the connection that waited: {answer}\n{}",
        second.output()
    );

    // --- SIGKILL: a connection made before the next instance starts is answered by it --------
    second.signal(Signal::SIGKILL);
    second.wait_exit("the second agent killed", Duration::from_secs(30));
    let mut gap = TcpStream::connect(("127.0.0.1", port)).expect("not refused between instances");
    send(&mut gap, "GET", "/health", "");
    let third = volume.start(engine, Some(&listener), "third");
    let answer = read_all(&mut gap, START);
    assert!(
        answer.contains(" 200 ") && answer.contains("hermes-agent"),
        "{answer}\n{}",
        third.output()
    );
}

fn binds_as_before_without_a_socket(engine: &Engine) {
    let port = {
        let probe = listener();
        probe.local_addr().unwrap().port()
    };
    let volume = Volume::new(port, 9);
    let mut agent = volume.start(engine, None, "plain");
    let health = volume.wait_serving(&mut agent, "the agent answers /health on its own port");
    assert!(health.contains("hermes-agent"), "{health}");
    let inodes = listening_inodes(port);
    assert_eq!(inodes.len(), 1, "{inodes:?}");
    assert!(
        !fds_of(agent.pid(), inodes[0]).is_empty(),
        "the agent bound the port itself"
    );
    let output = agent.output();
    assert!(
        !output.contains("hermes:"),
        "the hook said nothing: {output}"
    );
}

fn original() -> Option<Engine> {
    hermes_test_support::original_agent().map(Engine::of)
}

fn fixture() -> Option<Engine> {
    hermes_test_support::fixture_agent().map(Engine::of)
}

#[test]
fn the_original_agent_serves_the_supervisors_socket() {
    if let Some(engine) = original() {
        serves_the_supervisors_socket(&engine);
    }
}

#[test]
fn the_fixture_agent_serves_the_supervisors_socket() {
    if let Some(engine) = fixture() {
        serves_the_supervisors_socket(&engine);
    }
}

#[test]
fn the_original_agent_binds_as_before_without_a_socket() {
    if let Some(engine) = original() {
        binds_as_before_without_a_socket(&engine);
    }
}

#[test]
fn the_fixture_agent_binds_as_before_without_a_socket() {
    if let Some(engine) = fixture() {
        binds_as_before_without_a_socket(&engine);
    }
}
