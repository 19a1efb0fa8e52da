//! `POST /api/gateway/{start|stop|restart}?profile=`: the original's gateway lifecycle,
//! run as the Overview's `/api/services/gateway-<profile>/{action}` runs it (the control
//! socket, with the planned-stop marker before a stop or restart).

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::pages::request::refuse;
use crate::pages::request::{ProfileQuery, home};
use crate::server::App;
use crate::service_control::control;

/// `POST /api/gateway/{action}`: `{ok, pid: null, name: "gateway-<action>", service}`, once
/// the supervisor took the command (the original answers as soon as it spawned a
/// `hermes gateway <action>`, with that process's `pid`; ours spawns nothing).
pub(super) async fn action(
    State(app): State<App>,
    Path(verb): Path<String>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    if !matches!(verb.as_str(), "start" | "stop" | "restart") {
        return *refuse(
            StatusCode::NOT_FOUND,
            &format!("unknown gateway action `{verb}`"),
            Some("POST /api/gateway/start, /api/gateway/stop or /api/gateway/restart".into()),
        );
    }
    let home = match home(&app, query, None) {
        Ok(home) => home,
        Err(answer) => return *answer,
    };
    let service = hermes_services::gateway::service_name(home.profile().name());
    match control(&app, service.clone(), verb.clone()).await {
        Ok(warning) => {
            let mut answer = json!({
                "ok": true,
                "pid": null,
                "name": format!("gateway-{verb}"),
                "service": service,
            });
            if let Some(warning) = warning {
                answer["warning"] = warning.into();
            }
            Json(answer).into_response()
        }
        Err(answer) => *answer,
    }
}
