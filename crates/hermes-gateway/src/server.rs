//! The HTTP API: `GET /health`, `GET /v1/models`, `GET /v1/capabilities`,
//! `POST /v1/chat/completions`, and the probes `GET /ready`, `GET /health/detailed`,
//! `GET /metrics`.
//!
//! Words:
//! * *app state* — what every request shares: the profile, its soul, the client key, the
//!   provider client, the session store and the metrics ([`AppState`]).
//! * *API error* — an OpenAI-style error body with an HTTP status ([`crate::api_error`]); every
//!   failure a client can see has this shape.
//!
//! The chat endpoint itself lives in `completions`, the probes in `probes`, and the access log
//! (a middleware around every route, unknown paths included) in `access`.
//!
//! `router(state)` builds the routes without a socket (tests drive it with `oneshot`);
//! `serve_with_limits(listener, state, shutdown, grace, limits)` runs it on a bound listener
//! (HTTP/1.1, with the connection cap and timeouts of `hermes_http`) until the
//! shutdown future fires, then drains in-flight requests for at most `grace` and returns what
//! the drain did ([`DrainReport`]). No signal
//! handler is installed here: PID 1 / the binary owns signals and turns them into the
//! shutdown future.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;

use crate::api_error::ApiError;
use crate::completions::chat_completions;
use crate::error::Error;
use crate::live::{Live, Role};
use crate::metrics::Metrics;
use crate::multiplex::Directory;
use hermes_http::{ConnectionLimits, DrainReport};

use crate::settings::GatewaySettings;
use crate::source::{Fingerprint, Profile, SettingsSource};
use hermes_sessions::SessionStore;

/// Largest accepted request body.
const MAX_BODY: usize = 32 * 1024 * 1024;

/// What every request shares. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    pub(crate) inner: Arc<Inner>,
}

/// The shared state itself (the chat endpoint in `completions` reads it).
#[derive(Debug)]
pub(crate) struct Inner {
    /// Profile name, reported by `/health` and stored with sessions.
    pub(crate) profile: String,
    /// Profile home, named in the "no model" message.
    pub(crate) home: std::path::PathBuf,
    /// The soul, client key and provider in use, re-read when their files change.
    pub(crate) live: Live,
    /// Conversation store.
    pub(crate) sessions: SessionStore,
    /// The store's file, checked read-only by `/health/detailed`.
    pub(crate) state_db: std::path::PathBuf,
    /// Counters for `/metrics`, and the last upstream call behind `/ready`.
    pub(crate) metrics: Arc<Metrics>,
    /// The volume's profiles when one gateway serves them all (`multiplex`), shared
    /// by every profile's state; `None`: this gateway serves its profile alone.
    pub(crate) directory: Option<Arc<Directory>>,
}

impl AppState {
    /// Opens the session store and builds the provider client for settings built in code
    /// (never read again, `SOUL.md` as the system prompt): [`AppState::for_profile`] of them.
    ///
    /// # Errors
    ///
    /// Those of [`AppState::for_profile`].
    pub fn new(settings: &GatewaySettings) -> Result<AppState, Error> {
        AppState::for_profile(&Profile::from(settings.clone()))
    }

    /// Opens the session store and builds the provider client for `profile`.
    ///
    /// # Errors
    ///
    /// [`Error::Sessions`] (the store), or [`Error::Provider`] when the provider's HTTP client
    /// cannot be built.
    ///
    /// With [`GatewaySettings::multiplex`], `profile` is the default one and the state
    /// serves every profile of the volume (`multiplex`).
    pub fn for_profile(profile: &Profile) -> Result<AppState, Error> {
        let settings = &profile.settings;
        let directory = settings
            .multiplex
            .then(|| Arc::new(Directory::new(settings.home.clone())));
        let live = Live::new(profile, Role::Listener)?;
        AppState::with_live(settings, live, directory)
    }

    /// The state of a named profile served on the multiplexing gateway's listener.
    pub(crate) fn mounted(
        profile: &Profile,
        directory: &Arc<Directory>,
    ) -> Result<AppState, Error> {
        let live = Live::new(profile, Role::Mounted)?;
        AppState::with_live(&profile.settings, live, Some(Arc::clone(directory)))
    }

    /// The state of a named profile whose settings cannot be read (`error`): it refuses every
    /// keyed request and reads its files again when they change.
    pub(crate) fn unconfigured(
        profile: &str,
        dir: &std::path::Path,
        source: SettingsSource,
        fingerprint: Fingerprint,
        error: &Error,
        directory: &Arc<Directory>,
    ) -> Result<AppState, Error> {
        let fixed = GatewaySettings::new(profile, dir);
        let live = Live::unconfigured(fixed.clone(), source, fingerprint, error);
        AppState::with_live(&fixed, live, Some(Arc::clone(directory)))
    }

    fn with_live(
        settings: &GatewaySettings,
        live: Live,
        directory: Option<Arc<Directory>>,
    ) -> Result<AppState, Error> {
        let sessions = SessionStore::open(&settings.state_db)?;
        Ok(AppState {
            inner: Arc::new(Inner {
                profile: settings.profile.clone(),
                home: settings.home.clone(),
                live,
                sessions,
                state_db: settings.state_db.clone(),
                metrics: Arc::new(Metrics::new()),
                directory,
            }),
        })
    }

    /// Whether this state is a named profile served on another profile's listener.
    pub(crate) fn is_mounted(&self) -> bool {
        self.inner.live.role() == Role::Mounted
    }
}

