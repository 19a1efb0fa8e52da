//! The dashboard behind a reverse proxy, over real HTTP on loopback: a configured sub-path,
//! a trusted proxy's `X-Forwarded-Prefix` (ignored from anyone else), sign-in by a trusted
//! proxy's user header, a bcrypt password hash, and the login limiter counting the client a
//! trusted proxy names.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::time::Instant;

use common::{TOKEN, local, request, start, token_header};

#[test]
fn a_configured_base_path_is_served_with_and_without_the_prefix() {
    let d = start(
        "127.0.0.1",
        &[
            ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
            ("HERMES_DASHBOARD_BASE_PATH", "/hermes/"),
        ],
    );
    // The token link under the prefix: back to the prefix, cookie scoped to it.
    let a = request(
        &d,
        "GET",
        &format!("/hermes/?token={TOKEN}"),
        &local(&d),
        &[],
    );
    assert_eq!(a.status, 303);
    assert_eq!(a.header("location").as_deref(), Some("/hermes/"));
    assert!(a.header("set-cookie").unwrap().contains("Path=/hermes/"));
    // Pages point their relative links at the prefix, whether the proxy strips it or not.
    for path in ["/hermes", "/hermes/", "/hermes/logs", "/", "/logs"] {
        let page = request(&d, "GET", path, &local(&d), &[token_header()]);
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert!(
            page.body.contains(r#"<base href="/hermes/">"#),
            "{path}: {}",
            page.body
        );
    }
    let api = request(
        &d,
        "GET",
        "/hermes/api/status",
        &local(&d),
        &[token_header()],
    );
    assert_eq!(api.status, 200, "{}", api.body);
    // A path that only starts with the same letters is not under the prefix.
    let other = request(&d, "GET", "/hermesx", &local(&d), &[token_header()]);
    assert_eq!(other.status, 404);
}

#[test]
fn x_forwarded_prefix_counts_only_from_a_trusted_proxy() {
    let trusted = start(
        "127.0.0.1",
        &[
            ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
            ("HERMES_DASHBOARD_TRUSTED_PROXIES", "127.0.0.0/8"),
        ],
    );
    let prefix = "X-Forwarded-Prefix: /apps/hermes".to_string();
    let page = request(
        &trusted,
        "GET",
        "/",
        &local(&trusted),
        &[token_header(), prefix.clone()],
    );
    assert!(
        page.body.contains(r#"<base href="/apps/hermes/">"#),
        "{}",
        page.body
    );
    let link = request(
        &trusted,
        "GET",
        &format!("/?token={TOKEN}"),
        &local(&trusted),
        std::slice::from_ref(&prefix),
    );
    assert_eq!(link.header("location").as_deref(), Some("/apps/hermes/"));
    // A hostile prefix is not a path: ignored, never echoed into the page.
    let hostile = request(
        &trusted,
        "GET",
        "/",
        &local(&trusted),
        &[
            token_header(),
            r#"X-Forwarded-Prefix: /"><script>x</script>"#.into(),
        ],
    );
    assert!(
        hostile.body.contains(r#"<base href="/">"#),
        "{}",
        hostile.body
    );

    // From an address that is not a trusted proxy the header changes nothing.
    let untrusted = start(
        "127.0.0.1",
        &[
            ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
            ("HERMES_DASHBOARD_TRUSTED_PROXIES", "10.0.0.1"),
        ],
    );
    let page = request(
        &untrusted,
        "GET",
        "/",
        &local(&untrusted),
        &[token_header(), prefix],
    );
    assert!(page.body.contains(r#"<base href="/">"#), "{}", page.body);
}

#[test]
fn a_trusted_proxys_user_header_signs_in_and_nothing_else_does() {
    let user = "X-Forwarded-User: alice".to_string();
    let d = start(
        "0.0.0.0",
        &[
            ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
            ("HERMES_DASHBOARD_PROXY_AUTH_HEADER", "X-Forwarded-User"),
            ("HERMES_DASHBOARD_TRUSTED_PROXIES", "127.0.0.1"),
        ],
    );
    let ok = request(
        &d,
        "GET",
        "/api/status",
        &local(&d),
        std::slice::from_ref(&user),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    let none = request(&d, "GET", "/api/status", &local(&d), &[]);
    assert_eq!(none.status, 401);
    let empty = request(
        &d,
        "GET",
        "/api/status",
        &local(&d),
        &["X-Forwarded-User:  ".into()],
    );
    assert_eq!(empty.status, 401);
    let page = request(&d, "GET", "/", &local(&d), &[]);
    assert!(
        page.body.contains("through its reverse proxy"),
        "{}",
        page.body
    );
    // CSRF still applies to a proxy-signed-in user.
    let post = request(
        &d,
        "POST",
        "/api/services/x/start",
        &local(&d),
        std::slice::from_ref(&user),
    );
    assert_eq!(post.status, 403);

    // The same header from a peer that is not the proxy is nobody.
    let d = start(
        "0.0.0.0",
        &[
            ("HERMES_DASHBOARD_PROXY_AUTH_HEADER", "X-Forwarded-User"),
            ("HERMES_DASHBOARD_TRUSTED_PROXIES", "10.0.0.0/8"),
        ],
    );
    let forged = request(&d, "GET", "/api/status", &local(&d), &[user]);
    assert_eq!(forged.status, 401);
}

fn basic(user: &str, password: &str) -> String {
    let raw = format!("{user}:{password}");
    let table = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in raw.as_bytes().chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(table[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    format!("Authorization: Basic {out}")
}

#[test]
fn a_bcrypt_password_hash_signs_in_and_is_checked_once_per_header() {
    // Cost 10: slow enough that a second full check would show in the timing below.
    let hash = bcrypt::hash("correct horse", 10).unwrap();
    let d = start(
        "0.0.0.0",
        &[
            ("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin"),
            ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH", &hash),
        ],
    );
    let right = basic("admin", "correct horse");
    let first = Instant::now();
    let a = request(
        &d,
        "GET",
        "/api/status",
        &local(&d),
        std::slice::from_ref(&right),
    );
    let checked = first.elapsed();
    assert_eq!(a.status, 200, "{}", a.body);
    let again = Instant::now();
    let b = request(&d, "GET", "/api/status", &local(&d), &[right]);
    assert_eq!(b.status, 200);
    assert!(
        again.elapsed() < checked,
        "the second request reuses the check: {:?} then {:?}",
        checked,
        again.elapsed()
    );
    for wrong in [
        basic("admin", "correct horsE"),
        basic("root", "correct horse"),
    ] {
        let a = request(&d, "GET", "/api/status", &local(&d), &[wrong]);
        assert_eq!(a.status, 401);
        assert!(a.header("www-authenticate").unwrap().starts_with("Basic"));
    }
}

#[test]
fn behind_a_trusted_proxy_the_limiter_counts_the_forwarded_client() {
    let d = start(
        "127.0.0.1",
        &[
            ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
            ("HERMES_DASHBOARD_TRUSTED_PROXIES", "127.0.0.1"),
        ],
    );
    let from = |client: &str| format!("X-Forwarded-For: 203.0.113.9, {client}");
    for _ in 0..5 {
        let a = request(
            &d,
            "GET",
            "/api/status",
            &local(&d),
            &[from("198.51.100.1"), "X-Hermes-Session-Token: wrong".into()],
        );
        assert_eq!(a.status, 401);
    }
    let blocked = request(
        &d,
        "GET",
        "/api/status",
        &local(&d),
        &[from("198.51.100.1"), token_header()],
    );
    assert_eq!(blocked.status, 429);
    // Another client behind the same proxy is not locked out with it.
    let other = request(
        &d,
        "GET",
        "/api/status",
        &local(&d),
        &[from("198.51.100.2"), token_header()],
    );
    assert_eq!(other.status, 200, "{}", other.body);
}
