//! What `hermes dump` shows of the supervisor, of the declared services and of the original
//! agent: views that `hermes-services` fills in and `hermes-diag` renders.

use serde::Serialize;

/// One supervised service as the supervisor reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceLine {
    /// Service name (`gateway-default`, `dashboard`, ...).
    pub name: String,
    /// State word (`up`, `down`, `failed`, ...).
    pub state: String,
    /// Process id when running.
    pub pid: Option<u32>,
}

/// An entry of `services:` in the root's `config.yaml` that no supervisor runs because it is
/// invalid (found by `hermes_services::declared`, the supervisors' own parser).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InvalidService {
    /// The entry's name.
    pub name: String,
    /// What is wrong, in one line.
    pub reason: String,
    /// What to do, in one line.
    pub fix: String,
}

/// What is known about the supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum SupervisorView {
    /// No supervisor answers on this home's control socket.
    NotRunning,
    /// A supervisor answered with these services.
    Running {
        /// Its services.
        services: Vec<ServiceLine>,
    },
    /// Something answered but the exchange failed.
    Unreachable {
        /// Why.
        reason: String,
    },
}

/// The original agent (`hermes-agent`) beside this binary, as `version` and `dump` report
/// it. `hermes_services::diag::agent_view` finds it; the report only shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum AgentView {
    /// No agent here (the slim image, a host without it, `HERMES_AGENT_CLI` empty).
    NotInstalled,
    /// An agent whose commands this binary hands over.
    Installed {
        /// Its version, `None` when its package metadata is unreadable.
        version: Option<String>,
        /// Its console script.
        cli: String,
        /// Where it was installed from (`pypi:0.19.0`, `context:vendor/...`, `git+URL@REF`,
        /// `editable /path`, `pypi`), `None` when nothing says.
        source: Option<String>,
    },
}

impl AgentView {
    /// One line: `0.19.0 (/opt/hermes-agent/bin/hermes) from pypi:0.19.0` or `not installed`.
    pub fn label(&self) -> String {
        match self {
            AgentView::NotInstalled => "not installed".into(),
            AgentView::Installed {
                version,
                cli,
                source,
            } => format!(
                "{} ({cli}) from {}",
                version.as_deref().unwrap_or("(unknown version)"),
                source.as_deref().unwrap_or("(unknown source)")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_serialize_with_their_status_tag() {
        let running = SupervisorView::Running {
            services: vec![ServiceLine {
                name: "web".into(),
                state: "up".into(),
                pid: Some(7),
            }],
        };
        assert_eq!(
            serde_json::to_value(&running).unwrap(),
            serde_json::json!({ "status": "running", "services": [{ "name": "web", "state": "up", "pid": 7 }] })
        );
        assert_eq!(
            serde_json::to_value(SupervisorView::NotRunning).unwrap(),
            serde_json::json!({ "status": "not-running" })
        );
        assert_eq!(
            serde_json::to_value(AgentView::NotInstalled).unwrap(),
            serde_json::json!({ "status": "not-installed" })
        );
    }

    #[test]
    fn the_agent_label_says_what_is_unknown() {
        assert_eq!(AgentView::NotInstalled.label(), "not installed");
        let agent = AgentView::Installed {
            version: None,
            cli: "/a/bin/hermes".into(),
            source: Some("pypi:0.19.0".into()),
        };
        assert_eq!(
            agent.label(),
            "(unknown version) (/a/bin/hermes) from pypi:0.19.0"
        );
    }
}
