//! `GET /api/openapi.json`: the endpoints that exist, nothing more.

use serde_json::{Value, json};

/// The OpenAPI 3.1 document of the dashboard's API.
pub fn document() -> Value {
    let unauthorized = json!({ "description": "No valid session token or credentials" });
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Hermes dashboard", "version": env!("CARGO_PKG_VERSION") },
        "components": { "securitySchemes": {
            "sessionToken": { "type": "apiKey", "in": "header", "name": "X-Hermes-Session-Token" },
            "basic": { "type": "http", "scheme": "basic" },
        }},
        "security": [{ "sessionToken": [] }, { "basic": [] }],
        "paths": {
            "/api/health": { "get": {
                "summary": "Liveness of the dashboard itself (no authentication)",
                "security": [],
                "responses": { "200": { "description": "{\"status\": \"ok\"}" } },
            }},
            "/api/status": { "get": {
                "summary": "Every service and profile gateway, asked afresh from the supervisor",
                "responses": { "200": { "description": "{supervisor: {reachable, error?, hint?}, services: [{name, state, pid, uptime_secs, since_secs, restarts, last_exit, reason, profile, engine?, port?}]}" }, "401": unauthorized },
            }},
            "/api/events": { "get": {
                "summary": "Server-sent events: `status` with a snapshot like /api/status whenever it changes",
                "responses": { "200": { "description": "text/event-stream" }, "401": unauthorized },
            }},
            "/api/services/{name}/{action}": { "post": {
                "summary": "Start, stop or restart a service through the control socket",
                "parameters": [
                    { "name": "name", "in": "path", "required": true, "schema": { "type": "string" } },
                    { "name": "action", "in": "path", "required": true, "schema": { "enum": ["start", "stop", "restart"] } },
                    { "name": "X-Hermes-Session-Token", "in": "header", "required": true, "schema": { "type": "string" }, "description": "Required on every POST (CSRF), in every auth mode" },
                ],
                "responses": {
                    "200": { "description": "{\"ok\": true}" },
                    "401": unauthorized,
                    "403": { "description": "Missing or wrong X-Hermes-Session-Token" },
                    "409": { "description": "The supervisor refused: {detail, hint}" },
                    "503": { "description": "No supervisor is running" },
                },
            }},
            "/api/openapi.json": { "get": {
                "summary": "This document",
                "responses": { "200": { "description": "OpenAPI 3.1" } },
            }},
        },
    })
}
