//! What `hermes dump` and `hermes doctor` show of this crate's world, in `hermes-report`'s
//! terms: the supervisor of a home, the invalid entries of its `services:` and the original
//! agent. `hermes_diag::report`'s one `doctor()` and one `dump()` take them from here (for the
//! CLI and the dashboard alike), so both report the same.

use std::path::Path;
use std::time::Duration;

use hermes_report::{AgentView, Check, InvalidService, ServiceLine, SupervisorView};

use crate::Error;
use crate::declared::{Declared, declared_in};

/// How long `dump` waits for the supervisor: a report must come back even when it hangs.
pub const DUMP_TIMEOUT: Duration = Duration::from_secs(2);

/// What the supervisor of `root` says: its services, that none runs, or why it could not be
/// asked.
pub fn supervisor_view(root: &Path, var: impl Fn(&str) -> Option<String>) -> SupervisorView {
    let status = crate::connect(root, var, DUMP_TIMEOUT).and_then(|mut c| Ok(c.status(None)?));
    match status {
        Ok(rows) => SupervisorView::Running {
            services: rows
                .into_iter()
                .map(|r| ServiceLine {
                    name: r.name,
                    state: r.state.to_string(),
                    pid: r.pid.and_then(|p| u32::try_from(p).ok()),
                })
                .collect(),
        },
        Err(Error::NotRunning { .. }) => SupervisorView::NotRunning,
        Err(e) => SupervisorView::Unreachable {
            reason: hermes_errors::one_line(&e),
        },
    }
}

/// The entries of `services:` in the `config.yaml` of `root` that no supervisor runs, as `dump`
/// lists them (none when the file cannot be read: `dump` warns about that itself).
pub fn invalid_services(root: &Path) -> Vec<InvalidService> {
    let Ok(declared) = declared_in(root) else {
        return Vec::new();
    };
    declared
        .invalid
        .iter()
        .map(|entry| InvalidService {
            name: entry.name.clone(),
            reason: entry.reason(),
            fix: entry.fix(),
        })
        .collect()
}

/// `doctor`'s rows about the services declared in the `config.yaml` of `root`: ✗ for each
/// entry left out (and for a section that is no mapping) with its fix, ✓ when every entry is
/// valid; nothing when none is declared.
pub fn service_checks(root: &Path) -> Vec<Check> {
    let path = hermes_home::layout::config_path(root);
    match declared_in(root) {
        Ok(declared) => declared_checks(&declared, &path),
        Err(e) => vec![Check::warn(
            format!(
                "cannot check the services declared in `{}`: {}",
                path.display(),
                hermes_errors::one_line(&e)
            ),
            e.hint()
                .unwrap_or_else(|| format!("make `{}` readable YAML", path.display())),
        )],
    }
}

/// The rows of [`service_checks`] for what `path` declares.
fn declared_checks(declared: &Declared, path: &Path) -> Vec<Check> {
    let path = path.display();
    let mut checks: Vec<Check> = declared
        .section
        .iter()
        .map(|flaw| {
            Check::fail(
                format!("`services:` in `{path}`: {}", flaw.problem),
                &flaw.fix,
            )
        })
        .collect();
    checks.extend(declared.invalid.iter().map(|entry| {
        Check::fail(
            format!(
                "service `{}` in `{path}` is invalid and left out: {}",
                entry.name,
                entry.reason()
            ),
            entry.fix(),
        )
    }));
    if checks.is_empty() && !declared.specs.is_empty() {
        checks.push(Check::ok(format!(
            "`services:` in `{path}`: {} declared, all valid",
            declared.specs.len()
        )));
    }
    checks
}

