//! Routing: where an install goes, decided before anything runs.
//!
//! [`route`] is a pure function of the kill switch, the environment snapshot
//! and `$HERMES_HOME`. The *routes*:
//!
//! | kill switch | sealed | durable target | route |
//! |---|---|---|---|
//! | off (`allow_lazy_installs: false`) | any | any | blocked: kill switch |
//! | on | yes | unset | blocked: immutable deployment |
//! | on | any | set | durable target (`--target`) |
//! | on | no | unset | core venv |
//!
//! The *core venv* is `HERMES_VENV` when set (image: `/opt/hermes/.venv`),
//! else a venv Hermes manages at `$HERMES_HOME/venv`, created on first need.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::Environment;
use crate::spec::{SPEC_HINT, SpecRejection};

/// Why an install was refused without running anything.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockReason {
    /// `security.allow_lazy_installs: false` in config.yaml.
    KillSwitch,
    /// Sealed image (`HERMES_DISABLE_LAZY_INSTALLS=1`) and no durable target.
    SealedWithoutTarget,
    /// A spec failed the safety check.
    UnsafeSpec {
        /// The spec as given.
        spec: String,
        /// Why it was refused.
        why: SpecRejection,
    },
}

impl fmt::Display for BlockReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::KillSwitch => write!(
                f,
                "runtime installs disabled (security.allow_lazy_installs=false)"
            ),
            Self::SealedWithoutTarget => write!(
                f,
                "runtime installs are disabled on this deployment: the agent environment is immutable \
                 and no writable install target is configured (HERMES_LAZY_INSTALL_TARGET)"
            ),
            Self::UnsafeSpec { spec, why } => {
                write!(f, "refusing to install unsafe spec `{spec}`: {why}")
            }
        }
    }
}

impl BlockReason {
    /// The "what to do" line.
    pub fn hint(&self) -> String {
        match self {
            Self::KillSwitch => "set `security.allow_lazy_installs: true` in `config.yaml` to allow runtime installs".into(),
            Self::SealedWithoutTarget => "set `HERMES_LAZY_INSTALL_TARGET` to a writable directory on the data volume \
                 (the image default is `/opt/data/lazy-packages`)"
                .into(),
            Self::UnsafeSpec { .. } => SPEC_HINT.into(),
        }
    }
}

/// Where an install goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Into the core venv itself.
    Venv {
        /// The venv directory.
        venv: PathBuf,
        /// True when Hermes manages it under `$HERMES_HOME` (created on first need).
        managed: bool,
    },
    /// Into the durable target with `--target`, next to a core venv left untouched.
    Target {
        /// The core venv (read only).
        venv: PathBuf,
        /// True when Hermes manages the core venv under `$HERMES_HOME`.
        managed: bool,
        /// The durable target.
        target: PathBuf,
    },
    /// Nowhere: refused.
    Blocked(BlockReason),
}

impl Route {
    /// The durable target, when routing there.
    pub fn target(&self) -> Option<&Path> {
        match self {
            Self::Target { target, .. } => Some(target),
            _ => None,
        }
    }

    /// The core venv, unless blocked.
    pub fn venv(&self) -> Option<(&Path, bool)> {
        match self {
            Self::Venv { venv, managed } | Self::Target { venv, managed, .. } => {
                Some((venv, *managed))
            }
            Self::Blocked(_) => None,
        }
    }
}

/// The core venv and whether Hermes manages it.
pub fn core_venv(env: &Environment, hermes_home: &Path) -> (PathBuf, bool) {
    match env.core_venv() {
        Some(v) => (v, false),
        None => (hermes_home.join("venv"), true),
    }
}

/// Decides the route (see the module table).
pub fn route(allow_lazy_installs: bool, env: &Environment, hermes_home: &Path) -> Route {
    if !allow_lazy_installs {
        return Route::Blocked(BlockReason::KillSwitch);
    }
    let (venv, managed) = core_venv(env, hermes_home);
    match (env.sealed(), env.durable_target()) {
        (_, Some(target)) => Route::Target {
            venv,
            managed,
            target,
        },
        (true, None) => Route::Blocked(BlockReason::SealedWithoutTarget),
        (false, None) => Route::Venv { venv, managed },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{DISABLE_VAR, TARGET_VAR, VENV_VAR};

    #[test]
    fn gating_matrix() {
        let home = Path::new("/home/u/.hermes");
        let host = Environment::default();
        let sealed = Environment::default()
            .with(DISABLE_VAR, "1")
            .with(VENV_VAR, "/opt/hermes/.venv");
        let sealed_t = sealed.clone().with(TARGET_VAR, "/opt/data/lazy-packages");

        assert_eq!(
            route(true, &host, home),
            Route::Venv {
                venv: home.join("venv"),
                managed: true
            }
        );
        assert_eq!(
            route(true, &sealed, home),
            Route::Blocked(BlockReason::SealedWithoutTarget)
        );
        assert_eq!(
            route(true, &sealed_t, home),
            Route::Target {
                venv: "/opt/hermes/.venv".into(),
                managed: false,
                target: "/opt/data/lazy-packages".into()
            }
        );
        for env in [&host, &sealed, &sealed_t] {
            assert_eq!(
                route(false, env, home),
                Route::Blocked(BlockReason::KillSwitch)
            );
        }
        let r = BlockReason::SealedWithoutTarget.to_string();
        assert!(
            r.contains("immutable") && r.contains("HERMES_LAZY_INSTALL_TARGET"),
            "{r}"
        );
    }
}
