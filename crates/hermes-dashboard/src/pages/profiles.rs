//! The Profiles page: list, create (with clone) and delete profiles (to the trash, with a
//! confirmation), edit `SOUL.md`, the model settings (`model.default`, `model.provider`,
//! `model.base_url`) and `.env` keys (values masked, revealed one at a time on request).
//!
//! A client like `hermes profile …`: creating, listing and deleting go through
//! `hermes_home::profile`; names through `ProfileName` / `ProfileRef`; `.env` through
//! `DotEnv::edit` (comments and unknown lines kept); `config.yaml` through
//! `hermes_home::yaml_edit` (every other byte kept); the gateway's own settings check
//! (`hermes_gateway_settings::read`) says what a gateway would make of the result.
//! The supervisor learns about a new profile's gateway, or forgets a deleted one, over the
//! control socket as the CLI does; without a supervisor that happens at its next start.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Extension, Json, Router};
use hermes_home::dotenv::{self, DotEnv};
use hermes_home::layout::read_active_profile;
use hermes_home::profile::{self, CreateOptions, Disposal};
use hermes_home::{Home, ProfileName, ProfileRef};
use hermes_services::profile::GatewayRemoval;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::model_settings;
use crate::pages::original_api::env::unset_env_key;
use crate::pages::request::{BODY_LIMIT, body, edit_problem, run};
use crate::pages::request::{Step, refuse, select_home};
use crate::pages::{Page, original_api, shell};
use crate::server::{App, Base, Vars};
use crate::status::{CLIENT_TIMEOUT, reachability, supervisor_rows};

/// The largest `SOUL.md` the page saves. The gateway sends at most its context-file limit
/// (20 000 to 500 000 characters, see `hermes_gateway_settings::prompt`); a file far beyond the
/// largest limit is a mistake, not a persona.
pub const SOUL_MAX_BYTES: usize = 1 << 20;

/// Reveals of `.env` values allowed per [`REVEAL_WINDOW`] and home, as the original's
/// `/api/env/reveal` allows (5 per 30 s): a stolen session cannot read every key at once.
pub const REVEALS_PER_WINDOW: usize = 5;
/// See [`REVEALS_PER_WINDOW`].
const REVEAL_WINDOW: Duration = Duration::from_secs(30);

/// Recent reveal times per `HERMES_HOME`.
static REVEALS: Mutex<BTreeMap<PathBuf, VecDeque<Instant>>> = Mutex::new(BTreeMap::new());

/// The largest request body the page's API reads (a `SOUL.md` escaped as JSON can double).
// A `SOUL.md` of the most this page takes fits the body limit of every page, escaped.
const _: () = assert!(BODY_LIMIT >= 3 * SOUL_MAX_BYTES);

