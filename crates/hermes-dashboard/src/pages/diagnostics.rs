//! The Diagnostics page: `hermes dump` (to copy into a bug report) and `hermes doctor` (each
//! check with its fix). Both come from the one `hermes_diag::report::dump` and the one
//! `hermes_diag::report::doctor` the CLI calls, so the page shows exactly what the commands print
//! for the same home and environment. Read-only: unlike `hermes doctor`, a request never seeds a
//! missing home.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use hermes_deps::Environment;
use hermes_diag::{dump, report};
use hermes_home::Home;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::openapi::{profile_param, responses};
use crate::pages::request;
use crate::pages::request::{Step, refuse, select_home};
use crate::pages::{Page, shell};
use crate::server::{App, Base, blocking};

/// The page around its profile picker (`{options}`).
const MAIN: &str = r#"<h2>Diagnostics</h2>
<p class="toolbar"><label>Profile <select id="profile" name="profile">{options}</select></label></p>
<section id="doctor-section">
<h3>Doctor <span id="doctor-summary" class="muted"></span></h3>
<table><thead><tr><th></th><th>Check</th><th>Fix</th></tr></thead><tbody id="checks"></tbody></table>
<p><button type="button" id="copy-doctor" disabled>Copy doctor output</button> <span id="copied-doctor" class="muted" role="status"></span></p>
<details id="doctor-details"><summary>As <code>hermes doctor</code> prints it</summary><pre id="doctor-text" tabindex="0"></pre></details>
</section>
<section id="dump-section">
<h3>Dump</h3>
<p class="muted">What support needs to know, to paste into a bug report (key values are never shown: only whether each is set).</p>
<p><button type="button" id="copy-dump" disabled>Copy</button> <span id="copied" class="muted" role="status"></span></p>
<pre id="dump" tabindex="0">Loading…</pre>
</section>"#;

/// `/diagnostics` and its API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/diagnostics", get(page))
        .route("/api/diagnostics/dump", get(api_dump))
        .route("/api/diagnostics/doctor", get(api_doctor))
}

/// The page: the profile picker is rendered here, the reports are filled by
/// `assets/diagnostics.js` from the API for the picked profile.
async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    let root = app.root.clone();
    let options = blocking(move || crate::pages::profile_options(&root))
        .await
        .unwrap_or_default();
    let main = MAIN.replace("{options}", &options);
    shell(Page::Diagnostics, &base.0, app.token(), &main)
}

/// `?profile=P` (default: the active profile) and `?format=text` (the command's text) or
/// `json` (the default).
#[derive(Debug, Default, Deserialize)]
struct Params {
    profile: Option<String>,
    format: Option<String>,
}

/// How an answer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Text,
}

/// The home and format a request asks for, or the refusal that says what is wrong.
fn params(app: &App, query: Result<Query<Params>, QueryRejection>) -> Step<(Home, Format)> {
    let p = request::query(query, "profile, format")?;
    let format = match p.format.as_deref() {
        None | Some("json") => Format::Json,
        Some("text") => Format::Text,
        Some(other) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!("unknown format `{other}`"),
                Some("use format=json (the default) or format=text".into()),
            ));
        }
    };
    Ok((select_home(&app.root, p.profile.as_deref())?, format))
}

fn text(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

/// `GET /api/diagnostics/dump`: `{text, report}` — `text` is exactly what `hermes dump`
/// prints, `report` exactly `hermes dump --json`; with `format=text`, the text alone.
async fn api_dump(
    State(app): State<App>,
    query: Result<Query<Params>, QueryRejection>,
) -> Response {
    let (home, format) = match params(&app, query) {
        Ok(p) => p,
        Err(refusal) => return *refusal,
    };
    let vars = app.vars.clone();
    // The supervisor is asked over its socket and the files are read: blocking work.
    let collected = blocking(move || report::dump(&home, &|k: &str| vars(k))).await;
    match (collected, format) {
        (Err(failed), _) => failed,
        (Ok(r), Format::Text) => text(dump::render(&r)),
        (Ok(r), Format::Json) => {
            Json(json!({ "text": dump::render(&r), "report": r })).into_response()
        }
    }
}

/// `GET /api/diagnostics/doctor`: what `hermes doctor --json` prints (`{profile, home,
/// checks: [{status, message, fix}]}`); with `format=text`, what `hermes doctor` prints
/// (without colour).
async fn api_doctor(
    State(app): State<App>,
    query: Result<Query<Params>, QueryRejection>,
) -> Response {
    let (home, format) = match params(&app, query) {
        Ok(p) => p,
        Err(refusal) => return *refusal,
    };
    let vars = app.vars.clone();
    // The installer's rows see the process environment, as `hermes doctor` does.
    let collected =
        blocking(move || report::doctor(&home, &|k: &str| vars(k), Environment::from_process()))
            .await;
    match (collected, format) {
        (Err(failed), _) => failed,
        (Ok(r), Format::Text) => text(r.render(false)),
        (Ok(r), Format::Json) => Json(r).into_response(),
    }
}

/// This page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let params = json!([
        profile_param(),
        { "name": "format", "in": "query", "schema": { "enum": ["json", "text"] } },
    ]);
    let errors = json!({
        "400": { "description": "A bad profile name or format: {detail, hint}" },
        "401": { "description": "No valid session token or credentials" },
        "404": { "description": "No such profile" },
    });
    json!({
        "/api/diagnostics/dump": { "get": {
            "summary": "The support summary of `hermes dump` (key values are never included)",
            "parameters": params.clone(),
            "responses": responses(&errors, "{text (as `hermes dump` prints it), report (as `hermes dump --json`)}; text/plain with format=text"),
        }},
        "/api/diagnostics/doctor": { "get": {
            "summary": "The checks of `hermes doctor`, each with its fix",
            "parameters": params,
            "responses": responses(&errors, "{profile, home, checks: [{status: ok|warn|fail, message, fix}]} as `hermes doctor --json`; text/plain with format=text"),
        }},
    })
}