/// The routes of the gateway: one profile's (`profile_routes`), or, when the state serves
/// every profile, those of each profile under its prefix (`multiplex`).
pub fn router(state: AppState) -> Router {
    match state.inner.directory.clone() {
        Some(directory) if !state.is_mounted() => crate::multiplex::app(state, directory),
        _ => profile_routes(state),
    }
}

/// One profile's routes, with auth on `/v1/*` and `/health/detailed` (not on `/health`,
/// `/ready`, the listener's `/metrics`: see `probes` for why; a multiplexed profile's
/// `/p/<name>/metrics` needs its key, so its name and activity are told only to its clients),
/// every request observed by the access log. When multiplexing, `/p/...` paths that reach them
/// name no profile served: 404.
pub(crate) fn profile_routes(state: AppState) -> Router {
    let mut keyed = Router::new()
        .route("/v1/models", get(models))
        .route("/v1/capabilities", get(capabilities))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/health/detailed", get(crate::probes::health_detailed));
    let mut routes = Router::new()
        .route("/health", get(health))
        .route("/ready", get(crate::probes::ready));
    if state.is_mounted() {
        keyed = keyed.route("/metrics", get(crate::probes::metrics));
    } else {
        routes = routes.route("/metrics", get(crate::probes::metrics));
    }
    let keyed = keyed.route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    let routes = routes.merge(keyed);
    let routes = if state.inner.directory.is_some() {
        // `{*rest}` needs at least one character: `/p/` itself is a route of its own.
        routes
            .route("/p/", any(crate::multiplex::not_served))
            .route("/p/{*rest}", any(crate::multiplex::not_served))
    } else {
        routes
    };
    routes
        // Chat requests carry whole conversations (and images as data URLs): allow more
        // than axum's 2 MiB default, but keep a bound.
        .layer(DefaultBodyLimit::max(MAX_BODY))
        // Outermost, so refusals (401, 413, 404) are logged and counted too.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::access::observe,
        ))
        .with_state(state)
}

/// Serves `router(state)` on `listener` with the default [`ConnectionLimits`] until
/// `shutdown` resolves, then lets in-flight requests finish for at most `grace` (streams still
/// open then are cut), and says what the drain did.
///
/// # Errors
///
/// The accept loop's I/O error.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<DrainReport> {
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
) -> std::io::Result<DrainReport> {
    let metrics = Arc::clone(&state.inner.metrics);
    hermes_http::serve_observed(listener, router(state), shutdown, grace, limits, metrics).await
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

/// The key of `Authorization: Bearer <key>`, if the request sends one.
fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// Whether the request presents `expected` (false when there is no key to present).
fn presents_key(expected: Option<&str>, headers: &axum::http::HeaderMap) -> bool {
    match (bearer(headers), expected) {
        (Some(given), Some(expected)) => keys_match(given, expected),
        _ => false,
    }
}

async fn require_key(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let snapshot = state.inner.live.current();
    // The handler uses the snapshot the key was checked against (one look at the files per
    // request, and one set of settings for the whole request).
    req.extensions_mut().insert(Arc::clone(&snapshot));
    let expected = snapshot.api_key.as_deref();
    if expected.is_none() && !state.is_mounted() {
        return next.run(req).await;
    }
    match bearer(req.headers()) {
        None => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "missing_api_key",
            "missing `Authorization: Bearer <API_SERVER_KEY>` header".into(),
        )
        .into_response(),
        // A mounted profile without a key of its own matches no key (fail closed).
        Some(_) if presents_key(expected, req.headers()) => next.run(req).await,
        Some(_) => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid_api_key",
            "invalid API key".into(),
        )
        .into_response(),
    }
}

async fn health(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    let snapshot = state.inner.live.current();
    // The mode and who is served: this profile alone, or every profile of the volume. The
    // names of the others are the listener's to tell, to a client holding its key: `/health`
    // needs no key, and must not enumerate the volume's profiles.
    let (mode, profiles) = match &state.inner.directory {
        Some(directory) => {
            let listener_client =
                !state.is_mounted() && presents_key(snapshot.api_key.as_deref(), &headers);
            ("multiplex", listener_client.then(|| directory.served()))
        }
        None => ("single", Some(vec![state.inner.profile.clone()])),
    };
    let mut body = json!({
        "status": "ok",
        "profile": state.inner.profile,
        "version": env!("CARGO_PKG_VERSION"),
        "model_configured": snapshot.provider.is_some(),
        "mode": mode,
    });
    if let Some(profiles) = profiles {
        body["profiles"] = json!(profiles);
    }
    if let Some(error) = state.inner.live.config_error() {
        body["config_error"] = Value::String(error);
    }
    axum::Json(body).into_response()
}

async fn models(State(state): State<AppState>) -> Response {
    let snapshot = state.inner.live.current();
    let data: Vec<Value> = snapshot
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
    let snapshot = state.inner.live.current();
    let model = snapshot
        .provider
        .as_ref()
        .map(|p| p.settings().model.clone());
    axum::Json(json!({
        "object": "hermes.api_server.capabilities",
        "platform": "hermes-agent",
        "profile": state.inner.profile,
        "model": model,
        "auth": {"type": "bearer", "required": snapshot.api_key.is_some()},
        "features": {
            "chat_completions": true,
            "chat_completions_streaming": true,
            "sessions": true,
            "models": true,
        },
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request as HttpRequest;
    use hermes_sessions::SESSION_HEADER;
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
        s.provider = Some(hermes_provider::ProviderSettings::new(
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
            .header(SESSION_HEADER, "../etc")
            .body(Body::from(
                r#"{"messages":[{"role":"user","content":"x"}]}"#,
            ))
            .unwrap();
        let (status, json) = call(app, req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(json["error"]["code"], "invalid_session_id");
    }
}