/// `doctor`'s row about the memory limit of `home`'s profile's gateway: ✓ with the limit when
/// it has one, ⚠ with the fix when its value is not a size (the gateway then runs without
/// one); nothing without a limit.
pub fn gateway_limit_checks(
    home: &hermes_home::Home,
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<Check> {
    let config = hermes_settings::config_of(home.dir()).ok();
    let default = var(crate::gateway::MEMORY_MAX_VAR);
    match crate::gateway::resolve_memory_max(config.as_ref(), default.as_deref()) {
        Ok(None) => Vec::new(),
        Ok(Some(bytes)) => vec![Check::ok(format!(
            "gateway memory limit: {}",
            hermes_errors::bytes::human(bytes)
        ))],
        Err(problem) => vec![Check::warn(
            format!("gateway memory limit: {problem}; the gateway runs without one"),
            crate::gateway::MEMORY_MAX_HINT,
        )],
    }
}

/// `doctor`'s row about stopping: how long the volume's gateways may take to stop cleanly
/// ([`crate::stop_budget`]), and ⚠ when the container's own stop timeout, as
/// `HERMES_STOP_TIMEOUT` tells it, is shorter (a stop would then kill a gateway mid-write).
pub fn stop_checks(root: &Path, var: &dyn Fn(&str) -> Option<String>) -> Vec<Check> {
    use crate::stop_budget::{CONTAINER_STOP_TIMEOUT_VAR, container_needs, container_warning};
    let volume = hermes_settings::VolumeFiles::read(root, &hermes_settings::process_env());
    let graces = volume.profiles().iter().map(|read| {
        crate::gateway::stop_budget_of(read).map_or(crate::gateway::GATEWAY_STOP_GRACE, |b| b.grace)
    });
    let needs = container_needs(graces);
    let given = var(CONTAINER_STOP_TIMEOUT_VAR);
    match container_warning(given.as_deref(), needs) {
        Some(warning) => vec![Check::warn(
            warning,
            format!(
                "raise the container's stop timeout to {} s, and `{CONTAINER_STOP_TIMEOUT_VAR}` with it (docs/docker.md#stopping)",
                needs.as_secs()
            ),
        )],
        None => vec![Check::ok(match given {
            Some(given) => format!(
                "a clean stop takes at most {} s; the container's stop timeout is {} s",
                needs.as_secs(),
                given.trim()
            ),
            None => format!(
                "a clean stop takes at most {} s: give the container at least that (`docker stop -t {}`)",
                needs.as_secs(),
                needs.as_secs()
            ),
        })],
    }
}

/// The original agent whose commands are handed over ([`crate::agent::locate`]), as `version`
/// and `dump` show it.
pub fn agent_view(var: impl Fn(&str) -> Option<String>) -> AgentView {
    match crate::agent::locate(var) {
        Some(agent) => AgentView::Installed {
            version: agent.version,
            cli: agent.cli.display().to_string(),
            source: agent.source,
        },
        None => AgentView::NotInstalled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_report::Status;

    #[test]
    fn invalid_entries_are_doctor_failures_with_their_fix_and_dump_lines() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(service_checks(dir.path()), vec![], "nothing declared");
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            "services:\n  web:\n    command: x\n  typo:\n    comand: y\n",
        )
        .unwrap();
        let checks = service_checks(dir.path());
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert_eq!(checks[0].status, Status::Fail);
        assert_eq!(
            checks[0].message,
            format!(
                "service `typo` in `{}` is invalid and left out: unknown key `comand`; the command is missing",
                config.display()
            )
        );
        let fix = checks[0].fix.as_deref().unwrap_or_default();
        assert!(
            fix.starts_with("`comand`: did you mean `command`?"),
            "{fix}"
        );
        assert!(fix.contains("`command`: give a shell string"), "{fix}");
        let lines = invalid_services(dir.path());
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].name, "typo");
        assert_eq!(lines[0].fix, fix);

        std::fs::write(&config, "services:\n  web:\n    command: x\n").unwrap();
        let checks = service_checks(dir.path());
        assert_eq!(checks.len(), 1);
        assert_eq!(checks[0].status, Status::Ok, "{checks:?}");
        assert!(invalid_services(dir.path()).is_empty());

        std::fs::write(&config, "services: [a]\n").unwrap();
        let checks = service_checks(dir.path());
        assert_eq!(checks[0].status, Status::Fail, "{checks:?}");
        assert!(checks[0].message.contains("mapping"), "{checks:?}");
    }

    #[test]
    fn no_supervisor_and_no_agent_are_said_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir_all(&run).unwrap();
        let run = run.to_string_lossy().into_owned();
        let var = move |k: &str| (k == "HERMES_RUNTIME_DIR").then(|| run.clone());
        assert_eq!(
            supervisor_view(dir.path(), &var),
            SupervisorView::NotRunning
        );
        let none = |k: &str| (k == crate::agent::AGENT_CLI_VAR).then(String::new);
        assert_eq!(agent_view(none), AgentView::NotInstalled);
    }
}
