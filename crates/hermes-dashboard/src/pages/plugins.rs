//! The Plugins page: memory providers with their availability, installing their pip
//! dependencies through the installer (one result row per step, the blocked reason when the
//! image is sealed and no target is set, availability checked afresh afterwards) and
//! activating one for a profile.
//!
//! A client like the CLI: the same `hermes-plugins` functions `hermes plugins list`,
//! `hermes memory status` and `hermes memory setup` call, with the installer's options built
//! from the profile by the same function ([`hermes_plugins::profile::install_options`]), so a
//! refusal here is the CLI's refusal. Installs go to the root's venv or durable target, shared
//! by every profile, so one install runs at a time per dashboard: another request meanwhile
//! gets 409.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use hermes_deps::env::{DISABLE_VAR, PYTHON_VAR, TARGET_VAR, VENV_VAR};
use hermes_deps::{Environment, InstallOptions, InstallOutcome, Route};
use hermes_home::Home;
use hermes_plugins::{PluginStatus, profile};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::openapi::{profile_param, responses};
use crate::pages::request;
use crate::pages::request::{Step, home_problem, refuse, select_home};
use crate::pages::{Page, shell};
use crate::server::{App, Base, Vars, blocking, problem};

const MAIN: &str = r#"<h2>Plugins</h2>
<p class="muted">Memory providers: their pip dependencies are installed through the installer (the rules of <code>hermes memory setup</code>); activating one sets <code>memory.provider</code> in the profile's <code>config.yaml</code>.</p>
<p><label>Profile <select id="profile"></select></label></p>
<p id="installs" class="installs"></p>
<table id="plugins"><thead><tr><th>Provider</th><th>State</th><th>Missing</th><th>Install</th><th>Activate</th></tr></thead><tbody id="rows"></tbody></table>
<section id="result" hidden><h3 id="result-title"></h3>
<table><thead><tr><th>Step</th><th>Result</th><th>Detail</th></tr></thead><tbody id="steps"></tbody></table></section>"#;

/// The longest plugin name looked up (manifest names are far shorter): longer is a 404
/// without a lookup.
const MAX_NAME: usize = 128;

/// Held while an install (or an activation, which may install) runs.
#[derive(Clone, Default)]
struct Busy(Arc<AtomicBool>);

/// Frees [`Busy`] when the work ends: dropped by the blocking task, so a client that goes
/// away does not free it while the installer still runs.
struct BusyGuard(Arc<AtomicBool>);

impl Busy {
    fn take(&self) -> Option<BusyGuard> {
        self.0
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| BusyGuard(self.0.clone()))
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// `/plugins` and its API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/plugins", get(page))
        .route("/api/plugins", get(list))
        .route("/api/plugins/{name}/install", post(install))
        .route("/api/plugins/{name}/activate", post(activate))
        // One lock per dashboard (this router is built once per dashboard).
        .layer(Extension(Busy::default()))
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    shell(Page::Plugins, &base.0, app.token(), MAIN)
}

/// `?profile=P` (absent: the sticky active profile, as the CLI without `-p`).
#[derive(Deserialize)]
struct ProfileQuery {
    profile: Option<String>,
}

fn profile_of(query: Result<Query<ProfileQuery>, QueryRejection>) -> Step<Option<String>> {
    request::query(query, "profile").map(|q: ProfileQuery| q.profile)
}

fn name_of(path: Result<Path<String>, PathRejection>) -> Step<String> {
    match path {
        Ok(Path(name)) if name.len() <= MAX_NAME => Ok(name),
        _ => Err(unknown("that name")),
    }
}

fn unknown(name: &str) -> Box<Response> {
    refuse(
        StatusCode::NOT_FOUND,
        &format!("memory provider `{name}` not found"),
        Some("the Plugins page lists the memory providers".into()),
    )
}

/// What a request works on: the profile's home, its installer options, the plugins.
struct Ctx {
    home: Home,
    options: InstallOptions,
    discovery: hermes_plugins::Discovery,
}

impl Ctx {
    fn open(app: &App, profile: Option<&str>) -> Step<Ctx> {
        let home = select_home(&app.root, profile)?;
        let mut options = profile::install_options(&home, environment(&app.vars))
            .map_err(|e| home_problem(&e))?;
        options.requested_by = hermes_deps::Requester::Dashboard;
        let discovery = profile::discover_for(&home);
        Ok(Ctx {
            home,
            options,
            discovery,
        })
    }
}

