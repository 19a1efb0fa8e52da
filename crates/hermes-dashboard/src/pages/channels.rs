//! The Channels page: the messaging platforms of the installed agent ([`catalog`]) in one
//! profile — enabled or not, credentials present or not (values never shown), and what the
//! running gateway says of each ([`state`]) — with their tokens set or cleared in the
//! profile's `.env`, the platform enabled or disabled (`platforms.<id>.enabled` in
//! `config.yaml`), and the gateway restart that applies it offered.
//!
//! The endpoints are the original dashboard's: `GET /api/messaging/platforms?profile=` and
//! `PUT /api/messaging/platforms/{id}` with `{env, clear_env, enabled, profile}`. A write touches
//! only the platform's own variables (the catalogue's), refuses a value with a control
//! character, and refuses — before writing anything — enabling a port-binding platform on a
//! named profile while the default profile's gateway multiplexes (the shared gateway would not
//! start, for every profile). `.env` is written through `DotEnv::edit` and `config.yaml`
//! through the byte-keeping editor, as every other page writes them.

mod catalog;
mod pairing;
mod state;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use hermes_home::Home;
use hermes_home::config::Config;
use hermes_home::dotenv::{self, DotEnv};
use hermes_home::gateway_state;
use hermes_home::yaml_edit::Change;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::openapi::{profile_param, responses};
use crate::pages::original_api::topology;
use crate::pages::request::{ProfileQuery, home};
use crate::pages::request::{Step, refuse};
use crate::pages::request::{body, edit_problem, run};
use crate::pages::{self, Page, shell};
use crate::server::{App, Base, blocking};

pub use catalog::Platform;

/// The longest value a platform variable may take (tokens are far shorter).
const MAX_VALUE: usize = 4096;

/// `/channels` and its API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/channels", get(page))
        .route("/api/messaging/platforms", get(list))
        .route("/api/messaging/platforms/{id}", axum::routing::put(update))
        .merge(pairing::routes())
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    let root = app.root.clone();
    let options = blocking(move || pages::profile_options(&root))
        .await
        .unwrap_or_default();
    let main = format!(
        r#"<h2>Channels</h2>
<form id="pick" class="toolbar"><label>Profile <select id="profile" name="profile">{options}</select></label> <span id="env-path" class="muted"></span></form>
<p id="summary" class="muted">Asking the agent which platforms it supports…</p>
<section id="restart" class="notice" hidden><span id="restart-note"></span> <button type="button" id="restart-button">Restart</button></section>
<section id="edit" hidden><h3 id="edit-name"></h3><p id="edit-description" class="muted"></p>
<form id="edit-form"><label class="check"><input type="checkbox" id="edit-enabled"> Enabled</label><div id="edit-vars"></div>
<p class="muted">A field left empty keeps what is set; values are written to the profile's <code>.env</code> and never shown.</p>
<button type="submit">Save</button> <button type="button" id="edit-cancel">Close</button></form></section>
<section id="pairing"><h3>Pairing</h3><p id="pairing-summary" class="muted"></p>
<table id="pending" hidden><thead><tr><th>Platform</th><th>Waiting user</th><th>Asked</th><th></th></tr></thead><tbody></tbody></table>
<form id="approve-code" class="toolbar"><label>Platform <input id="code-platform" name="platform" placeholder="telegram" size="12"></label> <label>Code <input id="code-value" name="code" autocomplete="off" size="10"></label> <button type="submit">Approve code</button> <button type="button" id="clear-pending">Clear pending</button></form>
<table id="approved" hidden><thead><tr><th>Platform</th><th>Approved user</th><th>Since</th><th></th></tr></thead><tbody></tbody></table></section>
<h3>Platforms</h3>
<table id="platforms"><thead><tr><th>Platform</th><th>Enabled</th><th>Credentials</th><th>State</th><th>Last error</th><th></th></tr></thead><tbody></tbody></table>"#
    );
    shell(Page::Channels, &base.0, app.token(), &main)
}

