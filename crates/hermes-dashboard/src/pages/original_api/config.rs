//! `GET|PUT /api/config`: `config.yaml` in the original's web shape.
//!
//! The original's form knows `model` only as a name (its schema's `model` is a string) with
//! `model_context_length` beside it, while the file often holds a `model:` mapping; as the
//! original, a read flattens it and a write puts the name and the length back inside it.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_home::config::Config;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::pages::request::{ProfileQuery, home};
use crate::pages::request::{Step, refuse};
use crate::pages::request::{body, edit_problem, run};
use crate::server::App;

/// `GET /api/config`: the file as written, `_` keys (`_config_version`) left out as the
/// original leaves them out, `model` flattened.
pub(super) async fn show(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let home = home(&app, query, None)?;
        let config = hermes_settings::config_of(home.dir()).map_err(|e| edit_problem(&e))?;
        let document = serde_json::to_value(config.document()).map_err(|e| {
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("config.yaml cannot be shown as JSON: {e}"),
                Some("check it with `hermes config check`".into()),
            )
        })?;
        Ok(Json(for_web(document)).into_response())
    })
    .await
}

/// The document as the original's form reads it.
fn for_web(document: Value) -> Value {
    let Value::Object(map) = document else {
        return json!({ "model_context_length": 0 });
    };
    let mut out: Map<String, Value> = map
        .into_iter()
        .filter(|(k, _)| !k.starts_with('_'))
        .collect();
    let mut context_length = 0;
    if let Some(Value::Object(model)) = out.get("model") {
        if let Some(n) = model.get("context_length").and_then(Value::as_i64) {
            context_length = n;
        }
        let name = model
            .get("default")
            .or_else(|| model.get("name"))
            .cloned()
            .unwrap_or_else(|| Value::from(""));
        out.insert("model".into(), name);
    }
    out.insert("model_context_length".into(), Value::from(context_length));
    Value::Object(out)
}

#[derive(Deserialize)]
struct Update {
    config: Map<String, Value>,
    #[serde(default)]
    profile: Option<String>,
}

/// `PUT /api/config` `{config, profile?}`: merged into the file as the original merges it
/// (a mapping into a mapping key by key, anything else replaces), so a form that sends only
/// what it knows never drops what it does not. One refused key writes nothing.
pub(super) async fn update(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let request: Update = body(raw)?;
        let home = home(&app, query, request.profile.as_deref())?;
        // Merged into a copy first: a refused key leaves the document as read, so `edit`
        // writes nothing at all.
        Config::edit(&home.config_path(), |config| {
            let incoming = from_web(config, request.config);
            let mut merged = config.clone();
            let done = merge(&mut merged, "", &incoming);
            if done.is_ok() {
                *config = merged;
            }
            Ok(done)
        })
        .map_err(|e| edit_problem(&e))??;
        Ok(Json(json!({ "ok": true })).into_response())
    })
    .await
}

/// The form's `model` name and `model_context_length` back where the file keeps them: inside
/// a `model:` mapping when the file has one (a length of 0 means "detect", so none written).
fn from_web(config: &Config, mut incoming: Map<String, Value>) -> Map<String, Value> {
    let length = incoming.remove("model_context_length");
    if !matches!(config.raw("model"), Some(v) if v.is_mapping()) {
        return incoming;
    }
    let mut model = Map::new();
    match incoming.remove("model") {
        Some(Value::String(name)) => {
            model.insert("default".into(), Value::String(name));
        }
        Some(Value::Object(map)) => model = map,
        Some(other) => {
            incoming.insert("model".into(), other);
        }
        None => {}
    }
    match length.as_ref().and_then(Value::as_u64) {
        Some(n) if n > 0 => {
            model.insert("context_length".into(), Value::from(n));
        }
        _ => {}
    }
    if !model.is_empty() {
        incoming.insert("model".into(), Value::Object(model));
    }
    incoming
}

/// Merges `incoming` into the document at `at` (a dotted path, `""` the top).
fn merge(config: &mut Config, at: &str, incoming: &Map<String, Value>) -> Step<()> {
    for (key, value) in incoming {
        let path = if at.is_empty() {
            key.clone()
        } else {
            format!("{at}.{key}")
        };
        if key.is_empty() || key.contains('.') {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!(
                    "config key `{path}` cannot be written: a key is a non-empty name without dots"
                ),
                Some("nest mappings instead: {\"a\": {\"b\": 1}} sets a.b".into()),
            ));
        }
        // The file's own bookkeeping (`_config_version`) is not the form's to change.
        if at.is_empty() && key.starts_with('_') {
            continue;
        }
        match value {
            Value::Object(inner) if config.raw(&path).is_some_and(|v| v.is_mapping()) => {
                merge(config, &path, inner)?;
            }
            _ => {
                let yaml = serde_json::from_value(value.clone()).map_err(|e| {
                    refuse(
                        StatusCode::BAD_REQUEST,
                        &format!("config key `{path}` cannot be written as YAML: {e}"),
                        None,
                    )
                })?;
                config.set(&path, yaml);
            }
        }
    }
    Ok(())
}
