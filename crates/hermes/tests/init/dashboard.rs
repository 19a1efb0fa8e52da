//! The `dashboard` service under `hermes init`: `disabled` unless `HERMES_DASHBOARD` is
//! truthy (the original image's switch); switched on, supervised and answering.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use hermes_supervisor::StateName;

use crate::util::*;

/// Runs `hermes init` with a main program that waits for `stop-now`, `env` added; returns
/// the dashboard's state once the supervisor answers (waiting for `up` when `expect_up`),
/// then stops init.
fn dashboard_state(env: &[(&str, &str)], port: u16, expect_up: bool) -> StateName {
    let sb = Sandbox::new();
    fs::create_dir_all(sb.home()).unwrap();
    let mut child = sb
        .init(&["sh", "-c", "while [ ! -e stop-now ]; do sleep 0.05; done"])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut client = connect_supervisor(&sb.runtime());
    let mut state = || {
        client
            .status(Some("dashboard"))
            .unwrap()
            .into_iter()
            .next()
            .map(|r| r.state)
    };
    if expect_up {
        wait_for("dashboard up", || state() == Some(StateName::Up));
        wait_for("the dashboard answers", || health(port));
    }
    let seen = state().expect("a dashboard row");
    fs::write(sb.path().join("stop-now"), "").unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "init did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    seen
}

/// Whether `/api/health` answers 200 on `port`.
fn health(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let req =
        format!("GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    let mut answer = String::new();
    s.write_all(req.as_bytes()).is_ok()
        && s.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.1 200")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn the_dashboard_is_disabled_unless_asked_for_and_supervised_when_it_is() {
    let port = free_port();
    let p = port.to_string();
    assert_eq!(
        dashboard_state(&[("HERMES_DASHBOARD_PORT", &p)], port, false),
        StateName::Disabled
    );
    assert_eq!(
        dashboard_state(
            &[("HERMES_DASHBOARD", "0"), ("HERMES_DASHBOARD_PORT", &p)],
            port,
            false
        ),
        StateName::Disabled
    );
    assert!(!health(port), "nothing listens when disabled");
    assert_eq!(
        dashboard_state(
            &[("HERMES_DASHBOARD", "yes"), ("HERMES_DASHBOARD_PORT", &p)],
            port,
            true
        ),
        StateName::Up
    );
}
