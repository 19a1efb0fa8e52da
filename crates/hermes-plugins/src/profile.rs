//! A profile's side of plugins, shared by the CLI (`hermes deps|plugins|memory`) and the
//! dashboard's Plugins page so both apply the same rules: the installer's options from the
//! profile (its `.env` over the caller's environment, its `security.allow_lazy_installs`), the
//! plugins folder under the root, the active provider from its `config.yaml`, and writing a
//! [`SetupPlan`] into its files.

use hermes_deps::{Environment, InstallOptions};
use hermes_home::Home;
use hermes_home::config::Config;
use hermes_home::dotenv::DotEnv;

use crate::discovery::{Discovery, discover};
use crate::setup::SetupPlan;

/// Installer options for `home`'s profile: `base` (the caller's environment, usually the
/// process's) with the profile's `.env` over it, and the config's kill switch. A config that
/// does not parse is an error: we would not know whether the operator switched installs off.
pub fn install_options(
    home: &Home,
    base: Environment,
) -> Result<InstallOptions, hermes_home::Error> {
    let config = hermes_settings::config_of(home.dir())?;
    let dotenv = DotEnv::load(&home.env_path())?;
    let env = dotenv
        .vars()
        .fold(base, |env, (key, value)| env.with(key, value));
    Ok(InstallOptions::new(
        home.root(),
        config.allow_lazy_installs(),
        env,
    ))
}

/// The plugins every profile of `home`'s root sees: bundled ones and `<root>/plugins/`.
pub fn discover_for(home: &Home) -> Discovery {
    discover(Some(&home.plugins_dir()))
}

/// `memory.provider` as written in the profile's `config.yaml` (not normalised: see
/// [`crate::active_provider`]).
pub fn configured_provider(home: &Home) -> Result<Option<String>, hermes_home::Error> {
    let config = hermes_settings::config_of(home.dir())?;
    Ok(config.string("memory.provider", &|_| None))
}

/// Writes what `plan` asks for into the profile's `.env` and `config.yaml`. Each file is
/// changed under its lock (`edit`), so parallel setups keep each other's keys, and every key
/// and comment the plan does not name is kept.
pub fn apply_plan(home: &Home, plan: &SetupPlan) -> Result<(), hermes_home::Error> {
    if !plan.env_writes.is_empty() {
        DotEnv::edit(&home.env_path(), |dotenv| {
            plan.env_writes
                .iter()
                .try_for_each(|write| dotenv.set(&write.key, &write.value))
        })?;
    }
    if !plan.config_writes.is_empty() {
        Config::edit(&home.config_path(), |config| {
            for write in &plan.config_writes {
                config.set(&write.path.join("."), yaml_value(&write.value));
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Plugin settings are strings; keep booleans and integers typed in YAML.
fn yaml_value(raw: &str) -> yaml_serde::Value {
    match raw {
        "true" => yaml_serde::Value::Bool(true),
        "false" => yaml_serde::Value::Bool(false),
        _ => raw
            .parse::<i64>()
            .map_or_else(|_| yaml_serde::Value::from(raw), yaml_serde::Value::from),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_keep_their_yaml_type() {
        assert_eq!(yaml_value("true"), yaml_serde::Value::Bool(true));
        assert_eq!(yaml_value("42"), yaml_serde::Value::from(42i64));
        assert_eq!(yaml_value("work"), yaml_serde::Value::from("work"));
    }

    #[test]
    fn the_profile_env_wins_over_the_callers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(".env"),
            "HERMES_LAZY_INSTALL_TARGET=/data/lazy\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            "security:\n  allow_lazy_installs: false\n",
        )
        .unwrap();
        let home =
            Home::for_profile(dir.path().to_path_buf(), hermes_home::ProfileRef::Default).unwrap();
        let base = Environment::default().with("HERMES_LAZY_INSTALL_TARGET", "/elsewhere");
        let options = install_options(&home, base).unwrap();
        assert_eq!(
            options.env.durable_target().as_deref(),
            Some(std::path::Path::new("/data/lazy"))
        );
        assert!(!options.allow_lazy_installs);

        std::fs::write(dir.path().join("config.yaml"), "a: [\n").unwrap();
        assert!(install_options(&home, Environment::default()).is_err());
    }
}
