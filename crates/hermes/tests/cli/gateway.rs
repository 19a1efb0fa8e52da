//! `hermes gateway ...` and `hermes chat` through the real binary: the foreground gateway's
//! state file, exit codes, the lock, and the lifecycle under `hermes up`. The HTTP API itself
//! is covered against a fake upstream in `crates/hermes-gateway/tests`.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use crate::util::{Running, TestContext, api_env, free_port, render};
use hermes_test_support::poll;

/// `GET path` on 127.0.0.1:port; `None` while nothing listens.
pub(crate) fn http_get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

fn state(t: &TestContext, profile_dir: &str) -> serde_json::Value {
    let path = t.root().join(profile_dir).join("gateway_state.json");
    serde_json::from_str(&fs::read_to_string(path).unwrap_or_else(|_| "{}".into()))
        .unwrap_or_default()
}

fn start_foreground(t: &TestContext, port: u16) -> Running {
    fs::write(t.root().join(".env"), api_env(port)).unwrap();
    let child = t
        .cmd(&["gateway", "run", "--no-supervise"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let guard = Running(child);
    poll::until_true("/health", Duration::from_secs(30), || {
        http_get(port, "/health").is_some_and(|r| r.contains("200 OK"))
    });
    guard
}

#[test]
fn a_started_gateway_compiles_its_prompt_checks_before_the_first_chat() {
    // The first chat after each start used to wait 230-280 ms for them.
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let port = free_port();
    let mut gateway = start_foreground(&t, port);
    let stderr = BufReader::new(gateway.0.stderr.take().unwrap());
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut said = String::new();
    while !said.contains("threat patterns compiled") {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match seen.recv_timeout(left) {
            Ok(line) => said.push_str(&(line + "\n")),
            Err(_) => panic!("no chat was sent, and the checks were not compiled:\n{said}"),
        }
    }
    assert_eq!(gateway.stop(), Some(0));
}

#[test]
fn foreground_gateway_records_its_life_and_stops_cleanly_on_sigterm() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let port = free_port();
    let mut gateway = start_foreground(&t, port);

    let health = http_get(port, "/health").unwrap();
    assert!(health.contains("\"profile\":\"default\""), "{health}");
    let running = state(&t, "");
    assert_eq!(running["gateway_state"], "running");
    assert_eq!(running["kind"], "hermes-gateway");
    assert_eq!(
        running["platforms"]["api_server"]["state"], "connected",
        "{running}"
    );
    assert_eq!(running["pid"], gateway.0.id());
    // `gateway.pid`, what the original's `hermes gateway status|stop` read first, in its
    // format (`gateway/status.py` `write_pid_file`: Python's `json.dumps`, no newline).
    let pid_file = fs::read_to_string(t.root().join("gateway.pid")).unwrap();
    assert!(
        pid_file.starts_with(&format!(
            "{{\"pid\": {}, \"kind\": \"hermes-gateway\", \"argv\": [",
            gateway.0.id()
        )),
        "{pid_file}"
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&pid_file).unwrap()["start_time"],
        running["start_time"]
    );
    assert!(
        running["code_version"].is_string() && running["updated_at"].is_string(),
        "{running}"
    );

    // Without a model the API answers 503 naming what to set; /health stays fine.
    let models = http_get(port, "/v1/models").unwrap();
    assert!(
        models.starts_with("HTTP/1.1 200") || models.contains("401"),
        "{models}"
    );

    assert_eq!(gateway.stop(), Some(0));
    assert!(
        !t.root().join("gateway.pid").exists(),
        "a clean exit removes gateway.pid, as the original's does"
    );
    let stopped = state(&t, "");
    // Not an operator stop: recorded as `running`, so the next boot brings it back.
    assert_eq!(stopped["gateway_state"], "running", "{stopped}");
    assert_eq!(stopped["exit_reason"], "stopped", "{stopped}");
}

