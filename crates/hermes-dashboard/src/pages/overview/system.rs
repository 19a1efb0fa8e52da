//! The Overview's System view, `GET /api/system`: what the original's System page shows that
//! the service rows do not — this build, the installed agent and its config schema against the
//! volume's, the backups, and what the services use together — each as one line the page
//! shows as it is (worded here, so the page stays a few lines of script) beside the figures.
//!
//! Asked once when the Overview opens (and again when it is reloaded), not on every status
//! event: the agent's schema costs one interpreter start the first time
//! ([`hermes_services::agent_probe::probe_cached`], kept for the process after), and nothing
//! here moves by the second. The volume's space is the status stream's, live.

use std::path::Path;

use hermes_errors::bytes::human;
use hermes_home::schema::VolumeSchema;
use hermes_services::agent::Agent;
use hermes_services::agent_probe::{self, AgentFacts};
use hermes_services::upgrade;
use hermes_supervisor::{ServiceStatus, StateName};
use serde_json::{Value, json};

use crate::backup_store;

/// One line of the view: `name` (stable, for scripts and tests), `label`, `text`, and
/// `warning` when it needs the operator.
fn item(name: &str, label: &str, text: String, warning: bool) -> Value {
    json!({ "name": name, "label": label, "text": text, "warning": warning })
}

/// Everything the view shows (`items`), and the figures behind each line.
pub fn snapshot(
    root: &Path,
    var: &dyn Fn(&str) -> Option<String>,
    backups_dir: Result<&Path, &str>,
    rows: Option<&[ServiceStatus]>,
) -> Value {
    let (build, _) = hermes_diag::report::identity_and_install();
    let agent = hermes_services::agent::locate(var);
    let facts = agent
        .as_ref()
        .map(|a| agent_probe::probe_cached(a, None).map_err(|e| e.to_string()));
    let volume = VolumeSchema::read(root);
    let schema = schema_item(&volume, agent.as_ref(), facts.as_ref(), var);
    let (backups, backups_item) = backups(backups_dir);
    let (services, services_item) = services(rows);
    json!({
        "hermes": { "version": build.version, "sha": build.sha, "label": build.label() },
        "agent": agent.as_ref().map(|a| json!({
            "version": a.version,
            "source": a.source,
            "cli": a.cli,
            "config_version": facts.as_ref().and_then(|f| f.as_ref().ok()).map(|f| f.config_version),
            "error": facts.as_ref().and_then(|f| f.as_ref().err()),
        })),
        "config_schema": {
            "volume": volume.newest().map(|(v, _)| v),
            "file": volume.newest().map(|(_, f)| f.to_path_buf()),
            "profiles": volume.profiles.iter().map(|p| json!({
                "profile": p.profile,
                "version": p.version.as_ref().ok().copied().flatten(),
                "error": p.version.as_ref().err(),
            })).collect::<Vec<_>>(),
        },
        "backups": backups,
        "services": services,
        "items": [
            item("hermes", "Hermes", build.label(), false),
            agent_item(agent.as_ref(), facts.as_ref()),
            schema,
            backups_item,
            services_item,
        ],
    })
}

/// The agent's line: its version and where it came from, and its own config schema.
fn agent_item(agent: Option<&Agent>, facts: Option<&Result<AgentFacts, String>>) -> Value {
    let Some(agent) = agent else {
        return item(
            "agent",
            "Agent",
            "hermes-agent is not installed: every gateway is the native one".into(),
            false,
        );
    };
    let version = agent.version.as_deref().unwrap_or("(unknown version)");
    let source = agent
        .source
        .as_deref()
        .map(|s| format!(" from {s}"))
        .unwrap_or_default();
    match facts {
        Some(Ok(f)) => item(
            "agent",
            "Agent",
            format!(
                "hermes-agent {version}{source}, config schema {}",
                f.config_version
            ),
            false,
        ),
        Some(Err(e)) => item(
            "agent",
            "Agent",
            format!("hermes-agent {version}{source}; it cannot say its config schema: {e}"),
            true,
        ),
        None => item(
            "agent",
            "Agent",
            format!("hermes-agent {version}{source}"),
            false,
        ),
    }
}

