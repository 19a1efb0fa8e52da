//! The Logs page: a service's log, live. The same files `hermes service logs NAME [-f]`
//! reads, through the same functions (`hermes_services::logs`): the last lines as JSON, what
//! is appended as server-sent events that resume exactly where a reconnecting client stopped
//! (`Last-Event-ID`), and the whole file as a download.
//!
//! Words:
//! * **cursor** — where a reader stopped, as text: `<inode>:<offset>` (the file and the byte
//!   offset after the last line given, a `hermes_services::logs::Position`), or a bare
//!   `<offset>` in the current file. Every event's `id` is one, so the browser's
//!   `Last-Event-ID` brings the stream back exactly there — even when the file was rotated to
//!   `current.1` in between.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use futures_util::Stream;
use hermes_services::logs::{Change, Follower, Position, Resume, Resumed};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::pages::{Page, original_api, shell};
use crate::server::{App, Base, blocking, problem};
use crate::status::{reachability, supervisor_rows};

/// Lines `GET /api/logs/{service}` gives when not asked for a number.
pub const DEFAULT_LINES: usize = 200;
/// The most lines one request gives (a larger `lines` is capped, not refused).
pub const MAX_LINES: usize = 5000;
/// How often an event stream looks for new lines.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// The size of one read of a download.
const DOWNLOAD_CHUNK: usize = 64 * 1024;

const MAIN: &str = r#"<h2>Logs</h2>
<div class="log-bar">
<label>Service <select id="log-service"></select></label>
<label>Filter <input id="log-filter" type="search" placeholder="show lines containing…" autocomplete="off"></label>
<a id="log-download" href="api/logs" download hidden>Download</a>
<span id="log-state" class="muted"></span>
</div>
<div id="log" class="log" tabindex="0" aria-live="off"></div>
<button id="log-paused" class="log-paused" type="button" hidden></button>"#;

/// `/logs` and its API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/logs", get(page))
        .route("/api/logs", get(list))
        .route("/api/logs/{service}", get(last_lines))
        .route("/api/logs/{service}/events", get(events))
        .route("/api/logs/{service}/download", get(download))
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    shell(Page::Logs, &base.0, app.token(), MAIN)
}

