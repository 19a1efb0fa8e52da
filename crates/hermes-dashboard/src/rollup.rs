//! `/api/status`'s component rollup, the original's since 0.20 (#68662): `components`
//! `{gateway, dashboard, storage, platforms}`, each with a `status` of `ok` or `degraded`, and
//! `overall` — `ok` when every component is (`hermes_home::readiness::rollup`, the rule of
//! the gateway's readiness document too). Status words and counts only, as the original's:
//! no message, path or error text.
//!
//! Each component, as ours fills it (the original's is one profile's, and so is ours: the
//! default profile's, whose gateway is `gateway-default` — the one serving every profile when
//! multiplexing):
//! * `gateway` — `{status, state}`: `state` is `gateway_state.json`'s word while the supervisor
//!   says the service has a process, else `stopped` (or the `startup_failed` it recorded); ok
//!   while `running` or `draining` ([`gateway`]).
//! * `dashboard` — this process's own health ([`crate::health`]).
//! * `storage` — `{status}`: the read-only `state.db` probe of the gateway's readiness, a
//!   missing file being ok (nothing has written one yet), remembered for a moment
//!   ([`crate::storage_probe`]); degraded too while a database of the
//!   profile failed its check and is still served (`hermes_home::db_check`).
//! * `platforms` — `{status, configured, connected}` from the running gateway's recorded
//!   `platforms` (none while it is not running); a platform switched off (`disabled`) is not
//!   configured ([`platforms`]).
//!
//! The volume's usage is not part of it: as in the original, a full disk is advisory here, not
//! an availability verdict (`hermes health` and `/health/detailed` report it).

use std::path::Path;

use hermes_home::gateway_state::{self, GatewayState};
use hermes_home::readiness::{self, Status, check, platform_connected};
use hermes_supervisor::{ServiceStatus, StateName};
use serde_json::{Map, Value, json};

/// `components` and `overall` for `root`, given the supervisor's rows (or why it did not
/// answer: the gateway then reads as stopped).
pub fn components<E>(root: &Path, rows: &Result<Vec<ServiceStatus>, E>) -> (Value, &'static str) {
    let service = hermes_services::service_name(hermes_home::DEFAULT_PROFILE);
    let state = rows
        .as_ref()
        .ok()
        .and_then(|rows| rows.iter().find(|r| r.name == service))
        .map(|r| r.state);
    let record = gateway_state::read(&gateway_state::path(root))
        .ok()
        .and_then(|read| read.state().cloned());
    let gateway = gateway(state, record.as_ref().and_then(GatewayState::gateway_state));
    let running = gateway["state"] != "stopped" && gateway["state"] != "startup_failed";
    let recorded_platforms = record
        .as_ref()
        .and_then(|r| r.fields().get("platforms"))
        .and_then(Value::as_object)
        .filter(|_| running);
    let mut storage = crate::storage_probe::storage(&hermes_home::layout::state_db_path(root));
    // A database the last check found damaged and still serves degrades it too.
    let damaged = hermes_home::db_check::read(root).is_some_and(|r| {
        r.damaged
            .iter()
            .any(hermes_home::db_check::Damaged::still_served)
    });
    if damaged {
        storage["status"] = json!("degraded");
    }
    let mut all = Map::new();
    all.insert("gateway".into(), gateway);
    all.insert("dashboard".into(), crate::health::snapshot());
    all.insert("storage".into(), json!({ "status": storage["status"] }));
    all.insert(
        "platforms".into(),
        platforms(recorded_platforms.unwrap_or(&Map::new())),
    );
    let overall = readiness::rollup(all.values());
    (Value::Object(all), overall)
}

