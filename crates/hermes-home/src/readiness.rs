//! The original's readiness document (`gateway/readiness.py`, 0.20+): what `/health/detailed`
//! carries as `readiness` and the dashboard's `/api/status` reuses for its rollup.
//!
//! Words:
//! * *check* — one probe's answer: `{"status": "ok" | "degraded", "detail"?, ...counts}`. The
//!   original's checks say only `ok` or `degraded` (a readiness probe reports; it never fails a
//!   request), and carry status words and counts only: no configuration value, path, command or
//!   error message — so `detail` is a short code or phrase, never an error's text.
//! * *rollup* — `ok` when every check is `ok`, else `degraded` ([`rollup`]), for the document's
//!   `status` and the dashboard's `overall` alike.
//!
//! The checks and their keys, as the original names them: `state_db`, `config`, `model`, `disk`
//! (`used_percent`, `free_bytes`; degraded at the volume's threshold, which lives in
//! `hermes_home::disk` only), `gateway` (`state`, `connected_platforms`, `platforms`; ok while
//! `running` or `draining`) and `background_queues` (`active_api_runs`, `process_completions`,
//! `active_delegations`). The probes are synchronous and bounded (`hermes_sessions::probe`, a
//! read-only schema query with a one second busy timeout; one `statvfs`): callers on a runtime
//! run them on its blocking pool.

use serde_json::{Map, Value, json};

use crate::disk::DiskUsage;

/// A check's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Nothing to report.
    Ok,
    /// Something is wrong, and the check says what in `detail`.
    Degraded,
}

impl Status {
    /// `ok` or `degraded`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Degraded => "degraded",
        }
    }

    fn from_ok(ok: bool) -> Status {
        if ok { Status::Ok } else { Status::Degraded }
    }
}

/// One check: `{"status", "detail"? , ...extra}` (extra: an object of counts, or `null`).
pub fn check(status: Status, detail: Option<&str>, extra: Value) -> Value {
    let mut body = Map::new();
    body.insert("status".into(), json!(status.as_str()));
    if let Some(detail) = detail.filter(|d| !d.is_empty()) {
        body.insert("detail".into(), json!(detail));
    }
    if let Value::Object(extra) = extra {
        body.extend(extra);
    }
    Value::Object(body)
}

/// `ok` when every item's `status` is `ok`, else `degraded` (an item without a status counts
/// as not ok), as the original rolls up its checks and its dashboard components.
pub fn rollup<'a>(items: impl IntoIterator<Item = &'a Value>) -> &'static str {
    let all_ok = items.into_iter().all(|item| item["status"] == "ok");
    Status::from_ok(all_ok).as_str()
}

/// The document: `{"status": rollup, "checks": checks}`.
pub fn document(checks: Map<String, Value>) -> Value {
    let status = rollup(checks.values());
    json!({ "status": status, "checks": checks })
}

/// What a read-only look at `state.db` found (`hermes_sessions::probe`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateDb {
    /// No file (nothing has created it yet, or it was removed).
    Missing,
    /// Its schema reads.
    Readable,
    /// It exists but does not read as a database (locked past the timeout, unreadable,
    /// corrupt): SQLite's words.
    Unreadable(String),
}

impl StateDb {
    /// The `state_db` check. `missing_is_ok`: the original's reading of a missing file (`ok`,
    /// "not initialized": nothing has written one yet), right for a reader such as the
    /// dashboard; a gateway, which creates its store before it serves, passes `false`: a missing
    /// file there is a store removed under it.
    pub fn check(&self, missing_is_ok: bool) -> Value {
        match self {
            StateDb::Readable => check(Status::Ok, None, Value::Null),
            StateDb::Missing if missing_is_ok => {
                check(Status::Ok, Some("not initialized"), Value::Null)
            }
            StateDb::Missing => check(Status::Degraded, Some("missing"), Value::Null),
            StateDb::Unreadable(_) => check(
                Status::Degraded,
                Some("not readable as a database"),
                Value::Null,
            ),
        }
    }
}

/// The percentage in use with one decimal, as the original's readiness reports it.
pub fn used_percent(usage: &DiskUsage) -> f64 {
    (usage.used_fraction() * 1000.0).round() / 10.0
}

/// The `disk` check of the volume's usage (or of why it could not be read).
pub fn disk_check(usage: &std::io::Result<DiskUsage>) -> Value {
    match usage {
        Ok(u) => check(
            Status::from_ok(!u.is_degraded()),
            None,
            json!({
                "used_percent": used_percent(u),
                "free_bytes": u.available_bytes,
            }),
        ),
        Err(e) => check(
            Status::Degraded,
            Some(&format!("cannot read the volume's usage ({})", e.kind())),
            Value::Null,
        ),
    }
}

