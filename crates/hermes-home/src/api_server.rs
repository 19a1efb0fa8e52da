//! Where a profile's API server listens and how long it drains: one rule for the gateway that
//! serves it and for the supervisor that binds its socket.
//!
//! Read from the profile's *env map* (`.env` over the process environment,
//! [`crate::dotenv::DotEnv::overlay`]; an empty value counts as unset) over its `config.yaml`
//! (`${VAR}` expanded from the env map), then the default:
//!
//! | what | env | `config.yaml` | default |
//! |---|---|---|---|
//! | host | `API_SERVER_HOST` | `platforms.api_server.extra.host` | `127.0.0.1` |
//! | port | `API_SERVER_PORT` | `platforms.api_server.extra.port` | [`default_port`] |
//! | drain timeout (s) | `HERMES_GATEWAY_DRAIN_TIMEOUT` | `gateway.drain_timeout` | 30 |
//! | switched on | `API_SERVER_ENABLED` truthy, or `API_SERVER_KEY` set | `platforms.api_server.enabled` (also under `gateway.`) | off |
//!
//! Default port: the `default` profile listens on 8642 (as the original did); every named
//! profile gets `9200 + (sha256(name) as a big-endian integer) mod 600`, so two profiles never
//! silently share a port by default.
//!
//! Whether a switched-on server has a key strong enough to start is the gateway's check
//! (`hermes_gateway_settings::api_server`), not this module's: the socket is bound either way, and the
//! gateway says what is wrong.

use std::collections::BTreeMap;
use std::time::Duration;

use hermes_errors::switch::is_truthy;
use sha2::{Digest, Sha256};

use crate::DEFAULT_PROFILE;
use crate::config::Config;
use crate::dotenv::nonblank;

/// Port of the `default` profile's gateway.
pub const DEFAULT_PORT: u16 = 8642;
/// First port of the named-profile range `[9200, 9800)`.
pub const NAMED_PORT_BASE: u16 = 9200;
/// Size of the named-profile port range.
pub const NAMED_PORT_SLOTS: u16 = 600;
/// The host the API server binds when none is set: loopback only.
pub const DEFAULT_HOST: &str = "127.0.0.1";
/// How long in-flight requests may run after a gateway is asked to stop, by default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The env override of [`DRAIN_TIMEOUT_KEY`], in whole seconds.
pub const DRAIN_TIMEOUT_VAR: &str = "HERMES_GATEWAY_DRAIN_TIMEOUT";
/// The `config.yaml` key of the drain timeout, in whole seconds.
pub const DRAIN_TIMEOUT_KEY: &str = "gateway.drain_timeout";

/// A setting whose value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid `{key}` value `{value}`: {reason}")]
pub struct InvalidSetting {
    /// The setting's name, as the operator writes it (`API_SERVER_PORT`).
    pub key: String,
    /// The value found.
    pub value: String,
    /// Why it is unusable.
    pub reason: String,
}

impl InvalidSetting {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        Some(format!(
            "fix `{}` in the profile's `.env` or `config.yaml`",
            self.key
        ))
    }
}

/// The value of `env_key` in the env map, else of `config_key` in `config.yaml`, with the key
/// it came from.
fn setting(
    env: &BTreeMap<String, String>,
    config: &Config,
    env_key: &'static str,
    config_key: &'static str,
) -> Option<(&'static str, String)> {
    let lookup = |k: &str| env.get(k).cloned();
    env.get(env_key)
        .and_then(|v| nonblank(v))
        .map(|v| (env_key, v.to_string()))
        .or_else(|| config.string(config_key, &lookup).map(|v| (config_key, v)))
}

/// The host the API server binds.
pub fn host(env: &BTreeMap<String, String>, config: &Config) -> String {
    setting(
        env,
        config,
        "API_SERVER_HOST",
        "platforms.api_server.extra.host",
    )
    .map_or_else(|| DEFAULT_HOST.to_string(), |(_, host)| host)
}

/// The port the API server of `profile` binds (0: any free port).
///
/// # Errors
///
/// [`InvalidSetting`] when the value is not a port number.
pub fn port(
    profile: &str,
    env: &BTreeMap<String, String>,
    config: &Config,
) -> Result<u16, InvalidSetting> {
    match setting(
        env,
        config,
        "API_SERVER_PORT",
        "platforms.api_server.extra.port",
    ) {
        Some((key, value)) => parse(key, &value),
        None => Ok(default_port(profile)),
    }
}

