//! A profile's gateway settings as the gateway resolves them, and where they make it serve:
//! what `gateway run` and `hermes chat` run with, and the address `gateway start|status|list`
//! print.

use hermes_gateway::source::SettingsSource;
use hermes_gateway::{GatewaySettings, Profile};
use hermes_home::Home;

use crate::failure::Failure;

/// Resolves the gateway settings of a profile: its `.env` over the process environment by
/// the one rule (`hermes_home::DotEnv::overlay`), `config.yaml` and `SOUL.md`. Variables whose
/// name or value is not UTF-8 cannot be configuration and are left out (never a panic).
///
/// The profile carries its source, so a running gateway reads it again when one of those
/// files changes (`hermes_gateway::live`).
pub fn resolve(home: &Home) -> Result<Profile, Failure> {
    let (_, loaded) = SettingsSource::from_process(home.clone()).read();
    let mut profile = loaded?;
    profile.settings.argv = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    Ok(profile)
}

/// Where `home`'s gateway serves ([`address_of`] its settings).
pub(super) fn address(home: &Home) -> String {
    address_of(
        resolve(home)
            .map(|p| p.settings)
            .as_ref()
            .map_err(|e| e.message.as_str()),
    )
}

/// Where the API server's key of `home` is set (`` `.env` ``, `the top level of
/// `config.yaml``, …), never its value; `None` without a key (or when the files cannot be read).
pub(super) fn key_source(home: &Home) -> Option<String> {
    let scope = hermes_settings::Scope::of(home.profile().name());
    hermes_settings::ProfileFiles::read(home.dir(), scope, hermes_settings::process_env())
        .ok()?
        .api_server_key()
        .map(|key| key.source.to_string())
}

/// Where a gateway with these settings serves: `http://ADDR`, `(API server off)`, or
/// `(invalid: why)`.
pub(super) fn address_of(settings: Result<&GatewaySettings, &str>) -> String {
    match settings.map(GatewaySettings::api_addr) {
        Ok(Some(addr)) => format!("http://{addr}"),
        Ok(None) => "(API server off)".to_string(),
        Err(why) => format!("(invalid: {why})"),
    }
}