/// The catalogue, or the refusal a request gets without one.
fn platforms(app: &App) -> Step<Vec<Platform>> {
    let agent = crate::pages::installed_agent(app, "listing the messaging platforms")?;
    let cache = hermes_services::agent_probe::cache_file(|k| (app.vars)(k));
    catalog::platforms(&agent, cache.as_deref()).map_err(|e| {
        refuse(
            StatusCode::BAD_GATEWAY,
            &format!("the agent could not list its messaging platforms: {e}"),
            Some("`hermes doctor` checks the agent's install".into()),
        )
    })
}

/// Whether a gateway process serves `home`'s profile: the supervisor's word when it answers,
/// else the profile's own record (`gateway_state: running`).
fn gateway_running(app: &App, home: &Home, record: Option<&Map<String, Value>>) -> bool {
    let service = hermes_services::multiplex::serving_service(home, &*app.vars);
    match crate::status::supervisor_rows(&app.root, &*app.vars) {
        Ok(rows) => rows.iter().any(|r| r.name == service && r.pid.is_some()),
        Err(_) => record.and_then(|r| r["gateway_state"].as_str()) == Some("running"),
    }
}

/// One platform's row for `home`: the catalogue's facts, the profile's settings and the
/// gateway's word ([`state`]); env vars as `{key, required, is_set, …}`, never a value.
fn row(
    platform: &Platform,
    config: &Config,
    env: &DotEnv,
    running: bool,
    record: Option<&Map<String, Value>>,
) -> Value {
    let section = format!("platforms.{}", platform.id);
    let enabled = state::truthy(config.raw(&format!("{section}.enabled")));
    let is_set = |key: &str| env.get(key).and_then(dotenv::nonblank).is_some();
    let configured = platform
        .env_vars
        .iter()
        .filter(|v| v.required)
        .all(|v| is_set(&v.key));
    let vars: Vec<Value> = platform
        .env_vars
        .iter()
        .map(|v| {
            json!({
                "key": v.key, "required": v.required, "is_set": is_set(&v.key),
                "redacted_value": null, "prompt": v.prompt, "description": v.description,
                "is_password": v.is_password, "advanced": v.advanced,
            })
        })
        .collect();
    let home_channel = config
        .raw(&format!("{section}.home_channel"))
        .filter(|v| v.is_mapping())
        .and_then(|v| serde_json::to_value(v).ok());
    let inputs = state::Inputs {
        enabled,
        configured,
        gateway_running: running,
        record,
    };
    let mut answer = state::of(&platform.id, &inputs);
    for (key, value) in [
        ("id", json!(platform.id)),
        ("name", json!(platform.name)),
        ("description", json!(platform.description)),
        ("docs_url", json!(platform.docs_url)),
        ("enabled", json!(enabled)),
        ("configured", json!(configured)),
        ("gateway_running", json!(running)),
        ("home_channel", home_channel.unwrap_or(Value::Null)),
        ("env_vars", json!(vars)),
    ] {
        answer[key] = value;
    }
    answer
}

/// `GET /api/messaging/platforms?profile=`: `{env_path, gateway_start_command, platforms}` as
/// the original answers, plus ours: `profile`, `engine`, `gateway_service`.
async fn list(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let home = home(&app, query, None)?;
        let catalogue = platforms(&app)?;
        let config = hermes_settings::config_of(home.dir()).map_err(|e| edit_problem(&e))?;
        let env = DotEnv::load(&home.env_path()).map_err(|e| edit_problem(&e))?;
        let record = gateway_state::read(&gateway_state::path(home.dir()))
            .ok()
            .and_then(|r| r.state().map(|s| s.fields().clone()));
        let running = gateway_running(&app, &home, record.as_ref());
        let rows: Vec<Value> = catalogue
            .iter()
            .map(|p| row(p, &config, &env, running, record.as_ref()))
            .collect();
        let profile = home.profile().name();
        Ok(Json(json!({
            "env_path": home.env_path(),
            "gateway_start_command": start_command(profile),
            "profile": profile,
            "engine": hermes_services::agent::engine_label(home.dir(), &*app.vars),
            "gateway_service": hermes_services::multiplex::serving_service(&home, &*app.vars),
            "platforms": rows,
        }))
        .into_response())
    })
    .await
}

