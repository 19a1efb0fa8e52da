//! Where a profile's settings come from, and what is read beside them.
//!
//! [`GatewaySettings`] is a plain value: what a gateway runs with, resolved once by the pure
//! [`GatewaySettings::resolve_with_auth`]. This module does the reading around it: the
//! profile's files (`.env` over the process environment, `config.yaml`, `SOUL.md`,
//! `auth.json`) go into the settings, and beside them into the [`PromptSource`] each new
//! session's system prompt is built from. A [`Profile`] holds the three together: the
//! settings, the prompt source, and where to read both again ([`Reloadable`], used by
//! `live` when a watched file changes).
//!
//! Words:
//! * *source* — where a profile's settings come from ([`SettingsSource`]): its home (the files
//!   `config.yaml`, `.env`, `SOUL.md`, `auth.json`, `memories/*.md`) and the process
//!   environment the gateway started with.
//! * *fingerprint* — what `stat` says about each watched file (device, inode, size, mtime and
//!   ctime in nanoseconds; absent files count too). Any difference means "read again".

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use hermes_home::Home;

use crate::error::Error;
use crate::prompt::{self, PromptSource};
use crate::settings::GatewaySettings;

/// A profile as a gateway serves it: the resolved settings, and beside them what they do not
/// hold.
#[non_exhaustive]
#[derive(Debug, Clone)]
pub struct Profile {
    /// What the gateway runs with.
    pub settings: GatewaySettings,
    /// What the system prompt of each new session is built from, as the original builds it
    /// ([`crate::prompt`]); `None` for settings built in code, which send
    /// [`GatewaySettings::soul`] as it is.
    pub prompt: Option<Arc<PromptSource>>,
    /// Where the profile was read from, so a running gateway reads it again when the files
    /// change (`live`); `None`: never read again.
    pub reload: Option<Reloadable>,
}

impl From<GatewaySettings> for Profile {
    /// Settings built in code: no prompt source, never read again.
    fn from(settings: GatewaySettings) -> Profile {
        Profile {
            settings,
            prompt: None,
            reload: None,
        }
    }
}

/// Reads the profile `home` with `process_env` (the process environment) through
/// [`hermes_gateway_settings::read`] (its files, `SOUL.md` and `auth.json`, and the settings
/// resolved from them), and builds the prompt source from the same read. The one entry that
/// reads the profile's files, so reading them again picks up every edit. The profile is not
/// [`Profile::reload`]able ([`SettingsSource::read`] makes it so).
///
/// # Errors
///
/// [`Error::Settings`]: a file that cannot be read or parsed, or settings the gateway
/// refuses. All are configuration errors (exit 78).
pub fn read_profile(
    home: &Home,
    process_env: impl IntoIterator<Item = (String, String)>,
) -> Result<Profile, Error> {
    let hermes_gateway_settings::Read {
        files,
        soul,
        settings,
        ..
    } = hermes_gateway_settings::read(home, process_env)?;
    let env = files.environment();
    let config = files.config().clone();
    let lookup = |k: &str| env.get(k).cloned();
    let configured = config.model(&lookup).provider;
    let prompt = PromptSource {
        home: home.dir().to_path_buf(),
        soul,
        model: settings.provider.as_ref().map(|p| p.model.clone()),
        provider: Some(prompt::original_provider_id(configured.as_deref())),
        config,
        env,
    };
    Ok(Profile {
        settings,
        prompt: Some(Arc::new(prompt)),
        reload: None,
    })
}

/// Variables of the process environment a profile served beside the default one never takes:
/// only its own files can give them.
pub use hermes_settings::NOT_BORROWED;

/// Where a profile's settings are read from, so they can be read again.
#[derive(Debug, Clone)]
pub struct SettingsSource {
    home: Home,
    process_env: Vec<(String, String)>,
}

impl SettingsSource {
    /// The profile `home`, with the environment the gateway process started with.
    pub fn new(home: Home, process_env: Vec<(String, String)>) -> SettingsSource {
        SettingsSource { home, process_env }
    }

