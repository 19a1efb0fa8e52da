//! Whether the profile's API server is on, by the original's rules.
//!
//! The original gateway (`gateway/config.py`, `gateway/platforms/api_server.py`) serves its
//! OpenAI-compatible API only when it is switched on, and only with a strong key:
//!
//! * **On** when `API_SERVER_ENABLED` is truthy (`1`, `true`, `yes`, `on`), or
//!   `API_SERVER_KEY` is set, or `config.yaml` has `platforms.api_server.enabled: true` (also
//!   under `gateway.platforms`). Otherwise off: the gateway opens no port.
//! * **Key required when on**, on every address, loopback included: at least 16 characters
//!   (after trimming) and not a placeholder (`changeme`, `your_api_key`, `dummy`, ...), or the
//!   server refuses to start. A key may also come from `platforms.api_server.extra.key`.
//!
//! The native gateway follows both rules: off, it records `api_server` as `disabled` in
//! `gateway_state.json` (with the reason, which `hermes gateway status` shows) and waits to be
//! stopped without a port; on without a usable key, it exits 78 (a configuration error) saying
//! what to set. A new profile's `.env` is seeded with a random 64-hex key, so a new profile's
//! API server is on.

use crate::error::Error;

/// Shortest `API_SERVER_KEY` the API server starts with (the original's `min_length`).
pub const MIN_KEY_LEN: usize = 16;

/// Values that are examples, not secrets (the original's `_PLACEHOLDER_SECRET_VALUES`).
const PLACEHOLDERS: &[&str] = &[
    "*",
    "**",
    "***",
    "changeme",
    "your_api_key",
    "your_api_key_here",
    "your-api-key",
    "placeholder",
    "example",
    "dummy",
    "null",
    "none",
];

/// Whether the API server runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiServer {
    /// Serve the API (a usable key is present).
    On,
    /// No port: the gateway only says why.
    Off {
        /// What would switch it on, for `status` and the log.
        reason: String,
    },
}

impl ApiServer {
    /// Decides from the env map (`.env` over the environment) and `config.yaml`.
    ///
    /// `key` is the client key already resolved (`API_SERVER_KEY`, else
    /// `platforms.api_server.extra.key`).
    ///
    /// # Errors
    ///
    /// [`Error::WeakApiServerKey`] when the server is on and the key is missing or unusable.
    pub fn decide(
        env: &dyn Fn(&str) -> Option<String>,
        config_enabled: Option<String>,
        key: Option<&str>,
    ) -> Result<ApiServer, Error> {
        // The switch is the volume's rule: the supervisor binds the socket by it too.
        if !hermes_home::api_server::switched_on(env, config_enabled) {
            return Ok(ApiServer::Off {
                reason: "API server off: set API_SERVER_ENABLED=true and API_SERVER_KEY in the profile's `.env` to serve the API".into(),
            });
        }
        match key_problem(key) {
            None => Ok(ApiServer::On),
            Some(problem) => Err(Error::WeakApiServerKey { problem }),
        }
    }

    /// True when the API is served.
    pub fn is_on(&self) -> bool {
        matches!(self, ApiServer::On)
    }
}

/// Why `key` cannot protect the API server, if it cannot.
fn key_problem(key: Option<&str>) -> Option<String> {
    let key = key.map(str::trim).unwrap_or_default();
    if key.is_empty() {
        return Some("it is not set".into());
    }
    if PLACEHOLDERS.contains(&key.to_ascii_lowercase().as_str()) {
        return Some(format!("`{key}` is a placeholder"));
    }
    let len = key.chars().count();
    if len < MIN_KEY_LEN {
        return Some(format!("it has {len} characters, fewer than {MIN_KEY_LEN}"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn decide(env: &[(&str, &str)], config: Option<&str>) -> Result<ApiServer, Error> {
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let key = env.get("API_SERVER_KEY").cloned();
        ApiServer::decide(
            &|k: &str| env.get(k).cloned(),
            config.map(String::from),
            key.as_deref(),
        )
    }

    const STRONG: &str = "0123456789abcdef";

    #[test]
    fn off_unless_switched_on() {
        assert!(!decide(&[], None).unwrap().is_on());
        assert!(
            !decide(&[("API_SERVER_ENABLED", "false")], None)
                .unwrap()
                .is_on()
        );
        assert!(!decide(&[("API_SERVER_KEY", "  ")], None).unwrap().is_on());
        assert!(!decide(&[], Some("false")).unwrap().is_on());
    }

    #[test]
    fn on_by_flag_key_or_config_with_a_strong_key() {
        for (env, config) in [
            (
                vec![("API_SERVER_ENABLED", "true"), ("API_SERVER_KEY", STRONG)],
                None,
            ),
            (vec![("API_SERVER_KEY", STRONG)], None),
            (vec![("API_SERVER_KEY", STRONG)], Some("true")),
        ] {
            assert!(decide(&env, config).unwrap().is_on(), "{env:?} {config:?}");
        }
        let key = Some(STRONG);
        let on = ApiServer::decide(&|_| None, Some("yes".into()), key).unwrap();
        assert!(
            on.is_on(),
            "config.yaml enables it, the key from config.yaml"
        );
    }

    #[test]
    fn on_needs_a_usable_key_even_on_loopback() {
        for (env, why) in [
            (vec![("API_SERVER_ENABLED", "1")], "not set"),
            (vec![("API_SERVER_KEY", "changeme")], "placeholder"),
            (vec![("API_SERVER_KEY", "Dummy")], "placeholder"),
            (vec![("API_SERVER_KEY", "short-key-15chr")], "15 characters"),
        ] {
            let err = decide(&env, None).unwrap_err();
            assert!(err.to_string().contains(why), "{env:?}: {err}");
            assert!(matches!(err, Error::WeakApiServerKey { .. }), "{err}");
        }
    }
}
