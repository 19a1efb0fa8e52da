//! A supervisor's restart of a native gateway: the gateway adopts the listening socket the
//! supervisor passed instead of binding; two gateways in turn serve one socket without
//! refusing the client that came between them; a stop lets a stream that ends in time finish
//! and cuts one longer than `drain_timeout`, counting both (`gateway_drains.json`, the log,
//! `/metrics`); a hand-over successor serves while its predecessor (a real second process)
//! still holds `gateway.lock`, and takes the lock when it lets go.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::time::Duration;

use hermes_gateway::lock::{PID_FILE, is_held, read_holder};
use hermes_gateway::{Error, Inherited, NoopRecorder, ShutdownRequest};
use hermes_test_support::logs::Lines;
use hermes_test_support::poll::until_true;
use serde_json::json;

use crate::lifecycle::{CHILD_GATEWAY, spawn_child, wait_child, wait_for_holder};
use crate::support::{Upstream, client, echo_of, settings, sse_data, sse_text, start, start_with};

/// A loopback listener, as the supervisor binds a gateway's API address once.
fn supervisor_socket() -> (TcpListener, SocketAddr) {
    let socket = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, addr)
}

/// A copy of the supervisor's socket passed to one gateway under `name` (the supervisor keeps
/// its own).
fn passed(socket: &TcpListener, name: &str) -> Inherited {
    let fd = OwnedFd::from(socket.try_clone().unwrap());
    Inherited::from_fds([(name.to_string(), fd)]).unwrap()
}

fn logged(lines: &Lines, text: &str) -> bool {
    lines.all().iter().any(|l| l.contains(text))
}

