//! Sampling what each service uses, every [`Options::sample_interval`](super::Options): one
//! pass over `/proc` ([`crate::usage::table`]) gives every service's whole process tree (its
//! group and what left the group: [`crate::tree`]), which becomes its [`Resources`] in status
//! (memory, CPU seconds and percent, a short history), and — for a service whose memory limit
//! is not its cgroup's — the [`Event::OverLimit`] that kills it when its tree is over
//! `memory_max`.
//!
//! The history keeps one point per [`HISTORY_STEP_SECS`] per service, [`HISTORY_LEN`] of them,
//! across restarts (the point of a leak is the saw-tooth); it is dropped when the service is
//! forgotten.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::machine::Event;
use crate::status::{
    HISTORY_LEN, HISTORY_STEP_SECS, ResourceSample, Resources, over_limit_reason, over_pids_reason,
};
use crate::tree::{self, Root, Trees};
use crate::usage::{self, ProcStat, Usage};

/// A service the sampler looks at this turn.
pub(super) struct Watched<'a> {
    /// Its name.
    pub(super) name: &'a str,
    /// Its current process (= process group), if it has one.
    pub(super) pid: Option<i32>,
    /// The limit the sampler enforces (none when its cgroup does).
    pub(super) enforce: Option<u64>,
    /// The process limit the sampler enforces (none when its cgroup does).
    pub(super) pids_max: Option<u64>,
    /// The processes in its cgroups (none without): its tree, whatever else they did.
    pub(super) members: Vec<i32>,
}

/// The supervisor's record of what services use.
pub(super) struct Sampler {
    proc: PathBuf,
    interval: Duration,
    next_at: Instant,
    ticks_per_second: f64,
    records: HashMap<String, Record>,
    trees: Trees,
}

#[derive(Default)]
struct Record {
    /// The process group of the last sample, and its CPU ticks then.
    last: Option<(i32, Instant, u64)>,
    now: Option<Current>,
    history: VecDeque<ResourceSample>,
    /// When the last history point was taken, and the group's ticks then.
    history_last: Option<(i32, Instant, u64)>,
}

#[derive(Clone, Copy)]
struct Current {
    /// The process group sampled.
    pid: i32,
    usage: Usage,
    cpu_percent: Option<f64>,
}

impl Sampler {
    pub(super) fn new(interval: Duration, now: Instant) -> Self {
        Self {
            proc: PathBuf::from("/proc"),
            interval,
            next_at: now,
            ticks_per_second: usage::ticks_per_second() as f64,
            records: HashMap::new(),
            trees: Trees::default(),
        }
    }

    /// When the next sample is due.
    pub(super) fn due(&self) -> Instant {
        self.next_at
    }

