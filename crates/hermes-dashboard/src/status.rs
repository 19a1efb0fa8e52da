//! The Overview's data: the supervisor's rows, asked afresh over the control socket every
//! time, with each profile gateway's engine and port read from its profile. No cache: when
//! the supervisor cannot be reached the snapshot says so instead of showing old rows.

use std::path::Path;
use std::time::Duration;

use hermes_services::status_view::{ServiceView, StatusView};
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
    let view = StatusView::of_rows(root, rows.as_ref().cloned().unwrap_or_default(), var);
    let multiplex = &view.multiplex;
    let services: Vec<Value> = view.services.iter().map(ServiceView::to_json).collect();
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
