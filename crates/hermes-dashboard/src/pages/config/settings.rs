//! The Config page's form: the settings operators change most, each read and checked by the
//! rule the gateway (or its service) reads it with, and whether a change needs a restart.
//!
//! Rules reused, never restated: the model keys through the Profiles page's
//! [`model::validate`]; the engine through `hermes_services::agent::choose_engine`; the
//! memory limit through `hermes_services::gateway::resolve_memory_max`; multiplexing through
//! `hermes_home::multiplex`; the API server's switch and port through
//! `hermes_home::api_server`. Writes are one locked, byte-keeping edit
//! (`Config::edit`).

use hermes_home::config::Config;
use hermes_home::dotenv::DotEnv;
use hermes_home::yaml_edit::Change;
use hermes_home::{DEFAULT_PROFILE, Home, api_server, multiplex};
use hermes_services::agent::{self, ENGINE_VAR};
use hermes_services::gateway::{MEMORY_MAX_HINT, MEMORY_MAX_VAR, resolve_memory_max};
use serde::Serialize;
use serde_json::{Map, Value, json};
use yaml_serde::Value as Yaml;

use crate::pages::profiles::model;

/// The form's fields, in the page's order: `(name, label)`.
pub const FIELDS: [(&str, &str); 10] = [
    ("model", "Model"),
    ("provider", "Provider"),
    ("base_url", "Base URL"),
    ("fallbacks", "Fallbacks"),
    ("memory_provider", "Memory provider"),
    ("engine", "Gateway engine"),
    ("multiplex", "Multiplexing"),
    ("api_server", "API server"),
    ("api_port", "API server port"),
    ("memory_max", "Memory limit"),
];

/// Fields only the gateway's start reads: a change needs a restart whatever the engine.
const READ_AT_START: [&str; 5] = [
    "engine",
    "multiplex",
    "api_server",
    "api_port",
    "memory_max",
];

/// Fields that move the gateway's address or which gateways run: no hand-over covers them.
const MOVES_THE_LISTENER: [&str; 3] = ["multiplex", "api_server", "api_port"];

/// A refused field.
#[derive(Debug, Serialize)]
pub struct FieldError {
    /// The form's field name.
    pub field: String,
    /// What is wrong.
    pub message: String,
    /// What to write instead.
    pub hint: String,
}

fn refused(field: &str, message: impl Into<String>, hint: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
        hint: hint.into(),
    }
}

/// The profile's variables (`.env` over the process environment), as the gateway sees them.
fn profile_vars<'a>(
    home: &Home,
    process: &'a dyn Fn(&str) -> Option<String>,
) -> impl Fn(&str) -> Option<String> + 'a {
    let env = DotEnv::load(&home.env_path()).ok();
    move |name| {
        let value = match &env {
            Some(env) => env.value_over(name, process),
            None => process(name),
        };
        value.filter(|v| !v.trim().is_empty())
    }
}

/// A YAML scalar as the form shows it (`""` when absent; a mapping or list as `(…)`).
fn scalar(value: Option<&Yaml>) -> String {
    match value {
        None | Some(Yaml::Null) => String::new(),
        Some(Yaml::String(s)) => s.clone(),
        Some(Yaml::Bool(b)) => b.to_string(),
        Some(Yaml::Number(n)) => n.to_string(),
        Some(_) => "(a list or mapping: edit it in the text below)".into(),
    }
}

/// The key that holds a switch read from two places: the first one the file has, else the
/// one written by default.
fn switch_key(config: &Config, keys: [&'static str; 2]) -> &'static str {
    keys.into_iter()
        .find(|k| config.raw(k).is_some_and(|v| !v.is_null()))
        .unwrap_or(keys[0])
}

/// Where the multiplexing switch is: a top-level `multiplex_profiles` wins over
/// `gateway.multiplex_profiles` (the original's order), which is what a new switch is written as.
fn multiplex_key(root_config: &Config) -> &'static str {
    if root_config
        .raw("multiplex_profiles")
        .is_some_and(|v| !v.is_null())
    {
        "multiplex_profiles"
    } else {
        multiplex::MULTIPLEX_KEY
    }
}

const API_SWITCH_KEYS: [&str; 2] = [
    "platforms.api_server.enabled",
    "gateway.platforms.api_server.enabled",
];
const API_PORT_KEY: &str = "platforms.api_server.extra.port";

/// The engine that serves the profile (`native`, `agent`, or `invalid`).
pub fn engine(home: &Home, process: &dyn Fn(&str) -> Option<String>) -> &'static str {
    agent::engine_label(home.dir(), process)
}