const MAIN: &str = r#"<h2>Profiles</h2>
<section id="profiles-list">
<table id="profiles"><thead><tr><th>Name</th><th>Active</th><th>Gateway</th><th>Model</th><th>Description</th></tr></thead><tbody></tbody></table>
<p id="profiles-supervisor" class="muted"></p>
</section>
<section id="profile-create">
<h3>New profile</h3>
<form id="create-form">
<label>Name <input name="name" id="create-name" required pattern="[a-z0-9][a-z0-9_-]{0,63}" autocomplete="off"></label>
<label>Clone from <select name="clone_from" id="create-clone"><option value="">(nothing: fresh files)</option></select></label>
<button type="submit">Create</button>
</form>
<p class="muted">Cloning copies <code>config.yaml</code>, <code>.env</code>, <code>SOUL.md</code>, skills and memories. Each profile also has a gateway service, <code>gateway-&lt;name&gt;</code>: a running supervisor registers it at once (down until started from the Overview); without one it is registered when <code>hermes up</code> or the container starts.</p>
<p id="create-result" class="muted"></p>
</section>
<section id="profile-panel" hidden>
<h3 id="panel-title"></h3>
<p id="panel-path" class="muted"></p>
<h4>SOUL.md</h4>
<form id="soul-form">
<textarea id="soul-text" name="soul" rows="8" spellcheck="false"></textarea>
<p id="soul-limit" class="muted"></p>
<button type="submit" id="soul-save">Save</button> <span id="soul-result" class="muted"></span>
</form>
<h4>Model</h4>
<form id="model-form">
<label>Model <input name="default" id="model-default" autocomplete="off"></label>
<label>Provider <input name="provider" id="model-provider" list="providers" autocomplete="off"></label>
<datalist id="providers"></datalist>
<label>Base URL <input name="base_url" id="model-base-url" autocomplete="off"></label>
<button type="submit">Save model</button>
</form>
<ul id="model-errors" class="errors"></ul>
<p id="model-check" class="muted"></p>
<h4>.env</h4>
<table id="env"><thead><tr><th>Key</th><th>Value</th><th></th></tr></thead><tbody></tbody></table>
<form id="env-form">
<label>Key <input name="key" id="env-key" autocomplete="off"></label>
<label>Value <input name="value" id="env-value" type="password" autocomplete="off"></label>
<button type="submit">Set</button>
</form>
<h4>Delete</h4>
<form id="delete-form">
<p id="delete-note" class="muted"></p>
<label>Type the profile's name to confirm <input name="confirm" id="delete-confirm" autocomplete="off"></label>
<button type="submit" id="delete-button" class="danger">Delete profile</button>
</form>
</section>"#;

/// `/profiles` and its API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/profiles", get(page))
        .route("/api/profiles", get(list).post(create))
        .route("/api/profiles/{name}", get(show).delete(remove))
        .route("/api/profiles/{name}/soul", put(save_soul))
        .route("/api/profiles/{name}/model", put(save_model))
        .route("/api/profiles/{name}/env", put(set_env))
        .route("/api/profiles/{name}/env/{key}", delete(unset_env))
        .route("/api/profiles/{name}/env/{key}/reveal", post(reveal_env))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    shell(Page::Profiles, &base.0, app.token(), MAIN)
}

/// `GET /api/profiles`: every profile with whether it is active, its gateway's state as
/// the supervisor says it (when one answers) and its model.
async fn list(State(app): State<App>) -> Response {
    run(move || {
        let root = app.root.clone();
        let entries = profile::list(&root).map_err(|e| edit_problem(&e))?;
        let active = read_active_profile(&root).unwrap_or(ProfileRef::Default);
        let (states, supervisor) = gateway_states(&root, &app.vars);
        let rows: Vec<Value> = entries
            .iter()
            .map(|entry| {
                let name = entry.profile.name();
                let service = hermes_services::gateway::service_name(name);
                let (model, config_error) = model_name(&entry.dir, name);
                let gateway = states.as_ref().map(|s| {
                    s.iter()
                        .find(|(n, _)| *n == service)
                        .map(|(_, st)| st.clone())
                });
                let is_default = entry.profile == ProfileRef::Default;
                let mut row = json!({
                    "name": name,
                    "default": is_default,
                    "active": entry.profile == active,
                    "dir": entry.dir,
                    "description": entry.description,
                    "model": model,
                    "config_error": config_error,
                    "service": service,
                    "gateway": gateway,
                });
                let state = gateway.as_ref().and_then(|g| g.as_deref());
                if let Value::Object(map) = &mut row {
                    map.extend(original_api::profiles::row(&entry.dir, is_default, state));
                }
                row
            })
            .collect();
        Ok(Json(json!({ "profiles": rows, "supervisor": supervisor })).into_response())
    })
    .await
}

/// Each service's state from the supervisor (`None` when none answers), and what to say
/// about the supervisor.
fn gateway_states(root: &Path, vars: &Vars) -> (Option<Vec<(String, String)>>, Value) {
    let rows = supervisor_rows(root, &**vars);
    let states = rows.as_ref().ok().map(|rows| {
        rows.iter()
            .map(|r| (r.name.clone(), state_word(r)))
            .collect()
    });
    (states, reachability(&rows))
}

