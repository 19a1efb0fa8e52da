//! `hermes up` and `hermes service ...` with real processes in a temporary home.

use std::fs;
use std::time::Duration;

use crate::util::{TestContext, render};
use hermes_test_support::poll;

fn state_of(t: &TestContext, name: &str) -> serde_json::Value {
    t.service(name)["state"].clone()
}

#[test]
fn without_a_supervisor_service_commands_say_so() {
    let t = TestContext::new();
    insta::assert_snapshot!(
        "service_not_running",
        t.snapshot(&t.run(&["service", "status"]))
    );
    for args in [
        &["service", "list"][..],
        &["service", "start", "x"],
        &["service", "stop", "x"],
    ] {
        assert_eq!(t.run(args).status.code(), Some(1), "{args:?}");
    }
}

#[test]
fn up_supervises_config_services_and_reports_bad_ones() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(
        t.root().join("config.yaml"),
        "services:\n  ticker:\n    command: 'while true; do echo tick; sleep 0.2; done'\n  \
         bad:\n    command: ''\n    restart: sometimes\n    colour: red\n",
    )
    .unwrap();
    let mut up = t.start_up();

    let table = t.ok(&["service", "status"]);
    assert!(table.starts_with("NAME"), "{table}");
    for column in ["STATE", "PID", "UPTIME", "RESTARTS", "LAST EXIT", "REASON"] {
        assert!(table.lines().next().unwrap().contains(column), "{table}");
    }
    assert!(
        table.contains("ticker"),
        "valid services still run:\n{table}"
    );
    let bad = table
        .lines()
        .find(|l| l.starts_with("bad "))
        .unwrap_or_default();
    assert!(
        bad.contains(" invalid ") && bad.contains("bad restart policy"),
        "the bad one is shown as invalid, not run:\n{table}"
    );
    poll::until_true("ticker up", Duration::from_secs(10), || {
        state_of(&t, "ticker") == "up"
    });

    // A second supervisor on the same home refuses and names the pid.
    let second = t.run(&["up"]);
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!("already running (pid {})", up.0.id())),
        "{stderr}"
    );

    // Stop and start through the control socket.
    t.ok(&["service", "stop", "ticker"]);
    poll::until_true("ticker down", Duration::from_secs(15), || {
        state_of(&t, "ticker") == "down"
    });
    t.ok(&["service", "start", "ticker"]);
    poll::until_true("ticker running", Duration::from_secs(10), || {
        t.service("ticker")["pid"].is_number()
    });

    // Logs are captured with timestamps.
    poll::until_true("two log lines", Duration::from_secs(10), || {
        t.ok(&["service", "logs", "ticker", "-n", "2"])
            .lines()
            .count()
            == 2
    });
    let logs = t.ok(&["service", "logs", "ticker", "-n", "2"]);
    assert!(
        logs.lines()
            .all(|l| l.ends_with(" tick") && l.starts_with("20")),
        "{logs}"
    );

    // The dump reports the supervisor and its services.
    let dump = t.ok(&["dump"]);
    assert!(
        dump.contains("supervisor:       running") && dump.contains("ticker"),
        "{dump}"
    );

    let ticker_pid = t.service("ticker")["pid"].as_i64().unwrap() as i32;
    assert_eq!(up.stop(), Some(0), "SIGTERM stops everything and exits 0");
    let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(ticker_pid), None).is_err();
    assert!(gone, "the service was stopped with the supervisor");
    let stderr = up.stderr();
    assert!(
        stderr.contains("service `bad`: unknown key `colour`"),
        "{stderr}"
    );
    assert!(stderr.contains("bad restart policy"), "{stderr}");
}

#[test]
fn unknown_service_is_a_clear_error() {
    let t = TestContext::new();
    let _up = t.start_up();
    let out = t.run(&["service", "start", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nope"),
        "{}",
        render(&out)
    );
}

/// A log line that is not UTF-8 (services print anything) is shown lossily, and the lines
/// around it are still shown.
#[test]
fn service_logs_show_bytes_that_are_not_utf8() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let dir = t.root().join("logs/binary");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("current"),
        b"2026-01-01T00:00:00.000Z before\n2026-01-01T00:00:00.001Z bad \xff\xfe bytes\n\
          2026-01-01T00:00:00.002Z after\n",
    )
    .unwrap();
    let out = t.run(&["service", "logs", "binary"]);
    assert!(out.status.success(), "{}", crate::util::render(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("before") && text.contains("after"), "{text}");
    assert!(text.contains("bad \u{fffd}\u{fffd} bytes"), "{text}");
}

