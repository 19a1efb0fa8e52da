//! The Overview, the first screen: one row per service and per profile gateway with its
//! state, what it uses (memory with its limit, CPU, a sparkline of the last 15 minutes), the
//! volume's space, kept live by server-sent events, and Start / Stop / Restart. Status and actions go
//! through the control socket on a blocking thread, exactly as `hermes service
//! status|start|stop|restart`. Above the rows, the System view ([`system`]): versions, config
//! schema, backups and what the services use together.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures_util::Stream;
use serde_json::{Value, json};

use crate::guard::detail;
use crate::pages::original_api::{self};
use crate::pages::request;
use crate::pages::request::ProfileQuery;
use crate::pages::request::Step;
use crate::pages::{self, Page, shell};
use crate::server::{App, Base, blocking};
use crate::service_control::{self, control};
use crate::status;

pub mod system;

/// How often the event stream asks the supervisor (at most every 500 ms).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How often an event stream sends a keepalive comment when nothing changed.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

const MAIN: &str = r#"<h2>Overview</h2>
<dl id="system" class="system" hidden></dl>
<p id="gateway-mode" hidden></p>
<p id="volume" class="volume" hidden></p>
<table><thead><tr><th>Service</th><th>State</th><th>PID</th><th>Uptime</th><th>Memory</th><th>CPU</th><th>Restarts</th><th>Last exit</th><th>Reason</th><th>Port</th><th>Engine</th><th>Actions</th></tr></thead>
<tbody id="rows"></tbody></table>"#;

/// `/` and the Overview's API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/", get(page))
        .route("/api/status", get(api_status))
        .route("/api/events", get(events))
        .route("/api/system", get(api_system))
        .route("/api/services/{name}/{action}", post(action))
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    shell(Page::Overview, &base.0, app.token(), MAIN)
}

/// One fresh snapshot, taken on a blocking thread (the control socket client blocks).
async fn fresh(app: &App) -> Value {
    let (root, vars) = (app.root.clone(), app.vars.clone());
    tokio::task::spawn_blocking(move || status::snapshot(&root, &*vars))
        .await
        .unwrap_or_else(|e| {
            json!({
                "supervisor": { "reachable": false, "error": format!("status task failed: {e}") },
                "services": [],
            })
        })
}

/// `GET /api/status?profile=`: the snapshot, with the original's top-level fields for the
/// profile's gateway beside it (`original_api::status`; the default profile's without
/// `?profile=`, as the `components` rollup is).
async fn api_status(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    let profile = match request::query(query, "profile") {
        Ok(q) => q.profile.filter(|p| !p.trim().is_empty()),
        Err(answer) => return *answer,
    };
    let mut snapshot = fresh(&app).await;
    let (root, auth_required) = (app.root.clone(), app.auth_required());
    let base = snapshot.clone();
    let original = blocking(move || -> Step<_> {
        let name = profile.as_deref().unwrap_or(hermes_home::DEFAULT_PROFILE);
        let home = request::select_home(&root, Some(name))?;
        let mut fields = original_api::status::fields(&home, &base, auth_required);
        fields.extend(original_api::topology::fields(&root, &base));
        Ok(fields)
    })
    .await;
    match original {
        Ok(Ok(fields)) => {
            if let Value::Object(map) = &mut snapshot {
                for (key, value) in fields {
                    // Ours wins where a name is already taken (none is today).
                    map.entry(key).or_insert(value);
                }
            }
            Json(snapshot).into_response()
        }
        Ok(Err(answer)) => *answer,
        Err(answer) => answer,
    }
}

/// `GET /api/system`: the System view ([`system::snapshot`]), with the supervisor's rows asked
/// afresh (a supervisor that does not answer is a line of the view, not an error).
async fn api_system(State(app): State<App>) -> Response {
    let answer = blocking(move || {
        let rows = status::supervisor_rows(&app.root, &*app.vars).ok();
        let dir = pages::backups::settings_dir(&app).map_err(|e| hermes_errors::one_line(&e));
        system::snapshot(
            &app.root,
            &*app.vars,
            dir.as_deref().map_err(String::as_str),
            rows.as_deref(),
        )
    })
    .await;
    match answer {
        Ok(value) => Json(value).into_response(),
        Err(answer) => answer,
    }
}