/// A service's state as the supervisor words it (`up`, `down`, …).
fn state_word(status: &hermes_supervisor::ServiceStatus) -> String {
    match serde_json::to_value(status.state) {
        Ok(Value::String(word)) => word,
        _ => "unknown".into(),
    }
}

/// The profile's model name, or why its files cannot be read (as `hermes profile list`).
fn model_name(dir: &Path, name: &str) -> (Option<String>, Option<String>) {
    match hermes_settings::model_name(dir, name) {
        Ok(model) => (model, None),
        Err(e) => (None, Some(hermes_errors::one_line(&e))),
    }
}

#[derive(Deserialize)]
struct CreateBody {
    name: String,
    #[serde(default)]
    clone_from: Option<String>,
    #[serde(default)]
    description: Option<String>,
    /// The original's older clients: clone from `default`.
    #[serde(default)]
    clone_from_default: bool,
    /// The original's full copy (ours always copies everything it clones).
    #[serde(default)]
    clone_all: bool,
}

/// `POST /api/profiles` `{name, clone_from?, description?}`: creates the profile
/// (`hermes profile create`), then registers its gateway with a running supervisor.
async fn create(State(app): State<App>, raw: Result<Bytes, BytesRejection>) -> Response {
    let request: CreateBody = match body(raw) {
        Ok(b) => b,
        Err(answer) => return *answer,
    };
    run(move || {
        let root = app.root.clone();
        let name = ProfileName::parse(request.name.trim()).map_err(|e| edit_problem(&e))?;
        let clone_from = original_api::profiles::clone_source(
            request.clone_from.as_deref(),
            request.clone_from_default,
            request.clone_all,
        )
        .as_deref()
        .map(ProfileRef::parse)
        .transpose()
        .map_err(|e| edit_problem(&e))?;
        let description = request
            .description
            .map(|d| d.trim().to_string())
            .filter(|d| !d.is_empty());
        let dir = profile::create(
            &root,
            &name,
            &CreateOptions {
                clone_from: clone_from.clone(),
                description,
            },
        )
        .map_err(|e| edit_problem(&e))?;
        let supervisor = register_gateway(&root, &name, &app.vars);
        let mut answer = json!({
            "name": name.as_str(),
            "dir": dir,
            "cloned_from": clone_from.as_ref().map(ProfileRef::name),
            "service": hermes_services::gateway::service_name(name.as_str()),
            "supervisor": supervisor,
        });
        if let Value::Object(map) = &mut answer {
            map.extend(original_api::profiles::created(&dir));
        }
        Ok((StatusCode::CREATED, Json(answer)).into_response())
    })
    .await
}

/// Registers the new profile's gateway with a running supervisor (down until started), as
/// `hermes profile create` does; says what happened, since the profile exists either way.
fn register_gateway(root: &Path, name: &ProfileName, vars: &Vars) -> String {
    use hermes_services::gateway::{Registration, register_new_gateway};
    let service = hermes_services::gateway::service_name(name.as_str());
    let home = match Home::for_profile(root.to_path_buf(), ProfileRef::Named(name.clone())) {
        Ok(home) => home,
        Err(e) => return hermes_errors::one_line(&e),
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("hermes"));
    let mut warnings = Vec::new();
    let registration = register_new_gateway(&home, &**vars, &exe, CLIENT_TIMEOUT, &mut warnings);
    let warnings = String::from_utf8_lossy(&warnings).trim().to_string();
    let said = match registration {
        Registration::Registered | Registration::Known => format!(
            "Registered `{service}` with the supervisor: it is down until started (Overview, or `hermes -p {name} gateway start`)"
        ),
        Registration::NoSupervisor => format!(
            "No supervisor is running: `{service}` is registered when `hermes up` (or the container) starts"
        ),
        Registration::Failed(e) => format!(
            "Could not register `{service}` with the supervisor: {}",
            hermes_errors::one_line(&e)
        ),
    };
    if warnings.is_empty() {
        said
    } else {
        format!("{said} ({warnings})")
    }
}

#[derive(Deserialize)]
struct DeleteBody {
    confirm: String,
}

