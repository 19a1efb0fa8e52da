//! The crate's one error type, [`Error`]: what goes wrong while reaching the supervisor,
//! choosing where it listens, registering a service or reading a service log.

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

#[cfg(test)]
mod tests {
    use super::*;

    fn every_variant() -> Vec<Error> {
        vec![
            Error::NotRunning {
                root: "/opt/data".into(),
                socket: "/run/hermes/supervisor.sock".into(),
            },
            Error::NoRuntimeDir {
                tried: vec![("/run/hermes".into(), "read-only file system".into())],
            },
            Error::Supervisor(hermes_supervisor::Error::PermissionDenied {
                socket: "/run/hermes/supervisor.sock".into(),
            }),
        ]
    }

    #[test]
    fn every_variant_has_a_clean_message_and_a_hint() {
        for e in every_variant() {
            let m = e.to_string();
            assert!(!m.is_empty() && !m.ends_with('.'), "{m}");
            assert!(m.chars().next().is_some_and(|c| !c.is_uppercase()), "{m}");
            assert!(e.hint().is_some_and(|h| !h.is_empty()), "{m}");
        }
    }
}
