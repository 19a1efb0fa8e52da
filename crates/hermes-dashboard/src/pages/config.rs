//! The Config page: a profile's `config.yaml` — a form for the settings operators change most
//! ([`settings`]: each checked as the gateway reads it, with whether a change needs a restart)
//! and the whole text ([`raw`]: checked before it is saved, a concurrent change a conflict).
//! Both write through the byte-keeping editor's locked, atomic writes; a refusal writes
//! nothing. After a save that needs it the page offers the Overview's restart action.

mod check;
mod raw;
mod restart;
mod settings;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use hermes_home::Home;
use hermes_home::config::Config;
use hermes_home::yaml_edit::Change;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::openapi::{profile_param, responses};
use crate::pages::request::Step;
use crate::pages::request::{ProfileQuery, home};
use crate::pages::request::{body, edit_problem, run};
use crate::pages::{self, Page, shell};
use crate::server::{App, Base, blocking};

/// `/config` and its API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/config", get(page))
        .route("/api/config/raw", get(show_raw).put(save_raw))
        .route(
            "/api/config/settings",
            get(show_settings).put(save_settings),
        )
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    let root = app.root.clone();
    let options = blocking(move || pages::profile_options(&root))
        .await
        .unwrap_or_default();
    let main = format!(
        r#"<h2>Config</h2>
<form id="pick" class="toolbar"><label>Profile <select id="profile" name="profile">{options}</select></label> <span id="path" class="muted"></span></form>
<section id="settings-section">
<h3>Settings</h3>
<form id="settings-form"><table id="settings"><thead><tr><th>Setting</th><th>In config.yaml</th><th>In effect</th><th>From</th><th>Change</th></tr></thead><tbody></tbody></table>
<p><button type="submit" id="settings-save">Save settings</button> <span id="settings-result" class="muted"></span></p></form>
<ul id="settings-errors" class="errors"></ul>
</section>
<p id="restart" hidden><button type="button" id="restart-button">Restart gateway</button> <span id="restart-note" class="muted"></span></p>
<section id="text-section">
<h3>config.yaml</h3>
<form id="text-form"><textarea id="text" name="yaml_text" rows="24" cols="100" spellcheck="false"></textarea>
<p><button type="submit" id="text-save">Save</button> <button type="button" id="text-reload" hidden>Reload</button> <span id="text-result" class="muted"></span></p></form>
</section>"#
    );
    shell(Page::Config, &base.0, app.token(), &main)
}

/// The profile's `config.yaml`, parsed (a file that does not parse is a 409 naming its line).
fn load(home: &Home) -> Step<Config> {
    hermes_settings::config_of(home.dir()).map_err(|e| edit_problem(&e))
}

/// The form's view, or `null` while the file does not parse (a text save may be what fixes
/// it: every field then counts as changed).
fn view_if_readable(app: &App, home: &Home) -> Value {
    match load(home) {
        Ok(config) => settings::view(home, &config, &*app.vars),
        Err(_) => Value::Null,
    }
}

async fn show_raw(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let home = home(&app, query, None)?;
        Ok(Json(raw::show(&home)?).into_response())
    })
    .await
}

/// `PUT /api/config/raw`: the original's `{ok}` plus `written`, the new `version` and the
/// restart the change needs.
async fn save_raw(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    raw_body: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let update: raw::Update = body(raw_body)?;
        let home = home(&app, query, update.profile.as_deref())?;
        let before = view_if_readable(&app, &home);
        let (written, version) = raw::replace(&home, &update)?;
        let after = view_if_readable(&app, &home);
        let restart = restart::restart_advice(&home, &before, &after, &*app.vars);
        Ok(
            Json(json!({ "ok": true, "written": written, "version": version, "restart": restart }))
                .into_response(),
        )
    })
    .await
}

async fn show_settings(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let home = home(&app, query, None)?;
        let config = load(&home)?;
        Ok(Json(settings::view(&home, &config, &*app.vars)).into_response())
    })
    .await
}

#[derive(Deserialize)]
struct SettingsUpdate {
    settings: Map<String, Value>,
    #[serde(default)]
    profile: Option<String>,
}