    /// The profile `home` with this process's environment. Variables whose name or value is
    /// not UTF-8 cannot be configuration and are left out (never a panic).
    pub fn from_process(home: Home) -> SettingsSource {
        SettingsSource::new(home, hermes_settings::process_env())
    }

    /// The source of another profile served by the same process: its own home, the same
    /// process environment, except the variables the supervisor sets to name the profile
    /// (`HERMES_PROFILE`, `HERMES_PROFILE_HOME`), which name that profile instead, and
    /// [`NOT_BORROWED`]: the environment's key is the default profile's, and a named profile
    /// opened by it would be opened by every client of the default one.
    pub(crate) fn for_profile(&self, home: Home) -> SettingsSource {
        let mut process_env: Vec<(String, String)> = self
            .process_env
            .iter()
            .filter(|(k, _)| {
                k != "HERMES_PROFILE"
                    && k != "HERMES_PROFILE_HOME"
                    && !NOT_BORROWED.contains(&k.as_str())
            })
            .cloned()
            .collect();
        process_env.push(("HERMES_PROFILE".into(), home.profile().name().to_owned()));
        process_env.push((
            "HERMES_PROFILE_HOME".into(),
            home.dir().to_string_lossy().into_owned(),
        ));
        SettingsSource::new(home, process_env)
    }

    /// Files whose change means the settings must be read again.
    pub(crate) fn watched(&self) -> Vec<PathBuf> {
        let dir = self.home.dir();
        vec![
            self.home.config_path(),
            self.home.env_path(),
            self.home.soul_path(),
            self.home.auth_path(),
            dir.join("memories").join("MEMORY.md"),
            dir.join("memories").join("USER.md"),
        ]
    }

    /// Reads the settings alone (what `doctor` and the dashboard show of a profile).
    ///
    /// # Errors
    ///
    /// Those of [`read_profile`].
    pub fn load(&self) -> (Fingerprint, Result<GatewaySettings, Error>) {
        let (fingerprint, profile) = self.read();
        (fingerprint, profile.map(|p| p.settings))
    }

    /// Reads the profile, with the fingerprint taken *before* reading: an edit that lands
    /// while they are read changes the fingerprint again and is picked up next time. The
    /// profile comes back [`Profile::reload`]able from this source.
    ///
    /// # Errors
    ///
    /// Those of [`read_profile`].
    pub fn read(&self) -> (Fingerprint, Result<Profile, Error>) {
        let fingerprint = Fingerprint::of(&self.watched());
        let profile = read_profile(&self.home, self.process_env.iter().cloned()).map(|mut p| {
            p.reload = Some(Reloadable {
                source: self.clone(),
                fingerprint: fingerprint.clone(),
            });
            p
        });
        (fingerprint, profile)
    }
}

/// `stat` of every watched file; equal fingerprints mean nothing changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fingerprint(BTreeMap<PathBuf, Option<[i64; 6]>>);

impl Fingerprint {
    pub(crate) fn of(paths: &[PathBuf]) -> Fingerprint {
        Fingerprint(
            paths
                .iter()
                .map(|p| {
                    let stat = std::fs::metadata(p).ok().map(|m| {
                        [
                            m.dev() as i64,
                            m.ino() as i64,
                            m.size() as i64,
                            m.mtime().saturating_mul(1_000_000_000) + m.mtime_nsec(),
                            m.ctime().saturating_mul(1_000_000_000) + m.ctime_nsec(),
                            i64::from(m.mode()),
                        ]
                    });
                    (p.clone(), stat)
                })
                .collect(),
        )
    }
}

/// A [`SettingsSource`] and the fingerprint of the files when the settings were read: what
/// a [`Profile`] read by [`SettingsSource::read`] carries, so a running gateway reads it again
/// when the files change.
#[derive(Debug, Clone)]
pub struct Reloadable {
    /// Where to read the settings again.
    pub source: SettingsSource,
    /// The files as they were when the settings in use were read.
    pub fingerprint: Fingerprint,
}
