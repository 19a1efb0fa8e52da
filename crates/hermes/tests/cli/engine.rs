//! The gateway engine of a profile: an engine setting that cannot be honoured is a
//! configuration error (exit 78), and the original agent's own gateway (`gateway.engine:
//! agent`) runs under `hermes up` like the native one — it answers through its API server
//! platform, is restarted after a crash or its own restart request, and an operator stop sticks.
//!
//! The agent tests need the original `hermes-agent` (`HERMES_TEST_PYPI=1`). Its API server
//! platform needs `aiohttp`, which the base package does not install: it is added once with
//! the agent's own pip into a directory under the test target dir, given as `PYTHONPATH`.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::util::{Running, TEST_API_KEY, TestContext, free_port, render};
use hermes_test_support::poll;

#[test]
fn an_engine_that_cannot_run_here_is_a_configuration_error() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let config = t.root().join("profiles/work/config.yaml");

    fs::write(&config, "gateway:\n  engine: agent\n").unwrap();
    let out = t
        .cmd(&["-p", "work", "gateway", "run", "--no-supervise"])
        .env("HERMES_AGENT_CLI", "")
        .output()
        .unwrap();
    let text = render(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains("error: `gateway.engine` asks for the agent engine, but hermes-agent is not installed here"),
        "{text}"
    );
    assert!(text.contains("hint: "), "{text}");
    let recorded: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(t.root().join("profiles/work/gateway_state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(recorded["gateway_state"], "startup_failed", "{recorded}");

    fs::write(&config, "model:\n  default: m\n").unwrap();
    let out = t
        .cmd(&["-p", "work", "gateway", "run", "--no-supervise"])
        .env("HERMES_GATEWAY_ENGINE", "python")
        .output()
        .unwrap();
    let text = render(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains("`HERMES_GATEWAY_ENGINE` is `python`"),
        "{text}"
    );

    // `gateway status` names each profile's engine, an unusable one as such.
    let rows = status_rows(
        &t,
        &[("HERMES_AGENT_CLI", ""), ("HERMES_GATEWAY_ENGINE", "")],
    );
    assert_eq!(engines(&rows), [("default", "native"), ("work", "native")]);
    fs::write(&config, "gateway:\n  engine: agent\n").unwrap();
    let rows = status_rows(&t, &[("HERMES_AGENT_CLI", "")]);
    assert_eq!(engines(&rows), [("default", "native"), ("work", "invalid")]);
}

#[test]
fn the_agents_gateway_runs_under_hermes_up_like_the_native_one() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let overlay = aiohttp_overlay(&agent.python);
    let t = TestContext::new();
    let upstream = Upstream::start(&agent.python, t.dir.path());
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let port = free_port();
    agent_profile(&t.root().join("profiles/work"), port, upstream.port);
    // The default profile stays native, beside it.
    fs::write(t.root().join(".env"), crate::util::api_env(free_port())).unwrap();
    let env = agent_env(&agent, &overlay);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let work = || t.service("gateway-work");
    let pid_of = |row: &serde_json::Value| row["pid"].as_i64().unwrap_or(0) as i32;

    let mut up = start_up(&t, &env);
    run_ok(&t, &env, &["-p", "work", "gateway", "start"]);
    let wait_serving = |what: &str| {
        poll::until_true(what, Duration::from_secs(90), || {
            work()["state"] == "up"
                && http(port, "GET", "/health", None).is_some_and(|r| r.contains(" 200 "))
        })
    };
    wait_serving("the agent's gateway answers /health");

    let health = http(port, "GET", "/health", None).unwrap();
    assert!(health.contains(r#""platform": "hermes-agent""#), "{health}");

    // The supervised process IS the agent (exec, not a child of ours), serving `work`.
    let first = pid_of(&work());
    let cmdline = fs::read(format!("/proc/{first}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        cmdline.contains(" -p work gateway run --replace --external-supervisor"),
        "{cmdline}"
    );
    let recorded = state(&t.root().join("profiles/work"));
    assert_eq!(recorded["pid"], first, "the agent's own record: {recorded}");
    // Its output is the service's log, as the native gateway's is.
    let log = fs::read_to_string(t.root().join("logs/gateways/work/current")).unwrap();
    assert!(
        log.contains("the gateway engine is hermes-agent")
            && log.contains("Hermes Gateway Starting"),
        "{log}"
    );
    assert_eq!(recorded["kind"], "hermes-gateway");

    // A chat through the agent, to the fake upstream.
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hello agent"}]}"#;
    let answer = http(port, "POST", "/v1/chat/completions", Some(body)).unwrap();
    assert!(answer.contains(" 200 "), "{answer}");
    assert!(answer.contains("echo: hello agent"), "{answer}");
    assert!(
        fs::read_to_string(&upstream.record)
            .unwrap()
            .contains("hello agent"),
        "the upstream saw the turn"
    );

    // `gateway status` names the engines.
    let rows = status_rows(&t, &env);
    assert_eq!(engines(&rows), [("default", "native"), ("work", "agent")]);
    let text = run_ok(&t, &env, &["gateway", "status"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("gateway-work") && l.contains(" agent ")),
        "{text}"
    );

    // So does `service status`, below the supervisor's table and in its JSON.
    let text = run_ok(&t, &env, &["service", "status"]);
    assert!(
        text.contains("gateway engines: gateway-default native, gateway-work agent\n"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&run_ok(
        &t,
        &env,
        &["service", "status", "gateway-work", "--json"],
    ))
    .unwrap();
    assert_eq!(json[0]["engine"], "agent", "{json}");

    // A crash (SIGKILL) is restarted by the supervisor.
    signal(first, nix::sys::signal::Signal::SIGKILL);
    poll::until_true("a new agent after SIGKILL", Duration::from_secs(60), || {
        let row = work();
        row["state"] == "up" && pid_of(&row) != first && pid_of(&row) != 0
    });
    let after_crash = work();
    assert!(
        after_crash["restarts"].as_u64() >= Some(1),
        "the crash is reported: {after_crash}"
    );
    wait_serving("the agent's gateway back after the crash");

    // Its own restart request (SIGUSR1, what its `/restart` and `hermes update` use: drain,
    // exit 75) restarts it; the supervisor stays up.
    let second = pid_of(&work());
    signal(second, nix::sys::signal::Signal::SIGUSR1);
    poll::until_true(
        "a new agent after its restart request",
        Duration::from_secs(60),
        || {
            let row = work();
            row["state"] == "up" && pid_of(&row) != second && pid_of(&row) != 0
        },
    );
    assert_eq!(
        work()["last_exit"],
        serde_json::json!({"code": 75}),
        "it asked for the restart: {}",
        work()
    );
    assert!(
        up.0.try_wait().unwrap().is_none(),
        "the supervisor is still up"
    );
    wait_serving("the agent's gateway back after its restart");

    // An operator restart: a planned stop for the agent (exit 0), then a new process.
    let third = pid_of(&work());
    run_ok(&t, &env, &["-p", "work", "gateway", "restart"]);
    poll::until_true(
        "a new agent after an operator restart",
        Duration::from_secs(60),
        || {
            let row = work();
            row["state"] == "up" && pid_of(&row) != third && pid_of(&row) != 0
        },
    );
    assert_eq!(
        work()["last_exit"],
        serde_json::json!({"code": 0}),
        "{}",
        work()
    );
    wait_serving("the agent's gateway back after an operator restart");

    // An operator stop: stopped, recorded, and not started again by the next `hermes up`.
    run_ok(&t, &env, &["-p", "work", "gateway", "stop"]);
    poll::until_true("gateway-work down", Duration::from_secs(40), || {
        work()["state"] == "down"
    });
    let stopped = state(&t.root().join("profiles/work"));
    assert_eq!(stopped["desired_state"], "stopped", "{stopped}");
    assert_eq!(
        stopped["gateway_state"], "stopped",
        "the agent took it for a planned stop: {stopped}"
    );
    assert_eq!(
        work()["last_exit"],
        serde_json::json!({"code": 0}),
        "{}",
        work()
    );
    let text = run_ok(&t, &env, &["gateway", "status"]);
    assert!(
        text.lines().any(|l| l.starts_with("gateway-work")
            && l.contains(" down ")
            && l.contains(" stopped ")),
        "{text}"
    );
    assert_eq!(up.stop(), Some(0));
    let _up = start_up(&t, &env);
    poll::until_true("gateway-default up", Duration::from_secs(30), || {
        t.service("gateway-default")["state"] == "up"
    });
    assert_eq!(work()["state"], "down", "{}", work());
    assert!(http(port, "GET", "/health", None).is_none());

    // In the foreground (`--no-supervise`), the same agent, told no supervisor restarts it.
    let mut foreground = Running(
        t.cmd(&["-p", "work", "gateway", "run", "--no-supervise"])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    poll::until_true(
        "the foreground agent answers /health",
        Duration::from_secs(90),
        || http(port, "GET", "/health", None).is_some_and(|r| r.contains("hermes-agent")),
    );
    let cmdline = fs::read(format!("/proc/{}/cmdline", foreground.0.id())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        cmdline.ends_with(" -p work gateway run --replace "),
        "exec'd in place, without --external-supervisor: {cmdline}"
    );
    assert_eq!(work()["state"], "down", "not handed to the supervisor");
    assert!(
        foreground.stop().is_some(),
        "the foreground agent stops on SIGTERM"
    );
}

/// A volume the original configured with its own `hermes config set`: the key, the port and
/// the switch at the top level of `config.yaml`, nothing in `.env`. Run by the agent engine,
/// the agent takes them (its gateway bridges top-level scalars into its environment), nothing
/// seeded shadows them, and `gateway status` says where the key comes from and the address.
#[test]
fn the_agents_gateway_keeps_the_key_the_original_set_at_the_top_of_config_yaml() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let overlay = aiohttp_overlay(&agent.python);
    let t = TestContext::new();
    let upstream = Upstream::start(&agent.python, t.dir.path());
    fs::create_dir_all(t.home()).unwrap();
    let port = free_port();
    crate::migrate::original(&t, &agent, &["profile", "create", "work"]);
    let dir = t.root().join("profiles/work");
    agent_profile(&dir, port, upstream.port);
    fs::remove_file(dir.join(".env")).unwrap();
    for (key, value) in [
        ("API_SERVER_ENABLED", "true".to_string()),
        ("API_SERVER_KEY", TEST_API_KEY.to_string()),
        ("API_SERVER_PORT", port.to_string()),
    ] {
        crate::migrate::original(&t, &agent, &["-p", "work", "config", "set", key, &value]);
    }
    let config = fs::read_to_string(dir.join("config.yaml")).unwrap();
    assert!(
        config.contains(&format!("API_SERVER_KEY: {TEST_API_KEY}")),
        "the original wrote the key at the top: {config}"
    );
    fs::write(t.root().join(".env"), crate::util::api_env(free_port())).unwrap();
    let env = agent_env(&agent, &overlay);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();

    let mut up = start_up(&t, &env);
    run_ok(&t, &env, &["-p", "work", "gateway", "start"]);
    poll::until_true(
        "the agent's gateway on the port the original set",
        Duration::from_secs(90),
        || http(port, "GET", "/health", None).is_some_and(|r| r.contains(" 200 ")),
    );
    let models = http(port, "GET", "/v1/models", None).unwrap();
    assert!(
        models.contains(" 200 "),
        "the operator's key opens it: {models}"
    );
    let seeded = fs::read_to_string(dir.join(".env")).unwrap_or_default();
    assert!(
        !seeded.lines().any(|l| l.starts_with("API_SERVER_KEY=")),
        "nothing seeded to shadow it: {seeded}"
    );
    let rows = status_rows(&t, &env);
    let work = rows.iter().find(|r| r["profile"] == "work").unwrap();
    assert_eq!(work["engine"], "agent", "{work:#}");
    assert_eq!(
        work["address"],
        format!("http://127.0.0.1:{port}"),
        "{work:#}"
    );
    assert_eq!(
        work["key_source"], "the top level of `config.yaml`",
        "{work:#}"
    );
    assert_eq!(up.stop(), Some(0));
}

/// What the agent itself makes of the command we exec: supervised (so its `/restart` chat
/// command takes the exit-75 path, `gateway/restart.py` `is_gateway_supervisor_process`) only
/// when we say so, and `-p default` the root of the volume even with a sticky
/// `active_profile`, `-p work` its profile.
#[test]
fn the_agent_reads_our_command_as_meant() {
    let Some(original) = hermes_test_support::original_agent() else {
        return;
    };
    let agent = hermes_services::agent::Agent {
        cli: original.hermes.clone(),
        python: original.python.clone(),
        version: None,
        source: None,
    };
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    // A sticky active profile must not redirect the default profile's gateway.
    fs::write(t.root().join("active_profile"), "work\n").unwrap();
    // The agent's CLI entry point resolves the profile as it imports (`-p` stripped, then
    // `HERMES_HOME` set); then the check its `/restart` handler makes.
    let ask = |supervised: bool, profile: &str| -> String {
        let (argv, env) =
            hermes_services::agent::gateway_command(&agent, &t.root(), profile, supervised);
        let script = "import os, sys\n\
             sys.argv = ['hermes', *sys.argv[1:]]\n\
             import hermes_cli.main\n\
             from gateway.restart import is_gateway_supervisor_process\n\
             print(is_gateway_supervisor_process(), os.environ['HERMES_HOME'], *sys.argv[1:])\n";
        let out = Command::new(&agent.python)
            .arg("-c")
            .arg(script)
            .args(&argv[1..])
            .env_clear()
            .env("HOME", t.home())
            .env("PATH", "/usr/bin:/bin")
            .envs(env)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", render(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let root = t.root().display().to_string();
    let run = "gateway run --replace";
    assert_eq!(
        ask(true, "default"),
        format!("True {root} {run} --external-supervisor")
    );
    assert_eq!(ask(false, "default"), format!("False {root} {run}"));
    assert_eq!(
        ask(true, "work"),
        format!("True {root}/profiles/work {run} --external-supervisor")
    );
}

/// `profile_dir` served by the agent: its API server on `port` with the test key, the model a
/// custom provider at the fake upstream, and nothing the agent would fetch from the network.
fn agent_profile(profile_dir: &Path, port: u16, upstream: u16) {
    gateway_profile(profile_dir, port, upstream, "agent");
}

/// `profile_dir` with its API server on `port` (the test key), served by the gateway `engine`
/// (`native` or `agent`), the model a custom provider at `upstream`, and nothing the agent
/// would fetch from the network.
pub(crate) fn gateway_profile(profile_dir: &Path, port: u16, upstream: u16, engine: &str) {
    fs::create_dir_all(profile_dir).unwrap();
    fs::write(
        profile_dir.join(".env"),
        format!("API_SERVER_ENABLED=true\nAPI_SERVER_PORT={port}\nAPI_SERVER_KEY={TEST_API_KEY}\n"),
    )
    .unwrap();
    fs::write(
        profile_dir.join("config.yaml"),
        format!(
            "gateway:\n  engine: {engine}\n\
             model:\n  default: m\n  provider: custom\n  base_url: http://127.0.0.1:{upstream}/v1\n  \
             api_key: upstream-key\n  context_length: 131072\n\
             security:\n  tirith_enabled: false\n"
        ),
    )
    .unwrap();
}

/// What `hermes up` and the CLI run with beside an installed agent: the agent found where it
/// is, the default engine native (a profile asks for the agent), `aiohttp` from `overlay`.
fn agent_env(
    agent: &hermes_test_support::OriginalAgent,
    overlay: &Path,
) -> [(&'static str, String); 3] {
    [
        (
            "HERMES_AGENT_CLI",
            agent.hermes.to_string_lossy().into_owned(),
        ),
        ("HERMES_GATEWAY_ENGINE", "native".to_owned()),
        ("PYTHONPATH", overlay.to_string_lossy().into_owned()),
    ]
}

/// A directory holding `aiohttp` for the agent's interpreter (none when it has it already),
/// made once per target dir with the agent's own pip.
pub(crate) fn aiohttp_overlay(python: &Path) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("agent-aiohttp");
    let importable = || {
        Command::new(python)
            .args(["-c", "import aiohttp"])
            .env("PYTHONPATH", &dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !importable() {
        let out = Command::new(python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "-q",
            ])
            .arg("--target")
            .arg(&dir)
            .arg("aiohttp")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pip install aiohttp:\n{}",
            render(&out)
        );
        assert!(
            importable(),
            "aiohttp installed in {} but not importable",
            dir.display()
        );
    }
    dir
}

/// `hermes up` with `env`, waiting for its socket.
fn start_up(t: &TestContext, env: &[(&str, &str)]) -> Running {
    let child = t
        .cmd(&["up"])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = Running(child);
    poll::until_true("the supervisor", Duration::from_secs(30), || {
        t.run(&["service", "list"]).status.success()
    });
    up
}

fn run_ok(t: &TestContext, env: &[(&str, &str)], args: &[&str]) -> String {
    let out = t.cmd(args).envs(env.iter().copied()).output().unwrap();
    assert!(out.status.success(), "hermes {args:?}:\n{}", render(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn status_rows(t: &TestContext, env: &[(&str, &str)]) -> Vec<serde_json::Value> {
    serde_json::from_str(&run_ok(t, env, &["gateway", "status", "--json"])).unwrap()
}

/// `(profile, engine)` of each row.
fn engines(rows: &[serde_json::Value]) -> Vec<(&str, &str)> {
    rows.iter()
        .map(|r| {
            (
                r["profile"].as_str().unwrap_or("-"),
                r["engine"].as_str().unwrap_or("-"),
            )
        })
        .collect()
}

fn state(profile_dir: &Path) -> serde_json::Value {
    fs::read_to_string(profile_dir.join("gateway_state.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn signal(pid: i32, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal).unwrap();
}

/// One HTTP/1.1 request with the test key on 127.0.0.1:`port`; the whole response, `None`
/// while nothing listens.
fn http(port: u16, method: &str, path: &str, body: Option<&str>) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .ok()?;
    let body = body.unwrap_or("");
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Authorization: Bearer {TEST_API_KEY}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

/// The fake OpenAI-compatible provider (`clients/fake_upstream.py`), killed on drop.
struct Upstream {
    child: std::process::Child,
    port: u16,
    record: PathBuf,
}

impl Upstream {
    fn start(python: &Path, dir: &Path) -> Upstream {
        let record = dir.join("upstream-requests.jsonl");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/clients/fake_upstream.py");
        let mut child = Command::new(python)
            .arg(script)
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
            .unwrap_or_else(|| panic!("the fake upstream said {line:?}"));
        Upstream {
            child,
            port,
            record,
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
