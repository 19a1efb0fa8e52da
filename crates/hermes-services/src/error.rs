//! The crate's one error type, [`Error`]: what goes wrong while reaching the supervisor,
//! choosing where it listens, registering a service or reading a service log. Context lives
//! in fields, the message says what failed (its cause is the error's source, shown once as
//! `Caused by:`), and [`Error::hint`] says what to do.

use std::path::PathBuf;

/// A failure of the service layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No supervisor listens for this home (no control socket, or nobody behind it).
    #[error("no supervisor is running for `{}`", root.display())]
    NotRunning {
        /// `HERMES_HOME`.
        root: PathBuf,
        /// The control socket that was tried.
        socket: PathBuf,
    },
    /// No candidate runtime directory could be made private for the control socket.
    #[error(
        "no private directory for the control socket: {}",
        describe_tried(tried)
    )]
    NoRuntimeDir {
        /// Each candidate and why it was refused.
        tried: Vec<(PathBuf, String)>,
    },
    /// The supervisor refused or failed a request, or its socket could not be used.
    #[error(transparent)]
    Supervisor(#[from] hermes_supervisor::Error),
    /// A name no service can have (so it has no log either).
    #[error("invalid service name `{name}`")]
    InvalidServiceName {
        /// The name as given.
        name: String,
    },
    /// A service's log cannot be opened: it never wrote one, or it is not readable.
    #[error("no log for `{service}` at `{}`", path.display())]
    NoLog {
        /// The service.
        service: String,
        /// Its current log file.
        path: PathBuf,
        /// Why it cannot be opened.
        #[source]
        source: std::io::Error,
    },
    /// A log file could not be read (or, being followed, reopened after a rotation).
    #[error("cannot read the log `{}`", path.display())]
    LogRead {
        /// The log file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A profile's gateway engine setting cannot be honoured (the gateway exits 78).
    #[error(transparent)]
    Engine(#[from] crate::agent::EngineProblem),
    /// The installed agent must not serve the volume: it is older, or a migration failed.
    #[error(transparent)]
    Upgrade(#[from] crate::upgrade::UpgradeProblem),
}

impl Error {
    /// The "what to do" line shown under the error.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::NotRunning { .. } => Some(
                "start one with `hermes up` (on a host), or run Hermes in its container".into(),
            ),
            Error::NoRuntimeDir { .. } => Some(
                "give the container a writable `/run` or `/tmp` (`--tmpfs /run`), or set \
                 `HERMES_RUNTIME_DIR` to a directory only the supervisor's user can write"
                    .to_owned(),
            ),
            Error::Supervisor(e) => e.hint(),
            Error::InvalidServiceName { .. } | Error::NoLog { .. } => {
                Some("list services with `hermes service list`".into())
            }
            Error::LogRead { .. } => {
                Some("check that this user may read the service's log directory".into())
            }
            Error::Engine(problem) => problem.hint(),
            Error::Upgrade(problem) => problem.hint(),
        }
    }

    pub(crate) fn log_read(path: &std::path::Path, source: std::io::Error) -> Self {
        Error::LogRead {
            path: path.to_path_buf(),
            source,
        }
    }
}

fn describe_tried(tried: &[(PathBuf, String)]) -> String {
    tried
        .iter()
        .map(|(dir, why)| format!("`{}` ({why})", dir.display()))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::NotRunning { .. } => Error::NotRunning {
        root: "/opt/data".into(),
        socket: "/run/hermes/supervisor.sock".into(),
    },
    Error::NoRuntimeDir { .. } => Error::NoRuntimeDir {
        tried: vec![
            ("/run/hermes".into(), "read-only file system".into()),
            (
                "/tmp/hermes".into(),
                "`/tmp/hermes` belongs to uid 1000 (mode 755); it must belong to uid 10000 and \
                 be writable by nobody else"
                    .into(),
            ),
        ],
    },
    Error::Supervisor(_) => Error::Supervisor(hermes_supervisor::Error::PermissionDenied {
        socket: "/run/hermes/supervisor.sock".into(),
    }),
    Error::InvalidServiceName { .. } => Error::InvalidServiceName {
        name: "../etc".into(),
    },
    Error::NoLog { .. } => Error::NoLog {
        service: "gateway-work".into(),
        path: "/opt/data/logs/gateways/work/current".into(),
        source: std::io::Error::from_raw_os_error(2),
    },
    Error::LogRead { .. } => Error::LogRead {
        path: "/opt/data/logs/gateways/work/current".into(),
        source: std::io::Error::from_raw_os_error(13),
    },
    Error::Engine(_) => Error::Engine(crate::agent::EngineProblem::AgentMissing {
        setting: "gateway.engine",
    }),
    Error::Upgrade(_) => Error::Upgrade(crate::upgrade::UpgradeProblem::Downgrade {
        volume: 35,
        file: "/opt/data/config.yaml".into(),
        agent_version: Some("0.19.0".into()),
        agent: 33,
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
}
