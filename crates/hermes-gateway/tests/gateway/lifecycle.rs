//! The gateway's lifecycle through `run`: phases recorded, exit reasons, configuration
//! errors, the single-instance lock, `--replace` takeover (from a real second process),
//! port collisions, sd_notify readiness, and draining in-flight streams on shutdown.
//!
//! The takeover tests (and `handover`'s) re-run this test binary as the process to take over
//! from: the `child_*` functions below do nothing unless the environment variable naming their
//! role is set, in which case they become that helper process.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use hermes_test_support::poll::{until, until_true};
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{MemoryRecorder, Upstream, client, settings, sse_data, sse_text, start};
use hermes_gateway::lock::{GatewayLock, LockRecord, read_holder};
use hermes_gateway::{Error, ExitReason, NoopRecorder, Phase, ShutdownRequest};
use serde_json::json;

pub(crate) const CHILD_GATEWAY: &str = "HERMES_GW_TEST_CHILD_GATEWAY";
const CHILD_STUBBORN: &str = "HERMES_GW_TEST_CHILD_STUBBORN";

/// Helper process: a real gateway in the given home, stopping on SIGTERM.
#[test]
fn child_gateway() {
    let Ok(home) = std::env::var(CHILD_GATEWAY) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let code = rt.block_on(async move {
        let s = settings(&PathBuf::from(&home), "work", None);
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
        let shutdown = async move {
            term.recv().await;
        };
        match hermes_gateway::run(s, &NoopRecorder, shutdown).await {
            Ok(reason) => i32::from(reason.exit_code()),
            Err(_) => 1,
        }
    });
    std::process::exit(code);
}

/// Helper process: holds the lock and ignores SIGTERM (only SIGKILL ends it).
#[test]
fn child_stubborn() {
    let Ok(home) = std::env::var(CHILD_STUBBORN) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        // Registering a handler replaces the default "terminate" action with "deliver here".
        let _term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).unwrap();
        let home = PathBuf::from(home);
        let rec = LockRecord::for_this_process(vec!["stubborn".into()], &home);
        let _lock = GatewayLock::acquire(&home.join("gateway.lock"), "work", &rec, None).unwrap();
        tokio::time::sleep(Duration::from_secs(120)).await;
    });
}

