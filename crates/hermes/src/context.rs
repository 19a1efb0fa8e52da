//! What every command needs from its surroundings: the environment, the `-p` flag, and the
//! resolved home. Commands get a `Context` instead of reading globals.

use std::path::PathBuf;

use hermes_home::Home;
use hermes_home::layout::resolve_root;

use crate::failure::Failure;

/// Per-invocation settings.
pub struct Context {
    /// The global `-p/--profile` flag.
    pub profile_flag: Option<String>,
}

impl Context {
    /// Looks a variable up in the process environment.
    pub fn var(name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    /// The root (`HERMES_HOME`), created with its skeleton and seeds on first use.
    pub fn root(&self) -> Result<PathBuf, Failure> {
        let root = resolve_root(Self::var)?;
        hermes_settings::ensure_root_skeleton(&root, hermes_settings::process_env())?;
        Ok(root)
    }

    /// Refuses a `-p NAME` that names no profile, for every command it is given to — also
    /// those that act on every profile or none (`gateway status`, `service status`, `up`),
    /// which would otherwise ignore it and leave a typo unnoticed. Reads only: the home is
    /// neither created nor seeded.
    ///
    /// # Errors
    ///
    /// `hermes_home`'s profile-not-found (or invalid name) error, with its hint.
    pub fn check_profile_flag(&self) -> Result<(), Failure> {
        let Some(name) = self.profile_flag.as_deref() else {
            return Ok(());
        };
        Home::select(resolve_root(Self::var)?, Some(name))?;
        Ok(())
    }

    /// The selected profile's home.
    pub fn home(&self) -> Result<Home, Failure> {
        let root = self.root()?;
        Ok(Home::select(root, self.profile_flag.as_deref())?)
    }
}
