//! Why a profile's settings cannot be used. Every one is a configuration error: restarting
//! cannot fix it, the operator must change a file (a gateway exits 78 on any of them).

/// A profile's settings that a gateway would refuse, and why. Exhaustive: the gateway lists
/// every variant in its own (`every_variant`), so a new one is listed there too.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting has a value the gateway cannot use.
    #[error("invalid `{key}` value `{value}`: {reason}")]
    InvalidSetting {
        /// The setting's name, as the operator writes it (`API_SERVER_PORT`, `model.timeout`).
        key: String,
        /// The value found.
        value: String,
        /// Why it is unusable.
        reason: String,
    },

    /// A profile file the settings come from (`.env`, `config.yaml`) cannot be read or parsed.
    #[error("cannot load the profile's settings")]
    Home {
        /// What `hermes_home` reported (the file, and the line when it does not parse).
        #[from]
        source: hermes_home::Error,
    },

    /// The bind address is reachable from other machines and no API key is set (fail closed).
    #[error(
        "refusing to serve on non-loopback address `{host}` without `API_SERVER_KEY`: anyone who can reach it could use the agent"
    )]
    UnauthenticatedPublicBind {
        /// The configured bind host.
        host: String,
    },

    /// The API server is switched on without a key strong enough to protect it.
    #[error(
        "the API server needs a strong `API_SERVER_KEY`, also on a loopback address: {problem}"
    )]
    WeakApiServerKey {
        /// What is wrong with the key (not set, a placeholder, too short); never the key.
        problem: String,
    },
}

impl From<hermes_home::api_server::InvalidSetting> for Error {
    fn from(e: hermes_home::api_server::InvalidSetting) -> Self {
        Error::InvalidSetting {
            key: e.key,
            value: e.value,
            reason: e.reason,
        }
    }
}

impl Error {
    /// The "what to do" line for this error, when there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::InvalidSetting { key, .. } => {
                Some(format!("fix `{key}` in the profile's `.env` or `config.yaml`"))
            }
            Error::Home { source } => source.hint(),
            Error::UnauthenticatedPublicBind { .. } => Some(
                "set `API_SERVER_KEY` in the profile's `.env` (e.g. `openssl rand -hex 32`), or bind `API_SERVER_HOST=127.0.0.1`"
                    .into(),
            ),
            Error::WeakApiServerKey { .. } => Some(
                "set `API_SERVER_KEY` in the profile's `.env` to a random secret of at least 16 characters (e.g. `openssl rand -hex 32`), or switch the API server off (unset `API_SERVER_ENABLED` and `API_SERVER_KEY`)"
                    .into(),
            ),
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::InvalidSetting { .. } => Error::InvalidSetting {
        key: "API_SERVER_PORT".into(),
        value: "80a".into(),
        reason: "not a port number (1-65535)".into(),
    },
    Error::Home { .. } => Error::Home {
        source: hermes_home::Error::ConfigParse {
            path: "/opt/data/config.yaml".into(),
            line: 3,
            column: 7,
            message: "mapping values are not allowed in this context".into(),
        },
    },
    Error::UnauthenticatedPublicBind { .. } => Error::UnauthenticatedPublicBind {
        host: "0.0.0.0".into(),
    },
    Error::WeakApiServerKey { .. } => Error::WeakApiServerKey {
        problem: "`changeme` is a placeholder".into(),
    },
});
