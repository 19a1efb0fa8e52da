//! What the dashboard serves on and how it authenticates, from flags and the original's
//! environment variables (`HERMES_DASHBOARD_HOST`, `_PORT`, `_BASIC_AUTH_USERNAME`,
//! `_BASIC_AUTH_PASSWORD`, `_SESSION_TOKEN`) plus ours (`_BASIC_AUTH_PASSWORD_HASH`,
//! `_ALLOWED_HOSTS`, `_BASE_PATH`, `_TRUSTED_PROXIES`, `_PROXY_AUTH_HEADER`), and who may
//! scrape `/metrics` (`HERMES_METRICS_TOKEN`, `HERMES_METRICS_ALLOW`: [`MetricsAccess`]).
//!
//! Fails closed: a host that is not loopback without credentials is an [`Error`], never an
//! open dashboard.

use std::net::IpAddr;

use crate::Error;

/// Default host, as the original's.
pub const DEFAULT_HOST: &str = "127.0.0.1";
/// The host the original's image binds (`docker/s6-rc.d/dashboard/run`:
/// `${HERMES_DASHBOARD_HOST:-0.0.0.0}`), ours only once credentials are configured.
pub const IMAGE_HOST_WITH_CREDENTIALS: &str = "0.0.0.0";

/// Where the dashboard runs, which decides the host when none is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// A machine (`hermes up`, a shell): loopback.
    Machine,
    /// The container image (its marker file exists): all IPv4 addresses, as the original's
    /// image, when credentials (basic or a trusted proxy) are configured — a published port
    /// must reach it — else loopback with the token, as on a machine. Never open: without
    /// credentials a non-loopback host is still refused.
    Image,
}
/// Default port, as the original's.
pub const DEFAULT_PORT: u16 = 9119;
/// The shortest session token accepted from the environment.
const MIN_TOKEN_LEN: usize = 16;

/// How a request proves who it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Loopback: the session token (cookie, `X-Hermes-Session-Token` or `Bearer`).
    Token,
    /// HTTP basic authentication with these credentials.
    Basic {
        /// User name.
        username: String,
        /// The password, or its hash.
        password: Password,
    },
    /// A reverse proxy that authenticates users and names them in `header`; only requests
    /// from [`Settings::trusted_proxies`] are believed.
    Proxy {
        /// The header carrying the signed-in user (e.g. `X-Forwarded-User`), lowercase.
        header: String,
    },
}

/// A basic-auth password as configured.
#[derive(Clone, PartialEq, Eq)]
pub enum Password {
    /// `HERMES_DASHBOARD_BASIC_AUTH_PASSWORD` (the original's).
    Plain(String),
    /// `HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH`: a bcrypt hash (`$2b$…`, `htpasswd -B`).
    Bcrypt(String),
}

impl std::fmt::Debug for Password {
    // Never the secret in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Password::Plain(_) => f.write_str("Plain(…)"),
            Password::Bcrypt(_) => f.write_str("Bcrypt(…)"),
        }
    }
}

impl Password {
    /// Whether `presented` is this password (bcrypt's own comparison for a hash; constant time
    /// for a plain one). Slow for a hash, by design: call it off the async workers.
    pub fn matches(&self, presented: &str) -> bool {
        match self {
            Password::Plain(p) => crate::secret::same(presented, p),
            Password::Bcrypt(hash) => bcrypt::verify(presented, hash).unwrap_or(false),
        }
    }
}

/// Everything the server needs to start.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The host to bind.
    pub host: String,
    /// The port to bind.
    pub port: u16,
    /// How requests authenticate.
    pub auth: Auth,
    /// The per-start secret: the login token on loopback, and in every mode the value a
    /// state-changing request must carry in `X-Hermes-Session-Token` (CSRF).
    pub token: String,
    /// Whether [`token`](Self::token) was given (`HERMES_DASHBOARD_SESSION_TOKEN`: the
    /// operator's, or the supervisor's) rather than made at this start. A given token is never
    /// printed: under a supervisor the output is a service log, on the volume and in backups.
    pub token_given: bool,
    /// Host header values accepted besides the bound host (and loopback names on loopback).
    pub extra_hosts: Vec<String>,
    /// The sub-path the dashboard is served under (`/hermes`), or `""` at the root.
    pub base_path: String,
    /// Reverse proxies whose `X-Forwarded-Prefix`, `X-Forwarded-For` and user header are
    /// believed.
    pub trusted_proxies: Vec<Cidr>,
    /// Who may scrape `/metrics` without a session.
    pub metrics: MetricsAccess,
    /// A public host without credentials, allowed for `/metrics` alone: every other path
    /// answers connections from loopback only (`kubectl port-forward` and an SSH tunnel
    /// arrive there), as on a loopback host.
    pub ui_loopback_only: bool,
}