/// `DELETE /api/profiles/{name}` `{confirm: name}`: moves the profile to
/// `profiles/.trash/` (`hermes profile delete`), after the supervisor stopped and forgot its
/// gateway. The confirmation must repeat the name; the default profile is never deleted.
async fn remove(
    State(app): State<App>,
    UrlPath(name): UrlPath<String>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let root = app.root.clone();
        let profile = ProfileRef::parse(&name).map_err(|e| edit_problem(&e))?;
        if profile == ProfileRef::Default {
            return Err(edit_problem(&hermes_home::Error::DefaultProfileUndeletable));
        }
        let home = select_home(&root, Some(&name))?;
        let request: DeleteBody = body(raw)?;
        if request.confirm != name {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!("deleting profile `{name}` needs its name as confirmation"),
                Some(format!("send {{\"confirm\": \"{name}\"}}")),
            ));
        }
        // The one rule (`hermes_services::profile`): the supervisor stops and forgets the
        // gateway before its files move; one that runs but cannot be asked keeps the profile.
        let deleted = hermes_services::profile::delete(
            &root,
            home.profile(),
            Disposal::Trash,
            &*app.vars,
            CLIENT_TIMEOUT,
        )
        .map_err(|e| delete_problem(&e))?;
        let service = &deleted.service;
        let supervisor = match deleted.gateway {
            GatewayRemoval::Unregistered => {
                format!("`{service}` was stopped and removed from the supervisor")
            }
            GatewayRemoval::NoSupervisor => {
                format!("No supervisor is running: `{service}` is not started again")
            }
        };
        let (trashed_to, active_reset, alias_removed) = (
            deleted.trashed_to,
            deleted.active_reset,
            deleted.alias_removed,
        );
        Ok(Json(json!({
            // The original's `ok` and `path` (the directory the profile was in).
            "ok": true,
            "path": home.dir(),
            "deleted": name,
            "trashed_to": trashed_to,
            "active_reset": active_reset,
            "alias_removed": alias_removed,
            "supervisor": supervisor,
        }))
        .into_response())
    })
    .await
}

