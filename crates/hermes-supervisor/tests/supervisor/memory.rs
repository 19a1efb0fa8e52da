//! Memory limits and resources, with real processes: a service that allocates without bound is
//! killed at its `memory_max` and restarted with the reason said, its neighbours untouched; what
//! status says a service uses is what `/proc` says.

use std::time::Duration;

use hermes_supervisor::{Enforcement, StateName};

use crate::common::{Harness, alive, rss_kib};

/// Allocates (and touches) 8 MiB every 50 ms, forever.
const LEAK: &str = "import time\nheld = []\nwhile True:\n    held.append(b'x' * (8 << 20))\n    time.sleep(0.05)\n";

/// Holds 48 MiB, touched, then sleeps.
const HOLD: &str = "import time\nheld = b'x' * (48 << 20)\ntime.sleep(600)\n";

fn config(dir: &std::path::Path) -> String {
    std::fs::write(dir.join("leak.py"), LEAK).unwrap();
    std::fs::write(dir.join("hold.py"), HOLD).unwrap();
    "services:
  leaky:
    command: [python3, $DIR/leak.py]
    memory_max: 64MiB
  calm:
    command: [python3, $DIR/hold.py]
    memory_max: 1GiB
"
    .into()
}

#[test]
fn a_leaking_service_is_restarted_at_its_limit_and_its_neighbour_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::start(
        &config(dir.path()).replace("$DIR", &dir.path().display().to_string()),
        &[],
    );
    let calm = h.wait_state("calm", StateName::Up);
    h.wait_for("`leaky` restarted twice at its limit", || {
        h.status("leaky").is_ok_and(|s| s.restarts >= 2)
    });
    let leaky = h.status("leaky").unwrap();
    let failure = leaky.last_failure.clone().unwrap_or_default();
    assert!(
        failure.starts_with("memory limit: ") && failure.ends_with("> 64 MiB"),
        "{leaky:?}"
    );
    let limit = leaky.memory_max.expect("the limit is in status");
    assert_eq!(limit.bytes, 64 << 20);
    // This machine decides who enforces it; both say the same reason.
    assert!(matches!(
        limit.enforced_by,
        Enforcement::Sampling | Enforcement::Cgroup
    ));
    assert!(
        h.log("leaky").contains("memory limit: "),
        "{}",
        h.log("leaky")
    );
    let calm_now = h.status("calm").unwrap();
    assert_eq!(
        (calm_now.pid, calm_now.restarts),
        (calm.pid, 0),
        "the neighbour never restarts"
    );
}

#[test]
fn resources_in_status_match_proc_within_ten_percent() {
    let dir = tempfile::tempdir().unwrap();
    let h = Harness::start(
        &config(dir.path()).replace("$DIR", &dir.path().display().to_string()),
        &[],
    );
    let calm = h.wait_state("calm", StateName::Up);
    let pid = calm.pid.unwrap() as u32;
    // Until it holds its 48 MiB and two samples have passed (a CPU rate needs two).
    h.wait_for("`calm` sampled holding its memory", || {
        h.status("calm").is_ok_and(|s| {
            s.resources
                .as_ref()
                .is_some_and(|r| r.memory_bytes > 48 << 20 && r.cpu_percent.is_some())
        })
    });
    std::thread::sleep(Duration::from_millis(1100));
    let r = h.status("calm").unwrap().resources.unwrap();
    let proc_bytes = rss_kib(pid) * 1024;
    let ratio = r.memory_bytes as f64 / proc_bytes as f64;
    assert!(
        (0.9..=1.1).contains(&ratio),
        "status {} vs /proc {proc_bytes}",
        r.memory_bytes
    );
    assert_eq!(r.processes, 1);
    // Its own time and its waited-for children's (`python3` may be a wrapper that ran some).
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<u64> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse().unwrap())
        .collect();
    let ticks = fields.iter().sum::<u64>() as f64 / 100.0;
    assert!(
        (r.cpu_seconds - ticks).abs() <= (ticks * 0.1).max(0.05),
        "status {} s vs /proc {ticks} s",
        r.cpu_seconds
    );
    assert!(!r.history.is_empty());
}

