//! Starting, stopping and restarting a service through the supervisor, for a request: the
//! Overview's service actions and the original's `/api/gateway/{action}` both run here.

use std::time::Duration;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::guard::detail;
use crate::server::App;
use crate::status;

/// Runs `verb` (`start`, `stop` or `restart`, already checked) on the service `name` through
/// the control socket: a warning to say beside the outcome, or the refusal as an answer. The
/// original's `/api/gateway/{action}` runs its actions here too.
pub async fn control(
    app: &App,
    name: String,
    verb: String,
) -> Result<Option<String>, Box<Response>> {
    let (root, vars) = (app.root.clone(), app.vars.clone());
    let done = tokio::task::spawn_blocking(move || {
        let mut client = hermes_services::connect(&root, &*vars, status::CLIENT_TIMEOUT)?;
        // Before an operator's stop or restart of a gateway, the planned-stop marker, as the
        // CLI's `gateway stop|restart` writes it; one that cannot be written costs only the
        // recorded state (the supervisor records the desired state either way), so it is said
        // beside the outcome.
        let warning = match verb.as_str() {
            "stop" | "restart" => {
                hermes_services::stop::mark_planned_stop_of(&root, &mut client, &name)
                    .err()
                    .map(|e| hermes_errors::one_line(&e))
            }
            _ => None,
        };
        match verb.as_str() {
            "start" => client.start(&name),
            "stop" => client.stop(&name),
            _ => client.restart(&name),
        }
        .map(|()| warning)
        .map_err(hermes_services::Error::Supervisor)
    })
    .await;
    match done {
        Ok(Ok(warning)) => Ok(warning),
        Ok(Err(e)) => Err(refusal(&e)),
        Err(e) => Err(Box::new(detail(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("action task failed: {e}"),
        ))),
    }
}

/// How long the answer to a stop or restart of the dashboard itself has to reach the page
/// before the supervisor's SIGTERM ends this process.
const SELF_ACTION_DELAY: Duration = Duration::from_millis(300);

/// Whether `name` is the service this dashboard runs as (its supervisor names it in our
/// environment, `HERMES_SUPERVISED_SERVICE`).
pub fn is_self(app: &App, name: &str) -> bool {
    (app.vars)(hermes_supervisor::tree::SERVICE_VAR).is_some_and(|own| own == name)
}

/// A stop or restart of the dashboard itself: done at once, the supervisor's SIGTERM would cut
/// the request and the page would get no answer. So the supervisor is reached first (a refusal
/// is answered as any), then the answer says what happens, and the action follows it. A
/// restart keeps the sign-in (the token is the supervisor's, `hermes_services::sign_in`).
pub async fn control_self(app: &App, name: String, verb: String) -> Response {
    let (root, vars) = (app.root.clone(), app.vars.clone());
    let reachable = tokio::task::spawn_blocking(move || {
        hermes_services::connect(&root, &*vars, status::CLIENT_TIMEOUT).map(drop)
    })
    .await;
    match reachable {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return *refusal(&e),
        Err(e) => {
            return detail(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("action task failed: {e}"),
            );
        }
    }
    let said = if verb == "stop" {
        format!("the dashboard stops now; start it again with `hermes service start {name}`")
    } else {
        "the dashboard restarts now; this page reconnects by itself".to_string()
    };
    let app = app.clone();
    tokio::spawn(async move {
        tokio::time::sleep(SELF_ACTION_DELAY).await;
        // Nobody is left to tell of a refusal here (the supervisor answered a moment ago).
        let _ = control(&app, name, verb).await;
    });
    (
        StatusCode::ACCEPTED,
        Json(json!({ "ok": true, "detail": said })),
    )
        .into_response()
}

/// A refusal of the supervisor as an answer: 503 when none runs, else 409.
fn refusal(e: &hermes_services::Error) -> Box<Response> {
    let code = match e {
        hermes_services::Error::NotRunning { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::CONFLICT,
    };
    Box::new(
        (
            code,
            Json(json!({ "detail": hermes_errors::one_line(e), "hint": e.hint() })),
        )
            .into_response(),
    )
}
