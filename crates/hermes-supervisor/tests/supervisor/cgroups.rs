//! Limits the kernel enforces: a supervisor in cgroups delegated to it (cgroup v1's memory and
//! pids hierarchies, or cgroup v2) puts each service in cgroups of its own, and nothing the
//! service does — `setsid`, a double fork, an emptied environment — takes a process out of
//! its memory limit, its process limit or its stop. Needs root and a writable cgroup
//! filesystem (CI has both; elsewhere each test skips, saying why).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use hermes_supervisor::{Enforcement, StateName};

use crate::common::{Harness, alive, is_root};
use crate::memory::{ESCAPE_AND_LEAK, pids_in};

/// Cgroups of the test's own, one per hierarchy, for one supervisor; removed on drop with
/// anything left in them.
struct TestCgroups {
    dirs: Vec<PathBuf>,
}

impl TestCgroups {
    /// New cgroups under this process's own: v1's memory and pids hierarchies, or — on a
    /// v2-only machine where this process is at the root — one v2 cgroup with both
    /// controllers. `None` (after saying why) where neither can be had.
    fn create(name: &str) -> Option<TestCgroups> {
        if !is_root() {
            hermes_test_support::skip("needs root (to create cgroups)");
            return None;
        }
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let leaf = format!(
            "hermes-test-{}-{name}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let own = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let v1 = |controller: &str| {
            let base = Path::new("/sys/fs/cgroup").join(controller);
            let path = own.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, cs, path) = (f.next()?, f.next()?, f.next()?);
                cs.split(',').any(|c| c == controller).then_some(path)
            })?;
            base.join("cgroup.procs")
                .exists()
                .then(|| base.join(path.trim_start_matches('/')).join(&leaf))
        };
        let dirs = match (v1("memory"), v1("pids")) {
            (Some(m), Some(p)) => vec![m, p],
            _ => {
                let root = Path::new("/sys/fs/cgroup");
                let controllers =
                    fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
                let v2 = own.lines().any(|l| l == "0::/")
                    && ["memory", "pids"]
                        .iter()
                        .all(|c| controllers.split_whitespace().any(|x| x == *c));
                if !v2 {
                    hermes_test_support::skip(
                        "no cgroup v1 memory and pids hierarchies, and no cgroup v2 root with \
                         both controllers",
                    );
                    return None;
                }
                let _ = fs::write(root.join("cgroup.subtree_control"), "+memory +pids");
                vec![root.join(&leaf)]
            }
        };
        for dir in &dirs {
            if let Err(e) = fs::create_dir(dir) {
                hermes_test_support::skip(&format!(
                    "cannot create the cgroup {}: {e}",
                    dir.display()
                ));
                return None;
            }
        }
        Some(TestCgroups { dirs })
    }

    fn procs(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// The processes in `service`'s cgroups now.
    fn service_members(&self, service: &str) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .dirs
            .iter()
            .flat_map(|d| pids_in(&d.join(format!("service-{service}/cgroup.procs"))))
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// `file` of `service`'s cgroup in the hierarchy that has it.
    fn service_file(&self, service: &str, file: &str) -> String {
        self.dirs
            .iter()
            .find_map(|d| fs::read_to_string(d.join(format!("service-{service}/{file}"))).ok())
            .unwrap_or_default()
    }
}

impl Drop for TestCgroups {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let children: Vec<PathBuf> = fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            for cgroup in children.iter().chain(std::iter::once(dir)) {
                for _ in 0..50 {
                    let pids = pids_in(&cgroup.join("cgroup.procs"));
                    if pids.is_empty() {
                        break;
                    }
                    for pid in pids {
                        let _ = nix::sys::signal::kill(
                            nix::unistd::Pid::from_raw(pid),
                            nix::sys::signal::Signal::SIGKILL,
                        );
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                let _ = fs::remove_dir(cgroup);
            }
        }
    }
}

