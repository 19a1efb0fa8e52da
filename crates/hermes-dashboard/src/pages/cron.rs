//! The Cron page: a profile's scheduled jobs as the agent keeps them (`cron/jobs.json`, read by
//! [`hermes_home::cron_jobs`]) — schedule, state, next and last run, last result — with
//! pause, resume and run now, and whether the agent's scheduler is ticking.
//!
//! Reading is ours (a file read, no interpreter start). Every change is the agent's own code's
//! ([`action`]): pause, resume and trigger run `cron.jobs.pause_job` / `resume_job` /
//! `trigger_job` in the installed agent, which take its `cron/.jobs.lock`, write its format
//! (and merge with a concurrent writer) and compute the next run of a cron expression with its
//! `croniter`. "Run now" is the original dashboard's trigger: the job becomes due, and the
//! scheduler inside the profile's agent gateway runs it at its next tick (at most a minute) —
//! not a run inside the dashboard, which would hold a model call in a web request.
//!
//! The endpoints are the original dashboard's (`hermes_cli/web_routers/cron.py`): the same
//! paths, `?profile=` (the list takes `all`), jobs annotated with `profile`, `profile_name`,
//! `hermes_home` and `is_default_profile`; an action with no `?profile=` finds the profile that
//! has the job, as the original does. `GET /api/cron/status` is ours.

mod action;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use hermes_home::Home;
use hermes_home::cron_jobs::{self, JobsFileError};
use serde_json::{Map, Value, json};

use crate::openapi::{profile_param, responses};
use crate::pages::request;
use crate::pages::request::run;
use crate::pages::request::{ProfileQuery, home};
use crate::pages::request::{Step, refuse};
use crate::pages::{self, Page, shell};
use crate::server::{App, Base, blocking};

/// Seconds without a ticker heartbeat after which the scheduler counts as stopped: the agent's
/// own `hermes cron status` threshold (three 60 s ticks and 20 s of slack).
pub const STALE_AFTER_S: f64 = 200.0;

/// `/cron` and its API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/cron", get(page))
        .route("/api/cron/jobs", get(list))
        .route("/api/cron/jobs/{id}", get(show))
        .route("/api/cron/jobs/{id}/{action}", post(act))
        .route("/api/cron/status", get(status))
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    let root = app.root.clone();
    let options = blocking(move || pages::profile_options(&root))
        .await
        .unwrap_or_default();
    let main = format!(
        r#"<h2>Cron</h2>
<form id="pick" class="toolbar"><label>Profile <select id="profile" name="profile">{options}</select></label> <span id="path" class="muted"></span></form>
<p id="scheduler" class="muted"></p>
<table id="jobs"><thead><tr><th>Job</th><th>Schedule</th><th>State</th><th>Next run</th><th>Last run</th><th>Last result</th><th>Actions</th></tr></thead><tbody></tbody></table>
<p id="empty" class="muted" hidden>No scheduled jobs in this profile. The agent creates them (<code>hermes cron create</code>, or by asking it in a chat).</p>
<section id="detail" hidden><h3 id="detail-name"></h3><pre id="detail-output"></pre></section>"#
    );
    shell(Page::Cron, &base.0, app.token(), &main)
}

/// The jobs of `home`, each annotated with its profile the way the original annotates them.
fn jobs_of(home: &Home) -> Step<Vec<Value>> {
    let jobs = cron_jobs::read(home.dir()).map_err(|e| file_problem(&e))?;
    Ok(jobs.into_iter().map(|j| annotate(j, home)).collect())
}

fn annotate(mut job: Map<String, Value>, home: &Home) -> Value {
    let name = home.profile().name().to_string();
    job.insert("is_default_profile".into(), json!(name == "default"));
    job.insert("hermes_home".into(), json!(home.dir()));
    job.insert("profile_name".into(), json!(name));
    job.insert("profile".into(), json!(name));
    Value::Object(job)
}

/// A `jobs.json` that cannot be read: the server's file, so a 500 unless it is the agent's
/// format broken (409: the file, not the request, needs fixing).
fn file_problem(e: &JobsFileError) -> Box<Response> {
    let status = match e {
        JobsFileError::Io { .. } => StatusCode::INTERNAL_SERVER_ERROR,
        JobsFileError::Json { .. } | JobsFileError::Shape { .. } => StatusCode::CONFLICT,
    };
    refuse(status, &hermes_errors::one_line(e), Some(e.hint()))
}

/// Every profile's home, default first (the list's `?profile=all`, and the search for a job's
/// profile when an action names none).
fn all_homes(app: &App) -> Vec<Home> {
    pages::profile_names(&app.root)
        .iter()
        .filter_map(|n| Home::select(app.root.clone(), Some(n)).ok())
        .collect()
}