/// Who may scrape `GET /metrics`: a scraper has no browser session, so the endpoint has its
/// own credentials. With neither set it answers 404 (closed, not open).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct MetricsAccess {
    /// `HERMES_METRICS_TOKEN`: sent as `Authorization: Bearer <token>` (at least 16
    /// characters; compared in constant time).
    pub token: Option<String>,
    /// `HERMES_METRICS_ALLOW`: client addresses or networks that may scrape without the token
    /// (comma-separated, as `HERMES_DASHBOARD_TRUSTED_PROXIES`); the connection's own address
    /// counts, never a forwarded one.
    pub allow: Vec<Cidr>,
}

impl MetricsAccess {
    /// From the environment: `HERMES_METRICS_TOKEN` and `HERMES_METRICS_ALLOW`.
    fn resolve(set: &dyn Fn(&str) -> Option<String>) -> Result<MetricsAccess, Error> {
        let token = match set("HERMES_METRICS_TOKEN").map(|t| t.trim().to_string()) {
            Some(t) if t.len() < MIN_TOKEN_LEN => {
                return Err(Error::WeakMetricsToken { min: MIN_TOKEN_LEN });
            }
            other => other,
        };
        let allow = cidr_list(set("HERMES_METRICS_ALLOW"), |value| {
            Error::InvalidMetricsAllow { value }
        })?;
        Ok(MetricsAccess { token, allow })
    }

    /// Whether `/metrics` is served at all.
    pub fn enabled(&self) -> bool {
        self.token.is_some() || !self.allow.is_empty()
    }

    /// Whether a connection from `peer` may scrape without the token.
    pub fn allows(&self, peer: IpAddr) -> bool {
        self.allow.iter().any(|c| c.contains(peer))
    }
}

impl std::fmt::Debug for MetricsAccess {
    // Never the token in a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAccess")
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("allow", &self.allow)
            .finish()
    }
}

/// A comma-separated list of addresses or networks (`None`: empty); an entry that is neither
/// is `invalid(entry)`.
fn cidr_list(list: Option<String>, invalid: impl Fn(String) -> Error) -> Result<Vec<Cidr>, Error> {
    list.iter()
        .flat_map(|l| l.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|v| Cidr::parse(v).map_err(|_| invalid(v.to_string())))
        .collect()
}

