//! The Sessions page: a profile's conversations, newest first, one conversation's messages,
//! and a text search — read-only. Everything is read from the profile's `state.db` through
//! `hermes_sessions::browse`, which opens the file read-only (never creating or
//! migrating it: the gateway and the original agent own it). A profile without `state.db`
//! has no sessions; a database that is busy or unusable is an error answer the page shows.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use hermes_home::Home;
use hermes_sessions::browse::{self, Reader};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::openapi::{profile_param, responses};
use crate::pages::request;
use crate::pages::request::{Step, refuse, select_home};
use crate::pages::{Page, original_api, profile_options, shell};
use crate::server::{App, Base, blocking, problem};

/// The answer of a handler's steps.
fn answer(steps: Step<Json<Value>>) -> Response {
    match steps {
        Ok(json) => json.into_response(),
        Err(refusal) => *refusal,
    }
}

/// Sessions per page when the request does not say.
const DEFAULT_LIMIT: usize = 50;

/// `/sessions` and its API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/sessions", get(page))
        .route("/api/sessions", get(list))
        .route("/api/sessions/search", get(search))
        .route("/api/sessions/{id}", get(one))
}

/// The page: the profile picker is rendered here (the profiles and the active one), the rest
/// is filled by `assets/sessions.js` from the API.
async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    let root = app.root.clone();
    let options = blocking(move || profile_options(&root))
        .await
        .unwrap_or_default();
    let main = format!(
        r#"<h2>Sessions</h2>
<form id="search" class="toolbar" role="search">
<label>Profile <select id="profile" name="profile">{options}</select></label>
<input id="q" name="q" type="search" placeholder="Search messages" aria-label="Search messages">
<button type="submit">Search</button>
<button type="button" id="clear" hidden>Back to the list</button>
</form>
<div class="sessions">
<section id="list-pane"><table><thead><tr><th>Started</th><th>Title</th><th>Source</th><th>Model</th><th>Messages</th></tr></thead>
<tbody id="sessions"></tbody></table>
<p><button type="button" id="more" hidden>Older sessions</button></p>
<ol id="results" hidden></ol></section>
<section id="detail" aria-live="polite"><p class="muted">Choose a session to read it.</p></section>
</div>"#
    );
    shell(Page::Sessions, &base.0, app.token(), &main)
}

/// Query parameters; all optional strings, checked by hand so that a bad value is a 400
/// `{detail, hint}` like every other refusal.
#[derive(Debug, Default, Deserialize)]
struct Params {
    profile: Option<String>,
    limit: Option<String>,
    before: Option<String>,
    q: Option<String>,
    /// The original's paging (`original_api::sessions`).
    offset: Option<String>,
}

fn params(query: Result<Query<Params>, QueryRejection>) -> Step<Params> {
    request::query(query, "profile, limit, before, offset, q")
}

fn limit(raw: Option<&str>) -> Step<usize> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    match raw.trim().parse::<usize>() {
        Ok(n) if (1..=browse::MAX_LIMIT).contains(&n) => Ok(n),
        _ => Err(refuse(
            StatusCode::BAD_REQUEST,
            &format!(
                "limit `{raw}` is not a number from 1 to {}",
                browse::MAX_LIMIT
            ),
            None,
        )),
    }
}

/// A store that cannot be read: 503 while another process holds it (that passes), 500 for a
/// file that is not a usable database.
fn store_problem(e: &hermes_sessions::Error) -> Response {
    if browse::is_busy(e) {
        return problem(
            StatusCode::SERVICE_UNAVAILABLE,
            &hermes_errors::one_line(e),
            Some("another process is writing the database; try again in a moment".into()),
        );
    }
    problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        &hermes_errors::one_line(e),
        e.hint(),
    )
}

/// Opens the profile's `state.db` read-only and runs `read` on it (`None`: there is no file),
/// on the blocking pool.
async fn read<T: Send + 'static>(
    home: Home,
    read: impl FnOnce(Option<&Reader>) -> Result<T, hermes_sessions::Error> + Send + 'static,
) -> Step<T> {
    blocking(move || {
        let reader = Reader::open(&home.state_db_path())?;
        read(reader.as_ref())
    })
    .await?
    .map_err(|e| Box::new(store_problem(&e)))
}

