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

/// `GET /api/status`: `{"supervisor": {"reachable", "error", "hint"}, "gateway_routing":
/// {"mode", "source", "engine", "serves"}, "services": [...]}`; a service row is the supervisor's
/// (`name`, `state`, `pid`, `uptime_secs`, `restarts`, `last_exit`, `reason`, `profile`), its
/// `last_error` when failing, plus `engine`, `port` and `served_by` (the multiplexing gateway
/// that serves it in its place, else null) for a profile gateway, and `resources`,
/// `memory_max` and `memory_text` ([`resource_fields`]); `volume` is [`volume`]'s;
/// `components` and `overall` are the original's rollup (`crate::rollup`).
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
        "gateway_routing": multiplex.to_json(&names),
        "services": services,
        "components": components,
        "overall": overall,
        "volume": volume(root),
    })
}

/// The volume's usage, for the Overview and `/metrics`: `{path, total_bytes, available_bytes,
/// used_bytes, used_percent, degraded, text}` (`text` as `hermes health` words it), or
/// `{path, error}` when it cannot be read.
pub fn volume(root: &Path) -> Value {
    match hermes_home::disk::usage(root) {
        Ok(u) => json!({
            "path": root,
            "total_bytes": u.total_bytes,
            "available_bytes": u.available_bytes,
            "used_bytes": u.used_bytes,
            "used_percent": (u.used_fraction() * 1000.0).round() / 10.0,
            "degraded": u.is_degraded(),
            "text": u.describe(),
        }),
        Err(e) => json!({ "path": root, "error": e.to_string() }),
    }
}

