//! The loop's side of resources and limits: sampling every service each turn it is due
//! (`resources`), putting each service into cgroups of its own where there are cgroups to have
//! (`cgroups`), telling an OOM kill there from any other `SIGKILL`, killing everything a
//! service left behind when its main process exits, and what status says of all of it.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use super::Supervisor;
use super::cgroups::{Cgroups, Enforced, Limits};
use super::resources::Watched;
use crate::machine::Event;
use crate::mirror::MirrorOut;
use crate::spec::ServiceSpec;
use crate::status::{Enforcement, MemoryLimit};

/// Whether the supervisor has looked for cgroups yet (it does when the first service starts:
/// on cgroup v2, set-up moves processes, which a supervisor without services needs not do).
#[derive(Default)]
pub(super) enum CgroupState {
    /// Not looked yet.
    #[default]
    Unknown,
    /// None to be had: limits are sampled. With why, when there were cgroups but they could
    /// not be used (a read-only mount): said once in the log of each service with a limit,
    /// never on a service's output otherwise (a `docker run image cmd`'s stdout is the
    /// command's).
    Absent(Option<String>),
    /// The delegated subtrees.
    Ready(Cgroups),
}

/// How many passes [`Supervisor::stop_escaped`] makes at most, while what it kills keeps
/// forking.
const ESCAPED_PASSES: usize = 20;

/// A service whose current process runs in cgroups of its own.
#[derive(Debug, Clone, Copy)]
pub(super) struct InCgroup {
    /// The OOM kills counted there when the process was spawned.
    oom_kills: u64,
    /// Which of its limits the kernel enforces.
    enforced: Enforced,
}

/// The services whose current process runs in cgroups of their own.
pub(super) type InCgroups = HashMap<String, InCgroup>;

impl Supervisor {
    /// Puts `spec`'s next process in cgroups of its own, with its limits, where cgroups can be
    /// had: the child joins them before `exec`. The returned [`Joining`] must live until the
    /// spawn, and be asked after it whether the join failed ([`Supervisor::joined_cgroup`]).
    pub(super) fn join_cgroup(
        &mut self,
        spec: &ServiceSpec,
        cmd: &mut Command,
        out: &mut MirrorOut<'_>,
    ) -> Option<Joining> {
        self.in_cgroup.remove(&spec.name);
        if matches!(self.cgroups, CgroupState::Unknown) {
            self.cgroups = match Cgroups::detect(Path::new("/proc"), &|k| std::env::var(k).ok()) {
                Ok(Some(c)) => CgroupState::Ready(c),
                Ok(None) => CgroupState::Absent(None),
                Err(why) => CgroupState::Absent(Some(why)),
            };
        }
        let limits = Limits {
            memory_max: spec.memory_max,
            pids_max: spec.pids_max,
        };
        let cgroups = match &self.cgroups {
            CgroupState::Ready(cgroups) => cgroups,
            CgroupState::Absent(Some(why)) => {
                let limited = limits.memory_max.is_some() || limits.pids_max.is_some();
                if limited && self.told_no_cgroups.insert(spec.name.clone()) {
                    let msg = format!("[hermes] {why}");
                    let dir = self.log_dir_for(spec);
                    self.emit(&spec.name, dir.as_deref(), msg.as_bytes(), out);
                }
                return None;
            }
            CgroupState::Absent(None) | CgroupState::Unknown => return None,
        };
        let prepared = cgroups.prepare(&spec.name, limits).and_then(|p| {
            let enforced = p.enforced;
            Joining::install(p.procs, cmd).map(|j| (j, enforced))
        });
        match prepared {
            Ok((joining, enforced)) => {
                let oom_kills = cgroups.oom_kills(&spec.name);
                self.in_cgroup.insert(
                    spec.name.clone(),
                    InCgroup {
                        oom_kills,
                        enforced,
                    },
                );
                Some(joining)
            }
            Err(e) => {
                let dir = self.log_dir_for(spec);
                let msg = format!(
                    "[hermes] cannot set up its cgroup ({}); its limits are enforced by sampling",
                    hermes_errors::describe_io(&e)
                );
                self.emit(&spec.name, dir.as_deref(), msg.as_bytes(), out);
                None
            }
        }
    }