/// The original's `hermes [-p NAME] gateway start` for `profile` (no `-p` for the default).
fn start_command(profile: &str) -> String {
    if profile == hermes_home::DEFAULT_PROFILE {
        "hermes gateway start".into()
    } else {
        format!("hermes -p {profile} gateway start")
    }
}

/// The body of a write (the original's `MessagingPlatformUpdate`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Update {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    env: Map<String, Value>,
    #[serde(default)]
    clear_env: Vec<String>,
    #[serde(default)]
    profile: Option<String>,
}

/// A write's changes to `.env`, checked.
struct EnvChanges {
    /// `(key, trimmed value)` to set.
    sets: Vec<(String, String)>,
    /// Keys to remove.
    clears: Vec<String>,
}

/// The variables to set and to clear, each checked against the platform's own variables;
/// values must be one-line text. Empty values are skipped, as in the original (an empty field
/// keeps what is set).
fn checked_changes(platform: &Platform, update: &Update) -> Step<EnvChanges> {
    let foreign = |key: &str| {
        refuse(
            StatusCode::BAD_REQUEST,
            &format!("{key} is not configurable for {}", platform.name),
            Some(format!(
                "the variables of {} are: {}",
                platform.name,
                platform
                    .env_vars
                    .iter()
                    .map(|v| v.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        )
    };
    let mut sets = Vec::new();
    for (key, value) in &update.env {
        if !platform.owns(key) {
            return Err(foreign(key));
        }
        let Some(text) = value.as_str() else {
            return Err(refuse(
                StatusCode::UNPROCESSABLE_ENTITY,
                &format!("the value of {key} is not a string"),
                Some("send each variable's value as a JSON string".into()),
            ));
        };
        let text = text.trim();
        if text.chars().any(char::is_control) || text.len() > MAX_VALUE {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!("the value of {key} is not one line of at most {MAX_VALUE} bytes"),
                Some("paste the token alone, without line breaks".into()),
            ));
        }
        if !text.is_empty() {
            sets.push((key.clone(), text.to_string()));
        }
    }
    for key in &update.clear_env {
        if !platform.owns(key) {
            return Err(foreign(key));
        }
    }
    Ok(EnvChanges {
        sets,
        clears: update.clear_env.clone(),
    })
}

/// The refusal of enabling port-binding platform `id` on `home`'s profile while the default
/// profile's gateway multiplexes (module doc), `None` when the change may be made.
fn multiplex_conflict(app: &App, home: &Home, id: &str) -> Option<Box<Response>> {
    let profile = home.profile().name();
    if !topology::binds_a_port(id) || profile == hermes_home::DEFAULT_PROFILE {
        return None;
    }
    if !hermes_services::multiplex::resolve_asking_agent(&app.root, &*app.vars).on {
        return None;
    }
    Some(refuse(
        StatusCode::CONFLICT,
        &format!(
            "Cannot enable '{id}' on profile '{profile}': it binds its own listener port, and gateway.multiplex_profiles is on, so the default profile owns the single shared HTTP listener for every profile."
        ),
        Some("configure this channel on the default profile instead (disabling or clearing it here is still allowed)".into()),
    ))
}

/// `PUT /api/messaging/platforms/{id}` `{env?, clear_env?, enabled?, profile?}`: the original's
/// `{ok, platform}`, plus ours: `written` (whether a file changed) and `restart` — the service
/// whose restart applies it (the agent reads both files when it starts).
async fn update(
    State(app): State<App>,
    UrlPath(id): UrlPath<String>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let request: Update = body(raw)?;
        let home = home(&app, query, request.profile.as_deref())?;
        let catalogue = platforms(&app)?;
        let Some(platform) = catalogue.iter().find(|p| p.id == id) else {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                &format!("Unknown messaging platform: {id}"),
                Some("GET /api/messaging/platforms lists the agent's platforms".into()),
            ));
        };
        let EnvChanges { sets, clears } = checked_changes(platform, &request)?;
        if request.enabled == Some(true)
            && let Some(conflict) = multiplex_conflict(&app, &home, &platform.id)
        {
            return Err(conflict);
        }
        let mut written = false;
        if !sets.is_empty() || !clears.is_empty() {
            written |= DotEnv::edit(&home.env_path(), |env| {
                let before = env.render();
                for key in &clears {
                    env.unset(key);
                }
                for (key, value) in &sets {
                    env.set(key, value)?;
                }
                Ok(env.render() != before)
            })
            .map_err(|e| edit_problem(&e))?;
        }
        if let Some(enabled) = request.enabled {
            let change = Change::Set(
                format!("platforms.{}.enabled", platform.id),
                yaml_serde::Value::Bool(enabled),
            );
            written |= hermes_home::config_file::apply_in_file(&home.config_path(), &[change])
                .map_err(|e| edit_problem(&e))?;
        }
        let service = hermes_services::multiplex::serving_service(&home, &*app.vars);
        Ok(Json(json!({
            "ok": true,
            "platform": platform.id,
            "written": written,
            "restart": {
                "needed": written,
                "service": service,
                "why": "the agent's gateway reads .env and config.yaml when it starts: the restart stops the old agent first, connections made meanwhile wait",
            },
        }))
        .into_response())
    })
    .await
}

