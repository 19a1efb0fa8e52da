//! A platform's state in one profile, the original Channels page's ladder
//! (`_messaging_platform_payload`): `disabled` (not `platforms.<id>.enabled`), `not_configured`
//! (a required env var missing from the profile's `.env`), then the running gateway's own word
//! for it (`gateway_state.json` `platforms.<id>.state`: `connected`, `fatal`, …), else
//! `pending_restart` (the gateway runs but has not taken the platform up: a restart applies
//! it), `startup_failed` (the gateway's last start failed) or `gateway_stopped`.

use serde_json::{Value, json};

/// What the ladder is computed from.
pub struct Inputs<'a> {
    /// `platforms.<id>.enabled` is truthy in `config.yaml`.
    pub enabled: bool,
    /// Every required env var has a value in the profile's `.env`.
    pub configured: bool,
    /// A gateway process serves the profile.
    pub gateway_running: bool,
    /// The profile's `gateway_state.json` (`None`: missing or unreadable).
    pub record: Option<&'a serde_json::Map<String, Value>>,
}

/// `{state, error_code, error_message, updated_at}` of platform `id`.
pub fn of(id: &str, inputs: &Inputs<'_>) -> Value {
    let runtime = inputs
        .record
        .and_then(|r| r.get("platforms"))
        .and_then(|p| p.get(id))
        .filter(|p| p.is_object());
    let text = |key: &str| runtime.and_then(|p| p[key].as_str()).map(str::to_string);
    let reported = text("state").filter(|s| !s.is_empty());
    let startup_failed = inputs
        .record
        .and_then(|r| r.get("gateway_state"))
        .and_then(Value::as_str)
        == Some("startup_failed");
    let state = if !inputs.enabled {
        "disabled".to_string()
    } else if !inputs.configured {
        "not_configured".to_string()
    } else if let Some(reported) = reported {
        reported
    } else if inputs.gateway_running {
        "pending_restart".to_string()
    } else if startup_failed {
        "startup_failed".to_string()
    } else {
        "gateway_stopped".to_string()
    };
    let mut error_code = text("error_code");
    let mut error_message = text("error_message");
    if state == "startup_failed" {
        error_code = error_code.or_else(|| Some("startup_failed".into()));
        error_message = error_message.or_else(|| {
            inputs
                .record
                .and_then(|r| r.get("exit_reason"))
                .and_then(Value::as_str)
                .map(str::to_string)
        });
    }
    json!({
        "state": state,
        "error_code": error_code,
        "error_message": error_message,
        "updated_at": runtime.and_then(|p| p.get("updated_at")).cloned().unwrap_or(Value::Null),
    })
}

/// Python's truthiness of a YAML value, which is how the agent reads `enabled`
/// (`bool(plat_cfg.get("enabled"))`): `"no"` written as a string is still on.
pub fn truthy(value: Option<&yaml_serde::Value>) -> bool {
    use yaml_serde::Value as Y;
    match value {
        None | Some(Y::Null) => false,
        Some(Y::Bool(b)) => *b,
        Some(Y::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Y::String(s)) => !s.is_empty(),
        Some(Y::Sequence(s)) => !s.is_empty(),
        Some(Y::Mapping(m)) => !m.is_empty(),
        Some(Y::Tagged(t)) => truthy(Some(&t.value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn the_ladder_goes_from_the_config_to_the_gateways_word() {
        let live = record(json!({ "gateway_state": "running", "platforms": {
            "telegram": { "state": "fatal", "error_code": "auth", "error_message": "401 Unauthorized", "updated_at": "2026-12-01T10:00:00Z" },
        }}));
        let at = |enabled, configured, running, r: Option<&serde_json::Map<String, Value>>, id| {
            of(
                id,
                &Inputs {
                    enabled,
                    configured,
                    gateway_running: running,
                    record: r,
                },
            )["state"]
                .clone()
        };
        assert_eq!(at(false, true, true, Some(&live), "telegram"), "disabled");
        assert_eq!(
            at(true, false, true, Some(&live), "telegram"),
            "not_configured"
        );
        assert_eq!(at(true, true, true, Some(&live), "telegram"), "fatal");
        assert_eq!(
            at(true, true, true, Some(&live), "discord"),
            "pending_restart"
        );
        assert_eq!(at(true, true, false, None, "discord"), "gateway_stopped");
        let failed =
            record(json!({ "gateway_state": "startup_failed", "exit_reason": "port 8642 in use" }));
        let state = of(
            "discord",
            &Inputs {
                enabled: true,
                configured: true,
                gateway_running: false,
                record: Some(&failed),
            },
        );
        assert_eq!(state["state"], "startup_failed");
        assert_eq!(state["error_message"], "port 8642 in use");
        let error = of(
            "telegram",
            &Inputs {
                enabled: true,
                configured: true,
                gateway_running: true,
                record: Some(&live),
            },
        );
        assert_eq!(error["error_message"], "401 Unauthorized");
        assert_eq!(error["updated_at"], "2026-12-01T10:00:00Z");
    }

    #[test]
    fn enabled_is_read_the_way_python_reads_it() {
        let y = |s: &str| yaml_serde::from_str::<yaml_serde::Value>(s).unwrap();
        assert!(truthy(Some(&y("true"))));
        assert!(!truthy(Some(&y("false"))));
        assert!(truthy(Some(&y("'no'"))));
        assert!(!truthy(Some(&y("0"))));
        assert!(!truthy(Some(&y("~"))));
        assert!(!truthy(None));
    }
}
