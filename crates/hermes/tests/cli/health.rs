//! Health as the original reports it since 0.20, end to end: `hermes dashboard`'s
//! `HERMES_DASHBOARD_READY port=N` line on stdout with the port it bound (port 0 included), and
//! `hermes health` degraded — exit 0 unless `--strict` — on a volume over 90 % used (a small
//! tmpfs as `HERMES_HOME`, filled up; root only).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use crate::util::{Running, TestContext, free_port, render};
use hermes_test_support::disk::SmallDisk;
use hermes_test_support::poll;

/// The first line `child` writes on stdout, waiting at most 30 s.
fn first_stdout_line(child: &mut std::process::Child) -> String {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("a line on stdout within 30 s")
}

/// `GET /api/health` on loopback `port`: (status, body).
fn api_health(port: u16) -> (u16, serde_json::Value) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let req =
        format!("GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or_default())
}

#[test]
fn the_dashboard_prints_its_ready_line_with_the_port_it_bound() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    for asked in [0, free_port()] {
        let mut child = t
            .cmd(&["dashboard", "--port", &asked.to_string()])
            .env(
                "HERMES_DASHBOARD_SESSION_TOKEN",
                "health-test-token-0123456789abcdef",
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let line = first_stdout_line(&mut child);
        let _running = Running(child);
        let port: u16 = line
            .strip_prefix("HERMES_DASHBOARD_READY port=")
            .and_then(|rest| rest.strip_suffix('\n'))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not the ready line: {line:?}"));
        assert_ne!(port, 0, "the port actually bound");
        if asked != 0 {
            assert_eq!(port, asked);
        }
        // Once it is said, the dashboard answers there (no wait, no retry).
        let (status, body) = api_health(port);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["ok"], true, "{body}");
    }
}

#[test]
fn a_volume_over_ninety_percent_is_degraded_but_alive_unless_strict() {
    if hermes_test_support::skip_unless_root("mounting a small tmpfs as the volume needs root") {
        return;
    }
    let t = TestContext::new();
    let disk = SmallDisk::mount(&t.root(), "16m");
    t.ok(&["profile", "list"]);
    // The default profile's gateway on a port of its own (a parallel test may hold 8642).
    t.free_ports(&[]);
    let _up = t.start_up();
    poll::until_true("healthy", Duration::from_secs(30), || {
        t.run(&["health"]).status.code() == Some(0)
    });
    let out = t.run(&["health", "--strict"]);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.starts_with("healthy: "), "{text}");
    assert!(!text.contains("degraded"), "{text}");

    // 16 MiB with 512 KiB left: about 97 % used.
    disk.fill("ballast", 512 * 1024);
    let out = t.run(&["health"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "degraded is alive: {}",
        render(&out)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("healthy: "), "{text}");
    let volume = format!("degraded: the volume ({}) is ", t.root().display());
    assert!(lines[1].starts_with(&volume), "{text}");
    assert!(
        lines[1].contains("% used, ") && lines[1].contains("free of 16 MiB"),
        "{text}"
    );

    let out = t.run(&["health", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&doc["healthy"], &doc["degraded"]),
        (&true.into(), &true.into()),
        "{doc}"
    );
    assert!(
        doc["volume"]["used_percent"].as_f64().unwrap() >= 90.0,
        "{doc}"
    );
    assert!(
        doc["volume"]["free_bytes"].as_u64().unwrap() <= 512 * 1024,
        "{doc}"
    );

    let out = t.run(&["health", "--strict"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "--strict fails on degraded: {}",
        render(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&volume));

    std::fs::remove_file(disk.path().join("ballast")).unwrap();
    let out = t.run(&["health", "--strict"]);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
}