/// What a row adds about resources beyond the supervisor's own fields (`resources`,
/// `memory_max`, serialized as they are): `memory_text`, the memory as people read it with its
/// limit (`212 MiB / 1 GiB`), formatted here so the page follows the one byte-size rule
/// (`hermes_errors::bytes::human`) instead of a copy of it in JavaScript.
/// The memory counts while the service has a process (as `hermes service status` shows it);
/// its history stays for the sparkline.
pub fn resource_fields(status: &ServiceStatus) -> Value {
    let used = status
        .pid
        .and(status.resources.as_ref())
        .map(|r| r.memory_bytes);
    let limit = status.memory_max.map(|m| m.bytes);
    let human = hermes_errors::bytes::human;
    let text = match (used, limit) {
        (Some(u), Some(l)) => Some(format!("{} / {}", human(u), human(l))),
        (Some(u), None) => Some(human(u)),
        (None, Some(l)) => Some(format!("- / {}", human(l))),
        (None, None) => None,
    };
    json!({ "memory_text": text })
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
/// every poll; a new event for them would be noise), and the measurements only once per step
/// of their history ([`steady_measurements`]).
pub fn fingerprint(snapshot: &Value) -> String {
    let mut copy = snapshot.clone();
    for row in copy["services"].as_array_mut().into_iter().flatten() {
        if let Some(map) = row.as_object_mut() {
            map.remove("uptime_secs");
            map.remove("since_secs");
        }
    }
    steady_measurements(&mut copy);
    copy.to_string()
}

/// Replaces what is measured afresh on every poll by what moves once per history step: the
/// supervisor samples every second, so memory, CPU and the volume's free bytes differ on
/// almost every poll, and an event per poll (twice a second, per open page) would be noise.
/// A service's resources count by their latest history point (one per
/// `HISTORY_STEP_SECS`, 10 s): the page then gets the figures and a new sparkline point
/// together, every 10 s, and at once when anything else changes. The volume counts by its
/// whole percent and whether it is degraded.
fn steady_measurements(copy: &mut Value) {
    for row in copy["services"].as_array_mut().into_iter().flatten() {
        if let Some(map) = row.as_object_mut() {
            let step = map
                .get("resources")
                .and_then(|r| r["history"].as_array())
                .and_then(|h| h.last())
                .map(|last| last["at"].clone());
            // Whether there are measurements at all still counts (a service starting or
            // stopping), only not their values between two history points.
            let measured = map.get("resources").is_some_and(|r| !r.is_null());
            map.insert(
                "resources".into(),
                json!({ "measured": measured, "step": step }),
            );
            map.remove("memory_text");
        }
    }
    if let Some(volume) = copy.get_mut("volume").and_then(Value::as_object_mut) {
        let percent = volume.get("used_percent").and_then(Value::as_f64);
        for k in ["total_bytes", "available_bytes", "used_bytes", "text"] {
            volume.remove(k);
        }
        volume.insert("used_percent".into(), json!(percent.map(f64::floor)));
    }
}

/// A supervisor row as the Overview shows it: with its last error when failing and, for a
/// profile gateway, its engine, port and `served_by` (the engines view).
fn row(root: &Path, status: &ServiceStatus, gateway: Option<&GatewayEngine>) -> Value {
    let mut value = serde_json::to_value(status).unwrap_or(Value::Null);
    value["last_error"] = json!(last_error::of_failing(root, status).map(|e| e.message));
    if let (Value::Object(extra), Some(map)) = (resource_fields(status), value.as_object_mut()) {
        map.extend(extra);
    }
    if let (Some(gateway), Some(map)) = (gateway, value.as_object_mut()) {
        map.insert("engine".into(), json!(gateway.engine));
        let port = bound_port(status).or_else(|| gateway_port(&gateway.home));
        map.insert("port".into(), json!(port));
        map.insert("served_by".into(), json!(gateway.served_by));
    }
    value
}

/// The port of the API socket the supervisor holds for the service (what it bound), if any.
fn bound_port(status: &ServiceStatus) -> Option<u16> {
    let address = status.listening.first()?;
    address.rsplit_once(':')?.1.parse().ok()
}

/// The port the profile's API server listens on, resolved as the gateway resolves it
/// (`None` when the API server is off or the settings are invalid).
fn gateway_port(home: &Home) -> Option<u16> {
    let settings = hermes_gateway_settings::read_from_process(home).ok()?;
    settings.api_addr().map(|_| settings.port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_is_the_one_the_supervisor_bound() {
        let mut status = ServiceStatus::new("gateway-default", hermes_supervisor::StateName::Up);
        assert_eq!(bound_port(&status), None);
        status.listening = vec!["127.0.0.1:9574".into()];
        assert_eq!(bound_port(&status), Some(9574));
        status.listening = vec!["[::1]:8650".into()];
        assert_eq!(bound_port(&status), Some(8650));
    }

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

    #[test]
    fn measurements_change_the_fingerprint_once_per_history_step() {
        let at = |memory: u64, last: u64, free: u64| {
            json!({
                "services": [{"name": "x", "state": "up", "memory_text": format!("{memory} B"),
                    "resources": {"memory_bytes": memory, "cpu_seconds": 1.0, "cpu_percent": 2.0,
                        "processes": 1, "history": [{"at": last, "memory_bytes": 1, "cpu_percent": 0.0}]}}],
                "volume": {"path": "/v", "total_bytes": 100, "available_bytes": free,
                    "used_bytes": 100 - free, "used_percent": (100 - free) as f64, "degraded": false,
                    "text": format!("{free}")},
            })
        };
        // A new sample within the same step, a few bytes written to the volume: no event.
        assert_eq!(fingerprint(&at(10, 100, 50)), fingerprint(&at(99, 100, 50)));
        let mut nearly = at(10, 100, 50);
        nearly["volume"]["used_percent"] = json!(50.4);
        assert_eq!(fingerprint(&at(10, 100, 50)), fingerprint(&nearly));
        // A new history point, or a whole percent more of the volume: an event.
        assert_ne!(fingerprint(&at(10, 100, 50)), fingerprint(&at(10, 110, 50)));
        assert_ne!(fingerprint(&at(10, 100, 50)), fingerprint(&at(10, 100, 40)));
        // Measurements appearing (a service starting) is a change too.
        let mut none = at(10, 100, 50);
        none["services"][0]["resources"] = Value::Null;
        assert_ne!(fingerprint(&none), fingerprint(&at(10, 100, 50)));
    }

    #[test]
    fn memory_reads_with_its_limit_in_the_one_byte_rule() {
        let mut row = hermes_supervisor::ServiceStatus::new("x", hermes_supervisor::StateName::Up);
        row.pid = Some(1);
        assert_eq!(resource_fields(&row)["memory_text"], Value::Null);
        row.resources = Some(hermes_supervisor::status::Resources {
            memory_bytes: 212 << 20,
            cpu_seconds: 1.5,
            cpu_percent: None,
            processes: 1,
            history: Vec::new(),
        });
        assert_eq!(resource_fields(&row)["memory_text"], "212 MiB");
        row.memory_max = Some(hermes_supervisor::status::MemoryLimit {
            bytes: 1 << 30,
            enforced_by: hermes_supervisor::status::Enforcement::Cgroup,
        });
        assert_eq!(resource_fields(&row)["memory_text"], "212 MiB / 1 GiB");
        // Stopped: the limit, no figure (the history is still there for the sparkline).
        row.pid = None;
        assert_eq!(resource_fields(&row)["memory_text"], "- / 1 GiB");
        // Serialized with the row, for the page's sparkline and the limit.
        let v = serde_json::to_value(&row).unwrap();
        assert_eq!(v["memory_max"]["enforced_by"], "cgroup");
        assert_eq!(v["resources"]["memory_bytes"], 212u64 << 20);
    }

    #[test]
    fn the_volume_says_its_space_or_why_not() {
        let dir = tempfile::tempdir().unwrap();
        let v = volume(dir.path());
        assert!(v["total_bytes"].as_u64().unwrap() > 0, "{v}");
        assert!(v["used_percent"].as_f64().unwrap() <= 100.0, "{v}");
        assert!(v["text"].as_str().unwrap().contains("free of"), "{v}");
        let v = volume(&dir.path().join("missing"));
        assert!(v["error"].is_string(), "{v}");
    }
}