/// Runs the helper test `role` of this module alone in a process of its own (it takes signals
/// and the profile's lock, so it must not share the test process).
pub(crate) fn spawn_child(role: &str, env: &str, home: &std::path::Path) -> Child {
    // Test names are paths inside the binary: `lifecycle::child_gateway`.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let name = format!("{module}::{role}");
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &name, "--nocapture", "--test-threads=1"])
        .env(env, home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until the lock file names `pid` as holder.
pub(crate) fn wait_for_holder(home: &std::path::Path, pid: u32) {
    until_true(
        "the child to take the lock",
        Duration::from_secs(60),
        || read_holder(&home.join("gateway.lock")).is_some_and(|r| r.pid == pid as i32),
    );
}

pub(crate) fn wait_child(child: &mut Child) -> std::process::ExitStatus {
    until("the child to exit", Duration::from_secs(60), || {
        child.try_wait().unwrap()
    })
}

#[tokio::test]
async fn phases_on_clean_stop_and_restart_request() {
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", None)).await;
    let rec = std::sync::Arc::clone(&gw.recorder);
    let reason = gw.stop(ShutdownRequest::Stop).await.unwrap();
    assert!(matches!(reason, ExitReason::Stopped));
    assert_eq!(reason.exit_code(), 0);
    assert_eq!(
        rec.phases(),
        vec![Phase::Starting, Phase::Running, Phase::Stopped]
    );
    assert_eq!(rec.last_reason().as_deref(), Some("stopped"));
    assert_eq!(
        rec.exits(),
        vec![(0, "stopped".to_owned())],
        "the ledger's exit"
    );

    let gw = start(settings(home.path(), "work", None)).await;
    let rec = std::sync::Arc::clone(&gw.recorder);
    let reason = gw.stop(ShutdownRequest::Restart).await.unwrap();
    assert!(matches!(reason, ExitReason::RestartRequested));
    assert_eq!(reason.exit_code(), 75);
    assert_eq!(rec.last_reason().as_deref(), Some("restart requested"));
    assert_eq!(rec.exits(), vec![(75, "restart requested".to_owned())]);
}

#[tokio::test]
async fn non_loopback_without_key_is_a_config_error() {
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", None);
    s.host = "0.0.0.0".into();
    s.api_key = None;
    let rec = MemoryRecorder::default();
    let reason = hermes_gateway::run(s, &rec, async {}).await.unwrap();
    assert_eq!(reason.exit_code(), 78);
    match &reason {
        ExitReason::ConfigError(e) => {
            assert!(matches!(
                e,
                Error::Settings(hermes_gateway_settings::Error::UnauthenticatedPublicBind { .. })
            ));
            assert!(e.hint().unwrap().contains("API_SERVER_KEY"));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(rec.phases(), vec![Phase::Starting, Phase::StartupFailed]);
    assert!(rec.exits().is_empty(), "never claimed the ledger");
    assert!(rec.last_reason().unwrap().contains("API_SERVER_KEY"));
    assert!(
        !home.path().join("gateway.lock").exists(),
        "nothing is started on a config error"
    );
}

#[tokio::test]
async fn second_instance_is_refused_while_the_lock_is_held() {
    let home = tempfile::tempdir().unwrap();
    let first = start(settings(home.path(), "work", None)).await;

    let rec = MemoryRecorder::default();
    let err = hermes_gateway::run(settings(home.path(), "work", None), &rec, async {})
        .await
        .unwrap_err();
    match &err {
        Error::AlreadyRunning { pid, .. } => assert_eq!(*pid, Some(std::process::id() as i32)),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(err.exit_code(), 1);
    assert!(err.to_string().contains("already running"), "{err}");
    assert_eq!(
        rec.phases(),
        vec![],
        "a refused start records nothing: the record is the running gateway's"
    );

    // Nor does a configuration error while the profile's gateway runs.
    let mut bad = settings(home.path(), "work", None);
    bad.host = "0.0.0.0".into();
    bad.api_key = None;
    let rec = MemoryRecorder::default();
    let reason = hermes_gateway::run(bad, &rec, async {}).await.unwrap();
    assert_eq!(reason.exit_code(), 78);
    assert_eq!(rec.phases(), vec![]);
    let pid_file = home.path().join("gateway.pid");
    let named: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pid_file).unwrap()).unwrap();
    assert_eq!(
        named["pid"],
        std::process::id(),
        "gateway.pid is the first one's"
    );

    // The first one is unaffected.
    let h = client().get(first.url("/health")).send().await.unwrap();
    assert_eq!(h.status(), 200);
    first.stop(ShutdownRequest::Stop).await.unwrap();
    let record = read_holder(&home.path().join("gateway.lock")).unwrap();
    assert_eq!(record.kind, "hermes-gateway");
    assert!(!pid_file.exists(), "removed with the lock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_takes_over_from_a_running_gateway_process() {
    let home = tempfile::tempdir().unwrap();
    let mut child = spawn_child("child_gateway", CHILD_GATEWAY, home.path());
    wait_for_holder(home.path(), child.id());

    // Without --replace: refused.
    let err = hermes_gateway::run(settings(home.path(), "work", None), &NoopRecorder, async {})
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyRunning { pid: Some(p), .. } if p == child.id() as i32));

    let mut s = settings(home.path(), "work", None);
    s.replace = true;
    s.replace_timeout = Duration::from_secs(20);
    let gw = start(s).await;
    let status = wait_child(&mut child);
    assert_eq!(
        status.code(),
        Some(0),
        "the old gateway drained and exited cleanly"
    );
    let holder = read_holder(&home.path().join("gateway.lock")).unwrap();
    assert_eq!(holder.pid, std::process::id() as i32);
    let h = client().get(gw.url("/health")).send().await.unwrap();
    assert_eq!(h.status(), 200);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_kills_a_holder_that_ignores_sigterm() {
    let home = tempfile::tempdir().unwrap();
    let mut child = spawn_child("child_stubborn", CHILD_STUBBORN, home.path());
    wait_for_holder(home.path(), child.id());

    let mut s = settings(home.path(), "work", None);
    s.replace = true;
    s.replace_timeout = Duration::from_millis(500);
    let gw = start(s).await;
    let status = wait_child(&mut child);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(9),
        "SIGKILL after the timeout: {status:?}"
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn port_in_use_is_reported_not_shared() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", None);
    s.port = port;
    let rec = MemoryRecorder::default();
    let err = hermes_gateway::run(s, &rec, async {}).await.unwrap_err();
    assert!(
        matches!(err, Error::PortInUse { port: p, .. } if p == port),
        "{err:?}"
    );
    assert!(err.to_string().contains(&port.to_string()));
    assert!(err.hint().unwrap().contains("API_SERVER_PORT"));
    assert_eq!(rec.phases(), vec![Phase::Starting, Phase::StartupFailed]);
    // The lock was released with the failed start: a new start works.
    let gw = start(settings(home.path(), "work", None)).await;
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn ready_is_sent_to_the_notify_socket() {
    let home = tempfile::tempdir().unwrap();
    let sock_path = home.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut s = settings(home.path(), "work", None);
    s.notify_socket = Some(sock_path.display().to_string());
    let gw = start(s).await;
    let mut buf = [0u8; 64];
    let n = sock.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_an_in_flight_stream() {
    let up = Upstream::start().await;
    *up.state.chunk_delay.lock().unwrap() = Duration::from_millis(150);
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;

    let mut r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", "Bearer gw-key")
        .json(&json!({"stream": true, "messages": [{"role": "user", "content": "one two three four five"}]}))
        .send()
        .await
        .unwrap();
    let mut body = String::from_utf8(r.chunk().await.unwrap().unwrap().to_vec()).unwrap();

    let stopping = tokio::spawn(gw.stop(ShutdownRequest::Stop));
    while let Some(c) = r.chunk().await.unwrap() {
        body.push_str(std::str::from_utf8(&c).unwrap());
    }
    let data = sse_data(&body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(
        sse_text(&data),
        crate::support::echo_of("one two three four five")
    );
    let reason = stopping.await.unwrap().unwrap();
    assert!(matches!(reason, ExitReason::Stopped));
}
