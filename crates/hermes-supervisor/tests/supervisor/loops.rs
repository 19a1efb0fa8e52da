//! Loops that must not run hot: a service that always asks for a restart (exit 75), and the
//! event loop itself when `poll` keeps failing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::time::{Duration, Instant};

use common::{Harness, cpu_ticks};
use hermes_supervisor::StateName;

#[test]
fn a_service_that_always_asks_for_a_restart_backs_off_into_a_crash_loop() {
    let h = Harness::start(
        r#"
services:
  again:
    command: "echo x >> $DIR/starts; exit 75"
"#,
        &[],
    );
    // How many starts fit in 3 s is checked with injected time
    // (`machine::tests::a_service_always_asking_for_a_restart_starts_six_times_in_three_seconds`);
    // here, without a fixed window, that it reaches the crash loop after a few starts.
    h.wait_for("the crash-loop reason", || {
        h.status("again")
            .is_ok_and(|s| s.state == StateName::Backoff && s.reason.contains("crash loop"))
    });
    let starts = h.read("starts").lines().count();
    assert!(starts < 20, "{starts} starts before the crash loop");
    let s = h.status("again").unwrap();
    assert!(s.reason.contains("exit 75"), "{}", s.reason);
}

#[test]
fn an_immediate_retry_reads_retrying_now() {
    let h = Harness::start(
        r#"
services:
  settled:
    command: "sleep 0.3; exit 1"
"#,
        &["--settle-ms", "100"],
    );
    h.wait_for("the retry note", || {
        h.stdout()
            .contains("[settled] [hermes] exited with code 1; retrying")
    });
    let out = h.stdout();
    assert!(out.contains("exited with code 1; retrying now"), "{out}");
    assert!(!out.contains("retrying in now"), "{out}");
}

/// Lowers the soft `RLIMIT_NOFILE` of `pid` (the hard limit stays).
fn limit_open_files(pid: u32, soft: u64) {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: reads the current limits into a local struct; no new limit is passed.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            std::ptr::null(),
            &mut old,
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let new = libc::rlimit {
        rlim_cur: soft,
        rlim_max: old.rlim_max,
    };
    #[allow(unsafe_code)]
    // SAFETY: passes a pointer to a local struct the kernel only reads.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &new,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// `poll` fails with `EINVAL` for as long as it watches more descriptors than
/// `RLIMIT_NOFILE` allows — a persistent error. The loop must neither spin on it nor stop
/// reading its signals.
#[test]
fn a_persistent_poll_error_neither_spins_nor_ignores_sigterm() {
    let mut config = String::from("services:\n");
    for i in 0..4 {
        config.push_str(&format!("  svc-{i}:\n    command: \"exec sleep 600\"\n"));
    }
    let mut h = Harness::start(&config, &["--settle-ms", "100"]);
    for i in 0..4 {
        h.wait_state(&format!("svc-{i}"), StateName::Up);
    }
    let pid = h.pid();
    // 2 + 4 notify sockets + 8 pipes are watched: more than 8.
    limit_open_files(pid, 8);
    // Wake the loop (a signal it reads and ignores) so that it polls again.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGUSR1,
    )
    .unwrap();
    let t0 = cpu_ticks(pid);
    // A fixed observation window: what is measured is the CPU used in it.
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(pid) - t0;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as u64;
    assert!(
        used < hz / 2,
        "the loop used {used} ticks of CPU in 2 s ({hz} ticks/s) while poll failed"
    );
    h.wait_for("the poll failure to be reported", || {
        h.stdout().contains("[hermes] poll failed")
    });
    let t = Instant::now();
    assert_eq!(h.terminate(), 0);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "SIGTERM took {:?}",
        t.elapsed()
    );
}
