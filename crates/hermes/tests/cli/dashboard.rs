//! `hermes dashboard`: the fail-closed bind, and the Overview's API against a real
//! supervisor (`hermes up` in the temp home): status rows, a Stop and a Start through the
//! API seen in `/api/status`, in a server-sent event and in the recorded desired state.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::util::{Running, TestContext, free_port};
use hermes_test_support::poll;

const TOKEN: &str = "cli-dashboard-token-0123456789abcdef";

#[test]
fn a_public_bind_without_credentials_refuses_to_start_with_78() {
    let t = TestContext::new();
    let out = t.run(&[
        "dashboard",
        "--host",
        "0.0.0.0",
        "--port",
        &free_port().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        errors,
        ["error: the dashboard will not listen on `0.0.0.0` without credentials"]
    );
    assert!(
        stderr.contains("hint: set HERMES_DASHBOARD_BASIC_AUTH_USERNAME"),
        "{stderr}"
    );
    // The environment counts as the flag does.
    let out = t
        .cmd(&["dashboard"])
        .env("HERMES_DASHBOARD_HOST", "10.1.2.3")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
}

/// Starts `hermes dashboard` on a free loopback port with a fixed token; returns it and the
/// port once it answers.
fn start_dashboard(t: &TestContext) -> (Running, u16, String) {
    let port = free_port();
    let mut child = t
        .cmd(&["dashboard", "--port", &port.to_string()])
        .env("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first lines on stderr say where and how to sign in.
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("?token=") && !said.contains("`hermes dashboard link`") {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap() == 0 {
            break;
        }
        said.push_str(&line);
    }
    (Running(child), port, said)
}

fn http(port: u16, method: &str, path: &str, headers: &[&str]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: 0\r\n"
    );
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_string(),
    )
}

fn auth() -> String {
    format!("X-Hermes-Session-Token: {TOKEN}")
}

fn status(port: u16) -> serde_json::Value {
    let (code, body) = http(port, "GET", "/api/status", &[&auth()]);
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn state_of(snapshot: &serde_json::Value, service: &str) -> String {
    snapshot["services"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == service)
        .and_then(|r| r["state"].as_str())
        .unwrap_or("-")
        .to_string()
}

/// Opens `/api/events` and returns a reader positioned after the response head.
fn events(port: u16) -> BufReader<TcpStream> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = format!(
        "GET /api/events HTTP/1.1\r\nHost: localhost:{port}\r\n{}\r\nAccept: text/event-stream\r\n\r\n",
        auth()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut reader = BufReader::new(s);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains(" 200 "), "{line}");
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            return reader;
        }
    }
}

/// Reads `status` events until one shows `service` in `state` (chunked framing lines and
/// keepalives are skipped: only `data:` lines are parsed).
fn wait_for_event(reader: &mut BufReader<TcpStream>, service: &str, state: &str) {
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader
            .read_line(&mut line)
            .expect("an event before the timeout");
        assert!(n > 0, "the event stream ended");
        if let Some(data) = line.trim_end().strip_prefix("data: ") {
            let snapshot: serde_json::Value = serde_json::from_str(data).unwrap();
            if state_of(&snapshot, service) == state {
                return;
            }
        }
    }
}

