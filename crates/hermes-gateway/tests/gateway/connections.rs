//! Connection limits end to end: a real gateway on 127.0.0.1:0 with a small cap and short
//! timeouts, driven with raw TCP sockets (a slow or silent client is exactly a socket that
//! sends too little).
//!
//! Contents: a slow request head is cut after the header timeout; idle connections (new and
//! kept alive) are closed after the idle timeout while a long request is not; idle connections
//! over the cap make room and `/health` answers; with every connection busy a new one gets a
//! clear 503 and `/health` answers fast (503, then 200 once there is room); shutdown closes
//! idle connections without waiting for the drain period.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use hermes_test_support::poll::until_async;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{Step, Upstream, client, settings, start};
use hermes_gateway::ShutdownRequest;
use hermes_http::ConnectionLimits;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

const HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nHost: gw\r\n\r\n";

fn limits(max: usize, header_ms: u64, idle_ms: u64) -> ConnectionLimits {
    ConnectionLimits::new(
        max,
        Duration::from_millis(header_ms),
        Duration::from_millis(idle_ms),
    )
}

/// Reads until the server closes the connection (EOF or reset); panics after `within`.
/// Returns what was read.
async fn read_until_closed(s: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => panic!(
                "the server did not close the connection within {within:?} (read so far: {:?})",
                String::from_utf8_lossy(&got)
            ),
            Ok(Ok(0)) | Ok(Err(_)) => return got,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Reads one HTTP response with a `content-length` (head and body) from a kept-alive
/// connection; panics after 5 s.
async fn read_response(s: &mut TcpStream) -> (String, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if got.len() >= end + 4 + len {
                let body = String::from_utf8_lossy(&got[end + 4..end + 4 + len]).to_string();
                return (head, body);
            }
        }
        let n = tokio::time::timeout_at(deadline, s.read(&mut buf))
            .await
            .expect("a response within 5 s")
            .unwrap();
        assert!(
            n > 0,
            "closed before a whole response: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
}

#[tokio::test]
async fn a_slow_request_head_is_cut_after_the_header_timeout() {
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", None);
    s.connection_limits = limits(16, 300, 30_000);
    let gw = start(s).await;

    let mut slow = TcpStream::connect(gw.addr).await.unwrap();
    // Taken before the bytes leave: the server's clock starts later, never earlier.
    let sent = Instant::now();
    slow.write_all(b"GET /health HTTP/1.1\r\n").await.unwrap();
    let got = read_until_closed(&mut slow, Duration::from_secs(5)).await;
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "closed after {waited:?}, before the header timeout"
    );
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));

    // A client that sends its head in time is served as usual.
    let mut fine = TcpStream::connect(gw.addr).await.unwrap();
    fine.write_all(HEALTH).await.unwrap();
    let (head, body) = read_response(&mut fine).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(body.contains("\"status\":\"ok\""), "{body}");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_idle_timeout_but_long_requests_are_not() {
    let up = Upstream::start().await;
    up.script(&[Step::Hang(Duration::from_millis(1200))]);
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", Some(&up));
    s.connection_limits = limits(16, 30_000, 400);
    let gw = start(s).await;

    // A connection that never sends anything. (Times are taken before the action, so the
    // server's idle clock starts later, never earlier.)
    let opened = Instant::now();
    let mut silent = TcpStream::connect(gw.addr).await.unwrap();
    let got = read_until_closed(&mut silent, Duration::from_secs(5)).await;
    assert!(got.is_empty());
    assert!(opened.elapsed() >= Duration::from_millis(350));

    // A kept-alive connection after its answer.
    let mut kept = TcpStream::connect(gw.addr).await.unwrap();
    let asked = Instant::now();
    kept.write_all(HEALTH).await.unwrap();
    let (head, _) = read_response(&mut kept).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let got = read_until_closed(&mut kept, Duration::from_secs(5)).await;
    assert!(got.is_empty());
    assert!(asked.elapsed() >= Duration::from_millis(350), "{asked:?}");

    // A request in flight three times longer than the idle timeout is answered.
    let r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", "Bearer gw-key")
        .json(&json!({"messages": [{"role": "user", "content": "slow"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        crate::support::echo_of("slow")
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_over_the_cap_make_room_and_health_answers() {
    const CAP: usize = 32;
    const OVER: usize = 100;
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", None);
    s.connection_limits = limits(CAP, 30_000, 30_000);
    let gw = start(s).await;

    // Connections that hold a slot and never send a byte, far more than the cap.
    let mut idle = Vec::new();
    for _ in 0..CAP + OVER {
        idle.push(TcpStream::connect(gw.addr).await.unwrap());
    }

    let asked = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(2),
        client().get(gw.url("/health")).send(),
    )
    .await
    .expect("/health answers within 2 s")
    .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], "ok");
    assert!(asked.elapsed() < Duration::from_secs(2));

    // The longest-idle connections were closed to make room: the first OVER + 1 (the last
    // one for the health check's connection); the newer ones are still served.
    for (i, conn) in idle.iter_mut().take(OVER + 1).enumerate() {
        let got = read_until_closed(conn, Duration::from_secs(5)).await;
        assert!(got.is_empty(), "connection {i}");
    }
    let newest = idle.last_mut().unwrap();
    newest.write_all(HEALTH).await.unwrap();
    let (head, _) = read_response(newest).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_connection_is_busy_a_new_one_gets_a_clear_503() {
    let up = Upstream::start().await;
    // Both requests wait upstream until the test lets them go.
    let gate = Arc::new(Semaphore::new(0));
    up.script(&[Step::Gate(Arc::clone(&gate)), Step::Gate(Arc::clone(&gate))]);
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", Some(&up));
    s.connection_limits = limits(2, 30_000, 30_000);
    let gw = start(s).await;

    // Two requests in flight fill the cap.
    let chats: Vec<_> = (0..2)
        .map(|i| {
            let url = gw.url("/v1/chat/completions");
            tokio::spawn(async move {
                client()
                    .post(url)
                    .header("authorization", "Bearer gw-key")
                    .json(&json!({"messages": [{"role": "user", "content": format!("busy {i}")}]}))
                    .send()
                    .await
                    .unwrap()
                    .status()
            })
        })
        .collect();
    until_async(
        "both requests to reach the upstream",
        Duration::from_secs(10),
        async || (up.seen().len() >= 2).then_some(()),
    )
    .await;

    // A third connection is told why, and closed.
    let mut third = TcpStream::connect(gw.addr).await.unwrap();
    third.write_all(HEALTH).await.unwrap();
    let asked = Instant::now();
    let got = read_until_closed(&mut third, Duration::from_secs(2)).await;
    assert!(asked.elapsed() < Duration::from_secs(2));
    let text = String::from_utf8_lossy(&got).to_lowercase();
    assert!(text.starts_with("http/1.1 503 "), "{text}");
    assert!(text.contains("\r\nconnection: close\r\n"), "{text}");
    let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
    let v: Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["error"]["code"], "too_many_connections");
    assert_eq!(v["error"]["type"], "server_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many connections")
    );

    // A health check through an ordinary client gets the same fast, clear answer.
    let r = tokio::time::timeout(
        Duration::from_secs(2),
        client().get(gw.url("/health")).send(),
    )
    .await
    .expect("an answer within 2 s")
    .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "too_many_connections"
    );

    // The busy requests were not disturbed, and once they are done there is room again.
    gate.add_permits(2);
    for chat in chats {
        assert_eq!(chat.await.unwrap(), 200);
    }
    let r = client().get(gw.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn shutdown_closes_idle_connections_at_once() {
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", None);
    s.connection_limits = limits(16, 30_000, 30_000);
    s.drain_timeout = Duration::from_secs(20);
    let gw = start(s).await;
    let mut silent = TcpStream::connect(gw.addr).await.unwrap();
    let mut kept = TcpStream::connect(gw.addr).await.unwrap();
    kept.write_all(HEALTH).await.unwrap();
    let (head, _) = read_response(&mut kept).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");

    let stopping = Instant::now();
    gw.stop(ShutdownRequest::Stop).await.unwrap();
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "idle connections held the drain for {:?}",
        stopping.elapsed()
    );
    for conn in [&mut silent, &mut kept] {
        assert!(
            read_until_closed(conn, Duration::from_secs(1))
                .await
                .is_empty()
        );
    }
}