/// A refusal of `hermes_services` as an answer: a bad name 400, no log 404, anything else
/// (the file unreadable) 500; always `{detail, hint}`.
fn refused(e: &hermes_services::Error) -> Response {
    let status = match e {
        hermes_services::Error::InvalidServiceName { .. } => StatusCode::BAD_REQUEST,
        hermes_services::Error::NoLog { .. } => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    problem(status, &hermes_errors::one_line(e), e.hint())
}

/// `GET /api/logs`: every service the supervisor runs and every service with a log on disk,
/// by name, with the supervisor's state (`null` when it does not run it, or cannot be
/// reached) and whether a log exists; beside them the original's `{file, lines}` for its
/// `?file=&lines=&level=&component=&search=` (`original_api::logs`).
async fn list(State(app): State<App>, Query(query): Query<BTreeMap<String, String>>) -> Response {
    let (root, vars) = (app.root.clone(), app.vars.clone());
    // Our page asks without parameters: for it the original's fields are a best effort (a
    // profile that cannot be selected must not hide the listing); a caller who asks for them
    // gets their refusal.
    let asked = !query.is_empty();
    let found = blocking(move || {
        let original = original_api::logs::fields(&root, &query);
        let rows = supervisor_rows(&root, &*vars);
        (rows, hermes_services::services_with_logs(&root), original)
    })
    .await;
    match found {
        Ok((rows, on_disk, original)) => {
            let mut body = listing(rows, &on_disk);
            match (&mut body, original) {
                (Value::Object(body), Ok(Value::Object(original))) => body.extend(original),
                (_, Err(answer)) if asked => return *answer,
                _ => {}
            }
            Json(body).into_response()
        }
        Err(answer) => answer,
    }
}

/// The body of `GET /api/logs` from the supervisor's answer and the names found on disk.
fn listing(
    rows: Result<Vec<hermes_supervisor::ServiceStatus>, hermes_services::Error>,
    on_disk: &[String],
) -> Value {
    let mut services: BTreeMap<String, Value> = BTreeMap::new();
    let supervisor = reachability(&rows);
    for row in rows.into_iter().flatten() {
        let state = serde_json::to_value(row.state).unwrap_or(Value::Null);
        services.insert(row.name, json!({ "state": state, "log": false }));
    }
    for name in on_disk {
        services
            .entry(name.clone())
            .or_insert_with(|| json!({ "state": null }))["log"] = json!(true);
    }
    let services: Vec<Value> = services
        .into_iter()
        .map(|(name, mut row)| {
            row["name"] = json!(name);
            row
        })
        .collect();
    json!({ "supervisor": supervisor, "services": services })
}

/// `GET /api/logs/{service}?lines=N`: the last `N` lines (default [`DEFAULT_LINES`], at most
/// [`MAX_LINES`]) and the cursor of their end, to follow from with `events?from=`.
async fn last_lines(
    State(app): State<App>,
    Path(service): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Response {
    let n = match query.get("lines").map(|n| n.parse::<usize>()) {
        None => DEFAULT_LINES,
        Some(Ok(n)) => n.min(MAX_LINES),
        Some(Err(_)) => {
            return problem(
                StatusCode::BAD_REQUEST,
                "`lines` must be a whole number",
                Some(format!(
                    "ask for up to {MAX_LINES} lines, e.g. `?lines=200`"
                )),
            );
        }
    };
    let root = app.root.clone();
    let name = service.clone();
    let read = blocking(move || hermes_services::open_service_log(&root, &name, n)).await;
    match read {
        Ok(Ok((lines, follower))) => {
            let end = follower.reached();
            Json(json!({
                "service": service,
                "lines": lines,
                "offset": end.offset,
                "cursor": cursor(end),
            }))
            .into_response()
        }
        Ok(Err(e)) => refused(&e),
        Err(answer) => answer,
    }
}

/// A position as an event id (module doc: cursor).
fn cursor(at: Position) -> String {
    format!("{}:{}", at.inode, at.offset)
}

/// Reads a cursor: `<inode>:<offset>` or `<offset>`; `None` when it is neither.
fn parse_cursor(text: &str) -> Option<Resume> {
    let text = text.trim();
    match text.split_once(':') {
        Some((inode, offset)) => Some(Resume {
            inode: Some(inode.parse().ok()?),
            offset: offset.parse().ok()?,
        }),
        None => Some(Resume {
            inode: None,
            offset: text.parse().ok()?,
        }),
    }
}

/// Where an event stream starts: `Last-Event-ID` (a reconnecting browser sends it, and it
/// wins: the `from` of the first URL is older), else `?from=`, else `None` (the end). `Err`
/// holds a given cursor that is not one.
fn start_at(
    headers: &HeaderMap,
    query: &BTreeMap<String, String>,
) -> Result<Option<Resume>, String> {
    let given = headers
        .get("last-event-id")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .or_else(|| query.get("from").cloned());
    match given {
        None => Ok(None),
        Some(text) => parse_cursor(&text).map(Some).ok_or(text),
    }
}

fn bad_cursor(text: &str) -> Response {
    problem(
        StatusCode::BAD_REQUEST,
        &format!("not a log cursor: `{}`", text.escape_debug()),
        Some("give `<inode>:<offset>` or `<offset>`, as an event's id or a `cursor` said".into()),
    )
}

/// `GET /api/logs/{service}/events[?from=CURSOR]`: server-sent events — `start` first (the
/// cursor it starts at, and whether it had to restart from the file's beginning), then
/// `lines` with what is appended, `rotated` when the file is replaced or truncated, `problem`
/// (and the end of the stream) when it cannot be read. Every event's id is a cursor.
async fn events(
    State(app): State<App>,
    Path(service): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let from = match start_at(&headers, &query) {
        Ok(from) => from,
        Err(text) => return bad_cursor(&text),
    };
    let root = app.root.clone();
    let opened = blocking(move || open_follower(&root, &service, from)).await;
    let (follower, resumed) = match opened {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => return refused(&e),
        Err(answer) => return answer,
    };
    let at = follower.reached();
    let first = Event::default().event("start").id(cursor(at)).data(
        json!({ "cursor": cursor(at), "restarted": resumed == Resumed::Restarted }).to_string(),
    );
    Sse::new(follow(follower, first))
        .keep_alive(KeepAlive::new().interval(super::overview::KEEPALIVE))
        .into_response()
}

/// A follower of `service`'s log from `from`, or from its end.
fn open_follower(
    root: &std::path::Path,
    service: &str,
    from: Option<Resume>,
) -> Result<(Follower, Resumed), hermes_services::Error> {
    match from {
        Some(at) => hermes_services::resume_service_log(root, service, at),
        None => {
            hermes_services::open_service_log(root, service, 0).map(|(_, f)| (f, Resumed::Exact))
        }
    }
}

/// What the event stream carries between polls.
struct Following {
    /// `None` once the log could not be read: the stream ends after the events queued.
    follower: Option<Follower>,
    queued: VecDeque<Event>,
}

/// The events of `follower`, `first` first, polled every [`POLL_INTERVAL`] on the blocking
/// pool; dropped (and so stopped) when the client goes.
fn follow(follower: Follower, first: Event) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = Following {
        follower: Some(follower),
        queued: VecDeque::from([first]),
    };
    futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.queued.pop_front() {
                return Some((Ok(event), state));
            }
            let mut follower = state.follower.take()?;
            tokio::time::sleep(POLL_INTERVAL).await;
            let polled = tokio::task::spawn_blocking(move || {
                let changes = follower.poll_changes();
                (follower, changes)
            })
            .await;
            match polled {
                Ok((follower, Ok(changes))) => {
                    state.queued.extend(changes.into_iter().map(change_event));
                    state.follower = Some(follower);
                }
                Ok((_, Err(e))) => state.queued.push_back(problem_event(&e)),
                // The poll panicked: end the stream (the browser reconnects from its last id).
                Err(_) => return None,
            }
        }
    })
}

