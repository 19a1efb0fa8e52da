//! The original's fields of `/api/profiles` (list, create, delete), added to the Profiles
//! page's answers by its handlers: what its clients read beside ours.

use std::path::Path;

use serde_json::{Map, Value, json};

/// A listed profile's original fields: `path`, `is_default`, `provider`, `has_env`,
/// `gateway_running` (the supervisor says `up`), `description_auto`.
pub fn row(dir: &Path, is_default: bool, gateway: Option<&str>) -> Map<String, Value> {
    let provider = hermes_settings::config_of(dir)
        .ok()
        .and_then(|c| c.string("model.provider", &|_| None));
    let fields = json!({
        "path": dir,
        "is_default": is_default,
        "provider": provider,
        "has_env": dir.join(".env").is_file(),
        "gateway_running": gateway == Some("up"),
        "description_auto": false,
    });
    match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The profile to clone a new one from, as the original reads its create body: the named
/// `clone_from`, else `default` when `clone_from_default` or `clone_all` asks for a copy.
pub fn clone_source(
    clone_from: Option<&str>,
    clone_from_default: bool,
    clone_all: bool,
) -> Option<String> {
    let named = clone_from.map(str::trim).filter(|c| !c.is_empty());
    match named {
        Some(name) => Some(name.to_string()),
        None if clone_from_default || clone_all => Some(hermes_home::DEFAULT_PROFILE.into()),
        None => None,
    }
}

/// A created profile's original fields (ours takes none of the original's builder
/// additions, so none of them was applied).
pub fn created(dir: &Path) -> Map<String, Value> {
    let fields = json!({
        "ok": true,
        "path": dir,
        "model_set": false,
        "mcp_written": 0,
        "skills_disabled": 0,
        "hub_installs": [],
    });
    match fields {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}
