//! The routes and serving them. Every handler is a client: status and actions go through the
//! control socket on a blocking thread, exactly as `hermes service status|start|stop|restart`.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::guard::{Guard, detail};
use crate::{Error, Settings, page, status};

/// How often the event stream asks the supervisor (the limit: at most every 500 ms).
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);
/// How often the event stream sends a keepalive comment when nothing changed.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// Looks up environment variables (the process's in production, a fixed set in tests).
pub type Vars = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// What handlers share.
#[derive(Clone)]
pub struct App {
    root: PathBuf,
    vars: Vars,
    guard: Arc<Guard>,
}

/// The dashboard's router for `root` (`HERMES_HOME`), guarded by `settings`.
pub fn router(root: PathBuf, settings: Settings, vars: Vars) -> Router {
    let guard = Guard::new(settings);
    let app = App {
        root,
        vars,
        guard: guard.clone(),
    };
    Router::new()
        .route("/", get(overview))
        .route("/assets/app.css", get(css))
        .route("/assets/app.js", get(js))
        .route("/api/health", get(health))
        .route("/api/status", get(api_status))
        .route("/api/events", get(events))
        .route("/api/services/{name}/{action}", post(action))
        .route("/api/openapi.json", get(openapi))
        .with_state(app)
        .layer(axum::middleware::from_fn_with_state(
            guard,
            crate::guard::guard,
        ))
}

/// Binds `settings`' address.
pub async fn bind(settings: &Settings) -> Result<TcpListener, Error> {
    let addr = settings.bind_addr();
    TcpListener::bind(&addr)
        .await
        .map_err(|source| Error::Bind { addr, source })
}

/// Serves `router` on `listener` until the process ends, with the gateway's connection
/// handling (`hermes_gateway::connections::serve_app`: a cap on connections, request-head and
/// idle timeouts), so slow or idle clients — unauthenticated ones included — cannot hold the
/// dashboard. Handlers get the client's address as `ConnectInfo<SocketAddr>`.
pub async fn serve(listener: TcpListener, router: Router) -> Result<(), Error> {
    hermes_gateway::connections::serve_app(
        listener,
        router,
        std::future::pending(),
        Duration::from_secs(5),
        hermes_gateway::ConnectionLimits::default(),
    )
    .await
    .map_err(Error::Serve)
}

async fn overview(State(app): State<App>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page::overview(app.guard.token()),
    )
        .into_response()
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        page::CSS,
    )
        .into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        page::JS,
    )
        .into_response()
}

async fn health() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// One fresh snapshot, taken on a blocking thread (the control socket client blocks).
async fn fresh(app: &App) -> Value {
    let (root, vars) = (app.root.clone(), app.vars.clone());
    tokio::task::spawn_blocking(move || status::snapshot(&root, &*vars))
        .await
        .unwrap_or_else(|e| {
            json!({
                "supervisor": { "reachable": false, "error": format!("status task failed: {e}") },
                "services": [],
            })
        })
}

async fn api_status(State(app): State<App>) -> Json<Value> {
    Json(fresh(&app).await)
}

/// `GET /api/events`: a `status` event with the first snapshot, then one whenever it
/// changes (polled every [`POLL_INTERVAL`]), keepalive comments in between.
async fn events(State(app): State<App>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures_util::stream::unfold((app, None::<String>), |(app, last)| async move {
        let mut first = last.is_none();
        loop {
            if !first {
                tokio::time::sleep(POLL_INTERVAL).await;
            }
            first = false;
            let snap = fresh(&app).await;
            let print = status::fingerprint(&snap);
            if last.as_deref() != Some(print.as_str()) {
                let event = Event::default().event("status").data(snap.to_string());
                return Some((Ok(event), (app, Some(print))));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEPALIVE))
}

/// `POST /api/services/{name}/{action}`: `start`, `stop` or `restart` through the control
/// socket, the same calls as the CLI (the supervisor records a gateway's desired state).
async fn action(State(app): State<App>, Path((name, verb)): Path<(String, String)>) -> Response {
    if !matches!(verb.as_str(), "start" | "stop" | "restart") {
        return detail(
            StatusCode::NOT_FOUND,
            "Unknown action: use start, stop or restart",
        );
    }
    let (root, vars) = (app.root.clone(), app.vars.clone());
    let done = tokio::task::spawn_blocking(move || {
        let mut client = hermes_services::connect(&root, &*vars, status::CLIENT_TIMEOUT)?;
        match verb.as_str() {
            "start" => client.start(&name),
            "stop" => client.stop(&name),
            _ => client.restart(&name),
        }
        .map_err(hermes_services::Error::Supervisor)
    })
    .await;
    match done {
        Ok(Ok(())) => Json(json!({ "ok": true })).into_response(),
        Ok(Err(e)) => {
            let code = match e {
                hermes_services::Error::NotRunning { .. } => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::CONFLICT,
            };
            (
                code,
                Json(json!({ "detail": hermes_errors::one_line(&e), "hint": e.hint() })),
            )
                .into_response()
        }
        Err(e) => detail(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("action task failed: {e}"),
        ),
    }
}

async fn openapi() -> Json<Value> {
    Json(crate::openapi::document())
}