/// Every field of the form: `{name, label, key, value, effective, source, restart, editable,
/// note}`. `value` is as written in `config.yaml` (`${VAR}` unexpanded), `effective` what the
/// gateway uses, `restart` whether changing it needs a gateway restart on this engine.
pub fn view(home: &Home, config: &Config, process: &dyn Fn(&str) -> Option<String>) -> Value {
    let vars = profile_vars(home, process);
    let engine_now = engine(home, process);
    let live = engine_now == "native";
    let profile = home.profile().name().to_string();
    let raw = |key: &str| scalar(config.raw(key));
    let from_file = |key: &str, default: &str| {
        if config.raw(key).is_some_and(|v| !v.is_null()) {
            "config.yaml".to_string()
        } else {
            default.to_string()
        }
    };
    let mut fields = Vec::new();
    let mut push = |name: &str,
                    key: &str,
                    value: String,
                    effective: String,
                    source: String,
                    editable: bool,
                    note: String| {
        let label = FIELDS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(name, |(_, l)| *l);
        let restart = READ_AT_START.contains(&name) || !live;
        fields.push(json!({
            "name": name, "label": label, "key": key, "value": value, "effective": effective,
            "source": source, "restart": restart, "editable": editable, "note": note,
        }));
    };

    let shorthand = matches!(config.raw("model"), Some(Yaml::String(_)));
    let model_key = if shorthand { "model" } else { "model.default" };
    let model_name = raw(model_key);
    push(
        "model",
        model_key,
        model_name.clone(),
        model_name,
        from_file(model_key, "not set"),
        true,
        String::new(),
    );
    let provider = raw("model.provider");
    let provider_effective = if provider.is_empty() {
        "auto".into()
    } else {
        provider.clone()
    };
    push(
        "provider",
        "model.provider",
        provider,
        provider_effective,
        from_file("model.provider", "default"),
        true,
        String::new(),
    );
    let url = raw("model.base_url");
    push(
        "base_url",
        "model.base_url",
        url.clone(),
        url,
        from_file("model.base_url", "not set"),
        true,
        String::new(),
    );

    let (_, settings) = hermes_gateway::source::SettingsSource::from_process(home.clone()).load();
    let chain: Vec<String> = settings
        .ok()
        .and_then(|s| s.provider)
        .map(|p| p.fallbacks.iter().map(|f| f.describe()).collect())
        .unwrap_or_default();
    push(
        "fallbacks", "fallback_providers", String::new(), chain.join("; "),
        from_file("fallback_providers", "none"), false,
        "a list: edit `fallback_providers` in the text below ({provider, model, base_url?, key_env?} per entry)".into(),
    );

    let memory = raw("memory.provider");
    let memory_effective = config
        .memory_provider()
        .unwrap_or_else(|| "built-in".into());
    push(
        "memory_provider",
        "memory.provider",
        memory,
        memory_effective,
        from_file("memory.provider", "default"),
        true,
        "empty: built-in memory only".into(),
    );

    let engine_value = raw("gateway.engine");
    let engine_source = if !engine_value.is_empty() {
        "config.yaml".to_string()
    } else if process(ENGINE_VAR).is_some_and(|v| !v.trim().is_empty()) {
        format!("environment ({ENGINE_VAR})")
    } else {
        "default".into()
    };
    push(
        "engine",
        "gateway.engine",
        engine_value,
        engine_now.into(),
        engine_source,
        true,
        "native or agent; empty: the image's default".into(),
    );

    let root_path = hermes_home::layout::config_path(home.root());
    let root_config = if profile == DEFAULT_PROFILE {
        config.clone()
    } else {
        Config::load(&root_path).unwrap_or_else(|_| Config::empty(&root_path))
    };
    let mux_key = multiplex_key(&root_config);
    let (mux_on, mux_source) = match multiplex::configured(&root_config, process) {
        Some((on, source)) => (on.to_string(), source.as_str().to_string()),
        None => ("false".into(), "default".into()),
    };
    let named = profile != DEFAULT_PROFILE;
    push(
        "multiplex",
        mux_key,
        scalar(root_config.raw(mux_key)),
        mux_on,
        mux_source,
        !named,
        if named {
            "set in the default profile's config.yaml".into()
        } else {
            "true: gateway-default serves every profile".into()
        },
    );

    let env_map = |keys: &[&str]| {
        keys.iter()
            .filter_map(|k| vars(k).map(|v| (k.to_string(), v)))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let env = env_map(&[
        "API_SERVER_ENABLED",
        "API_SERVER_KEY",
        "API_SERVER_PORT",
        "API_SERVER_HOST",
    ]);
    let api_key = switch_key(config, API_SWITCH_KEYS);
    let switched = api_server::switched_on(
        &|k| env.get(k).cloned(),
        api_server::config_switch(&env, config),
    );
    let api_source = if env.contains_key("API_SERVER_ENABLED") || env.contains_key("API_SERVER_KEY")
    {
        "environment (API_SERVER_ENABLED or API_SERVER_KEY)".to_string()
    } else {
        from_file(api_key, "default")
    };
    push(
        "api_server",
        api_key,
        raw(api_key),
        switched.to_string(),
        api_source,
        true,
        "true or false".into(),
    );
    let port = api_server::port(&profile, &env, config)
        .map_or_else(|e| format!("invalid: {e}"), |p| p.to_string());
    let port_source = if env.contains_key("API_SERVER_PORT") {
        "environment (API_SERVER_PORT)".to_string()
    } else {
        from_file(API_PORT_KEY, "default")
    };
    push(
        "api_port",
        API_PORT_KEY,
        raw(API_PORT_KEY),
        port,
        port_source,
        true,
        format!("empty: {}", api_server::default_port(&profile)),
    );

    let default_max = vars(MEMORY_MAX_VAR);
    let limit = match resolve_memory_max(Some(config), default_max.as_deref()) {
        Ok(Some(bytes)) => hermes_errors::bytes::human(bytes),
        Ok(None) => "no limit".into(),
        Err(problem) => format!("invalid: {problem}"),
    };
    let limit_source = if config
        .raw("gateway.memory_max")
        .is_some_and(|v| !v.is_null())
    {
        "config.yaml".to_string()
    } else if default_max.is_some() {
        format!("environment ({MEMORY_MAX_VAR})")
    } else {
        "default".into()
    };
    push(
        "memory_max",
        "gateway.memory_max",
        raw("gateway.memory_max"),
        limit,
        limit_source,
        true,
        "a size such as 1GiB, or none".into(),
    );

    json!({ "profile": profile, "engine": engine_now, "fields": fields })
}

/// A form value as text: strings trimmed, booleans and numbers spelled, `null` empty.
fn text_of(field: &str, value: &Value) -> Result<String, FieldError> {
    match value {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.trim().to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(refused(
            field,
            format!("`{field}` must be a string"),
            "send the value as text",
        )),
    }
}

/// Checks every field of `form` (field name to value; fields left out are left as they are)
/// and returns the edits to make, or every refusal at once.
pub fn changes(
    home: &Home,
    config: &Config,
    form: &Map<String, Value>,
    process: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Change>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut edits = Vec::new();
    let mut texts = std::collections::BTreeMap::new();
    for (name, value) in form {
        if !FIELDS.iter().any(|(n, _)| n == name) || name == "fallbacks" {
            errors.push(refused(
                name,
                format!("`{name}` is not a field of the form"),
                "fields: model, provider, base_url, memory_provider, engine, multiplex, api_server, api_port, memory_max (fallbacks are edited in the text)",
            ));
            continue;
        }
        match text_of(name, value) {
            Ok(text) => {
                texts.insert(name.as_str(), text);
            }
            Err(e) => errors.push(e),
        }
    }

    // The model keys: the Profiles page's rules and their writes.
    let model_form = json!({
        "default": texts.get("model"),
        "provider": texts.get("provider"),
        "base_url": texts.get("base_url"),
    });
    if texts.contains_key("model")
        || texts.contains_key("provider")
        || texts.contains_key("base_url")
    {
        // Only `Option<String>` fields, from strings: this parse cannot fail.
        let body: Option<model::ModelBody> = serde_json::from_value(model_form).ok();
        match body.map_or(Ok(Ok(Vec::new())), |b| {
            model::validate(home, &b).map(|c| model::effective_changes(home, c))
        }) {
            Ok(Ok(pairs)) => {
                // `model: NAME` stays the shorthand it is.
                let shorthand = matches!(config.raw("model"), Some(Yaml::String(_)));
                edits.extend(pairs.into_iter().map(|(k, v)| {
                    let key = if shorthand && k == "model.default" {
                        "model".into()
                    } else {
                        k
                    };
                    Change::Set(key, Yaml::String(v))
                }));
            }
            Ok(Err(e)) => errors.push(refused(
                "model",
                hermes_errors::one_line(&e),
                e.hint().unwrap_or_default(),
            )),
            Err(refusals) => errors.extend(refusals.into_iter().map(|e| {
                let field = if e.field == "default" {
                    "model"
                } else {
                    e.field
                };
                refused(
                    field,
                    e.message,
                    "correct it and save again; nothing was written",
                )
            })),
        }
    }

    if let Some(name) = texts.get("memory_provider") {
        if name.is_empty()
            || matches!(
                name.to_ascii_lowercase().as_str(),
                "built-in" | "builtin" | "none"
            )
        {
            // What the original writes for built-in memory (it would look the aliases up as plugins).
            edits.push(Change::Set(
                "memory.provider".into(),
                Yaml::String(String::new()),
            ));
        } else if name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            edits.push(Change::Set(
                "memory.provider".into(),
                Yaml::String(name.clone()),
            ));
        } else {
            errors.push(refused("memory_provider", format!("`{name}` is not a memory provider name"), "use a plugin's name as the Plugins page lists it, or leave it empty for built-in memory"));
        }
    }

    if let Some(value) = texts.get("engine") {
        if value.is_empty() {
            edits.push(Change::Remove("gateway.engine".into()));
        } else {
            match agent::choose_engine(Some(value), None, agent::locate(process).as_ref()) {
                Ok(engine) => edits.push(Change::Set(
                    "gateway.engine".into(),
                    Yaml::String(engine.as_str().into()),
                )),
                Err(e) => errors.push(refused(
                    "engine",
                    e.to_string(),
                    e.hint().unwrap_or_default(),
                )),
            }
        }
    }

    if let Some(value) = texts.get("multiplex") {
        if home.profile().name() != DEFAULT_PROFILE {
            errors.push(refused(
                "multiplex",
                "multiplexing is set for the whole volume, in the default profile's config.yaml",
                "choose the default profile to change it",
            ));
        } else {
            let key = multiplex_key(config).to_string();
            switch_edit("multiplex", key, value, &mut edits, &mut errors);
        }
    }

    if let Some(value) = texts.get("api_server") {
        let key = switch_key(config, API_SWITCH_KEYS).to_string();
        switch_edit("api_server", key, value, &mut edits, &mut errors);
    }

    if let Some(value) = texts.get("api_port") {
        if value.is_empty() {
            edits.push(Change::Remove(API_PORT_KEY.into()));
        } else {
            match value.parse::<u16>() {
                Ok(port) => edits.push(Change::Set(API_PORT_KEY.into(), Yaml::from(port))),
                Err(_) => errors.push(refused(
                    "api_port",
                    format!("`{value}` is not a port number"),
                    format!(
                        "use a number from 1 to 65535 (0: any free port), or leave it empty for {}",
                        api_server::default_port(home.profile().name())
                    ),
                )),
            }
        }
    }

    if let Some(value) = texts.get("memory_max") {
        if value.is_empty() {
            edits.push(Change::Remove("gateway.memory_max".into()));
        } else {
            let mut probe = Config::empty(config.path());
            probe.set("gateway.memory_max", Yaml::String(value.clone()));
            match resolve_memory_max(Some(&probe), None) {
                Ok(_) => edits.push(Change::Set(
                    "gateway.memory_max".into(),
                    Yaml::String(value.clone()),
                )),
                Err(problem) => errors.push(refused("memory_max", problem, MEMORY_MAX_HINT)),
            }
        }
    }

    if errors.is_empty() {
        Ok(edits)
    } else {
        Err(errors)
    }
}

