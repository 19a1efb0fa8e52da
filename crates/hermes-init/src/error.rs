//! The crate's one error type, [`Error`]: the failures that stop `hermes init` (or the
//! root-exec shim) before the main program can run. Everything else a boot stage meets is a
//! warning line, never an error.

use std::path::PathBuf;

/// A failure that makes running unsafe or impossible.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A privilege rule refused to go on: the `--user` guard, a shim drop that cannot happen,
    /// or the service user missing inside the image.
    #[error(transparent)]
    Privilege(#[from] hermes_privilege::Error),
    /// The service user has no account inside the image, so nothing can be dropped to it.
    #[error("the service user `{user}` has no account in `{}`", passwd.display())]
    NoServiceUser {
        /// The user looked up.
        user: String,
        /// The passwd file that was read.
        passwd: PathBuf,
        /// Why the lookup failed.
        #[source]
        source: hermes_privilege::Error,
    },
    /// Signal handling could not be set up (the signal mask).
    #[error("cannot set up {what}")]
    Signals {
        /// The facility.
        what: &'static str,
        /// The errno.
        source: nix::Error,
    },
    /// Root lacks the capabilities to become the service user (`--cap-drop ALL`).
    #[error(
        "running as root without CAP_SETUID and CAP_SETGID: cannot switch to the service user `{user}`"
    )]
    CannotSwitchUser {
        /// The service user.
        user: String,
    },
    /// The data volume cannot be written by the service user: nothing could be saved.
    #[error("the data volume `{}` is not writable by uid {uid}", path.display())]
    VolumeNotWritable {
        /// `HERMES_HOME`.
        path: PathBuf,
        /// The user that tried (the service user).
        uid: u32,
        /// The error of the probe write.
        source: std::io::Error,
    },
    /// The service layer failed: no private runtime directory for the control socket.
    #[error(transparent)]
    Services(#[from] hermes_services::Error),
    /// The supervisor could not start (runtime directory, lock, control socket).
    #[error(transparent)]
    Supervisor(#[from] hermes_supervisor::Error),
}

impl Error {
    /// The "what to do" line shown under the error.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Privilege(e) => e.hint(),
            Error::NoServiceUser { user, .. } => Some(format!(
                "the image must ship the `{user}` user; rebuild it, or run a command with \
                 `HERMES_DOCKER_EXEC_AS_ROOT=1` to inspect it as root"
            )),
            Error::Signals { .. } => Some(
                "`hermes init` must be the container's entrypoint, started before any other \
                 thread exists; check the container's seccomp profile"
                    .to_owned(),
            ),
            Error::CannotSwitchUser { user } => Some(format!(
                "start the container as the service user itself (`--user 10000:10000`), which \
                 needs no capability at all, or keep CAP_SETUID and CAP_SETGID so root can drop \
                 to `{user}`"
            )),
            Error::VolumeNotWritable { uid, .. } => Some(format!(
                "mount the volume read-write and give it to uid {uid} (or set `HERMES_UID` / \
                 `HERMES_GID` to the ids that own it)"
            )),
            Error::Services(e) => e.hint(),
            Error::Supervisor(e) => e.hint(),
        }
    }

    /// The process exit code for this error: 126 when the root-exec shim cannot drop, else 1.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Privilege(e) => e.exit_code(),
            _ => 1,
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::Privilege(_) => Error::Privilege(hermes_privilege::Error::ForeignUser {
        uid: 1000,
        gid: 1000,
        user: "hermes".into(),
        service_uid: Some(10000),
    }),
    Error::NoServiceUser { .. } => Error::NoServiceUser {
        user: "hermes".into(),
        passwd: "/etc/passwd".into(),
        source: hermes_privilege::Error::UnknownUser {
            name: "hermes".into(),
            path: "/etc/passwd".into(),
        },
    },
    Error::Signals { .. } => Error::Signals {
        what: "the signal mask",
        source: nix::Error::EPERM,
    },
    Error::CannotSwitchUser { .. } => Error::CannotSwitchUser {
        user: "hermes".into(),
    },
    Error::VolumeNotWritable { .. } => Error::VolumeNotWritable {
        path: "/opt/data".into(),
        uid: 10000,
        source: std::io::Error::from_raw_os_error(30),
    },
    Error::Services(_) => Error::Services(hermes_services::Error::NoRuntimeDir {
        tried: vec![("/run/hermes".into(), "read-only file system".into())],
    }),
    Error::Supervisor(_) => Error::Supervisor(hermes_supervisor::Error::AlreadyRunning {
        pid: 7,
        runtime_dir: "/run/hermes".into(),
    }),
});

#[cfg(test)]
mod tests {
    use super::*;

    /// Every failure of this crate says what to do (the message style of all crates is
    /// checked where they are rendered, in the binary's snapshot tests).
    #[test]
    fn every_variant_has_a_hint() {
        for (name, e) in Error::every_variant() {
            assert!(e.hint().is_some_and(|h| !h.is_empty()), "{name}: {e}");
        }
    }

    #[test]
    fn foreign_user_hint_names_the_remedy_and_exits_1() {
        let e = &Error::every_variant()[0].1;
        assert!(e.hint().unwrap().contains("HERMES_UID=1000"));
        assert_eq!(e.exit_code(), 1);
    }

    #[test]
    fn a_failed_shim_drop_exits_126() {
        let e = Error::Privilege(hermes_privilege::Error::ShimDrop {
            user: "hermes".into(),
            source: Box::new(hermes_privilege::Error::UnknownUser {
                name: "hermes".into(),
                path: "/etc/passwd".into(),
            }),
        });
        assert_eq!(e.exit_code(), 126);
    }
}
