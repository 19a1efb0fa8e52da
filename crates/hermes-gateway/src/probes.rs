//! Endpoints for machines: `GET /ready` (readiness probe), `GET /health/detailed` (the
//! gateway's state for people and dashboards) and `GET /metrics` (Prometheus).
//!
//! Who needs the key, and why:
//! * `/ready` — never: Docker and Kubernetes probes cannot easily send one. It says only
//!   whether the gateway can serve chats, and a reason code.
//! * `/metrics` — never: Prometheus scrapers are usually set up without credentials (as
//!   LiteLLM's and TensorZero's `/metrics` are). It holds counts, durations, status codes,
//!   error kinds, the version and the profile's name: no secret, no message content, no
//!   session id, no model or address.
//! * `/health/detailed` — the client key when one is set (like `/v1/*`, and like the original's
//!   `/health/detailed`): it shows configuration (model, provider address, why an edit was
//!   refused).
//!
//! `/health` (liveness) stays in `server`: it answers from memory, so a busy or degraded
//! gateway still says it is alive.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::live::Snapshot;
use crate::metrics::{LastCall, Readiness};
use crate::server::{AppState, Inner};

/// How long the session-store check may wait for a busy database.
const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The readiness of the gateway now, with the snapshot it was decided on.
fn readiness(inner: &Inner) -> (Readiness, Arc<Snapshot>) {
    let snapshot = inner.live.current();
    let last = inner.metrics.last_call();
    let r = Readiness::decide(snapshot.provider.is_some(), last.as_ref(), &snapshot);
    (r, snapshot)
}

/// `GET /ready`: 200 `{"status":"ready"}`, or 503 with the reason.
pub(crate) async fn ready(State(state): State<AppState>) -> Response {
    let (r, _) = readiness(&state.inner);
    match (r.reason(), r.message()) {
        (Some(reason), Some(message)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"status": "not_ready", "reason": reason, "message": message})),
        )
            .into_response(),
        _ => axum::Json(json!({"status": "ready"})).into_response(),
    }
}

/// `GET /metrics`: the Prometheus text exposition.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let inner = &state.inner;
    let (r, _) = readiness(inner);
    // The drains are the listener's: a multiplexed profile's are its gateway's, at the root.
    let listener_home = inner
        .directory
        .as_ref()
        .map_or(inner.home.as_path(), |d| d.root());
    // A small file; one that cannot be read counts nothing rather than failing the scrape.
    let drains = hermes_home::drains::read(listener_home).unwrap_or_else(|e| {
        tracing::debug!("gateway_drains.json: {}", hermes_errors::one_line(&e));
        hermes_home::drains::Drains::default()
    });
    let text = inner.metrics.render(
        &inner.profile,
        r == Readiness::Ready,
        inner.live.config_error().is_some(),
        &drains,
    );
    let mut resp = text.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// `GET /health/detailed`: what the gateway runs with and how it is doing.
pub(crate) async fn health_detailed(State(state): State<AppState>) -> Response {
    let inner = &state.inner;
    let (r, snapshot) = readiness(inner);
    let config_error = inner.live.config_error();
    let store = store_check(inner.state_db.clone()).await;
    let provider = snapshot.provider.as_ref().map(|p| p.settings());
    let degraded = r != Readiness::Ready || config_error.is_some() || store.is_err();
    let mut body = json!({
        "status": if degraded { "degraded" } else { "ok" },
        "platform": "hermes-agent",
        "profile": inner.profile,
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "uptime_seconds": inner.metrics.uptime().as_secs_f64(),
        "ready": r == Readiness::Ready,
        "model": provider.map(|p| p.model.clone()),
        "provider": provider.map(|p| json!({"base_url": public_url(&p.base_url)})),
        "config_error": config_error,
        "last_upstream_call": inner.metrics.last_call().as_ref().map(last_call_json),
        "requests_in_flight": inner.metrics.in_flight(),
        "open_connections": inner.metrics.open_connections(),
        "session_store": match &store {
            Ok(()) => json!({"reachable": true}),
            Err(e) => json!({"reachable": false, "error": e}),
        },
    });
    if let (Some(reason), Some(message)) = (r.reason(), r.message()) {
        body["not_ready"] = json!({"reason": reason, "message": message});
    }
    axum::Json(body).into_response()
}

fn last_call_json(c: &LastCall) -> Value {
    let at = c.at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let ago = c.at.elapsed().unwrap_or_default();
    json!({
        "at_unix": at.as_secs_f64(),
        "seconds_ago": ago.as_secs_f64(),
        "ok": !c.failed(),
        "status": c.status,
        "error": c.error.map(crate::metrics::UpstreamError::label),
        "latency_ms": c.latency.as_secs_f64() * 1000.0,
    })
}

/// A provider address fit to show: no user or password, no query (a key may hide in
/// either), no fragment. `None` when it does not parse.
fn public_url(base_url: &str) -> Option<String> {
    let mut url = reqwest::Url::parse(base_url).ok()?;
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    Some(url.to_string())
}

/// Reads `state.db`'s schema read-only (as the original's readiness check does): a missing,
/// locked past the timeout, unreadable or corrupt database fails.
async fn store_check(path: PathBuf) -> Result<(), String> {
    let checked = tokio::task::spawn_blocking(move || {
        let conn = rusqlite::Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(STORE_CHECK_TIMEOUT)?;
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| {
            row.get::<_, i64>(0)
        })?;
        Ok::<(), rusqlite::Error>(())
    })
    .await;
    match checked {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("the check did not finish: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_addresses_lose_their_secrets() {
        assert_eq!(
            public_url("https://user:pw@api.example.com/v1?api-key=k#x").as_deref(),
            Some("https://api.example.com/v1")
        );
        assert_eq!(
            public_url("http://127.0.0.1:8080/v1").as_deref(),
            Some("http://127.0.0.1:8080/v1")
        );
        assert_eq!(public_url("not a url"), None);
    }

    #[tokio::test]
    async fn the_store_check_reads_without_creating() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("state.db");
        assert!(store_check(missing.clone()).await.is_err());
        assert!(!missing.exists(), "a check must not create the database");
        rusqlite::Connection::open(&missing)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        assert_eq!(store_check(missing.clone()).await, Ok(()));
        std::fs::write(&missing, b"this is not a database, just bytes long enough").unwrap();
        assert!(store_check(missing).await.is_err());
    }
}
