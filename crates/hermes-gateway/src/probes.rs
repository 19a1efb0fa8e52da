//! Endpoints for machines: `GET /ready` (readiness probe), `GET /health/detailed` (the
//! gateway's state for people and dashboards) and `GET /metrics` (Prometheus).
//!
//! Who needs the key, and why:
//! * `/ready` — never: Docker and Kubernetes probes cannot easily send one. It says only
//!   whether the gateway can serve chats, and a reason code.
//! * `/metrics` — never at the listener: Prometheus scrapers are usually set up without
//!   credentials (as LiteLLM's and TensorZero's `/metrics` are). It holds counts, durations,
//!   status codes, error kinds, the version and the profile's name: no secret, no message
//!   content, no session id, no model or address. A multiplexed profile's `/p/<name>/metrics`
//!   needs that profile's key: who the volume's other profiles are is not for everyone.
//! * `/health/detailed` — the client key when one is set (like `/v1/*`, and like the original's
//!   `/health/detailed` since 0.20): it shows configuration (model, provider address, why an
//!   edit was refused). Its `readiness` is the original's document (`crate::readiness`).
//!
//! `/health` (liveness) stays in `server`: it answers from memory, so a busy or degraded
//! gateway still says it is alive.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::live::Snapshot;
use crate::metrics::{LastCall, Readiness};
use crate::readiness::{StateDb, Status, background_queues_check, check, gateway_check};
use crate::server::{AppState, Inner};

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

/// `GET /health/detailed`: what the gateway runs with and how it is doing, with the
/// original's `readiness` document (`readiness`); `status` is that document's rollup.
pub(crate) async fn health_detailed(State(state): State<AppState>) -> Response {
    let inner = &state.inner;
    let (r, snapshot) = readiness(inner);
    let config_error = inner.live.config_error();
    let (store, disk) = look_at_the_volume(inner.state_db.clone(), inner.home.clone()).await;
    let provider = snapshot.provider.as_ref().map(|p| p.settings());
    let readiness = readiness_document(inner, &r, config_error.is_some(), &store, &disk);
    let mut body = json!({
        "status": readiness["status"],
        "readiness": readiness,
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
            StateDb::Readable => json!({"reachable": true}),
            StateDb::Missing => json!({"reachable": false, "error": "state.db is missing"}),
            StateDb::Unreadable(e) => json!({"reachable": false, "error": e}),
        },
    });
    if let (Some(reason), Some(message)) = (r.reason(), r.message()) {
        body["not_ready"] = json!({"reason": reason, "message": message});
    }
    axum::Json(body).into_response()
}

/// The original's readiness checks for this gateway (`crate::readiness` has their shapes).
///
/// How ours fills them: `model` is also degraded while the provider's last call with these
/// settings failed (what `/ready` says), `config` while an edit is refused (the last good
/// settings stay in use), `state_db` when the store the gateway opened at start is missing or
/// unreadable. The gateway answering is `running` (a stopping one accepts no more requests)
/// with one platform, its API server, connected. Its API runs are the chat completions in
/// flight; it has no process or delegation queues (0).
fn readiness_document(
    inner: &Inner,
    ready: &Readiness,
    config_refused: bool,
    store: &StateDb,
    disk: &std::io::Result<hermes_home::disk::DiskUsage>,
) -> Value {
    let config = if config_refused {
        check(
            Status::Degraded,
            Some("invalid config (the last good settings are in use)"),
            Value::Null,
        )
    } else if !hermes_home::layout::config_path(&inner.home).exists() {
        check(Status::Ok, Some("using defaults"), Value::Null)
    } else {
        check(Status::Ok, None, Value::Null)
    };
    let model = match ready.reason() {
        None => check(Status::Ok, None, Value::Null),
        Some(reason) => check(Status::Degraded, Some(reason), Value::Null),
    };
    let active_runs = u64::try_from(inner.metrics.chats_in_flight()).unwrap_or(0);
    let mut checks = Map::new();
    checks.insert("state_db".into(), store.check(false));
    checks.insert("config".into(), config);
    checks.insert("model".into(), model);
    checks.insert("disk".into(), crate::readiness::disk_check(disk));
    checks.insert("gateway".into(), gateway_check("running", 1, 1));
    checks.insert(
        "background_queues".into(),
        background_queues_check(active_runs, 0, 0),
    );
    crate::readiness::document(checks)
}

/// The store probe and the volume's usage, on the blocking pool (a file system that hangs
/// holds a blocking thread, not the runtime).
async fn look_at_the_volume(
    state_db: PathBuf,
    home: PathBuf,
) -> (StateDb, std::io::Result<hermes_home::disk::DiskUsage>) {
    tokio::task::spawn_blocking(move || {
        (
            hermes_sessions::probe::probe(&state_db),
            hermes_home::disk::usage(&home),
        )
    })
    .await
    .unwrap_or_else(|e| {
        let why = format!("the check did not finish: {e}");
        (
            StateDb::Unreadable(why.clone()),
            Err(std::io::Error::other(why)),
        )
    })
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
}
