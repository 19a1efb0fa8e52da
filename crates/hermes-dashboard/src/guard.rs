//! The request guard every route sits behind, in order: security headers on every answer,
//! the Host allowlist (DNS rebinding), the few public paths, the token link, login rate
//! limiting, authentication (session token or basic auth), and CSRF on state-changing requests.
//!
//! `/metrics` is the one path with its own credentials ([`metrics_access`]): a scraper has no
//! session, so it shows the metrics token or comes from an allowlisted address, and the path
//! answers 404 when neither is configured. A public host without credentials is allowed for
//! `/metrics` alone ([`Settings::ui_loopback_only`]): every other path then answers loopback
//! peers only.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::{Auth, Settings, is_loopback};
use crate::limiter::FailedLogins;
pub use crate::limiter::{LOGIN_ATTEMPTS, LOGIN_WINDOW};
use crate::secret::same;
use crate::server::Base;

/// The session cookie set by the token link.
pub const COOKIE: &str = "hermes_dashboard_session";
/// The header carrying the session token (the original's name); required on every POST.
pub const TOKEN_HEADER: &str = "x-hermes-session-token";
/// Paths served without authentication: a readiness probe and the static assets the login
/// page itself needs.
pub const PUBLIC_PATHS: &[&str] = &["/api/health", "/assets/app.css"];

/// How many accepted `Authorization` values are remembered (a few users or browsers).
const ACCEPTED_KEPT: usize = 8;

/// The content security policy: nothing inline, nothing from elsewhere.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'";

/// Settings plus the failed-login counters, shared by every request.
pub struct Guard {
    settings: Settings,
    /// Wrong sign-ins to the UI and API (passwords, session tokens).
    failures: FailedLogins,
    /// Wrong metrics tokens: counted apart, so a misconfigured scraper at an address (or
    /// someone guessing the token) never locks that address out of the UI, nor the reverse.
    metrics_failures: FailedLogins,
    /// `Authorization` values that passed a (slow) password hash check.
    accepted: Mutex<Vec<String>>,
}

impl Guard {
    /// A guard for `settings`.
    pub fn new(settings: Settings) -> Arc<Guard> {
        Arc::new(Guard {
            settings,
            failures: FailedLogins::default(),
            metrics_failures: FailedLogins::default(),
            accepted: Mutex::new(Vec::new()),
        })
    }

    /// The per-start token pages embed for their POSTs.
    pub fn token(&self) -> &str {
        &self.settings.token
    }

    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(value) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
            return false;
        };
        let name = host_name(value).to_ascii_lowercase();
        let bound = self
            .settings
            .host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if self.settings.extra_hosts.contains(&name) || name == bound {
            return true;
        }
        if is_loopback(&bound) {
            return matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1");
        }
        // A wildcard bind answers to whatever name reaches it (as the original), unless
        // the operator listed the names.
        is_wildcard(&bound) && self.settings.extra_hosts.is_empty()
    }

    /// Whether the request proves who it is (see [`Auth`]); `peer` is the connection's
    /// address (a proxy's user header counts only from a trusted proxy). A bcrypt check runs
    /// on the blocking pool, once per distinct `Authorization` value: a browser sends the
    /// same header with every request, and each check costs a fraction of a second by design.
    async fn authenticated(self: &Arc<Self>, headers: &HeaderMap, peer: IpAddr) -> bool {
        match &self.settings.auth {
            Auth::Token => presented_token(headers).is_some_and(|t| same(&t, &self.settings.token)),
            Auth::Proxy { header } => {
                self.settings.trusts(peer)
                    && headers
                        .get(header.as_str())
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|user| !user.trim().is_empty())
            }
            Auth::Basic { .. } => {
                let Some(value) = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
                else {
                    return false;
                };
                if self.was_accepted(&value) {
                    return true;
                }
                let guard = self.clone();
                let header_value = value.clone();
                let ok = tokio::task::spawn_blocking(move || guard.basic_matches(&header_value))
                    .await
                    .unwrap_or(false);
                if ok {
                    self.remember_accepted(value);
                }
                ok
            }
        }
    }

    /// Checks an `Authorization: Basic …` value against the configured credentials; both
    /// parts are always compared, so the time does not tell which one was wrong.
    fn basic_matches(&self, value: &str) -> bool {
        let Auth::Basic { username, password } = &self.settings.auth else {
            return false;
        };
        basic_credentials(value).is_some_and(|(u, p)| same(&u, username) & password.matches(&p))
    }

    fn was_accepted(&self, value: &str) -> bool {
        self.accepted
            .lock()
            .is_ok_and(|list| list.iter().any(|v| same(v, value)))
    }

    fn remember_accepted(&self, value: String) {
        if let Ok(mut list) = self.accepted.lock() {
            if list.len() >= ACCEPTED_KEPT {
                list.remove(0);
            }
            list.push(value);
        }
    }

    /// Whether `ip` has used up its failed logins in the current window.
    fn throttled(&self, ip: IpAddr) -> bool {
        self.failures.throttled(ip, Instant::now())
    }

    fn record_failure(&self, ip: IpAddr) {
        self.failures.record(ip, Instant::now());
    }
}

