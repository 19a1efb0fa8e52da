//! The original's fields of `GET /api/logs` (`{file, lines}`), added to our listing by the
//! Logs page's handler. The original keeps one file per kind in a profile's `logs/`; ours
//! keeps one log per service, read as the Logs page reads it
//! (`hermes_services::open_service_log`): `agent` and `gateway` are the profile's gateway
//! service (the agent runs inside it), `errors` is the same log from `WARNING` up.

use std::collections::BTreeMap;
use std::path::Path;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::pages::request::{Step, refuse, select_home};

/// The original's line cap per answer.
const MAX_LINES: usize = 500;
/// Lines read before a filter, as the original reads them.
const FILTERED_READ: usize = 2000;

/// The levels in order (the original's `_LEVEL_ORDER`; `WARN` and `TRACE` as our gateway
/// writes them).
fn rank(level: &str) -> Option<u8> {
    match level {
        "TRACE" | "DEBUG" => Some(0),
        "INFO" => Some(1),
        "WARN" | "WARNING" => Some(2),
        "ERROR" => Some(3),
        "CRITICAL" => Some(4),
        _ => None,
    }
}

/// A line's level: its first word that is one (none: the line passes every level filter, as
/// in the original).
fn line_rank(line: &str) -> Option<u8> {
    line.split_whitespace().find_map(rank)
}

/// `{file, lines}` for `query` (`file`, `lines`, `level`, `component`, `search`, `profile`).
pub fn fields(root: &Path, query: &BTreeMap<String, String>) -> Step<Value> {
    let file = query.get("file").map_or("agent", String::as_str);
    let mut min_rank = match file {
        "agent" | "gateway" => None,
        "errors" => rank("WARNING"),
        other => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!("Unknown log file: {other}"),
                Some("file is agent, errors or gateway; our other services' logs are under /api/logs/{service}".into()),
            ));
        }
    };
    let wanted = match query.get("lines").map(|n| n.trim().parse::<usize>()) {
        None => 100,
        Some(Ok(n)) => n.min(MAX_LINES),
        Some(Err(_)) => {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "`lines` must be a whole number",
                Some(format!(
                    "ask for up to {MAX_LINES} lines, e.g. `?lines=100`"
                )),
            ));
        }
    };
    if let Some(level) = query
        .get("level")
        .filter(|l| !l.is_empty() && !l.eq_ignore_ascii_case("all"))
    {
        let asked = rank(&level.to_ascii_uppercase()).ok_or_else(|| {
            refuse(
                StatusCode::BAD_REQUEST,
                &format!("Unknown level: {level}"),
                Some("level is DEBUG, INFO, WARNING, ERROR, CRITICAL or ALL".into()),
            )
        })?;
        min_rank = min_rank.max(Some(asked));
    }
    if let Some(component) = query
        .get("component")
        .filter(|c| !c.is_empty() && !c.eq_ignore_ascii_case("all"))
    {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            &format!("Unknown component: {component}"),
            Some(
                "our logs are per service, not per component: leave component out or use `all`"
                    .into(),
            ),
        ));
    }
    let search = query
        .get("search")
        .filter(|s| !s.is_empty())
        .map(|s| s.to_lowercase());
    let home = select_home(root, query.get("profile").map(String::as_str))?;
    let service = hermes_services::gateway::service_name(home.profile().name());
    let filtered = min_rank.is_some() || search.is_some();
    let read = if filtered { FILTERED_READ } else { wanted };
    let lines = match hermes_services::open_service_log(root, &service, read) {
        Ok((lines, _)) => lines,
        // No log yet: none of its lines, as the original answers for a missing file.
        Err(hermes_services::Error::NoLog { .. }) => Vec::new(),
        Err(e) => {
            return Err(refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                &hermes_errors::one_line(&e),
                e.hint(),
            ));
        }
    };
    let kept: Vec<String> = lines
        .into_iter()
        .filter(|line| match (min_rank, line_rank(line)) {
            (Some(min), Some(level)) => level >= min,
            _ => true,
        })
        .filter(|line| {
            search
                .as_ref()
                .is_none_or(|s| line.to_lowercase().contains(s))
        })
        .collect();
    let start = kept.len().saturating_sub(wanted);
    Ok(json!({ "file": file, "lines": kept[start..], "service": service }))
}
