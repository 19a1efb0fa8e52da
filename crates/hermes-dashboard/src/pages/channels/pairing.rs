//! Pairing: the users who asked a platform's bot for access with a one-time code, waiting for
//! approval, and the users approved — kept by the agent's `gateway.pairing.PairingStore` in the
//! profile (`platforms/pairing/` since 0.19, `pairing/` on older volumes: `{platform}-pending.json`
//! with each code salted and hashed, `{platform}-approved.json`, `_rate_limits.json`).
//!
//! Every read and change is the agent's own code, run with `HERMES_HOME` at the profile as the
//! owner of its files: the store's location rule and legacy-directory merge, its expiry of
//! codes after an hour, its lockout after five wrong codes and its mirroring of an approval into
//! the platform's allowlist in `.env` differ between releases, so ours never re-implements
//! them. 0.19 approves by the code the user relays; 0.20 also by the request id its list shows
//! (`approve_request`), which never reveals a code.
//!
//! The endpoints are the original dashboard's: `GET /api/pairing`, `POST /api/pairing/approve`
//! `{platform, code | request_id, profile}`, `/revoke` `{platform, user_id, profile}` and
//! `/clear-pending?profile=`.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use hermes_home::Home;
use hermes_services::agent_probe;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::pages::request::{ProfileQuery, home};
use crate::pages::request::{Step, refuse};
use crate::pages::request::{body, run};
use crate::server::App;

/// The agent's store, by the action in the environment (never in the script's text).
const SCRIPT: &str = r#"
import json, os
from gateway.pairing import PairingStore
store = PairingStore()
action = os.environ["HERMES_PAIRING_ACTION"]
platform = os.environ.get("HERMES_PAIRING_PLATFORM", "")
target = os.environ.get("HERMES_PAIRING_TARGET", "")
if action == "list":
    answer = {"pending": store.list_pending(), "approved": store.list_approved(),
              "by_request_id": hasattr(store, "approve_request")}
elif action == "approve":
    by_id = os.environ.get("HERMES_PAIRING_BY_ID") == "1" or (
        hasattr(store, "looks_like_request_id") and store.looks_like_request_id(target))
    if by_id and not hasattr(store, "approve_request"):
        answer = {"unsupported": True}
    else:
        user = store.approve_request(platform, target) if by_id else store.approve_code(platform, target.upper())
        answer = {"user": user, "locked_out": (not user and not by_id and store._is_locked_out(platform))}
elif action == "revoke":
    answer = {"found": store.revoke(platform, target)}
else:
    answer = {"cleared": store.clear_pending()}
print("HERMES_ANSWER " + json.dumps(answer, default=str), flush=True)
"#;

/// The pairing routes.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/api/pairing", get(list))
        .route("/api/pairing/approve", post(approve))
        .route("/api/pairing/revoke", post(revoke))
        .route("/api/pairing/clear-pending", post(clear_pending))
}

/// A platform name as the store uses it in a file name: lower-case letters, digits, `_` and
/// `-` only, so no request can name a path outside the store.
fn platform_name(raw: Option<&str>) -> Step<String> {
    let name = raw.unwrap_or_default().trim().to_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
    if !valid {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "platform and request_id or code are required: platform is a platform id such as `telegram`",
            Some("GET /api/messaging/platforms lists the platform ids".into()),
        ));
    }
    Ok(name)
}

/// A code, request id or user id: one line of sane length.
fn target(raw: Option<&str>, what: &str) -> Step<String> {
    let text = raw.unwrap_or_default().trim().to_string();
    if text.is_empty() || text.len() > 256 || text.chars().any(char::is_control) {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            &format!("{what} is required (one line)"),
            Some("GET /api/pairing lists the pending requests and the approved users".into()),
        ));
    }
    Ok(text)
}

/// Runs the agent's store for `home` with `env` (module doc): its answer, a `409` without an
/// agent, a `502` when it does not answer.
fn store(app: &App, home: &Home, env: &[(&str, &str)]) -> Step<Value> {
    let agent = crate::pages::installed_agent(app, "pairing")?;
    let _turn = crate::pages::agent_turn();
    let dir = home.dir().to_string_lossy().into_owned();
    let mut all = vec![("HERMES_HOME", dir.as_str())];
    all.extend_from_slice(env);
    let identity = agent_probe::owner_identity(home.dir());
    agent_probe::run_agent_python(&agent, SCRIPT, &all, Some(home.dir()), identity.as_ref())
        .map_err(|e| {
            refuse(
                StatusCode::BAD_GATEWAY,
                &format!("the agent's pairing store did not answer: {e}"),
                Some("`hermes doctor` checks the agent's install".into()),
            )
        })
}

/// `GET /api/pairing?profile=`: `{pending, approved}` as the agent lists them, plus ours
/// `by_request_id` (whether this agent approves by request id, 0.20+).
async fn list(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let home = home(&app, query, None)?;
        let answer = store(&app, &home, &[("HERMES_PAIRING_ACTION", "list")])?;
        Ok(Json(answer).into_response())
    })
    .await
}

#[derive(Deserialize)]
struct Approve {
    #[serde(default)]
    platform: Option<String>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    request_id: Option<String>,
    #[serde(default)]
    profile: Option<String>,
}