/// The pids a service's runs wrote to `file`, one a line.
pub(crate) fn pids_in(file: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Forks a child that calls `setsid` (leaving the service's process group), writes its pid to
/// `$DIR/escaped` and leaks 8 MiB every 50 ms; the service's own process only sleeps.
pub(crate) const ESCAPE_AND_LEAK: &str = "import os, sys, time
if os.fork() == 0:
    os.setsid()
    with open(sys.argv[1], 'a') as f:
        f.write(f'{os.getpid()}\\n')
    held = []
    while True:
        held.append(b'x' * (8 << 20))
        time.sleep(0.05)
time.sleep(600)
";

#[test]
fn a_child_that_left_the_group_with_setsid_counts_toward_the_limit_and_dies_with_the_service() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("escape.py"), ESCAPE_AND_LEAK).unwrap();
    let escaped = dir.path().join("escaped");
    let h = Harness::start(
        &format!(
            "services:
  detached:
    command: [python3, {}, {}]
    memory_max: 64MiB
",
            dir.path().join("escape.py").display(),
            escaped.display()
        ),
        &[],
    );
    h.wait_for("`detached` restarted at its limit", || {
        h.status("detached").is_ok_and(|s| s.restarts >= 2)
    });
    let status = h.status("detached").unwrap();
    let failure = status.last_failure.clone().unwrap_or_default();
    assert!(
        failure.starts_with("memory limit: ") && failure.ends_with("> 64 MiB"),
        "the detached child's memory is the service's: {status:?}"
    );
    // Every run's detached child but the current one's is gone.
    let pids = pids_in(&escaped);
    assert!(pids.len() >= 2, "{pids:?}");
    let (current, earlier) = pids.split_last().unwrap();
    for pid in earlier {
        assert!(!alive(*pid), "the child {pid} of an earlier run is gone");
    }
    assert!(
        h.log("detached")
            .contains("killed 1 process(es) it had left outside its process group"),
        "{}",
        h.log("detached")
    );
    let _ = current;
}

#[test]
fn a_stop_takes_what_left_the_group_and_a_crash_loop_leaves_no_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = dir.path().join("daemon");
    let crashy = dir.path().join("crashy");
    let h = Harness::start(
        &format!(
            "services:
  daemonizer:
    command: \"setsid sleep 600 & echo $! >{}; exec sleep 600\"
  crashy:
    command: \"setsid sleep 600 & echo $! >>{}; sleep 0.2; exit 1\"
",
            daemon.display(),
            crashy.display()
        ),
        &[],
    );
    h.wait_state("daemonizer", StateName::Up);
    h.wait_for("the daemon's pid", || pids_in(&daemon).len() == 1);
    let sleeper = pids_in(&daemon)[0];
    assert!(alive(sleeper));
    h.wait_for("the daemon counted in status", || {
        h.status("daemonizer")
            .is_ok_and(|s| s.resources.is_some_and(|r| r.processes == 2))
    });
    h.client().stop("daemonizer").unwrap();
    h.wait_state("daemonizer", StateName::Down);
    h.wait_for("the detached sleeper killed with the stop", || {
        !alive(sleeper)
    });

    h.wait_for("`crashy` crashed three times", || {
        pids_in(&crashy).len() >= 4
    });
    let pids = pids_in(&crashy);
    let alive_now: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(
        alive_now.len() <= 1,
        "at most the current run's sleeper lives: {alive_now:?} of {pids:?}"
    );
}

#[test]
fn a_service_over_its_process_limit_is_stopped_with_every_process_it_made() {
    // Forks detached sleepers (each in a session of its own) until stopped: 40 would be made.
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made");
    let h = Harness::start(
        &format!(
            "services:
  forky:
    command: \"for i in $(seq 40); do setsid sleep 600 & echo $! >>{}; sleep 0.05; done; exec sleep 600\"
    pids_max: 16
",
            made.display()
        ),
        &[],
    );
    h.wait_for("`forky` stopped at its process limit", || {
        h.status("forky").is_ok_and(|s| {
            s.last_failure
                .as_deref()
                .is_some_and(|f| f.starts_with("process limit: ") && f.ends_with("> 16"))
        })
    });
    assert_eq!(h.status("forky").unwrap().pids_max, Some(16));
    // What the runs before the current one made is gone.
    h.client().stop("forky").unwrap();
    h.wait_state("forky", StateName::Down);
    let pids = pids_in(&made);
    assert!(pids.len() > 16, "{pids:?}");
    h.wait_for("every sleeper gone", || pids.iter().all(|&p| !alive(p)));
}