/// The `gateway` component from the supervisor's state of the service (`None`: no row, or no
/// supervisor) and the state the gateway recorded.
pub fn gateway(service: Option<StateName>, recorded: Option<&str>) -> Value {
    let state = match service {
        // Up: what the gateway says of itself while it serves, else plainly running.
        Some(StateName::Up) => match recorded {
            Some(s) if readiness::gateway_serves(s) => s,
            _ => "running",
        },
        Some(StateName::Starting) => "starting",
        // Sent the stop signal: it finishes its requests in flight.
        Some(StateName::Stopping) => "draining",
        // No process: stopped, unless it said it never got to serve.
        _ if recorded == Some("startup_failed") => "startup_failed",
        _ => "stopped",
    };
    let status = if readiness::gateway_serves(state) {
        Status::Ok
    } else {
        Status::Degraded
    };
    check(status, None, json!({ "state": state }))
}

/// The `platforms` component from a gateway's recorded `platforms`.
pub fn platforms(recorded: &Map<String, Value>) -> Value {
    let configured: Vec<&Value> = recorded
        .values()
        .filter(|p| p.is_object() && p.get("state").and_then(Value::as_str) != Some("disabled"))
        .collect();
    let connected = configured.iter().filter(|p| platform_connected(p)).count();
    let status = if connected == configured.len() {
        Status::Ok
    } else {
        Status::Degraded
    };
    check(
        status,
        None,
        json!({ "configured": configured.len(), "connected": connected }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateway_is_ok_while_its_process_serves() {
        use StateName::*;
        for (service, recorded, state, ok) in [
            (Some(Up), Some("running"), "running", true),
            (Some(Up), Some("draining"), "draining", true),
            // A record left by the previous process says nothing about this one.
            (Some(Up), Some("stopped"), "running", true),
            (Some(Up), None, "running", true),
            (Some(Stopping), Some("running"), "draining", true),
            (Some(Starting), Some("stopped"), "starting", false),
            (
                Some(Backoff),
                Some("startup_failed"),
                "startup_failed",
                false,
            ),
            (Some(Failed), Some("running"), "stopped", false),
            (Some(Down), Some("stopped"), "stopped", false),
            (Some(Disabled), None, "stopped", false),
            (None, Some("running"), "stopped", false),
        ] {
            let c = gateway(service, recorded);
            assert_eq!(c["state"], state, "{service:?} {recorded:?}");
            assert_eq!(c["status"] == "ok", ok, "{service:?} {recorded:?}: {c}");
        }
    }

    #[test]
    fn platforms_switched_off_are_not_configured() {
        let none = platforms(&Map::new());
        assert_eq!(
            none,
            json!({"status": "ok", "configured": 0, "connected": 0})
        );
        let recorded = json!({
            "api_server": {"state": "connected"},
            "telegram": {"state": "fatal", "error_message": "bad token"},
            "webhook": {"state": "disabled"},
        });
        let c = platforms(recorded.as_object().unwrap());
        assert_eq!(
            c,
            json!({"status": "degraded", "configured": 2, "connected": 1})
        );
        let recorded =
            json!({"api_server": {"state": "connected"}, "slack": {"status": "running"}});
        assert_eq!(platforms(recorded.as_object().unwrap())["status"], "ok");
    }

    #[test]
    fn without_a_supervisor_the_gateway_reads_stopped_and_its_platforms_none() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            gateway_state::path(root.path()),
            r#"{"gateway_state": "running", "platforms": {"api_server": {"state": "fatal"}}}"#,
        )
        .unwrap();
        let rows: Result<Vec<ServiceStatus>, ()> = Err(());
        let (c, overall) = components(root.path(), &rows);
        assert_eq!(
            c["gateway"],
            json!({"status": "degraded", "state": "stopped"})
        );
        assert_eq!(c["platforms"]["configured"], 0, "{c}");
        assert_eq!(c["storage"], json!({"status": "ok"}), "no state.db yet");
        assert_eq!(overall, "degraded");
        let names: Vec<&String> = c.as_object().unwrap().keys().collect();
        assert_eq!(names, ["gateway", "dashboard", "storage", "platforms"]);
    }
}