/// The volume's schema against the agent's: the same verdict the agent's gateway start gets
/// ([`upgrade::check`]), so the page never says "fine" to a volume whose gateways are refused.
fn schema_item(
    volume: &VolumeSchema,
    agent: Option<&Agent>,
    facts: Option<&Result<AgentFacts, String>>,
    var: &dyn Fn(&str) -> Option<String>,
) -> Value {
    let unreadable: Vec<String> = volume
        .profiles
        .iter()
        .filter_map(|p| {
            p.version
                .as_ref()
                .err()
                .map(|e| format!("{}: {e}", p.profile))
        })
        .collect();
    let Some((newest, file)) = volume.newest() else {
        let text = if unreadable.is_empty() {
            "no config.yaml on the volume yet".to_string()
        } else {
            format!("no config.yaml could be read ({})", unreadable.join("; "))
        };
        return item(
            "config_schema",
            "Config schema",
            text,
            !unreadable.is_empty(),
        );
    };
    let older: Vec<&str> = match facts {
        Some(Ok(f)) => volume
            .profiles
            .iter()
            .filter(|p| matches!(p.version, Ok(Some(v)) if v < f.config_version))
            .map(|p| p.profile.as_str())
            .collect(),
        _ => Vec::new(),
    };
    let mut text = format!("{newest} on the volume ({})", file.display());
    let mut warning = !unreadable.is_empty();
    if let (Some(agent), Some(Ok(f))) = (agent, facts) {
        match upgrade::check(volume, agent, *f, var) {
            Err(problem) => {
                warning = true;
                text = format!(
                    "{newest} on the volume, newer than the agent's {}: its gateways do not start ({})",
                    f.config_version,
                    problem.hint().unwrap_or_default()
                );
            }
            Ok(Some(allowed)) => {
                warning = true;
                text = allowed;
            }
            Ok(None) if older.is_empty() => text.push_str(", the agent's own"),
            Ok(None) => text.push_str(&format!(
                "; older than the agent's {} in {}: migrated by the agent at the next boot",
                f.config_version,
                older.join(", ")
            )),
        }
    }
    if !unreadable.is_empty() {
        text.push_str(&format!("; unreadable: {}", unreadable.join("; ")));
    }
    item("config_schema", "Config schema", text, warning)
}

/// The backups directory's archives and the schedule's last result: `({dir, count, newest,
/// schedule}, line)`.
fn backups(dir: Result<&Path, &str>) -> (Value, Value) {
    let dir = match dir {
        Ok(dir) => dir,
        Err(e) => {
            return (
                json!({ "error": e }),
                item(
                    "backups",
                    "Backups",
                    format!("the backup settings cannot be read: {e}"),
                    true,
                ),
            );
        }
    };
    let archives = match backup_store::list(dir) {
        Ok(a) => a,
        Err(e) => {
            let e = format!("cannot list {}: {e}", dir.display());
            return (
                json!({ "dir": dir, "error": e }),
                item("backups", "Backups", e, true),
            );
        }
    };
    let schedule = backup_store::schedule(dir);
    let newest = archives.first();
    let mut text = match newest {
        None => format!("none yet in {}", dir.display()),
        Some(a) => format!(
            "{} in {}, the newest {} ({}, {})",
            archives.len(),
            dir.display(),
            a.name,
            human(a.size),
            a.modified.as_deref().unwrap_or("time unknown"),
        ),
    };
    let mut warning = false;
    match &schedule {
        None => text.push_str("; none scheduled (backup.schedule)"),
        Some(s) if s.get("unreadable").is_some() => {
            warning = true;
            text.push_str(&format!(
                "; the schedule's state cannot be read: {}",
                s["unreadable"].as_str().unwrap_or_default()
            ));
        }
        Some(s) => {
            text.push_str(&format!(
                "; scheduled {}",
                s["schedule"].as_str().unwrap_or("?")
            ));
            if let Some(next) = s["next_run"].as_str() {
                text.push_str(&format!(", next {next}"));
            }
            if s["ok"] == json!(false) {
                warning = true;
                text.push_str(&format!(
                    "; the last scheduled run failed: {}",
                    s["error"].as_str().unwrap_or("(no reason recorded)")
                ));
            }
        }
    }
    (
        json!({
            "dir": dir,
            "count": archives.len(),
            "newest": newest,
            "schedule": schedule,
        }),
        item("backups", "Backups", text, warning),
    )
}

/// What the services use together, from the supervisor's rows (`None`: it did not answer).
fn services(rows: Option<&[ServiceStatus]>) -> (Value, Value) {
    let Some(rows) = rows else {
        return (
            Value::Null,
            item(
                "services",
                "Services",
                "the supervisor did not answer".into(),
                true,
            ),
        );
    };
    let running: Vec<&ServiceStatus> = rows.iter().filter(|r| r.pid.is_some()).collect();
    let memory: u64 = running
        .iter()
        .filter_map(|r| r.resources.as_ref())
        .map(|r| r.memory_bytes)
        .sum();
    let cpu: f64 = running
        .iter()
        .filter_map(|r| r.resources.as_ref()?.cpu_percent)
        .sum();
    let failing = rows
        .iter()
        .filter(|r| matches!(r.state, StateName::Backoff | StateName::Failed))
        .count();
    let mut text = format!(
        "{} of {} running, {} memory, {:.1} % CPU",
        running.len(),
        rows.len(),
        human(memory),
        cpu
    );
    if failing > 0 {
        text.push_str(&format!("; {failing} failing"));
    }
    (
        json!({
            "total": rows.len(),
            "running": running.len(),
            "failing": failing,
            "memory_bytes": memory,
            "cpu_percent": (cpu * 10.0).round() / 10.0,
        }),
        item("services", "Services", text, failing > 0),
    )
}
