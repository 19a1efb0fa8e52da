//! A service is its whole process tree: its process group, and every descendant that left the
//! group (`setsid`, `setpgid`, a double fork), found and remembered ([`Trees`]).
//!
//! Every service runs in its own process group, and the group is what the supervisor signals.
//! A descendant that calls `setsid` leaves the group: it would escape the service's memory
//! limit, its status and its stop, and a crash-looping service would leave one such orphan per
//! run. So each time the supervisor samples `/proc` it also follows the tree: a process whose
//! parent is one of the service's processes is the service's, wherever its group is; once
//! seen, it stays the service's (by pid and start time) after its parent exits and it is
//! re-parented to the supervisor, which is a sub-reaper (or PID 1). An orphan the supervisor
//! never saw before its parent exited (a double fork between two samples) is attributed by the
//! variable [`SERVICE_VAR`] the supervisor puts in every service's environment, which children
//! inherit. When a service's main process exits, whatever is left of its tree is killed.
//!
//! What this cannot see: a process that both clears its environment and is orphaned between
//! two samples. A cgroup (`crate::supervisor`'s, where one can be had) has no such gap.
//!
//! Words defined here:
//! * **escaped** — a process of a service's tree outside the service's process group.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::usage::ProcStat;

/// The variable naming the service in its environment (and its children's).
pub const SERVICE_VAR: &str = "HERMES_SUPERVISED_SERVICE";

/// One process for the life of the system: its pid and start time.
type Process = (i32, u64);

/// The escaped processes of every service, as last seen.
#[derive(Debug, Default)]
pub struct Trees {
    escaped: HashMap<String, HashSet<Process>>,
    /// Orphans of ours whose environment names no service (looked at once).
    unattributed: HashSet<Process>,
}

/// A service the trees are followed for: its name and its process group (`None` once its main
/// process is gone: then only what escaped is left).
#[derive(Debug, Clone, Copy)]
pub struct Root<'a> {
    /// The service.
    pub name: &'a str,
    /// Its process group (the pid of its main process).
    pub pgid: Option<i32>,
}

impl Trees {
    /// Follows every tree in `table` (one pass over `/proc`, [`crate::usage::table`]).
    /// `leaders` are the main processes of every live service process (a hand-over's old and
    /// new ones included): their groups are theirs, never another's escaped processes.
    /// `supervisor` is our pid (orphans are re-parented to it); `service_of` reads the
    /// [`SERVICE_VAR`] of a process (see [`service_in_environ`]).
    pub fn update(
        &mut self,
        table: &HashMap<i32, ProcStat>,
        roots: &[Root<'_>],
        leaders: &HashSet<i32>,
        supervisor: i32,
        service_of: &dyn Fn(i32) -> Option<String>,
    ) {
        let alive = |&(pid, start): &Process| table.get(&pid).is_some_and(|s| s.start == start);
        self.unattributed.retain(alive);
        let groups: HashSet<i32> = roots
            .iter()
            .filter_map(|r| r.pgid)
            .chain(leaders.iter().copied())
            .collect();
        let mut claimed: HashMap<i32, &str> = HashMap::new();
        for root in roots {
            let known = self.escaped.get(root.name);
            for (&pid, stat) in table {
                let in_group = root.pgid == Some(stat.pgrp);
                let remembered = known.is_some_and(|k| k.contains(&(pid, stat.start)));
                if in_group || remembered {
                    claimed.insert(pid, root.name);
                }
            }
        }
        // Orphans of ours that no tree holds yet: their environment says whose they are.
        for (&pid, stat) in table {
            let in_a_service_group = groups.contains(&stat.pgrp);
            if stat.ppid != supervisor || in_a_service_group || claimed.contains_key(&pid) {
                continue;
            }
            if self.unattributed.contains(&(pid, stat.start)) {
                continue;
            }
            match service_of(pid).and_then(|s| roots.iter().find(|r| r.name == s)) {
                Some(root) => {
                    claimed.insert(pid, root.name);
                }
                None => {
                    self.unattributed.insert((pid, stat.start));
                }
            }
        }
        // Children of a service's processes are that service's, to the leaves.
        loop {
            let mut grew = false;
            for (&pid, stat) in table {
                if claimed.contains_key(&pid) || stat.ppid == supervisor || leaders.contains(&pid) {
                    continue;
                }
                if let Some(&owner) = claimed.get(&stat.ppid) {
                    claimed.insert(pid, owner);
                    grew = true;
                }
            }
            if !grew {
                break;
            }
        }
        let mut escaped: HashMap<String, HashSet<Process>> = HashMap::new();
        for (pid, owner) in claimed {
            let stat = table[&pid];
            let root = roots.iter().find(|r| r.name == owner);
            if root.is_some_and(|r| r.pgid != Some(stat.pgrp)) {
                escaped
                    .entry(owner.to_owned())
                    .or_default()
                    .insert((pid, stat.start));
            }
        }
        // Services not followed this time (not running, not asked) keep what they had.
        for (name, set) in self.escaped.drain() {
            if !roots.iter().any(|r| r.name == name) {
                escaped.insert(name, set.into_iter().filter(alive).collect());
            }
        }
        self.escaped = escaped;
    }

    /// The escaped processes of `service` still in `table`.
    pub fn escaped(&self, service: &str, table: &HashMap<i32, ProcStat>) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .escaped
            .get(service)
            .into_iter()
            .flatten()
            .filter(|(pid, start)| table.get(pid).is_some_and(|s| s.start == *start))
            .map(|&(pid, _)| pid)
            .collect();
        pids.sort_unstable();
        pids
    }