/// The installer's environment: the process's (`PATH`, pip's and uv's own settings), with the
/// installer's own words (sealed, durable target, core venv, base Python) as the dashboard's
/// environment says them. In production both are the process environment; the lookup lets a
/// test decide them without changing the process.
fn environment(vars: &Vars) -> Environment {
    [DISABLE_VAR, TARGET_VAR, VENV_VAR, PYTHON_VAR]
        .into_iter()
        .fold(Environment::from_process(), |env, key| match vars(key) {
            Some(value) => env.with(key, &value),
            None => env.without(key),
        })
}

fn plugin_problem(e: &hermes_plugins::Error) -> Box<Response> {
    let status = match e {
        hermes_plugins::Error::UnknownProvider { .. } => StatusCode::NOT_FOUND,
        hermes_plugins::Error::NotAMemoryProvider { .. }
        | hermes_plugins::Error::InvalidValue { .. } => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    refuse(status, &hermes_errors::one_line(e), e.hint())
}

fn busy() -> Response {
    problem(
        StatusCode::CONFLICT,
        "an install is already running",
        Some("wait for it to finish, then try again".into()),
    )
}

/// Where installs go from this profile, or why they cannot.
fn installs(options: &InstallOptions) -> Value {
    match options.route() {
        Route::Blocked(reason) => json!({
            "possible": false, "reason": reason.to_string(), "hint": reason.hint(),
        }),
        Route::Venv { venv, .. } => json!({ "possible": true, "venv": venv }),
        Route::Target { venv, target, .. } => {
            json!({ "possible": true, "venv": venv, "target": target, "generation": generation(&target) })
        }
    }
}

/// The durable target's active install generation and the last check of it against this
/// image (`hermes plugins generations`): `{active, packages, last_check, degraded}`.
fn generation(target: &std::path::Path) -> Value {
    let overview = hermes_deps::generations::overview(target);
    let active = overview.generations.iter().find(|g| g.active);
    let report = overview.last_resolution.as_ref();
    json!({
        "active": active.map(|g| g.id),
        "packages": active.map(|g| g.requests.iter().map(|r| r.spec.clone()).collect::<Vec<_>>()),
        "last_check": report.filter(|r| r.notable()).map(|r| r.summary()),
        "degraded": report.is_some_and(|r| r.degraded()),
    })
}

/// A provider's row: its status, the pip specs still missing, whether it is the active one.
fn row(status: &PluginStatus, active: Option<&str>) -> Value {
    let missing: Vec<&str> = status
        .dependencies
        .iter()
        .filter(|d| !d.installed)
        .map(|d| d.spec.as_str())
        .collect();
    let mut value = serde_json::to_value(status).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert("missing".into(), json!(missing));
        map.insert("active".into(), json!(active == Some(status.name.as_str())));
    }
    value
}

/// Runs `work` on the blocking pool and answers its JSON or its refusal.
async fn answer(work: impl FnOnce() -> Step<Value> + Send + 'static) -> Response {
    match blocking(work).await {
        Ok(Ok(value)) => Json(value).into_response(),
        Ok(Err(refusal)) => *refusal,
        Err(failed) => failed,
    }
}

async fn list(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    let profile = match profile_of(query) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    answer(move || overview(&app, profile.as_deref())).await
}

/// `GET /api/plugins`: `hermes memory status` for the profile, with where installs go.
fn overview(app: &App, profile: Option<&str>) -> Step<Value> {
    let ctx = Ctx::open(app, profile)?;
    let raw = profile::configured_provider(&ctx.home).map_err(|e| home_problem(&e))?;
    let status = hermes_plugins::memory_status(&ctx.discovery, raw.as_deref(), &ctx.options)
        .map_err(|e| plugin_problem(&e))?;
    let profiles: Vec<String> = hermes_home::profile::list(&app.root)
        .map_err(|e| home_problem(&e))?
        .into_iter()
        .map(|p| p.profile.name().to_string())
        .collect();
    let active = status.active.as_deref();
    Ok(json!({
        "profile": ctx.home.profile().name(),
        "profiles": profiles,
        "active": status.active,
        "active_unknown": status.active_unknown,
        "installs": installs(&ctx.options),
        "providers": status.installed.iter().map(|s| row(s, active)).collect::<Vec<_>>(),
        "problems": ctx.discovery.problems.iter().map(|p| hermes_errors::one_line(p)).collect::<Vec<_>>(),
    }))
}

/// The work of an install or an activation: the plugin's name and the profile.
type Exclusive = fn(&App, &str, Option<&str>) -> Step<Value>;