/// The middleware: see the module documentation for the order.
pub async fn guard(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let mut response = check(&guard, request, next).await;
    add_security_headers(response.headers_mut());
    response
}

async fn check(guard: &Arc<Guard>, request: Request, next: Next) -> Response {
    if request.uri().path() == crate::metrics::PATH {
        return match metrics_access(guard, &request) {
            Ok(()) => next.run(request).await,
            Err(refusal) => *refusal,
        };
    }
    if !guard.host_allowed(request.headers()) {
        return detail(StatusCode::BAD_REQUEST, "Invalid host header");
    }
    let base = request
        .extensions()
        .get::<Base>()
        .map(|b| b.0.clone())
        .unwrap_or_default();
    let path = request.uri().path().to_string();
    if PUBLIC_PATHS.contains(&path.as_str()) {
        return next.run(request).await;
    }
    let peer = peer_ip(&request);
    if guard.settings.ui_loopback_only && !is_loopback_peer(peer) {
        return detail(
            StatusCode::FORBIDDEN,
            "This dashboard answers on loopback only (no credentials are configured); only /metrics is served on this address",
        );
    }
    let ip = client_ip(guard, &request, peer);
    if guard.throttled(ip) {
        let mut r = detail(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many failed logins; try again later",
        );
        r.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(LOGIN_WINDOW.as_secs()),
        );
        return r;
    }
    if let Some(link) = token_link(&request) {
        return follow_token_link(guard, ip, &base, &link);
    }
    if !guard.authenticated(request.headers(), peer).await {
        if presents_credentials(request.headers()) {
            guard.record_failure(ip);
        }
        return unauthorized(guard, &base, &path);
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let carried = request
            .headers()
            .get(TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| same(t, guard.token()));
        if !carried {
            return detail(
                StatusCode::FORBIDDEN,
                "Missing or wrong X-Hermes-Session-Token (CSRF)",
            );
        }
    }
    next.run(request).await
}

/// Whether this request may scrape `/metrics` (its answer when not): 404 when no metrics
/// credentials are configured (closed: nothing says the endpoint exists); with a bearer token,
/// the metrics token, compared in constant time (a wrong one is a failed login, limited as
/// the others are but counted apart from them); without one, a connection from an allowlisted address whose Host the
/// dashboard answers to. A right token passes whatever the Host: DNS rebinding lets a page
/// send requests, not know the token, and a scraper names the pod by its address. Session
/// credentials never open `/metrics`, and the metrics token opens nothing else.
fn metrics_access(guard: &Guard, request: &Request) -> Result<(), Box<Response>> {
    let access = &guard.settings.metrics;
    if !access.enabled() {
        return Err(Box::new(detail(StatusCode::NOT_FOUND, "Not Found")));
    }
    let peer = peer_ip(request);
    let ip = client_ip(guard, request, peer);
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let refused = || {
        let mut r = detail(StatusCode::UNAUTHORIZED, "Unauthorized");
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"hermes metrics\""),
        );
        Err(Box::new(r))
    };
    // Without a metrics token configured, a bearer (a scraper set up with one anyway) is not a
    // login: the allowlist alone decides.
    match bearer.filter(|_| access.token.is_some()) {
        Some(presented) => {
            if guard.metrics_failures.throttled(ip, Instant::now()) {
                return Err(Box::new(detail(
                    StatusCode::TOO_MANY_REQUESTS,
                    "Too many failed logins; try again later",
                )));
            }
            if access
                .token
                .as_deref()
                .is_some_and(|t| same(presented.trim(), t))
            {
                return Ok(());
            }
            guard.metrics_failures.record(ip, Instant::now());
            refused()
        }
        None if access.allows(peer) && guard.host_allowed(request.headers()) => Ok(()),
        None => refused(),
    }
}

/// `GET <page>?token=…` (the link printed at start): the token as presented, for pages only.
fn token_link(request: &Request) -> Option<String> {
    if request.method() != Method::GET || request.uri().path().starts_with("/api/") {
        return None;
    }
    request
        .uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("token=").map(str::to_string))
}

/// A right token sets the session cookie and redirects to `/` (so the token leaves the
/// address bar and history); a wrong one counts as a failed login.
fn follow_token_link(guard: &Guard, ip: IpAddr, base: &str, presented: &str) -> Response {
    if guard.settings.auth != Auth::Token || !same(presented, guard.token()) {
        guard.record_failure(ip);
        return unauthorized(guard, base, "/");
    }
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path={base}/",
        guard.token()
    );
    let home = format!("{base}/");
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, home.as_str())]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// 401: JSON for the API (the original's body), the login page or the basic-auth challenge
/// for pages.
fn unauthorized(guard: &Guard, base: &str, path: &str) -> Response {
    let mut response = if path.starts_with("/api/") {
        detail(StatusCode::UNAUTHORIZED, "Unauthorized")
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            crate::pages::login(base, &guard.settings.auth),
        )
            .into_response()
    };
    if matches!(guard.settings.auth, Auth::Basic { .. }) {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"hermes dashboard\", charset=\"UTF-8\""),
        );
    }
    response
}

