//! End-to-end tests of the supervisor with real processes.
//!
//! Table of contents:
//! * restart policy — every exit class (78, 0, 75, other, signal) under real processes
//! * backoff timing — fast first retry, doubling, crash loop wording
//! * readiness — `NOTIFY_SOCKET` + `READY=1` beats a long settle time
//! * stop — escalation to SIGKILL for a service that ignores SIGTERM; hooks fire
//! * reaping — an escaped grandchild is re-parented to us and reaped
//! * logs — rotation; a 10 MB line is truncated and counted, the loop keeps serving
//! * control — unregister during a crash loop, register at run time, foreign uid refused,
//!   garbage / oversized / idle clients while a crashed service is still restarted on time
//! * lifecycle — single instance, SIGTERM stops everything

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Harness, is_root, stamps, supervise_bin};
use hermes_supervisor::{
    Error, ErrorCode, ExitStatus, Options, ServiceSpec, StateName, Supervisor,
};

#[test]
fn restart_policy_every_exit_class() {
    let h = Harness::start(
        r#"
services:
  cfg:
    command: "exit 78"
  clean:
    command: "exit 0"
    restart: on-failure
  never:
    command: "exit 3"
    restart: never
  tempfail:
    command: "echo x >> $DIR/tempfail.count; [ $(wc -l < $DIR/tempfail.count) -lt 5 ] && exit 75; exec sleep 60"
  crash:
    command: "exit 1"
  killed:
    command: "kill -9 $$"
    restart: never
"#,
        &["--backoff-ms", "50"],
    );
    let s = h.wait_state("cfg", StateName::Failed);
    assert_eq!(s.last_exit, Some(ExitStatus::Code(78)));
    assert!(s.reason.contains("configuration error"), "{}", s.reason);
    assert_eq!(s.restarts, 0);

    let s = h.wait_state("clean", StateName::Down);
    assert_eq!((s.last_exit, s.restarts), (Some(ExitStatus::Code(0)), 0));

    let s = h.wait_state("never", StateName::Failed);
    assert_eq!((s.last_exit, s.restarts), (Some(ExitStatus::Code(3)), 0));

    let s = h.wait_state("killed", StateName::Failed);
    assert_eq!(s.last_exit, Some(ExitStatus::Signal(9)));

    // 75: four restarts (the first at once, the next ones backing off like failures), then it
    // stays. The fifth process has written its line
    // once the count reaches 5 (its pid alone appears before it runs).
    let runs = || h.read("tempfail.count").lines().count();
    h.wait_for("tempfail to settle", || {
        runs() == 5
            && h.status("tempfail")
                .is_ok_and(|s| s.restarts == 4 && s.pid.is_some())
    });
    h.let_the_loop_run("crash", 2);
    assert_eq!(runs(), 5, "no sixth start");
    let s = h.status("tempfail").unwrap();
    assert_eq!(s.last_exit, Some(ExitStatus::Code(75)));

    // Anything else: restarted again and again.
    h.wait_for("crash restarts", || {
        h.status("crash").is_ok_and(|s| s.restarts >= 3)
    });
    assert_eq!(
        h.status("crash").unwrap().last_exit,
        Some(ExitStatus::Code(1))
    );

    // Failed services stay failed (no silent restarts).
    h.let_the_loop_run("crash", 1);
    assert_eq!(h.status("cfg").unwrap().restarts, 0);
}

#[test]
fn backoff_is_fast_first_then_doubles_and_reports_a_crash_loop() {
    let h = Harness::start(
        r#"
services:
  crash:
    command: "date +%s%N >> $DIR/starts; exit 1"
"#,
        &["--backoff-ms", "50"],
    );
    h.wait_for("7 starts", || stamps(&h.read("starts")).len() >= 7);
    let t = stamps(&h.read("starts"));
    let gaps: Vec<Duration> = t.windows(2).map(|w| w[1].saturating_sub(w[0])).collect();
    // Nominal gaps: 50, 100, 200, 400, 800, 1600 ms (+ process start time), checked exactly
    // with injected time in `machine::tests::crash_retries_wait_50_ms_then_double`. Here
    // only what a loaded runner cannot break: it backs off (load lengthens gaps, never
    // shortens them).
    assert!(
        gaps[5] >= Duration::from_millis(1500),
        "sixth retry waits ~1.6s: {gaps:?}"
    );
    // Between a spawn and its exit the state is `starting`; catch it in `backoff`.
    h.wait_for("the crash-loop reason", || {
        h.status("crash")
            .is_ok_and(|s| s.state == StateName::Backoff && s.reason.contains("crash loop"))
    });
    assert!(
        h.stdout().contains("[crash] [hermes] crash loop"),
        "{}",
        h.stdout()
    );
}