    /// The event saying the kernel OOM-killed in the cgroup of the service whose process
    /// `pid` is, since that process started — if it did.
    pub(super) fn oom_killed(&self, pid: i32) -> Option<Event> {
        let CgroupState::Ready(cgroups) = &self.cgroups else {
            return None;
        };
        let spec = self.machine.spec_of_pid(pid)?;
        let joined = self.in_cgroup.get(&spec.name)?;
        let limit = spec.memory_max.filter(|_| joined.enforced.memory)?;
        (cgroups.oom_kills(&spec.name) > joined.oom_kills).then(|| Event::OverLimit {
            pid,
            reason: format!(
                "memory limit: {} reached, out-of-memory killed by the kernel (cgroup)",
                hermes_errors::bytes::human(limit)
            ),
        })
    }

    /// Samples every service when due; the events of those over a limit the sampler enforces,
    /// and of those the kernel OOM-killed in part (cgroup v1 kills one process, not the group:
    /// the rest goes too).
    pub(super) fn sample_resources(&mut self, now: Instant) -> Vec<Event> {
        if now < self.sampler.due() {
            return Vec::new();
        }
        let rows = self.machine.status(now);
        let mut events: Vec<Event> = rows
            .iter()
            .filter_map(|r| self.oom_killed(r.pid?))
            .collect();
        let watched: Vec<Watched<'_>> = rows
            .iter()
            .map(|r| Watched {
                name: &r.name,
                pid: r.pid,
                enforce: self
                    .memory_limit(&r.name)
                    .filter(|l| l.enforced_by == Enforcement::Sampling)
                    .map(|l| l.bytes),
                pids_max: self
                    .pids_limit(&r.name)
                    .filter(|&(_, by)| by == Enforcement::Sampling)
                    .map(|(n, _)| n),
                members: self.cgroup_members(&r.name),
            })
            .collect();
        let leaders = self.machine.live_pids().into_iter().collect();
        events.extend(self.sampler.sample(&watched, &leaders, now));
        events
    }

    /// A service's memory limit and who enforces it now.
    pub(super) fn memory_limit(&self, service: &str) -> Option<MemoryLimit> {
        let bytes = self.machine.spec(service)?.memory_max?;
        let enforced_by = self.enforcement(service, |e| e.memory);
        Some(MemoryLimit { bytes, enforced_by })
    }

    /// A service's process limit and who enforces it now.
    pub(super) fn pids_limit(&self, service: &str) -> Option<(u64, Enforcement)> {
        let count = self.machine.spec(service)?.pids_max?;
        Some((count, self.enforcement(service, |e| e.pids)))
    }

    fn enforcement(&self, service: &str, by_kernel: fn(&Enforced) -> bool) -> Enforcement {
        match self.in_cgroup.get(service) {
            Some(joined) if by_kernel(&joined.enforced) => Enforcement::Cgroup,
            _ => Enforcement::Sampling,
        }
    }

    /// The processes in the service's cgroups now (none when it has none).
    fn cgroup_members(&self, service: &str) -> Vec<i32> {
        match &self.cgroups {
            CgroupState::Ready(c) if self.in_cgroup.contains_key(service) => c.members(service),
            _ => Vec::new(),
        }
    }

    /// After `service`'s spawn: when its process could not join its cgroup, it runs without one
    /// (a failed join never stops a start) and its limits are sampled; says so in its own words.
    pub(super) fn joined_cgroup(
        &mut self,
        spec: &ServiceSpec,
        joining: &Joining,
        out: &mut MirrorOut<'_>,
    ) {
        let Some(errno) = joining.failure() else {
            return;
        };
        self.in_cgroup.remove(&spec.name);
        let dir = self.log_dir_for(spec);
        let msg = format!(
            "[hermes] could not join its cgroup ({}): it runs without one, and its limits are \
             enforced by sampling",
            errno.desc().to_lowercase()
        );
        self.emit(&spec.name, dir.as_deref(), msg.as_bytes(), out);
    }