/// Wraps the guarded router so every request carries its [`Base`] (the sub-path the browser
/// sees) before routing.
pub fn with_base_path(inner: axum::Router, guard: Arc<Guard>) -> axum::Router {
    axum::Router::new()
        .fallback_service(inner)
        .layer(axum::middleware::from_fn_with_state(guard, base_path))
}

/// Sets the request's [`Base`] and strips it from the path: the configured base path
/// (`HERMES_DASHBOARD_BASE_PATH`: a request may arrive with it, when the proxy passes the
/// path on, or without it, when the proxy strips it), else a trusted proxy's
/// `X-Forwarded-Prefix` (the proxy stripped it). From anyone else the header is ignored:
/// a client must not choose where the page's links and cookie point.
async fn base_path(State(guard): State<Arc<Guard>>, mut request: Request, next: Next) -> Response {
    let configured = guard.settings.base_path.clone();
    let base = if !configured.is_empty() {
        strip_prefix(&mut request, &configured);
        configured
    } else if guard.settings.trusts(peer_ip(&request)) {
        request
            .headers()
            .get("x-forwarded-prefix")
            .and_then(|v| v.to_str().ok())
            .and_then(crate::config::normalize_base_path)
            .unwrap_or_default()
    } else {
        String::new()
    };
    request.extensions_mut().insert(Base(base));
    next.run(request).await
}

/// Removes `prefix` from the front of the request's path (`/hermes` and `/hermes/x` →
/// `/` and `/x`; `/hermesx` is left alone).
fn strip_prefix(request: &mut Request, prefix: &str) {
    let uri = request.uri();
    let Some(rest) = uri.path().strip_prefix(prefix) else {
        return;
    };
    if !(rest.is_empty() || rest.starts_with('/')) {
        return;
    }
    let path = if rest.is_empty() { "/" } else { rest };
    let path_and_query = match uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    let mut parts = uri.clone().into_parts();
    if let Ok(pq) = path_and_query.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(new) = axum::http::Uri::from_parts(parts) {
            *request.uri_mut() = new;
        }
    }
}

/// A JSON error body `{"detail": …}` with `status`.
pub fn detail(status: StatusCode, text: &str) -> Response {
    (status, axum::Json(json!({ "detail": text }))).into_response()
}

fn add_security_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers
        .entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
}

/// The address of the connection's other end.
fn peer_ip(request: &Request<Body>) -> IpAddr {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// The client the login limiter counts: the peer, or behind a trusted proxy the address that
/// proxy appended last to `X-Forwarded-For` (earlier entries are the client's own claims).
fn client_ip(guard: &Guard, request: &Request<Body>, peer: IpAddr) -> IpAddr {
    if !guard.settings.trusts(peer) {
        return peer;
    }
    request
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|a| a.trim().parse::<IpAddr>().ok())
        .next_back()
        .unwrap_or(peer)
}

/// The token from the cookie, `X-Hermes-Session-Token` or `Authorization: Bearer`.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    let header_value = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(t) = header_value(TOKEN_HEADER) {
        return Some(t.to_string());
    }
    if let Some(t) =
        header_value(header::AUTHORIZATION.as_str()).and_then(|v| v.strip_prefix("Bearer "))
    {
        return Some(t.to_string());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|c| {
            c.trim()
                .strip_prefix(COOKIE)?
                .strip_prefix('=')
                .map(str::to_string)
        })
}

/// Whether the request tried to authenticate at all (a wrong try counts against the limit;
/// a first visit without anything does not).
fn presents_credentials(headers: &HeaderMap) -> bool {
    headers.contains_key(header::AUTHORIZATION) || presented_token(headers).is_some()
}

/// An `Authorization: Basic …` value decoded to `(user, password)`.
fn basic_credentials(value: &str) -> Option<(String, String)> {
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = String::from_utf8(base64_decode(encoded.trim())?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// Standard base64 (with or without padding); `None` for anything else.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// The host name of a Host header value: `example.com:80` → `example.com`, `[::1]:9119` → `::1`.
fn host_name(value: &str) -> &str {
    if let Some(rest) = value.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    value.rsplit_once(':').map_or(value, |(h, _)| h)
}

/// Whether the connection comes from this machine (an IPv4-mapped loopback counts).
fn is_loopback_peer(peer: IpAddr) -> bool {
    match peer {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(v6.is_loopback(), |v4| v4.is_loopback()),
        IpAddr::V4(v4) => v4.is_loopback(),
    }
}

fn is_wildcard(host: &str) -> bool {
    host.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_what_browsers_send() {
        assert_eq!(base64_decode("YWRtaW46cHc=").unwrap(), b"admin:pw");
        assert_eq!(base64_decode("YWRtaW46cHd4").unwrap(), b"admin:pwx");
        assert!(base64_decode("!!").is_none());
    }

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("localhost:9119"), "localhost");
        assert_eq!(host_name("[::1]:9119"), "::1");
        assert_eq!(host_name("example.com"), "example.com");
    }
}