impl Settings {
    /// Resolves flags over the environment (`var`) on a machine, checking that the result is
    /// safe to serve.
    pub fn resolve(
        host: Option<String>,
        port: Option<u16>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Settings, Error> {
        Self::resolve_at(Place::Machine, host, port, var)
    }

    /// [`Settings::resolve`] at `place`, which decides the host when neither the flag nor
    /// `HERMES_DASHBOARD_HOST` gives one (see [`Place`]).
    pub fn resolve_at(
        place: Place,
        host: Option<String>,
        port: Option<u16>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Settings, Error> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let port = match (port, set("HERMES_DASHBOARD_PORT")) {
            (Some(p), _) => p,
            (None, Some(v)) => parse_port(&v)?,
            (None, None) => DEFAULT_PORT,
        };
        let trusted_proxies = cidr_list(set("HERMES_DASHBOARD_TRUSTED_PROXIES"), |value| {
            Error::InvalidTrustedProxy { value }
        })?;
        let credentials = configured_credentials(&set, &trusted_proxies)?;
        let host = match host.or_else(|| set("HERMES_DASHBOARD_HOST")) {
            Some(host) => host,
            None if place == Place::Image && credentials.is_some() => {
                IMAGE_HOST_WITH_CREDENTIALS.to_string()
            }
            None => DEFAULT_HOST.to_string(),
        };
        let metrics = MetricsAccess::resolve(&set)?;
        // Without credentials, a public host is refused, unless it is for `/metrics` (its own
        // credentials): then everything else still answers loopback peers only.
        let ui_loopback_only = credentials.is_none() && !is_loopback(&host);
        let auth = match credentials {
            Some(auth) => auth,
            None if is_loopback(&host) || metrics.enabled() => Auth::Token,
            None => return Err(Error::CredentialsRequired { host }),
        };
        let given = set("HERMES_DASHBOARD_SESSION_TOKEN");
        let token_given = given.is_some();
        let token = match given {
            Some(t) if t.len() < MIN_TOKEN_LEN => {
                return Err(Error::WeakToken { min: MIN_TOKEN_LEN });
            }
            Some(t) => t,
            None => random_token()?,
        };
        let extra_hosts = set("HERMES_DASHBOARD_ALLOWED_HOSTS")
            .map(|v| {
                v.split(',')
                    .map(|h| h.trim().to_ascii_lowercase())
                    .filter(|h| !h.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let base_path = match set("HERMES_DASHBOARD_BASE_PATH") {
            Some(v) => normalize_base_path(&v).ok_or(Error::InvalidBasePath { value: v })?,
            None => String::new(),
        };
        Ok(Settings {
            host,
            port,
            auth,
            token,
            token_given,
            extra_hosts,
            base_path,
            trusted_proxies,
            metrics,
            ui_loopback_only,
        })
    }

    /// `host:port` for binding (an IPv6 host in brackets).
    pub fn bind_addr(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Whether a connection from `peer` is one of the trusted reverse proxies.
    pub fn trusts(&self, peer: IpAddr) -> bool {
        self.trusted_proxies.iter().any(|c| c.contains(peer))
    }
}

/// The configured credentials: basic ones when given (a plain password or a bcrypt hash, not
/// both), else a trusted proxy's user header when enabled, else none (`None`: the token, on
/// loopback only). Half-configured credentials are an error, wherever the dashboard binds.
fn configured_credentials(
    set: &dyn Fn(&str) -> Option<String>,
    trusted_proxies: &[Cidr],
) -> Result<Option<Auth>, Error> {
    let username = set("HERMES_DASHBOARD_BASIC_AUTH_USERNAME");
    let password = match (
        set("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD"),
        set("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH"),
    ) {
        (Some(_), Some(_)) => return Err(Error::PasswordTwice),
        (Some(p), None) => Some(Password::Plain(p)),
        (None, Some(h)) => {
            let h = h.trim().to_string();
            // Checked now, so a mistyped hash fails the start instead of every login.
            if bcrypt::verify("", &h).is_err() {
                return Err(Error::InvalidPasswordHash);
            }
            Some(Password::Bcrypt(h))
        }
        (None, None) => None,
    };
    let proxy_header = set("HERMES_DASHBOARD_PROXY_AUTH_HEADER");
    match (username, password, proxy_header) {
        (Some(username), Some(password), _) => Ok(Some(Auth::Basic { username, password })),
        (None, Some(_), _) => Err(Error::UsernameMissing),
        (_, None, Some(header)) => {
            if trusted_proxies.is_empty() {
                return Err(Error::ProxyAuthWithoutProxies);
            }
            Ok(Some(Auth::Proxy {
                header: header.trim().to_ascii_lowercase(),
            }))
        }
        _ => Ok(None),
    }
}

/// `/hermes/` → `/hermes`; `/` or `` → ``; `None` for anything that is not a plain path
/// (no scheme, no `..`, no query, only URL-safe characters).
pub fn normalize_base_path(value: &str) -> Option<String> {
    let trimmed = value.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        return Some(String::new());
    }
    let plain = trimmed.starts_with('/')
        && trimmed.len() <= 200
        && trimmed
            .split('/')
            .skip(1)
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && trimmed
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b));
    plain.then(|| trimmed.to_string())
}

/// An address or network (`10.0.0.5`, `10.0.0.0/8`, `fd00::/8`) of trusted proxies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `ip` or `ip/prefix`.
    pub fn parse(text: &str) -> Result<Cidr, Error> {
        let invalid = || Error::InvalidTrustedProxy {
            value: text.to_string(),
        };
        let (ip, prefix) = match text.split_once('/') {
            Some((ip, p)) => (ip, Some(p.parse::<u8>().map_err(|_| invalid())?)),
            None => (text, None),
        };
        let addr: IpAddr = ip.parse().map_err(|_| invalid())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        if prefix > max {
            return Err(invalid());
        }
        Ok(Cidr { addr, prefix })
    }

    /// Whether `ip` is in this network (an IPv4-mapped IPv6 peer counts as its IPv4 address).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                prefix_eq(&net.octets(), &ip.octets(), self.prefix)
            }
            _ => false,
        }
    }
}

