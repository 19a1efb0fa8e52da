//! The Sessions page. (Its content is built on this frame: page route, API, OpenAPI part.)

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::{Value, json};

use crate::pages::{Page, shell};
use crate::server::{App, Base};

const MAIN: &str = r#"<h2>Sessions</h2>"#;

/// `/sessions` and its API.
pub fn routes() -> Router<App> {
    Router::new().route("/sessions", get(page))
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    shell(Page::Sessions, &base.0, app.token(), MAIN)
}

/// This page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    json!({})
}
