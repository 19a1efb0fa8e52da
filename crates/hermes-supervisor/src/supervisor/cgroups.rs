//! A cgroup of its own for each service with a limit (`memory_max`, `pids_max`), where the
//! supervisor may create cgroups: cgroup v2 with the memory or pids controller in a subtree
//! delegated to it, or cgroup v1's memory and pids hierarchies.
//!
//! The supervisor's cgroup is its to divide when it is the root of its cgroup namespace (a
//! container with a private cgroup namespace: Docker's `--cgroupns private`, the default on
//! cgroup v2) or PID 1, or when `HERMES_CGROUPS=on` says it was delegated (a test, a unit
//! with `Delegate=yes`) — and the cgroup filesystem is writable (Docker mounts it read-only
//! unless the container is privileged or user namespaces are remapped; Podman's
//! `--security-opt unmask=/sys/fs/cgroup` gives it; Kubernetes mounts it read-only in
//! unprivileged pods). Everywhere else — a read-only mount, `hermes up` inside a systemd
//! session, or `HERMES_CGROUPS=off` — [`Cgroups::detect`] returns `None` (or says why not)
//! and limits are enforced by sampling the service's tracked process tree (`resources`).
//!
//! Layout on cgroup v2, under the supervisor's own cgroup `<dir>`: v2's "no internal
//! processes" rule lets only a cgroup without processes give its children controllers, so at
//! set-up every process of `<dir>` (the supervisor, and anything `docker exec` put there)
//! moves to the leaf `<dir>/init` and `+memory +pids` is enabled in
//! `<dir>/cgroup.subtree_control`; a service then runs in `<dir>/service-<name>` with
//! `memory.max` (its limit), `memory.swap.max = 0` (a leak must not move to swap instead of
//! stopping), `memory.oom.group = 1` (an OOM kill takes its whole cgroup, never half a
//! service) and `pids.max`. Runtimes join `docker exec` processes to PID 1's cgroup when the
//! top one has controllers enabled (runc does since 1.0), so `docker exec` keeps working.
//!
//! On cgroup v1 each controller has a hierarchy of its own and no rule against internal
//! processes: a service runs in `service-<name>` under the supervisor's cgroup of the memory
//! hierarchy (`memory.limit_in_bytes`, and `memory.memsw.limit_in_bytes` equal to it where
//! swap is accounted) and of the pids hierarchy (`pids.max`). v1 has no group OOM kill: the
//! kernel kills one process of the cgroup, and the supervisor, seeing the count in
//! `memory.oom_control` grow, kills the rest ([`Cgroups::oom_kills`]).
//!
//! Either way the child joins its cgroups itself, before `exec`, by writing `0` to
//! `cgroup.procs` descriptors opened before the fork, so even its first fork is inside; and
//! every process a service leaves behind — through `setsid`, a double fork, an emptied
//! environment — is in its cgroup's `cgroup.procs` ([`Cgroups::members`]) for the stop to kill.
//!
//! Words defined here:
//! * **delegated subtree** — a cgroup directory the supervisor may create cgroups under (one
//!   on v2; one per controller on v1).

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The leaf every process of the supervisor's cgroup moves to at set-up (cgroup v2).
const INIT_LEAF: &str = "init";
/// A service's cgroup is `service-<name>` (never `init`: no service name starts that way).
const SERVICE_PREFIX: &str = "service-";

/// The environment variable that switches cgroups off (`off`, `0`, `false`, `no`), or says
/// the supervisor's own cgroup was delegated to it (`on`) where it could not tell.
pub const CGROUPS_ENV: &str = "HERMES_CGROUPS";

/// The limits a service's cgroup is given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Bytes of memory (with no swap beyond it).
    pub(crate) memory_max: Option<u64>,
    /// Processes (and threads) at once.
    pub(crate) pids_max: Option<u64>,
}

/// Which of a service's limits its cgroup enforces.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Enforced {
    pub(crate) memory: bool,
    pub(crate) pids: bool,
}

