//! The original's top-level fields of `GET /api/status`, added to the Overview's snapshot
//! (whose own fields the page reads): the profile gateway's liveness as the original words
//! it, taken from the snapshot's supervisor row and the gateway's `gateway_state.json` (the
//! same reading as the `gateway` component, `crate::rollup::gateway`), no second call to the
//! supervisor.

use hermes_home::Home;
use hermes_home::config::{CONFIG_VERSION_KEY, ORIGINAL_CONFIG_VERSION};
use hermes_home::gateway_state::{self, GatewayState};
use hermes_supervisor::StateName;
use serde_json::{Map, Value, json};

/// The original's fields for `home`'s gateway, given our `snapshot` and whether signing in
/// takes credentials.
pub fn fields(home: &Home, snapshot: &Value, auth_required: bool) -> Map<String, Value> {
    let service = hermes_services::gateway::service_name(home.profile().name());
    let row = snapshot["services"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == service.as_str()));
    let state: Option<StateName> =
        row.and_then(|r| serde_json::from_value(r["state"].clone()).ok());
    let pid = row.map_or(Value::Null, |r| r["pid"].clone());
    let record = gateway_state::read(&gateway_state::path(home.dir()))
        .ok()
        .and_then(|read| read.state().cloned());
    let recorded = record.as_ref().and_then(GatewayState::gateway_state);
    let gateway = crate::rollup::gateway(state, recorded);
    let running = !pid.is_null();
    let field = |name: &str| {
        record
            .as_ref()
            .and_then(|r| r.fields().get(name).cloned())
            .unwrap_or(Value::Null)
    };
    let platforms = if running {
        field("platforms")
    } else {
        Value::Null
    };
    let config_version = hermes_settings::config_of(home.dir())
        .ok()
        .and_then(|c| c.raw(CONFIG_VERSION_KEY).and_then(|v| v.as_u64()));
    let fields = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "config_version": config_version,
        "latest_config_version": ORIGINAL_CONFIG_VERSION,
        "gateway_running": running,
        "gateway_state": gateway["state"],
        "gateway_platforms": if platforms.is_object() { platforms } else { json!({}) },
        "gateway_exit_reason": record.as_ref().and_then(GatewayState::exit_reason),
        "gateway_updated_at": field("updated_at"),
        "gateway_pid": pid,
        "auth_required": auth_required,
        "hermes_home": home.dir(),
        "config_path": home.config_path(),
        "env_path": home.env_path(),
    });
    match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
