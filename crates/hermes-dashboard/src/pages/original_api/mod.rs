//! The original dashboard's API where tools written for it call it (`hermes_cli/web_server.py`
//! of hermes-agent 0.20.1), with its request and response shapes, behind our guard like every
//! other endpoint (a change still needs the session token header).
//!
//! Endpoints of their own here: `GET|PUT /api/config`, `GET|PUT|DELETE /api/env` and
//! `POST /api/gateway/{start|stop|restart}`. Where one of our pages already owns the path
//! (`/api/status`, `/api/sessions`, `/api/logs`, `/api/profiles`), that page's handler keeps
//! its answer and adds the original's fields from the submodule of the same name.
//!
//! No logic of its own: each is a thin translation onto what our pages and the CLI already
//! do — `config.yaml` through `Config::edit` (every byte it does not change kept), `.env`
//! through `DotEnv::edit` with values masked as the Profiles page masks them, gateway actions
//! through the Overview's control-socket calls. Where the original's answer cannot be given
//! exactly, docs/dashboard.md ("The original's API") says how ours differs.

mod config;
pub(crate) mod env;
mod gateway;
pub mod logs;
pub mod profiles;
pub mod sessions;
pub mod status;
pub mod topology;

use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::server::App;

/// The original's endpoints.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/api/config", get(config::show).put(config::update))
        .route("/api/env", get(env::list).put(env::set).delete(env::remove))
        .route("/api/gateway/{action}", post(gateway::action))
}

/// This module's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let problem = json!({ "description": "{detail, hint}" });
    let unauthorized = json!({ "description": "No valid session token or credentials" });
    let csrf = json!({ "description": "Missing or wrong X-Hermes-Session-Token" });
    let profile = json!([{ "name": "profile", "in": "query", "required": false, "schema": { "type": "string" } }]);
    json!({
        "/api/config": {
            "get": {
                "summary": "The original's config read: config.yaml as written (no defaults merged, ${VAR} unexpanded), `_` keys left out, `model` as its name plus `model_context_length`",
                "parameters": profile,
                "responses": {
                    "200": { "description": "the config as a JSON object" },
                    "400": problem, "401": unauthorized, "404": problem, "409": problem,
                },
            },
            "put": {
                "summary": "The original's config write: {config, profile?} deep-merged into config.yaml (only the keys sent change; every other byte kept)",
                "parameters": profile,
                "responses": {
                    "200": { "description": "{\"ok\": true}" },
                    "400": problem, "401": unauthorized, "403": csrf, "404": problem,
                    "409": { "description": "config.yaml does not parse, or a change the byte-keeping editor cannot make: {detail, hint}; nothing written" },
                    "422": problem,
                },
            },
        },
        "/api/env": {
            "get": {
                "summary": "The original's .env listing: {KEY: {is_set, redacted_value, category, is_password, provider, custom, …}} for the keys set and the known providers' keys",
                "parameters": profile,
                "responses": {
                    "200": { "description": "an object keyed by variable name" },
                    "400": problem, "401": unauthorized, "404": problem,
                },
            },
            "put": {
                "summary": "The original's .env write: {key, value, profile?} (comments and other lines kept)",
                "parameters": profile,
                "responses": {
                    "200": { "description": "{ok, key, config_updates: []}" },
                    "400": problem, "401": unauthorized, "403": csrf, "404": problem, "422": problem,
                },
            },
            "delete": {
                "summary": "The original's .env removal: {key, profile?}",
                "parameters": profile,
                "responses": {
                    "200": { "description": "{ok, key, removed, found}" },
                    "400": problem, "401": unauthorized, "403": csrf,
                    "404": { "description": "the profile, or the key in its .env, does not exist: {detail, hint}" },
                    "422": problem,
                },
            },
        },
        "/api/gateway/{action}": { "post": {
            "summary": "The original's gateway start/stop/restart for ?profile= (the active profile without it), through the control socket as /api/services/{name}/{action}",
            "parameters": [
                { "name": "action", "in": "path", "required": true, "schema": { "enum": ["start", "stop", "restart"] } },
                { "name": "profile", "in": "query", "required": false, "schema": { "type": "string" } },
            ],
            "responses": {
                "200": { "description": "{ok: true, pid: null, name: gateway-<action>, service: gateway-<profile>, warning?}" },
                "400": problem, "401": unauthorized, "403": csrf,
                "404": { "description": "an unknown action or profile: {detail, hint}" },
                "409": { "description": "The supervisor refused: {detail, hint}" },
                "503": { "description": "No supervisor is running: {detail, hint}" },
            },
        }},
    })
}
