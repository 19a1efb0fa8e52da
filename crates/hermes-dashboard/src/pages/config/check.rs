//! The Config page's form, checked: each changed field by the rule its reader applies (the
//! model keys through the Profiles page's [`model_settings::validate`], the engine through
//! `hermes_services::agent::choose_engine`, the memory limit through `resolve_memory_max`,
//! switches through `hermes_errors::switch`), turned into the edits to make. Every refusal
//! is collected, so one answer lists them all and nothing is written.

use std::collections::BTreeMap;

use hermes_home::config::Config;
use hermes_home::yaml_edit::Change;
use hermes_home::{DEFAULT_PROFILE, Home, api_server};
use hermes_services::agent;
use hermes_services::gateway::{MEMORY_MAX_HINT, resolve_memory_max};
use serde::Serialize;
use serde_json::{Map, Value};
use yaml_serde::Value as Yaml;

use super::settings::{
    API_PORT_KEY, API_SWITCH_KEYS, FIELDS, MEMORY_MAX_KEY, Vars, multiplex_key, present_key,
};
use crate::model_settings;

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
    process: Vars,
) -> Result<Vec<Change>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut texts = BTreeMap::new();
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
    let mut edits = match model_changes(home, config, &texts) {
        Ok(edits) => edits,
        Err(refusals) => {
            errors.extend(refusals);
            Vec::new()
        }
    };
    // In the form's order, so new keys are added in the order the page shows them.
    for (name, text) in FIELDS.iter().filter_map(|(n, _)| Some((*n, texts.get(n)?))) {
        let checked = match name {
            "memory_provider" => memory_provider(text),
            "engine" => engine(text, process),
            "multiplex" => multiplex(home, config, text),
            "api_server" => switch("api_server", present_key(config, API_SWITCH_KEYS), text),
            "api_port" => api_port(home, text),
            "memory_max" => memory_max(config, text),
            _ => continue, // the model's, checked together above
        };
        match checked {
            Ok(edit) => edits.push(edit),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(edits)
    } else {
        Err(errors)
    }
}

/// The model keys, together (a provider's need for a base URL spans two fields): the
/// Profiles page's rules and writes; `model: NAME` stays the shorthand it is.
fn model_changes(
    home: &Home,
    config: &Config,
    texts: &BTreeMap<&str, String>,
) -> Result<Vec<Change>, Vec<FieldError>> {
    if !["model", "provider", "base_url"]
        .iter()
        .any(|k| texts.contains_key(k))
    {
        return Ok(Vec::new());
    }
    let body = model_settings::ModelBody {
        default: texts.get("model").cloned(),
        provider: texts.get("provider").cloned(),
        base_url: texts.get("base_url").cloned(),
    };
    let pairs = model_settings::validate(home, &body).map_err(|refusals| {
        refusals
            .into_iter()
            .map(|e| {
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
            })
            .collect::<Vec<_>>()
    })?;
    let pairs = model_settings::effective_changes(home, pairs).map_err(|e| {
        vec![refused(
            "model",
            hermes_errors::one_line(&e),
            e.hint().unwrap_or_default(),
        )]
    })?;
    let shorthand = matches!(config.raw("model"), Some(Yaml::String(_)));
    Ok(pairs
        .into_iter()
        .map(|(key, value)| {
            let key = if shorthand && key == "model.default" {
                "model".into()
            } else {
                key
            };
            Change::Set(key, Yaml::String(value))
        })
        .collect())
}

/// A plugin's name, or empty for built-in memory (`built-in`, `none` written as `""`, what the
/// original writes: it would look the aliases up as plugins).
fn memory_provider(name: &str) -> Result<Change, FieldError> {
    let built_in = matches!(
        name.to_ascii_lowercase().as_str(),
        "" | "built-in" | "builtin" | "none"
    );
    if built_in {
        return Ok(Change::Set(
            "memory.provider".into(),
            Yaml::String(String::new()),
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(refused(
            "memory_provider",
            format!("`{name}` is not a memory provider name"),
            "use a plugin's name as the Plugins page lists it, or leave it empty for built-in memory",
        ));
    }
    Ok(Change::Set(
        "memory.provider".into(),
        Yaml::String(name.into()),
    ))
}

/// `native` or `agent` (the agent only where it is installed), as the gateway chooses;
/// empty removes the key (the image's default).
fn engine(value: &str, process: Vars) -> Result<Change, FieldError> {
    if value.is_empty() {
        return Ok(Change::Remove("gateway.engine".into()));
    }
    agent::choose_engine(Some(value), None, agent::locate(process).as_ref())
        .map(|engine| {
            Change::Set(
                "gateway.engine".into(),
                Yaml::String(engine.as_str().into()),
            )
        })
        .map_err(|e| refused("engine", e.to_string(), e.hint().unwrap_or_default()))
}

/// The volume's switch: only in the default profile's (the root) `config.yaml`.
fn multiplex(home: &Home, config: &Config, value: &str) -> Result<Change, FieldError> {
    if home.profile().name() != DEFAULT_PROFILE {
        return Err(refused(
            "multiplex",
            "multiplexing is set for the whole volume, in the default profile's config.yaml",
            "choose the default profile to change it",
        ));
    }
    switch("multiplex", multiplex_key(config), value)
}

/// A port number; empty removes the key (the profile's default port).
fn api_port(home: &Home, value: &str) -> Result<Change, FieldError> {
    if value.is_empty() {
        return Ok(Change::Remove(API_PORT_KEY.into()));
    }
    value
        .parse::<u16>()
        .map(|port| Change::Set(API_PORT_KEY.into(), Yaml::from(port)))
        .map_err(|_| {
            refused(
                "api_port",
                format!("`{value}` is not a port number"),
                format!(
                    "use a number from 1 to 65535 (0: any free port), or leave it empty for {}",
                    api_server::default_port(home.profile().name())
                ),
            )
        })
}

/// A size the service accepts (checked by its own reader on the value alone); empty removes
/// the key.
fn memory_max(config: &Config, value: &str) -> Result<Change, FieldError> {
    if value.is_empty() {
        return Ok(Change::Remove(MEMORY_MAX_KEY.into()));
    }
    let mut probe = Config::empty(config.path());
    probe.set(MEMORY_MAX_KEY, Yaml::String(value.into()));
    resolve_memory_max(Some(&probe), None)
        .map(|_| Change::Set(MEMORY_MAX_KEY.into(), Yaml::String(value.into())))
        .map_err(|problem| refused("memory_max", problem, MEMORY_MAX_HINT))
}

/// A switch (`true`/`false`, or the original's on/off words) at `key`; empty removes it.
fn switch(field: &str, key: &str, value: &str) -> Result<Change, FieldError> {
    if value.is_empty() {
        return Ok(Change::Remove(key.into()));
    }
    hermes_errors::switch::parse(value)
        .map(|on| Change::Set(key.into(), Yaml::Bool(on)))
        .ok_or_else(|| {
            refused(
                field,
                format!("`{value}` is not on or off"),
                "use true or false (empty: the default)",
            )
        })
}