/// The delegated subtrees the supervisor creates services' cgroups in.
#[derive(Debug)]
pub(crate) enum Cgroups {
    /// cgroup v2: one directory, with the controllers it has enabled for its children.
    Unified {
        dir: PathBuf,
        memory: bool,
        pids: bool,
    },
    /// cgroup v1: the supervisor's directory in each controller's hierarchy it may write.
    Split {
        memory: Option<PathBuf>,
        pids: Option<PathBuf>,
    },
}

/// A service's cgroups, prepared for its next process.
pub(crate) struct Prepared {
    /// Each cgroup's `cgroup.procs`, open for writing, for the child to join with.
    pub(crate) procs: Vec<OwnedFd>,
    /// Which limits they enforce.
    pub(crate) enforced: Enforced,
}

impl Cgroups {
    /// The delegated subtrees, set up for services' cgroups; `Err` says why there are none
    /// (for the supervisor's notes), `Ok(None)` when cgroups are simply not there, not the
    /// supervisor's, or switched off.
    pub(crate) fn detect(
        proc: &Path,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, String> {
        let setting = var(CGROUPS_ENV).and_then(|v| hermes_errors::switch::parse(&v));
        if setting == Some(false) {
            return Ok(None);
        }
        let read = |name: &str| fs::read_to_string(proc.join("self").join(name));
        let (Ok(own), Ok(mounts)) = (read("cgroup"), read("mountinfo")) else {
            return Ok(None);
        };
        let ours = |path: &str| {
            setting == Some(true) || path == "/" || nix::unistd::getpid().as_raw() == 1
        };
        if let Some((path, dir)) = unified_dir(&own, &mounts) {
            let controllers =
                fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
            let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
            if has("memory") || has("pids") {
                if !ours(path) {
                    return Ok(None); // a cgroup someone else manages (a systemd session)
                }
                return Self::set_up(dir, has("memory"), has("pids")).map(Some);
            }
        }
        // cgroup v1, or hybrid (v2 mounted beside v1, the controllers v1's).
        let mut split = [None, None];
        for (slot, controller) in split.iter_mut().zip(["memory", "pids"]) {
            let Some((path, dir)) = split_dir(&own, &mounts, controller) else {
                continue;
            };
            if !ours(path) {
                return Ok(None);
            }
            if let Err(e) = nix::unistd::access(&dir, nix::unistd::AccessFlags::W_OK) {
                return Err(format!(
                    "cannot create cgroups in {} ({}); limits are enforced by sampling",
                    dir.display(),
                    e.desc().to_lowercase()
                ));
            }
            *slot = Some(dir);
        }
        let [memory, pids] = split;
        Ok((memory.is_some() || pids.is_some()).then_some(Cgroups::Split { memory, pids }))
    }

    /// cgroup v2: moves every process of `dir` to its `init` leaf and enables the memory and
    /// pids controllers (those it has) for its children.
    fn set_up(dir: PathBuf, memory: bool, pids: bool) -> Result<Self, String> {
        let failed = |what: &str, path: &Path, e: io::Error| {
            format!(
                "cannot {what} {} ({}); limits are enforced by sampling",
                path.display(),
                hermes_errors::describe_io(&e)
            )
        };
        let wanted: Vec<&str> = [("memory", memory), ("pids", pids)]
            .into_iter()
            .filter_map(|(c, has)| has.then_some(c))
            .collect();
        let enabled = fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default();
        let missing: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|c| !enabled.split_whitespace().any(|e| e == *c))
            .collect();
        if !missing.is_empty() {
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
            let line: Vec<String> = missing.iter().map(|c| format!("+{c}")).collect();
            fs::write(&control, line.join(" "))
                .map_err(|e| failed("enable controllers in", &control, e))?;
        }
        Ok(Cgroups::Unified { dir, memory, pids })
    }