#[test]
fn readiness_via_notify_socket() {
    let h = Harness::start(
        r#"
services:
  notifier:
    command: "sleep 0.3; $SUPERVISE notify READY=1; exec sleep 60"
  silent:
    command: "exec sleep 60"
"#,
        &["--settle-ms", "30000"],
    );
    let t0 = Instant::now();
    let s = h.wait_state("notifier", StateName::Up);
    assert!(t0.elapsed() < Duration::from_secs(15));
    assert_eq!(s.reason, "ready (notified)");
    // Without a notification, the 30 s settle time has not passed.
    assert_eq!(h.state("silent"), StateName::Starting);
}

#[test]
fn stop_escalates_to_sigkill_for_a_service_ignoring_sigterm() {
    let h = Harness::start(
        r#"
services:
  stubborn:
    command: "trap '' TERM; echo started; exec sleep 60"
    stop_grace: 1s
"#,
        &["--settle-ms", "100"],
    );
    h.wait_state("stubborn", StateName::Up);
    h.wait_for("output", || h.log("stubborn").contains("started"));
    // When the answer comes and that the state is `stopping` through the grace are checked
    // with injected time (`machine::tests::stop_answers_at_once_and_kills_exactly_when_a_1s_grace_ends`);
    // here, generously, that the answer comes before the grace has long passed.
    let t0 = Instant::now();
    h.client().stop("stubborn").unwrap();
    assert!(t0.elapsed() < common::WAIT, "stop must answer");
    let s = h.wait_state("stubborn", StateName::Down);
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "grace was honoured"
    );
    assert_eq!(s.last_exit, Some(ExitStatus::Signal(9)));
    assert_eq!(s.reason, "stopped by operator");
    assert!(
        h.log("stubborn").contains("sent SIGKILL"),
        "{}",
        h.log("stubborn")
    );
    assert!(h.stdout().contains("[hook] stubborn desired=Stopped"));
    // And it comes back on start.
    h.client().start("stubborn").unwrap();
    h.wait_for("restart", || {
        h.status("stubborn").is_ok_and(|s| s.pid.is_some())
    });
    assert!(h.stdout().contains("[hook] stubborn desired=Running"));
}

#[test]
fn escaped_grandchild_is_reaped() {
    let h = Harness::start(
        r#"
services:
  escaper:
    command: "setsid sleep 1 & echo $! > $DIR/grandchild; exit 0"
    restart: on-failure
"#,
        &[],
    );
    h.wait_state("escaper", StateName::Down);
    let pid: i32 = h.read("grandchild").trim().parse().expect("grandchild pid");
    let stat = format!("/proc/{pid}/stat");
    // While it lives, it is ours (sub-reaper); once it exits it must not stay a zombie.
    if let Ok(s) = fs::read_to_string(&stat) {
        let ppid: u32 = s
            .rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            ppid,
            h.pid(),
            "orphan should be re-parented to the supervisor"
        );
    }
    h.wait_for("grandchild reaped", || {
        !std::path::Path::new(&stat).exists()
    });
}

#[test]
fn log_rotation_keeps_n_archives() {
    let h = Harness::start(
        r#"
services:
  chatty:
    command: "i=0; while [ $i -lt 400 ]; do echo line-$i-..............................; i=$((i+1)); done; echo done; exec sleep 60"
"#,
        &["--rotate-bytes", "2000", "--archives", "3"],
    );
    h.wait_for("all output", || h.log("chatty").contains("done"));
    let dir = h.logs.join("chatty");
    for i in 1..=3 {
        let f = dir.join(format!("current.{i}"));
        let len = fs::metadata(&f).unwrap().len();
        assert!(len <= 2000 && len > 1000, "{}: {len}", f.display());
    }
    assert!(!dir.join("current.4").exists());
    let cur = h.log("chatty");
    assert!(
        cur.lines().all(|l| l.starts_with("20") && l.contains("Z ")),
        "{cur}"
    );
    // The mirror to stdout is written after the log file (and may trail it on a busy machine).
    h.wait_for("the mirror's last line", || {
        h.stdout().contains("[chatty] line-399-")
    });
}

