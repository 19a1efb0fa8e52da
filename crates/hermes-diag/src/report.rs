//! `hermes dump` and `hermes doctor` for one home, whole: the one [`dump`] and the one
//! [`doctor`] that the CLI prints and the dashboard's Diagnostics page serves, so both show the
//! same and a new check lands in both.
//!
//! This crate sits above the ones that contribute parts: the supervisor's status, the invalid
//! entries of `services:` and the original agent come from `hermes_services::diag`, the
//! installer's and the plugins' rows from `hermes_plugins::doctor`, the gateway's verdict on the
//! settings from `hermes_gateway_settings` (in [`crate::doctor`]). Those crates produce their parts as
//! `hermes-report` data and never link this one.

use std::path::PathBuf;

use hermes_deps::Environment;
use hermes_home::Home;
use serde::Serialize;

use crate::doctor::{self, Check};
use crate::dump::{self, AgentView, DumpReport, InvalidService, SupervisorView};
use crate::identity::BuildIdentity;
use crate::install::Install;

/// The `hermes dump` report for `home`: `var` reads the environment (the supervisor's socket,
/// the agent, the keys set).
pub fn dump(home: &Home, var: &dyn Fn(&str) -> Option<String>) -> DumpReport {
    dump_report(
        home,
        var,
        hermes_services::diag::supervisor_view(home.root(), var),
        hermes_services::diag::invalid_services(home.root()),
        agent(var),
    )
}

/// The `hermes doctor` report for `home`: the home's checks, the declared services', then the
/// installer's and the plugins'. `var` reads the environment; `installer` is the environment the
/// installer would run with (the profile's `.env` is laid over it here).
pub fn doctor(
    home: &Home,
    var: &dyn Fn(&str) -> Option<String>,
    installer: Environment,
) -> DoctorReport {
    let mut extra = hermes_services::diag::service_checks(home.root());
    extra.extend(hermes_services::diag::stop_checks(home.root(), var));
    extra.extend(hermes_services::diag::gateway_limit_checks(home, var));
    extra.extend(
        hermes_plugins::doctor::profile_rows(home, installer)
            .into_iter()
            .map(Check::from),
    );
    doctor_report(home, var, extra)
}

/// The original agent whose commands are handed over, as `version` and `dump` show it.
pub fn agent(var: &dyn Fn(&str) -> Option<String>) -> AgentView {
    hermes_services::diag::agent_view(var)
}

/// This binary's build and how it was installed.
pub fn identity_and_install() -> (BuildIdentity, Install) {
    let install = Install::current();
    (BuildIdentity::current(install.dir.as_deref()), install)
}

/// The dump of `home` with the given views. `invalid_services` are listed under the services,
/// whether a supervisor runs or not.
fn dump_report(
    home: &Home,
    var: &dyn Fn(&str) -> Option<String>,
    supervisor: SupervisorView,
    invalid_services: Vec<InvalidService>,
    agent: AgentView,
) -> DumpReport {
    let (identity, install) = identity_and_install();
    let mut report = dump::collect(home, var, &identity, &install, supervisor, agent);
    report.invalid_services = invalid_services;
    report
}

/// What `hermes doctor` found for one profile (`hermes doctor --json` is this, serialized).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoctorReport {
    /// The profile's name.
    pub profile: String,
    /// The profile's directory.
    pub home: PathBuf,
    /// The checks in order: the home's, then the caller's.
    pub checks: Vec<Check>,
}

impl DoctorReport {
    /// The report as `hermes doctor` prints it (`color`: ANSI colours for a terminal).
    pub fn render(&self, color: bool) -> String {
        let title = format!(
            "hermes doctor — profile `{}` (`{}`)",
            self.profile,
            self.home.display()
        );
        doctor::render(&title, &self.checks, color)
    }

    /// Whether any check failed (`hermes doctor` then exits 1).
    pub fn failed(&self) -> bool {
        doctor::has_failures(&self.checks)
    }
}

