//! The HTTP API: `GET /health`, `GET /v1/models`, `POST /v1/chat/completions`.
//!
//! Words:
//! * *app state* — what every request shares: the profile, its soul, the client key, the
//!   provider client and the session store ([`AppState`]).
//! * *API error* — an OpenAI-style error body `{"error": {"message", "type", "code"}}` with
//!   an HTTP status; every failure a client can see has this shape.
//!
//! `router(state)` builds the routes without a socket (tests drive it with `oneshot`);
//! `serve_with_limits(listener, state, shutdown, grace, limits)` runs it on a bound listener
//! (HTTP/1.1, with the connection cap and timeouts of [`crate::connections`]) until the
//! shutdown future fires, then drains in-flight requests for at most `grace`. No signal
//! handler is installed here: PID 1 / the binary owns signals and turns them into the
//! shutdown future.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

use crate::error::Error;
use crate::provider::Provider;
use crate::sessions::{SESSION_HEADER, SessionStore, assemble, validate_session_id};
use crate::settings::{ConnectionLimits, GatewaySettings};

/// Events buffered between the provider reader and a slow client.
const STREAM_BUFFER: usize = 64;
/// Largest accepted request body.
const MAX_BODY: usize = 32 * 1024 * 1024;

/// What every request shares. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Profile name, reported by `/health` and stored with sessions.
    profile: String,
    /// Profile home, named in the "no model" message.
    home: std::path::PathBuf,
    /// `SOUL.md`, the first system message of every chat.
    soul: Option<String>,
    /// Client key; `None` means no auth (loopback only, enforced by settings validation).
    api_key: Option<String>,
    /// Provider client; `None` when no model is configured.
    provider: Option<Provider>,
    /// Conversation store.
    sessions: SessionStore,
}

impl AppState {
    /// Opens the session store and builds the provider client for `settings`.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`] or [`Error::HttpClient`].
    pub fn new(settings: &GatewaySettings) -> Result<AppState, Error> {
        let sessions = SessionStore::open(&settings.state_db)?;
        let provider = settings.provider.clone().map(Provider::new).transpose()?;
        Ok(AppState {
            inner: Arc::new(Inner {
                profile: settings.profile.clone(),
                home: settings.home.clone(),
                soul: settings.soul.clone(),
                api_key: settings.api_key.clone().filter(|k| !k.is_empty()),
                provider,
                sessions,
            }),
        })
    }
}

/// The routes, with auth on `/v1/*` (not on `/health`).
pub fn router(state: AppState) -> Router {
    let v1 = Router::new()
        .route("/v1/models", get(models))
        .route("/v1/capabilities", get(capabilities))
        .route("/v1/chat/completions", post(chat_completions))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .route("/health", get(health))
        .merge(v1)
        // Chat requests carry whole conversations (and images as data URLs): allow more
        // than axum's 2 MiB default, but keep a bound.
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// Serves `router(state)` on `listener` with the default [`ConnectionLimits`] until
/// `shutdown` resolves, then lets in-flight requests finish for at most `grace` (streams still
/// open then are cut).
///
/// # Errors
///
/// The accept loop's I/O error.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    serve_with_limits(
        listener,
        state,
        shutdown,
        grace,
        ConnectionLimits::default(),
    )
    .await
}

/// As [`serve`], with these connection limits: at most `limits.max_connections` connections
/// (idle ones make room for new ones; when all are busy a new one is answered
/// `503 too_many_connections`), request heads within `limits.header_timeout` of their first
/// byte, idle connections closed after `limits.idle_timeout`.
///
/// # Errors
///
/// The accept loop's I/O error.
pub async fn serve_with_limits(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
    limits: ConnectionLimits,
) -> std::io::Result<()> {
    crate::connections::serve_limited(listener, router(state), shutdown, grace, limits).await
}