/// The page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let problem = json!({ "description": "{detail, hint}" });
    let unauthorized = json!({ "description": "No valid session token or credentials" });
    let mut errors = json!({ "400": problem, "401": unauthorized, "404": problem });
    errors["409"] = json!({ "description": "No agent is installed (the platforms are the agent's), or config.yaml does not parse: {detail, hint}" });
    errors["502"] =
        json!({ "description": "The agent could not list its platforms: {detail, hint}" });
    let mut put = responses(
        &errors,
        "{ok, platform, written, restart: {needed, service, why}}",
    );
    put["403"] = json!({ "description": "Missing or wrong X-Hermes-Session-Token" });
    put["409"] = json!({ "description": "Enabling a port-binding platform on a named profile while the default profile's gateway multiplexes, no agent installed, or config.yaml not editable: {detail, hint}; nothing written" });
    put["422"] = json!({ "description": "The body is not {env: {KEY: string}, clear_env: [KEY], enabled: bool, profile}" });
    let mut paths = json!({
        "/api/messaging/platforms": {
            "get": {
                "summary": "The original's Channels list: each platform the installed agent supports, with enabled, configured, gateway_running, state (disabled | not_configured | pending_restart | startup_failed | gateway_stopped | the gateway's word), error_code, error_message, updated_at and env_vars [{key, required, is_set, prompt, …}] — never a value",
                "parameters": [profile_param()],
                "responses": responses(&errors, "{env_path, gateway_start_command, profile, engine, gateway_service, platforms: [...]}"),
            },
        },
        "/api/messaging/platforms/{id}": {
            "put": {
                "summary": "The original's Channels write: set (env) or clear (clear_env) the platform's own variables in .env, and enable or disable it (platforms.<id>.enabled); a gateway restart applies it",
                "parameters": [
                    { "name": "id", "in": "path", "required": true, "schema": { "type": "string" } },
                    profile_param(),
                ],
                "responses": put,
            },
        },
    });
    if let (Some(all), Value::Object(more)) = (paths.as_object_mut(), pairing::api_paths()) {
        all.extend(more);
    }
    paths
}
