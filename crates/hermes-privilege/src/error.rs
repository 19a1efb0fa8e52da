//! The crate's one error type.
//!
//! Every fallible function in `hermes-privilege` returns [`Error`]. Context lives in fields
//! (the file, the user, the step that failed), the message says what failed, and
//! [`Error::hint`] says what the operator should do about it. [`Error::exit_code`] carries
//! the exit-code policy of the privilege shim (126) so the binary does not have to re-derive
//! it from the variant.

use std::io;
use std::path::PathBuf;

/// What can go wrong while reading accounts, dropping privileges, remapping ids or
/// repairing ownership.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An account file (`/etc/passwd`, `/etc/group`) could not be read.
    #[error("cannot read `{}`", path.display())]
    Read {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// An account file could not be rewritten atomically.
    #[error("cannot rewrite `{}`", path.display())]
    Write {
        /// The file that could not be replaced.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// No passwd entry has this user name.
    #[error("no user `{name}` in `{}`", path.display())]
    UnknownUser {
        /// The user name looked up.
        name: String,
        /// The passwd file searched.
        path: PathBuf,
    },

    /// No group entry has this group name.
    #[error("no group `{name}` in `{}`", path.display())]
    UnknownGroup {
        /// The group name looked up.
        name: String,
        /// The group file searched.
        path: PathBuf,
    },

    /// The entry we need exists but cannot be parsed.
    #[error("malformed entry for `{name}` at `{}` line {line}: {reason}", path.display())]
    MalformedEntry {
        /// The account file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The user or group name of the entry.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// `drop_to` was called while other threads exist; changing the environment then is
    /// unsound, and credentials would have to be changed under running threads.
    #[error(
        "cannot drop privileges in-process: {}",
        match threads {
            0 => "cannot tell whether other threads run (`/proc/self/task` is unreadable)".to_owned(),
            n => format!("{n} threads are running"),
        }
    )]
    ThreadsRunning {
        /// How many threads `/proc/self/task` listed (0 when it could not be read).
        threads: usize,
    },

    /// One step of a privilege drop failed.
    #[error("cannot drop privileges to `{user}`: {step} failed")]
    Drop {
        /// The user being dropped to.
        user: String,
        /// The system call that failed.
        step: DropStep,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// After the drop, the process could still regain root: the drop is not real.
    #[error("privilege drop to `{user}` is not effective: `setuid(0)` still succeeds")]
    DropNotVerified {
        /// The user dropped to.
        user: String,
    },

    /// The root-exec shim had to drop to the service user and could not.
    #[error("refusing to run as root: cannot switch to `{user}`")]
    ShimDrop {
        /// The service user the shim wanted to become.
        user: String,
        /// Why the drop was impossible.
        #[source]
        source: Box<Error>,
    },

    /// `hermes init` was started as a user that is neither root nor the service user. The
    /// words `not supported` are the original image's (`docker/main-wrapper.sh`): its tests
    /// and operators' scripts look for them.
    #[error(
        "container started with `--user {uid}` (an arbitrary uid, neither root nor the `{user}` \
         user{}) — not supported",
        match service_uid { Some(u) => format!(", uid {u}"), None => String::new() }
    )]
    ForeignUser {
        /// The uid the container runs as.
        uid: u32,
        /// The gid the container runs as.
        gid: u32,
        /// The service user's name.
        user: String,
        /// The service user's uid, when it exists.
        service_uid: Option<u32>,
    },

    /// The root of an ownership repair (the data volume) could not be opened.
    #[error("cannot open `{}` for ownership repair", path.display())]
    RepairRoot {
        /// The data volume root.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// The system call of a privilege drop that failed, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DropStep {
    /// `setgroups`: supplementary groups.
    SetGroups,
    /// `setgid`: primary group.
    SetGid,
    /// `setuid`: user.
    SetUid,
}

impl std::fmt::Display for DropStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DropStep::SetGroups => "`setgroups`",
            DropStep::SetGid => "`setgid`",
            DropStep::SetUid => "`setuid`",
        })
    }
}