/// A switch (`true`/`false`, the original's on/off words; empty removes it) at `key`.
fn switch_edit(
    field: &str,
    key: String,
    value: &str,
    edits: &mut Vec<Change>,
    errors: &mut Vec<FieldError>,
) {
    if value.is_empty() {
        edits.push(Change::Remove(key));
        return;
    }
    match hermes_errors::switch::parse(value) {
        Some(on) => edits.push(Change::Set(key, Yaml::Bool(on))),
        None => errors.push(refused(
            field,
            format!("`{value}` is not on or off"),
            "use true or false (empty: the default)",
        )),
    }
}

/// What a save changed and what it takes to apply: compares the form's view before and after.
/// `{needed, service, uninterrupted, why, changed}`.
pub fn restart_advice(
    home: &Home,
    before: &Value,
    after: &Value,
    process: &dyn Fn(&str) -> Option<String>,
) -> Value {
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
            "the native gateway applies it to its next request, no restart".to_string()
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
    let profile = home.profile().name();
    let service = hermes_services::multiplex::resolve_asking_agent(home.root(), process)
        .served_by(profile)
        .unwrap_or_else(|| hermes_services::gateway::service_name(profile));
    json!({ "needed": needed, "service": service, "uninterrupted": uninterrupted, "why": why, "changed": names })
}