/// A refused delete as an answer: 409 when the supervisor refused to remove the gateway, 503
/// when it runs but could not be asked (its gateway may be writing into the profile).
fn delete_problem(e: &hermes_services::Error) -> Box<Response> {
    use hermes_services::Error as E;
    let status = match e {
        E::Home(home) => return edit_problem(home),
        E::GatewayNotRemoved { .. } => StatusCode::CONFLICT,
        E::SupervisorUnanswered { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    refuse(status, &hermes_errors::one_line(e), e.hint())
}

/// `GET /api/profiles/{name}`: `SOUL.md` with the limits, the model settings, the gateway's
/// check of them, and the `.env` keys with masked values.
async fn show(State(app): State<App>, UrlPath(name): UrlPath<String>) -> Response {
    run(move || {
        let home = select_home(&app.root, Some(&name))?;
        let active = read_active_profile(&app.root).unwrap_or(ProfileRef::Default);
        let soul = soul_text(&home);
        let env = env_rows(&home)?;
        Ok(Json(json!({
            "name": home.profile().name(),
            "default": *home.profile() == ProfileRef::Default,
            "active": *home.profile() == active,
            "dir": home.dir(),
            "service": hermes_services::gateway::service_name(home.profile().name()),
            "soul": soul,
            "model": model_settings::current(&home),
            "providers": model_settings::provider_names(),
            "gateway_check": model_settings::gateway_check(&home),
            "env": env,
        }))
        .into_response())
    })
    .await
}

/// Why `SOUL.md` cannot be shown (so it is not overwritten unseen either).
struct Unreadable {
    status: StatusCode,
    detail: String,
    hint: Option<String>,
}

/// `SOUL.md`'s text (empty when missing).
fn read_soul(home: &Home) -> Result<String, Unreadable> {
    let path = home.soul_path();
    match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|_| Unreadable {
            status: StatusCode::CONFLICT,
            detail: format!("`{}` is not valid UTF-8", path.display()),
            hint: Some("fix it by hand; the page does not replace a file it cannot show".into()),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(Unreadable {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            detail: format!("cannot read `{}`: {e}", path.display()),
            hint: None,
        }),
    }
}

/// `SOUL.md`'s text and the limits that apply to it, or why it cannot be shown (the rest of
/// the panel still is).
fn soul_text(home: &Home) -> Value {
    let limits = json!({
        "max_bytes": SOUL_MAX_BYTES,
        "gateway_chars": model_settings::gateway_soul_limit(home),
    });
    let mut value = match read_soul(home) {
        Ok(text) => json!({ "chars": text.chars().count(), "text": text }),
        Err(e) => json!({ "text": null, "error": e.detail, "hint": e.hint }),
    };
    if let (Some(map), Value::Object(limits)) = (value.as_object_mut(), limits) {
        map.extend(limits);
    }
    value
}

#[derive(Deserialize)]
struct SoulBody {
    text: String,
}

/// `PUT /api/profiles/{name}/soul` `{text}`: replaces `SOUL.md` atomically, keeping its mode.
async fn save_soul(
    State(app): State<App>,
    UrlPath(name): UrlPath<String>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let home = select_home(&app.root, Some(&name))?;
        let request: SoulBody = body(raw)?;
        let bytes = request.text.len();
        if bytes > SOUL_MAX_BYTES {
            return Err(refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!(
                    "SOUL.md would be {bytes} bytes; the dashboard saves at most {SOUL_MAX_BYTES}"
                ),
                Some(format!(
                    "shorten it: the gateway sends at most {} characters of it anyway",
                    model_settings::gateway_soul_limit(&home)
                )),
            ));
        }
        if let Err(e) = read_soul(&home) {
            return Err(refuse(e.status, &e.detail, e.hint));
        }
        // A new file gets the seed's mode; an existing one keeps its own.
        hermes_home::atomic::write_atomic(&home.soul_path(), request.text.as_bytes(), 0o644)
            .map_err(|e| edit_problem(&e))?;
        let chars = request.text.chars().count();
        let limit = model_settings::gateway_soul_limit(&home);
        Ok(Json(json!({
            "saved": true,
            "bytes": bytes,
            "chars": chars,
            "gateway_chars": limit,
            "cut_by_gateway": chars > limit,
        }))
        .into_response())
    })
    .await
}

/// `PUT /api/profiles/{name}/model` `{default, provider, base_url}`: checks the values as
/// the gateway would, writes only the keys that change (every other byte of `config.yaml`
/// kept), then reports the gateway's check of the result.
async fn save_model(
    State(app): State<App>,
    UrlPath(name): UrlPath<String>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let home = select_home(&app.root, Some(&name))?;
        let request: model_settings::ModelBody = body(raw)?;
        let changes = model_settings::validate(&home, &request).map_err(|errors| {
            Box::new((
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(json!({
                    "detail": errors.iter().map(|e| e.message.clone()).collect::<Vec<_>>().join("; "),
                    "hint": "correct the fields and save again; nothing was written",
                    "errors": errors,
                })),
            )
                .into_response())
        })?;
        let changes = model_settings::effective_changes(&home, changes).map_err(|e| edit_problem(&e))?;
        let pairs: Vec<(&str, &str)> = changes
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let written = hermes_home::config_file::set_in_file(&home.config_path(), &pairs)
            .map_err(|e| edit_problem(&e))?;
        Ok(Json(json!({
            "written": written,
            "model": model_settings::current(&home),
            "gateway_check": model_settings::gateway_check(&home),
        }))
        .into_response())
    })
    .await
}

