//! The gateway's one error type.
//!
//! Every failure the gateway can report is a variant of [`Error`], with its context (path,
//! profile, host, port) in fields rather than joined into strings; the provider client's
//! failures are its own error ([`hermes_provider::Error`]: the provider URL, the status),
//! wrapped as they are in [`Error::Provider`], as the session store's are in
//! [`Error::Sessions`]. The message says what failed; [`Error::hint`] says what to do about
//! it; [`Error::exit_code`] says how a gateway process should exit because of it (78 for bad
//! configuration, so the supervisor parks the service as failed instead of restarting it in a
//! loop).
//!
//! Words: a *configuration error* is one that restarting cannot fix (see [`Error::is_config`]).

use std::path::PathBuf;
use std::time::Duration;

/// Exit code for a configuration error (`EX_CONFIG` from `sysexits.h`).
pub use hermes_errors::exit::CONFIG as EXIT_CONFIG;

/// Everything that can go wrong in the gateway.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The profile's settings cannot be used (a configuration error).
    #[error(transparent)]
    Settings(#[from] hermes_gateway_settings::Error),

    /// Another gateway holds this profile's lock.
    #[error("a gateway for profile `{profile}` is already running{} (lock `{}`)", pid_suffix(*pid), path.display())]
    AlreadyRunning {
        /// Profile name.
        profile: String,
        /// The holder's pid, when its lock record could be read.
        pid: Option<i32>,
        /// The lock file.
        path: PathBuf,
    },

    /// `--replace` could not make the running gateway let go of the lock.
    #[error("could not take over the gateway lock `{}` from pid {pid} within {waited:?}", path.display())]
    TakeoverTimedOut {
        /// The lock file.
        path: PathBuf,
        /// The holder that did not exit.
        pid: i32,
        /// How long we waited, SIGKILL included.
        waited: Duration,
    },

    /// The lock file could not be opened, locked or written.
    #[error("cannot use gateway lock file `{}`", path.display())]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },

    /// The listening port is taken by another program (possibly another profile's gateway).
    #[error(
        "port {port} on `{host}` is already in use, so the gateway for profile `{profile}` cannot listen"
    )]
    PortInUse {
        /// Profile name.
        profile: String,
        /// Bind host.
        host: String,
        /// Bind port.
        port: u16,
    },

    /// Binding or serving the HTTP listener failed for another reason.
    #[error("cannot serve HTTP on `{addr}`")]
    Serve {
        /// `host:port`.
        addr: String,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },

    /// The session store (`state.db`) failed, or a session id is not acceptable.
    #[error(transparent)]
    Sessions(#[from] hermes_sessions::Error),

    /// No model is configured for this profile, so there is nothing to chat with.
    #[error("no model is configured for profile `{profile}`")]
    NoModel {
        /// Profile name.
        profile: String,
        /// The profile's home directory, to name the files to edit.
        home: PathBuf,
    },

    /// The provider client failed (building it, or a request to the provider).
    #[error(transparent)]
    Provider(#[from] hermes_provider::Error),

    /// A background task died (a bug or a runtime shutting down).
    #[error("internal task failed: {reason}")]
    Task {
        /// What the runtime reported.
        reason: String,
    },
}

fn pid_suffix(pid: Option<i32>) -> String {
    pid.map(|p| format!(" as pid {p}")).unwrap_or_default()
}

impl From<hermes_home::Error> for Error {
    /// A profile file that cannot be read or parsed: a settings error.
    fn from(source: hermes_home::Error) -> Self {
        Error::Settings(source.into())
    }
}

impl From<hermes_home::api_server::InvalidSetting> for Error {
    fn from(e: hermes_home::api_server::InvalidSetting) -> Self {
        Error::Settings(e.into())
    }
}

impl Error {
    /// The "what to do" line for this error, when there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Settings(e) => e.hint(),
            Error::AlreadyRunning { .. } => Some(
                "stop the running gateway first, or pass `--replace` to take over from it".into(),
            ),
            Error::TakeoverTimedOut { pid, .. } => Some(format!(
                "check what pid {pid} is doing (`ps -p {pid}`) and stop it by hand"
            )),
            Error::Lock { path, .. } => Some(format!(
                "check that `{}` is writable by the user running the gateway",
                path.display()
            )),
            Error::PortInUse { port, .. } => Some(format!(
                "each profile needs its own port: set a free `API_SERVER_PORT` in this profile's `.env` (see who holds it with `ss -ltnp 'sport = :{port}'`)"
            )),
            Error::Serve { .. } => Some("check `API_SERVER_HOST` and `API_SERVER_PORT`".into()),
            Error::Sessions(e) => e.hint(),
            Error::NoModel { home, .. } => Some(format!(
                "set `model.default` (and `model.base_url` for a non-OpenAI provider) in `{}`, and the provider key `OPENAI_API_KEY` in `{}`",
                hermes_home::layout::config_path(home).display(),
                hermes_home::layout::env_path(home).display()
            )),
            Error::Provider(e) => e.hint(),
            Error::Task { .. } => Some(
                "retry; if it happens again, report it with the output of `hermes dump`".into(),
            ),
        }
    }

    /// True when restarting cannot fix this error: the operator must change the configuration.
    pub fn is_config(&self) -> bool {
        matches!(self, Error::Settings(_))
    }

    /// How a gateway process that failed with this error should exit: 78 for configuration
    /// errors, 1 for everything else (the supervisor retries those with backoff).
    pub fn exit_code(&self) -> u8 {
        if self.is_config() { EXIT_CONFIG } else { 1 }
    }
}

