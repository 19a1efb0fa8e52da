//! Whether one gateway serves every profile (*multiplexing*), as the operator set it.
//!
//! The original agent (since 0.20) can run one gateway process for every profile of a volume:
//! it serves the default profile at `/v1/...` and each named one at `/p/<profile>/v1/...`, and
//! it alone owns the messaging platforms. The switch is read in the original's order:
//!
//! 1. the environment's `GATEWAY_MULTIPLEX_PROFILES`, when it is a recognised word (`1`,
//!    `true`, `yes`, `on` / `0`, `false`, `no`, `off`, any case); blank or anything else falls
//!    through (an empty secret must not shadow the file);
//! 2. the root `config.yaml`: top-level `multiplex_profiles`, else `gateway.multiplex_profiles`
//!    (what `hermes config set gateway.multiplex_profiles true` writes);
//! 3. otherwise the default, which is the installed agent's (off in 0.20, on since 0.21) or,
//!    for the native gateway, off — the caller supplies it.
//!
//! This module holds steps 1 and 2 ([`configured`]); the service layer adds the default.

use yaml_serde::Value;

use crate::config::Config;

/// The environment variable that switches multiplexing (the original's name).
pub const MULTIPLEX_VAR: &str = "GATEWAY_MULTIPLEX_PROFILES";

/// The `config.yaml` key, as the original's `hermes config set` writes it.
pub const MULTIPLEX_KEY: &str = "gateway.multiplex_profiles";

/// Where the multiplexing switch came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// [`MULTIPLEX_VAR`].
    Environment,
    /// The root `config.yaml`.
    Config,
    /// Neither: the engine's default.
    Default,
}

impl Source {
    /// How status displays name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Environment => "environment",
            Source::Config => "config.yaml",
            Source::Default => "default",
        }
    }
}

/// The switch as the operator set it, in the original's order (module doc), or `None` when
/// neither the environment nor `root_config` says: then the engine's default applies.
pub fn configured(
    root_config: &Config,
    var: &dyn Fn(&str) -> Option<String>,
) -> Option<(bool, Source)> {
    if let Some(on) = var(MULTIPLEX_VAR)
        .as_deref()
        .and_then(hermes_errors::switch::parse)
    {
        return Some((on, Source::Environment));
    }
    let value = root_config
        .raw("multiplex_profiles")
        .filter(|v| !v.is_null())
        .or_else(|| root_config.raw(MULTIPLEX_KEY))?;
    value_switch(value).map(|on| (on, Source::Config))
}

/// A YAML value as the original's `_coerce_bool` reads it: a boolean, an on/off word, or a
/// number (non-zero is on); anything else is no setting.
fn value_switch(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) => hermes_errors::switch::parse(s),
        Value::Number(n) => n.as_f64().map(|f| f != 0.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn config(text: &str) -> Config {
        Config::parse(Path::new("config.yaml"), text).unwrap()
    }

    #[test]
    fn the_environment_wins_then_the_file_then_nothing() {
        let on_in_file = config("gateway:\n  multiplex_profiles: true\n");
        let none = |_: &str| None;
        assert_eq!(configured(&on_in_file, &none), Some((true, Source::Config)));
        let off = |k: &str| (k == MULTIPLEX_VAR).then(|| " OFF ".to_owned());
        assert_eq!(
            configured(&on_in_file, &off),
            Some((false, Source::Environment))
        );
        // A blank or unknown word falls through to the file.
        for raw in ["", "  ", "maybe"] {
            let v = |k: &str| (k == MULTIPLEX_VAR).then(|| raw.to_owned());
            assert_eq!(configured(&on_in_file, &v), Some((true, Source::Config)));
        }
        assert_eq!(configured(&config("model: m\n"), &none), None);
        assert_eq!(
            configured(&config("model: m\n"), &|k: &str| (k == MULTIPLEX_VAR)
                .then(|| "yes".to_owned())),
            Some((true, Source::Environment))
        );
    }

    #[test]
    fn the_top_level_key_wins_and_values_are_read_as_the_original_reads_them() {
        let none = |_: &str| None;
        let both = config("multiplex_profiles: 'off'\ngateway:\n  multiplex_profiles: true\n");
        assert_eq!(configured(&both, &none), Some((false, Source::Config)));
        let null_top = config("multiplex_profiles:\ngateway:\n  multiplex_profiles: 'on'\n");
        assert_eq!(configured(&null_top, &none), Some((true, Source::Config)));
        assert_eq!(
            configured(&config("gateway:\n  multiplex_profiles: 1\n"), &none),
            Some((true, Source::Config))
        );
        assert_eq!(
            configured(&config("gateway:\n  multiplex_profiles: [x]\n"), &none),
            None
        );
        assert_eq!(
            configured(&config("gateway:\n  multiplex_profiles: sure\n"), &none),
            None
        );
    }
}
