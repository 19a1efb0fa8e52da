//! What `hermes dump` shows of this crate's world, in `hermes-diag`'s terms: the supervisor
//! of a home and the original agent. The CLI's `hermes dump` and the dashboard's Diagnostics
//! page both take them from here, so they report the same.

use std::path::Path;
use std::time::Duration;

use hermes_diag::dump::{AgentView, ServiceLine, SupervisorView};

use crate::Error;

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

/// The original agent whose commands are handed over ([`crate::agent::locate`]), as `version`
/// and `dump` show it.
pub fn agent_view(var: impl Fn(&str) -> Option<String>) -> AgentView {
    match crate::agent::locate(var) {
        Some(agent) => AgentView::Installed {
            version: agent.version,
            cli: agent.cli.display().to_string(),
        },
        None => AgentView::NotInstalled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
