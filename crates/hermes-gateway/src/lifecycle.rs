//! The gateway's lifecycle words: phases, how a run ends, and who hears about it.
//!
//! * [`Phase`] — what the gateway reports about itself (`starting` → `running` → `stopped`,
//!   or `starting` → `startup_failed`); the names are those of `gateway_state.json`.
//! * [`StateRecorder`] — the caller's sink for phases ([`crate::StateFileRecorder`] writes
//!   them into `gateway_state.json`).
//! * [`ShutdownRequest`] — what the caller's shutdown future resolves to: stop, or stop so
//!   that the supervisor restarts us at once.
//! * [`ExitReason`] — how [`crate::run`] ended, with the process exit code it maps to.

use std::net::SocketAddr;

use crate::error::{EXIT_CONFIG, Error};

/// Exit code asking the supervisor for an immediate restart (`EX_TEMPFAIL`).
pub use hermes_errors::exit::TEMPFAIL as EXIT_RESTART;

/// A gateway's reported phase, as written to `gateway_state.json`'s `gateway_state`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Settings accepted; taking the lock, opening the store, binding.
    Starting,
    /// Listening and serving.
    Running,
    /// Shut down after serving (cleanly or not: see the exit reason).
    Stopped,
    /// Never got to serve; the exit reason says why.
    StartupFailed,
}

impl Phase {
    /// The `gateway_state.json` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Running => "running",
            Phase::Stopped => "stopped",
            Phase::StartupFailed => "startup_failed",
        }
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Receives the gateway's phase changes. Implementations must be quick and must not panic;
/// failures to persist are theirs to log.
pub trait StateRecorder: Send + Sync {
    /// The gateway entered `phase`; `exit_reason` is set for `stopped` and `startup_failed`.
    fn record(&self, phase: Phase, exit_reason: Option<&str>);

    /// The gateway is listening on `addr` (the real port when port 0 was asked for).
    fn listening(&self, addr: SocketAddr) {
        let _ = addr;
    }

    /// The API server's state, recorded as the original records each platform's
    /// (`platforms.api_server` in `gateway_state.json`): `connected` while it serves,
    /// `disabled` with the reason when it is switched off.
    fn api_server(&self, state: &str, message: Option<&str>) {
        let _ = (state, message);
    }

    /// The run is ending through an exit path with process exit code `exit_code` (after the
    /// last [`StateRecorder::record`]), for `reason`: what the lifecycle ledger records, so a
    /// gateway that never gets here (SIGKILL, OOM) reads as an unclean exit at the next boot.
    fn exited(&self, exit_code: u8, reason: &str) {
        let _ = (exit_code, reason);
    }
}

/// A recorder that drops everything (for `chat_once`-only callers and tests).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopRecorder;

impl StateRecorder for NoopRecorder {
    fn record(&self, _phase: Phase, _exit_reason: Option<&str>) {}
}

/// What the caller's shutdown future asks for.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShutdownRequest {
    /// Drain and stop (SIGTERM): exit 0.
    #[default]
    Stop,
    /// Drain and stop, asking to be restarted at once: exit 75.
    Restart,
}

impl From<()> for ShutdownRequest {
    fn from((): ()) -> Self {
        ShutdownRequest::Stop
    }
}

/// How a gateway run ended.
#[non_exhaustive]
#[derive(Debug)]
pub enum ExitReason {
    /// Shut down on request after draining: exit 0.
    Stopped,
    /// Shut down on a restart request: exit 75.
    RestartRequested,
    /// The settings are unusable; nothing was started: exit 78.
    ConfigError(Error),
}

impl ExitReason {
    /// The process exit code for this reason (0, 75 or 78).
    pub fn exit_code(&self) -> u8 {
        match self {
            ExitReason::Stopped => 0,
            ExitReason::RestartRequested => EXIT_RESTART,
            ExitReason::ConfigError(_) => EXIT_CONFIG,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_use_gateway_state_spellings() {
        assert_eq!(Phase::StartupFailed.to_string(), "startup_failed");
        assert_eq!(Phase::Running.as_str(), "running");
    }

    #[test]
    fn exit_codes() {
        assert_eq!(ExitReason::Stopped.exit_code(), 0);
        assert_eq!(ExitReason::RestartRequested.exit_code(), 75);
        let e = Error::Settings(hermes_gateway_settings::Error::UnauthenticatedPublicBind {
            host: "0.0.0.0".into(),
        });
        assert_eq!(ExitReason::ConfigError(e).exit_code(), 78);
        assert_eq!(ShutdownRequest::from(()), ShutdownRequest::Stop);
    }
}