/// Whether a platform's entry in `gateway_state.json`'s `platforms` says it is connected
/// (`state`, else `status`, one of `connected`, `running`, `ok`), as the original counts them.
pub fn platform_connected(entry: &Value) -> bool {
    let state = entry
        .get("state")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| entry.get("status").and_then(Value::as_str))
        .unwrap_or("");
    matches!(
        state.to_ascii_lowercase().as_str(),
        "connected" | "running" | "ok"
    )
}

/// Whether a gateway in `state` (`gateway_state.json`'s word) serves: `running`, or
/// `draining` (finishing its work, still answering).
pub fn gateway_serves(state: &str) -> bool {
    matches!(state, "running" | "draining")
}

/// The `gateway` check: ok while it serves ([`gateway_serves`]), with its platforms' counts.
pub fn gateway_check(state: &str, connected_platforms: usize, platforms: usize) -> Value {
    check(
        Status::from_ok(gateway_serves(state)),
        None,
        json!({
            "state": state,
            "connected_platforms": connected_platforms,
            "platforms": platforms,
        }),
    )
}

/// The `background_queues` check: always ok (work in progress is not a fault), with the counts.
pub fn background_queues_check(
    active_api_runs: u64,
    process_completions: u64,
    active_delegations: u64,
) -> Value {
    check(
        Status::Ok,
        None,
        json!({
            "active_api_runs": active_api_runs,
            "process_completions": process_completions,
            "active_delegations": active_delegations,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(used: u64, available: u64) -> DiskUsage {
        DiskUsage {
            total_bytes: used + available,
            available_bytes: available,
            used_bytes: used,
        }
    }

    #[test]
    fn the_disk_is_degraded_from_the_volumes_threshold_on() {
        let below = disk_check(&Ok(usage(899, 101)));
        assert_eq!(below["status"], "ok", "{below}");
        assert_eq!(below["used_percent"], 89.9);
        assert_eq!(below["free_bytes"], 101);
        let at = disk_check(&Ok(usage(900, 100)));
        assert_eq!(at["status"], "degraded", "{at}");
        assert_eq!(at["used_percent"], 90.0);
        let unknown = disk_check(&Err(std::io::ErrorKind::NotFound.into()));
        assert_eq!(unknown["status"], "degraded");
        assert!(unknown["detail"].as_str().unwrap().contains("not found"));
        assert!(unknown.get("used_percent").is_none());
    }

    #[test]
    fn the_gateway_is_ok_while_it_serves() {
        for (state, ok) in [
            ("running", true),
            ("draining", true),
            ("starting", false),
            ("stopped", false),
            ("startup_failed", false),
            ("unknown", false),
        ] {
            let c = gateway_check(state, 1, 2);
            assert_eq!(c["status"] == "ok", ok, "{state}: {c}");
            assert_eq!(c["state"], state);
            assert_eq!(
                (&c["connected_platforms"], &c["platforms"]),
                (&json!(1), &json!(2))
            );
        }
    }

    #[test]
    fn platforms_count_as_connected_as_the_original_counts_them() {
        assert!(platform_connected(&json!({"state": "connected"})));
        assert!(platform_connected(&json!({"status": "Running"})));
        assert!(platform_connected(&json!({"state": "", "status": "ok"})));
        assert!(!platform_connected(&json!({"state": "disabled"})));
        assert!(!platform_connected(
            &json!({"state": "fatal", "status": "ok"})
        ));
        assert!(!platform_connected(&json!("connected")));
    }

    #[test]
    fn one_degraded_check_degrades_the_document() {
        let mut checks = Map::new();
        checks.insert("a".into(), check(Status::Ok, None, Value::Null));
        checks.insert("b".into(), background_queues_check(2, 0, 0));
        assert_eq!(document(checks.clone())["status"], "ok");
        checks.insert("c".into(), check(Status::Degraded, Some("x"), Value::Null));
        let doc = document(checks);
        assert_eq!(doc["status"], "degraded");
        assert_eq!(
            doc["checks"]["c"],
            json!({"status": "degraded", "detail": "x"})
        );
        assert_eq!(doc["checks"]["b"]["active_api_runs"], 2);
        assert_eq!(rollup(&[json!({"state": "ok"})]), "degraded", "no status");
    }
}