/// `services:` that JSON cannot hold (a key that is a list) is reported, never dropped in
/// silence.
#[test]
fn up_says_why_it_ignores_a_services_section() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(
        t.root().join("config.yaml"),
        "services:\n  ? [a, b]\n  : {command: 'true'}\n",
    )
    .unwrap();
    let mut up = t.start_up();
    assert_eq!(up.stop(), Some(0));
    let stderr = up.stderr();
    assert!(stderr.contains("warning: ignoring `services:`"), "{stderr}");
}

/// `hermes health` (the image's healthcheck) asks the supervisor: healthy while services run
/// or are stopped on purpose, unhealthy naming the service once one crash-loops, and a clear
/// failure with no supervisor.
#[test]
fn health_follows_the_supervisor() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let no_supervisor = t.run(&["health"]);
    assert_eq!(no_supervisor.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&no_supervisor.stderr).contains("no supervisor is running"));

    // The default profile's gateway runs too: on a port of its own, never one a parallel
    // test holds (it would crash-loop and make this supervisor unhealthy for a wrong reason).
    t.free_ports(&[]);
    // `flaky` runs while `ok` exists and crashes at once without it.
    fs::write(t.root().join("ok"), "").unwrap();
    fs::write(
        t.root().join("config.yaml"),
        format!(
            "services:\n  steady:\n    command: 'exec sleep 60'\n  flaky:\n    command: \
             'test -e {} && exec sleep 60; exit 1'\n",
            t.root().join("ok").display()
        ),
    )
    .unwrap();
    let _up = t.start_up();
    poll::until_true("both up", Duration::from_secs(20), || {
        state_of(&t, "steady") == "up" && state_of(&t, "flaky") == "up"
    });
    // Healthy once every service has started (the gateway may still be `starting`).
    poll::until_true("healthy", Duration::from_secs(20), || {
        t.run(&["health"]).status.code() == Some(0)
    });
    let healthy = t.run(&["health"]);
    assert_eq!(
        healthy.status.code(),
        Some(0),
        "{}",
        crate::util::render(&healthy)
    );
    assert!(String::from_utf8_lossy(&healthy.stdout).starts_with("healthy: "));

    t.ok(&["service", "stop", "flaky"]);
    poll::until_true("flaky down", Duration::from_secs(15), || {
        state_of(&t, "flaky") == "down"
    });
    assert_eq!(
        t.run(&["health"]).status.code(),
        Some(0),
        "a deliberate stop is healthy"
    );

    fs::remove_file(t.root().join("ok")).unwrap();
    let start = t.run(&["service", "start", "flaky"]);
    assert_eq!(start.status.code(), Some(1), "the start says it failed");
    poll::until_true("flaky crash-looping", Duration::from_secs(20), || {
        t.service("flaky")["restarts"].as_u64() >= Some(2)
    });
    let sick = t.run(&["health", "--json"]);
    assert_eq!(sick.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&sick.stdout).unwrap();
    assert_eq!(doc["healthy"], false, "{doc}");
    assert_eq!(doc["problems"][0]["service"], "flaky", "{doc}");
    let text = t.run(&["health"]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("unhealthy: `flaky` is "),
        "{}",
        crate::util::render(&text)
    );
}

