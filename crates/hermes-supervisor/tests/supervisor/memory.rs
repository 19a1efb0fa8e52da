//! Memory limits and resources, with real processes: a service that allocates without bound is
//! killed at its `memory_max` and restarted with the reason said, its neighbours untouched; what
//! status says a service uses is what `/proc` says.

use std::time::Duration;

use hermes_supervisor::{Enforcement, StateName};

use crate::common::{Harness, rss_kib};

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
