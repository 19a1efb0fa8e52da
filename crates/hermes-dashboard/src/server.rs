//! The router and serving it. Every handler is a client: of the control socket (on a blocking
//! thread) and of `hermes-home`, never keeping state of its own.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::guard::{Guard, detail};
use crate::{Error, Settings, assets, pages};

/// The start of the line `hermes dashboard` prints on stdout once it listens,
/// `HERMES_DASHBOARD_READY port=N` (the original's, which its launchers wait for).
pub const READY_TOKEN: &str = "HERMES_DASHBOARD_READY";

/// Looks up environment variables (the process's in production, a fixed set in tests).
pub type Vars = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What handlers share.
#[derive(Clone)]
pub struct App {
    /// `HERMES_HOME`.
    pub root: PathBuf,
    /// The environment.
    pub vars: Vars,
    guard: Arc<Guard>,
    /// Whether signing in takes credentials (basic or a proxy's user) rather than the token
    /// link of loopback: `/api/health`'s `auth_required`, as the original's auth gate.
    auth_required: bool,
}

impl App {
    /// The per-start token pages embed for their POSTs.
    pub fn token(&self) -> &str {
        self.guard.token()
    }

    /// Whether signing in takes credentials rather than the token link (the original's
    /// `auth_required`, in `/api/health` and `/api/status`).
    pub fn auth_required(&self) -> bool {
        self.auth_required
    }
}

/// The prefix the browser sees in front of the dashboard's paths: `""` at the root,
/// `/hermes` under a reverse proxy's sub-path. Set by the guard on every request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Base(pub String);

/// The dashboard's router for `root` (`HERMES_HOME`), guarded by `settings`.
pub fn router(root: PathBuf, settings: Settings, vars: Vars) -> Router {
    let auth_required = settings.auth != crate::Auth::Token;
    let guard = Guard::new(settings);
    let app = App {
        root,
        vars,
        guard: guard.clone(),
        auth_required,
    };
    let inner = pages::routes()
        .route("/assets/{file}", get(asset))
        .route("/api/health", get(health))
        .route("/api/openapi.json", get(openapi))
        .route(crate::metrics::PATH, get(crate::metrics::scrape))
        .with_state(app)
        .layer(axum::middleware::from_fn_with_state(
            guard.clone(),
            crate::guard::guard,
        ));
    // Outermost: every error answer counts in the dashboard's own health, refusals included.
    crate::guard::with_base_path(inner, guard)
        .layer(axum::middleware::from_fn(crate::health::observe))
}

/// Binds `settings`' address.
pub async fn bind(settings: &Settings) -> Result<TcpListener, Error> {
    let addr = settings.bind_addr();
    TcpListener::bind(&addr)
        .await
        .map_err(|source| Error::Bind { addr, source })
}

/// Serves `router` on `listener` until the process ends, with the gateway's connection
/// handling (`hermes_http::serve_app`: a cap on connections, request-head and
/// idle timeouts), so slow or idle clients — unauthenticated ones included — cannot hold the
/// dashboard. Handlers get the client's address as `ConnectInfo<SocketAddr>`.
pub async fn serve(listener: TcpListener, router: Router) -> Result<(), Error> {
    hermes_http::serve_app(
        listener,
        router,
        std::future::pending(),
        Duration::from_secs(5),
        hermes_http::ConnectionLimits::default(),
    )
    .await
    .map_err(Error::Serve)
}

/// An error answer `{"detail", "hint"}` with `status`: what the API says for any refusal
/// (`detail` is the error in one line, `hint` what to do, as the CLI's `error:`/`hint:`).
pub fn problem(status: StatusCode, detail: &str, hint: Option<String>) -> Response {
    (status, Json(json!({ "detail": detail, "hint": hint }))).into_response()
}

/// Runs `work` on the blocking pool (file and socket work blocks); a task that panicked or
/// was cancelled is a 500, never a hung request.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Response> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        detail(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the request's task failed: {e}"),
        )
    })
}

async fn asset(Path(file): Path<String>) -> Response {
    match assets::get(&file) {
        Some((kind, body)) => ([(header::CONTENT_TYPE, kind)], body).into_response(),
        None => detail(StatusCode::NOT_FOUND, "No such asset"),
    }
}

/// `GET /api/health`, public: the original's `{ok, version, auth_required}`, with our
/// `status` kept beside it for the probes already reading it. It answers from memory (no file,
/// no supervisor), so a busy or degraded dashboard still says it is alive.
async fn health(State(app): State<App>) -> Json<Value> {
    Json(json!({
        "ok": true,
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "auth_required": app.auth_required,
    }))
}

async fn openapi() -> Json<Value> {
    Json(crate::openapi::document())
}