/// `GET /api/cron/jobs?profile=NAME|all` (absent: the active profile): a list of jobs. With
/// `all`, a profile whose file cannot be read is left out, as the original leaves it out.
async fn list(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let q = request::query(query, "profile")?;
        if q.profile.as_deref().map(str::trim) == Some("all") {
            let jobs: Vec<Value> = all_homes(&app)
                .iter()
                .filter_map(|h| jobs_of(h).ok())
                .flatten()
                .collect();
            return Ok(Json(jobs).into_response());
        }
        let home = home(&app, Ok(Query(q)), None)?;
        Ok(Json(jobs_of(&home)?).into_response())
    })
    .await
}

/// The profile that has the job `reference` (`?profile=` when given, else the first profile
/// holding it), and the job.
fn locate(app: &App, profile: Option<&str>, reference: &str) -> Step<(Home, Map<String, Value>)> {
    action::check_reference(reference)?;
    let homes = match profile.map(str::trim).filter(|p| !p.is_empty()) {
        Some(name) => vec![request::select_home(&app.root, Some(name))?],
        None => all_homes(app),
    };
    for home in homes {
        match cron_jobs::find(home.dir(), reference) {
            Ok(Some(job)) => return Ok((home, job)),
            Ok(None) => {}
            Err(e) if profile.is_some() => return Err(file_problem(&e)),
            Err(_) => {}
        }
    }
    Err(refuse(
        StatusCode::NOT_FOUND,
        "Job not found",
        Some("GET /api/cron/jobs?profile=all lists every profile's jobs".into()),
    ))
}

/// `GET /api/cron/jobs/{id}`: the job, with the start of its last saved output (ours:
/// `last_output: {file, excerpt}` or null).
async fn show(
    State(app): State<App>,
    UrlPath(reference): UrlPath<String>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let q = request::query(query, "profile")?;
        let (home, job) = locate(&app, q.profile.as_deref(), &reference)?;
        let id = job["id"].as_str().unwrap_or_default().to_string();
        let mut shown = annotate(job, &home);
        shown["last_output"] = match cron_jobs::last_output(home.dir(), &id) {
            Some((file, excerpt)) => json!({ "file": file, "excerpt": excerpt }),
            None => Value::Null,
        };
        Ok(Json(shown).into_response())
    })
    .await
}

/// `POST /api/cron/jobs/{id}/{pause|resume|trigger}`: the agent makes the change; the answer is
/// the job as the file then holds it.
async fn act(
    State(app): State<App>,
    UrlPath((reference, verb)): UrlPath<(String, String)>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let q = request::query(query, "profile")?;
        let verb = action::Verb::parse(&verb)?;
        let (home, job) = locate(&app, q.profile.as_deref(), &reference)?;
        let id = job["id"].as_str().unwrap_or_default().to_string();
        action::run(&app, &home, verb, &id)?;
        let after = cron_jobs::find(home.dir(), &id)
            .map_err(|e| file_problem(&e))?
            .ok_or_else(|| refuse(StatusCode::NOT_FOUND, "Job not found", None))?;
        Ok(Json(annotate(after, &home)).into_response())
    })
    .await
}

/// `GET /api/cron/status?profile=`: whether the profile's scheduler ticks, and whether this
/// dashboard can change its jobs (an agent is installed).
async fn status(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let home = home(&app, query, None)?;
        let ticker = cron_jobs::ticker(home.dir());
        let engine = hermes_services::agent::engine_label(home.dir(), &*app.vars);
        let agent = hermes_services::agent::locate(&*app.vars);
        let ticking = ticker.heartbeat_age_s.is_some_and(|age| age <= STALE_AFTER_S);
        let summary = scheduler_summary(&ticker, engine, ticking);
        Ok(Json(json!({
            "profile": home.profile().name(),
            "jobs_file": cron_jobs::jobs_path(home.dir()),
            "engine": engine,
            "ticker": ticker,
            "ticking": ticking,
            "stale_after_s": STALE_AFTER_S,
            "summary": summary,
            "actions": agent.is_some(),
            "actions_note": if agent.is_some() { Value::Null } else { json!(action::no_agent_hint()) },
        }))
        .into_response())
    })
    .await
}