/// How long a stopping gateway lets its in-flight requests (streams included) run.
///
/// # Errors
///
/// [`InvalidSetting`] when the value is not a whole number of seconds.
pub fn drain_timeout(
    env: &BTreeMap<String, String>,
    config: &Config,
) -> Result<Duration, InvalidSetting> {
    match setting(env, config, DRAIN_TIMEOUT_VAR, DRAIN_TIMEOUT_KEY) {
        Some((key, value)) => parse(key, &value).map(Duration::from_secs),
        None => Ok(DEFAULT_DRAIN_TIMEOUT),
    }
}

/// Whether the API server is switched on: `API_SERVER_ENABLED` truthy, `API_SERVER_KEY` set,
/// or `config_enabled` (the `config.yaml` switch) truthy. `env` is the env map's lookup.
pub fn switched_on(env: &dyn Fn(&str) -> Option<String>, config_enabled: Option<String>) -> bool {
    let flag = env("API_SERVER_ENABLED").is_some_and(|v| is_truthy(&v));
    let env_key = env("API_SERVER_KEY").is_some_and(|v| !v.trim().is_empty());
    let configured = config_enabled.is_some_and(|v| is_truthy(&v));
    flag || env_key || configured
}

/// The `config.yaml` switch of the API server: `platforms.api_server.enabled`, else the same
/// under `gateway.`.
pub fn config_switch(env: &BTreeMap<String, String>, config: &Config) -> Option<String> {
    let lookup = |k: &str| env.get(k).cloned();
    config
        .string("platforms.api_server.enabled", &lookup)
        .or_else(|| config.string("gateway.platforms.api_server.enabled", &lookup))
}