/// The `.env` keys in file order (the last assignment of each), values masked as
/// `hermes auth list` masks keys.
fn env_rows(home: &Home) -> Step<Value> {
    let env = DotEnv::load(&home.env_path()).map_err(|e| edit_problem(&e))?;
    let mut keys: Vec<&str> = Vec::new();
    for (key, _) in env.vars() {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let rows: Vec<Value> = keys
        .iter()
        .map(|key| {
            let value = env.get(key).unwrap_or_default();
            // A secret by its name (`*_KEY`, `*_TOKEN`, `*SECRET*`, `*PASSWORD*`) is shown
            // masked, revealed on request; a port or a switch as it is.
            let secret = hermes_settings::is_secret(key);
            let shown = if secret {
                hermes_home::auth::mask_secret(value)
            } else {
                value.to_owned()
            };
            json!({
                "key": key,
                "masked": shown,
                "secret": secret,
                "empty": dotenv::nonblank(value).is_none(),
            })
        })
        .collect();
    Ok(json!({ "keys": rows, "unparsed_lines": env.unparsed_lines() }))
}

#[derive(Deserialize)]
struct EnvBody {
    key: String,
    value: String,
}

/// `PUT /api/profiles/{name}/env` `{key, value}`: sets one key (`DotEnv::edit`: comments,
/// order and other lines kept; invalid and denied names refused).
async fn set_env(
    State(app): State<App>,
    UrlPath(name): UrlPath<String>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let home = select_home(&app.root, Some(&name))?;
        let request: EnvBody = body(raw)?;
        let key = request.key.trim().to_string();
        dotenv::validate_key(&key).map_err(|e| edit_problem(&e))?;
        DotEnv::edit(&home.env_path(), |env| env.set(&key, &request.value))
            .map_err(|e| edit_problem(&e))?;
        Ok(Json(json!({ "set": key, "env": env_rows(&home)? })).into_response())
    })
    .await
}

/// `DELETE /api/profiles/{name}/env/{key}`: removes every assignment of the key.
async fn unset_env(
    State(app): State<App>,
    UrlPath((name, key)): UrlPath<(String, String)>,
) -> Response {
    run(move || {
        let home = select_home(&app.root, Some(&name))?;
        if !unset_env_key(&home, &key)? {
            return Err(refuse(
                StatusCode::NOT_FOUND,
                &format!("`{key}` is not set in this profile's .env"),
                None,
            ));
        }
        Ok(Json(json!({ "unset": key, "env": env_rows(&home)? })).into_response())
    })
    .await
}

/// `POST /api/profiles/{name}/env/{key}/reveal`: one value in clear, only on this explicit
/// request (a POST, so the session token is required like any change), at most
/// [`REVEALS_PER_WINDOW`] per 30 s.
async fn reveal_env(
    State(app): State<App>,
    UrlPath((name, key)): UrlPath<(String, String)>,
) -> Response {
    run(move || {
        let home = select_home(&app.root, Some(&name))?;
        if !reveal_allowed(&app.root) {
            return Err(refuse(
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "more than {REVEALS_PER_WINDOW} values revealed in {} s",
                    REVEAL_WINDOW.as_secs()
                ),
                Some("wait a moment and reveal again".into()),
            ));
        }
        let env = DotEnv::load(&home.env_path()).map_err(|e| edit_problem(&e))?;
        match env.get(&key) {
            Some(value) => Ok(Json(json!({ "key": key, "value": value })).into_response()),
            None => Err(refuse(
                StatusCode::NOT_FOUND,
                &format!("`{key}` is not set in this profile's .env"),
                None,
            )),
        }
    })
    .await
}

/// Counts one reveal for `root`; false when the window's allowance is used up.
fn reveal_allowed(root: &Path) -> bool {
    let now = Instant::now();
    let mut reveals = REVEALS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let recent = reveals.entry(root.to_path_buf()).or_default();
    while recent
        .front()
        .is_some_and(|t| now.duration_since(*t) >= REVEAL_WINDOW)
    {
        recent.pop_front();
    }
    if recent.len() >= REVEALS_PER_WINDOW {
        return false;
    }
    recent.push_back(now);
    true
}

