//! Remembering an operator's choice: [`DesiredStateHooks`].
//!
//! Words: the **desired state** of a gateway is what an operator last asked for (`running` after
//! a start or restart, `stopped` after a stop), kept as `desired_state` in its profile's
//! `gateway_state.json`, so the next boot or `hermes up` brings back exactly the gateways that
//! were meant to run. The supervisor writes it *before* it signals the gateway, so a gateway
//! that stops while its desired state is `stopped` records `stopped`.

use std::io::Write;
use std::path::PathBuf;

use hermes_home::ProfileRef;
use hermes_home::gateway_state::{self, DesiredState};
use hermes_supervisor::{Desired, Hooks, ServiceSpec};

use crate::say;

/// Supervisor hooks that write an operator's start or stop of a gateway service into its
/// profile's `gateway_state.json` as `desired_state`. A failure is said on `log` at once (not
/// at shutdown), and supervision goes on.
///
/// `hermes up` uses them as they are. PID 1 wraps them: it writes with the service user's
/// effective ids and gives back its boot-only pages once the loop has settled — neither is
/// anything a host command should do.
pub struct DesiredStateHooks<'a> {
    /// `HERMES_HOME`.
    pub home: PathBuf,
    /// Where warnings go (PID 1's boot log, `hermes up`'s stderr).
    pub log: &'a mut dyn Write,
}

impl DesiredStateHooks<'_> {
    /// Records `desired` for `service`; a service that is not a profile's gateway (no
    /// profile) has nothing to record.
    pub fn record(&mut self, service: &ServiceSpec, desired: Desired) {
        let Some(profile) = &service.profile else {
            return;
        };
        let dir = match ProfileRef::parse(profile) {
            Ok(ProfileRef::Default) => self.home.clone(),
            Ok(ProfileRef::Named(name)) => hermes_home::profile::profile_dir(&self.home, &name),
            Err(e) => {
                say(
                    self.log,
                    format!("warning: {}", hermes_errors::one_line(&e)),
                );
                return;
            }
        };
        let value = match desired {
            Desired::Running => DesiredState::Running,
            Desired::Stopped => DesiredState::Stopped,
        };
        if let Err(e) = gateway_state::set_desired(&gateway_state::path(&dir), value) {
            say(
                self.log,
                format!(
                    "warning: cannot record desired state: {}",
                    hermes_errors::one_line(&e)
                ),
            );
        }
    }

    /// Says a warning on the hooks' log (for a wrapper that cannot record at all).
    pub fn warn(&mut self, message: impl std::fmt::Display) {
        say(self.log, format!("warning: {message}"));
    }
}

impl Hooks for DesiredStateHooks<'_> {
    fn desired_state_changed(&mut self, service: &ServiceSpec, desired: Desired) {
        self.record(service, desired);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn hooks_write_desired_state_and_keep_other_keys() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("profiles/work");
        fs::create_dir_all(&work).unwrap();
        fs::write(work.join("SOUL.md"), "soul").unwrap();
        fs::write(
            work.join("gateway_state.json"),
            r#"{"gateway_state":"running","x":1}"#,
        )
        .unwrap();
        let mut log = Vec::new();
        let mut hooks = DesiredStateHooks {
            home: tmp.path().to_path_buf(),
            log: &mut log,
        };
        let mut spec = ServiceSpec::new("gateway-work", vec!["x".into()]);
        spec.profile = Some("work".into());
        hooks.desired_state_changed(&spec, Desired::Stopped);
        hooks.desired_state_changed(
            &ServiceSpec::new("main", vec!["x".into()]),
            Desired::Running,
        );
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(work.join("gateway_state.json")).unwrap())
                .unwrap();
        assert_eq!(v["desired_state"], "stopped");
        assert_eq!(v["x"], 1);
        assert!(log.is_empty(), "{}", String::from_utf8_lossy(&log));
    }

    #[test]
    fn a_failure_is_said_at_once() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = Vec::new();
        let mut hooks = DesiredStateHooks {
            home: tmp.path().join("missing"),
            log: &mut log,
        };
        let mut spec = ServiceSpec::new("gateway-default", vec!["x".into()]);
        spec.profile = Some("default".into());
        hooks.desired_state_changed(&spec, Desired::Running);
        let text = String::from_utf8(log).unwrap();
        assert!(
            text.starts_with("warning: cannot record desired state: "),
            "{text}"
        );
    }
}
