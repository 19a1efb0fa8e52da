//! The original's fields of `GET /api/sessions` (`{sessions, total, limit, offset}`, each row
//! with its `profile`), added to our answer by the Sessions page's handler: paging by
//! `offset` as the original's clients do, on top of our `before` cursor, and counted with
//! the same filter as the list itself (`hermes_sessions::browse::Reader::list`).

use axum::http::StatusCode;
use hermes_sessions::browse::{MAX_LIMIT, Reader, SessionSummary};
use serde_json::{Value, json};

use crate::pages::request::{Step, refuse};

/// The largest `offset` taken: skipping is paging through the list, so it is bounded.
pub const MAX_OFFSET: usize = 100_000;

/// `?offset=` (absent: 0).
pub fn offset(raw: Option<&str>) -> Step<usize> {
    let Some(raw) = raw else { return Ok(0) };
    match raw.trim().parse::<usize>() {
        Ok(n) if n <= MAX_OFFSET => Ok(n),
        _ => Err(refuse(
            StatusCode::BAD_REQUEST,
            &format!("offset `{raw}` is not a number from 0 to {MAX_OFFSET}"),
            Some("page with `before` (the previous answer's `next`) instead".into()),
        )),
    }
}

/// The page of `limit` sessions after skipping `offset` of those listed after `before`.
pub fn page(
    reader: &Reader,
    limit: usize,
    before: Option<&str>,
    offset: usize,
) -> Result<Vec<SessionSummary>, hermes_sessions::Error> {
    let mut cursor = before.map(str::to_string);
    let mut skip = offset;
    while skip > 0 {
        let asked = skip.min(MAX_LIMIT);
        let chunk = reader.list(asked, cursor.as_deref())?;
        match chunk.last() {
            Some(last) if chunk.len() == asked => cursor = Some(last.id.clone()),
            _ => return Ok(Vec::new()),
        }
        skip -= asked;
    }
    reader.list(limit, cursor.as_deref())
}

/// How many sessions the list holds in all (what the original calls `total`).
pub fn total(reader: &Reader) -> Result<usize, hermes_sessions::Error> {
    let mut total = 0;
    let mut cursor: Option<String> = None;
    loop {
        let chunk = reader.list(MAX_LIMIT, cursor.as_deref())?;
        total += chunk.len();
        match chunk.last() {
            Some(last) if chunk.len() == MAX_LIMIT => cursor = Some(last.id.clone()),
            _ => return Ok(total),
        }
    }
}

/// Each row with the original's `profile` and `is_default_profile` beside our fields.
pub fn rows(sessions: &[SessionSummary], profile: &str) -> Vec<Value> {
    sessions
        .iter()
        .map(|s| {
            let mut row = json!(s);
            row["profile"] = json!(profile);
            row["is_default_profile"] = json!(profile == hermes_home::DEFAULT_PROFILE);
            row
        })
        .collect()
}