#[test]
fn a_detached_child_over_memory_max_is_oom_killed_and_takes_its_service_with_it() {
    let Some(cgroups) = TestCgroups::create("oom") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("escape.py"), ESCAPE_AND_LEAK).unwrap();
    let escaped = dir.path().join("escaped");
    let h = Harness::start_in_cgroups(
        &format!(
            "services:
  detached:
    command: [python3, {}, {}]
    memory_max: 64MiB
",
            dir.path().join("escape.py").display(),
            escaped.display()
        ),
        cgroups.procs(),
    );
    h.wait_for("`detached` OOM-killed and restarted", || {
        h.status("detached").is_ok_and(|s| s.restarts >= 1)
    });
    let status = h.status("detached").unwrap();
    assert_eq!(
        status.memory_max.map(|l| l.enforced_by),
        Some(Enforcement::Cgroup),
        "{status:?}"
    );
    let failure = status.last_failure.clone().unwrap_or_default();
    assert!(
        failure.contains("out-of-memory killed by the kernel"),
        "the kernel stopped it, whichever process it chose: {status:?}"
    );
    h.wait_for("the detached child of the first run gone", || {
        pids_in(&escaped).first().is_some_and(|&p| !alive(p))
    });
}

/// Forks (each child leaving for a session of its own, then sleeping) 100 times, ignoring
/// refused forks, writing each child's pid to `argv[1]`; then sleeps.
const FORK_BOMB: &str = "import os, sys, time
for _ in range(100):
    try:
        pid = os.fork()
    except OSError:
        time.sleep(0.01)
        continue
    if pid == 0:
        os.setsid()
        os.execvp('sleep', ['sleep', '600'])
    with open(sys.argv[1], 'a') as f:
        f.write(f'{pid}\\n')
time.sleep(600)
";

#[test]
fn a_fork_bomb_that_setsids_stops_at_pids_max_and_leaves_nothing_after_its_stop() {
    let Some(cgroups) = TestCgroups::create("pids") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("bomb.py"), FORK_BOMB).unwrap();
    let made = dir.path().join("made");
    let h = Harness::start_in_cgroups(
        &format!(
            "services:
  forky:
    command: [python3, {}, {}]
    pids_max: 20
  neighbour:
    command: [sleep, '600']
",
            dir.path().join("bomb.py").display(),
            made.display()
        ),
        cgroups.procs(),
    );
    h.wait_state("neighbour", StateName::Up);
    h.wait_for("the kernel refusing `forky` a fork", || {
        cgroups
            .service_file("forky", "pids.events")
            .lines()
            .any(|l| l.strip_prefix("max ").is_some_and(|n| n != "0"))
    });
    let status = h.status("forky").unwrap();
    assert_eq!(status.state, StateName::Up, "{status:?}");
    assert_eq!(status.pids_enforced_by, Some(Enforcement::Cgroup));
    let members = cgroups.service_members("forky");
    assert!(
        !members.is_empty() && members.len() <= 20,
        "never more than pids_max: {members:?}"
    );
    // Its neighbour still forks: the limit is the service's, not the container's.
    h.client().restart("neighbour").unwrap();
    h.wait_for("`neighbour` up again", || {
        h.status("neighbour")
            .is_ok_and(|s| s.state == StateName::Up && s.restarts == 1)
    });

    h.client().stop("forky").unwrap();
    h.wait_state("forky", StateName::Down);
    let pids = pids_in(&made);
    assert!(pids.len() >= 10, "{pids:?}");
    h.wait_for("every detached child gone with the stop", || {
        pids.iter().all(|&p| !alive(p)) && cgroups.service_members("forky").is_empty()
    });
}

#[test]
fn an_orphan_with_an_emptied_environment_is_still_the_services_and_dies_with_it() {
    let Some(cgroups) = TestCgroups::create("orphan") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let orphan = dir.path().join("orphan");
    // A double fork: the sleeper is re-parented at once, in a session of its own, with no
    // environment — nothing but its cgroup says whose it is.
    let h = Harness::start_in_cgroups(
        &format!(
            "services:
  quiet:
    command: \"(env -i setsid sleep 600 & echo $! >{}); exec sleep 600\"
",
            orphan.display()
        ),
        cgroups.procs(),
    );
    h.wait_state("quiet", StateName::Up);
    h.wait_for("the orphan's pid", || pids_in(&orphan).len() == 1);
    let sleeper = pids_in(&orphan)[0];
    assert!(cgroups.service_members("quiet").contains(&sleeper));
    h.wait_for("the orphan counted in status", || {
        h.status("quiet")
            .is_ok_and(|s| s.resources.is_some_and(|r| r.processes == 2))
    });
    h.client().stop("quiet").unwrap();
    h.wait_state("quiet", StateName::Down);
    h.wait_for("the orphan killed with the stop", || !alive(sleeper));
    assert!(
        h.log("quiet").contains("killed 1 process(es)"),
        "{}",
        h.log("quiet")
    );
}