#[test]
fn the_overview_api_runs_a_gateway_through_the_real_supervisor() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    t.free_ports(&[]);

    // Before any supervisor: the dashboard says so instead of guessing.
    let (mut dashboard, port, said) = start_dashboard(&t);
    assert!(
        said.contains(&format!("Hermes dashboard on http://127.0.0.1:{port}/")),
        "{said}"
    );
    assert!(
        !said.contains(TOKEN),
        "a token that was given is never printed: {said}"
    );
    poll::until_true("the dashboard", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let none = status(port);
    assert_eq!(none["supervisor"]["reachable"], false, "{none}");

    let _up = t.start_up();
    poll::until_true("gateway-default up", Duration::from_secs(30), || {
        state_of(&status(port), "gateway-default") == "up"
    });
    let row = status(port)["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "gateway-default")
        .cloned()
        .unwrap();
    assert!(row["pid"].as_i64().unwrap() > 1, "{row}");
    assert_eq!(row["engine"], "native", "{row}");
    let env = std::fs::read_to_string(t.root().join(".env")).unwrap();
    assert!(
        env.contains(&format!("API_SERVER_PORT={}", row["port"])),
        "{row} {env}"
    );

    let mut stream = events(port);
    wait_for_event(&mut stream, "gateway-default", "up");

    // Stop: without the CSRF header it is refused and nothing changes.
    let (code, _) = http(
        port,
        "POST",
        "/api/services/gateway-default/stop",
        &[&format!("Cookie: hermes_dashboard_session={TOKEN}")],
    );
    assert_eq!(code, 403);
    assert_eq!(state_of(&status(port), "gateway-default"), "up");
    let (code, body) = http(
        port,
        "POST",
        "/api/services/gateway-default/stop",
        &[&auth()],
    );
    assert_eq!(code, 200, "{body}");
    wait_for_event(&mut stream, "gateway-default", "down");
    assert_eq!(state_of(&status(port), "gateway-default"), "down");
    // Recorded as the CLI's stop is: the operator's choice.
    let recorded: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(t.root().join("gateway_state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(recorded["desired_state"], "stopped", "{recorded}");

    let (code, body) = http(
        port,
        "POST",
        "/api/services/gateway-default/start",
        &[&auth()],
    );
    assert_eq!(code, 200, "{body}");
    wait_for_event(&mut stream, "gateway-default", "up");

    // An unknown service is the supervisor's refusal, said as such.
    let (code, body) = http(port, "POST", "/api/services/nope/start", &[&auth()]);
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("nope"), "{body}");
    dashboard.stop();
}

/// The Overview's Stop is an operator's stop as the CLI's is: the planned-stop marker naming
/// the gateway's process is written before the supervisor signals it (a gateway command that
/// does not consume the marker leaves it to be seen).
#[test]
fn the_overview_stop_writes_the_planned_stop_marker_as_the_cli_does() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    t.free_ports(&[]);
    std::fs::write(
        t.root().join("config.yaml"),
        "gateway:\n  command: 'exec sleep 60'\n",
    )
    .unwrap();
    let (mut dashboard, port, _) = start_dashboard(&t);
    poll::until_true("the dashboard", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let _up = t.start_up();
    let pid = poll::until("gateway-default's pid", Duration::from_secs(30), || {
        status(port)["services"]
            .as_array()?
            .iter()
            .find(|r| r["name"] == "gateway-default")?["pid"]
            .as_i64()
            .filter(|p| *p > 1)
    });
    let marker = t.root().join(".gateway-planned-stop.json");
    assert!(!marker.exists());
    let (code, body) = http(
        port,
        "POST",
        "/api/services/gateway-default/stop",
        &[&auth()],
    );
    assert_eq!(code, 200, "{body}");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&marker).unwrap()).unwrap();
    assert_eq!(written["target_pid"].as_i64(), Some(pid), "{written}");
    dashboard.stop();
}

