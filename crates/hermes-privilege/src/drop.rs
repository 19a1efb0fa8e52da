//! Privilege drop: becoming an [`Identity`], in this process or in a child before `exec`.
//!
//! A *drop* sets, in this order, the supplementary groups (`setgroups`), the primary group
//! (`setgid`) and the user (`setuid`), then *verifies* it: the ids read back are the target
//! ones and `setuid(0)` fails. Order matters: once the uid is no longer 0 the process may not
//! change its groups any more, so groups go first. A drop also sets the identity's
//! [`Identity::env_overrides`] (`HOME`, `USER`, `LOGNAME`, `SHELL`, XDG dirs) and leaves
//! every other variable alone — `HOME=/root` after a drop is the bug this exists to prevent.
//!
//! Two ways to drop:
//! * [`drop_to`] changes the current process. It refuses to run when other threads exist,
//!   because changing the environment under running threads is unsound.
//! * [`DropPlan`] is the same drop as plain data, built before `fork`, whose
//!   [`DropPlan::apply`] only makes async-signal-safe system calls and never allocates, so a
//!   spawner may call it in the child between `fork` and `exec` (`pre_exec`).
//!   [`configure_command`] wires both halves into a `std::process::Command`.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::error::DropStep;
use crate::{Error, Identity};

/// A privilege drop prepared as data, safe to apply in a forked child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropPlan {
    uid: libc::uid_t,
    gid: libc::gid_t,
    groups: Vec<libc::gid_t>,
}

/// Which part of [`DropPlan`] failed, with the raw errno. Kept allocation-free so it can be
/// produced in a forked child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    Step(DropStep, i32),
    /// The ids did not stick, or `setuid(0)` succeeded after the drop.
    NotVerified,
}

impl DropPlan {
    /// The drop to `identity`: its uid, primary gid and every supplementary group.
    pub fn new(identity: &Identity) -> Self {
        DropPlan {
            uid: identity.uid,
            gid: identity.gid,
            groups: identity.groups.clone(),
        }
    }

    /// The drop to raw ids, for callers that carry no [`Identity`] (a supervisor's service).
    pub fn from_ids(uid: u32, gid: u32, groups: Vec<u32>) -> Self {
        DropPlan { uid, gid, groups }
    }

    /// Applies the credential part of the drop to the calling process (environment is the
    /// spawner's job: see [`configure_command`]).
    ///
    /// Async-signal-safe: only `setgroups`, `setgid`, `setuid`, `getuid`, `geteuid`,
    /// `getgid`, `getegid`, no allocation, no locks. A failed verification (the process
    /// could regain root) is reported as `EPERM`, so the child never execs half-dropped.
    pub fn apply(&self) -> io::Result<()> {
        match self.apply_steps() {
            Ok(()) => Ok(()),
            Err(Failure::Step(_, errno)) => Err(io::Error::from_raw_os_error(errno)),
            Err(Failure::NotVerified) => Err(io::Error::from_raw_os_error(libc::EPERM)),
        }
    }

    /// The target uid.
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The target primary gid.
    pub fn gid(&self) -> u32 {
        self.gid
    }

    /// The target supplementary groups.
    pub fn groups(&self) -> &[u32] {
        &self.groups
    }

    #[allow(unsafe_code)]
    fn apply_steps(&self) -> Result<(), Failure> {
        let errno = || {
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EPERM)
        };
        // SAFETY: `groups` is a live slice of `gid_t` and the length passed is its length;
        // setgroups only reads it.
        if unsafe { libc::setgroups(self.groups.len(), self.groups.as_ptr()) } != 0 {
            return Err(Failure::Step(DropStep::SetGroups, errno()));
        }
        // SAFETY: plain system calls on integer arguments.
        if unsafe { libc::setgid(self.gid) } != 0 {
            return Err(Failure::Step(DropStep::SetGid, errno()));
        }
        // SAFETY: as above.
        if unsafe { libc::setuid(self.uid) } != 0 {
            return Err(Failure::Step(DropStep::SetUid, errno()));
        }
        // SAFETY: these getters cannot fail and take no pointers.
        let (ruid, euid, rgid, egid) = unsafe {
            (
                libc::getuid(),
                libc::geteuid(),
                libc::getgid(),
                libc::getegid(),
            )
        };
        if ruid != self.uid || euid != self.uid || rgid != self.gid || egid != self.gid {
            return Err(Failure::NotVerified);
        }
        // Dropping to root is not a drop; for anyone else, regaining root must be impossible
        // (setuid changes the saved set-user-id too when called as root, so this fails).
        // SAFETY: plain system call on an integer argument.
        if self.uid != 0 && unsafe { libc::setuid(0) } == 0 {
            return Err(Failure::NotVerified);
        }
        Ok(())
    }
}

