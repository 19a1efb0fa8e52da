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
    /// A profile, its files or its settings could not be used.
    #[error(transparent)]
    Home(#[from] hermes_home::Error),
    /// The supervisor answered but would not remove a profile's gateway, so the profile was
    /// not deleted.
    #[error("the supervisor did not remove `{service}`, so profile `{profile}` was not deleted")]
    GatewayNotRemoved {
        /// The profile.
        profile: String,
        /// Its gateway service.
        service: String,
        /// The supervisor's refusal.
        #[source]
        source: hermes_supervisor::Error,
    },
    /// A supervisor runs but could not be asked to stop a profile's gateway, which may still
    /// be writing into the profile: the profile was not deleted.
    #[error(
        "the supervisor did not answer, so `{service}` may still be writing into profile \
         `{profile}`: it was not deleted"
    )]
    SupervisorUnanswered {
        /// The profile.
        profile: String,
        /// Its gateway service.
        service: String,
        /// Why the supervisor could not be asked.
        #[source]
        source: Box<Error>,
    },
    /// A gateway running without the supervisor could not be signalled.
    #[error("cannot signal the `{profile}` gateway (pid {pid})")]
    SignalGateway {
        /// The profile.
        profile: String,
        /// The gateway's pid.
        pid: u32,
        /// The errno.
        #[source]
        source: nix::Error,
    },
    /// A gateway running without the supervisor is still running after SIGTERM and the wait.
    #[error("the `{profile}` gateway (pid {pid}) is still running {}s after SIGTERM", waited.as_secs())]
    GatewayStillRunning {
        /// The profile.
        profile: String,
        /// The gateway's pid.
        pid: u32,
        /// How long it was given.
        waited: std::time::Duration,
    },
    /// The systemd user unit directory is unknown (neither `XDG_CONFIG_HOME` nor `HOME`).
    #[error("cannot locate the systemd user directory: `HOME` is not set")]
    NoUnitDir,
    /// A systemd user unit is enabled, so it is not removed.
    #[error("`{unit_name}` is enabled (`{}`): not removed while systemd still starts it", wants.display())]
    UnitEnabled {
        /// The unit's file name.
        unit_name: String,
        /// The link that enables it.
        wants: PathBuf,
    },
    /// A systemd user unit could not be written or removed.
    #[error("cannot {action} `{}`", path.display())]
    UnitFile {
        /// What was tried (`write`, `remove`).
        action: &'static str,
        /// The unit file (or its directory).
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
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
            Error::Home(e) => e.hint(),
            Error::GatewayNotRemoved { profile, .. } => Some(format!(
                "stop its gateway (`hermes -p {profile} gateway stop`, or on the dashboard's \
                 Overview) and delete it again"
            )),
            Error::SupervisorUnanswered { .. } => Some(
                "retry in a moment; `hermes service list` shows whether the supervisor answers"
                    .into(),
            ),
            Error::SignalGateway { .. } => {
                Some("run `hermes gateway stop` as the user running the gateway".into())
            }
            Error::GatewayStillRunning { pid, .. } => Some(format!(
                "it may still be draining; check again, or end it with `kill -KILL {pid}`"
            )),
            Error::NoUnitDir => Some(
                "set `HOME` (or `XDG_CONFIG_HOME`) to the user's directories and run it again"
                    .into(),
            ),
            Error::UnitEnabled { unit_name, .. } => Some(format!(
                "first run `systemctl --user disable --now {unit_name}`, then `hermes gateway \
                 uninstall` again"
            )),
            Error::UnitFile { .. } => Some(
                "check that this user may write its systemd user directory \
                 (`~/.config/systemd/user`)"
                    .into(),
            ),
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
    Error::Home(_) => Error::Home(hermes_home::Error::DefaultProfileUndeletable),
    Error::GatewayNotRemoved { .. } => Error::GatewayNotRemoved {
        profile: "work".into(),
        service: "gateway-work".into(),
        source: hermes_supervisor::Error::Refused {
            code: hermes_supervisor::protocol::ErrorCode::ShuttingDown,
            message: "the supervisor is shutting down".into(),
        },
    },
    Error::SupervisorUnanswered { .. } => Error::SupervisorUnanswered {
        profile: "work".into(),
        service: "gateway-work".into(),
        source: Box::new(Error::Supervisor(hermes_supervisor::Error::Protocol {
            reason: "the supervisor closed the connection".into(),
        })),
    },
    Error::SignalGateway { .. } => Error::SignalGateway {
        profile: "work".into(),
        pid: 4242,
        source: nix::Error::EPERM,
    },
    Error::GatewayStillRunning { .. } => Error::GatewayStillRunning {
        profile: "work".into(),
        pid: 4242,
        waited: std::time::Duration::from_secs(35),
    },
    Error::NoUnitDir => Error::NoUnitDir,
    Error::UnitEnabled { .. } => Error::UnitEnabled {
        unit_name: "hermes-gateway-work.service".into(),
        wants: "/home/me/.config/systemd/user/default.target.wants/hermes-gateway-work.service"
            .into(),
    },
    Error::UnitFile { .. } => Error::UnitFile {
        action: "write",
        path: "/home/me/.config/systemd/user/hermes-gateway-work.service".into(),
        source: std::io::Error::from_raw_os_error(30),
    },
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