fn change_event(change: Change) -> Event {
    match change {
        Change::Lines { lines, end } => Event::default()
            .event("lines")
            .id(cursor(end))
            .data(json!({ "lines": lines }).to_string()),
        Change::Reopened { truncated, at } => Event::default()
            .event("rotated")
            .id(cursor(at))
            .data(json!({ "truncated": truncated }).to_string()),
    }
}

fn problem_event(e: &hermes_services::Error) -> Event {
    Event::default()
        .event("problem")
        .data(json!({ "detail": hermes_errors::one_line(e), "hint": e.hint() }).to_string())
}

/// `GET /api/logs/{service}/download`: the current log file as it is now (its length when
/// the request came), streamed in chunks, never read whole into memory.
async fn download(State(app): State<App>, Path(service): Path<String>) -> Response {
    let root = app.root.clone();
    let name = service.clone();
    let opened = blocking(move || {
        let (path, file) = hermes_services::open_log(&root, &name)?;
        match file.metadata() {
            Ok(meta) => Ok((file, meta.len())),
            Err(source) => Err(hermes_services::Error::LogRead { path, source }),
        }
    })
    .await;
    let (file, len) = match opened {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => return refused(&e),
        Err(answer) => return answer,
    };
    let reader = tokio::fs::File::from_std(file).take(len);
    let chunks = futures_util::stream::unfold(reader, |mut reader| async move {
        let mut chunk = vec![0; DOWNLOAD_CHUNK];
        match reader.read(&mut chunk).await {
            Ok(0) => None,
            Ok(n) => {
                chunk.truncate(n);
                Some((Ok::<Vec<u8>, std::io::Error>(chunk), reader))
            }
            Err(e) => Some((Err(e), reader)),
        }
    });
    (
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
            (header::CONTENT_LENGTH, len.to_string()),
            (
                header::CONTENT_DISPOSITION,
                // The name is a valid service name (letters, digits, `-_.@`): safe here.
                format!("attachment; filename=\"{service}.log\""),
            ),
        ],
        Body::from_stream(chunks),
    )
        .into_response()
}