/// The original's lifecycle ledger (`state/gateway.lifecycle.json`): a gateway killed
/// without an exit path reads `unclean` at the next boot, a stopped one `clean`.
#[test]
fn the_lifecycle_ledger_tells_a_kill_from_a_clean_exit() {
    use hermes_home::lifecycle_ledger::{PriorExit, path, prior_exit};
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let port = free_port();
    let mut gateway = start_foreground(&t, port);
    let claim: serde_json::Value =
        serde_json::from_slice(&fs::read(path(&t.root())).unwrap()).unwrap();
    assert_eq!(claim["phase"], "running", "{claim}");
    assert_eq!(claim["pid"], gateway.0.id());
    gateway.0.kill().unwrap();
    gateway.0.wait().unwrap();
    assert_eq!(
        prior_exit(&t.root()),
        PriorExit::Unclean,
        "SIGKILL: no exit path ran"
    );

    let mut gateway = start_foreground(&t, port);
    let pid = gateway.0.id();
    assert_eq!(gateway.stop(), Some(0));
    let exited: serde_json::Value =
        serde_json::from_slice(&fs::read(path(&t.root())).unwrap()).unwrap();
    assert_eq!(
        (exited["phase"].as_str(), exited["exit_code"].as_i64()),
        (Some("exited"), Some(0)),
        "{exited}"
    );
    assert_eq!(exited["pid"], pid);
    assert_eq!(prior_exit(&t.root()), PriorExit::Clean);
}

#[test]
fn a_stop_planned_by_the_originals_tools_records_stopped() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let port = free_port();
    let mut gateway = start_foreground(&t, port);
    let running = state(&t, "");
    // What the original's `hermes gateway stop` writes before its SIGTERM
    // (`gateway/status.py` `write_planned_stop_marker`).
    let marker = t.root().join(".gateway-planned-stop.json");
    let text = serde_json::json!({
        "target_pid": gateway.0.id(),
        "target_start_time": running["start_time"],
        "stopper_pid": std::process::id(),
        "written_at": hermes_home::time::iso_utc_now(),
    });
    fs::write(&marker, text.to_string()).unwrap();
    assert_eq!(gateway.stop(), Some(0));
    let stopped = state(&t, "");
    assert_eq!(stopped["gateway_state"], "stopped", "{stopped}");
    assert!(!marker.exists(), "the marker is consumed");
}

#[test]
fn gateway_stop_without_a_supervisor_stops_the_foreground_gateway_as_planned() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let port = free_port();
    let mut gateway = start_foreground(&t, port);
    let pid = gateway.0.id();
    let out = t.ok(&["gateway", "stop"]);
    assert!(
        out.contains("Stopped the `default` gateway") && out.contains(&pid.to_string()),
        "{out}"
    );
    assert_eq!(gateway.stop(), Some(0));
    let stopped = state(&t, "");
    assert_eq!(stopped["gateway_state"], "stopped", "{stopped}");
    assert!(!t.root().join(".gateway-planned-stop.json").exists());
    assert!(!t.root().join("gateway.pid").exists());

    // Nothing left to stop: the command says how gateways are managed.
    let again = t.run(&["gateway", "stop"]);
    assert_eq!(again.status.code(), Some(1), "{}", render(&again));
    assert!(render(&again).contains("no supervisor is running"));
}

#[test]
fn a_second_gateway_for_the_same_profile_is_refused() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let port = free_port();
    let _first = start_foreground(&t, port);
    let first = state(&t, "");
    assert_eq!(first["gateway_state"], "running", "{first}");
    let second = t.run(&["gateway", "run", "--no-supervise"]);
    assert_eq!(second.status.code(), Some(1), "{}", render(&second));
    let text = render(&second);
    assert!(
        text.contains("already") && text.contains("--replace"),
        "{text}"
    );
    // The refused start left the running gateway's record alone (no `starting`, no
    // `startup_failed`, not its pid).
    assert_eq!(state(&t, ""), first);
}

