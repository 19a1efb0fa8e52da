//! What the dashboard serves on and how it authenticates, from flags and the original's
//! environment variables (`HERMES_DASHBOARD_HOST`, `_PORT`, `_BASIC_AUTH_USERNAME`,
//! `_BASIC_AUTH_PASSWORD`, `_SESSION_TOKEN`) plus ours (`HERMES_DASHBOARD_ALLOWED_HOSTS`).
//!
//! Fails closed: a host that is not loopback without credentials is an [`Error`], never an
//! open dashboard.

use std::io::Read;

use crate::Error;

/// Default host, as the original's.
pub const DEFAULT_HOST: &str = "127.0.0.1";
/// Default port, as the original's.
pub const DEFAULT_PORT: u16 = 9119;
/// The shortest session token accepted from the environment.
const MIN_TOKEN_LEN: usize = 16;

/// How a request proves who it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Auth {
    /// Loopback: the session token (cookie, `X-Hermes-Session-Token` or `Bearer`).
    Token,
    /// Any other address: HTTP basic authentication with these credentials.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: String,
    },
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
    /// Host header values accepted besides the bound host (and loopback names on loopback).
    pub extra_hosts: Vec<String>,
}

impl Settings {
    /// Resolves flags over the environment (`var`), checking that the result is safe to serve.
    pub fn resolve(
        host: Option<String>,
        port: Option<u16>,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Settings, Error> {
        let set = |name: &str| var(name).filter(|v| !v.is_empty());
        let host = host
            .or_else(|| set("HERMES_DASHBOARD_HOST"))
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        let port = match (port, set("HERMES_DASHBOARD_PORT")) {
            (Some(p), _) => p,
            (None, Some(v)) => parse_port(&v)?,
            (None, None) => DEFAULT_PORT,
        };
        let auth = match (
            set("HERMES_DASHBOARD_BASIC_AUTH_USERNAME"),
            set("HERMES_DASHBOARD_BASIC_AUTH_PASSWORD"),
        ) {
            (Some(username), Some(password)) => Auth::Basic { username, password },
            _ if is_loopback(&host) => Auth::Token,
            _ => return Err(Error::CredentialsRequired { host }),
        };
        let token = match set("HERMES_DASHBOARD_SESSION_TOKEN") {
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
        Ok(Settings {
            host,
            port,
            auth,
            token,
            extra_hosts,
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
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(Error::Random)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
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
