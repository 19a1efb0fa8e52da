//! Reconciliation: every profile's gateway service when a supervisor starts ([`reconcile()`]).
//!
//! Words:
//! * **prior state** — the profile's effective state from `gateway_state.json` (desired, else
//!   last; a last `stopped` that asked for a restart reads `running`, `GatewayState::run_intent`); a
//!   missing, unreadable or corrupt file is "no state" (`None`).
//! * **action** — `started` (prior state `running`: the service starts with the supervisor)
//!   or `registered` (known to the supervisor, `down` until an operator starts it).
//! * **prior exit** — how the profile's last gateway life ended, from its lifecycle ledger
//!   (`state/gateway.lifecycle.json`, `hermes_home::lifecycle_ledger`): `clean`, `unclean`
//!   (killed without an exit path) or `unknown`.
//!
//! The description, `profile=<p> prior_state=<s> action=<started|registered>
//! prior_exit=<clean|unclean|unknown>` ([`GatewayAction::describe`], the original's words),
//! is what `hermes up` prints and PID 1 writes to `logs/container-boot.log`.
//!
//! A stale `gateway.pid` (and `processes.json`) is removed: the supervisor, not a PID file,
//! knows whether a gateway runs.

use std::fs;
use std::io::Write;
use std::path::Path;

use hermes_home::ProfileRef;
use hermes_home::gateway_state::{self, StateRead};
use hermes_home::lifecycle_ledger::{self, PriorExit};
use hermes_privilege::Identity;
use hermes_settings::VolumeFiles;
use hermes_supervisor::ServiceSpec;

use crate::gateway::gateway_spec;
use crate::multiplex::Multiplexing;
use crate::say;

/// What reconciliation decided for one profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayAction {
    /// Profile name (`default` for the root).
    pub profile: String,
    /// The effective state read from disk, if any.
    pub prior_state: Option<String>,
    /// Whether the gateway starts with the supervisor.
    pub started: bool,
    /// How the last gateway life of the profile ended.
    pub prior_exit: PriorExit,
}

impl GatewayAction {
    /// The line that reports the action (the boot log's, without its timestamp).
    pub fn describe(&self) -> String {
        format!(
            "profile={} prior_state={} action={} prior_exit={}",
            self.profile,
            self.prior_state.as_deref().unwrap_or("None"),
            if self.started {
                "started"
            } else {
                "registered"
            },
            self.prior_exit
        )
    }
}