/// `GET /api/sessions?profile=&limit=&before=&offset=`: our page, with the original's
/// `total`, `limit` and `offset` beside it (`original_api::sessions`).
async fn list(State(app): State<App>, query: Result<Query<Params>, QueryRejection>) -> Response {
    let run = async {
        let p = params(query)?;
        let limit = limit(p.limit.as_deref())?;
        let offset = original_api::sessions::offset(p.offset.as_deref())?;
        let home = select_home(&app.root, p.profile.as_deref())?;
        let profile = home.profile().name().to_string();
        let before = p.before;
        let (sessions, total) = read(home, move |r| match r {
            Some(r) => Ok((
                original_api::sessions::page(r, limit, before.as_deref(), offset)?,
                original_api::sessions::total(r)?,
            )),
            None => Ok((Vec::new(), 0)),
        })
        .await?;
        // A full page may have more after it: its last id is where the next one starts.
        let next = (sessions.len() == limit)
            .then(|| sessions.last().map(|s| s.id.clone()))
            .flatten();
        let rows = original_api::sessions::rows(&sessions, &profile);
        Ok(Json(json!({
            "profile": profile,
            "sessions": rows,
            "next": next,
            "total": total,
            "limit": limit,
            "offset": offset,
        })))
    };
    answer(run.await)
}

/// `GET /api/sessions/{id}?profile=`.
async fn one(
    State(app): State<App>,
    Path(id): Path<String>,
    query: Result<Query<Params>, QueryRejection>,
) -> Response {
    let run = async {
        let p = params(query)?;
        let home = select_home(&app.root, p.profile.as_deref())?;
        let profile = home.profile().name().to_string();
        let wanted = id.clone();
        let found = read(home, move |r| match r {
            Some(r) => r.session(&wanted),
            None => Ok(None),
        })
        .await?;
        match found {
            Some(detail) => Ok(Json(json!({
                "profile": profile,
                "session": detail.session,
                "messages": detail.messages,
            }))),
            None => Err(refuse(
                StatusCode::NOT_FOUND,
                &format!("no session `{id}` in profile `{profile}`"),
                Some("list the profile's sessions with GET /api/sessions".into()),
            )),
        }
    };
    answer(run.await)
}

/// `GET /api/sessions/search?profile=&q=&limit=`.
async fn search(State(app): State<App>, query: Result<Query<Params>, QueryRejection>) -> Response {
    let run = async {
        let p = params(query)?;
        let limit = limit(p.limit.as_deref())?;
        let q = p.q.unwrap_or_default();
        if q.chars().count() > browse::MAX_QUERY_CHARS {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the search is longer than {} characters",
                    browse::MAX_QUERY_CHARS
                ),
                Some("search for a few words of the message".into()),
            ));
        }
        if browse::fts_query(&q).is_none() {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "the search has no word to look for",
                Some("give `q` at least one word with a letter or digit".into()),
            ));
        }
        let home = select_home(&app.root, p.profile.as_deref())?;
        let profile = home.profile().name().to_string();
        let results = read(home, move |r| match r {
            Some(r) => r.search(&q, limit),
            None => Ok(Vec::new()),
        })
        .await?;
        Ok(Json(json!({ "profile": profile, "results": results })))
    };
    answer(run.await)
}

/// This page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let profile = profile_param();
    let limit = json!({ "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": browse::MAX_LIMIT } });
    let errors = json!({
        "400": { "description": "A bad parameter or profile name: {detail, hint}" },
        "401": { "description": "No valid session token or credentials" },
        "404": { "description": "No such profile (or session)" },
        "500": { "description": "state.db is not a usable database: {detail, hint}" },
        "503": { "description": "state.db is held by another process: {detail, hint}" },
    });
    json!({
        "/api/sessions": { "get": {
            "summary": "A profile's sessions, newest first (read-only)",
            "parameters": [profile, limit,
                { "name": "before", "in": "query", "schema": { "type": "string" }, "description": "continue after this session id (the previous answer's `next`)" },
                { "name": "offset", "in": "query", "schema": { "type": "integer", "minimum": 0, "maximum": original_api::sessions::MAX_OFFSET }, "description": "the original's paging: skip this many (after `before`, if given)" }],
            "responses": responses(&errors, "{profile, sessions: [{id, title, source, model, started_at, ended_at, message_count, profile, is_default_profile}], next, total, limit, offset} (total, limit, offset and each row's profile fields as the original's)"),
        }},
        "/api/sessions/search": { "get": {
            "summary": "Messages containing every word of q (words also match as prefixes), newest first",
            "parameters": [profile, limit,
                { "name": "q", "in": "query", "required": true, "schema": { "type": "string" } }],
            "responses": responses(&errors, "{profile, results: [{session_id, message_id, role, snippet (hit between >>> and <<<), title, source, model, session_started}]}"),
        }},
        "/api/sessions/{id}": { "get": {
            "summary": "One session and its messages in order",
            "parameters": [profile,
                { "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
            "responses": responses(&errors, "{profile, session, messages: [{id, role, content, tool_name, tool_calls, timestamp, active}]}"),
        }},
    })
}