/// `PUT /api/config/settings` `{settings: {field: value}, profile?}`: every field checked
/// first (one refusal writes nothing: 422 with each field's reason and hint), then one locked
/// edit of the keys that change.
async fn save_settings(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    raw_body: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let update: SettingsUpdate = body(raw_body)?;
        let home = home(&app, query, update.profile.as_deref())?;
        let config = load(&home)?;
        let before = settings::view(&home, &config, &*app.vars);
        let edits = check::changes(&home, &config, &update.settings, &*app.vars)
            .map_err(|errors| {
                Box::new(
                    (
                        StatusCode::UNPROCESSABLE_ENTITY,
                        Json(json!({
                            "detail": errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; "),
                            "hint": errors.first().map(|e| e.hint.clone()),
                            "errors": errors,
                        })),
                    )
                        .into_response(),
                )
            })?;
        let written = write(&home, edits).map_err(|e| edit_problem(&e))?;
        let config = load(&home)?;
        let after = settings::view(&home, &config, &*app.vars);
        let restart = restart::restart_advice(&home, &before, &after, &*app.vars);
        let (_, version) = raw::read(&home)?;
        Ok(Json(json!({
            "ok": true, "written": written, "version": version, "restart": restart, "settings": after,
        }))
        .into_response())
    })
    .await
}

/// Makes `edits` in one `Config::edit` (locked, every other byte kept; a key removed takes
/// the mappings it leaves empty with it); whether the file changed.
fn write(home: &Home, edits: Vec<Change>) -> Result<bool, hermes_home::Error> {
    Config::edit(&home.config_path(), |config| {
        let before = config.document().clone();
        for edit in edits {
            match edit {
                Change::Set(key, value) => config.set(&key, value),
                Change::Remove(key) => {
                    config.unset(&key);
                }
            }
        }
        Ok(*config.document() != before)
    })
}

/// The page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let problem = json!({ "description": "{detail, hint}" });
    let unauthorized = json!({ "description": "No valid session token or credentials" });
    let errors = json!({ "400": problem, "401": unauthorized, "404": problem });
    let restart = "restart: {needed, service, uninterrupted, why, changed: [field]}";
    let mut put_raw = responses(
        &errors,
        &format!("{{ok: true, written, version, {restart}}}"),
    );
    put_raw["400"] = json!({ "description": "The text does not parse ({detail, hint, line, column}) or is not a mapping; the file is untouched" });
    put_raw["403"] = json!({ "description": "Missing or wrong X-Hermes-Session-Token" });
    put_raw["409"] = json!({ "description": "config.yaml changed since `version` was read: {detail, hint, version}; the file is untouched" });
    let mut put_settings = responses(
        &errors,
        &format!("{{ok: true, written, version, {restart}, settings}}"),
    );
    put_settings["403"] = put_raw["403"].clone();
    put_settings["409"] = json!({ "description": "config.yaml does not parse, or a change the byte-keeping editor cannot make: {detail, hint}" });
    put_settings["422"] = json!({ "description": "{detail, hint, errors: [{field, message, hint}]}; nothing written" });
    json!({
        "/api/config/raw": {
            "get": {
                "summary": "The original's raw config: config.yaml's text, its path, and (ours) its version (SHA-256 hex)",
                "parameters": [profile_param()],
                "responses": responses(&errors, "{yaml, path, version, profile}"),
            },
            "put": {
                "summary": "Replace config.yaml with {yaml_text, profile?, version?}: parsed first; with `version`, only if the file is still that text",
                "parameters": [profile_param()],
                "requestBody": { "content": { "application/json": { "schema": { "type": "object", "required": ["yaml_text"], "properties": { "yaml_text": { "type": "string" }, "profile": { "type": "string" }, "version": { "type": "string" } } } } } },
                "responses": put_raw,
            },
        },
        "/api/config/settings": {
            "get": {
                "summary": "The form's settings: each field's value in config.yaml, the value in effect, where it comes from, whether a change needs a gateway restart",
                "parameters": [profile_param()],
                "responses": responses(&errors, "{profile, engine, fields: [{name, label, key, value, effective, source, restart, editable, note}]}"),
            },
            "put": {
                "summary": "Change settings {settings: {model, provider, base_url, memory_provider, engine, multiplex, api_server, api_port, memory_max}, profile?}: each checked as the gateway reads it; every other byte kept",
                "parameters": [profile_param()],
                "requestBody": { "content": { "application/json": { "schema": { "type": "object", "required": ["settings"], "properties": { "settings": { "type": "object" }, "profile": { "type": "string" } } } } } },
                "responses": put_settings,
            },
        },
    })
}
