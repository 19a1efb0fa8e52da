//! Starting, stopping and restarting a service through the supervisor, for a request: the
//! Overview's service actions and the original's `/api/gateway/{action}` both run here.

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
        Ok(Err(e)) => {
            let code = match e {
                hermes_services::Error::NotRunning { .. } => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::CONFLICT,
            };
            Err(Box::new(
                (
                    code,
                    Json(json!({ "detail": hermes_errors::one_line(&e), "hint": e.hint() })),
                )
                    .into_response(),
            ))
        }
        Err(e) => Err(Box::new(detail(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("action task failed: {e}"),
        ))),
    }
}
