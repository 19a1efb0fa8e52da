//! A cgroup of its own for each service with a memory limit, where the supervisor may create
//! cgroups: cgroup v2 with the memory controller, in a subtree delegated to it.
//!
//! That is the case when the supervisor is the root of its cgroup namespace (a container with a
//! private cgroup namespace: Docker's `--cgroupns private`, the default on cgroup v2) or PID 1,
//! and the cgroup filesystem is writable (Docker mounts it read-only unless the container is
//! privileged or user namespaces are remapped; Podman's `--security-opt
//! unmask=/sys/fs/cgroup` gives it; Kubernetes mounts it read-only in unprivileged pods). Everywhere else — cgroup v1
//! or hybrid hosts, a read-only mount, `hermes up` inside a systemd session, or
//! `HERMES_CGROUPS=off` — [`Cgroups::detect`] returns `None` and memory limits are enforced
//! by sampling (`resources`).
//!
//! Layout, under the supervisor's own cgroup `<dir>`: v2's "no internal processes" rule lets
//! only a cgroup without processes give its children controllers, so at set-up every process
//! of `<dir>` (the supervisor, and anything `docker exec` put there) moves to the leaf
//! `<dir>/init` and `+memory` is enabled in `<dir>/cgroup.subtree_control`; a service then runs
//! in `<dir>/service-<name>` with `memory.max` (its limit), `memory.swap.max = 0` (a leak must
//! not move to swap instead of stopping) and `memory.oom.group = 1` (an OOM kill takes its
//! whole cgroup, never half a service). The child joins it itself, before `exec`, by writing `0`
//! to a `cgroup.procs` descriptor opened before the fork, so even its first fork is inside.
//! Runtimes join `docker exec` processes to PID 1's cgroup when the top one has controllers
//! enabled (runc does since 1.0), so `docker exec` keeps working.
//!
//! Words defined here:
//! * **delegated subtree** — the cgroup directory the supervisor may create cgroups under.

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The leaf every process of the supervisor's cgroup moves to at set-up.
const INIT_LEAF: &str = "init";
/// A service's cgroup is `service-<name>` (never `init`: no service name starts that way).
const SERVICE_PREFIX: &str = "service-";

/// The environment variable that switches cgroups off (`off`, `0`, `false`, `no`).
pub const CGROUPS_ENV: &str = "HERMES_CGROUPS";

/// The delegated subtree the supervisor creates services' cgroups in.
#[derive(Debug)]
pub(crate) struct Cgroups {
    dir: PathBuf,
}

/// A service's cgroup, prepared for its next process.
pub(crate) struct Prepared {
    /// `cgroup.procs`, open for writing, for the child to join with.
    pub(crate) procs: OwnedFd,
}

impl Cgroups {
    /// The delegated subtree, set up for services' cgroups; `Err` says why there is none (for
    /// the supervisor's notes), `Ok(None)` when cgroups are simply not there or switched off.
    pub(crate) fn detect(
        proc: &Path,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, String> {
        if var(CGROUPS_ENV).is_some_and(|v| hermes_errors::switch::parse(&v) == Some(false)) {
            return Ok(None);
        }
        let read = |name: &str| fs::read_to_string(proc.join("self").join(name));
        let (Ok(own), Ok(mounts)) = (read("cgroup"), read("mountinfo")) else {
            return Ok(None);
        };
        let (Some(own), Some(mount)) = (own_cgroup(&own), cgroup2_mount(&mounts)) else {
            return Ok(None); // cgroup v1 only
        };
        let dir = mount.join(own.trim_start_matches('/'));
        let controllers = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
        if !controllers.split_whitespace().any(|c| c == "memory") {
            return Ok(None); // hybrid: the memory controller is v1's
        }
        if own != "/" && nix::unistd::getpid().as_raw() != 1 {
            return Ok(None); // a cgroup someone else manages (a systemd session): not ours
        }
        Self::set_up(dir).map(Some)
    }

    /// Moves every process of `dir` to its `init` leaf and enables the memory controller for
    /// its children.
    fn set_up(dir: PathBuf) -> Result<Self, String> {
        let failed = |what: &str, path: &Path, e: io::Error| {
            format!(
                "cannot {what} {} ({}); memory limits are enforced by sampling",
                path.display(),
                hermes_errors::describe_io(&e)
            )
        };
        let enabled = fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
        if !enabled.split_whitespace().any(|c| c == "memory") {
            let leaf = dir.join(INIT_LEAF);
            match fs::create_dir(&leaf) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(failed("create", &leaf, e)),
            }
            let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
            let target = leaf.join("cgroup.procs");
            for pid in procs.split_whitespace() {
                // One that exited meanwhile (ESRCH) is fine; the subtree write says if any stayed.
                let _ = fs::write(&target, pid);
            }
            let control = dir.join("cgroup.subtree_control");
            fs::write(&control, "+memory").map_err(|e| failed("enable memory in", &control, e))?;
        }
        Ok(Self { dir })
    }