#[test]
fn ten_megabyte_line_is_truncated_and_the_loop_keeps_serving() {
    let h = Harness::start(
        r#"
services:
  huge:
    command: "head -c 10485760 /dev/zero | tr '\\0' x; echo; echo after; exec sleep 60"
  crash:
    command: "date +%s%N >> $DIR/starts; exit 1"
"#,
        &["--backoff-ms", "50"],
    );
    let mut worst = Duration::ZERO;
    h.wait_for("the line after", || {
        let t = Instant::now();
        let _ = h.client().status(None).unwrap();
        worst = worst.max(t.elapsed());
        h.log("huge").contains("after")
    });
    assert!(
        worst < Duration::from_secs(3),
        "status took {worst:?} during the flood"
    );
    let log = h.log("huge");
    assert!(log.contains("[truncated]"), "no truncation marker");
    assert!(
        log.contains("dropped 10420224 bytes of an over-long line"),
        "{}",
        &log[log.len().saturating_sub(300)..]
    );
    assert!(log.len() < 200_000, "log holds {} bytes", log.len());
    h.wait_for("the crashing service to keep restarting", || {
        stamps(&h.read("starts")).len() >= 4
    });
}

#[test]
fn unregister_during_a_crash_loop_stops_for_good() {
    let h = Harness::start(
        r#"
services:
  looper:
    command: "echo x >> $DIR/starts; sleep 0.2; exit 1"
    stop_grace: 2s
  clock:
    command: "exit 1"
"#,
        &["--backoff-ms", "20"],
    );
    h.wait_for("a few starts", || h.read("starts").lines().count() >= 4);
    let mut c = common::Harness::client(&h);
    c.unregister("looper").unwrap();
    let n = h.read("starts").lines().count();
    match h.status("looper") {
        Err(Error::Refused { code, .. }) => assert_eq!(code, ErrorCode::UnknownService),
        other => panic!("expected unknown_service, got {other:?}"),
    }
    // Longer than looper's backoff and run time, measured in restarts of another service.
    h.let_the_loop_run("clock", 4);
    assert_eq!(
        h.read("starts").lines().count(),
        n,
        "no start after unregister"
    );
    // Idempotent.
    h.client().unregister("looper").unwrap();
    // Register it again at run time, as a new spec.
    let mut spec = ServiceSpec::shell("looper", "exec sleep 60");
    spec.stop_grace = Duration::from_secs(2);
    h.client().register(spec.clone()).unwrap();
    h.wait_for("re-registered", || {
        h.status("looper").is_ok_and(|s| s.pid.is_some())
    });
    h.client().register(spec).unwrap(); // same spec again: fine
    let other = ServiceSpec::shell("looper", "exec sleep 61");
    match h.client().register(other) {
        Err(Error::Refused { code, .. }) => assert_eq!(code, ErrorCode::AlreadyRegistered),
        r => panic!("{r:?}"),
    }
}

#[test]
#[allow(clippy::print_stderr)] // the "skipping: <reason>" line is the point
fn foreign_uid_is_refused_not_hung() {
    if !is_root() {
        eprintln!("skipping: needs root to switch to uid 65534");
        return;
    }
    let h = Harness::start("services: {}\n", &[]);
    // Let uid 65534 reach the socket file, so the peer-credential check is what refuses it.
    fs::set_permissions(h.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&h.runtime, fs::Permissions::from_mode(0o755)).unwrap();
    let sock = h.runtime.join("supervisor.sock");
    assert_eq!(
        fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o660
    );
    let as_nobody = || {
        let t = Instant::now();
        let out = Command::new(supervise_bin())
            .args([
                "client",
                h.runtime.to_str().unwrap(),
                r#"{"v":1,"op":"status"}"#,
            ])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        (
            t.elapsed(),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    use std::os::unix::process::CommandExt;
    // Mode 0660: the kernel already says no.
    let (_, text) = as_nobody();
    assert!(text.contains("permission denied"), "{text}");
    // Open the file mode: SO_PEERCRED says no, with an answer.
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o666)).unwrap();
    let (took, text) = as_nobody();
    assert!(
        text.contains("\"forbidden\"") && text.contains("uid 65534"),
        "{text}"
    );
    assert!(took < Duration::from_secs(5), "refusal took {took:?}");
    // Root still gets in.
    assert!(h.client().status(None).is_ok());
}