/// Drops the current process to `identity`: supplementary groups, gid, uid, verified, then
/// the [`Identity::env_overrides`] are set in the process environment.
///
/// Call it first thing in `main`, before any thread exists; with other threads running it
/// returns [`Error::ThreadsRunning`] and changes nothing.
#[allow(unsafe_code)]
pub fn drop_to(identity: &Identity) -> Result<(), Error> {
    let threads = thread_count();
    if threads != 1 {
        return Err(Error::ThreadsRunning { threads });
    }
    DropPlan::new(identity)
        .apply_steps()
        .map_err(|failure| match failure {
            Failure::Step(step, errno) => Error::Drop {
                user: identity.name.clone(),
                step,
                source: io::Error::from_raw_os_error(errno),
            },
            Failure::NotVerified => Error::DropNotVerified {
                user: identity.name.clone(),
            },
        })?;
    for (key, value) in identity.env_overrides() {
        // SAFETY: we checked above that this process has exactly one thread, so nothing can
        // read the environment concurrently.
        unsafe { std::env::set_var(key, value) };
    }
    Ok(())
}

/// Makes `cmd` run as `identity`: sets the environment overrides on the command (the rest of
/// the environment is inherited unchanged) and applies a [`DropPlan`] in the child before
/// `exec`.
#[allow(unsafe_code)]
pub fn configure_command(cmd: &mut Command, identity: &Identity) {
    cmd.envs(identity.env_overrides());
    let plan = DropPlan::new(identity);
    // SAFETY: the closure only calls `DropPlan::apply`, which is async-signal-safe and does
    // not allocate; the plan itself was built here, before fork.
    unsafe {
        cmd.pre_exec(move || plan.apply());
    }
}

/// Threads of this process, from `/proc/self/task`; 0 when it cannot be read (which
/// `drop_to` treats as "not provably single-threaded").
fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(uid: u32, gid: u32, groups: Vec<u32>) -> Identity {
        Identity {
            name: "t".into(),
            uid,
            gid,
            groups,
            home: "/tmp/t-home".into(),
            shell: "/bin/sh".into(),
        }
    }

    #[test]
    fn plan_carries_all_ids() {
        let plan = DropPlan::new(&identity(10000, 10000, vec![10000, 10001]));
        assert_eq!(
            (plan.uid(), plan.gid(), plan.groups()),
            (10000, 10000, &[10000, 10001][..])
        );
    }

    #[test]
    fn drop_to_refuses_in_a_multithreaded_process() {
        // The test harness runs tests on worker threads, so this process has several.
        let before = (nix::unistd::geteuid(), nix::unistd::getegid());
        let err = drop_to(&identity(10000, 10000, vec![10000])).unwrap_err();
        assert!(
            matches!(err, Error::ThreadsRunning { threads } if threads != 1),
            "{err:?}"
        );
        // Nothing changed.
        assert_eq!((nix::unistd::geteuid(), nix::unistd::getegid()), before);
        assert_ne!(std::env::var("HOME").ok().as_deref(), Some("/tmp/t-home"));
    }

    #[test]
    fn command_drop_runs_the_child_as_the_identity() {
        if crate::test_support::skip_unless_root("dropping privileges in a child needs root") {
            return;
        }
        let mut cmd = Command::new("/bin/sh");
        cmd.args([
            "-c",
            "echo \"$(id -u) $(id -g) $(id -G) $HOME $USER $KEEP\"",
        ]);
        cmd.env("KEEP", "kept");
        configure_command(&mut cmd, &identity(10000, 10000, vec![10000, 10001]));
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let line = String::from_utf8(out.stdout).unwrap();
        assert_eq!(line.trim(), "10000 10000 10000 10001 /tmp/t-home t kept");
    }
}
