//! What every page's handlers share, and nothing page-specific: a handler's [`Step`] and its
//! refusals, the profile a request is about ([`home`], [`select_home`]), its query and JSON
//! body, running its file work on the blocking pool ([`run`]), and `hermes-home` errors as
//! answers. Pages import from here, never from each other.

use std::path::Path;

use axum::body::Bytes;
use axum::extract::Query;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::Response;
use hermes_home::Home;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::server::{App, blocking, problem};

/// The largest JSON body a page's API takes: room for the largest `SOUL.md` the Profiles page
/// takes, escaped (`profiles::SOUL_MAX_BYTES`); the hint of an oversized body names it.
pub const BODY_LIMIT: usize = 3 << 20;

/// A handler's step: its value, or the answer to give instead (boxed: a `Response` is large).
pub type Step<T> = Result<T, Box<Response>>;

/// [`problem`] as a step's `Err`.
pub fn refuse(status: StatusCode, detail: &str, hint: Option<String>) -> Box<Response> {
    Box::new(problem(status, detail, hint))
}

/// The status of a `hermes-home` error met while selecting a profile: a name outside the
/// naming rule is the request's fault (400), an unknown profile is a 404, anything else is the
/// server's (500). Pages with more errors of their own fall back to this.
pub fn home_status(e: &hermes_home::Error) -> StatusCode {
    match e {
        hermes_home::Error::InvalidProfileName { .. }
        | hermes_home::Error::ReservedProfileName { .. } => StatusCode::BAD_REQUEST,
        hermes_home::Error::ProfileNotFound { .. } => StatusCode::NOT_FOUND,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A `hermes-home` error as an answer, with [`home_status`].
pub fn home_problem(e: &hermes_home::Error) -> Box<Response> {
    refuse(home_status(e), &hermes_errors::one_line(e), e.hint())
}

/// The home of `profile` as the CLI's `-p` selects it (absent: the active profile), creating
/// nothing: a name outside the naming rule (a traversal such as `..` included) is a 400
/// before any file is touched, an unknown profile a 404. Every page that takes a profile
/// (`?profile=` or a path's name) selects it here.
pub fn select_home(root: &Path, profile: Option<&str>) -> Step<Home> {
    Home::select(root.to_path_buf(), profile).map_err(|e| home_problem(&e))
}

/// The request's query parameters, or a 400 whose hint names the ones the endpoint takes
/// (`names`, e.g. `"profile, format"`).
pub fn query<T>(query: Result<Query<T>, QueryRejection>, names: &str) -> Step<T> {
    query.map(|Query(q)| q).map_err(|e| {
        refuse(
            StatusCode::BAD_REQUEST,
            &e.body_text(),
            Some(format!("query parameters: {names}")),
        )
    })
}

/// A `hermes-home` error met while changing a profile's files, as an answer: a bad key is the
/// request's fault (400), a file in a state that refuses the change a 409, a lock held too long
/// a 503; the rest as [`home_problem`].
pub fn edit_problem(e: &hermes_home::Error) -> Box<Response> {
    use hermes_home::Error as E;
    let status = match e {
        E::EnvKeyInvalid { .. } | E::EnvKeyDenied { .. } => StatusCode::BAD_REQUEST,
        E::ProfileExists { .. }
        | E::DefaultProfileUndeletable
        | E::ConfigLayout { .. }
        | E::ConfigParse { .. }
        | E::ConfigNotMapping { .. }
        | E::NotUtf8 { .. } => StatusCode::CONFLICT,
        E::LockTimeout { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => home_status(e),
    };
    refuse(status, &hermes_errors::one_line(e), e.hint())
}

/// `?profile=`, which the original's own front end adds to every call.
#[derive(Deserialize)]
pub struct ProfileQuery {
    /// The profile's name.
    #[serde(default)]
    pub profile: Option<String>,
}

/// The profile a request is about: the body's `profile`, else `?profile=`, else the active
/// profile (the original: the dashboard's own). Unknown is a 404, a bad name a 400.
pub fn home(
    app: &App,
    query: Result<Query<ProfileQuery>, QueryRejection>,
    in_body: Option<&str>,
) -> Step<Home> {
    let query = self::query(query, "profile")?;
    let name = in_body
        .or(query.profile.as_deref())
        .map(str::trim)
        .filter(|n| !n.is_empty());
    select_home(&app.root, name)
}

/// A JSON body of type `T`: a missing, oversized or malformed body is a 4xx `{detail, hint}`.
pub fn body<T: DeserializeOwned>(raw: Result<Bytes, BytesRejection>) -> Step<T> {
    let bytes = raw.map_err(|e| {
        refuse(
            e.status(),
            &format!("cannot read the request body: {}", e.body_text()),
            Some(format!("send a JSON body of at most {} bytes", BODY_LIMIT)),
        )
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("the request body is not the expected JSON: {e}"),
            Some("see /api/openapi.json for this endpoint's body".into()),
        )
    })
}

/// Runs `work` on the blocking pool; its `Err` is already an answer.
pub async fn run(work: impl FnOnce() -> Step<Response> + Send + 'static) -> Response {
    match blocking(work).await {
        Ok(Ok(answer)) | Err(answer) => answer,
        Ok(Err(answer)) => *answer,
    }
}