#[test]
fn hostile_clients_never_delay_supervision() {
    let h = Harness::start(
        r#"
services:
  crash:
    command: "date +%s%N >> $DIR/starts; sleep 0.5; exit 1"
"#,
        // Settles after 100 ms, so each crash is replaced at once: a steady ~0.5 s cadence.
        &["--settle-ms", "100", "--client-deadline-ms", "3000"],
    );
    let sock = h.runtime.join("supervisor.sock");
    // Idle clients that never send a byte.
    let idle: Vec<UnixStream> = (0..20)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    // A client that sends half a request and stalls.
    let mut half = UnixStream::connect(&sock).unwrap();
    half.write_all(br#"{"v":1,"op":"sta"#).unwrap();
    // Garbage gets an answer, and the connection stays usable.
    let mut garbage = UnixStream::connect(&sock).unwrap();
    garbage
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    garbage
        .write_all(b"\x00\x01 not json at all\n{\"v\":1,\"op\":\"status\",\"service\":\"crash\"}\n")
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.iter().filter(|&&b| b == b'\n').count() < 2 {
        let n = garbage.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.lines().next().unwrap().contains("invalid_request"),
        "{text}"
    );
    assert!(
        text.lines().nth(1).unwrap().contains("\"ok\":true"),
        "{text}"
    );
    // A 100 MB line, from another thread: cut off with `too_large`.
    let big = std::thread::spawn({
        let sock = sock.clone();
        move || {
            let mut s = UnixStream::connect(&sock).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
            let chunk = vec![b'a'; 1024 * 1024];
            let mut sent = 0usize;
            for _ in 0..100 {
                match s.write_all(&chunk) {
                    Ok(()) => sent += chunk.len(),
                    Err(_) => break,
                }
            }
            let mut resp = String::new();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let _ = s.read_to_string(&mut resp);
            (sent, resp)
        }
    });
    // Meanwhile, the crashing service keeps its schedule and status stays fast.
    let before = stamps(&h.read("starts")).len();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(4) {
        let t = Instant::now();
        h.client().status(None).unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "status took {:?}",
            t.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let (sent, resp) = big.join().unwrap();
    assert!(
        sent < 100 * 1024 * 1024,
        "the server should stop reading an oversized request"
    );
    assert!(resp.contains("too_large"), "{resp:?}");
    let after = stamps(&h.read("starts")).len();
    // ~8 restarts fit in 4 s; demand half of that, flood or not.
    assert!(after >= before + 4, "restarts stalled: {before} -> {after}");
    // Idle clients were dropped after their deadline.
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut b = [0u8; 1];
        assert_eq!(
            s.read(&mut b).unwrap_or(0),
            0,
            "idle client should be closed"
        );
    }
    drop(half);
}

#[test]
fn single_instance_and_sigterm_stops_everything() {
    let mut h = Harness::start(
        r#"
services:
  a:
    command: "echo $$ > $DIR/a.pid; exec sleep 60"
  b:
    command: "trap 'echo bye; exit 0' TERM; echo $$ > $DIR/b.pid; while true; do sleep 0.1; done"
"#,
        &[],
    );
    match Supervisor::new(Options::new(&h.runtime, &h.logs), vec![]) {
        Err(Error::AlreadyRunning { pid, .. }) => assert_eq!(pid as u32, h.pid()),
        other => panic!("expected AlreadyRunning, got {other:?}"),
    }
    h.wait_for("pids", || {
        !h.read("a.pid").is_empty() && !h.read("b.pid").is_empty()
    });
    let pids: Vec<i32> = ["a.pid", "b.pid"]
        .iter()
        .map(|f| h.read(f).trim().parse().unwrap())
        .collect();
    assert_eq!(h.terminate(), 0);
    for p in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{p}")).exists(),
            "pid {p} survived"
        );
    }
    assert!(
        h.log("b").contains("bye"),
        "b got its stop signal: {}",
        h.log("b")
    );
    assert!(
        !h.runtime.join("supervisor.sock").exists(),
        "socket removed on exit"
    );
    // The lock is free again.
    let again = Supervisor::new(Options::new(&h.runtime, &h.logs), vec![]);
    assert!(again.is_ok(), "{again:?}");
}