/// One sentence on the scheduler: ticking, stopped since when, never seen, or failing.
fn scheduler_summary(ticker: &cron_jobs::Ticker, engine: &str, ticking: bool) -> String {
    let base = match ticker.heartbeat_age_s {
        Some(age) if ticking => format!("The agent's scheduler ticked {}.", ago(age)),
        Some(age) => format!(
            "The agent's scheduler last ticked {}: it is not running, and due jobs wait until this profile's agent gateway runs again.",
            ago(age)
        ),
        None if engine == "agent" => "No scheduler tick recorded yet: jobs run inside this profile's agent gateway once it runs.".to_string(),
        None => format!("No scheduler tick recorded: jobs run inside the agent's gateway, and this profile's engine is {engine}."),
    };
    match &ticker.last_error {
        Some(error) => format!("{base} Its last tick failed: {error}"),
        None => base,
    }
}

/// `s` seconds as "N s ago", "N min ago", "N h ago" or "N d ago".
fn ago(s: f64) -> String {
    let s = s.max(0.0) as u64;
    match s {
        0..=89 => format!("{s} s ago"),
        90..=5399 => format!("{} min ago", (s + 30) / 60),
        5400..=172_799 => format!("{} h ago", (s + 1800) / 3600),
        _ => format!("{} d ago", (s + 43_200) / 86_400),
    }
}

/// The page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let problem = json!({ "description": "{detail, hint}" });
    let unauthorized = json!({ "description": "No valid session token or credentials" });
    let errors = json!({ "400": problem, "401": unauthorized, "404": problem, "409": { "description": "jobs.json is not the agent's format: {detail, hint}" } });
    let mut act = responses(&errors, "the job after the change, as in the list");
    act["403"] = json!({ "description": "Missing or wrong X-Hermes-Session-Token" });
    act["409"] = json!({ "description": "No agent is installed to make the change, the agent refused it (a one-shot job whose time is past), or jobs.json is broken: {detail, hint}; nothing changed" });
    act["502"] = json!({ "description": "The agent failed or did not answer: {detail, hint}" });
    let any_profile = json!({
        "name": "profile", "in": "query", "required": false, "schema": { "type": "string" },
        "description": "profile name (default: the profile that has the job)",
    });
    let id = json!({ "name": "id", "in": "path", "required": true, "schema": { "type": "string" }, "description": "the job's id (or its name)" });
    json!({
        "/api/cron/jobs": {
            "get": {
                "summary": "The original's job list: cron/jobs.json of a profile (`?profile=all`: every profile's), each job as stored with name, schedule_display and the effective state filled in, and profile, profile_name, hermes_home, is_default_profile",
                "parameters": [{
                    "name": "profile", "in": "query", "required": false, "schema": { "type": "string" },
                    "description": "profile name, or `all` (default: the active profile)",
                }],
                "responses": responses(&errors, "[job]"),
            },
        },
        "/api/cron/jobs/{id}": {
            "get": {
                "summary": "One job, and (ours) the start of its last saved output",
                "parameters": [id, any_profile],
                "responses": responses(&errors, "job + last_output: {file, excerpt} | null"),
            },
        },
        "/api/cron/jobs/{id}/{action}": {
            "post": {
                "summary": "pause | resume | trigger (run at the scheduler's next tick), made by the installed agent's own cron code (its lock, its format, its next-run computation)",
                "parameters": [id, { "name": "action", "in": "path", "required": true, "schema": { "type": "string", "enum": ["pause", "resume", "trigger"] } }, any_profile],
                "responses": act,
            },
        },
        "/api/cron/status": {
            "get": {
                "summary": "Ours: whether the profile's scheduler ticks (the agent's ticker files), and whether this dashboard can change jobs",
                "parameters": [profile_param()],
                "responses": responses(&errors, "{profile, jobs_file, engine, ticker: {heartbeat_age_s, success_age_s, last_error}, ticking, stale_after_s, summary, actions, actions_note}"),
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_a_person_says_them() {
        assert_eq!(ago(12.4), "12 s ago");
        assert_eq!(ago(600.0), "10 min ago");
        assert_eq!(ago(7200.0), "2 h ago");
        assert_eq!(ago(3.0 * 86_400.0), "3 d ago");
    }

    #[test]
    fn the_summary_says_whether_jobs_will_run() {
        let mut t = cron_jobs::Ticker {
            heartbeat_age_s: Some(20.0),
            ..Default::default()
        };
        assert!(scheduler_summary(&t, "agent", true).contains("ticked 20 s ago"));
        t.heartbeat_age_s = Some(4000.0);
        assert!(scheduler_summary(&t, "agent", false).contains("not running"));
        t.heartbeat_age_s = None;
        assert!(scheduler_summary(&t, "native", false).contains("engine is native"));
        t.last_error = Some("PermissionError".into());
        assert!(scheduler_summary(&t, "agent", false).ends_with("failed: PermissionError"));
    }
}
