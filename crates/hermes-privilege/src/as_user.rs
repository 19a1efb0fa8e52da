//! Acting as another user for a while without giving up root: [`AsUser`].
//!
//! The one rule for root on a tree another user can write (docs/security.md, "Root on the
//! service user's volume"): what root does there, it does either through descriptors that
//! follow no link ([`crate::SafeDir`]) or with that user's ids, so the kernel refuses whatever
//! the user could not do itself. This is the second way.
//!
//! * PID 1's boot stage 5 (skeleton and seeds), stale-stamp removal, gateway reconciliation and
//!   the `desired_state` hook write files on the data volume as the service user
//!   ([`AsUser::enter`]): written by root they would be root-owned (a root-owned 0600
//!   `auth.json` locks the gateway out of its own credentials), and would follow an operator's
//!   symlink anywhere.
//! * `hermes backup create|verify|restore|recover` run by root act on the volume (and in an
//!   archive's directory) as the owner of that directory ([`AsUser::owner_of`]): a staging
//!   directory swapped, a directory flipped to a symlink or a journal planted by that user can
//!   then only lead root where the user could go anyway.
//!
//! The *effective* ids (uid, gid, groups) are switched; the *saved* uid stays 0, so root comes
//! back when the scope ends. Credentials are per thread in the kernel and glibc broadcasts them
//! to every thread, so this is only for processes where root is single-threaded at that point
//! (PID 1, the CLI); a multi-threaded process running as root must not use it.

use std::path::Path;

use crate::Identity;
use nix::unistd::{Gid, Uid, getgroups, setegid, seteuid, setgroups};

/// While alive, the process acts with another user's effective uid, gid and groups.
/// Dropping it restores root. Inactive (a no-op) when not root or when there is no one to act as.
#[derive(Debug)]
pub struct AsUser {
    restore: Option<Vec<Gid>>,
}

impl AsUser {
    /// Switches the effective ids to `identity` when running as root.
    ///
    /// # Errors
    /// The errno of the step that failed; the credentials are restored before returning.
    pub fn enter(identity: Option<&Identity>) -> nix::Result<AsUser> {
        match identity {
            Some(id) => Self::enter_ids(id.uid, id.gid, &id.groups),
            None => Ok(AsUser { restore: None }),
        }
    }

    /// Switches the effective ids to those of the owner of `path` (its uid, its gid as the only
    /// group) when running as root and `path` belongs to another user; otherwise a no-op. For
    /// `path` itself root's choice (`HERMES_HOME`, the directory of an archive it named) is
    /// trusted: the owner is read following links, and whatever is below is then reached as
    /// that owner.
    ///
    /// Refused in a process with more than one thread (a dashboard run as root, say): the
    /// switch is the whole process's, and another thread would act as that user meanwhile, or
    /// switch root back under this one.
    ///
    /// # Errors
    /// `stat` failing, another thread in the process, or the errno of the switch (the
    /// credentials restored before returning).
    pub fn owner_of(path: &Path) -> std::io::Result<AsUser> {
        if !Uid::effective().is_root() {
            return Ok(AsUser { restore: None });
        }
        let st = nix::sys::stat::stat(path)?;
        if st.st_uid == 0 {
            return Ok(AsUser { restore: None });
        }
        if threads() != Some(1) {
            return Err(std::io::Error::other(
                "root acts on another user's files only from a single-threaded process; run \
                 it from the command line (`hermes backup ...`), or as that user",
            ));
        }
        Ok(Self::enter_ids(st.st_uid, st.st_gid, &[st.st_gid])?)
    }

    /// Switches the effective ids to `uid`, `gid` and `groups` when running as root.
    ///
    /// # Errors
    /// The errno of the step that failed; the credentials are restored before returning.
    pub fn enter_ids(uid: u32, gid: u32, groups: &[u32]) -> nix::Result<AsUser> {
        if !Uid::effective().is_root() {
            return Ok(AsUser { restore: None });
        }
        let saved = getgroups()?;
        // Built first so that an early `?` below drops it, which restores root.
        let scope = AsUser {
            restore: Some(saved),
        };
        let groups: Vec<Gid> = groups.iter().map(|&g| Gid::from_raw(g)).collect();
        // Order matters: groups and gid can only be changed while the euid is still 0.
        setgroups(&groups)?;
        setegid(Gid::from_raw(gid))?;
        seteuid(Uid::from_raw(uid))?;
        Ok(scope)
    }

    /// Whether the ids were actually switched.
    pub fn is_active(&self) -> bool {
        self.restore.is_some()
    }
}

impl Drop for AsUser {
    fn drop(&mut self) {
        if let Some(groups) = self.restore.take() {
            // The saved uid is 0, so these cannot fail for lack of privilege.
            let _ = seteuid(Uid::from_raw(0));
            let _ = setegid(Gid::from_raw(0));
            let _ = setgroups(&groups);
        }
    }
}

/// How many threads this process has (`Threads:` of `/proc/self/status`).
fn threads() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_threaded_root_process_is_refused_the_switch() {
        if hermes_test_support::skip_unless_root("a directory of another user needs root") {
            return;
        }
        // The test harness runs tests on threads of their own: this process has several.
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(dir.path(), Some(10000), Some(10000)).unwrap();
        let err = AsUser::owner_of(dir.path()).unwrap_err();
        assert!(err.to_string().contains("single-threaded"), "{err}");
        assert!(Uid::effective().is_root(), "nothing was switched");
        // Its own directory: no switch needed, none refused.
        let own = tempfile::tempdir().unwrap();
        assert!(!AsUser::owner_of(own.path()).unwrap().is_active());
    }

    #[test]
    fn without_an_identity_nothing_changes() {
        let before = (Uid::effective(), Gid::effective());
        let scope = AsUser::enter(None).unwrap();
        assert!(!scope.is_active());
        assert_eq!((Uid::effective(), Gid::effective()), before);
    }

    #[test]
    fn effective_ids_switch_and_come_back_in_a_child() {
        if hermes_test_support::skip_unless_root("switching effective ids needs root") {
            return;
        }
        // Credentials are per thread and the test harness is multi-threaded: do it in a
        // forked child, which has exactly one thread, and report through the exit code.
        let id = Identity {
            name: "t".into(),
            uid: 10000,
            gid: 10001,
            groups: vec![10001, 10002],
            home: "/tmp".into(),
            shell: "/bin/sh".into(),
        };
        #[allow(unsafe_code)]
        // SAFETY: the child only calls the functions under test and `_exit`.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let ok = (|| {
                    let scope = AsUser::enter(Some(&id)).ok()?;
                    let inside = Uid::effective().as_raw() == 10000
                        && Gid::effective().as_raw() == 10001
                        && getgroups().ok()? == vec![Gid::from_raw(10001), Gid::from_raw(10002)];
                    drop(scope);
                    let back = Uid::effective().is_root() && Gid::effective().as_raw() == 0;
                    Some(inside && back)
                })();
                #[allow(unsafe_code)]
                // SAFETY: `_exit` is always safe to call; it skips the harness's atexit work.
                unsafe {
                    libc::_exit(if ok == Some(true) { 0 } else { 1 })
                }
            }
            nix::unistd::ForkResult::Parent { child } => {
                let status = nix::sys::wait::waitpid(child, None).unwrap();
                assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0));
            }
        }
    }
}
