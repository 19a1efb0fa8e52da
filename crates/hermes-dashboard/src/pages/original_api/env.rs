//! `GET|PUT|DELETE /api/env`: the profile's `.env` in the original's shape, through
//! `DotEnv::edit` as the Profiles page writes it (comments, order and other lines kept;
//! invalid and denied names refused), values masked as that page masks them.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_home::dotenv::{self, DotEnv};
use hermes_home::providers;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::pages::request::refuse;
use crate::pages::request::{ProfileQuery, home};
use crate::pages::request::{body, edit_problem, run};
use crate::server::App;

/// `GET /api/env`: one row per key set in `.env` (file order), then one per known provider's
/// key not set, as the original lists its catalogue beside the custom keys.
pub(super) async fn list(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let home = home(&app, query, None)?;
        let env = DotEnv::load(&home.env_path()).map_err(|e| edit_problem(&e))?;
        let mut rows = Map::new();
        for (key, _) in env.vars() {
            if !rows.contains_key(key) {
                let value = env.get(key).unwrap_or_default();
                rows.insert(key.to_string(), row(key, Some(value)));
            }
        }
        for p in providers::MODEL_PROVIDERS {
            if !p.key_var.is_empty() && !rows.contains_key(p.key_var) {
                rows.insert(p.key_var.to_string(), row(p.key_var, None));
            }
        }
        Ok(Json(Value::Object(rows)).into_response())
    })
    .await
}

/// The original's row for `key` (`value`: what `.env` assigns, if anything). Every value is
/// treated as a secret, as the original treats a key it has no description of.
fn row(key: &str, value: Option<&str>) -> Value {
    let provider = providers::MODEL_PROVIDERS
        .iter()
        .find(|p| p.key_var == key)
        .map(|p| providers::original_name(p.name).unwrap_or(p.name));
    let set = value.and_then(dotenv::nonblank).is_some();
    json!({
        "is_set": set,
        "redacted_value": if set { value.map(hermes_home::auth::mask_secret) } else { None },
        "description": "",
        "url": null,
        "category": if provider.is_some() { "provider" } else { "custom" },
        "is_password": true,
        "tools": [],
        "advanced": false,
        "channel_managed": false,
        "provider": provider.unwrap_or_default(),
        "provider_label": provider.unwrap_or_default(),
        "custom": provider.is_none(),
    })
}

#[derive(Deserialize)]
struct SetBody {
    key: String,
    value: String,
    #[serde(default)]
    profile: Option<String>,
}

/// `PUT /api/env` `{key, value, profile?}`.
pub(super) async fn set(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let request: SetBody = body(raw)?;
        let home = home(&app, query, request.profile.as_deref())?;
        let key = request.key.trim().to_string();
        dotenv::validate_key(&key).map_err(|e| edit_problem(&e))?;
        DotEnv::edit(&home.env_path(), |env| env.set(&key, &request.value))
            .map_err(|e| edit_problem(&e))?;
        // The original also rewrites copies of the old value in config.yaml; ours never
        // writes secrets there, so there is nothing to update.
        Ok(Json(json!({ "ok": true, "key": key, "config_updates": [] })).into_response())
    })
    .await
}

#[derive(Deserialize)]
struct RemoveBody {
    key: String,
    #[serde(default)]
    profile: Option<String>,
}

/// `DELETE /api/env` `{key, profile?}`: every assignment of the key removed; a key that is
/// not there is a 404, as the original's.
pub(super) async fn remove(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let request: RemoveBody = body(raw)?;
        let home = home(&app, query, request.profile.as_deref())?;
        let key = request.key.trim().to_string();
        if !unset_env_key(&home, &key)? {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                &format!("{key} not found in .env"),
                Some("GET /api/env lists the keys that are set".into()),
            ));
        }
        Ok(Json(json!({ "ok": true, "key": key, "removed": true, "found": true })).into_response())
    })
    .await
}

/// Removes every assignment of `key` (checked first) from `home`'s `.env`; whether there was
/// one. The Profiles page and the original's `DELETE /api/env` both remove this way.
pub(crate) fn unset_env_key(home: &hermes_home::Home, key: &str) -> Result<bool, Box<Response>> {
    dotenv::validate_key(key).map_err(|e| edit_problem(&e))?;
    DotEnv::edit(&home.env_path(), |env| Ok(env.unset(key))).map_err(|e| edit_problem(&e))
}
