//! The Config page's form, read: the settings operators change most, each with its value as
//! written, the value the gateway (or its service) uses, where that comes from, and whether a
//! change needs a restart. Each is read by the rule its reader applies, never restated: the
//! gateway's settings for fallbacks, `hermes_services::agent` for the engine,
//! `hermes_home::multiplex`, `hermes_home::api_server`, `resolve_memory_max`.
//! [`super::check`] checks a change, [`super::restart`] says what applying it takes.

use std::collections::BTreeMap;

use hermes_home::config::Config;
use hermes_home::dotenv::DotEnv;
use hermes_home::{DEFAULT_PROFILE, Home, api_server, multiplex};
use hermes_services::agent::{self, ENGINE_VAR};
use hermes_services::gateway::{MEMORY_MAX_VAR, resolve_memory_max};
use hermes_settings::{ProfileFiles, Scope};
use serde::Serialize;
use serde_json::{Value, json};
use yaml_serde::Value as Yaml;

/// A lookup of environment variables.
pub type Vars<'a> = &'a dyn Fn(&str) -> Option<String>;

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

/// Fields both engines re-read while running: the native gateway before each request, the
/// agent's gateway each turn (its `_load_gateway_config`, keyed on the file's mtime). The
/// other fields not read at start (the memory provider) only the native gateway reloads.
const LIVE_ON_EVERY_ENGINE: [&str; 4] = ["model", "provider", "base_url", "fallbacks"];

/// The API server's switch: `platforms.api_server.enabled`, else the same under `gateway.`
/// (`api_server::config_switch`'s order).
pub const API_SWITCH_KEYS: [&str; 2] = [
    "platforms.api_server.enabled",
    "gateway.platforms.api_server.enabled",
];
/// The API server's port in `config.yaml`.
pub const API_PORT_KEY: &str = "platforms.api_server.extra.port";
/// The gateway's memory limit.
pub const MEMORY_MAX_KEY: &str = "gateway.memory_max";

/// One row of the form.
#[derive(Serialize)]
struct Row {
    name: &'static str,
    label: &'static str,
    /// The dotted key in `config.yaml`.
    key: &'static str,
    /// As written (`""`: not set).
    value: String,
    /// What the gateway uses.
    effective: String,
    /// `config.yaml`, the environment variable that overrides it, or `default`.
    source: String,
    /// Whether a change needs a gateway restart (on the profile's engine).
    restart: bool,
    editable: bool,
    note: String,
}

/// What every row reads from.
struct Reading<'a> {
    home: &'a Home,
    config: &'a Config,
    /// The process environment (the supervisor's: engine and memory-limit defaults).
    process: Vars<'a>,
    /// The profile's files over the process environment, as its gateway reads them (the API
    /// server's variables, and where each comes from).
    files: ProfileFiles,
    /// Whether the engine is native (it reloads more while running).
    native: bool,
}

impl Reading<'_> {
    fn raw(&self, key: &str) -> String {
        scalar(self.config.raw(key))
    }

    fn source(&self, key: &str, otherwise: &str) -> String {
        if is_set(self.config, key) {
            "config.yaml".into()
        } else {
            otherwise.into()
        }
    }

    fn row(&self, name: &'static str, key: &'static str, effective: String, source: String) -> Row {
        let label = FIELDS
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(name, |(_, l)| *l);
        let restart = READ_AT_START.contains(&name)
            || (!self.native && !LIVE_ON_EVERY_ENGINE.contains(&name));
        Row {
            name,
            label,
            key,
            value: self.raw(key),
            effective,
            source,
            restart,
            editable: true,
            note: String::new(),
        }
    }
}

/// Whether `key` is in the file with a value.
pub fn is_set(config: &Config, key: &str) -> bool {
    config.raw(key).is_some_and(|v| !v.is_null())
}