/// This page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let problem = json!({ "description": "{detail, hint}" });
    let name =
        json!([{ "name": "name", "in": "path", "required": true, "schema": { "type": "string" } }]);
    let name_key = json!([
        { "name": "name", "in": "path", "required": true, "schema": { "type": "string" } },
        { "name": "key", "in": "path", "required": true, "schema": { "type": "string" } },
    ]);
    json!({
        "/api/profiles": {
            "get": {
                "summary": "Every profile: name, default, active, gateway state (when the supervisor answers), model",
                "responses": { "200": { "description": "{profiles: [{name, default, active, dir, description, model, config_error, service, gateway, and the original's path, is_default, provider, has_env, gateway_running, description_auto}], supervisor: {reachable, error?, hint?}}" } },
            },
            "post": {
                "summary": "Create a profile, optionally cloned from another; its gateway is registered with a running supervisor",
                "requestBody": { "content": { "application/json": { "schema": { "type": "object", "required": ["name"], "properties": { "name": { "type": "string" }, "clone_from": { "type": "string" }, "description": { "type": "string" }, "clone_from_default": { "type": "boolean", "description": "the original's: clone from default" }, "clone_all": { "type": "boolean", "description": "the original's: clone from default (everything is copied)" } } } } } },
                "responses": { "201": { "description": "{name, dir, cloned_from, service, supervisor, and the original's ok, path, model_set, mcp_written, skills_disabled, hub_installs}" }, "400": problem, "404": problem, "409": problem },
            },
        },
        "/api/profiles/{name}": {
            "get": {
                "summary": "SOUL.md with its limits, model settings with the gateway's check, .env keys (values masked)",
                "parameters": name,
                "responses": { "200": { "description": "{name, default, active, dir, service, soul: {text, chars, max_bytes, gateway_chars}, model: {default, provider, base_url}, providers, gateway_check: {ok, detail?, hint?}, env: {keys: [{key, masked, empty}], unparsed_lines}}" }, "400": problem, "404": problem },
            },
            "delete": {
                "summary": "Move the profile to profiles/.trash/ (its gateway is stopped and unregistered first); the default profile cannot be deleted",
                "parameters": name,
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["confirm"], "properties": { "confirm": { "type": "string", "description": "the profile's name, repeated" } } } } } },
                "responses": { "200": { "description": "{ok, path, deleted, trashed_to, active_reset, alias_removed, supervisor}" }, "400": problem, "404": problem, "409": problem },
            },
        },
        "/api/profiles/{name}/soul": { "put": {
            "summary": "Replace SOUL.md (atomic, mode kept, at most 1 MiB)",
            "parameters": name,
            "requestBody": { "content": { "application/json": { "schema": { "type": "object", "required": ["text"], "properties": { "text": { "type": "string" } } } } } },
            "responses": { "200": { "description": "{saved, bytes, chars, gateway_chars, cut_by_gateway}" }, "413": problem },
        }},
        "/api/profiles/{name}/model": { "put": {
            "summary": "Set model.default, model.provider, model.base_url; every other byte of config.yaml kept",
            "parameters": name,
            "requestBody": { "content": { "application/json": { "schema": { "type": "object", "properties": { "default": { "type": "string" }, "provider": { "type": "string" }, "base_url": { "type": "string" } } } } } },
            "responses": { "200": { "description": "{written, model, gateway_check}" }, "409": problem, "422": { "description": "{detail, hint, errors: [{field, message}]}" } },
        }},
        "/api/profiles/{name}/env": { "put": {
            "summary": "Set one .env key (comments and other lines kept)",
            "parameters": name,
            "requestBody": { "content": { "application/json": { "schema": { "type": "object", "required": ["key", "value"], "properties": { "key": { "type": "string" }, "value": { "type": "string" } } } } } },
            "responses": { "200": { "description": "{set, env}" }, "400": problem },
        }},
        "/api/profiles/{name}/env/{key}": { "delete": {
            "summary": "Remove a .env key",
            "parameters": name_key,
            "responses": { "200": { "description": "{unset, env}" }, "400": problem, "404": problem },
        }},
        "/api/profiles/{name}/env/{key}/reveal": { "post": {
            "summary": "One .env value in clear, on explicit request",
            "parameters": name_key,
            "responses": { "200": { "description": "{key, value}" }, "404": problem, "429": problem },
        }},
    })
}