/// issue 16, item 3: `service start|restart NAME` waits for the service to be up and names
/// its pid; one that exits at once is an error with its exit code and its last error line.
#[test]
fn service_start_waits_and_reports_an_exit_with_its_error() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(
        t.root().join("config.yaml"),
        "services:\n  sleeper:\n    command: 'sleep 60'\n    enabled: false\n  \
         broken:\n    command: 'echo \"error: the frobnicator is missing\" >&2; exit 3'\n    \
         enabled: false\n",
    )
    .unwrap();
    let _up = t.start_up();

    let out = t.ok(&["service", "start", "sleeper"]);
    let row = t.service("sleeper");
    assert_eq!(row["state"], "up", "{row}");
    assert_eq!(out, format!("Started `sleeper` (pid {})\n", row["pid"]));

    let out = t.run(&["service", "start", "broken"]);
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "error: `broken` did not start: exited with code 3: the frobnicator is missing"
        ),
        "{text}"
    );
    assert!(text.contains("`hermes service logs broken`"), "{text}");
}

/// issue 16, item 9: `hermes up` says in words what it does with each gateway, and on stderr
/// what a SIGTERM stops (in the order it stops them) and when it is done — no Rust debug
/// formatting (`prior_state=None`) anywhere.
#[test]
fn up_says_what_it_stops_and_when_it_is_done() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    t.free_ports(&[]);
    fs::write(
        t.root().join("config.yaml"),
        "services:\n  ticker:\n    command: 'exec sleep 60'\n",
    )
    .unwrap();
    let mut up = t.start_up();
    poll::until_true("both up", Duration::from_secs(30), || {
        state_of(&t, "ticker") == "up" && state_of(&t, "gateway-default") == "up"
    });
    assert_eq!(up.stop(), Some(0));
    let stderr = up.stderr();
    assert!(
        stderr.contains("hermes up: starting `gateway-default` (it has no recorded state)\n"),
        "{stderr}"
    );
    let stopping = stderr
        .lines()
        .position(|l| l.starts_with("hermes up: stopping "))
        .unwrap_or_else(|| panic!("no stopping line: {stderr}"));
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines[stopping],
        "hermes up: stopping `gateway-default`, `ticker` (in this order; a second Ctrl-C kills \
         them)",
        "newest start first: {stderr}"
    );
    assert_eq!(
        lines.last(),
        Some(&"hermes up: every service has stopped; done"),
        "{stderr}"
    );
    for internal in ["prior_state=", "None", "Some("] {
        assert!(!stderr.contains(internal), "{internal}: {stderr}");
    }
}

/// A profile created while `hermes up` runs is served, whatever `HOME` says: `up` found its
/// volume through `HOME` (no `HERMES_HOME`), and the gateway service the CLI registers runs
/// with the passwd entry's `HOME` — it must still find the same volume.
#[test]
fn a_profile_created_while_up_runs_is_served_from_the_same_volume() {
    let t = TestContext::new();
    // The volume is `$HOME/.hermes`: no `HERMES_HOME` anywhere.
    let cmd = |args: &[&str]| {
        let mut c = t.cmd(args);
        c.env_remove("HERMES_HOME");
        c
    };
    let root = t.home().join(".hermes");
    let ok = |args: &[&str]| {
        let out = cmd(args).output().unwrap();
        assert!(out.status.success(), "hermes {args:?}:\n{}", render(&out));
    };
    ok(&["profile", "list"]);
    fs::write(
        root.join(".env"),
        crate::util::api_env(crate::util::free_port()),
    )
    .unwrap();
    let mut up = crate::util::Running(
        cmd(&["up"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    poll::until_true("the supervisor", Duration::from_secs(30), || {
        cmd(&["service", "list"]).output().unwrap().status.success()
    });
    ok(&["profile", "create", "work", "--no-alias"]);
    let port = crate::util::free_port();
    fs::write(root.join("profiles/work/.env"), crate::util::api_env(port)).unwrap();
    let started = cmd(&["-p", "work", "gateway", "start"]).output().unwrap();
    assert!(started.status.success(), "{}", render(&started));
    let row = |name: &str| -> serde_json::Value {
        let out = cmd(&["service", "status", name, "--json"])
            .output()
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()[0].clone()
    };
    let work = row("gateway-work");
    assert_eq!(work["state"], "up", "{work:#}");
    assert_eq!(work["restarts"], 0, "no crash loop: {work:#}");
    assert_eq!(work["port"], port, "{work:#}");
    assert_eq!(up.stop(), Some(0));
}
