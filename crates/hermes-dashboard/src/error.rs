//! The crate's one error type: what stops the dashboard from starting. Each variant has a
//! [`hint`](Error::hint) and an exit code ([`Error::exit_code`]).

/// Why the dashboard cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A non-loopback bind without configured credentials: refused rather than served open.
    #[error("the dashboard will not listen on `{host}` without credentials")]
    CredentialsRequired {
        /// The configured host.
        host: String,
    },
    /// `HERMES_DASHBOARD_PORT` (or `--port`) is not a port number.
    #[error("invalid dashboard port `{value}`")]
    InvalidPort {
        /// The value as given.
        value: String,
    },
    /// `HERMES_DASHBOARD_SESSION_TOKEN` is set but too short to be a secret.
    #[error("the session token in HERMES_DASHBOARD_SESSION_TOKEN is shorter than {min} characters")]
    WeakToken {
        /// The minimum length.
        min: usize,
    },
    /// Both a password and a password hash are configured.
    #[error("both HERMES_DASHBOARD_BASIC_AUTH_PASSWORD and _PASSWORD_HASH are set")]
    PasswordTwice,
    /// `HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH` is not a bcrypt hash.
    #[error("`HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH` is not a bcrypt hash")]
    InvalidPasswordHash,
    /// A password without a user name.
    #[error("a dashboard password is set without HERMES_DASHBOARD_BASIC_AUTH_USERNAME")]
    UsernameMissing,
    /// A proxy's user header without a list of trusted proxies: anyone could send it.
    #[error(
        "`HERMES_DASHBOARD_PROXY_AUTH_HEADER` is set without `HERMES_DASHBOARD_TRUSTED_PROXIES`"
    )]
    ProxyAuthWithoutProxies,
    /// An entry of `HERMES_DASHBOARD_TRUSTED_PROXIES` is not an address or network.
    #[error("invalid trusted proxy `{value}`")]
    InvalidTrustedProxy {
        /// The entry as given.
        value: String,
    },
    /// `HERMES_METRICS_TOKEN` is set but too short to be a secret.
    #[error("the metrics token in HERMES_METRICS_TOKEN is shorter than {min} characters")]
    WeakMetricsToken {
        /// The minimum length.
        min: usize,
    },
    /// An entry of `HERMES_METRICS_ALLOW` is not an address or network.
    #[error("invalid address `{value}` in HERMES_METRICS_ALLOW")]
    InvalidMetricsAllow {
        /// The entry as given.
        value: String,
    },
    /// `HERMES_DASHBOARD_BASE_PATH` is not a plain path.
    #[error("invalid dashboard base path `{value}`")]
    InvalidBasePath {
        /// The value as given.
        value: String,
    },
    /// No random bytes for the session token.
    #[error("cannot read random bytes for the session token")]
    Random(#[source] std::io::Error),
    /// The address cannot be bound (in use, not local, not permitted).
    #[error("cannot listen on `{addr}`")]
    Bind {
        /// `host:port`.
        addr: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Serving failed after the start.
    #[error("the dashboard server failed")]
    Serve(#[source] std::io::Error),
}

impl Error {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            Error::CredentialsRequired { .. } => "set HERMES_DASHBOARD_BASIC_AUTH_USERNAME and HERMES_DASHBOARD_BASIC_AUTH_PASSWORD (or _PASSWORD_HASH, from `hermes dashboard hash-password`), or HERMES_DASHBOARD_PROXY_AUTH_HEADER with HERMES_DASHBOARD_TRUSTED_PROXIES behind an authenticating proxy; or listen on 127.0.0.1 (the default) and reach it through an SSH tunnel".into(),
            Error::PasswordTwice => "keep one: the hash (`hermes dashboard hash-password`) is the safer".into(),
            Error::InvalidPasswordHash => "make one with `hermes dashboard hash-password` or `htpasswd -nB USER` (the part after the colon); quote it in .env: '$2b$…'".into(),
            Error::UsernameMissing => "set HERMES_DASHBOARD_BASIC_AUTH_USERNAME too".into(),
            Error::ProxyAuthWithoutProxies => "list the proxy's addresses in HERMES_DASHBOARD_TRUSTED_PROXIES (comma-separated addresses or networks, e.g. 172.18.0.0/16)".into(),
            Error::InvalidTrustedProxy { .. } => "give IP addresses or networks, comma-separated: 10.0.0.5, 172.18.0.0/16, fd00::/8".into(),
            Error::WeakMetricsToken { .. } => "use a random value, e.g. `openssl rand -hex 32`, and give the scraper the same one as its bearer token".into(),
            Error::InvalidMetricsAllow { .. } => "give the scrapers' IP addresses or networks, comma-separated: 10.0.0.5, 10.42.0.0/16, fd00::/8".into(),
            Error::InvalidBasePath { .. } => "give the path the proxy serves the dashboard under, e.g. /hermes".into(),
            Error::InvalidPort { .. } => "give a number from 1 to 65535 (default 9119)".into(),
            Error::WeakToken { .. } => "use a random value, e.g. `openssl rand -hex 32`, or unset it for a fresh token per start".into(),
            Error::Random(_) => "the dashboard needs /dev/urandom; or set HERMES_DASHBOARD_SESSION_TOKEN".into(),
            Error::Bind { .. } => "choose another port with --port or HERMES_DASHBOARD_PORT, or stop what uses it".into(),
            Error::Serve(_) => "start it again; under a supervisor it is restarted by itself".into(),
        })
    }

    /// The exit code: 78 (configuration) for what the operator must change, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::CredentialsRequired { .. }
            | Error::InvalidPort { .. }
            | Error::WeakToken { .. }
            | Error::PasswordTwice
            | Error::InvalidPasswordHash
            | Error::UsernameMissing
            | Error::ProxyAuthWithoutProxies
            | Error::InvalidTrustedProxy { .. }
            | Error::WeakMetricsToken { .. }
            | Error::InvalidMetricsAllow { .. }
            | Error::InvalidBasePath { .. } => hermes_errors::exit::CONFIG,
            Error::Random(_) | Error::Bind { .. } | Error::Serve(_) => 1,
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::CredentialsRequired { .. } => Error::CredentialsRequired { host: "0.0.0.0".into() },
    Error::InvalidPort { .. } => Error::InvalidPort { value: "http".into() },
    Error::WeakToken { .. } => Error::WeakToken { min: 16 },
    Error::PasswordTwice => Error::PasswordTwice,
    Error::InvalidPasswordHash => Error::InvalidPasswordHash,
    Error::UsernameMissing => Error::UsernameMissing,
    Error::ProxyAuthWithoutProxies => Error::ProxyAuthWithoutProxies,
    Error::InvalidTrustedProxy { .. } => Error::InvalidTrustedProxy { value: "10.0.0.0/33".into() },
    Error::WeakMetricsToken { .. } => Error::WeakMetricsToken { min: 16 },
    Error::InvalidMetricsAllow { .. } => Error::InvalidMetricsAllow { value: "10.0.0.0/33".into() },
    Error::InvalidBasePath { .. } => Error::InvalidBasePath { value: "x/..".into() },
    Error::Random(_) => Error::Random(std::io::Error::from_raw_os_error(2)),
    Error::Bind { .. } => Error::Bind {
        addr: "127.0.0.1:9119".into(),
        source: std::io::Error::from_raw_os_error(98),
    },
    Error::Serve(_) => Error::Serve(std::io::Error::from_raw_os_error(24)),
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_hint_and_configuration_is_78() {
        for (name, e) in Error::every_variant() {
            assert!(e.hint().is_some_and(|h| !h.is_empty()), "{name}: {e}");
            let configuration =
                !matches!(e, Error::Random(_) | Error::Bind { .. } | Error::Serve(_));
            assert_eq!(e.exit_code() == 78, configuration, "{name}");
        }
    }
}
