//! What applying a save takes: the fields that changed (the form's view before and after,
//! whichever way the file was written), whether one needs a gateway restart, which service
//! that is, and whether the restart is uninterrupted (docs/gateway.md: a native restart hands
//! over, an agent restart stops the old agent first, an engine change is a stop then a start).

use hermes_home::Home;
use serde_json::{Value, json};

use super::settings::Vars;

/// Fields that move the gateway's address or change which gateways run: no hand-over covers them.
const MOVES_THE_LISTENER: [&str; 3] = ["multiplex", "api_server", "api_port"];

/// What a save changed and what it takes to apply: compares the form's view before and after.
/// `{needed, service, uninterrupted, why, changed}`.
pub fn restart_advice(home: &Home, before: &Value, after: &Value, process: Vars) -> Value {
    let fields = |v: &Value| v["fields"].as_array().cloned().unwrap_or_default();
    let (old, new) = (fields(before), fields(after));
    let changed: Vec<&Value> = new
        .iter()
        .filter(|f| {
            old.iter()
                .find(|o| o["name"] == f["name"])
                .is_none_or(|o| o["value"] != f["value"] || o["effective"] != f["effective"])
        })
        .collect();
    let names: Vec<&str> = changed.iter().filter_map(|f| f["name"].as_str()).collect();
    let needed = changed.iter().any(|f| f["restart"] == true)
        || old
            .iter()
            .any(|o| names.contains(&o["name"].as_str().unwrap_or("")) && o["restart"] == true);
    let (engine_before, engine_after) = (
        before["engine"].as_str().unwrap_or(""),
        after["engine"].as_str().unwrap_or(""),
    );
    let moves = names.iter().any(|n| MOVES_THE_LISTENER.contains(n));
    let uninterrupted = needed && engine_before == "native" && engine_after == "native" && !moves;
    let why = if !needed {
        if names.is_empty() {
            "nothing the form shows changed".to_string()
        } else {
            "the gateway applies it at its next request: no restart".to_string()
        }
    } else if engine_before != engine_after {
        format!(
            "the engine changes ({engine_before} → {engine_after}): the old gateway stops, then the new one starts"
        )
    } else if moves {
        "the API server's address or which gateways run changes: the restart moves the listener, connections to the old address end".to_string()
    } else if uninterrupted {
        "the native gateway hands over: the port stays open and requests in flight finish"
            .to_string()
    } else {
        "the agent engine restarts one agent at a time: the old one stops first; connections made meanwhile wait".to_string()
    };
    let service = hermes_services::multiplex::serving_service(home, process);
    json!({ "needed": needed, "service": service, "uninterrupted": uninterrupted, "why": why, "changed": names })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(engine: &str, fields: &[(&str, &str, bool)]) -> Value {
        let fields: Vec<Value> = fields
            .iter()
            .map(|(name, value, restart)| {
                json!({ "name": name, "value": value, "effective": value, "restart": restart })
            })
            .collect();
        json!({ "engine": engine, "fields": fields })
    }

    fn advice(before: &Value, after: &Value) -> Value {
        let home = tempfile::tempdir().unwrap();
        let home = Home::select(home.path().to_path_buf(), None).unwrap();
        restart_advice(&home, before, after, &|_| None)
    }

    #[test]
    fn an_engine_change_is_a_restart_that_interrupts() {
        let before = view("native", &[("engine", "native", true)]);
        let after = view("agent", &[("engine", "agent", true)]);
        let a = advice(&before, &after);
        assert_eq!(a["needed"], true);
        assert_eq!(a["uninterrupted"], false);
        assert_eq!(a["changed"], json!(["engine"]));
        assert!(a["why"].as_str().unwrap().contains("native → agent"), "{a}");
    }

    #[test]
    fn the_agent_restarts_one_at_a_time_and_the_native_gateway_hands_over() {
        let before = view("agent", &[("memory_max", "", true)]);
        let after = view("agent", &[("memory_max", "1GiB", true)]);
        let a = advice(&before, &after);
        assert_eq!(
            (a["needed"].clone(), a["uninterrupted"].clone()),
            (json!(true), json!(false))
        );
        let before = view("native", &[("memory_max", "", true)]);
        let after = view("native", &[("memory_max", "1GiB", true)]);
        let a = advice(&before, &after);
        assert_eq!(
            (a["needed"].clone(), a["uninterrupted"].clone()),
            (json!(true), json!(true))
        );
        assert_eq!(a["service"], "gateway-default");
    }

    #[test]
    fn a_file_that_did_not_parse_before_counts_every_field_as_changed() {
        let after = view("native", &[("model", "m", false), ("api_port", "1", true)]);
        let a = advice(&Value::Null, &after);
        assert_eq!(a["changed"], json!(["model", "api_port"]));
        assert_eq!(a["needed"], true);
        assert_eq!(a["uninterrupted"], false, "the port moves the listener");
    }
}