    /// Forgets a service.
    pub fn forget(&mut self, service: &str) {
        self.escaped.remove(service);
    }
}

/// The [`SERVICE_VAR`] of process `pid`, from `<proc>/<pid>/environ` (readable by root and
/// by the process's own user; `None` otherwise, or when it has none).
pub fn service_in_environ(proc: &Path, pid: i32) -> Option<String> {
    let environ = std::fs::read(proc.join(pid.to_string()).join("environ")).ok()?;
    let prefix = format!("{SERVICE_VAR}=");
    environ
        .split(|&b| b == 0)
        .find_map(|v| v.strip_prefix(prefix.as_bytes()))
        .and_then(|v| String::from_utf8(v.to_vec()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: i32 = 100;

    fn p(ppid: i32, pgrp: i32, start: u64) -> ProcStat {
        ProcStat {
            ppid,
            pgrp,
            start,
            rss_pages: 1,
            cpu_ticks: 0,
        }
    }

    fn table(rows: &[(i32, ProcStat)]) -> HashMap<i32, ProcStat> {
        rows.iter().copied().collect()
    }

    #[test]
    fn a_descendant_that_left_the_group_stays_the_services_after_its_parent_exits() {
        let mut trees = Trees::default();
        let roots = [Root {
            name: "svc",
            pgid: Some(200),
        }];
        let none = |_: i32| None;
        // 200 leads the group; 201 is in it; 300 called setsid (its own group) under 201, and
        // 301 is its child; 400 is another service's, 500 nobody's.
        let t = table(&[
            (200, p(ME, 200, 1)),
            (201, p(200, 200, 2)),
            (300, p(201, 300, 3)),
            (301, p(300, 300, 4)),
            (400, p(ME, 400, 5)),
            (500, p(1, 500, 6)),
        ]);
        trees.update(&t, &roots, &HashSet::new(), ME, &none);
        assert_eq!(trees.escaped("svc", &t), vec![300, 301]);
        // 201 exits: 300 is re-parented to the supervisor, and still the service's; so is a
        // child it forks then.
        let t = table(&[
            (200, p(ME, 200, 1)),
            (300, p(ME, 300, 3)),
            (301, p(300, 300, 4)),
            (302, p(300, 300, 7)),
            (400, p(ME, 400, 5)),
        ]);
        trees.update(&t, &roots, &HashSet::new(), ME, &none);
        assert_eq!(trees.escaped("svc", &t), vec![300, 301, 302]);
        // The main process exits: what escaped is all that is left, and still the service's.
        let gone = [Root {
            name: "svc",
            pgid: None,
        }];
        trees.update(&t, &gone, &HashSet::new(), ME, &none);
        assert_eq!(trees.escaped("svc", &t), vec![300, 301, 302]);
        // A recycled pid is not the process seen before.
        let t = table(&[(300, p(ME, 300, 99))]);
        trees.update(&t, &gone, &HashSet::new(), ME, &none);
        assert_eq!(trees.escaped("svc", &t), Vec::<i32>::new());
    }

    #[test]
    fn an_orphan_never_seen_is_attributed_by_its_environment() {
        let mut trees = Trees::default();
        let roots = [
            Root {
                name: "a",
                pgid: Some(200),
            },
            Root {
                name: "b",
                pgid: Some(210),
            },
        ];
        let looked = std::cell::Cell::new(0);
        let env = |pid: i32| {
            looked.set(looked.get() + 1);
            match pid {
                600 => Some("b".to_owned()),
                601 => Some("not-a-service".to_owned()),
                _ => None,
            }
        };
        let t = table(&[
            (200, p(ME, 200, 1)),
            (210, p(ME, 210, 2)),
            (600, p(ME, 600, 3)),
            (601, p(ME, 601, 4)),
            (602, p(600, 600, 5)),
        ]);
        trees.update(&t, &roots, &HashSet::new(), ME, &env);
        assert_eq!(trees.escaped("b", &t), vec![600, 602]);
        assert_eq!(trees.escaped("a", &t), Vec::<i32>::new());
        assert_eq!(
            looked.get(),
            2,
            "the services' own leaders are never looked at"
        );
        // 601 names no service: it is not looked at again.
        trees.update(&t, &roots, &HashSet::new(), ME, &env);
        assert_eq!(looked.get(), 2);
    }

    #[test]
    fn a_hand_overs_other_process_is_never_escaped() {
        // `web` hands over: 200 (old, its own group) still serves while 210 (new) starts; both
        // carry the service's variable. Neither is the other's escaped process.
        let mut trees = Trees::default();
        let env = |_: i32| Some("web".to_owned());
        let t = table(&[
            (200, p(ME, 200, 1)),
            (201, p(200, 200, 2)),
            (210, p(ME, 210, 3)),
        ]);
        let leaders: HashSet<i32> = [200, 210].into();
        for pgid in [200, 210] {
            let roots = [Root {
                name: "web",
                pgid: Some(pgid),
            }];
            trees.update(&t, &roots, &leaders, ME, &env);
            assert_eq!(trees.escaped("web", &t), Vec::<i32>::new(), "root {pgid}");
        }
    }
}