#[test]
fn public_bind_without_a_key_exits_78() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(
        t.root().join(".env"),
        format!(
            "API_SERVER_ENABLED=true\nAPI_SERVER_HOST=0.0.0.0\nAPI_SERVER_PORT={}\n",
            free_port()
        ),
    )
    .unwrap();
    let out = t.run(&["gateway", "run", "--no-supervise"]);
    assert_eq!(out.status.code(), Some(78), "{}", render(&out));
    assert!(render(&out).contains("API_SERVER_KEY"), "{}", render(&out));
    assert_eq!(state(&t, "")["gateway_state"], "startup_failed");
}

/// The original's rule: switched on, the API server needs a strong key on loopback too.
#[test]
fn a_weak_key_is_refused_even_on_loopback() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    for (env, why) in [
        ("API_SERVER_ENABLED=yes\n", "not set"),
        ("API_SERVER_KEY=changeme\n", "placeholder"),
        ("API_SERVER_KEY=0123456789\n", "10 characters"),
    ] {
        fs::write(
            t.root().join(".env"),
            format!("{env}API_SERVER_PORT={}\n", free_port()),
        )
        .unwrap();
        let out = t.run(&["gateway", "run", "--no-supervise"]);
        assert_eq!(out.status.code(), Some(78), "{env}: {}", render(&out));
        let text = render(&out);
        assert!(
            text.contains(why) && text.contains("hint:"),
            "{env}: {text}"
        );
        assert!(!text.contains("changeme") || why == "placeholder", "{text}");
    }
}

