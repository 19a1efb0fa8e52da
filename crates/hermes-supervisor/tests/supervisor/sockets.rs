//! Held sockets: bound once by the supervisor, passed with systemd's protocol, kept across
//! hand-overs and crashes (no connection refused), closed when the service is stopped.

use std::io::Read;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hermes_supervisor::StateName;

use crate::common::Harness;

const CONFIG: &str = r#"
services:
  web:
    command: ["$SUPERVISE", "serve", "--ready-after-ms", "300", "--drain-ms", "200"]
    listen: "127.0.0.1:0"
    handover: true
    restart: on-failure
"#;

/// One connection: the answering pid and the socket names it was given.
fn ask(addr: &str) -> std::io::Result<(i32, String)> {
    let mut conn = TcpStream::connect(addr)?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut text = String::new();
    conn.read_to_string(&mut text)?;
    let (pid, names) = text
        .trim()
        .split_once(' ')
        .ok_or_else(|| std::io::Error::other(format!("bad answer {text:?}")))?;
    Ok((
        pid.parse().map_err(std::io::Error::other)?,
        names.to_string(),
    ))
}

/// A client connecting over and over until stopped: the pids that answered, and every failure.
struct Load {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Vec<i32>, Vec<String>)>,
}

impl Load {
    fn start(addr: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let (mut pids, mut failures) = (Vec::new(), Vec::new());
            while !stopping.load(Ordering::SeqCst) {
                match ask(&addr) {
                    Ok((pid, _)) => {
                        if pids.last() != Some(&pid) {
                            pids.push(pid);
                        }
                    }
                    Err(e) => failures.push(e.to_string()),
                }
                std::thread::sleep(Duration::from_millis(3));
            }
            (pids, failures)
        });
        Self { stop, thread }
    }

    fn finish(self) -> (Vec<i32>, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

#[test]
fn a_held_socket_survives_hand_overs_and_crashes_and_closes_on_stop() {
    let h = Harness::start(CONFIG, &[]);
    let first = h.wait_state("web", StateName::Up);
    assert_eq!(first.listening.len(), 1, "{first:?}");
    let addr = first.listening[0].clone();
    let (pid, names) = ask(&addr).unwrap();
    assert_eq!(Some(pid), first.pid, "LISTEN_PID named the child itself");
    assert_eq!(names, "web");

    // Hand-overs under load: nothing refused, and the old process drains after the new one
    // is ready.
    let load = Load::start(addr.clone());
    let mut c = h.client();
    let mut pid = first.pid.unwrap();
    for _ in 0..3 {
        c.restart("web").unwrap();
        h.wait_for("the hand-over", || {
            h.status("web").is_ok_and(|s| {
                s.state == StateName::Up && s.pid != Some(pid) && s.draining.is_empty()
            })
        });
        let st = h.status("web").unwrap();
        let handover = st.handover.clone().unwrap();
        assert_eq!(handover.from_pid, pid, "{st:?}");
        assert!(handover.ready_secs.unwrap() >= 0.3, "{handover:?}");
        assert!(handover.drained_secs.is_some(), "{handover:?}");
        assert_eq!(st.listening, vec![addr.clone()], "the same socket");
        pid = st.pid.unwrap();
    }
    // A crash: the next process takes the waiting connections.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    h.wait_for("the restart after the crash", || {
        h.status("web")
            .is_ok_and(|s| s.state == StateName::Up && s.pid != Some(pid))
    });
    std::thread::sleep(Duration::from_millis(100));
    let (pids, failures) = load.finish();
    assert!(failures.is_empty(), "refused or broken: {failures:?}");
    assert!(pids.len() >= 5, "every process answered in turn: {pids:?}");

    // Stopped: the socket is closed, so a client is refused instead of waiting.
    c.stop("web").unwrap();
    h.wait_state("web", StateName::Down);
    h.wait_for("the socket to close", || TcpStream::connect(&addr).is_err());
    assert!(
        h.log("web").contains("closed its socket(s)"),
        "{}",
        h.log("web")
    );
}

