//! Stopping a gateway on an operator's word (`hermes gateway stop|restart`): the planned-stop
//! marker that tells the gateway the SIGTERM that follows is an operator's
//! ([`mark_planned_stop`]), and stopping a gateway that runs without the supervisor — a
//! foreground `gateway run` holding its profile's `gateway.lock` ([`stop_unsupervised`]).

use std::path::Path;
use std::time::{Duration, Instant};

use hermes_home::{Home, gateway_lock, gateway_state};
use hermes_supervisor::Client;

use crate::Error;

/// How often [`stop_unsupervised`] looks at the lock while the gateway drains.
const POLL: Duration = Duration::from_millis(100);

/// A gateway [`stop_unsupervised`] stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// Its profile.
    pub profile: String,
    /// The pid it had.
    pub pid: u32,
}

/// Before an operator stop (or restart) of a supervised gateway: the planned-stop marker
/// naming its process (as the original's `hermes gateway stop` writes it), so the gateway
/// knows the SIGTERM that follows is an operator's — the agent engine then records `stopped`
/// and exits 0 instead of recording `running` as after an unexpected signal. Nothing is
/// written when the supervisor names no running process for `service`.
///
/// # Errors
/// [`Error::Home`] when the marker cannot be written; the supervisor records the desired
/// state either way, so a caller says it and goes on.
pub fn mark_planned_stop(home: &Home, client: &mut Client, service: &str) -> Result<(), Error> {
    let pid = client
        .status(Some(service))
        .ok()
        .and_then(|rows| rows.into_iter().find(|s| s.name == service))
        .and_then(|s| s.pid)
        .filter(|pid| *pid > 0);
    let Some(pid) = pid else {
        return Ok(());
    };
    let start_time = gateway_lock::process_start_time(pid);
    gateway_state::write_planned_stop(home.dir(), pid.unsigned_abs(), start_time)?;
    Ok(())
}

/// [`mark_planned_stop`] for an operator's stop or restart of any service by name, as the
/// dashboard's buttons make it: the marker when `service` is a profile's gateway under `root`,
/// nothing for other services.
///
/// # Errors
/// As [`mark_planned_stop`].
pub fn mark_planned_stop_of(root: &Path, client: &mut Client, service: &str) -> Result<(), Error> {
    match crate::gateway::home_of_service(root, service) {
        Some(home) => mark_planned_stop(&home, client, service),
        None => Ok(()),
    }
}

/// `gateway stop` without a supervisor, as the original's `stop_profile_gateway`: when
/// `home`'s gateway holds its lock and its record names the live process
/// ([`gateway_lock::live_holder`]; a reused pid is never signalled), write the planned-stop
/// marker naming it, so it records `stopped`, then SIGTERM it and wait up to `wait` for the
/// lock. `Ok(None)` when no gateway of `home` runs that way.
///
/// # Errors
/// [`Error::Home`] (the marker), [`Error::SignalGateway`], or [`Error::GatewayStillRunning`]
/// after `wait`.
pub fn stop_unsupervised(home: &Home, wait: Duration) -> Result<Option<Stopped>, Error> {
    let lock = gateway_lock::path(home.dir());
    let Some(holder) = gateway_lock::live_holder(&lock) else {
        return Ok(None);
    };
    let profile = home.profile().name().to_string();
    let pid = holder.pid.unsigned_abs();
    gateway_state::write_planned_stop(home.dir(), pid, Some(holder.start_time))?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(holder.pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .map_err(|source| Error::SignalGateway {
        profile: profile.clone(),
        pid,
        source,
    })?;
    let deadline = Instant::now() + wait;
    while gateway_lock::is_held(&lock) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    if gateway_lock::is_held(&lock) {
        return Err(Error::GatewayStillRunning {
            profile,
            pid,
            waited: wait,
        });
    }
    Ok(Some(Stopped { profile, pid }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_whose_gateway_runs_nowhere_is_left_alone() {
        let root = tempfile::tempdir().unwrap();
        let home =
            Home::for_profile(root.path().to_path_buf(), hermes_home::ProfileRef::Default).unwrap();
        assert_eq!(
            stop_unsupervised(&home, Duration::from_secs(1)).unwrap(),
            None
        );
        // A record without a holder (a gateway that exited) names no one to signal.
        let pid = std::process::id();
        let record = serde_json::json!({"pid": pid, "start_time": 1});
        std::fs::write(gateway_lock::path(home.dir()), record.to_string()).unwrap();
        assert_eq!(
            stop_unsupervised(&home, Duration::from_secs(1)).unwrap(),
            None
        );
        let marker = home.dir().join(gateway_state::PLANNED_STOP_FILE);
        assert!(!marker.exists(), "no marker written");
    }
}