/// `POST /api/pairing/approve`: `{ok, user}`; `404` for a code or request unknown or expired,
/// `429` while the platform is locked out after too many wrong codes.
async fn approve(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let request: Approve = body(raw)?;
        let home = home(&app, query, request.profile.as_deref())?;
        let platform = platform_name(request.platform.as_deref())?;
        let by_id = request
            .request_id
            .as_deref()
            .is_some_and(|r| !r.trim().is_empty());
        let wanted = if by_id {
            &request.request_id
        } else {
            &request.code
        };
        let wanted = target(wanted.as_deref(), "request_id or code")?;
        let answer = store(
            &app,
            &home,
            &[
                ("HERMES_PAIRING_ACTION", "approve"),
                ("HERMES_PAIRING_PLATFORM", &platform),
                ("HERMES_PAIRING_TARGET", &wanted),
                ("HERMES_PAIRING_BY_ID", if by_id { "1" } else { "0" }),
            ],
        )?;
        if answer["unsupported"] == true {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                "this agent approves by code only",
                Some("send the code the user received as `code`".into()),
            ));
        }
        if answer["user"].is_object() {
            return Ok(Json(json!({ "ok": true, "user": answer["user"] })).into_response());
        }
        if answer["locked_out"] == true {
            return Err(refuse(
                StatusCode::TOO_MANY_REQUESTS,
                &format!("Platform '{platform}' is locked out after too many failed approvals."),
                Some("the agent lifts the lockout after an hour".into()),
            ));
        }
        Err(refuse(
            StatusCode::NOT_FOUND,
            &format!("Pairing request or code not found or expired for platform '{platform}'."),
            Some("codes expire after an hour: the user asks the bot for a new one".into()),
        ))
    })
    .await
}

#[derive(Deserialize)]
struct Revoke {
    #[serde(default)]
    platform: Option<String>,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    profile: Option<String>,
}

/// `POST /api/pairing/revoke`: `{ok}`; `404` for a user not approved.
async fn revoke(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    run(move || {
        let request: Revoke = body(raw)?;
        let home = home(&app, query, request.profile.as_deref())?;
        let platform = platform_name(request.platform.as_deref())?;
        let user = target(request.user_id.as_deref(), "user_id")?;
        let answer = store(
            &app,
            &home,
            &[
                ("HERMES_PAIRING_ACTION", "revoke"),
                ("HERMES_PAIRING_PLATFORM", &platform),
                ("HERMES_PAIRING_TARGET", &user),
            ],
        )?;
        if answer["found"] == true {
            return Ok(Json(json!({ "ok": true })).into_response());
        }
        Err(refuse(
            StatusCode::NOT_FOUND,
            &format!("User {user} not found in approved list for {platform}."),
            None,
        ))
    })
    .await
}

/// `POST /api/pairing/clear-pending?profile=`: `{ok, cleared}`.
async fn clear_pending(
    State(app): State<App>,
    query: Result<Query<ProfileQuery>, QueryRejection>,
) -> Response {
    run(move || {
        let home = home(&app, query, None)?;
        let answer = store(&app, &home, &[("HERMES_PAIRING_ACTION", "clear")])?;
        Ok(Json(json!({ "ok": true, "cleared": answer["cleared"] })).into_response())
    })
    .await
}

/// This part's OpenAPI paths.
pub fn api_paths() -> Value {
    let problem = json!({ "description": "{detail, hint}" });
    let base = json!({
        "400": problem, "401": { "description": "No valid session token or credentials" },
        "404": problem,
        "409": { "description": "No agent is installed (the store is the agent's): {detail, hint}" },
        "502": { "description": "The agent's store did not answer: {detail, hint}" },
    });
    let change = |ok: &str| {
        let mut r = base.clone();
        r["200"] = json!({ "description": ok });
        r["403"] = json!({ "description": "Missing or wrong X-Hermes-Session-Token" });
        r
    };
    let mut approve = change("{ok, user: {user_id, user_name}}");
    approve["429"] =
        json!({ "description": "The platform is locked out after too many wrong codes" });
    let mut list = base.clone();
    list["200"] = json!({ "description": "{pending: [{platform, request_id (0.20) | code (0.19: a hash prefix), user_id, user_name, age_minutes}], approved: [{platform, user_id, user_name, approved_at}], by_request_id}" });
    let profile = json!([{ "name": "profile", "in": "query", "required": false, "schema": { "type": "string" } }]);
    json!({
        "/api/pairing": { "get": { "summary": "The original's pairing list, from the agent's own PairingStore", "parameters": profile, "responses": list } },
        "/api/pairing/approve": { "post": { "summary": "Approve {platform, code | request_id, profile}, by the agent's store", "parameters": profile, "responses": approve } },
        "/api/pairing/revoke": { "post": { "summary": "Revoke {platform, user_id, profile}, by the agent's store", "parameters": profile, "responses": change("{ok: true}") } },
        "/api/pairing/clear-pending": { "post": { "summary": "Drop every pending request of the profile", "parameters": profile, "responses": change("{ok: true, cleared}") } },
    })
}