/// An OpenAI-style error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// `error.message`.
    pub message: String,
    /// `error.type` (`invalid_request_error`, `authentication_error`, `server_error`, ...).
    pub kind: &'static str,
    /// `error.code` (`invalid_api_key`, `model_not_configured`, ...).
    pub code: &'static str,
}

impl ApiError {
    fn new(status: StatusCode, kind: &'static str, code: &'static str, message: String) -> Self {
        ApiError {
            status,
            message,
            kind,
            code,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "code": self.code}})
    }

    /// Maps a gateway error to what the client sees. The message carries the hint, so an API
    /// client learns what to fix without reading the gateway's log.
    pub fn from_error(e: &Error) -> ApiError {
        let with_hint = |e: &Error| match e.hint() {
            Some(h) => format!("{e}; {h}"),
            None => e.to_string(),
        };
        match e {
            Error::NoModel { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "model_not_configured",
                with_hint(e),
            ),
            Error::InvalidSessionId { .. } => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_session_id",
                e.to_string(),
            ),
            Error::ProviderAuth { .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "provider_auth_failed",
                with_hint(e),
            ),
            Error::ProviderUnreachable { .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "provider_unreachable",
                with_hint(e),
            ),
            Error::ProviderTimeout { .. } => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_error",
                "provider_timeout",
                e.to_string(),
            ),
            Error::ProviderStatus { status: 429, .. } => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "rate_limit_exceeded",
                e.to_string(),
            ),
            Error::ProviderStatus {
                status, message, ..
            } if (400..500).contains(status) => {
                // The request itself was refused: pass the provider's status and words on.
                ApiError::new(
                    StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
                    "invalid_request_error",
                    "provider_rejected_request",
                    message.clone(),
                )
            }
            Error::ProviderStatus { .. }
            | Error::ProviderProtocol { .. }
            | Error::ProviderTransport { .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "provider_error",
                e.to_string(),
            ),
            _ => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "internal_error",
                e.to_string(),
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, code = self.code, "{}", self.message);
        }
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError::from_error(&e)
    }
}

/// One SSE event carrying `data`; a multi-line payload gets one `data:` line per line, as
/// the format requires.
fn sse_event(data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 8);
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// Equal-time comparison: both sides are hashed first, so neither the position of the first
/// difference nor the key's length shows in the timing.
fn keys_match(given: &str, expected: &str) -> bool {
    let a = Sha256::digest(given.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    let diff = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

async fn require_key(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(expected) = state.inner.api_key.as_deref() else {
        return next.run(req).await;
    };
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    match given {
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "missing_api_key",
            "missing `Authorization: Bearer <API_SERVER_KEY>` header".into(),
        )
        .into_response(),
        Some(key) if keys_match(key, expected) => next.run(req).await,
        Some(_) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            "invalid API key".into(),
        )
        .into_response(),
    }
}

async fn health(State(state): State<AppState>) -> Response {
    axum::Json(json!({
        "status": "ok",
        "profile": state.inner.profile,
        "version": env!("CARGO_PKG_VERSION"),
        "model_configured": state.inner.provider.is_some(),
    }))
    .into_response()
}

async fn models(State(state): State<AppState>) -> Response {
    let data: Vec<Value> = state
        .inner
        .provider
        .iter()
        .map(|p| {
            json!({
                "id": p.settings().model,
                "object": "model",
                "created": 0,
                "owned_by": format!("hermes:{}", state.inner.profile),
            })
        })
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

/// What this API server offers, in the shape Hermes API clients probe for
/// (`hermes-agent-api-client`'s `probe_capabilities`).
async fn capabilities(State(state): State<AppState>) -> Response {
    let model = state
        .inner
        .provider
        .as_ref()
        .map(|p| p.settings().model.clone());
    axum::Json(json!({
        "object": "hermes.api_server.capabilities",
        "platform": "hermes-agent",
        "profile": state.inner.profile,
        "model": model,
        "auth": {"type": "bearer", "required": state.inner.api_key.is_some()},
        "features": {
            "chat_completions": true,
            "chat_completions_streaming": true,
            "sessions": true,
            "models": true,
        },
    }))
    .into_response()
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        "invalid_request",
        message.into(),
    )
}