/// `GET /api/events`: a `status` event with the first snapshot, then one whenever it
/// changes (polled every [`POLL_INTERVAL`]), keepalive comments in between.
async fn events(State(app): State<App>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures_util::stream::unfold((app, None::<String>), |(app, last)| async move {
        let mut first = last.is_none();
        loop {
            if !first {
                tokio::time::sleep(POLL_INTERVAL).await;
            }
            first = false;
            let snap = fresh(&app).await;
            let print = status::fingerprint(&snap);
            if last.as_deref() != Some(print.as_str()) {
                let event = Event::default().event("status").data(snap.to_string());
                return Some((Ok(event), (app, Some(print))));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEPALIVE))
}

/// `POST /api/services/{name}/{action}`: `start`, `stop` or `restart` through the control
/// socket, the same calls as the CLI (the supervisor records a gateway's desired state).
async fn action(State(app): State<App>, Path((name, verb)): Path<(String, String)>) -> Response {
    if !matches!(verb.as_str(), "start" | "stop" | "restart") {
        return detail(
            StatusCode::NOT_FOUND,
            "Unknown action: use start, stop or restart",
        );
    }
    if verb != "start" && service_control::is_self(&app, &name) {
        return service_control::control_self(&app, name, verb).await;
    }
    match control(&app, name, verb).await {
        Ok(None) => Json(json!({ "ok": true })).into_response(),
        Ok(Some(warning)) => Json(json!({ "ok": true, "warning": warning })).into_response(),
        Err(answer) => *answer,
    }
}

/// The Overview's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let unauthorized = json!({ "description": "No valid session token or credentials" });
    json!({
        "/api/status": { "get": {
            "summary": "Every service and profile gateway, asked afresh from the supervisor; beside them the original's top-level fields for ?profile='s gateway (default's without it)",
            "parameters": [{ "name": "profile", "in": "query", "required": false, "schema": { "type": "string" } }],
            "responses": { "200": { "description": "{supervisor: {reachable, error?, hint?}, gateway_routing: {mode, source, engine, serves}, services: [{name, state, pid, uptime_secs, since_secs, restarts, last_exit, last_failure?, reason, profile, resources?: {memory_bytes, cpu_seconds, cpu_percent, processes, history: [{at, memory_bytes, cpu_percent}]}, memory_max?: {bytes, enforced_by}, memory_text, engine?, port?, served_by?}], volume: {path, total_bytes, available_bytes, used_bytes, used_percent, degraded, text} or {path, error}, components: {gateway: {status, state}, dashboard: {status, recent_unhandled_errors, last_error_at, selftest}, storage: {status}, platforms: {status, configured, connected}}, overall: ok|degraded} (each component's status: ok|degraded; overall is ok when every component is); and the original's version, config_version, latest_config_version, gateway_running, gateway_state, gateway_platforms, gateway_exit_reason, gateway_updated_at, gateway_pid, auth_required, hermes_home, config_path, env_path, and the original's topology: profiles, gateway_mode (multiplex|multiple|single|none|unknown), gateways: [{profile, ports: {platform: port}, served_profiles?}]" }, "400": { "description": "A bad profile name: {detail, hint}" }, "401": unauthorized, "404": { "description": "No such profile: {detail, hint}" } },
        }},
        "/api/system": { "get": {
            "summary": "The Overview's System view: this build, the installed agent and its config schema against the volume's, the backups, the services' use together; `items` is each as a line",
            "responses": { "200": { "description": "{hermes: {version, sha, label}, agent: {version, source, cli, config_version, error}|null, config_schema: {volume, file, profiles: [{profile, version, error}]}, backups: {dir, count, newest: {name, size, modified, scheduled}|null, schedule}|{error}, services: {total, running, failing, memory_bytes, cpu_percent}|null, items: [{name, label, text, warning}]}" }, "401": unauthorized },
        }},
        "/api/events": { "get": {
            "summary": "Server-sent events: `status` with a snapshot like /api/status whenever it changes",
            "responses": { "200": { "description": "text/event-stream" }, "401": unauthorized },
        }},
        "/api/services/{name}/{action}": { "post": {
            "summary": "Start, stop or restart a service through the control socket",
            "parameters": [
                { "name": "name", "in": "path", "required": true, "schema": { "type": "string" } },
                { "name": "action", "in": "path", "required": true, "schema": { "enum": ["start", "stop", "restart"] } },
            ],
            "responses": {
                "200": { "description": "{\"ok\": true}" },
                "202": { "description": "Stopping or restarting the dashboard itself: {\"ok\": true, \"detail\"}, answered before the action, which follows" },
                "401": unauthorized,
                "403": { "description": "Missing or wrong X-Hermes-Session-Token" },
                "409": { "description": "The supervisor refused: {detail, hint}" },
                "503": { "description": "No supervisor is running" },
            },
        }},
    })
}
