//! The dashboard over real HTTP on loopback: the guard (token link and cookie, Host
//! allowlist, CSRF, basic auth, rate limiting, security headers) and the API without a
//! supervisor. Requests are written by hand so every header (Host included) is the test's.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{TOKEN, local, request, start, token_mode};

#[test]
fn the_token_link_sets_a_strict_http_only_cookie_and_redirects_home() {
    let d = token_mode();
    let a = request(&d, "GET", &format!("/?token={TOKEN}"), &local(&d), &[]);
    assert_eq!(a.status, 303);
    assert_eq!(a.header("location").as_deref(), Some("/"));
    let cookie = a.header("set-cookie").unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_string();
    // The cookie alone opens the page and the API.
    let page = request(&d, "GET", "/", &local(&d), &[format!("Cookie: {pair}")]);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Overview"));
    let api = request(
        &d,
        "GET",
        "/api/status",
        &local(&d),
        &[format!("Cookie: {pair}")],
    );
    assert_eq!(api.status, 200, "{}", api.body);
}

#[test]
fn without_the_token_the_api_says_401_json_and_the_page_explains() {
    let d = token_mode();
    let a = request(&d, "GET", "/api/status", &local(&d), &[]);
    assert_eq!(a.status, 401);
    assert_eq!(a.body, r#"{"detail":"Unauthorized"}"#);
    let page = request(&d, "GET", "/", &local(&d), &[]);
    assert_eq!(page.status, 401);
    assert!(page.body.contains("printed when it started"));
    assert!(
        !page.body.contains(TOKEN),
        "the login page never shows the token"
    );
    let wrong = request(&d, "GET", "/?token=nope", &local(&d), &[]);
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
}

#[test]
fn the_session_token_header_and_bearer_are_accepted() {
    let d = token_mode();
    for h in [
        format!("X-Hermes-Session-Token: {TOKEN}"),
        format!("Authorization: Bearer {TOKEN}"),
    ] {
        let a = request(
            &d,
            "GET",
            "/api/status",
            &local(&d),
            std::slice::from_ref(&h),
        );
        assert_eq!(a.status, 200, "{h}");
    }
}

#[test]
fn a_foreign_host_header_is_refused_before_anything_else() {
    let d = token_mode();
    let auth = format!("X-Hermes-Session-Token: {TOKEN}");
    for host in ["evil.example", "evil.example:9119", "10.0.0.1"] {
        let a = request(&d, "GET", "/api/status", host, std::slice::from_ref(&auth));
        assert_eq!(a.status, 400, "{host}");
        assert!(a.body.contains("Invalid host header"));
    }
    for host in [
        format!("localhost:{}", d.addr.port()),
        "[::1]".into(),
        "127.0.0.1".into(),
    ] {
        let a = request(&d, "GET", "/api/status", &host, std::slice::from_ref(&auth));
        assert_eq!(a.status, 200, "{host}");
    }
}

#[test]
fn configured_extra_hosts_are_accepted() {
    let d = start(
        "127.0.0.1",
        &[
            ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
            ("HERMES_DASHBOARD_ALLOWED_HOSTS", "hermes.lan, other.lan"),
        ],
    );
    let auth = format!("X-Hermes-Session-Token: {TOKEN}");
    assert_eq!(
        request(
            &d,
            "GET",
            "/api/status",
            "hermes.lan:9119",
            std::slice::from_ref(&auth)
        )
        .status,
        200
    );
    assert_eq!(
        request(&d, "GET", "/api/status", "third.lan", &[auth]).status,
        400
    );
}

#[test]
fn a_post_without_the_token_header_is_forbidden_even_with_the_cookie() {
    let d = token_mode();
    let cookie = format!("Cookie: hermes_dashboard_session={TOKEN}");
    let a = request(
        &d,
        "POST",
        "/api/services/gateway-default/stop",
        &local(&d),
        std::slice::from_ref(&cookie),
    );
    assert_eq!(a.status, 403);
    assert!(a.body.contains("CSRF"));
    // With the header the request reaches the supervisor, which is not running here: 503.
    let b = request(
        &d,
        "POST",
        "/api/services/gateway-default/stop",
        &local(&d),
        &[cookie, format!("X-Hermes-Session-Token: {TOKEN}")],
    );
    assert_eq!(b.status, 503, "{}", b.body);
    assert!(b.body.contains("no supervisor is running"));
}

#[test]
fn security_headers_are_on_every_answer() {
    let d = token_mode();
    for path in ["/", "/api/status", "/api/health", "/assets/app.css"] {
        let a = request(&d, "GET", path, &local(&d), &[]);
        assert_eq!(
            a.header("content-security-policy")
                .unwrap()
                .split(';')
                .next(),
            Some("default-src 'self'"),
            "{path}"
        );
        // Every page sets `<base href>` (its sub-path): the policy must let it.
        assert!(
            a.header("content-security-policy")
                .unwrap()
                .split(';')
                .any(|d| d.trim() == "base-uri 'self'"),
            "{path}"
        );
        assert_eq!(
            a.header("x-frame-options").as_deref(),
            Some("DENY"),
            "{path}"
        );
        assert_eq!(
            a.header("x-content-type-options").as_deref(),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(
            a.header("referrer-policy").as_deref(),
            Some("no-referrer"),
            "{path}"
        );
    }
    // A refused Host gets them too.
    let a = request(&d, "GET", "/", "evil.example", &[]);
    assert_eq!(a.header("x-frame-options").as_deref(), Some("DENY"));
}

#[test]
fn the_health_path_is_public_and_the_page_loads_nothing_foreign() {
    let d = token_mode();
    let a = request(&d, "GET", "/api/health", &local(&d), &[]);
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["ok"], true, "{}", a.body);
    let page = request(
        &d,
        "GET",
        "/",
        &local(&d),
        &[format!("X-Hermes-Session-Token: {TOKEN}")],
    );
    assert!(!page.body.contains("http://") && !page.body.contains("https://"));
    assert!(
        !page.body.contains("<script>"),
        "no inline script under the CSP"
    );
}

/// The budget of a page with everything it loads (issue 15: under 100 kB transferred).
const PAGE_BUDGET: usize = 100_000;

#[test]
fn every_page_with_what_it_loads_stays_under_budget_and_local() {
    let d = token_mode();
    let auth = format!("X-Hermes-Session-Token: {TOKEN}");
    for page in [
        "/",
        "/logs",
        "/profiles",
        "/plugins",
        "/sessions",
        "/backups",
        "/diagnostics",
    ] {
        let html = request(&d, "GET", page, &local(&d), std::slice::from_ref(&auth));
        assert_eq!(html.status, 200, "{page}");
        let mut total = html.body.len();
        let refs: Vec<&str> = html
            .body
            .split(['"', '\''])
            .zip(html.body.split(['"', '\'']).skip(1))
            .filter(|(before, _)| {
                // The `<base href>` is the prefix the links resolve against, not a resource.
                (before.ends_with("src=") || before.ends_with("href="))
                    && !before.ends_with("<base href=")
            })
            .map(|(_, url)| url)
            .collect();
        assert!(refs.len() >= 3, "{page}: {refs:?}");
        for url in refs {
            assert!(
                !url.contains("//") && !url.starts_with('/'),
                "{page}: every link is relative and local: {url}"
            );
            if url.starts_with("assets/") {
                let asset = request(
                    &d,
                    "GET",
                    &format!("/{url}"),
                    &local(&d),
                    std::slice::from_ref(&auth),
                );
                assert_eq!(asset.status, 200, "{url}");
                total += asset.body.len();
            }
        }
        assert!(total < PAGE_BUDGET, "{page} weighs {total} bytes");
    }
}

#[test]
fn without_a_supervisor_the_status_says_so() {
    let d = token_mode();
    let a = request(
        &d,
        "GET",
        "/api/status",
        &local(&d),
        &[format!("X-Hermes-Session-Token: {TOKEN}")],
    );
    let v: serde_json::Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["supervisor"]["reachable"], false);
    assert!(
        v["supervisor"]["hint"]
            .as_str()
            .unwrap()
            .contains("hermes up"),
        "{v}"
    );
    assert_eq!(v["services"], serde_json::json!([]));
}