/// Builds the gateway services of every profile of `volume`, the volume at `home` read once
/// (PID 1's boot and `hermes up`); warnings (an unreadable profile list, profile or state
/// file, a broken `gateway.command`) go to `out`. PID 1 runs it with the service user's effective ids, so the files it touches stay
/// theirs. `fresh_default_runs`: a default profile that never ran a gateway (no state file)
/// starts it — `hermes up` on a fresh home; a container boot waits for
/// `HERMES_GATEWAY_BOOTSTRAP_STATE` instead.
///
/// When `multiplex` is on, every named profile's gateway is registered and never started (the
/// default profile's gateway serves it, and a
/// second one would own its platforms too), whatever its recorded state says; the recorded
/// state is kept, for the day multiplexing is switched off.
pub fn reconcile(
    home: &Path,
    hermes_exe: &Path,
    identity: Option<&Identity>,
    fresh_default_runs: bool,
    multiplex: &Multiplexing,
    volume: &VolumeFiles,
    out: &mut dyn Write,
) -> (Vec<ServiceSpec>, Vec<GatewayAction>) {
    if multiplex.on {
        say(
            out,
            format!(
                "multiplexing is on (from {}): gateway-default serves every profile; the other \
                 gateways are registered, not started",
                multiplex.source.as_str()
            ),
        );
    }
    if let Some(why) = volume.listing_problem() {
        say(
            out,
            format!("warning: cannot list profiles: {why}; only `default` is reconciled"),
        );
    }
    let mut specs = Vec::new();
    let mut actions = Vec::new();
    for read in volume.profiles() {
        let (profile, dir) = (read.name.clone(), read.dir.as_path());
        let state_file = gateway_state::path(dir);
        let prior_state = match gateway_state::read(&state_file) {
            Ok(StateRead::Valid(s)) => s.run_intent().map(str::to_owned),
            Ok(StateRead::Missing) => None,
            Ok(StateRead::Invalid(why)) => {
                say(
                    out,
                    format!("warning: profile `{profile}`: ignoring `gateway_state.json`: {why}"),
                );
                None
            }
            Err(e) => {
                say(
                    out,
                    format!(
                        "warning: profile `{profile}`: {}",
                        hermes_errors::one_line(&e)
                    ),
                );
                None
            }
        };
        for stale in ["gateway.pid", "processes.json"] {
            let p = dir.join(stale);
            if fs::symlink_metadata(&p).is_ok()
                && let Err(e) = fs::remove_file(&p)
            {
                say(
                    out,
                    format!("warning: cannot remove stale `{}`: {e}", p.display()),
                );
            }
        }
        let fresh_default = fresh_default_runs
            && profile == ProfileRef::Default.name()
            && fs::symlink_metadata(&state_file).is_err();
        let started = (prior_state.as_deref() == Some("running") || fresh_default)
            && multiplex.runs_own_gateway(&profile);
        specs.push(gateway_spec(home, read, hermes_exe, identity, started, out));
        actions.push(GatewayAction {
            profile,
            prior_state,
            started,
            prior_exit: lifecycle_ledger::prior_exit(dir),
        });
    }
    (specs, actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_supervisor::LogTarget;
    use std::path::PathBuf;

    fn profile(root: &Path, name: &str, state: Option<&str>, config: Option<&str>) -> PathBuf {
        let dir = if name == "default" {
            root.to_path_buf()
        } else {
            root.join("profiles").join(name)
        };
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("SOUL.md"), "soul").unwrap();
        if let Some(s) = state {
            fs::write(dir.join("gateway_state.json"), s).unwrap();
        }
        if let Some(c) = config {
            fs::write(dir.join("config.yaml"), c).unwrap();
        }
        dir
    }

    #[test]
    fn a_fresh_default_profile_starts_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        profile(root, "default", None, None);
        profile(root, "work", None, None);
        let mut out = Vec::new();
        let (boot, _) = reconcile(
            root,
            Path::new("/bin/hermes"),
            None,
            false,
            &Multiplexing::OFF,
            &VolumeFiles::read(root, &[]),
            &mut out,
        );
        assert!(
            boot.iter().all(|s| !s.autostart),
            "a container boot waits for a recorded state"
        );
        let (up, actions) = reconcile(
            root,
            Path::new("/bin/hermes"),
            None,
            true,
            &Multiplexing::OFF,
            &VolumeFiles::read(root, &[]),
            &mut out,
        );
        assert!(
            up[0].autostart && !up[1].autostart,
            "`hermes up` starts the fresh default only"
        );
        assert_eq!(
            actions[0].describe(),
            "profile=default prior_state=None action=started prior_exit=unknown"
        );
    }

    #[test]
    fn multiplexed_only_the_default_gateway_starts() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let running = r#"{"gateway_state":"running"}"#;
        profile(root, "default", Some(running), None);
        profile(root, "work", Some(running), None);
        profile(root, "home", Some(r#"{"desired_state":"running"}"#), None);
        let on = Multiplexing {
            on: true,
            source: hermes_home::multiplex::Source::Config,
            engine: crate::agent::Engine::Agent,
        };
        let mut out = Vec::new();
        let (specs, actions) = reconcile(
            root,
            Path::new("/bin/hermes"),
            None,
            false,
            &on,
            &VolumeFiles::read(root, &[]),
            &mut out,
        );
        let started: Vec<(&str, bool)> = specs
            .iter()
            .map(|s| (s.name.as_str(), s.autostart))
            .collect();
        assert_eq!(
            started,
            [
                ("gateway-default", true),
                ("gateway-home", false),
                ("gateway-work", false)
            ]
        );
        assert_eq!(
            actions[2].describe(),
            "profile=work prior_state=running action=registered prior_exit=unknown"
        );
        let said = String::from_utf8(out).unwrap();
        assert!(
            said.contains("multiplexing is on (from config.yaml)"),
            "{said}"
        );
        // The recorded states are kept for when multiplexing is switched off.
        let (specs, _) = reconcile(
            root,
            Path::new("/bin/hermes"),
            None,
            false,
            &Multiplexing::OFF,
            &VolumeFiles::read(root, &[]),
            &mut Vec::new(),
        );
        assert!(specs.iter().all(|s| s.autostart));
    }

    #[test]
    fn every_profile_gets_a_gateway_and_running_ones_start() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        profile(
            root,
            "default",
            Some(r#"{"gateway_state":"stopped","desired_state":"running"}"#),
            None,
        );
        let work = profile(
            root,
            "work",
            Some(r#"{"gateway_state":"running","desired_state":"stopped"}"#),
            None,
        );
        fs::write(work.join("gateway.pid"), "123").unwrap();
        profile(
            root,
            "alt",
            Some("{not json"),
            Some("gateway:\n  command: [\"my-agent\", \"--serve\"]\n"),
        );
        profile(
            root,
            "shell",
            Some(r#"{"gateway_state":"draining"}"#),
            Some("gateway:\n  command: \"exec agent2\"\n"),
        );
        fs::create_dir_all(root.join("profiles/nosoul")).unwrap();
        let mut out = Vec::new();
        let (specs, actions) = reconcile(
            root,
            Path::new("/bin/hermes"),
            None,
            false,
            &Multiplexing::OFF,
            &VolumeFiles::read(root, &[]),
            &mut out,
        );
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "gateway-default",
                "gateway-alt",
                "gateway-shell",
                "gateway-work"
            ]
        );
        let lines: Vec<String> = actions.iter().map(GatewayAction::describe).collect();
        assert_eq!(
            lines,
            [
                "profile=default prior_state=running action=started prior_exit=unknown",
                "profile=alt prior_state=None action=registered prior_exit=unknown",
                "profile=shell prior_state=running action=started prior_exit=unknown",
                "profile=work prior_state=stopped action=registered prior_exit=unknown",
            ]
        );
        assert_eq!(
            specs[0].argv,
            [
                "/bin/hermes",
                "-p",
                "default",
                "gateway",
                "run",
                "--no-supervise"
            ]
        );
        assert_eq!(specs[1].argv, ["my-agent", "--serve"]);
        assert_eq!(specs[2].argv, ["/bin/sh", "-c", "exec agent2"]);
        assert!(specs[0].autostart && !specs[3].autostart);
        assert!(
            specs.iter().all(|s| s.enabled),
            "registered means down, not disabled"
        );
        assert_eq!(
            specs[3].log,
            LogTarget::Dir(root.join("logs/gateways/work"))
        );
        assert_eq!(specs[3].profile.as_deref(), Some("work"));
        assert!(!work.join("gateway.pid").exists());
        let log = String::from_utf8(out).unwrap();
        assert!(
            log.contains("profile `alt`: ignoring `gateway_state.json`"),
            "{log}"
        );
    }

    #[test]
    fn a_gateway_that_exited_asking_for_a_restart_comes_back() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        profile(
            root,
            "default",
            Some(r#"{"gateway_state":"stopped","restart_requested":true}"#),
            None,
        );
        profile(
            root,
            "parked",
            Some(
                r#"{"gateway_state":"stopped","restart_requested":true,"desired_state":"stopped"}"#,
            ),
            None,
        );
        profile(
            root,
            "plain",
            Some(r#"{"gateway_state":"stopped","restart_requested":false}"#),
            None,
        );
        let (_, actions) = reconcile(
            root,
            Path::new("/bin/hermes"),
            None,
            false,
            &Multiplexing::OFF,
            &VolumeFiles::read(root, &[]),
            &mut Vec::new(),
        );
        let lines: Vec<String> = actions.iter().map(GatewayAction::describe).collect();
        assert_eq!(
            lines,
            [
                "profile=default prior_state=running action=started prior_exit=unknown",
                "profile=parked prior_state=stopped action=registered prior_exit=unknown",
                "profile=plain prior_state=stopped action=registered prior_exit=unknown",
            ]
        );
    }

    /// A gateway is `starting` only between a start and its verdict (`running`, or
    /// `startup_failed` for one that cannot start): a record still saying `starting` is a start
    /// cut short (everything killed a few ms into a restart), and without an operator's
    /// `desired_state` that start was the boot's or a restart's, meant to run.
    #[test]
    fn a_start_cut_short_by_a_crash_comes_back() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        profile(
            root,
            "default",
            Some(r#"{"gateway_state":"starting"}"#),
            None,
        );
        profile(
            root,
            "failed",
            Some(r#"{"gateway_state":"startup_failed"}"#),
            None,
        );
        profile(
            root,
            "parked",
            Some(r#"{"gateway_state":"starting","desired_state":"stopped"}"#),
            None,
        );
        let (specs, actions) = reconcile(
            root,
            Path::new("/bin/hermes"),
            None,
            false,
            &Multiplexing::OFF,
            &VolumeFiles::read(root, &[]),
            &mut Vec::new(),
        );
        let lines: Vec<String> = actions.iter().map(GatewayAction::describe).collect();
        assert_eq!(
            lines,
            [
                "profile=default prior_state=running action=started prior_exit=unknown",
                "profile=failed prior_state=startup_failed action=registered prior_exit=unknown",
                "profile=parked prior_state=stopped action=registered prior_exit=unknown",
            ]
        );
        assert!(specs[0].autostart);
    }

    #[test]
    fn the_prior_exit_comes_from_each_profiles_lifecycle_ledger() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let ledger = |dir: &Path, phase: &str| {
            fs::create_dir_all(dir.join("state")).unwrap();
            fs::write(
                dir.join("state/gateway.lifecycle.json"),
                format!(r#"{{"phase": "{phase}", "pid": 12}}"#),
            )
            .unwrap();
        };
        let default = profile(
            root,
            "default",
            Some(r#"{"gateway_state":"running"}"#),
            None,
        );
        ledger(&default, "running");
        let work = profile(root, "work", Some(r#"{"gateway_state":"stopped"}"#), None);
        ledger(&work, "exited");
        profile(root, "new", None, None);
        let (_, actions) = reconcile(
            root,
            Path::new("/bin/hermes"),
            None,
            false,
            &Multiplexing::OFF,
            &VolumeFiles::read(root, &[]),
            &mut Vec::new(),
        );
        let exits: Vec<(&str, PriorExit)> = actions
            .iter()
            .map(|a| (a.profile.as_str(), a.prior_exit))
            .collect();
        assert_eq!(
            exits,
            [
                ("default", PriorExit::Unclean),
                ("new", PriorExit::Unknown),
                ("work", PriorExit::Clean)
            ]
        );
        assert!(
            actions[0].describe().ends_with(" prior_exit=unclean"),
            "{}",
            actions[0].describe()
        );
    }
}
