//! The Profiles page. (Its content is built on this frame: page route, API, OpenAPI part.)

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use serde_json::{Value, json};

use crate::pages::{Page, shell};
use crate::server::{App, Base};

const MAIN: &str = r#"<h2>Profiles</h2>"#;

/// `/profiles` and its API.
pub fn routes() -> Router<App> {
    Router::new().route("/profiles", get(page))
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    shell(Page::Profiles, &base.0, app.token(), MAIN)
}

/// This page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    json!({})
}