fn basic(user: &str, password: &str) -> String {
    // Base64 of `user:password`, written out by a tiny encoder so the test does not share
    // the server's decoder.
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Authorization: Basic {out}")
}

#[test]
fn a_public_bind_with_credentials_requires_basic_auth_and_limits_failures() {
    let d = start(
        "0.0.0.0",
        &[
            ("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin"),
            ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD", "s3cret"),
        ],
    );
    let host = "dashboard.example:9119";
    let none = request(&d, "GET", "/api/status", host, &[]);
    assert_eq!(none.status, 401);
    assert!(
        none.header("www-authenticate")
            .unwrap()
            .starts_with("Basic")
    );
    let good = request(&d, "GET", "/api/status", host, &[basic("admin", "s3cret")]);
    assert_eq!(good.status, 200, "{}", good.body);
    // The session token is no way in on a public bind.
    let token = request(&d, "GET", "/?token=whatever", host, &[]);
    assert_eq!(token.status, 401);
    // Four more wrong passwords use up the five allowed; then even the right one waits.
    for _ in 0..4 {
        assert_eq!(
            request(&d, "GET", "/api/status", host, &[basic("admin", "wrong")]).status,
            401
        );
    }
    let limited = request(&d, "GET", "/api/status", host, &[basic("admin", "s3cret")]);
    assert_eq!(limited.status, 429);
    assert_eq!(limited.header("retry-after").as_deref(), Some("30"));
}