/// This page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let unauthorized = json!({ "description": "No valid session token or credentials" });
    let service = json!({ "name": "service", "in": "path", "required": true, "schema": { "type": "string" } });
    let refusals = json!({
        "400": { "description": "Not a service name (or a bad parameter): {detail, hint}" },
        "401": unauthorized,
        "404": { "description": "The service has no log: {detail, hint}" },
    });
    let with = |ok: Value| {
        let mut responses = refusals.clone();
        responses["200"] = ok;
        responses
    };
    json!({
        "/api/logs": { "get": {
            "summary": "Services with a log or run by the supervisor; beside them the original's {file, lines} (file: agent|gateway = the profile's gateway log, errors = it from WARNING up)",
            "parameters": [
                { "name": "file", "in": "query", "schema": { "enum": ["agent", "errors", "gateway"] } },
                { "name": "lines", "in": "query", "schema": { "type": "integer", "minimum": 0, "maximum": 500 } },
                { "name": "level", "in": "query", "schema": { "enum": ["ALL", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] } },
                { "name": "component", "in": "query", "schema": { "enum": ["all"] } },
                { "name": "search", "in": "query", "schema": { "type": "string" } },
                { "name": "profile", "in": "query", "schema": { "type": "string" } },
            ],
            "responses": {
                "200": { "description": "{supervisor: {reachable, error?, hint?}, services: [{name, state, log}], file, lines: [text], service}" },
                "400": { "description": "An unknown file, level or component, or a bad lines or profile: {detail, hint}" },
                "401": unauthorized,
                "404": { "description": "No such profile: {detail, hint}" },
            },
        }},
        "/api/logs/{service}": { "get": {
            "summary": "The last lines of a service's log, and the cursor of their end",
            "parameters": [service, { "name": "lines", "in": "query", "schema": { "type": "integer", "minimum": 0, "maximum": MAX_LINES, "default": DEFAULT_LINES } }],
            "responses": with(json!({ "description": "{service, lines: [string], offset, cursor}" })),
        }},
        "/api/logs/{service}/events": { "get": {
            "summary": "Server-sent events: `start`, then `lines` as they are written, `rotated`, `problem`; every id a cursor, resumed from with Last-Event-ID",
            "parameters": [service,
                { "name": "from", "in": "query", "schema": { "type": "string" }, "description": "a cursor (`<inode>:<offset>` or `<offset>`); Last-Event-ID wins; without either, the end" },
                { "name": "Last-Event-ID", "in": "header", "schema": { "type": "string" } }],
            "responses": with(json!({ "description": "text/event-stream" })),
        }},
        "/api/logs/{service}/download": { "get": {
            "summary": "The whole current log file, as an attachment",
            "parameters": [service],
            "responses": with(json!({ "description": "text/plain" })),
        }},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_and_junk_is_none() {
        let at = Position {
            inode: 42,
            offset: 7,
        };
        assert_eq!(
            parse_cursor(&cursor(at)),
            Some(Resume {
                inode: Some(42),
                offset: 7
            })
        );
        assert_eq!(
            parse_cursor(" 9 "),
            Some(Resume {
                inode: None,
                offset: 9
            })
        );
        for junk in ["", "x", "1:", ":1", "-1", "1:2:3", "1:-2"] {
            assert_eq!(parse_cursor(junk), None, "{junk}");
        }
    }

    #[test]
    fn the_listing_merges_the_supervisor_and_the_disk() {
        let no_supervisor = Err(hermes_services::Error::InvalidServiceName { name: "x".into() });
        let v = listing(no_supervisor, &["b".into(), "a".into()]);
        assert_eq!(v["supervisor"]["reachable"], false);
        let names: Vec<&str> = v["services"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(v["services"][0]["log"], true);
        assert_eq!(v["services"][0]["state"], Value::Null);
    }
}