/// Whether the first `bits` bits of `a` and `b` are equal.
fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let (whole, rest) = (usize::from(bits / 8), bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || (a[whole] ^ b[whole]) >> (8 - rest) == 0
}

/// Whether `host` is a loopback name or address (the original's rule: `127.0.0.1`,
/// `localhost`, `::1`; a LAN address counts as public).
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn parse_port(value: &str) -> Result<u16, Error> {
    value
        .trim()
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| Error::InvalidPort {
            value: value.to_string(),
        })
}

/// 32 random bytes as 64 hex digits, from the kernel's generator.
fn random_token() -> Result<String, Error> {
    hermes_home::random::random_hex(32).map_err(Error::Random)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| owned.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn in_the_image_credentials_open_all_addresses_and_nothing_else_does() {
        let basic = [
            ("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin"),
            ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD", "pw"),
        ];
        let s = Settings::resolve_at(Place::Image, None, None, env(&basic)).unwrap();
        assert_eq!(
            s.bind_addr(),
            "0.0.0.0:9119",
            "where the original's image listens"
        );
        assert!(matches!(s.auth, Auth::Basic { .. }));
        let proxy = [
            ("HERMES_DASHBOARD_PROXY_AUTH_HEADER", "X-Forwarded-User"),
            ("HERMES_DASHBOARD_TRUSTED_PROXIES", "10.0.0.0/8"),
        ];
        let s = Settings::resolve_at(Place::Image, None, None, env(&proxy)).unwrap();
        assert_eq!(s.host, "0.0.0.0");

        // No credentials: loopback and the token, as on a machine (never an open dashboard).
        let s = Settings::resolve_at(Place::Image, None, None, env(&[])).unwrap();
        assert_eq!((s.host.as_str(), &s.auth), ("127.0.0.1", &Auth::Token));
        let half = [("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin")];
        let s = Settings::resolve_at(Place::Image, None, None, env(&half)).unwrap();
        assert_eq!(s.host, "127.0.0.1", "a user name alone is no credential");
        // An explicit host wins, and without credentials a public one is still refused.
        let s = Settings::resolve_at(Place::Image, Some("127.0.0.1".into()), None, env(&basic))
            .unwrap();
        assert_eq!(s.host, "127.0.0.1");
        let e =
            Settings::resolve_at(Place::Image, Some("0.0.0.0".into()), None, env(&[])).unwrap_err();
        assert!(matches!(e, Error::CredentialsRequired { .. }), "{e}");
        let pinned = [("HERMES_DASHBOARD_HOST", "10.1.2.3")];
        let e = Settings::resolve_at(Place::Image, None, None, env(&pinned)).unwrap_err();
        assert!(matches!(e, Error::CredentialsRequired { .. }), "{e}");

        // On a machine, credentials alone do not widen the bind.
        let s = Settings::resolve(None, None, env(&basic)).unwrap();
        assert_eq!(s.host, "127.0.0.1");
    }

    #[test]
    fn defaults_are_the_originals_loopback_with_a_fresh_token() {
        let a = Settings::resolve(None, None, env(&[])).unwrap();
        let b = Settings::resolve(None, None, env(&[])).unwrap();
        assert_eq!(a.bind_addr(), "127.0.0.1:9119");
        assert_eq!(a.auth, Auth::Token);
        assert_eq!(a.token.len(), 64);
        assert_ne!(a.token, b.token, "a token per start");
    }

    #[test]
    fn flags_win_over_the_environment() {
        let s = Settings::resolve(
            Some("::1".into()),
            Some(8000),
            env(&[
                ("HERMES_DASHBOARD_HOST", "localhost"),
                ("HERMES_DASHBOARD_PORT", "7000"),
            ]),
        )
        .unwrap();
        assert_eq!(s.bind_addr(), "[::1]:8000");
    }

    #[test]
    fn a_public_host_without_credentials_is_refused_with_78() {
        let e = Settings::resolve(Some("0.0.0.0".into()), None, env(&[])).unwrap_err();
        assert!(matches!(e, Error::CredentialsRequired { .. }));
        assert_eq!(e.exit_code(), 78);
        assert!(
            e.hint()
                .unwrap()
                .contains("HERMES_DASHBOARD_BASIC_AUTH_USERNAME")
        );
        // A LAN address is public too.
        let e = Settings::resolve(Some("192.168.1.5".into()), None, env(&[])).unwrap_err();
        assert!(matches!(e, Error::CredentialsRequired { .. }));
    }

    #[test]
    fn credentials_turn_on_basic_auth() {
        let s = Settings::resolve(
            Some("0.0.0.0".into()),
            None,
            env(&[
                ("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin"),
                ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD", "pw"),
            ]),
        )
        .unwrap();
        assert!(matches!(s.auth, Auth::Basic { ref username, .. } if username == "admin"));
    }

    #[test]
    fn a_bcrypt_hash_is_a_password_and_is_checked_at_start() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let s = Settings::resolve(
            Some("0.0.0.0".into()),
            None,
            env(&[
                ("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin"),
                ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH", &hash),
            ]),
        )
        .unwrap();
        let Auth::Basic { password, .. } = s.auth else {
            panic!("basic expected")
        };
        assert!(password.matches("s3cret"));
        assert!(!password.matches("s3creT"));
        assert_eq!(format!("{password:?}"), "Bcrypt(…)");
        for (vars, expected) in [
            (
                vec![
                    ("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin"),
                    ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH", "not-a-hash"),
                ],
                "hash",
            ),
            (
                vec![
                    ("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin"),
                    ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD", "pw"),
                    ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH", hash.as_str()),
                ],
                "both",
            ),
            (vec![("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD", "pw")], "user"),
        ] {
            let e = Settings::resolve(Some("0.0.0.0".into()), None, env(&vars)).unwrap_err();
            assert_eq!(e.exit_code(), 78, "{expected}: {e}");
            let ok = match expected {
                "hash" => matches!(e, Error::InvalidPasswordHash),
                "both" => matches!(e, Error::PasswordTwice),
                _ => matches!(e, Error::UsernameMissing),
            };
            assert!(ok, "{expected}: {e:?}");
        }
    }

    #[test]
    fn a_proxy_user_header_needs_trusted_proxies() {
        let e = Settings::resolve(
            Some("0.0.0.0".into()),
            None,
            env(&[("HERMES_DASHBOARD_PROXY_AUTH_HEADER", "X-Forwarded-User")]),
        )
        .unwrap_err();
        assert!(matches!(e, Error::ProxyAuthWithoutProxies));
        let s = Settings::resolve(
            Some("0.0.0.0".into()),
            None,
            env(&[
                ("HERMES_DASHBOARD_PROXY_AUTH_HEADER", "X-Forwarded-User"),
                ("HERMES_DASHBOARD_TRUSTED_PROXIES", "10.0.0.0/8, ::1"),
            ]),
        )
        .unwrap();
        assert_eq!(
            s.auth,
            Auth::Proxy {
                header: "x-forwarded-user".into()
            }
        );
        assert!(s.trusts("10.9.8.7".parse().unwrap()));
        assert!(s.trusts("::ffff:10.1.1.1".parse().unwrap()));
        assert!(s.trusts("::1".parse().unwrap()));
        assert!(!s.trusts("11.0.0.1".parse().unwrap()));
        let e = Settings::resolve(
            None,
            None,
            env(&[("HERMES_DASHBOARD_TRUSTED_PROXIES", "10.0.0.0/33")]),
        )
        .unwrap_err();
        assert!(matches!(e, Error::InvalidTrustedProxy { .. }));
    }

    #[test]
    fn cidr_prefixes() {
        let net = Cidr::parse("192.168.4.0/22").unwrap();
        assert!(net.contains("192.168.7.255".parse().unwrap()));
        assert!(!net.contains("192.168.8.0".parse().unwrap()));
        assert!(
            Cidr::parse("0.0.0.0/0")
                .unwrap()
                .contains("8.8.8.8".parse().unwrap())
        );
        assert!(
            !Cidr::parse("fd00::/8")
                .unwrap()
                .contains("10.0.0.1".parse().unwrap())
        );
    }

    #[test]
    fn base_paths_are_plain_paths() {
        assert_eq!(normalize_base_path("/hermes/").unwrap(), "/hermes");
        assert_eq!(normalize_base_path("/a/b-c_d.e~f").unwrap(), "/a/b-c_d.e~f");
        assert_eq!(normalize_base_path("/").unwrap(), "");
        for bad in [
            "hermes",
            "/a/../b",
            "//x",
            "/a?b",
            "/a b",
            "http://x/y",
            "/a\"\x3cb",
        ] {
            assert!(normalize_base_path(bad).is_none(), "{bad}");
        }
        let e = Settings::resolve(None, None, env(&[("HERMES_DASHBOARD_BASE_PATH", "x/..")]))
            .unwrap_err();
        assert_eq!(e.exit_code(), 78);
    }

    #[test]
    fn a_bad_port_and_a_short_fixed_token_are_configuration_errors() {
        let e =
            Settings::resolve(None, None, env(&[("HERMES_DASHBOARD_PORT", "http")])).unwrap_err();
        assert_eq!(e.exit_code(), 78);
        let e = Settings::resolve(
            None,
            None,
            env(&[("HERMES_DASHBOARD_SESSION_TOKEN", "abc")]),
        )
        .unwrap_err();
        assert!(matches!(e, Error::WeakToken { .. }));
        let fixed = "0123456789abcdef0123";
        let s = Settings::resolve(
            None,
            None,
            env(&[("HERMES_DASHBOARD_SESSION_TOKEN", fixed)]),
        )
        .unwrap();
        assert_eq!(s.token, fixed);
        assert!(s.token_given, "a given token is never printed");
        assert!(!Settings::resolve(None, None, env(&[])).unwrap().token_given);
    }

    #[test]
    fn metrics_access_is_closed_unless_a_token_or_an_allowlist_is_set() {
        let s = Settings::resolve(None, None, env(&[])).unwrap();
        assert!(!s.metrics.enabled());
        let s = Settings::resolve(
            None,
            None,
            env(&[
                ("HERMES_METRICS_TOKEN", "  0123456789abcdef0123 "),
                ("HERMES_METRICS_ALLOW", "10.42.0.0/16, ::1"),
            ]),
        )
        .unwrap();
        assert!(s.metrics.enabled());
        assert_eq!(s.metrics.token.as_deref(), Some("0123456789abcdef0123"));
        assert!(s.metrics.allows("10.42.7.1".parse().unwrap()));
        assert!(s.metrics.allows("::1".parse().unwrap()));
        assert!(!s.metrics.allows("10.43.0.1".parse().unwrap()));
        assert!(
            !format!("{:?}", s.metrics).contains("0123"),
            "never the token"
        );
        let e =
            Settings::resolve(None, None, env(&[("HERMES_METRICS_TOKEN", "short")])).unwrap_err();
        assert!(matches!(e, Error::WeakMetricsToken { .. }), "{e:?}");
        let e = Settings::resolve(None, None, env(&[("HERMES_METRICS_ALLOW", "10.0.0.0/33")]))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidMetricsAllow { ref value } if value == "10.0.0.0/33"));
        assert_eq!(e.exit_code(), 78);
    }

    #[test]
    fn a_public_host_for_metrics_alone_keeps_the_pages_on_loopback() {
        let token = [("HERMES_METRICS_TOKEN", "0123456789abcdef0123")];
        let s = Settings::resolve(Some("0.0.0.0".into()), None, env(&token)).unwrap();
        assert_eq!(s.auth, Auth::Token);
        assert!(s.ui_loopback_only);
        // Credentials open the pages to every address, as before; loopback is loopback.
        let basic = [
            ("HERMES_DASHBOARD_BASIC_AUTH_USERNAME", "admin"),
            ("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD", "pw"),
            token[0],
        ];
        let s = Settings::resolve(Some("0.0.0.0".into()), None, env(&basic)).unwrap();
        assert!(!s.ui_loopback_only);
        let s = Settings::resolve(None, None, env(&token)).unwrap();
        assert!(!s.ui_loopback_only);
        // In the image, the metrics token alone does not widen the default bind.
        let s = Settings::resolve_at(Place::Image, None, None, env(&token)).unwrap();
        assert_eq!(s.host, "127.0.0.1");
    }

    #[test]
    fn loopback_names() {
        for h in ["127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"] {
            assert!(is_loopback(h), "{h}");
        }
        for h in ["0.0.0.0", "10.0.0.1", "example.com", "::"] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