/// Runs `work` for the request's plugin and profile while holding the dashboard's install
/// lock (another install meanwhile is a 409); the lock is freed by the blocking task when the
/// work ends, not when the client goes away.
async fn exclusive(
    app: App,
    lock: Busy,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    work: Exclusive,
) -> Response {
    let (name, profile) = match (name_of(path), profile_of(query)) {
        (Ok(n), Ok(p)) => (n, p),
        (Err(r), _) | (_, Err(r)) => return *r,
    };
    let Some(guard) = lock.take() else {
        return busy();
    };
    answer(move || {
        let _guard = guard;
        work(&app, &name, profile.as_deref())
    })
    .await
}

async fn install(
    State(app): State<App>,
    Extension(lock): Extension<Busy>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    exclusive(app, lock, path, query, run_install).await
}

/// What an install or an activation answers: the installer's outcome, its result rows and
/// the provider's row afresh.
fn outcome(
    name: &str,
    ctx: &Ctx,
    ok: bool,
    install: &InstallOutcome,
    steps: Vec<hermes_plugins::Step>,
    status: Value,
) -> Value {
    json!({
        "provider": name,
        "profile": ctx.home.profile().name(),
        "ok": ok,
        "blocked": install.blocked,
        "reason": install.reason,
        "hint": install.hint,
        "steps": steps,
        "status": status,
    })
}

/// `POST /api/plugins/{name}/install`: the provider's missing dependencies through the
/// installer, its result rows, and its availability checked afresh.
fn run_install(app: &App, name: &str, profile: Option<&str>) -> Step<Value> {
    let ctx = Ctx::open(app, profile)?;
    let report = hermes_plugins::install_provider(&ctx.discovery, name, &ctx.options)
        .map_err(|e| plugin_problem(&e))?;
    let active = profile::configured_provider(&ctx.home)
        .ok()
        .flatten()
        .and_then(|raw| hermes_plugins::active_provider(Some(&raw)));
    Ok(outcome(
        name,
        &ctx,
        report.install.ok && report.status.dependencies_installed,
        &report.install,
        report.steps(),
        row(&report.status, active.as_deref()),
    ))
}

/// Activation installs what is missing first, as `hermes memory setup` does: it holds the
/// install lock too.
async fn activate(
    State(app): State<App>,
    Extension(lock): Extension<Busy>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    exclusive(app, lock, path, query, run_activate).await
}

/// `POST /api/plugins/{name}/activate`: `hermes memory setup NAME --non-interactive` for the
/// profile: missing dependencies installed, then `memory.provider` written only when that
/// succeeded (a failed setup saves nothing).
fn run_activate(app: &App, name: &str, profile: Option<&str>) -> Step<Value> {
    let ctx = Ctx::open(app, profile)?;
    let plan =
        hermes_plugins::setup_provider(&ctx.discovery, name, &Default::default(), &ctx.options)
            .map_err(|e| plugin_problem(&e))?;
    if plan.ok {
        profile::apply_plan(&ctx.home, &plan).map_err(|e| home_problem(&e))?;
    }
    Ok(outcome(
        name,
        &ctx,
        plan.ok,
        &plan.install,
        plan.steps(),
        row(&plan.status, plan.ok.then_some(name)),
    ))
}

/// This page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let profile = profile_param();
    let name = json!({
        "name": "name", "in": "path", "required": true, "schema": { "type": "string" },
    });
    let refusals = json!({
        "400": { "description": "{detail, hint}: an invalid profile name or query" },
        "401": { "description": "Not signed in" },
        "404": { "description": "{detail, hint}: no such profile or memory provider" },
    });
    let mut installing = refusals.clone();
    installing["409"] = json!({ "description": "{detail, hint}: another install is running" });
    let result = "{provider, profile, ok, blocked, reason, hint, steps: [{step, ok, detail, hint, output}], status: provider row}";
    json!({
        "/api/plugins": { "get": {
            "summary": "Memory providers of a profile: availability, missing dependencies, the active one, where installs go (or why they are blocked)",
            "parameters": [profile],
            "responses": responses(&refusals, "{profile, profiles, active, active_unknown, installs: {possible, venv?, target?, generation?: {active, packages, last_check, degraded}, reason?, hint?}, providers: [{name, description, version, source, dependencies, missing, env_missing, external, available, active}], problems}"),
        }},
        "/api/plugins/{name}/install": { "post": {
            "summary": "Installs a memory provider's missing pip dependencies through the installer (one at a time); result rows per step and availability checked afresh",
            "parameters": [name, profile],
            "responses": responses(&installing, result),
        }},
        "/api/plugins/{name}/activate": { "post": {
            "summary": "Sets memory.provider for the profile as `hermes memory setup NAME --non-interactive` does (installing missing dependencies first; nothing saved when that fails)",
            "parameters": [name, profile],
            "responses": responses(&installing, result),
        }},
    })
}
