//! The health documents as the original reports them since 0.20, over real HTTP on loopback
//! without a supervisor: the public `/api/health` (`{ok, version, auth_required}`) and
//! `/api/status`'s `components` and `overall`.

use crate::common;

use common::{TOKEN_ENV, get_json, local, request, start, start_in, token_mode};
use serde_json::json;

#[test]
fn api_health_is_public_and_the_originals_shape() {
    let d = token_mode();
    let a = request(&d, "GET", "/api/health", &local(&d), &[]);
    assert_eq!(a.status, 200, "no session needed: {}", a.body);
    let body = a.json();
    assert_eq!(body["ok"], true, "{body}");
    assert_eq!(body["status"], "ok", "{body}");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"), "{body}");
    assert_eq!(
        body["auth_required"], false,
        "the token link is no gate: {body}"
    );

    // Behind basic authentication: still public, and it says a sign-in is required.
    let d = start(
        "0.0.0.0",
        &[
            ("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin"),
            ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD", "s3cret"),
        ],
    );
    let a = request(&d, "GET", "/api/health", "dashboard.example:9119", &[]);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["auth_required"], true, "{}", a.body);
}

#[test]
fn status_rolls_up_the_components_without_a_supervisor() {
    let d = token_mode();
    let status = get_json(&d, "/api/status", 200);
    let components = &status["components"];
    let names: Vec<&String> = components.as_object().unwrap().keys().collect();
    assert_eq!(
        names,
        ["gateway", "dashboard", "storage", "platforms"],
        "{status}"
    );
    assert_eq!(
        components["gateway"],
        json!({"status": "degraded", "state": "stopped"}),
        "no supervisor: no gateway runs"
    );
    assert_eq!(
        components["storage"],
        json!({"status": "ok"}),
        "no state.db yet"
    );
    assert_eq!(
        components["platforms"],
        json!({"status": "ok", "configured": 0, "connected": 0})
    );
    let dashboard = &components["dashboard"];
    for key in [
        "status",
        "recent_unhandled_errors",
        "last_error_at",
        "selftest",
    ] {
        assert!(dashboard.get(key).is_some(), "{key} in {dashboard}");
    }
    assert_eq!(status["overall"], "degraded", "{status}");
    // Everything else is still there for the Overview.
    assert_eq!(status["supervisor"]["reachable"], false);
    assert!(status["services"].is_array() && status["gateway_routing"].is_object());
    // Status words and counts only: no path of the volume.
    let root = d.root().to_string_lossy().into_owned();
    assert!(!components.to_string().contains(&root), "{components}");
}

#[test]
fn a_state_db_that_is_not_a_database_degrades_storage() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("state.db"),
        b"this is not a database, just bytes long enough",
    )
    .unwrap();
    let d = start_in(home, "127.0.0.1", &TOKEN_ENV);
    let status = get_json(&d, "/api/status", 200);
    assert_eq!(
        status["components"]["storage"],
        json!({"status": "degraded"}),
        "{status}"
    );
    assert_eq!(status["overall"], "degraded");
}