    /// A service's own cgroups with its limits (none: no limit, but still its own, so every
    /// process it leaves is found), created (or reused) for its next process.
    pub(crate) fn prepare(&self, service: &str, limits: Limits) -> io::Result<Prepared> {
        let mut procs = Vec::new();
        let mut enforced = Enforced::default();
        let join = |dir: &Path, procs: &mut Vec<OwnedFd>| -> io::Result<()> {
            let file = fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))?;
            procs.push(file.into());
            Ok(())
        };
        match self {
            Cgroups::Unified { dir, memory, pids } => {
                let dir = service_dir(dir, service)?;
                if *memory {
                    let max = limits.memory_max.map_or("max".into(), |b| b.to_string());
                    fs::write(dir.join("memory.max"), max)?;
                    fs::write(dir.join("memory.oom.group"), "1")?;
                    // Absent when the kernel has no swap accounting: then there is no swap.
                    let _ = fs::write(dir.join("memory.swap.max"), "0");
                    enforced.memory = limits.memory_max.is_some();
                }
                if *pids {
                    let max = limits.pids_max.map_or("max".into(), |n| n.to_string());
                    fs::write(dir.join("pids.max"), max)?;
                    enforced.pids = limits.pids_max.is_some();
                }
                join(&dir, &mut procs)?;
            }
            Cgroups::Split { memory, pids } => {
                if let Some(parent) = memory {
                    let dir = service_dir(parent, service)?;
                    let max = limits.memory_max.map_or("-1".into(), |b| b.to_string());
                    // memsw (memory + swap) may never be below the memory limit: lift it
                    // first, then set both. Absent without swap accounting.
                    let memsw = dir.join("memory.memsw.limit_in_bytes");
                    let _ = fs::write(&memsw, "-1");
                    fs::write(dir.join("memory.limit_in_bytes"), &max)?;
                    let _ = fs::write(&memsw, &max);
                    enforced.memory = limits.memory_max.is_some();
                    join(&dir, &mut procs)?;
                }
                if let Some(parent) = pids {
                    let dir = service_dir(parent, service)?;
                    let max = limits.pids_max.map_or("max".into(), |n| n.to_string());
                    fs::write(dir.join("pids.max"), max)?;
                    enforced.pids = limits.pids_max.is_some();
                    join(&dir, &mut procs)?;
                }
            }
        }
        Ok(Prepared { procs, enforced })
    }

    /// How many times the kernel has OOM-killed in the service's cgroup (v2: `memory.events`;
    /// v1: `memory.oom_control`).
    pub(crate) fn oom_kills(&self, service: &str) -> u64 {
        let read = |dir: &Path, file: &str| {
            fs::read_to_string(dir.join(format!("{SERVICE_PREFIX}{service}")).join(file))
                .unwrap_or_default()
        };
        match self {
            Cgroups::Unified { dir, .. } => oom_kills(&read(dir, "memory.events")),
            Cgroups::Split {
                memory: Some(dir), ..
            } => counter(&read(dir, "memory.oom_control"), "oom_kill").unwrap_or(0),
            Cgroups::Split { memory: None, .. } => 0,
        }
    }

    /// Every process in the service's cgroups now, whatever its session, group or parent.
    pub(crate) fn members(&self, service: &str) -> Vec<i32> {
        let mut pids: Vec<i32> = self
            .service_dirs(service)
            .iter()
            .flat_map(|d| {
                fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<i32>>()
            })
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// Removes a forgotten service's cgroups (only possible once empty; else they stay, and
    /// are reused if the service comes back).
    pub(crate) fn remove(&self, service: &str) {
        for dir in self.service_dirs(service) {
            let _ = fs::remove_dir(dir);
        }
    }

    fn service_dirs(&self, service: &str) -> Vec<PathBuf> {
        let parents: Vec<&PathBuf> = match self {
            Cgroups::Unified { dir, .. } => vec![dir],
            Cgroups::Split { memory, pids } => memory.iter().chain(pids).collect(),
        };
        parents
            .into_iter()
            .map(|p| p.join(format!("{SERVICE_PREFIX}{service}")))
            .collect()
    }
}