#[test]
fn the_lock_record_is_this_supervisors_pid_and_nothing_of_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    // A record longer than ours, left by an earlier supervisor (it is overwritten in place
    // and cut to length, not truncated first).
    let lock = runtime.join("supervisor.lock");
    std::fs::write(&lock, "4294967295\nleft over from an older record\n").unwrap();
    let sup = Supervisor::new(Options::new(&runtime, dir.path().join("logs")), vec![]);
    assert!(sup.is_ok(), "{sup:?}");
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        format!("{}\n", std::process::id())
    );
}

#[test]
fn main_service_exit_ends_the_loop_with_its_code() {
    let mut h = Harness::start(
        r#"
services:
  main:
    command: "sleep 0.5; exit 7"
    restart: never
  side:
    command: "exec sleep 60"
"#,
        &["--main", "main"],
    );
    let mut child = h.child.take().unwrap();
    let t0 = Instant::now();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code();
        }
        assert!(
            t0.elapsed() < common::WAIT,
            "supervisor did not end with its main service"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(code, Some(7));
}

/// The loop blocks the signals it reads from its signalfd; a service must start with an empty
/// mask, or it would never see the SIGTERM of a stop (it would be SIGKILLed after the grace,
/// losing its clean shutdown).
#[test]
fn services_start_with_no_blocked_signals_and_stop_cleanly_on_sigterm() {
    let h = Harness::start(
        r#"
services:
  mask:
    command: "grep SigBlk /proc/self/status; exec sleep 60"
  graceful:
    command: "trap 'echo got-term; exit 0' TERM; while true; do sleep 0.1; done"
    stop_grace: 60s
"#,
        &[],
    );
    h.wait_for("the mask line in the log", || {
        h.log("mask").contains("SigBlk")
    });
    assert!(
        h.log("mask").contains("SigBlk:\t0000000000000000"),
        "{}",
        h.log("mask")
    );
    h.wait_state("graceful", StateName::Up);
    h.client().stop("graceful").unwrap();
    let t0 = Instant::now();
    h.wait_for("the trap to run", || h.log("graceful").contains("got-term"));
    h.wait_state("graceful", StateName::Down);
    assert!(
        t0.elapsed() < Duration::from_secs(30),
        "stopped by SIGTERM, not by the 60 s SIGKILL"
    );
}

/// A supervisor killed outright (SIGKILL, the OOM killer) must not leave its services running
/// as orphans that hold ports and locks: they get SIGTERM from the kernel (parent-death signal).
#[test]
fn services_do_not_outlive_a_killed_supervisor() {
    let mut h = Harness::start(
        r#"
services:
  orphan-candidate:
    command: "exec sleep 600"
"#,
        &[],
    );
    let pid = h
        .wait_state("orphan-candidate", StateName::Up)
        .pid
        .expect("a pid");
    let service = nix::unistd::Pid::from_raw(pid);
    let mut child = h.child.take().expect("supervisor process");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    // The service is re-parented and reaped by init (or a sub-reaper) once it dies.
    while nix::sys::signal::kill(service, None).is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        nix::sys::signal::kill(service, None).is_err(),
        "service {pid} outlived its supervisor"
    );
}

