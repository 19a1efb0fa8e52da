//! The Channels page (being built).

use axum::Router;
use serde_json::{Value, json};

use crate::server::App;

/// `/channels` and its API.
pub fn routes() -> Router<App> {
    Router::new()
}

/// The page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    json!({})
}
