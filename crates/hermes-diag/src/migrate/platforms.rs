//! The messaging platforms the original's gateway connects, how a profile switches each on, and
//! the Python package its adapter needs.
//!
//! From hermes-agent 0.19.0: `gateway/config.py` switches a platform on when its variable is
//! set (`TELEGRAM_BOT_TOKEN`, ...; `.env` is where the original keeps them) or when
//! `config.yaml` has `platforms.<name>.enabled: true`; `tools/lazy_deps.py`'s `platform.<name>`
//! features name the package each adapter imports (installed into the image, or lazily into
//! the volume's `lazy-packages/`). Platforms without a package speak HTTP with what the agent
//! always has (Signal, Mattermost, email) or a bridge of their own (WhatsApp).

use hermes_home::config::Config;
use hermes_home::dotenv::{self, DotEnv};
use serde::Serialize;

/// One platform: its name, the variables that switch it on, its package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlatformSpec {
    /// The name in `config.yaml` (`platforms.<name>`).
    pub name: &'static str,
    /// Variables whose (non-blank) value switches it on; the first is its token.
    pub env: &'static [&'static str],
    /// The distribution its adapter imports (PEP 503 name), when it needs one.
    pub package: Option<&'static str>,
}

/// The platforms, in the original's order.
pub const PLATFORMS: &[PlatformSpec] = &[
    PlatformSpec {
        name: "telegram",
        env: &["TELEGRAM_BOT_TOKEN"],
        package: Some("python-telegram-bot"),
    },
    PlatformSpec {
        name: "discord",
        env: &["DISCORD_BOT_TOKEN"],
        package: Some("discord-py"),
    },
    PlatformSpec {
        name: "whatsapp",
        env: &["WHATSAPP_ENABLED"],
        package: None,
    },
    PlatformSpec {
        name: "slack",
        env: &["SLACK_BOT_TOKEN"],
        package: Some("slack-bolt"),
    },
    PlatformSpec {
        name: "signal",
        env: &["SIGNAL_HTTP_URL"],
        package: None,
    },
    PlatformSpec {
        name: "mattermost",
        env: &["MATTERMOST_TOKEN"],
        package: None,
    },
    PlatformSpec {
        name: "matrix",
        env: &["MATRIX_ACCESS_TOKEN", "MATRIX_PASSWORD"],
        package: Some("mautrix"),
    },
    PlatformSpec {
        name: "email",
        env: &["EMAIL_ADDRESS"],
        package: None,
    },
    PlatformSpec {
        name: "dingtalk",
        env: &["DINGTALK_CLIENT_ID"],
        package: Some("dingtalk-stream"),
    },
    PlatformSpec {
        name: "feishu",
        env: &["FEISHU_APP_ID"],
        package: Some("lark-oapi"),
    },
];

/// A platform a profile has switched on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfiguredPlatform {
    /// Its name.
    pub name: String,
    /// Where it is switched on: variable names of `.env`, and/or `config.yaml`. Never values.
    pub set_in: Vec<String>,
    /// The package its adapter needs, if any.
    pub package: Option<String>,
    /// Where that package is installed: `agent` (the agent's own environment),
    /// `lazy-packages` (the volume's durable target), or `None` when it is missing (or no
    /// package is needed).
    pub installed_in: Option<String>,
}

/// The platforms `dotenv` and `config` switch on. `WHATSAPP_ENABLED` counts when truthy.
pub fn configured(dotenv: &DotEnv, config: &Config) -> Vec<(PlatformSpec, Vec<String>)> {
    PLATFORMS
        .iter()
        .filter_map(|spec| {
            let mut set_in: Vec<String> = spec
                .env
                .iter()
                .filter(|var| {
                    dotenv.get(var).and_then(dotenv::nonblank).is_some_and(|v| {
                        !var.ends_with("_ENABLED") || hermes_errors::switch::is_truthy(v)
                    })
                })
                .map(|var| (*var).to_string())
                .collect();
            let enabled = config
                .string(&format!("platforms.{}.enabled", spec.name), &|_| None)
                .is_some_and(|v| hermes_errors::switch::is_truthy(&v));
            if enabled {
                set_in.push(hermes_home::layout::CONFIG_FILE.into());
            }
            (!set_in.is_empty()).then_some((*spec, set_in))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn tokens_in_env_and_switches_in_config_are_found_by_name() {
        let dotenv = DotEnv::parse(
            "TELEGRAM_BOT_TOKEN=123:abc\nDISCORD_BOT_TOKEN=\nWHATSAPP_ENABLED=false\nMATRIX_PASSWORD=pw\n",
        );
        let config = Config::parse(
            Path::new("config.yaml"),
            "platforms:\n  slack:\n    enabled: true\n  signal:\n    enabled: false\n",
        )
        .unwrap();
        let found: Vec<(&str, Vec<String>)> = configured(&dotenv, &config)
            .into_iter()
            .map(|(spec, set_in)| (spec.name, set_in))
            .collect();
        assert_eq!(
            found,
            vec![
                ("telegram", vec!["TELEGRAM_BOT_TOKEN".to_string()]),
                ("slack", vec!["config.yaml".to_string()]),
                ("matrix", vec!["MATRIX_PASSWORD".to_string()]),
            ]
        );
    }
}