/// A YAML scalar as the form shows it (`""` when absent; a mapping or list named as such).
fn scalar(value: Option<&Yaml>) -> String {
    match value {
        None | Some(Yaml::Null) => String::new(),
        Some(Yaml::String(s)) => s.clone(),
        Some(Yaml::Bool(b)) => b.to_string(),
        Some(Yaml::Number(n)) => n.to_string(),
        Some(_) => "(a list or mapping: edit it in the text below)".into(),
    }
}

/// The key that holds a setting read from two places: the first one the file has, else the
/// first (what a new setting is written as).
pub fn present_key(config: &Config, keys: [&'static str; 2]) -> &'static str {
    keys.into_iter()
        .find(|k| is_set(config, k))
        .unwrap_or(keys[0])
}

/// Where the multiplexing switch is: a top-level `multiplex_profiles` wins over
/// `gateway.multiplex_profiles` (the original's order), which is what a new switch is written
/// as (`hermes config set gateway.multiplex_profiles true`).
pub fn multiplex_key(root_config: &Config) -> &'static str {
    if is_set(root_config, "multiplex_profiles") {
        "multiplex_profiles"
    } else {
        multiplex::MULTIPLEX_KEY
    }
}

/// The engine that serves the profile (`native`, `agent`, or `invalid`).
pub fn engine(home: &Home, process: Vars) -> &'static str {
    agent::engine_label(home.dir(), process)
}

/// The profile's files as its gateway reads them, over `process` (`hermes_settings`): a `.env`
/// that cannot be read is read as empty here (the page says so elsewhere).
fn profile_files(home: &Home, config: &Config, process: Vars) -> ProfileFiles {
    ProfileFiles::from_parts(
        DotEnv::load(&home.env_path()).unwrap_or_default(),
        config.clone(),
        Scope::of(home.profile().name()),
        hermes_settings::process_through(process),
    )
}

/// Every field of the form: `{profile, engine, fields: [{name, label, key, value, effective,
/// source, restart, editable, note}]}`. `value` is as written (`${VAR}` unexpanded).
pub fn view(home: &Home, config: &Config, process: Vars) -> Value {
    let engine = engine(home, process);
    let r = Reading {
        home,
        config,
        process,
        files: profile_files(home, config, process),
        native: engine == "native",
    };
    let mut rows = model_rows(&r);
    rows.push(memory_provider_row(&r));
    rows.push(engine_row(&r, engine));
    rows.push(multiplex_row(&r));
    rows.extend(api_server_rows(&r));
    rows.push(memory_max_row(&r));
    json!({ "profile": home.profile().name(), "engine": engine, "fields": rows })
}

/// Model, provider, base URL and the fallback chain the gateway resolves.
fn model_rows(r: &Reading) -> Vec<Row> {
    let shorthand = matches!(r.config.raw("model"), Some(Yaml::String(_)));
    let model_key = if shorthand { "model" } else { "model.default" };
    let model = r.row(
        "model",
        model_key,
        r.raw(model_key),
        r.source(model_key, "not set"),
    );
    let provider = r.raw("model.provider");
    let provider = r.row(
        "provider",
        "model.provider",
        if provider.is_empty() {
            "auto".into()
        } else {
            provider
        },
        r.source("model.provider", "default"),
    );
    let base_url = r.row(
        "base_url",
        "model.base_url",
        r.raw("model.base_url"),
        r.source("model.base_url", "not set"),
    );
    let chain: Vec<String> = hermes_gateway_settings::read_from_process(r.home)
        .ok()
        .and_then(|s| s.provider)
        .map(|p| p.fallbacks.iter().map(|f| f.describe()).collect())
        .unwrap_or_default();
    let mut fallbacks = r.row(
        "fallbacks",
        "fallback_providers",
        chain.join("; "),
        r.source("fallback_providers", "none"),
    );
    fallbacks.editable = false;
    fallbacks.value = String::new();
    fallbacks.note = "a list: edit `fallback_providers` in the text below ({provider, model, base_url?, key_env?} per entry)".into();
    vec![model, provider, base_url, fallbacks]
}