/// `service-<name>` under `parent`, created if it is not there.
fn service_dir(parent: &Path, service: &str) -> io::Result<PathBuf> {
    let dir = parent.join(format!("{SERVICE_PREFIX}{service}"));
    match fs::create_dir(&dir) {
        Ok(()) => Ok(dir),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(dir),
        Err(e) => Err(e),
    }
}

/// The supervisor's cgroup v2 path (its `0::<path>` line of `/proc/self/cgroup`) and its
/// directory where the v2 filesystem is mounted (the mount of its root, which is what a
/// namespace's root sees).
fn unified_dir<'a>(own: &'a str, mountinfo: &str) -> Option<(&'a str, PathBuf)> {
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mount = mountinfo.lines().find_map(|line| {
        let m = Mount::parse(line)?;
        (m.fstype == "cgroup2" && m.root == "/").then(|| PathBuf::from(m.point))
    })?;
    Some((path, mount.join(path.trim_start_matches('/'))))
}

/// The supervisor's cgroup v1 path in `controller`'s hierarchy (its `N:<controllers>:<path>`
/// line of `/proc/self/cgroup`) and its directory under that hierarchy's mount.
fn split_dir<'a>(own: &'a str, mountinfo: &str, controller: &str) -> Option<(&'a str, PathBuf)> {
    let path = own.lines().find_map(|l| {
        let mut fields = l.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers
            .split(',')
            .any(|c| c == controller)
            .then_some(path)
    })?;
    let dir = mountinfo.lines().find_map(|line| {
        let m = Mount::parse(line)?;
        if m.fstype != "cgroup" || !m.options.split(',').any(|o| o == controller) {
            return None;
        }
        // The mount shows the hierarchy from `root` down: the path must be inside it.
        let inside = Path::new(path).strip_prefix(m.root).ok()?;
        Some(if inside.as_os_str().is_empty() {
            PathBuf::from(m.point) // no trailing `/` in what is said of it
        } else {
            Path::new(m.point).join(inside)
        })
    })?;
    Some((path, dir))
}

/// The fields of a `/proc/self/mountinfo` line a cgroup mount is found by.
struct Mount<'a> {
    root: &'a str,
    point: &'a str,
    fstype: &'a str,
    /// The super block's options (a v1 hierarchy's controllers are among them).
    options: &'a str,
}

impl<'a> Mount<'a> {
    fn parse(line: &'a str) -> Option<Self> {
        let (left, right) = line.split_once(" - ")?;
        let left: Vec<&str> = left.split_whitespace().collect();
        let mut right = right.split_whitespace();
        let fstype = right.next()?;
        let options = right.nth(1).unwrap_or("");
        Some(Mount {
            root: left.get(3)?,
            point: left.get(4)?,
            fstype,
            options,
        })
    }
}

/// The value of `key` in a `key value` file (`memory.events`, `memory.oom_control`).
fn counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
    })
}