async fn chat_completions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let inner = &state.inner;
    let provider = inner.provider.clone().ok_or_else(|| {
        ApiError::from_error(&Error::NoModel {
            profile: inner.profile.clone(),
            home: inner.home.clone(),
        })
    })?;
    let mut request: Value = serde_json::from_slice(&body)
        .map_err(|e| invalid(format!("request body is not valid JSON: {e}")))?;
    let Some(obj) = request.as_object_mut() else {
        return Err(invalid("request body must be a JSON object"));
    };
    let messages = match obj.remove("messages") {
        Some(Value::Array(m)) => m,
        _ => return Err(invalid("`messages` must be an array")),
    };
    if messages
        .iter()
        .any(|m| m.get("role").and_then(Value::as_str).is_none())
    {
        return Err(invalid("every message needs a string `role`"));
    }
    let stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);

    let session = match headers.get(SESSION_HEADER) {
        None => None,
        Some(v) => {
            let id = v
                .to_str()
                .map_err(|_| invalid("session id must be ASCII"))?
                .to_string();
            validate_session_id(&id)?;
            Some(id)
        }
    };
    let history = match &session {
        Some(id) => inner.sessions.history_async(id.clone()).await?,
        None => Vec::new(),
    };
    let assembled = assemble(inner.soul.as_deref(), &history, &messages);
    if assembled
        .upstream
        .iter()
        .all(|m| m.get("role").and_then(Value::as_str) == Some("system"))
    {
        return Err(invalid("`messages` has no user message"));
    }
    obj.insert("messages".into(), Value::Array(assembled.upstream));

    let session_header = session
        .as_deref()
        .and_then(|s| HeaderValue::from_str(s).ok());
    if !stream {
        let answer = provider.complete(request).await?;
        if let Some(id) = session {
            let mut turn = assembled.new_turn;
            let reply = answer
                .pointer("/choices/0/message")
                .cloned()
                .unwrap_or_else(|| json!({"role": "assistant", "content": ""}));
            turn.push(reply);
            inner
                .sessions
                .append_async(id, inner.profile.clone(), turn)
                .await?;
        }
        let mut resp = axum::Json(answer).into_response();
        if let Some(h) = session_header {
            resp.headers_mut().insert(SESSION_HEADER, h);
        }
        return Ok(resp);
    }

    // Streaming: every error up to here (and inside `provider.stream`, retries included) is
    // still a plain JSON error with a status. From here on the status is 200 and failures
    // become an error event in the stream.
    let mut upstream = provider.stream(request).await?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(STREAM_BUFFER);
    let store = inner.sessions.clone();
    let profile = inner.profile.clone();
    let new_turn = assembled.new_turn;
    tokio::spawn(async move {
        let mut answer = String::new();
        let mut failed = false;
        while let Some(event) = upstream.next_event().await {
            let data = match event {
                Ok(ev) => {
                    if let Some(d) = &ev.delta {
                        answer.push_str(d);
                    }
                    ev.data
                }
                Err(e) => {
                    tracing::warn!(error = %e, "provider stream failed");
                    failed = true;
                    ApiError::from_error(&e).body().to_string()
                }
            };
            if tx.send(sse_event(&data)).await.is_err() {
                // The client went away: stop reading (dropping the upstream response closes
                // that connection too) and store nothing, since the client never got the
                // answer.
                return;
            }
            if failed {
                break;
            }
        }
        // Store the turn before `[DONE]`: a client may send its next turn the moment it sees
        // `[DONE]`, and that turn must find this one in the history.
        if let (Some(id), false) = (session, failed) {
            let mut turn = new_turn;
            turn.push(json!({"role": "assistant", "content": answer}));
            if let Err(e) = store.append_async(id, profile, turn).await {
                tracing::warn!(error = %e, "could not store the session turn");
            }
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
    });
    let body = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|o| o.map(Ok::<Bytes, Infallible>))
    });
    let mut resp = Response::new(Body::from_stream(body));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if let Some(v) = session_header {
        h.insert(SESSION_HEADER, v);
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request as HttpRequest;
    use tower::ServiceExt;

    fn state(dir: &std::path::Path, key: Option<&str>) -> AppState {
        let mut s = GatewaySettings::new("work", dir);
        s.api_key = key.map(String::from);
        AppState::new(&s).unwrap()
    }

    async fn call(app: Router, req: HttpRequest<Body>) -> (StatusCode, Value) {
        let resp = app.oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    #[test]
    fn sse_events_are_framed_per_line() {
        assert_eq!(&sse_event("{}")[..], b"data: {}\n\n");
        assert_eq!(&sse_event("a\nb")[..], b"data: a\ndata: b\n\n");
    }

    #[test]
    fn key_comparison() {
        assert!(keys_match("abc", "abc"));
        assert!(!keys_match("abd", "abc"));
        assert!(!keys_match("", "abc"));
        assert!(!keys_match("abcd", "abc"));
    }

    #[tokio::test]
    async fn health_needs_no_key() {
        let dir = tempfile::tempdir().unwrap();
        let app = router(state(dir.path(), Some("k")));
        let (status, body) = call(
            app,
            HttpRequest::get("/health").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["status"], "ok");
        assert_eq!(body["profile"], "work");
        assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    }

    #[tokio::test]
    async fn v1_needs_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let app = router(state(dir.path(), Some("sekret")));
        let (status, body) = call(
            app.clone(),
            HttpRequest::get("/v1/models").body(Body::empty()).unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"]["code"], "missing_api_key");
        let req = HttpRequest::get("/v1/models")
            .header("authorization", "Bearer wrong")
            .body(Body::empty())
            .unwrap();
        let (status, body) = call(app.clone(), req).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(body["error"]["code"], "invalid_api_key");
        let req = HttpRequest::get("/v1/models")
            .header("authorization", "Bearer sekret")
            .body(Body::empty())
            .unwrap();
        let (status, body) = call(app, req).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body["object"], "list");
    }

    #[tokio::test]
    async fn chat_without_model_is_503_naming_the_keys() {
        let dir = tempfile::tempdir().unwrap();
        let app = router(state(dir.path(), None));
        let req = HttpRequest::post("/v1/chat/completions")
            .header("content-type", "application/json")
            .body(Body::from(
                r#"{"messages":[{"role":"user","content":"hi"}]}"#,
            ))
            .unwrap();
        let (status, body) = call(app, req).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"]["code"], "model_not_configured");
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("model.default") && msg.contains("OPENAI_API_KEY"),
            "{msg}"
        );
    }

    #[tokio::test]
    async fn bad_body_is_an_openai_style_400() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = GatewaySettings::new("work", dir.path());
        s.provider = Some(crate::settings::ProviderSettings::new(
            "http://127.0.0.1:9",
            "m",
        ));
        let app = router(AppState::new(&s).unwrap());
        for body in [
            "not json",
            r#"{"messages": 3}"#,
            r#"{"messages":[{"content":"x"}]}"#,
        ] {
            let req = HttpRequest::post("/v1/chat/completions")
                .body(Body::from(body))
                .unwrap();
            let (status, json) = call(app.clone(), req).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(json["error"]["type"], "invalid_request_error", "{body}");
        }
        let req = HttpRequest::post("/v1/chat/completions")
            .header(SESSION_HEADER, "bad id!")
            .body(Body::from(
                r#"{"messages":[{"role":"user","content":"x"}]}"#,
            ))
            .unwrap();
        let (status, json) = call(app, req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(json["error"]["code"], "invalid_session_id");
    }
}