fn memory_provider_row(r: &Reading) -> Row {
    let effective = r
        .config
        .memory_provider()
        .unwrap_or_else(|| "built-in".into());
    let mut row = r.row(
        "memory_provider",
        "memory.provider",
        effective,
        r.source("memory.provider", "default"),
    );
    row.note = "empty: built-in memory only".into();
    row
}

fn engine_row(r: &Reading, engine: &str) -> Row {
    let source = if is_set(r.config, "gateway.engine") {
        "config.yaml".to_string()
    } else if (r.process)(ENGINE_VAR).is_some_and(|v| !v.trim().is_empty()) {
        format!("environment ({ENGINE_VAR})")
    } else {
        "default".into()
    };
    let mut row = r.row("engine", "gateway.engine", engine.into(), source);
    row.note = "native or agent; empty: the image's default".into();
    row
}

/// The volume's switch, in the root `config.yaml`: shown on every profile, changed on the
/// default one.
fn multiplex_row(r: &Reading) -> Row {
    let named = r.home.profile().name() != DEFAULT_PROFILE;
    let root_path = hermes_home::layout::config_path(r.home.root());
    let root_config = if named {
        hermes_settings::config_of(r.home.root()).unwrap_or_else(|_| Config::empty(&root_path))
    } else {
        r.config.clone()
    };
    let key = multiplex_key(&root_config);
    let (on, source) = match multiplex::configured(&root_config, r.process) {
        Some((on, source)) => (on.to_string(), source.as_str().to_string()),
        None => ("false".into(), "default".into()),
    };
    let mut row = r.row("multiplex", key, on, source);
    row.value = scalar(root_config.raw(key));
    row.editable = !named;
    row.note = if named {
        "set in the default profile's config.yaml".into()
    } else {
        "true: gateway-default serves every profile".into()
    };
    row
}

fn api_server_rows(r: &Reading) -> [Row; 2] {
    let env: BTreeMap<String, String> = r
        .files
        .environment()
        .into_iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .collect();
    let env = &env;
    let switch_key = present_key(r.config, API_SWITCH_KEYS);
    let on = api_server::switched_on(
        &|k| env.get(k).cloned(),
        api_server::config_switch(env, r.config),
    );
    let variable_source = |keys: &[&str]| {
        keys.iter().find_map(|k| {
            r.files
                .var(k)
                .map(|setting| format!("{} ({k})", setting.source))
        })
    };
    let source = variable_source(&["API_SERVER_ENABLED", "API_SERVER_KEY"])
        .unwrap_or_else(|| r.source(switch_key, "default"));
    let mut switch = r.row("api_server", switch_key, on.to_string(), source);
    switch.note = "true or false".into();
    let profile = r.home.profile().name();
    let port = api_server::port(profile, env, r.config)
        .map_or_else(|e| format!("invalid: {e}"), |p| p.to_string());
    let source =
        variable_source(&["API_SERVER_PORT"]).unwrap_or_else(|| r.source(API_PORT_KEY, "default"));
    let mut port = r.row("api_port", API_PORT_KEY, port, source);
    port.note = format!("empty: {}", api_server::default_port(profile));
    [switch, port]
}

/// The service's limit: its default comes from the supervisor's environment.
fn memory_max_row(r: &Reading) -> Row {
    let default = (r.process)(MEMORY_MAX_VAR).filter(|v| !v.trim().is_empty());
    let effective = match resolve_memory_max(Some(r.config), default.as_deref()) {
        Ok(Some(bytes)) => hermes_errors::bytes::human(bytes),
        Ok(None) => "no limit".into(),
        Err(problem) => format!("invalid: {problem}"),
    };
    let otherwise = if default.is_some() {
        format!("environment ({MEMORY_MAX_VAR})")
    } else {
        "default".into()
    };
    let mut row = r.row(
        "memory_max",
        MEMORY_MAX_KEY,
        effective,
        r.source(MEMORY_MAX_KEY, &otherwise),
    );
    row.note = "a size such as 1GiB, or none".into();
    row
}