/// Off (no `API_SERVER_ENABLED`, no key), the gateway opens no port and says so: in its
/// record, as the original records a platform, and in `gateway status`.
#[test]
fn with_the_api_server_off_no_port_is_opened_and_status_says_so() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let port = free_port();
    fs::write(t.root().join(".env"), format!("API_SERVER_PORT={port}\n")).unwrap();
    let child = t
        .cmd(&["gateway", "run", "--no-supervise"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut gateway = Running(child);
    poll::until_true("recorded running", Duration::from_secs(30), || {
        state(&t, "")["gateway_state"] == "running"
    });
    let record = state(&t, "");
    assert_eq!(
        record["platforms"]["api_server"]["state"], "disabled",
        "{record}"
    );
    let why = record["platforms"]["api_server"]["error_message"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("API_SERVER_ENABLED"), "{record}");
    assert!(http_get(port, "/health").is_none(), "no port is opened");

    let status = t.ok(&["gateway", "status", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(rows[0]["api_server"]["enabled"], false, "{rows}");
    assert_eq!(rows[0]["address"], "(API server off)", "{rows}");
    assert_eq!(gateway.stop(), Some(0));
}

#[test]
fn chat_without_a_model_says_which_keys_to_set() {
    let t = TestContext::new();
    insta::assert_snapshot!(
        "chat_no_model",
        t.snapshot(&t.run(&["chat", "-q", "hello"]))
    );
}

#[test]
fn lifecycle_commands_without_a_supervisor_explain_what_to_run() {
    let t = TestContext::new();
    let out = t.run(&["gateway", "start"]);
    assert_eq!(out.status.code(), Some(1));
    let text = render(&out);
    assert!(
        text.contains("no supervisor is running") && text.contains("hermes up"),
        "{text}"
    );
    let status = t.ok(&["gateway", "status"]);
    assert!(
        status.contains("gateway-default") && status.contains("no supervisor"),
        "{status}"
    );
}

#[test]
fn gateways_under_hermes_up_follow_the_operator_and_survive_a_restart() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    t.free_ports(&["work"]);
    let service_state =
        |name: &str| -> String { t.service(name)["state"].as_str().unwrap_or("-").to_string() };
    let start_up = || t.start_up();

    // A fresh home starts the default profile's gateway; `work` is registered down.
    let mut up = start_up();
    poll::until_true("gateway-default up", Duration::from_secs(30), || {
        service_state("gateway-default") == "up"
    });
    assert_eq!(service_state("gateway-work"), "down");

    // Operator start and stop are persisted as the desired state.
    t.ok(&["-p", "work", "gateway", "start"]);
    poll::until_true("gateway-work up", Duration::from_secs(30), || {
        service_state("gateway-work") == "up"
    });
    assert_eq!(state(&t, "profiles/work")["desired_state"], "running");
    t.ok(&["gateway", "stop"]);
    poll::until_true("gateway-default down", Duration::from_secs(40), || {
        service_state("gateway-default") == "down"
    });
    let default_state = state(&t, "");
    assert_eq!(default_state["desired_state"], "stopped");
    assert_eq!(
        default_state["gateway_state"], "stopped",
        "an operator stop is recorded as stopped"
    );

    // A profile created while the supervisor runs is registered at once, down.
    t.ok(&["profile", "create", "late", "--no-alias"]);
    fs::write(t.root().join("profiles/late/.env"), api_env(free_port())).unwrap();
    assert_eq!(service_state("gateway-late"), "down");
    // Deleting it unregisters its gateway before the files move.
    t.ok(&["profile", "delete", "late", "--yes"]);
    assert_eq!(
        t.run(&["service", "status", "gateway-late"]).status.code(),
        Some(1)
    );

    // Restart the supervisor: the choices survive.
    assert_eq!(up.stop(), Some(0));
    assert_eq!(
        state(&t, "profiles/work")["gateway_state"],
        "running",
        "shutdown, not an operator stop"
    );
    let _up = start_up();
    poll::until_true("gateway-work back up", Duration::from_secs(30), || {
        service_state("gateway-work") == "up"
    });
    assert_eq!(
        service_state("gateway-default"),
        "down",
        "stopped by the operator before the restart"
    );
}

#[test]
fn gateway_run_hands_over_to_a_running_supervisor() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    t.free_ports(&["work"]);
    let up = t.start_up();
    let work_state = || t.service("gateway-work");
    assert_eq!(work_state()["state"], "down");

    // Without `--no-supervise`, `gateway run` starts the supervised service and follows its log.
    let follower = Running(
        t.cmd(&["-p", "work", "gateway", "run"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    poll::until_true("gateway-work up", Duration::from_secs(30), || {
        work_state()["state"] == "up"
    });
    let supervised_pid = work_state()["pid"].as_i64().unwrap();
    assert_ne!(
        supervised_pid,
        i64::from(follower.0.id()),
        "the supervisor runs the gateway, not the follower"
    );
    // `drop` stops the follower and waits for it to exit. Had it asked the supervisor to stop
    // the gateway on its way out, it would have waited for that reply first (requests are
    // synchronous), so the state is already settled when the wait returns: no sleep needed.
    drop(follower);
    let after = work_state();
    assert_eq!(
        (after["state"].as_str(), after["pid"].as_i64()),
        (Some("up"), Some(supervised_pid)),
        "the gateway outlives the command that asked for it: {after}"
    );
    assert_eq!(state(&t, "profiles/work")["desired_state"], "running");
    drop(up);
}

#[test]
fn install_writes_a_systemd_user_unit_and_uninstall_removes_it() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let out = t.ok(&["-p", "work", "gateway", "install"]);
    let unit = t
        .home()
        .join(".config/systemd/user/hermes-gateway-work.service");
    assert!(out.contains("systemctl --user"), "{out}");
    let text = fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains(" -p work gateway run --no-supervise\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("Environment=HERMES_HOME={}\n", t.root().display())),
        "{text}"
    );
    assert!(text.contains("RestartPreventExitStatus=78"), "{text}");
    // Its API port, held by systemd across restarts (the API server is on: a key is seeded).
    let socket = unit.with_file_name("hermes-gateway-work.socket");
    let text = fs::read_to_string(&socket).unwrap();
    let port = hermes_home::api_server::default_port("work");
    assert!(
        text.contains(&format!(
            "ListenStream=127.0.0.1:{port}\nFileDescriptorName=api\n"
        )),
        "{text}"
    );
    assert!(
        out.contains("enable --now hermes-gateway-work.socket hermes-gateway-work.service"),
        "{out}"
    );
    let out = t.ok(&["-p", "work", "gateway", "uninstall"]);
    assert!(!unit.exists() && !socket.exists(), "{out}");
    assert!(out.contains("hermes-gateway-work.socket"), "{out}");
}

/// The gateway's own warnings reach its stderr (which the supervisor keeps in its log): here,
/// the OpenAI key held back from a local `base_url`, named but never printed.
#[test]
fn gateway_warnings_reach_stderr_without_the_secret() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(
        t.root().join("config.yaml"),
        "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\n",
    )
    .unwrap();
    let port = free_port();
    fs::write(
        t.root().join(".env"),
        format!("{}OPENAI_API_KEY=sk-must-not-be-printed\n", api_env(port)),
    )
    .unwrap();
    let mut gateway = t
        .cmd(&["gateway", "run", "--no-supervise"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    poll::until_true("/health", Duration::from_secs(30), || {
        http_get(port, "/health").is_some_and(|r| r.contains("200 OK"))
    });
    let pid = nix::unistd::Pid::from_raw(gateway.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut err = String::new();
    gateway
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    gateway.wait().unwrap();
    assert!(err.contains("provider key withheld"), "{err}");
    assert!(err.contains("OPENAI_API_KEY"), "{err}");
    assert!(!err.contains("sk-must-not-be-printed"), "{err}");
}

/// issue 16, item 3: `gateway start` waits for the gateway to serve and reports what really
/// happened: its pid and address; or, when it dies at once, exit 1 with the supervisor's
/// reason, the gateway's own error and hint — a port already in use (the gateway exits 1,
/// retried) and a configuration error (exit 78, parked).
#[test]
fn gateway_start_waits_for_readiness_and_reports_a_failed_start_with_its_cause() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    t.free_ports(&[]);
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().port();
    let work_env = t.root().join("profiles/work/.env");
    fs::write(&work_env, api_env(taken)).unwrap();
    let _up = t.start_up();

    let out = t.run(&["-p", "work", "gateway", "start"]);
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(out.stdout.is_empty(), "{text}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: `gateway-work` did not start: exited with code 1: port "),
        "{text}"
    );
    assert!(stderr.contains(&format!("port {taken} ")), "{text}");
    assert!(stderr.contains("already in use"), "{text}");
    assert!(
        stderr.contains("hint: each profile needs its own port")
            && stderr.contains(
                "the supervisor keeps retrying it (`hermes -p work gateway stop` stops it)"
            ),
        "the gateway's own hint, then what the supervisor does: {text}"
    );

    // A configuration error: exit 78, parked, said as such.
    t.ok(&["service", "stop", "gateway-work"]);
    fs::write(t.root().join("profiles/work/config.yaml"), "model: [\n").unwrap();
    let out = t.run(&["-p", "work", "gateway", "restart"]);
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "error: `gateway-work` did not restart: configuration error (exit 78): cannot load"
        ) && text.contains("it stays stopped until started again"),
        "{text}"
    );
    assert_eq!(t.service("gateway-work")["state"], "failed");

    // Fixed: the start waits until the gateway serves and says where.
    fs::write(t.root().join("profiles/work/config.yaml"), "{}\n").unwrap();
    let port = free_port();
    fs::write(&work_env, api_env(port)).unwrap();
    let out = t.ok(&["-p", "work", "gateway", "start"]);
    let row = t.service("gateway-work");
    assert_eq!(row["state"], "up", "ready when the start returns: {row}");
    assert_eq!(
        out,
        format!(
            "Started `gateway-work` (pid {}, http://127.0.0.1:{port})\n",
            row["pid"]
        )
    );
    assert!(http_get(port, "/health").is_some_and(|r| r.contains("200 OK")));
    assert_eq!(
        t.ok(&["-p", "work", "gateway", "start"]),
        format!(
            "`gateway-work` is already running (pid {}, http://127.0.0.1:{port})\n",
            row["pid"]
        )
    );
    assert!(
        t.ok(&["-p", "work", "gateway", "restart", "--no-wait"])
            .starts_with("Asked the supervisor to restart `gateway-work` (not waiting")
    );
    drop(holder);
}

/// issue 16, item 4: the status commands show a failing gateway's last error in one line under
/// its row — `gateway status`, `gateway list`, `service status`, `profile show` (whose
/// `gateway:` is what the supervisor says now, not a recorded `running`) — and columns stay
/// apart however long a cell is.
#[test]
fn status_commands_show_the_last_error_of_a_failing_gateway() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = holder.local_addr().unwrap().port();
    fs::write(t.root().join(".env"), api_env(taken)).unwrap();
    fs::write(t.root().join("profiles/work/.env"), api_env(free_port())).unwrap();
    fs::write(t.root().join("profiles/work/config.yaml"), "model: [\n").unwrap();
    // A fresh home starts the default gateway: it crash-loops on the taken port.
    let _up = t.start_up();
    poll::until_true(
        "gateway-default backing off",
        Duration::from_secs(30),
        || t.service("gateway-default")["state"] == "backoff",
    );
    assert_eq!(
        t.run(&["-p", "work", "gateway", "start"]).status.code(),
        Some(1)
    );
    let in_use = format!("last error: port {taken} on `127.0.0.1` is already in use");
    // The crash-looping gateway is `starting` for a moment at each retry, when it is not
    // failing: the output of a command run while it stayed in `backoff` (same state and
    // restart count before and after).
    let while_backing_off = |args: &[&str]| -> String {
        for _ in 0..200 {
            let before = t.service("gateway-default");
            let out = t.ok(args);
            let after = t.service("gateway-default");
            if before["state"] == "backoff"
                && after["state"] == "backoff"
                && before["restarts"] == after["restarts"]
            {
                return out;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("gateway-default never stayed in backoff through `{args:?}`");
    };

    let status = while_backing_off(&["gateway", "status"]);
    let lines: Vec<&str> = status.lines().collect();
    let row = |name: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in:\n{status}"))
    };
    let default = row("gateway-default ");
    assert!(
        lines[default + 1].starts_with(&format!("  {in_use}")),
        "{status}"
    );
    let work = row("gateway-work ");
    assert!(
        lines[work + 1].starts_with("  last error: cannot load the profile's settings: ")
            && lines[work + 1].contains("is not valid YAML"),
        "{status}"
    );
    // The long `(invalid: …)` address and the reason stay apart, in their columns.
    let reason_col = lines[0].find("REASON").unwrap();
    assert_eq!(
        lines[work].find("configuration error (exit 78)"),
        Some(reason_col),
        "{status}"
    );
    assert!(
        lines[work][..reason_col].ends_with(")  "),
        "two spaces at least: {status}"
    );

    let list = while_backing_off(&["gateway", "list"]);
    assert!(list.contains(&format!("\n  {in_use}")), "{list}");
    let json: serde_json::Value =
        serde_json::from_str(&while_backing_off(&["gateway", "status", "--json"])).unwrap();
    assert!(
        json[0]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("already in use")),
        "{json}"
    );

    let services = while_backing_off(&["service", "status"]);
    let at = services
        .lines()
        .position(|l| l.starts_with("gateway-default "))
        .unwrap();
    assert!(
        services
            .lines()
            .nth(at + 1)
            .unwrap()
            .starts_with(&format!("  {in_use}")),
        "{services}"
    );
    let one: serde_json::Value =
        serde_json::from_str(&t.ok(&["service", "status", "gateway-work", "--json"])).unwrap();
    assert!(
        one[0]["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("not valid YAML")),
        "{one}"
    );

    let shown = while_backing_off(&["profile", "show", "default"]);
    assert!(
        shown.contains("gateway:      backoff: ")
            && shown.contains(&format!(
                "\n{}",
                in_use.replacen("last error: ", "last error:   ", 1)
            )),
        "a crash loop, not `running`: {shown}"
    );
    drop(holder);
}

/// `gateway run` of the default profile with `GATEWAY_MULTIPLEX_PROFILES` (or the root
/// `config.yaml`'s `gateway.multiplex_profiles`) serves every profile at `/p/<profile>/`, each
/// with its own key; without the switch (the native gateway's default) it serves its own.
#[test]
fn the_switch_makes_the_default_gateway_serve_every_profile() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let work_key = "cli-test-key-of-work-0123456789";
    fs::write(
        t.root().join("profiles/work/.env"),
        format!("API_SERVER_KEY={work_key}\n"),
    )
    .unwrap();
    let authorized = |port: u16, path: &str, key: &str| {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {key}\r\n\
             Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    };
    let serve = |env: Option<&str>, config: &str| {
        fs::write(t.root().join("config.yaml"), config).unwrap();
        let port = free_port();
        fs::write(t.root().join(".env"), api_env(port)).unwrap();
        let mut cmd = t.cmd(&["gateway", "run", "--no-supervise"]);
        if let Some(value) = env {
            cmd.env("GATEWAY_MULTIPLEX_PROFILES", value);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let guard = Running(child);
        poll::until_true("/health", Duration::from_secs(30), || {
            http_get(port, "/health").is_some_and(|r| r.contains("200 OK"))
        });
        (guard, port)
    };

    for (env, config) in [
        (Some("1"), "{}\n"),
        (None, "gateway:\n  multiplex_profiles: true\n"),
    ] {
        let (mut gateway, port) = serve(env, config);
        let health = http_get(port, "/health").unwrap();
        assert!(health.contains("\"mode\":\"multiplex\""), "{health}");
        assert!(
            !health.contains("\"profiles\""),
            "no key, no names: {health}"
        );
        // The default profile's key is told who is served.
        let health = authorized(port, "/health", crate::util::TEST_API_KEY);
        assert!(
            health.contains("\"profiles\":[\"default\",\"work\"]"),
            "{health}"
        );
        let work = http_get(port, "/p/work/health").unwrap();
        assert!(
            work.starts_with("HTTP/1.1 200") && work.contains("\"profile\":\"work\""),
            "{work}"
        );
        let models = authorized(port, "/p/work/v1/models", work_key);
        assert!(models.starts_with("HTTP/1.1 200"), "{models}");
        let crossed = authorized(port, "/p/work/v1/models", crate::util::TEST_API_KEY);
        assert!(crossed.starts_with("HTTP/1.1 401"), "{crossed}");
        let unknown = http_get(port, "/p/nobody/health").unwrap();
        assert!(
            unknown.starts_with("HTTP/1.1 404") && unknown.contains("profile_not_found"),
            "{unknown}"
        );
        assert_eq!(gateway.stop(), Some(0));
    }

    // Off in the environment wins over the file; nothing set is off for the native gateway.
    for (env, config) in [
        (Some("0"), "gateway:\n  multiplex_profiles: true\n"),
        (None, "{}\n"),
    ] {
        let (mut gateway, port) = serve(env, config);
        let health = http_get(port, "/health").unwrap();
        assert!(health.contains("\"mode\":\"single\""), "{env:?}: {health}");
        let work = http_get(port, "/p/work/health").unwrap();
        assert!(work.starts_with("HTTP/1.1 404"), "{env:?}: {work}");
        assert_eq!(gateway.stop(), Some(0));
    }
}

/// `gateway status` run from a shell whose environment differs from the supervisor's (a
/// `docker exec`, an operator's terminal) shows the address the gateway was given and bound,
/// from the supervisor's record, and where its key comes from (never the key).
#[test]
fn gateway_status_shows_the_bound_address_not_the_callers() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let port = free_port();
    let child = t
        .cmd(&["up"])
        .env("API_SERVER_PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _up = Running(child);
    poll::until_true("the gateway's socket held", Duration::from_secs(30), || {
        t.service("gateway-default")["listening"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
    });
    let rows: serde_json::Value =
        serde_json::from_str(&t.ok(&["gateway", "status", "--json"])).unwrap();
    let row = &rows[0];
    assert_eq!(
        row["address"],
        format!("http://127.0.0.1:{port}"),
        "{row:#}"
    );
    assert_eq!(row["key_source"], "`.env`", "{row:#}");
    let text = t.ok(&["gateway", "status"]);
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
}
