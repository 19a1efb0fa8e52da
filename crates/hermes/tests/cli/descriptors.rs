//! The gateway under a low open-file limit (issue: guardrails, item 5): 300 connections that
//! never send a byte, held against a gateway whose `RLIMIT_NOFILE` is 256, never keep `/health`
//! from answering new connections at once, and are closed at the header timeout.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Running, TestContext, api_env, free_port};
use hermes_test_support::poll;

/// `GET /health` on a new connection, given `limit` to connect and answer; the status line.
fn health_within(port: u16, limit: Duration) -> Result<String, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, limit).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(limit)).map_err(|e| e.to_string())?;
    s.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .map_err(|e| format!("read: {e}"))?;
    Ok(answer.lines().next().unwrap_or_default().to_owned())
}

#[test]
fn silent_connections_under_a_256_descriptor_limit_never_keep_health_from_answering() {
    if hermes_test_support::skip_unless_on_path("prlimit") {
        return;
    }
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let config = t.root().join("config.yaml");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("gateway: {}", "gateway:\n  header_timeout: 6");
    std::fs::write(&config, text).unwrap();
    let port = free_port();
    std::fs::write(t.root().join(".env"), api_env(port)).unwrap();
    // The gateway exactly as `t.cmd` runs it, under `prlimit --nofile=256`.
    let like = t.cmd(&["gateway", "run", "--no-supervise"]);
    let mut cmd = Command::new("prlimit");
    cmd.args(["--nofile=256:256", "--"])
        .arg(like.get_program())
        .args(like.get_args())
        .env_clear();
    for (key, value) in like.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    cmd.current_dir(t.dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut gateway = Running(cmd.spawn().unwrap());
    poll::until_true("/health", Duration::from_secs(30), || {
        health_within(port, Duration::from_secs(2)).is_ok_and(|l| l.contains("200"))
    });

    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let silent: Vec<TcpStream> = (0..300)
        .map(|_| {
            TcpStream::connect_timeout(&addr, Duration::from_secs(2))
                .expect("connect a silent client")
        })
        .collect();
    // Once the gateway has taken the 300 in (accepting them, evicting idle ones to stay under
    // its cap; seconds on a loaded runner), every new connection is answered at once. Without
    // a cap that fits the descriptors, the probe waits in the backlog behind silent clients
    // the gateway cannot accept, for as long as they stay: this never happens.
    poll::until_true(
        "/health answered with 300 silent connections held",
        Duration::from_secs(15),
        || health_within(port, Duration::from_secs(1)).is_ok_and(|l| l.contains("200")),
    );
    for probe in 0..10 {
        let started = Instant::now();
        let answer = health_within(port, Duration::from_secs(1));
        assert!(
            answer.as_deref().is_ok_and(|l| l.contains("200")),
            "probe {probe}: /health did not answer within 1 s with 300 silent connections held: {answer:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "probe {probe} took {:?}",
            started.elapsed()
        );
    }
    // Every silent connection is closed by the gateway: at the 6 s header timeout, or earlier
    // to make room.
    for (i, mut s) in silent.into_iter().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut byte = [0u8; 1];
        match s.read(&mut byte) {
            Ok(0) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            other => panic!("silent connection {i} still open after the header timeout: {other:?}"),
        }
    }
    assert_eq!(gateway.stop(), Some(0));
}
