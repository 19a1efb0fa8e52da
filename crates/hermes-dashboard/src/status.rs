//! The Overview's data: the supervisor's rows, asked afresh over the control socket every
//! time, with each profile gateway's engine and port read from its profile. No cache: when
//! the supervisor cannot be reached the snapshot says so instead of showing old rows.

use std::path::Path;
use std::time::Duration;

use hermes_home::Home;
use hermes_services::engines::GatewayEngine;
use hermes_services::last_error;
use hermes_supervisor::ServiceStatus;
use serde_json::{Value, json};

/// How long one status call waits for the supervisor.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// `GET /api/status`: `{"supervisor": {"reachable", "error", "hint"}, "gateways": {"mode",
/// "source", "engine", "serves"}, "services": [...]}`; a service row is the supervisor's
/// (`name`, `state`, `pid`, `uptime_secs`, `restarts`, `last_exit`, `reason`, `profile`), its
/// `last_error` when failing, plus `engine`, `port` and `served_by` (the multiplexing gateway
/// that serves it in its place, else null) for a profile gateway; `components` and `overall`
/// are the original's rollup (`crate::rollup`).
pub fn snapshot(root: &Path, var: &dyn Fn(&str) -> Option<String>) -> Value {
    let rows = supervisor_rows(root, var);
    let multiplex = hermes_services::multiplex::resolve_asking_agent(root, var);
    let services: Vec<Value> = match &rows {
        Ok(rows) => {
            let engines = hermes_services::engines::of_rows(root, rows, &multiplex, var);
            rows.iter()
                .map(|r| {
                    let mut value = row(root, r, engines.iter().find(|g| g.service == r.name));
                    // A gateway row whose profile is gone still says who would serve it.
                    if let (Some(profile), Some(map)) =
                        (r.profile.as_deref(), value.as_object_mut())
                    {
                        map.entry("served_by")
                            .or_insert_with(|| json!(multiplex.served_by(profile)));
                    }
                    value
                })
                .collect()
        }
        Err(_) => Vec::new(),
    };
    let profiles = hermes_home::profile::list(root).unwrap_or_default();
    let names: Vec<&str> = profiles.iter().map(|e| e.profile.name()).collect();
    let (components, overall) = crate::rollup::components(root, &rows);
    json!({
        "supervisor": reachability(&rows),
        "gateways": multiplex.to_json(&names),
        "services": services,
        "components": components,
        "overall": overall,
    })
}

/// Every service's row, asked afresh from the supervisor over its control socket (blocking,
/// at most [`CLIENT_TIMEOUT`]).
pub fn supervisor_rows(
    root: &Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<ServiceStatus>, hermes_services::Error> {
    hermes_services::connect(root, var, CLIENT_TIMEOUT)
        .and_then(|mut c| c.status(None).map_err(hermes_services::Error::Supervisor))
}

/// What the pages say about the supervisor after asking it: `{reachable: true}`, or
/// `{reachable: false, error, hint}` with why it did not answer.
pub fn reachability<T>(asked: &Result<T, hermes_services::Error>) -> Value {
    match asked {
        Ok(_) => json!({ "reachable": true }),
        Err(e) => json!({
            "reachable": false,
            "error": hermes_errors::one_line(e),
            "hint": e.hint(),
        }),
    }
}

/// What changes the Overview: everything but the clocks (uptime and time in state grow on
/// every poll; a new event for them would be noise).
pub fn fingerprint(snapshot: &Value) -> String {
    let mut copy = snapshot.clone();
    for row in copy["services"].as_array_mut().into_iter().flatten() {
        if let Some(map) = row.as_object_mut() {
            map.remove("uptime_secs");
            map.remove("since_secs");
        }
    }
    copy.to_string()
}

/// A supervisor row as the Overview shows it: with its last error when failing and, for a
/// profile gateway, its engine, port and `served_by` (the engines view).
fn row(root: &Path, status: &ServiceStatus, gateway: Option<&GatewayEngine>) -> Value {
    let mut value = serde_json::to_value(status).unwrap_or(Value::Null);
    value["last_error"] = json!(last_error::of_failing(root, status).map(|e| e.message));
    if let (Some(gateway), Some(map)) = (gateway, value.as_object_mut()) {
        map.insert("engine".into(), json!(gateway.engine));
        map.insert("port".into(), json!(gateway_port(&gateway.home)));
        map.insert("served_by".into(), json!(gateway.served_by));
    }
    value
}

/// The port the profile's API server listens on, resolved as the gateway resolves it
/// (`None` when the API server is off or the settings are invalid).
fn gateway_port(home: &Home) -> Option<u16> {
    let (_, settings) = hermes_gateway::source::SettingsSource::from_process(home.clone()).load();
    let settings = settings.ok()?;
    settings.api_addr().map(|_| settings.port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_supervisor_is_said_not_guessed() {
        let home = tempfile::tempdir().unwrap();
        let run = tempfile::tempdir().unwrap();
        let run_dir = run.path().to_string_lossy().into_owned();
        let var = move |k: &str| (k == "HERMES_RUNTIME_DIR").then(|| run_dir.clone());
        let s = snapshot(home.path(), &var);
        assert_eq!(s["supervisor"]["reachable"], false);
        assert!(
            s["supervisor"]["error"]
                .as_str()
                .unwrap()
                .contains("no supervisor")
        );
        assert_eq!(s["services"].as_array().unwrap().len(), 0);
        assert_eq!(s["components"]["gateway"]["state"], "stopped");
        assert_eq!(s["overall"], "degraded");
    }

    #[test]
    fn the_fingerprint_ignores_clocks_only() {
        let a = json!({"services": [{"name": "x", "state": "running", "uptime_secs": 1.0}]});
        let b = json!({"services": [{"name": "x", "state": "running", "uptime_secs": 9.0}]});
        let c = json!({"services": [{"name": "x", "state": "stopped", "uptime_secs": 9.0}]});
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }
}
