//! `GET /api/openapi.json`: the endpoints that exist, nothing more; each page contributes its
//! own paths ([`crate::pages::api_paths`]).

use serde_json::{Value, json};

/// The OpenAPI 3.1 document of the dashboard's API.
pub fn document() -> Value {
    let mut paths = crate::pages::api_paths();
    let common = json!({
        "/api/health": { "get": {
            "summary": "Liveness of the dashboard itself (no authentication), the original's shape",
            "security": [],
            "responses": { "200": {
                "description": "{ok: true, status: \"ok\", version, auth_required} (auth_required: signing in takes credentials, not the token link)",
                "content": { "application/json": { "schema": {
                    "type": "object",
                    "required": ["ok", "status", "version", "auth_required"],
                    "properties": {
                        "ok": { "const": true },
                        "status": { "const": "ok" },
                        "version": { "type": "string" },
                        "auth_required": { "type": "boolean" },
                    },
                }}},
            }},
        }},
        "/metrics": { "get": {
            "summary": "The whole container in the Prometheus text format 0.0.4: services, the volume, PID 1's boot, each running native gateway's own metrics (docs/dashboard.md lists every metric)",
            "security": [{ "metricsToken": [] }],
            "responses": {
                "200": { "description": "text/plain; version=0.0.4", "content": { "text/plain": {} } },
                "401": { "description": "No or a wrong metrics token (HERMES_METRICS_TOKEN), from an address not in HERMES_METRICS_ALLOW" },
                "404": { "description": "Metrics are not configured: neither HERMES_METRICS_TOKEN nor HERMES_METRICS_ALLOW is set" },
            },
        }},
        "/api/openapi.json": { "get": {
            "summary": "This document",
            "responses": { "200": { "description": "OpenAPI 3.1" } },
        }},
    });
    if let Value::Object(map) = common {
        paths.extend(map);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Hermes dashboard",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Every state-changing request (POST, PUT, DELETE) must carry the session token in X-Hermes-Session-Token (CSRF), in every auth mode.",
        },
        "components": { "securitySchemes": {
            "sessionToken": { "type": "apiKey", "in": "header", "name": "X-Hermes-Session-Token" },
            "basic": { "type": "http", "scheme": "basic" },
            "metricsToken": { "type": "http", "scheme": "bearer", "description": "HERMES_METRICS_TOKEN; /metrics only (or a client address in HERMES_METRICS_ALLOW, without it)" },
        }},
        "security": [{ "sessionToken": [] }, { "basic": [] }],
        "paths": paths,
    })
}

/// The `profile` query parameter of the endpoints that work on one profile.
pub fn profile_param() -> Value {
    json!({
        "name": "profile", "in": "query", "required": false,
        "schema": { "type": "string" },
        "description": "profile name (default: the active profile)",
    })
}

/// An operation's `responses`: the refusals in `errors` (status to description) and `ok` as
/// the 200's description.
pub fn responses(errors: &Value, ok: &str) -> Value {
    let mut all = errors.clone();
    all["200"] = json!({ "description": ok });
    all
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_page_api_is_described() {
        let doc = super::document();
        let paths = doc["paths"].as_object().unwrap();
        for p in [
            "/api/status",
            "/api/events",
            "/api/health",
            "/api/openapi.json",
            "/metrics",
        ] {
            assert!(paths.contains_key(p), "{p}");
        }
        let health = &paths["/api/health"]["get"]["responses"]["200"];
        let schema = &health["content"]["application/json"]["schema"];
        assert_eq!(
            schema["required"],
            serde_json::json!(["ok", "status", "version", "auth_required"])
        );
        let status = paths["/api/status"]["get"]["responses"]["200"]["description"]
            .as_str()
            .unwrap();
        for field in [
            "components: {gateway",
            "dashboard",
            "storage",
            "platforms",
            "overall",
        ] {
            assert!(status.contains(field), "{field} in {status}");
        }
    }
}