/// A non-root client of a root supervisor cannot register a service that runs as root: the
/// service runs as the client, whatever `run_as` says (or does not say).
#[test]
fn a_service_registered_by_a_non_root_client_runs_as_that_client() {
    use std::os::unix::process::CommandExt;
    if !is_root() {
        eprintln!("skipping: needs a root supervisor and a client switched to uid 65534");
        return;
    }
    let h = Harness::start("services: {}\n", &["--allow-uid", "65534"]);
    fs::set_permissions(h.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(&h.runtime, fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(
        h.runtime.join("supervisor.sock"),
        fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let out_file = h.dir.path().join("who");
    let register = |name: &str, run_as: &str| {
        let spec = format!(
            r#"{{"v":1,"op":"register","spec":{{"name":"{name}","argv":["/bin/sh","-c","id -u > {}.{name}; exec sleep 60"],"restart":"never","run_as":{run_as}}}}}"#,
            out_file.display()
        );
        let out = Command::new(supervise_bin())
            .args(["client", h.runtime.to_str().unwrap(), &spec])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            text.contains("\"ok\":true"),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // The output directory must be writable by uid 65534.
    fs::set_permissions(h.dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    register("asked-for-root", r#"{"uid":0,"gid":0,"groups":[0]}"#);
    register("asked-for-nothing", "null");
    for name in ["asked-for-root", "asked-for-nothing"] {
        let file = h.dir.path().join(format!("who.{name}"));
        h.wait_for(name, || {
            fs::read_to_string(&file).is_ok_and(|t| !t.is_empty())
        });
        assert_eq!(fs::read_to_string(&file).unwrap().trim(), "65534", "{name}");
    }
}

/// A start that fails names its real cause: std reports only an errno, the same `ENOENT` for
/// a missing working directory as for a missing program, which used to be blamed on the
/// program (`/bin/sh`).
#[test]
fn a_failed_start_names_its_real_cause() {
    let files = tempfile::tempdir().unwrap();
    let noexec = files.path().join("noexec");
    fs::write(&noexec, "#!/bin/sh\necho never\n").unwrap();
    fs::set_permissions(&noexec, fs::Permissions::from_mode(0o644)).unwrap();
    let noexec = noexec.display().to_string();
    let missing = files.path().join("missing").display().to_string();
    let h = Harness::start(
        &format!(
            r#"
services:
  nodir:
    command: "exec sleep 60"
    cwd: {missing}
    restart: never
  filedir:
    command: ["sleep", "60"]
    cwd: {noexec}
    restart: never
  nocmd:
    command: ["hermes-test-no-such-command"]
    restart: never
  noexec:
    command: ["{noexec}"]
    restart: never
  fine:
    command: "exec sleep 60"
    cwd: {dir}
"#,
            dir = files.path().display(),
        ),
        &[],
    );
    let reason = |name: &str| h.wait_state(name, StateName::Failed).reason;
    assert_eq!(
        reason("nodir"),
        format!(
            "cannot change to directory `{missing}` (service `nodir`): no such file or directory"
        )
    );
    assert_eq!(
        reason("filedir"),
        format!("cannot change to directory `{noexec}` (service `filedir`): not a directory")
    );
    assert_eq!(
        reason("nocmd"),
        "cannot start: `hermes-test-no-such-command`: command not found"
    );
    let denied = reason("noexec");
    assert!(
        denied.starts_with(&format!("cannot start: `{noexec}`: permission denied")),
        "{denied}"
    );
    // A directory that exists is entered: the service runs.
    h.wait_state("fine", StateName::Up);
}

/// A `command:` string runs through `/bin/sh -c`: the spawn succeeds and the shell itself
/// reports a missing command (127) or one it may not run (126); the reason says which.
#[test]
fn a_shell_commands_missing_or_unrunnable_program_is_named() {
    let files = tempfile::tempdir().unwrap();
    let noexec = files.path().join("noexec");
    fs::write(&noexec, "echo never\n").unwrap();
    fs::set_permissions(&noexec, fs::Permissions::from_mode(0o644)).unwrap();
    let h = Harness::start(
        &format!(
            r#"
services:
  missing:
    command: "hermes-test-no-such-command --flag"
    restart: never
  denied:
    command: "{}"
    restart: never
"#,
            noexec.display()
        ),
        &[],
    );
    let missing = h.wait_state("missing", StateName::Failed);
    assert!(
        missing
            .reason
            .starts_with("exited with code 127 (command not found"),
        "{}",
        missing.reason
    );
    let denied = h.wait_state("denied", StateName::Failed);
    assert!(
        denied
            .reason
            .starts_with("exited with code 126 (permission denied or not executable"),
        "{}",
        denied.reason
    );
    // The shell's own line, in the service's log, names the command.
    h.wait_for("the shell's line in the log", || {
        h.log("missing").contains("hermes-test-no-such-command")
    });
}