/// The settings' `n`th example error, as the gateway reports it.
#[cfg(any(test, feature = "examples"))]
#[allow(
    clippy::expect_used,
    reason = "example values for tests: a missing one is a failed test"
)]
fn settings_example(n: usize) -> Error {
    let (_, e) = Settings::every_variant()
        .into_iter()
        .nth(n)
        .expect("the settings list four examples");
    Error::Settings(e)
}

#[cfg(any(test, feature = "examples"))]
use hermes_gateway_settings::Error as Settings;

/// The session store's `n`th example error, as the gateway reports it.
#[cfg(any(test, feature = "examples"))]
#[allow(
    clippy::expect_used,
    reason = "example values for tests: a missing one is a failed test"
)]
fn session_example(n: usize) -> Error {
    let (_, e) = hermes_sessions::Error::every_variant()
        .into_iter()
        .nth(n)
        .expect("the session store lists four examples");
    Error::Sessions(e)
}

/// The provider client's first example error, as the gateway reports it. (The binary's
/// snapshot lists every one of them in this place: `hermes_provider::Error::every_variant`.)
#[cfg(any(test, feature = "examples"))]
#[allow(
    clippy::expect_used,
    reason = "example values for tests: a missing one is a failed test"
)]
fn provider_example() -> Error {
    let (_, e) = hermes_provider::Error::every_variant()
        .into_iter()
        .next()
        .expect("the provider client lists its examples");
    Error::Provider(e)
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::Settings(Settings::InvalidSetting { .. }) => settings_example(0),
    Error::Settings(Settings::Home { .. }) => settings_example(1),
    Error::Settings(Settings::UnauthenticatedPublicBind { .. }) => settings_example(2),
    Error::Settings(Settings::WeakApiServerKey { .. }) => settings_example(3),
    Error::AlreadyRunning { .. } => Error::AlreadyRunning {
        profile: "work".into(),
        pid: Some(4242),
        path: "/opt/data/profiles/work/gateway.lock".into(),
    },
    Error::TakeoverTimedOut { .. } => Error::TakeoverTimedOut {
        path: "/opt/data/profiles/work/gateway.lock".into(),
        pid: 4242,
        waited: Duration::from_secs(35),
    },
    Error::Lock { .. } => Error::Lock {
        path: "/opt/data/profiles/work/gateway.lock".into(),
        source: std::io::Error::from_raw_os_error(13),
    },
    Error::PortInUse { .. } => Error::PortInUse {
        profile: "work".into(),
        host: "127.0.0.1".into(),
        port: 8642,
    },
    Error::Serve { .. } => Error::Serve {
        addr: "203.0.113.7:8642".into(),
        source: std::io::Error::from_raw_os_error(99),
    },
    Error::Sessions(hermes_sessions::Error::SessionStore { .. }) => session_example(0),
    Error::Sessions(hermes_sessions::Error::SessionFile { .. }) => session_example(1),
    Error::Sessions(hermes_sessions::Error::InvalidSessionId { .. }) => session_example(2),
    Error::Sessions(hermes_sessions::Error::Task { .. }) => session_example(3),
    Error::NoModel { .. } => Error::NoModel {
        profile: "work".into(),
        home: "/opt/data/profiles/work".into(),
    },
    Error::Provider(_) => provider_example(),
    Error::Task { .. } => Error::Task {
        reason: "task 7 panicked".into(),
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_exit_78_and_others_exit_1() {
        let e = Error::Settings(Settings::UnauthenticatedPublicBind {
            host: "0.0.0.0".into(),
        });
        assert!(e.is_config());
        assert_eq!(e.exit_code(), 78);
        let e = Error::PortInUse {
            profile: "a".into(),
            host: "127.0.0.1".into(),
            port: 1,
        };
        assert_eq!(e.exit_code(), 1);
    }

    #[test]
    fn messages_are_lowercase_without_trailing_period() {
        let samples = [
            Error::Settings(Settings::UnauthenticatedPublicBind {
                host: "0.0.0.0".into(),
            }),
            Error::AlreadyRunning {
                profile: "p".into(),
                pid: Some(7),
                path: "/x/gateway.lock".into(),
            },
            Error::NoModel {
                profile: "p".into(),
                home: "/h".into(),
            },
            Error::PortInUse {
                profile: "p".into(),
                host: "h".into(),
                port: 9,
            },
        ];
        for e in samples {
            let msg = e.to_string();
            assert!(
                msg.chars().next().is_some_and(|c| c.is_lowercase()),
                "{msg}"
            );
            assert!(!msg.ends_with('.'), "{msg}");
            assert!(e.hint().is_some(), "{msg}");
        }
    }

    #[test]
    fn every_variant_follows_the_conventions() {
        for (name, e) in Error::every_variant() {
            let msg = e.to_string();
            assert!(
                msg.chars().next().is_some_and(|c| c.is_lowercase()),
                "{name}: {msg}"
            );
            assert!(!msg.ends_with('.'), "{name}: {msg}");
            if let Some(h) = e.hint() {
                assert!(!h.is_empty() && !h.ends_with('.'), "{name}: {h}");
            }
            assert!(e.exit_code() == 1 || e.exit_code() == EXIT_CONFIG);
        }
    }

    #[test]
    fn no_model_hint_names_the_keys_to_set() {
        let e = Error::NoModel {
            profile: "p".into(),
            home: "/h".into(),
        };
        let hint = e.hint().unwrap_or_default();
        assert!(hint.contains("model.default"), "{hint}");
        assert!(hint.contains("OPENAI_API_KEY"), "{hint}");
        assert!(hint.contains("/h/config.yaml"), "{hint}");
    }
}