impl Error {
    /// The "what to do" line shown under the error, if there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Read { path, .. } => Some(format!(
                "check that `{}` exists and is readable by the current user",
                path.display()
            )),
            Error::Write { path, .. } => Some(format!(
                "`{}` must be writable by root and its directory must allow a rename \
                 (a bind-mounted single file cannot be replaced atomically)",
                path.display()
            )),
            Error::UnknownUser { name, .. } => Some(format!(
                "create the user first (`useradd {name}`) or use an image that ships it"
            )),
            Error::UnknownGroup { name, .. } => Some(format!(
                "create the group first (`groupadd {name}`) or use an image that ships it"
            )),
            Error::MalformedEntry { path, line, .. } => Some(format!(
                "fix line {line} of `{}`: a passwd entry is `name:x:uid:gid:gecos:home:shell`, \
                 a group entry is `name:x:gid:members`",
                path.display()
            )),
            Error::ThreadsRunning { .. } => Some(
                "drop privileges at the very start of the program, before any thread is \
                 spawned, or drop in the child with `DropPlan` instead"
                    .to_owned(),
            ),
            Error::Drop { .. } | Error::DropNotVerified { .. } => Some(
                "the process needs root (with `CAP_SETUID` and `CAP_SETGID`) to switch users; \
                 check the container's `--cap-drop` and seccomp settings"
                    .to_owned(),
            ),
            Error::ShimDrop { user, .. } => Some(format!(
                "re-run with `docker exec --user {user} ...`, or set \
                 `HERMES_DOCKER_EXEC_AS_ROOT=1` to run as root on purpose"
            )),
            Error::ForeignUser { uid, gid, .. } => Some(format!(
                "start the container without `--user` and set `HERMES_UID={uid}` and \
                 `HERMES_GID={gid}` (or `PUID`/`PGID`): hermes then runs as your ids"
            )),
            Error::RepairRoot { path, .. } => Some(format!(
                "check that the data volume is mounted at `{}`",
                path.display()
            )),
        }
    }

    /// The process exit code this error maps to: 126 when the root-exec shim could not drop
    /// privileges, 1 for every other user-facing failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::ShimDrop { .. } => 126,
            _ => 1,
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::Read { .. } => Error::Read {
        path: "/etc/passwd".into(),
        source: io::Error::from_raw_os_error(libc::EACCES),
    },
    Error::Write { .. } => Error::Write {
        path: "/etc/passwd".into(),
        source: io::Error::from_raw_os_error(libc::EBUSY),
    },
    Error::UnknownUser { .. } => Error::UnknownUser {
        name: "hermes".into(),
        path: "/etc/passwd".into(),
    },
    Error::UnknownGroup { .. } => Error::UnknownGroup {
        name: "hermes".into(),
        path: "/etc/group".into(),
    },
    Error::MalformedEntry { .. } => Error::MalformedEntry {
        path: "/etc/passwd".into(),
        line: 3,
        name: "hermes".into(),
        reason: "uid is not a number",
    },
    Error::ThreadsRunning { .. } => Error::ThreadsRunning { threads: 4 },
    Error::Drop { .. } => Error::Drop {
        user: "hermes".into(),
        step: DropStep::SetUid,
        source: io::Error::from_raw_os_error(libc::EPERM),
    },
    Error::DropNotVerified { .. } => Error::DropNotVerified {
        user: "hermes".into(),
    },
    Error::ShimDrop { .. } => Error::ShimDrop {
        user: "hermes".into(),
        source: Box::new(Error::UnknownUser {
            name: "hermes".into(),
            path: "/etc/passwd".into(),
        }),
    },
    Error::ForeignUser { .. } => Error::ForeignUser {
        uid: 1000,
        gid: 1000,
        user: "hermes".into(),
        service_uid: Some(10000),
    },
    Error::RepairRoot { .. } => Error::RepairRoot {
        path: "/opt/data".into(),
        source: io::Error::from_raw_os_error(libc::ENOENT),
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_follow_the_house_style_and_every_variant_has_a_hint() {
        for (name, err) in Error::every_variant() {
            let msg = err.to_string();
            let first = msg.chars().next().unwrap();
            assert!(
                !first.is_uppercase(),
                "{name}: message starts uppercase: {msg}"
            );
            assert!(
                !msg.ends_with('.'),
                "{name}: message ends with a period: {msg}"
            );
            let hint = err.hint().unwrap_or_default();
            assert!(!hint.is_empty(), "{name}: no hint for {msg}");
        }
    }

    #[test]
    fn shim_failure_exits_126_and_names_both_remedies() {
        let err = Error::ShimDrop {
            user: "hermes".into(),
            source: Box::new(Error::DropNotVerified {
                user: "hermes".into(),
            }),
        };
        assert_eq!(err.exit_code(), 126);
        let hint = err.hint().unwrap();
        assert!(hint.contains("--user hermes"), "{hint}");
        assert!(hint.contains("HERMES_DOCKER_EXEC_AS_ROOT=1"), "{hint}");
        assert_eq!(Error::ThreadsRunning { threads: 2 }.exit_code(), 1);
    }

    #[test]
    fn foreign_user_hint_gives_the_remap_remedy() {
        let err = Error::ForeignUser {
            uid: 1000,
            gid: 1001,
            user: "hermes".into(),
            service_uid: Some(10000),
        };
        assert_eq!(
            err.to_string(),
            "container started with `--user 1000` (an arbitrary uid, neither root nor the \
             `hermes` user, uid 10000) — not supported",
            "`not supported`: the original's words, which its tests and scripts grep for"
        );
        let hint = err.hint().unwrap();
        assert!(hint.contains("HERMES_UID=1000"), "{hint}");
        assert!(hint.contains("HERMES_GID=1001"), "{hint}");
        assert!(hint.contains("PUID"), "{hint}");
        assert_eq!(err.exit_code(), 1);
    }
}