    /// A service's own cgroup with its limit, created (or reused) for its next process.
    pub(crate) fn prepare(&self, service: &str, memory_max: u64) -> io::Result<Prepared> {
        let dir = self.service_dir(service);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        fs::write(dir.join("memory.max"), memory_max.to_string())?;
        fs::write(dir.join("memory.oom.group"), "1")?;
        // Absent when the kernel has no swap accounting: then there is no swap to move to.
        let _ = fs::write(dir.join("memory.swap.max"), "0");
        let procs = fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))?;
        Ok(Prepared {
            procs: procs.into(),
        })
    }

    /// How many times the kernel has OOM-killed in the service's cgroup (`memory.events`).
    pub(crate) fn oom_kills(&self, service: &str) -> u64 {
        let events = fs::read_to_string(self.service_dir(service).join("memory.events"));
        oom_kills(&events.unwrap_or_default())
    }

    /// Removes a forgotten service's cgroup (only possible once it is empty; else it stays,
    /// and is reused if the service comes back).
    pub(crate) fn remove(&self, service: &str) {
        let _ = fs::remove_dir(self.service_dir(service));
    }

    fn service_dir(&self, service: &str) -> PathBuf {
        self.dir.join(format!("{SERVICE_PREFIX}{service}"))
    }
}

/// The cgroup v2 path of `/proc/self/cgroup` (its `0::<path>` line).
fn own_cgroup(text: &str) -> Option<&str> {
    text.lines().find_map(|l| l.strip_prefix("0::"))
}

/// Where the cgroup v2 filesystem is mounted, from `/proc/self/mountinfo` (the mount of its
/// root, which is what a namespace's root sees).
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        let fields: Vec<&str> = left.split_whitespace().collect();
        (fstype == "cgroup2" && fields.get(3) == Some(&"/")).then(|| PathBuf::from(fields[4]))
    })
}

/// The OOM kills `memory.events` counts: `oom_group_kill` when the group was killed as one,
/// else `oom_kill`.
fn oom_kills(events: &str) -> u64 {
    let count = |key: &str| {
        events.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    count("oom_group_kill")
        .filter(|&n| n > 0)
        .or_else(|| count("oom_kill"))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_v2_hierarchy_is_found_in_proc() {
        assert_eq!(own_cgroup("0::/\n"), Some("/"));
        assert_eq!(
            own_cgroup("4:memory:/x\n0::/user.slice/a.scope\n"),
            Some("/user.slice/a.scope")
        );
        assert_eq!(own_cgroup("4:memory:/x\n"), None);
        let mountinfo = "\
25 30 0:22 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
35 30 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
36 30 0:30 /inner /elsewhere rw - cgroup2 cgroup2 rw";
        assert_eq!(
            cgroup2_mount(mountinfo),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        assert_eq!(cgroup2_mount("25 30 0:22 / /x rw - tmpfs tmpfs rw"), None);
    }

    #[test]
    fn oom_kills_are_counted_from_memory_events() {
        let events = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 1\n";
        assert_eq!(oom_kills(events), 1);
        assert_eq!(oom_kills("oom 1\noom_kill 3\n"), 3);
        assert_eq!(oom_kills("oom_kill 0\noom_group_kill 0\n"), 0);
        assert_eq!(oom_kills(""), 0);
    }

    /// Against a directory laid out as a cgroup v2 mount (plain files: what the supervisor
    /// writes, not what the kernel does with it; no cgroup v2 memory controller is needed).
    #[test]
    fn a_delegated_subtree_is_set_up_and_a_service_gets_its_limit() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().to_path_buf();
        fs::write(dir.join("cgroup.controllers"), "cpu io memory pids").unwrap();
        fs::write(dir.join("cgroup.subtree_control"), "").unwrap();
        fs::write(dir.join("cgroup.procs"), "1\n17\n").unwrap();
        let cgroups = Cgroups::set_up(dir.clone()).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap(),
            "+memory"
        );
        // Each pid was written to the leaf (a plain file keeps the last).
        assert_eq!(
            fs::read_to_string(dir.join("init/cgroup.procs")).unwrap(),
            "17"
        );
        let svc = dir.join("service-gateway-work");
        fs::create_dir(&svc).unwrap();
        fs::write(svc.join("cgroup.procs"), "").unwrap();
        let _prepared = cgroups.prepare("gateway-work", 1 << 30).unwrap();
        assert_eq!(
            fs::read_to_string(svc.join("memory.max")).unwrap(),
            "1073741824"
        );
        assert_eq!(
            fs::read_to_string(svc.join("memory.oom.group")).unwrap(),
            "1"
        );
        fs::write(svc.join("memory.events"), "oom 1\noom_kill 1\n").unwrap();
        assert_eq!(cgroups.oom_kills("gateway-work"), 1);
        assert_eq!(cgroups.oom_kills("never-started"), 0);
    }

    #[test]
    fn cgroups_switched_off_or_absent_are_none() {
        let off = |k: &str| (k == CGROUPS_ENV).then(|| "off".to_string());
        assert!(matches!(
            Cgroups::detect(Path::new("/proc"), &off),
            Ok(None)
        ));
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(Cgroups::detect(empty.path(), &|_| None), Ok(None)));
    }
}