/// `host:port` as a listener takes it (an IPv6 literal bracketed).
pub fn bind_addr(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The `host:port` a supervisor binds for `profile`'s native gateway; `None` when its API
/// server is switched off (it opens no port).
///
/// # Errors
///
/// [`InvalidSetting`] when the port is not a port number.
pub fn listen_address(
    profile: &str,
    env: &BTreeMap<String, String>,
    config: &Config,
) -> Result<Option<String>, InvalidSetting> {
    let get_env = |k: &str| env.get(k).and_then(|v| nonblank(v)).map(str::to_string);
    if !switched_on(&get_env, config_switch(env, config)) {
        return Ok(None);
    }
    let port = port(profile, env, config)?;
    Ok(Some(bind_addr(&host(env, config), port)))
}

/// The deterministic default port of a profile: 8642 for `default`, otherwise
/// `9200 + (sha256(utf8(name)) as a big-endian integer) mod 600`.
pub fn default_port(profile: &str) -> u16 {
    if profile == DEFAULT_PROFILE {
        return DEFAULT_PORT;
    }
    let digest = Sha256::digest(profile.as_bytes());
    // (a * 256 + b) mod m, byte by byte, is the big integer mod m without a bignum.
    let rem = digest.iter().fold(0u32, |acc, &b| {
        (acc * 256 + u32::from(b)) % u32::from(NAMED_PORT_SLOTS)
    });
    // rem < 600, so the cast is lossless.
    NAMED_PORT_BASE + rem as u16
}

fn parse<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, InvalidSetting> {
    value.parse().map_err(|_| InvalidSetting {
        key: key.into(),
        value: value.into(),
        reason: "not a valid number in range".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn cfg(yaml: &str) -> Config {
        Config::parse(Path::new("config.yaml"), yaml).unwrap()
    }

    #[test]
    fn default_profile_keeps_8642() {
        assert_eq!(default_port("default"), 8642);
    }

    #[test]
    fn named_ports_are_deterministic_in_range_and_spread() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..100 {
            let name = format!("profile-{i}");
            let p = default_port(&name);
            assert_eq!(p, default_port(&name));
            assert!((9200..9800).contains(&p), "{name} -> {p}");
            seen.insert(p);
        }
        assert!(seen.len() >= 60, "only {} distinct ports", seen.len());
    }

    #[test]
    fn named_port_matches_an_independent_computation() {
        // python3: 9200 + int.from_bytes(hashlib.sha256(b"work").digest(), "big") % 600
        assert_eq!(default_port("work"), 9574);
    }

    #[test]
    fn named_port_matches_big_integer_formula() {
        // sha256("work") computed independently: the fold must equal the big-int remainder.
        let digest = Sha256::digest(b"work");
        let mut rem: u128 = 0;
        for b in digest.iter() {
            rem = (rem * 256 + u128::from(*b)) % 600;
        }
        assert_eq!(u128::from(default_port("work")), 9200 + rem);
    }

    #[test]
    fn env_wins_over_config_over_the_default() {
        let config = cfg(
            "platforms:\n  api_server:\n    extra:\n      host: 0.0.0.0\n      port: 9001\n\
             gateway:\n  drain_timeout: 5\n",
        );
        let none = BTreeMap::new();
        assert_eq!(host(&none, &config), "0.0.0.0");
        assert_eq!(port("work", &none, &config), Ok(9001));
        assert_eq!(drain_timeout(&none, &config), Ok(Duration::from_secs(5)));
        let env = map(&[
            ("API_SERVER_HOST", "::1"),
            ("API_SERVER_PORT", "9002"),
            (DRAIN_TIMEOUT_VAR, "0"),
        ]);
        assert_eq!(host(&env, &config), "::1");
        assert_eq!(port("work", &env, &config), Ok(9002));
        assert_eq!(drain_timeout(&env, &config), Ok(Duration::ZERO));
        // An empty value counts as unset.
        let empty = map(&[("API_SERVER_HOST", " "), ("API_SERVER_PORT", "")]);
        let plain = cfg("");
        assert_eq!(host(&empty, &plain), DEFAULT_HOST);
        assert_eq!(port("work", &empty, &plain), Ok(default_port("work")));
        assert_eq!(drain_timeout(&empty, &plain), Ok(DEFAULT_DRAIN_TIMEOUT));
    }

    #[test]
    fn a_bad_number_names_its_key() {
        let err = port("work", &map(&[("API_SERVER_PORT", "70000")]), &cfg("")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid `API_SERVER_PORT` value `70000`: not a valid number in range"
        );
        let err =
            drain_timeout(&BTreeMap::new(), &cfg("gateway: {drain_timeout: soon}\n")).unwrap_err();
        assert_eq!(err.key, DRAIN_TIMEOUT_KEY);
        assert!(err.hint().unwrap().contains(DRAIN_TIMEOUT_KEY));
    }

    #[test]
    fn the_listen_address_is_none_only_when_switched_off() {
        let plain = cfg("");
        assert_eq!(listen_address("work", &BTreeMap::new(), &plain), Ok(None));
        let off = map(&[("API_SERVER_ENABLED", "false")]);
        assert_eq!(listen_address("work", &off, &plain), Ok(None));
        // A weak key still switches it on: the gateway refuses it and says why.
        let on = map(&[("API_SERVER_KEY", "short")]);
        assert_eq!(
            listen_address("default", &on, &plain),
            Ok(Some("127.0.0.1:8642".into()))
        );
        let by_config =
            cfg("platforms: {api_server: {enabled: true, extra: {host: '::', port: 0}}}\n");
        assert_eq!(
            listen_address("work", &BTreeMap::new(), &by_config),
            Ok(Some("[::]:0".into()))
        );
        let nested = cfg("gateway: {platforms: {api_server: {enabled: yes}}}\n");
        assert_eq!(
            listen_address("work", &BTreeMap::new(), &nested),
            Ok(Some(format!("127.0.0.1:{}", default_port("work"))))
        );
        assert!(
            listen_address(
                "work",
                &map(&[("API_SERVER_ENABLED", "1"), ("API_SERVER_PORT", "x")]),
                &plain
            )
            .is_err()
        );
    }

    #[test]
    fn ipv6_literals_are_bracketed() {
        assert_eq!(bind_addr("::1", 5), "[::1]:5");
        assert_eq!(bind_addr("[::1]", 5), "[::1]:5");
        assert_eq!(bind_addr("localhost", 5), "localhost:5");
    }
}