/// A service that crash-loops does not leave its clients waiting: while it waits out the loop
/// its socket is closed (a connection is refused at once), and its next start binds it again.
#[test]
fn a_crash_looping_service_refuses_clients_instead_of_holding_them() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!(
        r#"
services:
  web:
    command: ["sh", "-c", "sleep 0.2; exit 3"]
    listen: "127.0.0.1:{port}"
    restart: on-failure
"#
    );
    let h = Harness::start(&config, &[]);
    let addr = format!("127.0.0.1:{port}");
    h.wait_for("a crash loop with its socket closed", || {
        h.status("web").is_ok_and(|s| {
            s.state == StateName::Backoff
                && s.reason.starts_with("crash loop")
                && s.listening.is_empty()
        }) && TcpStream::connect(&addr).is_err()
    });
    assert!(
        h.log("web").contains("while it crash-loops"),
        "{}",
        h.log("web")
    );
    // Its next start holds the socket again (the process is handed it while it runs).
    h.wait_for("the socket held again for a new start", || {
        h.status("web")
            .is_ok_and(|s| s.listening == vec![addr.clone()])
    });
}

#[test]
fn a_successor_that_fails_leaves_the_old_one_serving() {
    let config = r#"
services:
  web:
    command: ["sh", "-c", "test -e $DIR/broken && exit 78; exec $SUPERVISE serve"]
    listen: "127.0.0.1:0"
    handover: true
    restart: on-failure
"#;
    let h = Harness::start(config, &["--settle-ms", "500"]);
    let st = h.wait_state("web", StateName::Up);
    let addr = st.listening[0].clone();
    std::fs::write(h.path("broken"), "").unwrap();
    h.client().restart("web").unwrap();
    h.wait_for("the hand-over to fail", || {
        h.status("web")
            .is_ok_and(|s| s.handover.as_ref().is_some_and(|h| h.failed.is_some()))
    });
    let now = h.status("web").unwrap();
    assert_eq!((now.state, now.pid), (StateName::Up, st.pid), "{now:?}");
    assert_eq!(ask(&addr).unwrap().0, st.pid.unwrap());
}

#[test]
fn a_changed_address_is_bound_at_the_next_restart_and_said() {
    let h = Harness::start(CONFIG, &[]);
    let st = h.wait_state("web", StateName::Up);
    let old = st.listening[0].clone();
    let mut spec = hermes_supervisor::ServiceSpec::shell("web", "unused");
    spec.listen = vec![hermes_supervisor::Listen::new("web", "127.0.0.1:0")];
    spec.listen[0].address = "127.0.0.2:0".into();
    spec.handover = true;
    spec.stop_grace = Duration::from_secs(10);
    let mut c = h.client();
    c.listen(&spec).unwrap();
    assert_eq!(
        h.status("web").unwrap().listening,
        vec![old.clone()],
        "kept until the restart"
    );
    c.restart("web").unwrap();
    h.wait_for("the new address", || {
        h.status("web").is_ok_and(|s| {
            s.state == StateName::Up
                && s.listening
                    .first()
                    .is_some_and(|a| a.starts_with("127.0.0.2:"))
        })
    });
    let new = h.status("web").unwrap().listening[0].clone();
    assert!(ask(&new).is_ok());
    assert!(
        h.log("web")
            .contains("changed from 127.0.0.1:0 to 127.0.0.2:0: re-binding"),
        "{}",
        h.log("web")
    );
    h.wait_for("the old socket to close", || {
        TcpStream::connect(&old).is_err()
    });

    let mut bad = spec.clone();
    bad.listen[0].address = "nowhere".into();
    let e = c.listen(&bad).unwrap_err();
    assert!(e.to_string().contains("not `host:port`"), "{e}");
}