    /// Kills what `service`, whose main process `pgid` just exited, has outside that group
    /// (the group itself is the machine's to kill): its tracked tree's processes, and — when
    /// no other process of it lives (a hand-over's successor shares its cgroup) — every other
    /// process in its cgroups. Chases what they fork meanwhile for a bounded number of passes;
    /// says how many there were.
    pub(super) fn stop_escaped(&mut self, service: &str, pgid: i32, out: &mut MirrorOut<'_>) {
        let alone = self.machine.pids_of(service).iter().all(|&pid| pid == pgid);
        let mut killed: HashSet<i32> = HashSet::new();
        for _ in 0..ESCAPED_PASSES {
            let members = if alone {
                self.cgroup_members(service)
            } else {
                Vec::new()
            };
            let leaders = self.machine.live_pids().into_iter().collect();
            let pids = self.sampler.escaped_now(service, pgid, &leaders, &members);
            for &pid in &pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let before = killed.len();
            killed.extend(pids);
            if killed.len() == before {
                break;
            }
        }
        if !killed.is_empty() {
            let spec = self.machine.spec(service).cloned();
            let dir = spec.as_ref().and_then(|s| self.log_dir_for(s));
            let msg = format!(
                "[hermes] killed {} process(es) it had left outside its process group (setsid or \
                 a double fork), with its main process",
                killed.len()
            );
            self.emit(service, dir.as_deref(), msg.as_bytes(), out);
        }
    }

    /// A forgotten service's records and cgroups go.
    pub(super) fn forget_resources(&mut self, service: &str) {
        self.sampler.forget(service);
        self.in_cgroup.remove(service);
        self.told_no_cgroups.remove(service);
        if let CgroupState::Ready(cgroups) = &self.cgroups {
            cgroups.remove(service);
        }
    }
}

/// A spawn joining its cgroups. The child writes `0` to each cgroup's `cgroup.procs` before
/// `exec`; a failure there is reported on a pipe instead of failing the spawn (the program is
/// not at fault, and it can run with its limit sampled), and read by the parent once the spawn
/// returned (std returns only after the child's `exec`, so the report is there by then).
pub(super) struct Joining {
    /// Each `cgroup.procs`, open for writing; must stay open until the spawn.
    _procs: Vec<OwnedFd>,
    /// Readable (non-blocking) in the parent: the errno of a failed join, 4 bytes.
    report_read: OwnedFd,
    /// The child's end; close-on-exec.
    _report_write: OwnedFd,
}

impl Joining {
    /// Adds the join to `cmd`'s child (in the order of the `pre_exec` calls).
    pub(super) fn install(procs: Vec<OwnedFd>, cmd: &mut Command) -> std::io::Result<Joining> {
        let (report_read, report_write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC | nix::fcntl::OFlag::O_NONBLOCK)?;
        let fds: Vec<RawFd> = procs.iter().map(AsRawFd::as_raw_fd).collect();
        let report = report_write.as_raw_fd();
        #[allow(unsafe_code)]
        // SAFETY: runs between fork and exec; write(2) on descriptors opened before the fork,
        // with a stack buffer, is async-signal-safe; nothing is allocated.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(e) = fds.iter().find_map(|&fd| join(fd).err()) {
                    let code = e.raw_os_error().unwrap_or(libc::EIO).to_ne_bytes();
                    libc::write(report, code.as_ptr().cast(), code.len());
                }
                Ok(())
            });
        }
        Ok(Joining {
            _procs: procs,
            report_read,
            _report_write: report_write,
        })
    }

    /// After the spawn: the errno of a join that failed, if it did.
    pub(super) fn failure(&self) -> Option<nix::errno::Errno> {
        let mut code = [0u8; 4];
        matches!(nix::unistd::read(&self.report_read, &mut code), Ok(4))
            .then(|| nix::errno::Errno::from_raw(i32::from_ne_bytes(code)))
    }
}

/// In the child: joins the cgroup whose `cgroup.procs` is `fd` (`0` is the writer itself).
fn join(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: `fd` is open for writing (it outlives the spawn) and the buffer is static.
    let n = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spawns `true` joining through `procs`; what the parent hears of the join.
    fn spawn_joining(procs: OwnedFd) -> Option<nix::errno::Errno> {
        let mut cmd = Command::new("true");
        let joining = Joining::install(vec![procs], &mut cmd).unwrap();
        let mut child = cmd.spawn().expect("a failed join never fails the spawn");
        let failure = joining.failure();
        child.wait().unwrap();
        failure
    }

    #[test]
    fn a_join_that_fails_is_reported_and_the_program_still_runs() {
        // A descriptor open for reading only: the child's write fails with EBADF.
        let (read_only, _w) = nix::unistd::pipe().unwrap();
        assert_eq!(spawn_joining(read_only), Some(nix::errno::Errno::EBADF));
        // One it can write: no report.
        let (_r, writable) = nix::unistd::pipe().unwrap();
        assert_eq!(spawn_joining(writable), None);
    }
}