#[test]
fn the_openapi_document_names_the_endpoints_that_exist() {
    let d = token_mode();
    let a = request(
        &d,
        "GET",
        "/api/openapi.json",
        &local(&d),
        &[format!("X-Hermes-Session-Token: {TOKEN}")],
    );
    let v: serde_json::Value = serde_json::from_str(&a.body).unwrap();
    let paths: Vec<&String> = v["paths"].as_object().unwrap().keys().collect();
    for p in [
        "/api/health",
        "/api/status",
        "/api/events",
        "/api/services/{name}/{action}",
        "/api/openapi.json",
    ] {
        assert!(paths.iter().any(|k| k.as_str() == p), "{p}");
        // Each documented path answers something other than 404.
        let concrete = p.replace("{name}", "x").replace("{action}", "start");
        let method = if p.contains("{action}") {
            "POST"
        } else {
            "GET"
        };
        if p != "/api/events" {
            let r = request(
                &d,
                method,
                &concrete,
                &local(&d),
                &[format!("X-Hermes-Session-Token: {TOKEN}")],
            );
            assert_ne!(r.status, 404, "{p}");
        }
    }
}

/// A client that connects and never sends a request head is closed (the request-head
/// timeout of the connection handling the gateway also uses), so slow or silent clients
/// cannot hold the dashboard's connections.
#[test]
fn a_silent_connection_is_closed_after_the_head_timeout() {
    let d = token_mode();
    let mut silent = TcpStream::connect(d.addr).unwrap();
    silent.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    silent
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    // The server closes the connection: the read ends (with EOF or a reset), not by our timeout.
    let _ = silent.read_to_end(&mut rest);
    let waited = started.elapsed();
    assert!(
        waited < std::time::Duration::from_secs(20),
        "a silent client held its connection for {waited:?}"
    );
    // Meanwhile, and afterwards, the dashboard answers others.
    let answer = request(&d, "GET", "/api/health", &local(&d), &[]);
    assert_eq!(answer.status, 200);
}