    /// Samples `services` if due; returns the over-limit events.
    pub(super) fn sample(
        &mut self,
        services: &[Watched<'_>],
        leaders: &HashSet<i32>,
        now: Instant,
    ) -> Vec<Event> {
        if now < self.next_at {
            return Vec::new();
        }
        self.next_at = now + self.interval;
        let table = usage::table(&self.proc);
        let roots: Vec<Root<'_>> = services
            .iter()
            .filter(|w| w.pid.is_some())
            .map(|w| Root {
                name: w.name,
                pgid: w.pid,
            })
            .collect();
        self.follow(&table, &roots, leaders);
        let mut groups: HashMap<i32, Usage> = HashMap::new();
        for stat in table.values() {
            groups.entry(stat.pgrp).or_default().add(stat);
        }
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let mut events = Vec::new();
        for w in services {
            let record = self.records.entry(w.name.to_string()).or_default();
            let Some((pid, mut usage)) = w.pid.and_then(|p| groups.get(&p).map(|u| (p, *u))) else {
                record.now = None;
                record.last = None;
                continue;
            };
            for other in outside_group(self.trees.escaped(w.name, &table), &w.members, pid, &table)
            {
                usage.add(&table[&other]);
            }
            let rate = |from: Option<(i32, Instant, u64)>| {
                let (p, at, ticks) = from.filter(|&(p, ..)| p == pid)?;
                let secs = now.saturating_duration_since(at).as_secs_f64();
                (secs > 0.0 && p == pid).then(|| {
                    usage.cpu_ticks.saturating_sub(ticks) as f64 / self.ticks_per_second / secs
                        * 100.0
                })
            };
            record.now = Some(Current {
                pid,
                usage,
                cpu_percent: rate(record.last),
            });
            record.last = Some((pid, now, usage.cpu_ticks));
            let step_due = record.history_last.is_none_or(|(_, at, _)| {
                now.saturating_duration_since(at) >= Duration::from_secs(HISTORY_STEP_SECS)
            });
            if step_due {
                let cpu_percent = rate(record.history_last).unwrap_or(0.0);
                if record.history.len() == HISTORY_LEN {
                    record.history.pop_front();
                }
                record.history.push_back(ResourceSample {
                    at: wall,
                    memory_bytes: usage.rss_bytes,
                    cpu_percent,
                });
                record.history_last = Some((pid, now, usage.cpu_ticks));
            }
            if let Some(limit) = w.enforce
                && usage.rss_bytes > limit
            {
                events.push(Event::OverLimit {
                    pid,
                    reason: over_limit_reason(usage.rss_bytes, limit),
                });
            } else if let Some(limit) = w.pids_max
                && u64::from(usage.processes) > limit
            {
                events.push(Event::OverLimit {
                    pid,
                    reason: over_pids_reason(usage.processes.into(), limit),
                });
            }
        }
        events
    }

    /// What the service uses, as last sampled (`None` before its first sample). Figures of an
    /// earlier process than `pid` (the current one, not sampled yet) are not its: zero.
    pub(super) fn resources(&self, service: &str, pid: Option<i32>) -> Option<Resources> {
        let record = self.records.get(service)?;
        let now = record.now.filter(|c| Some(c.pid) == pid);
        if now.is_none() && record.history.is_empty() {
            return None;
        }
        let usage = now.map(|c| c.usage).unwrap_or_default();
        Some(Resources {
            memory_bytes: usage.rss_bytes,
            cpu_seconds: usage.cpu_ticks as f64 / self.ticks_per_second,
            cpu_percent: now.and_then(|c| c.cpu_percent),
            processes: usage.processes,
            history: record.history.iter().copied().collect(),
        })
    }

    /// Drops a forgotten service's record.
    pub(super) fn forget(&mut self, service: &str) {
        self.records.remove(service);
        self.trees.forget(service);
    }

    /// The processes of `service`'s tree outside its group `pgid` — those it tracked and
    /// those of `members` (its cgroups') — looked for now (a fresh pass over `/proc`): what a
    /// service whose main process exited leaves behind.
    pub(super) fn escaped_now(
        &mut self,
        service: &str,
        pgid: i32,
        leaders: &HashSet<i32>,
        members: &[i32],
    ) -> Vec<i32> {
        let table = usage::table(&self.proc);
        self.follow(
            &table,
            &[Root {
                name: service,
                pgid: Some(pgid),
            }],
            leaders,
        );
        outside_group(self.trees.escaped(service, &table), members, pgid, &table)
    }

    fn follow(
        &mut self,
        table: &HashMap<i32, ProcStat>,
        roots: &[Root<'_>],
        leaders: &HashSet<i32>,
    ) {
        let proc = self.proc.clone();
        let me = nix::unistd::getpid().as_raw();
        self.trees.update(table, roots, leaders, me, &|pid| {
            tree::service_in_environ(&proc, pid)
        });
    }
}

/// `escaped` and those of `members` alive and outside the group `pgid`, each once.
fn outside_group(
    escaped: Vec<i32>,
    members: &[i32],
    pgid: i32,
    table: &HashMap<i32, ProcStat>,
) -> Vec<i32> {
    let mut all = escaped;
    all.extend(
        members
            .iter()
            .filter(|p| table.get(p).is_some_and(|st| st.pgrp != pgid)),
    );
    all.sort_unstable();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_over_its_limit_is_reported_and_one_under_it_is_not() {
        let me = nix::unistd::getpgrp().as_raw();
        let t0 = Instant::now();
        let mut sampler = Sampler::new(Duration::from_millis(10), t0);
        let watched = |enforce| Watched {
            name: "me",
            pid: Some(me),
            enforce,
            pids_max: None,
            members: Vec::new(),
        };
        // This test process's own group holds more than 4 KiB and less than 1 TiB.
        let over = sampler.sample(&[watched(Some(4096))], &HashSet::new(), t0);
        assert!(
            matches!(&over[..], [Event::OverLimit { pid, reason }]
                if *pid == me && reason.starts_with("memory limit: ") && reason.ends_with("> 4 KiB")),
            "{over:?}"
        );
        assert!(
            sampler
                .sample(&[watched(Some(1 << 40))], &HashSet::new(), t0)
                .is_empty(),
            "not due yet"
        );
        let t1 = t0 + Duration::from_millis(20);
        assert!(
            sampler
                .sample(&[watched(Some(1 << 40))], &HashSet::new(), t1)
                .is_empty()
        );
        let r = sampler.resources("me", Some(me)).unwrap();
        assert!(r.memory_bytes > 0 && r.processes >= 1);
        let newer = sampler.resources("me", Some(me + 1)).unwrap();
        assert_eq!(
            newer.memory_bytes, 0,
            "a new process is not its predecessor"
        );
        assert!(r.cpu_percent.is_some(), "a rate after two samples");
        assert_eq!(r.history.len(), 1, "one point per step");
        // Gone: no current figures, the history stays.
        let t2 = t1 + Duration::from_millis(20);
        let gone = Watched {
            name: "me",
            pid: None,
            enforce: Some(4096),
            pids_max: None,
            members: Vec::new(),
        };
        assert!(sampler.sample(&[gone], &HashSet::new(), t2).is_empty());
        let r = sampler.resources("me", None).unwrap();
        assert_eq!((r.memory_bytes, r.processes, r.cpu_percent), (0, 0, None));
        assert_eq!(r.history.len(), 1);
        sampler.forget("me");
        assert_eq!(sampler.resources("me", None), None);
    }
}
