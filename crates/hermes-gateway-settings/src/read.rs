//! The one read of a profile for its gateway: `.env` and `config.yaml` (through
//! [`ProfileFiles`], so the environment is the original's), `SOUL.md` and `auth.json`, then
//! [`GatewaySettings::resolve_with_auth`]. The gateway builds its prompt from the same read;
//! `doctor` and the dashboard show the settings it gives.

use std::path::Path;

use hermes_home::Home;
use hermes_home::auth::AuthStore;
use hermes_settings::{ProfileFiles, Scope};

use crate::error::Error;
use crate::resolve::GatewaySettings;

/// A profile as read for its gateway: the files, `SOUL.md`, and the settings resolved from them.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Read {
    /// `.env` and `config.yaml` over the process environment.
    pub files: ProfileFiles,
    /// `SOUL.md`, when it is there and UTF-8.
    pub soul: Option<String>,
    /// What the gateway runs with.
    pub settings: GatewaySettings,
}

/// Reads the profile `home` with `process_env` as the process environment (as its scope takes
/// it: a named profile never borrows the default one's key), and resolves its settings.
///
/// An `auth.json` that cannot be read or parsed does not stop the gateway: it is logged (a
/// damaged one is copied aside first, as the CLI does) and read as empty.
///
/// # Errors
/// [`Error::Home`] for a `.env` or `config.yaml` that cannot be read or parsed, and the errors
/// of [`GatewaySettings::resolve`]. All are configuration errors.
pub fn read(
    home: &Home,
    process_env: impl IntoIterator<Item = (String, String)>,
) -> Result<Read, Error> {
    let scope = Scope::of(home.profile().name());
    let files = ProfileFiles::read(home.dir(), scope, process_env)?;
    let soul = std::fs::read_to_string(home.soul_path()).ok();
    let auth = load_auth(&home.auth_path());
    let settings = GatewaySettings::resolve_with_auth(
        home.profile().name(),
        home.dir(),
        soul.clone(),
        files.config(),
        &files.environment(),
        &auth,
    )?;
    Ok(Read {
        files,
        soul,
        settings,
    })
}

/// [`read`] with this process's environment: what a gateway started here would run with.
///
/// # Errors
/// As [`read`].
pub fn read_from_process(home: &Home) -> Result<GatewaySettings, Error> {
    read(home, hermes_settings::process_env()).map(|r| r.settings)
}

/// Reads `auth.json` for the gateway: a file that cannot be read or parsed is logged and read
/// as empty (a damaged one was copied aside by [`AuthStore::load`]), so credentials on disk
/// never stop a gateway that could run on its other keys.
fn load_auth(path: &Path) -> AuthStore {
    match AuthStore::load(path) {
        Ok(loaded) => {
            if let Some(c) = &loaded.corrupt {
                tracing::warn!(
                    path = %c.path.display(),
                    preserved_at = ?c.preserved_at,
                    "auth.json could not be parsed ({}); reading it as empty",
                    c.reason
                );
            }
            loaded.store
        }
        Err(e) => {
            tracing::warn!(
                path = %path.display(),
                "auth.json cannot be read; its credentials are not used: {}",
                hermes_errors::one_line(&e)
            );
            AuthStore::default()
        }
    }
}