#[test]
fn hermes_up_runs_the_dashboard_service_unless_switched_off() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    t.free_ports(&[]);
    let port = free_port();
    let start = |args: &[&str], switch: &str| {
        let child = t
            .cmd(args)
            .env("HERMES_DASHBOARD", switch)
            .env("HERMES_DASHBOARD_PORT", port.to_string())
            .env("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let up = Running(child);
        poll::until_true("the supervisor", Duration::from_secs(30), || {
            t.run(&["service", "list"]).status.success()
        });
        up
    };

    // On by default (HERMES_DASHBOARD unset): a supervised service that answers.
    let mut up = start(&["up"], "");
    poll::until_true("dashboard up", Duration::from_secs(30), || {
        t.service("dashboard")["state"] == "up"
    });
    poll::until_true("the dashboard answers", Duration::from_secs(30), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let snapshot = status(port);
    assert_eq!(state_of(&snapshot, "dashboard"), "up", "{snapshot}");
    // Restarted after a crash like any service.
    let pid = t.service("dashboard")["pid"].as_i64().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    poll::until_true("dashboard restarted", Duration::from_secs(30), || {
        let row = t.service("dashboard");
        row["state"] == "up" && row["pid"].as_i64() != Some(pid)
    });
    assert_eq!(up.stop(), Some(0));

    // Off: listed as disabled, nothing listens.
    for (args, switch) in [(&["up", "--no-dashboard"][..], ""), (&["up"][..], "0")] {
        let mut up = start(args, switch);
        assert_eq!(
            t.service("dashboard")["state"],
            "disabled",
            "{args:?} {switch:?}"
        );
        assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
        assert_eq!(up.stop(), Some(0));
    }
}

/// Every file under `dir`, read as text where it can be (for looking for a secret).
fn every_text_under(dir: &std::path::Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            all.push_str(&every_text_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            all.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    all
}

#[test]
fn under_hermes_up_the_sign_in_token_is_never_logged_and_outlives_a_dashboard_restart() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    t.free_ports(&[]);
    let port = free_port();
    let mut up = t.start_up_with([
        ("HERMES_DASHBOARD", "1"),
        ("HERMES_DASHBOARD_PORT", &port.to_string()),
    ]);
    poll::until_true("the dashboard answers", Duration::from_secs(30), || {
        t.service("dashboard")["state"] == "up" && TcpStream::connect(("127.0.0.1", port)).is_ok()
    });

    // The link comes from the supervisor, and signs in.
    let out = t.run(&["dashboard", "link"]);
    assert!(out.status.success(), "{out:?}");
    let link = String::from_utf8(out.stdout).unwrap();
    let prefix = format!("http://127.0.0.1:{port}/?token=");
    let token = link
        .trim_end()
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{link}"))
        .to_string();
    assert_eq!(token.len(), 64, "{link}");
    let header = format!("X-Hermes-Session-Token: {token}");
    assert_eq!(http(port, "GET", "/api/status", &[&header]).0, 200);
    assert_eq!(
        http(
            port,
            "GET",
            "/api/status",
            &["X-Hermes-Session-Token: wrong-0123456789abcdef"]
        )
        .0,
        401
    );

    // Restarting the dashboard from its own page: answered before it goes, and the same
    // token still signs in afterwards (nobody is signed out).
    let pid = t.service("dashboard")["pid"].as_i64().unwrap();
    let (code, body) = http(port, "POST", "/api/services/dashboard/restart", &[&header]);
    assert_eq!(code, 202, "{body}");
    assert!(body.contains("restarts now"), "{body}");
    poll::until_true("a new dashboard", Duration::from_secs(30), || {
        let row = t.service("dashboard");
        row["state"] == "up"
            && row["pid"].as_i64() != Some(pid)
            && TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    assert_eq!(http(port, "GET", "/api/status", &[&header]).0, 200);

    // Stopping it gets an answer too, then it stops.
    let (code, body) = http(port, "POST", "/api/services/dashboard/stop", &[&header]);
    assert_eq!(code, 202, "{body}");
    assert!(body.contains("hermes service start dashboard"), "{body}");
    poll::until_true("the dashboard stopped", Duration::from_secs(30), || {
        t.service("dashboard")["state"] == "down"
    });
    assert_eq!(up.stop(), Some(0));

    // The token is on no file of the volume: not in the service's log (which says where the
    // link is instead), nor anywhere a backup or the Logs page would find it.
    let logs = every_text_under(&t.root().join("logs"));
    assert!(logs.contains("hermes dashboard link"), "{logs}");
    assert!(!every_text_under(&t.root()).contains(&token));
    let said = up.stderr();
    assert!(!said.contains(&token), "not a terminal: {said}");
    assert!(said.contains("`hermes dashboard link`"), "{said}");

    // Without a supervisor there is no link to give, and it says how to get one.
    let out = t.run(&["dashboard", "link"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("hint: start it with `hermes up`"),
        "{stderr}"
    );
}

#[test]
fn a_dashboard_declared_in_config_yaml_runs_instead_of_ours() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    std::fs::write(
        t.root().join("config.yaml"),
        "services:\n  dashboard:\n    command: [sleep, '60']\n",
    )
    .unwrap();
    let port = free_port();
    let mut up = t.start_up_with([
        ("HERMES_DASHBOARD", "1"),
        ("HERMES_DASHBOARD_PORT", &port.to_string()),
    ]);
    poll::until_true("the declared dashboard up", Duration::from_secs(30), || {
        t.service("dashboard")["state"] == "up"
    });
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "ours does not run beside it"
    );
    assert_eq!(up.stop(), Some(0));
    let said = up.stderr();
    assert!(
        said.contains(
            "`dashboard` is declared in config.yaml; it runs instead of the built-in dashboard"
        ),
        "{said}"
    );
}

#[test]
fn a_refused_configuration_parks_the_service_failed_with_the_reason() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    // No credentials for a public address: the dashboard exits 78 before listening.
    let child = t
        .cmd(&["up"])
        .env("HERMES_DASHBOARD", "1")
        .env("HERMES_DASHBOARD_HOST", "0.0.0.0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut up = Running(child);
    poll::until_true("dashboard failed", Duration::from_secs(30), || {
        t.service("dashboard")["state"] == "failed"
    });
    let row = t.service("dashboard");
    assert!(row["reason"].as_str().unwrap().contains("78"), "{row}");
    assert_eq!(row["restarts"], 0, "not restarted in a loop: {row}");
    let log = t.ok(&["service", "logs", "dashboard"]);
    assert!(
        log.contains("will not listen on `0.0.0.0` without credentials"),
        "{log}"
    );
    assert_eq!(up.stop(), Some(0));
}

#[test]
fn a_password_hash_from_hash_password_in_dot_env_signs_in() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    // The line hash-password prints goes into .env as it is (single quotes keep the `$`s).
    let mut hashing = t
        .cmd(&["dashboard", "hash-password"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    hashing
        .stdin
        .take()
        .unwrap()
        .write_all(b"open sesame\n")
        .unwrap();
    let out = hashing.wait_with_output().unwrap();
    assert!(out.status.success());
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(
        line.starts_with("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH='$2b$12$"),
        "{line}"
    );
    std::fs::write(
        t.root().join(".env"),
        format!("HERMES_DASHBOARD_BASIC_AUTH_USERNAME=admin\n{line}"),
    )
    .unwrap();

    let port = free_port();
    let child = t
        .cmd(&["dashboard", "--port", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut dashboard = Running(child);
    poll::until_true("the dashboard", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    // base64("admin:open sesame") and base64("admin:open sesamE").
    let (code, _) = http(
        port,
        "GET",
        "/api/status",
        &["Authorization: Basic YWRtaW46b3BlbiBzZXNhbWU="],
    );
    assert_eq!(code, 200);
    let (code, _) = http(
        port,
        "GET",
        "/api/status",
        &["Authorization: Basic YWRtaW46b3BlbiBzZXNhbUU="],
    );
    assert_eq!(code, 401);
    dashboard.stop();
    let mut said = String::new();
    dashboard
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    assert!(said.contains("basic authentication as `admin`"), "{said}");
    assert!(
        !said.contains("open sesame") && !said.contains("$2b$"),
        "{said}"
    );
}
