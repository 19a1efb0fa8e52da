//! Acting as the service user for a while without giving up root: [`AsUser`].
//!
//! Boot stage 5 (skeleton and seeds), stale-stamp removal, gateway reconciliation and the
//! `desired_state` hook write files on the data volume. Written by PID 1 as root they would
//! be root-owned (a root-owned 0600 `auth.json` locks the gateway out of its own
//! credentials), and as root they would follow an operator's symlink anywhere. So these
//! writes run with the *effective* ids of the service user: the kernel checks permissions
//! and assigns ownership exactly as for that user. The *saved* uid stays 0, so PID 1 gets
//! root back when the scope ends.
//!
//! Only sound in a single-threaded process (credentials are per thread on Linux; glibc
//! broadcasts them, but PID 1 never has other threads anyway).

use hermes_privilege::Identity;
use nix::unistd::{Gid, Uid, getgroups, setegid, seteuid, setgroups};

/// While alive, the process acts with the service user's effective uid, gid and groups.
/// Dropping it restores root. Inactive (a no-op) when not root or when there is no identity.
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
        let Some(id) = identity.filter(|_| Uid::effective().is_root()) else {
            return Ok(AsUser { restore: None });
        };
        let saved = getgroups()?;
        // Built first so that an early `?` below drops it, which restores root.
        let scope = AsUser {
            restore: Some(saved),
        };
        let groups: Vec<Gid> = id.groups.iter().map(|&g| Gid::from_raw(g)).collect();
        // Order matters: groups and gid can only be changed while the euid is still 0.
        setgroups(&groups)?;
        setegid(Gid::from_raw(id.gid))?;
        seteuid(Uid::from_raw(id.uid))?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
