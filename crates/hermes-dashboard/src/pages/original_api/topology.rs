//! The original's gateway topology in `GET /api/status` (0.20+,
//! `_collect_profile_gateway_topology`): `profiles` (every profile, default first),
//! `gateways` (one `{profile, ports, served_profiles?}` per profile whose gateway has a
//! process) and `gateway_mode` — `multiplex` when the default profile's gateway serves more
//! than one profile, `multiple` for several gateways, `single` for one, `none` for none, and
//! `unknown` when the profiles cannot be listed.
//!
//! Built from the Overview's snapshot (the supervisor's rows, asked once) and each running
//! gateway's `gateway_state.json`: `served_profiles` as the agent's multiplexing gateway records
//! it, else the profiles ours serves when it multiplexes (the snapshot's `gateway_routing`);
//! `ports` the host ports of the port-binding platforms the gateway reports live, each read from
//! the profile's `config.yaml` as the original reads it (top-level `platforms.<name>` over
//! `gateway.platforms.<name>`, the key or its `extra`, else the adapter's default). Display
//! data only, as in the original.

use std::path::Path;

use hermes_home::config::Config;
use hermes_home::gateway_state;
use serde_json::{Map, Value, json};

/// The port-binding platforms: name, the config key of its port, the adapter's default port
/// (the original's `_PORT_BINDING_PLATFORM_PORTS`).
const PORT_BINDING: [(&str, &str, u64); 3] = [
    ("webhook", "port", 8644),
    ("api_server", "port", 8642),
    ("msgraph_webhook", "port", 8646),
];

/// Whether platform `id` binds a listener port of its own (one a multiplexed gateway's
/// secondary profile must not enable).
pub fn binds_a_port(id: &str) -> bool {
    PORT_BINDING.iter().any(|(name, _, _)| *name == id)
}

/// Platform states in which the adapter serves no port (the original's
/// `_PLATFORM_DEAD_STATES`).
const DEAD_STATES: [&str; 3] = ["fatal", "disconnected", "stopped"];

/// `{profiles, gateway_mode, gateways}` for the volume at `root`, given the Overview's
/// `snapshot`.
pub fn fields(root: &Path, snapshot: &Value) -> Map<String, Value> {
    let Ok(entries) = hermes_home::profile::list(root) else {
        return object(json!({ "profiles": [], "gateway_mode": "unknown", "gateways": [] }));
    };
    let routing_serves: Vec<String> = snapshot["gateway_routing"]["serves"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut gateways = Vec::new();
    let mut multiplex = false;
    for entry in &entries {
        let name = entry.profile.name();
        let service = hermes_services::gateway::service_name(name);
        let running = snapshot["services"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["name"] == service.as_str() && !r["pid"].is_null());
        if !running {
            continue;
        }
        let record = gateway_state::read(&gateway_state::path(&entry.dir))
            .ok()
            .and_then(|read| read.state().map(|s| s.fields().clone()))
            .unwrap_or_default();
        let mut served: Vec<String> = record
            .get("served_profiles")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if served.is_empty() && name == hermes_home::DEFAULT_PROFILE {
            served.clone_from(&routing_serves);
        }
        if name == hermes_home::DEFAULT_PROFILE && served.len() > 1 {
            multiplex = true;
        }
        let mut gateway = json!({
            "profile": name,
            "ports": ports(&entry.dir, record.get("platforms")),
        });
        if !served.is_empty() {
            gateway["served_profiles"] = json!(served);
        }
        gateways.push(gateway);
    }
    let mode = if multiplex {
        "multiplex"
    } else {
        match gateways.len() {
            0 => "none",
            1 => "single",
            _ => "multiple",
        }
    };
    let profiles: Vec<&str> = entries.iter().map(|e| e.profile.name()).collect();
    object(json!({ "profiles": profiles, "gateway_mode": mode, "gateways": gateways }))
}

/// `platform -> port` for the port-binding platforms in `platforms` (the gateway's record)
/// that are not in a dead state, each from the `config.yaml` of the profile in `dir` (module
/// doc).
fn ports(dir: &Path, platforms: Option<&Value>) -> Value {
    let Some(platforms) = platforms.and_then(Value::as_object) else {
        return json!({});
    };
    let config = hermes_settings::config_of(dir).ok();
    let mut ports = Map::new();
    for (name, key, default) in PORT_BINDING {
        let live = platforms.get(name).is_some_and(|state| {
            state.is_object()
                && !state["state"]
                    .as_str()
                    .is_some_and(|s| DEAD_STATES.contains(&s))
        });
        if !live {
            continue;
        }
        let port = config
            .as_ref()
            .and_then(|c| configured_port(c, name, key))
            .unwrap_or(default);
        ports.insert(name.to_string(), json!(port));
    }
    Value::Object(ports)
}

/// The port `config` sets for platform `name`, as the original reads it from the block it
/// merges (`gateway.platforms.<name>` updated by `platforms.<name>`): the merged `key`, else
/// the merged `extra.<key>` (each block's `extra` replacing the one before); a value that is no
/// port number is the default, as the original's `int()` failing is.
fn configured_port(config: &Config, name: &str, key: &str) -> Option<u64> {
    let blocks = [
        format!("gateway.platforms.{name}"),
        format!("platforms.{name}"),
    ];
    let direct = blocks
        .iter()
        .filter_map(|block| config.raw(&format!("{block}.{key}")))
        .next_back();
    let extra = blocks
        .iter()
        .rfind(|block| {
            config
                .raw(&format!("{block}.extra"))
                .is_some_and(|e| e.is_mapping())
        })
        .and_then(|block| config.raw(&format!("{block}.extra.{key}")));
    let raw = direct.or(extra)?;
    raw.as_u64()
        .or_else(|| raw.as_str().and_then(|s| s.trim().parse().ok()))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