#[tokio::test]
async fn an_inherited_listener_is_served_and_nothing_is_bound() {
    let lines = Lines::of_this_thread();
    let (socket, addr) = supervisor_socket();
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", None);
    // The supervisor's own port: binding it again would fail (port in use), so a gateway that
    // serves at all serves on the passed socket.
    s.port = addr.port();
    let gw = start_with(s, passed(&socket, "api")).await;
    assert_eq!(gw.addr, addr);
    let h = client().get(gw.url("/health")).send().await.unwrap();
    assert_eq!(h.status(), 200);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
    assert!(
        logged(
            &lines,
            &format!("adopted the supervisor's socket for {addr}")
        ),
        "{:#?}",
        lines.all()
    );
    // The gateway closed its copy only: the socket still takes connections (into its backlog).
    TcpStream::connect(addr).unwrap();

    // Not named `api`, but on the bind address: adopted too. Port 0 asked for, the passed
    // socket named `api` is served whatever port the supervisor got.
    let mut s = settings(home.path(), "work", None);
    s.port = addr.port();
    let gw = start_with(s, passed(&socket, "web")).await;
    assert_eq!(gw.addr, addr);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
    let gw = start_with(settings(home.path(), "work", None), passed(&socket, "api")).await;
    assert_eq!(gw.addr, addr);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn a_passed_socket_named_api_that_does_not_listen_is_an_error() {
    let home = tempfile::tempdir().unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let sockets = Inherited::from_fds([("api".to_string(), OwnedFd::from(udp))]).unwrap();
    let err = hermes_gateway::run_with(
        settings(home.path(), "work", None),
        &NoopRecorder,
        async {},
        sockets,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::Serve { .. }), "{err:?}");
    assert!(
        hermes_errors::one_line(&err).contains("is not a listening TCP socket"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_in_turn_on_one_socket_answer_a_client_that_came_between() {
    let (socket, addr) = supervisor_socket();
    let home = tempfile::tempdir().unwrap();
    let first = start_with(settings(home.path(), "work", None), passed(&socket, "api")).await;
    let h = client().get(first.url("/health")).send().await.unwrap();
    assert_eq!(h.status(), 200);
    first.stop(ShutdownRequest::Stop).await.unwrap();

    // No gateway serves now: the connection is accepted by the kernel into the supervisor's
    // socket and its request waits there.
    let mut waiting = TcpStream::connect(addr).unwrap();
    waiting
        .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let answer = tokio::task::spawn_blocking(move || {
        let mut answer = String::new();
        waiting.read_to_string(&mut answer).map(|_| answer)
    });

    let second = start_with(settings(home.path(), "work", None), passed(&socket, "api")).await;
    let answer = answer.await.unwrap().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""status":"ok""#), "{answer}");
    second.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn a_stop_drains_a_stream_that_ends_in_time_and_cuts_one_that_does_not() {
    let lines = Lines::of_this_thread();
    let up = Upstream::start().await;
    *up.state.chunk_delay.lock().unwrap() = Duration::from_millis(100);
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", Some(&up));
    s.drain_timeout = Duration::from_secs(2);
    let gw = start(s).await;

    let stream = |text: &str| {
        client()
            .post(gw.url("/v1/chat/completions"))
            .header("authorization", "Bearer gw-key")
            .json(&json!({"stream": true, "messages": [{"role": "user", "content": text}]}))
            .send()
    };
    // One chunk every 100 ms: four (half a second), and a hundred and one (ten seconds).
    let short_text = "one two three";
    let long_text: Vec<String> = (0..100).map(|i| format!("w{i}")).collect();
    let mut short = stream(short_text).await.unwrap();
    let mut long = stream(&long_text.join(" ")).await.unwrap();
    // Both in flight: each has sent its first event.
    let mut short_body = String::from_utf8(short.chunk().await.unwrap().unwrap().to_vec()).unwrap();
    let mut long_body = String::from_utf8(long.chunk().await.unwrap().unwrap().to_vec()).unwrap();

    let stopping = tokio::spawn(gw.stop(ShutdownRequest::Stop));
    while let Some(c) = short.chunk().await.unwrap() {
        short_body.push_str(std::str::from_utf8(&c).unwrap());
    }
    let data = sse_data(&short_body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(sse_text(&data), echo_of(short_text));

    // The long one is cut at the drain timeout: its body ends without `[DONE]`.
    while let Ok(Some(c)) = long.chunk().await {
        long_body.push_str(std::str::from_utf8(&c).unwrap());
    }
    assert!(!long_body.contains("[DONE]"), "{long_body}");
    stopping.await.unwrap().unwrap();

    let drains = hermes_home::drains::read(home.path()).unwrap();
    assert_eq!((drains.drained_total, drains.cut_total), (1, 1));
    let last = drains.last.unwrap();
    assert_eq!(last.pid, std::process::id());
    assert!(
        (2.0..10.0).contains(&last.seconds),
        "the drain took {}",
        last.seconds
    );
    assert!(logged(&lines, "drained 1 request in"), "{:#?}", lines.all());
    assert!(
        logged(
            &lines,
            "cut 1 request still running after the drain timeout (2s)"
        ),
        "{:#?}",
        lines.all()
    );

    // The next gateway of the profile reports them.
    let gw = start(settings(home.path(), "work", Some(&up))).await;
    let text = client()
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        "# TYPE hermes_gateway_drained_requests_total counter",
        "hermes_gateway_drained_requests_total 1",
        "# TYPE hermes_gateway_cut_requests_total counter",
        "hermes_gateway_cut_requests_total 1",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
    }
    gw.stop(ShutdownRequest::Stop).await.unwrap();
    // Its own drain (nothing in flight) adds nothing.
    let drains = hermes_home::drains::read(home.path()).unwrap();
    assert_eq!((drains.drained_total, drains.cut_total), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_successor_serves_beside_its_predecessor_and_takes_the_lock_when_it_lets_go() {
    let home = tempfile::tempdir().unwrap();
    let lock_path = home.path().join("gateway.lock");
    let pid_path = home.path().join(PID_FILE);
    let mut child = spawn_child("child_gateway", CHILD_GATEWAY, home.path());
    wait_for_holder(home.path(), child.id());

    // Handed over from a process that does not hold the lock: refused as ever.
    let mut other = settings(home.path(), "work", None);
    other.handover_from = Some(std::process::id());
    let err = hermes_gateway::run(other, &NoopRecorder, async {})
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::AlreadyRunning { pid: Some(p), .. } if p == child.id() as i32),
        "{err:?}"
    );

    let mut s = settings(home.path(), "work", None);
    s.handover_from = Some(child.id());
    let gw = start(s).await;
    let h = client().get(gw.url("/health")).send().await.unwrap();
    assert_eq!(
        h.status(),
        200,
        "serving while the predecessor holds the lock"
    );
    assert_eq!(read_holder(&lock_path).unwrap().pid, child.id() as i32);

    // The supervisor stops the predecessor once the successor is ready.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = wait_child(&mut child);
    assert_eq!(status.code(), Some(0), "the predecessor drained and exited");
    let me = std::process::id() as i32;
    until_true(
        "the successor to take the lock",
        Duration::from_secs(30),
        || read_holder(&lock_path).is_some_and(|r| r.pid == me),
    );
    let named: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pid_path).unwrap()).unwrap();
    assert_eq!(named["pid"], me, "gateway.pid is the successor's");
    let h = client().get(gw.url("/health")).send().await.unwrap();
    assert_eq!(h.status(), 200);

    gw.stop(ShutdownRequest::Stop).await.unwrap();
    assert!(!is_held(&lock_path));
    assert!(!pid_path.exists(), "removed with the lock");
}
