//! The crate's one error type, [`Error`], and its hints.
//!
//! Every variant carries its context (path, service, key) as fields. The message says what
//! failed; its source, when it has one, says why (rendered once, as `Caused by:`);
//! [`Error::hint`] says what to do about it. Callers render all three.

use std::path::PathBuf;

use crate::protocol::ErrorCode;

/// Everything that can go wrong in `hermes-supervisor` that the caller must hear about.
///
/// Failures of one service (cannot spawn, crash, bad exit) are *not* errors: they are states
/// with a reason, visible in status. These variants are about the supervisor itself and the
/// control client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another supervisor holds the lock in the runtime directory.
    #[error("a supervisor is already running (pid {pid}) in `{}`", runtime_dir.display())]
    AlreadyRunning {
        /// The pid written in the lock file by the running instance (0 if unreadable).
        pid: i32,
        /// The runtime directory that holds `supervisor.lock`.
        runtime_dir: PathBuf,
    },
    /// A filesystem or socket operation on a known path failed.
    #[error("cannot {action} `{}`", path.display())]
    Io {
        /// What we tried to do ("create", "bind", "lock", ...).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A system call the event loop depends on failed (signalfd, poll, ...).
    #[error("cannot set up {what}")]
    Sys {
        /// The facility that failed.
        what: &'static str,
        /// The errno.
        source: nix::Error,
    },
    /// A spec handed to [`crate::Supervisor::new`] is unusable.
    #[error("invalid service definition: {reason}")]
    InvalidSpec {
        /// The service name as given.
        service: String,
        /// What is wrong (it names the service).
        reason: String,
    },
    /// No supervisor listens on the control socket.
    #[error("the supervisor is not running (no listener on `{}`)", socket.display())]
    NotRunning {
        /// The socket path that was tried.
        socket: PathBuf,
    },
    /// The control socket exists but we may not use it.
    #[error("permission denied on the control socket `{}`", socket.display())]
    PermissionDenied {
        /// The socket path.
        socket: PathBuf,
    },
    /// Talking to the supervisor failed mid-exchange (timeout, reset, bad frame).
    #[error("control connection failed: {reason}")]
    Protocol {
        /// What went wrong, in words.
        reason: String,
    },
    /// The supervisor answered with an error.
    #[error("{message}")]
    Refused {
        /// Why, as the protocol says it.
        code: ErrorCode,
        /// The supervisor's message.
        message: String,
    },
}

/// What to do when the supervisor refuses a request with `code`.
fn refused_hint(code: &ErrorCode) -> &'static str {
    match code {
        ErrorCode::UnknownService => "list services with `hermes service status`",
        ErrorCode::Forbidden => "only root and the service user may use the control socket",
        ErrorCode::Busy => "the supervisor has too many clients at once: retry in a moment",
        ErrorCode::ShuttingDown => {
            "the supervisor is stopping: wait for it to exit, then start it again with `hermes up`"
        }
        ErrorCode::AlreadyRegistered => {
            "a service of that name runs with another definition: stop it, or choose another name"
        }
        // A request this binary built was refused as malformed or too large, or a code this
        // binary does not know: the running supervisor is another version of Hermes.
        ErrorCode::TooLarge
        | ErrorCode::InvalidRequest
        | ErrorCode::UnsupportedVersion
        | ErrorCode::Other(_) => {
            "the running supervisor may be another version of Hermes: restart it (`hermes up`) \
             with this binary"
        }
        ErrorCode::Internal => {
            "this is a bug in the supervisor: report it with the output of `hermes dump`"
        }
    }
}

impl Error {
    /// The "what to do" line shown under the error, when there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::AlreadyRunning { pid, .. } => Some(format!(
                "stop it first (`kill {pid}`), or talk to it with `hermes service status`"
            )),
            Error::NotRunning { .. } => {
                Some("start it with `hermes up` (or check `HERMES_RUNTIME_DIR`)".to_string())
            }
            Error::PermissionDenied { .. } => {
                Some("run as root or as the service user; the socket is mode 0660".to_string())
            }
            Error::Refused { code, .. } => Some(refused_hint(code).to_string()),
            Error::Protocol { .. } => Some(
                "check that the supervisor still answers (`hermes service status`); if it hangs, \
                 read its log and restart it"
                    .to_string(),
            ),
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied => {
                Some(
                    "give the directory to this user with mode 0755 (or remove it), or set \
                     `HERMES_RUNTIME_DIR` to a directory only this user can write"
                        .to_string(),
                )
            }
            Error::Io { .. } => Some("check that the directory exists and is writable".to_string()),
            Error::Sys { .. } => Some(
                "the supervisor needs `signalfd`, `poll` and `waitpid`: check the open-files \
                 limit (`ulimit -n`) and the container's seccomp profile"
                    .to_string(),
            ),
            Error::InvalidSpec { .. } => {
                Some("service names use letters, digits and `-_.@`; commands are non-empty".into())
            }
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::AlreadyRunning { .. } => Error::AlreadyRunning {
        pid: 42,
        runtime_dir: "/run/hermes".into(),
    },
    Error::Io { .. } => Error::io(
        "bind",
        "/run/hermes/supervisor.sock",
        std::io::Error::from_raw_os_error(13),
    ),
    Error::Sys { .. } => Error::Sys {
        what: "the signalfd",
        source: nix::Error::EMFILE,
    },
    Error::InvalidSpec { .. } => Error::InvalidSpec {
        service: "a/b".into(),
        reason: "bad service name `a/b` (letters, digits, `-_.@`, at most 64, not starting with `.`)"
            .into(),
    },
    Error::NotRunning { .. } => Error::NotRunning {
        socket: "/run/hermes/supervisor.sock".into(),
    },
    Error::PermissionDenied { .. } => Error::PermissionDenied {
        socket: "/run/hermes/supervisor.sock".into(),
    },
    Error::Protocol { .. } => Error::Protocol {
        reason: "timed out waiting for the supervisor".into(),
    },
    Error::Refused { .. } => Error::Refused {
        code: ErrorCode::UnknownService,
        message: "unknown service `gateway-wrok`".into(),
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_lowercase_without_period() {
        for (name, e) in Error::every_variant() {
            let m = e.to_string();
            assert!(
                m.chars().next().is_some_and(|c| c.is_lowercase()),
                "{name}: {m}"
            );
            assert!(!m.ends_with('.'), "{name}: {m}");
        }
    }

    #[test]
    fn hints_name_the_remedy() {
        let all = Error::every_variant();
        let hint = |name: &str| {
            all.iter()
                .find(|(n, _)| n.contains(name))
                .and_then(|(_, e)| e.hint())
                .unwrap_or_default()
        };
        assert!(hint("AlreadyRunning").contains("kill 42"));
        assert!(hint("NotRunning").contains("hermes up"));
        assert!(hint("Refused").contains("hermes service status"));
        assert!(hint("Io").contains("HERMES_RUNTIME_DIR"));
    }
}