/// The OOM kills `memory.events` counts: `oom_group_kill` when the group was killed as one,
/// else `oom_kill`.
fn oom_kills(events: &str) -> u64 {
    counter(events, "oom_group_kill")
        .filter(|&n| n > 0)
        .or_else(|| counter(events, "oom_kill"))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "\
25 30 0:22 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
26 30 0:23 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
27 30 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 30 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
36 30 0:30 /inner /elsewhere rw - cgroup2 cgroup2 rw";

    #[test]
    fn the_v2_directory_is_found_in_proc() {
        assert_eq!(
            unified_dir("0::/\n", HYBRID_MOUNTS),
            Some(("/", PathBuf::from("/sys/fs/cgroup/unified")))
        );
        assert_eq!(
            unified_dir("4:memory:/x\n0::/user.slice/a.scope\n", HYBRID_MOUNTS),
            Some((
                "/user.slice/a.scope",
                PathBuf::from("/sys/fs/cgroup/unified/user.slice/a.scope")
            ))
        );
        assert_eq!(unified_dir("4:memory:/x\n", HYBRID_MOUNTS), None);
        assert_eq!(
            unified_dir("0::/\n", "25 30 0:22 / /x rw - tmpfs tmpfs rw"),
            None
        );
    }

    #[test]
    fn the_v1_directories_are_found_per_controller() {
        let own = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/ab\n1:cpu,cpuacct:/c\n0::/\n";
        assert_eq!(
            split_dir(own, HYBRID_MOUNTS, "memory"),
            Some((
                "/process_api/ab",
                PathBuf::from("/sys/fs/cgroup/memory/process_api/ab")
            ))
        );
        assert_eq!(
            split_dir(own, HYBRID_MOUNTS, "pids"),
            Some(("/", PathBuf::from("/sys/fs/cgroup/pids")))
        );
        assert_eq!(
            split_dir(own, HYBRID_MOUNTS, "cpuacct"),
            Some(("/c", PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/c")))
        );
        // A container's view (host namespace): the mount's root is the container's cgroup.
        let docker =
            "30 29 0:40 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory";
        assert_eq!(
            split_dir("4:memory:/docker/abc\n", docker, "memory"),
            Some(("/docker/abc", PathBuf::from("/sys/fs/cgroup/memory")))
        );
        // A path outside the mount's root, or a controller not mounted: none.
        assert_eq!(split_dir("4:memory:/docker/abd\n", docker, "memory"), None);
        assert_eq!(
            split_dir(own, "25 30 0:22 / /x rw - tmpfs tmpfs rw", "memory"),
            None
        );
    }

    #[test]
    fn oom_kills_are_counted_from_memory_events_and_oom_control() {
        let events = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 1\n";
        assert_eq!(oom_kills(events), 1);
        assert_eq!(oom_kills("oom 1\noom_kill 3\n"), 3);
        assert_eq!(oom_kills("oom_kill 0\noom_group_kill 0\n"), 0);
        assert_eq!(oom_kills(""), 0);
        let control = "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n";
        assert_eq!(counter(control, "oom_kill"), Some(4));
    }

    /// Against a directory laid out as a cgroup v2 mount (plain files: what the supervisor
    /// writes, not what the kernel does with it).
    #[test]
    fn a_delegated_v2_subtree_is_set_up_and_a_service_gets_its_limits() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().to_path_buf();
        fs::write(dir.join("cgroup.controllers"), "cpu io memory pids").unwrap();
        fs::write(dir.join("cgroup.subtree_control"), "").unwrap();
        fs::write(dir.join("cgroup.procs"), "1\n17\n").unwrap();
        let cgroups = Cgroups::set_up(dir.clone(), true, true).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap(),
            "+memory +pids"
        );
        // Each pid was written to the leaf (a plain file keeps the last).
        assert_eq!(
            fs::read_to_string(dir.join("init/cgroup.procs")).unwrap(),
            "17"
        );
        let svc = dir.join("service-gateway-work");
        fs::create_dir(&svc).unwrap();
        fs::write(svc.join("cgroup.procs"), "40\n41\n").unwrap();
        let limits = Limits {
            memory_max: Some(1 << 30),
            pids_max: Some(512),
        };
        let prepared = cgroups.prepare("gateway-work", limits).unwrap();
        assert_eq!(prepared.procs.len(), 1);
        assert_eq!(
            prepared.enforced,
            Enforced {
                memory: true,
                pids: true
            }
        );
        let read = |f: &str| fs::read_to_string(svc.join(f)).unwrap();
        assert_eq!(read("memory.max"), "1073741824");
        assert_eq!(read("memory.oom.group"), "1");
        assert_eq!(read("pids.max"), "512");
        fs::write(svc.join("memory.events"), "oom 1\noom_kill 1\n").unwrap();
        assert_eq!(cgroups.oom_kills("gateway-work"), 1);
        assert_eq!(cgroups.oom_kills("never-started"), 0);
        assert_eq!(cgroups.members("gateway-work"), vec![40, 41]);
        // Its limits lifted: the cgroup stays its own, unlimited.
        fs::create_dir(dir.join("service-plain")).unwrap();
        fs::write(dir.join("service-plain/cgroup.procs"), "").unwrap();
        let plain = cgroups.prepare("plain", Limits::default()).unwrap();
        assert_eq!(plain.enforced, Enforced::default());
        assert_eq!(
            fs::read_to_string(dir.join("service-plain/pids.max")).unwrap(),
            "max"
        );
    }

    /// Against directories laid out as cgroup v1's memory and pids hierarchies.
    #[test]
    fn a_v1_service_gets_a_cgroup_in_each_hierarchy() {
        let root = tempfile::tempdir().unwrap();
        let (memory, pids) = (root.path().join("memory"), root.path().join("pids"));
        for dir in [&memory, &pids] {
            fs::create_dir_all(dir.join("service-w")).unwrap();
            fs::write(dir.join("service-w/cgroup.procs"), "7\n").unwrap();
        }
        fs::write(pids.join("service-w/cgroup.procs"), "7\n9\n").unwrap();
        let cgroups = Cgroups::Split {
            memory: Some(memory.clone()),
            pids: Some(pids.clone()),
        };
        let limits = Limits {
            memory_max: Some(64 << 20),
            pids_max: Some(32),
        };
        let prepared = cgroups.prepare("w", limits).unwrap();
        assert_eq!(prepared.procs.len(), 2, "one join per hierarchy");
        let read = |p: &Path| fs::read_to_string(p).unwrap();
        assert_eq!(
            read(&memory.join("service-w/memory.limit_in_bytes")),
            "67108864"
        );
        assert_eq!(
            read(&memory.join("service-w/memory.memsw.limit_in_bytes")),
            "67108864",
            "no swap beyond the limit"
        );
        assert_eq!(read(&pids.join("service-w/pids.max")), "32");
        fs::write(
            memory.join("service-w/memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert_eq!(cgroups.oom_kills("w"), 2);
        assert_eq!(cgroups.members("w"), vec![7, 9]);
    }

    /// A `/proc/self` of a v1 machine whose hierarchies are directories of a temporary tree.
    #[test]
    fn v1_is_detected_where_delegated_and_not_elsewhere() {
        let root = tempfile::tempdir().unwrap();
        let proc = root.path().join("proc");
        fs::create_dir_all(proc.join("self")).unwrap();
        let (memory, pids) = (root.path().join("memory"), root.path().join("pids"));
        fs::create_dir_all(memory.join("job")).unwrap();
        fs::create_dir_all(pids.join("job")).unwrap();
        fs::write(
            proc.join("self/cgroup"),
            "8:pids:/job\n4:memory:/job\n0::/\n",
        )
        .unwrap();
        fs::write(
            proc.join("self/mountinfo"),
            format!(
                "25 30 0:22 / {} rw - cgroup cgroup rw,memory\n26 30 0:23 / {} rw - cgroup cgroup rw,pids\n",
                memory.display(),
                pids.display()
            ),
        )
        .unwrap();
        let on = |k: &str| (k == CGROUPS_ENV).then(|| "on".to_string());
        let Ok(Some(Cgroups::Split {
            memory: Some(m),
            pids: Some(p),
        })) = Cgroups::detect(&proc, &on)
        else {
            panic!("v1 with memory and pids, delegated");
        };
        assert_eq!((m, p), (memory.join("job"), pids.join("job")));
        // Not PID 1, not the namespace's root, not told: someone else's cgroup.
        assert!(matches!(Cgroups::detect(&proc, &|_| None), Ok(None)));
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