/// The doctor report of `home`: the home's own checks, then `extra`.
fn doctor_report(
    home: &Home,
    var: &dyn Fn(&str) -> Option<String>,
    extra: Vec<Check>,
) -> DoctorReport {
    let (identity, _) = identity_and_install();
    let mut checks = doctor::home_checks(home, &identity, var);
    checks.extend(extra);
    DoctorReport {
        profile: home.profile().name().to_string(),
        home: home.dir().to_path_buf(),
        checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callers_checks_follow_the_homes_and_a_failure_fails_the_report() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::select(dir.path().to_path_buf(), Some("default")).unwrap();
        let none = |_: &str| None;
        let fine = doctor_report(&home, &none, vec![Check::ok("extra row")]);
        assert_eq!(fine.checks.last().unwrap().message, "extra row");
        assert!(fine.checks.len() > 1);
        assert_eq!(fine.profile, "default");
        let text = fine.render(false);
        assert!(
            text.starts_with("hermes doctor — profile `default` (`"),
            "{text}"
        );
        assert!(text.contains("  ✓ extra row\n"), "{text}");

        let broken = doctor_report(&home, &none, vec![Check::fail("broken", "mend it")]);
        assert!(broken.failed());
        assert!(broken.render(false).contains("      fix: mend it\n"));
        assert_eq!(
            serde_json::to_value(&broken).unwrap()["checks"]
                .as_array()
                .unwrap()
                .last()
                .unwrap(),
            &serde_json::json!({ "status": "fail", "message": "broken", "fix": "mend it" })
        );
    }

    /// The one `doctor()`: the home's rows, then the declared services', then the installer's
    /// and the memory provider's — the order both the CLI and the dashboard show.
    #[test]
    fn doctor_puts_the_services_and_the_plugins_rows_after_the_homes() {
        let dir = tempfile::tempdir().unwrap();
        hermes_home::layout::ensure_skeleton(
            dir.path(),
            true,
            &hermes_home::seeds::KeySeed::Generate,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            "memory:\n  provider: mem0\nservices:\n  typo:\n    comand: y\n",
        )
        .unwrap();
        let home = Home::select(dir.path().to_path_buf(), None).unwrap();
        let report = doctor(&home, &|_| None, Environment::default());
        let at = |needle: &str| {
            report
                .checks
                .iter()
                .position(|c| c.message.contains(needle))
                .unwrap_or_else(|| panic!("no row mentions {needle:?}: {:#?}", report.checks))
        };
        let (build, service, installs, memory) = (
            at("build identity"),
            at("service `typo`"),
            at("installs: "),
            at("memory provider: "),
        );
        assert!(build < service && service < installs && installs < memory);
        assert!(report.failed(), "an invalid service fails doctor");
    }

    #[test]
    fn dump_asks_the_homes_supervisor_and_lists_its_invalid_services() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            "services:\n  typo:\n    comand: y\n",
        )
        .unwrap();
        let home = Home::select(dir.path().to_path_buf(), None).unwrap();
        let run = run.to_string_lossy().into_owned();
        let var = move |k: &str| match k {
            "HERMES_RUNTIME_DIR" => Some(run.clone()),
            hermes_services::agent::AGENT_CLI_VAR => Some(String::new()),
            _ => None,
        };
        let report = dump(&home, &var);
        assert_eq!(report.supervisor, SupervisorView::NotRunning);
        assert_eq!(report.agent, AgentView::NotInstalled);
        assert_eq!(report.invalid_services.len(), 1, "{report:#?}");
        assert_eq!(report.invalid_services[0].name, "typo");
    }

    #[test]
    fn the_dump_report_carries_the_callers_views() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::select(dir.path().to_path_buf(), None).unwrap();
        let report = dump_report(
            &home,
            &|_| None,
            SupervisorView::NotRunning,
            Vec::new(),
            AgentView::NotInstalled,
        );
        assert_eq!(report.supervisor, SupervisorView::NotRunning);
        assert_eq!(report.agent, AgentView::NotInstalled);
        assert_eq!(report.profile, "default");
        let text = dump::render(&report);
        assert!(text.starts_with("--- hermes dump ---\n"));
        assert!(!text.contains("services:"), "{text}");
        assert!(serde_json::to_value(&report).unwrap()["invalid_services"].is_null());
    }

    #[test]
    fn invalid_services_are_listed_under_services_with_or_without_a_supervisor() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::select(dir.path().to_path_buf(), None).unwrap();
        let bad = InvalidService {
            name: "bad".into(),
            reason: "unknown key `comand`; the command is missing".into(),
            fix: "`comand`: did you mean `command`?".into(),
        };
        let running = SupervisorView::Running {
            services: vec![dump::ServiceLine {
                name: "web".into(),
                state: "up".into(),
                pid: Some(7),
            }],
        };
        for supervisor in [SupervisorView::NotRunning, running] {
            let report = dump_report(
                &home,
                &|_| None,
                supervisor,
                vec![bad.clone()],
                AgentView::NotInstalled,
            );
            let text = dump::render(&report);
            let services = text.find("services:\n").expect(&text);
            let line =
                "  bad                 invalid: unknown key `comand`; the command is missing\n";
            assert!(text[services..].contains(line), "{text}");
            assert_eq!(text.matches("services:").count(), 1, "{text}");
            assert_eq!(
                serde_json::to_value(&report).unwrap()["invalid_services"][0]["fix"],
                "`comand`: did you mean `command`?"
            );
        }
    }
}
