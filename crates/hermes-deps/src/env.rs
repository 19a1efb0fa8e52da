//! The environment snapshot the installer works from.
//!
//! [`Environment`] is a plain map of variables the caller hands in (usually the
//! process environment, possibly merged with `$HERMES_HOME/.env`). Nothing in
//! this crate reads the process environment behind the caller's back, so tests
//! and the lead's wiring decide exactly what the installer sees. This module
//! defines the words *sealed* (`HERMES_DISABLE_LAZY_INSTALLS=1`, exactly `1`),
//! *durable target* (`HERMES_LAZY_INSTALL_TARGET`, non-empty after trimming)
//! and *core venv* (`HERMES_VENV`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Variable set by the immutable image: the core venv is read-only.
pub const DISABLE_VAR: &str = "HERMES_DISABLE_LAZY_INSTALLS";
/// Variable naming the durable install target on the data volume.
pub const TARGET_VAR: &str = "HERMES_LAZY_INSTALL_TARGET";
/// Variable naming the core Python environment (image: `/opt/hermes/.venv`).
pub const VENV_VAR: &str = "HERMES_VENV";
/// Variable naming the base interpreter used to create the managed venv.
pub const PYTHON_VAR: &str = "HERMES_PYTHON";

/// A snapshot of environment variables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    vars: BTreeMap<String, String>,
}

impl Environment {
    /// Builds a snapshot from a map.
    pub fn from_map(map: &HashMap<String, String>) -> Self {
        Self {
            vars: map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }

    /// Snapshots the current process environment (non-UTF-8 entries are skipped).
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    /// Sets one variable (builder style).
    pub fn with(mut self, key: &str, value: &str) -> Self {
        self.vars.insert(key.to_string(), value.to_string());
        self
    }

    /// Removes one variable (builder style).
    pub fn without(mut self, key: &str) -> Self {
        self.vars.remove(key);
        self
    }

    /// The raw value of a variable.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    /// The value of a variable when it is non-empty after trimming.
    pub fn get_nonempty(&self, key: &str) -> Option<&str> {
        self.get(key).map(str::trim).filter(|v| !v.is_empty())
    }

    /// True on a sealed image: `HERMES_DISABLE_LAZY_INSTALLS` is exactly `1`.
    pub fn sealed(&self) -> bool {
        self.get(DISABLE_VAR) == Some("1")
    }

    /// The durable install target, if configured.
    pub fn durable_target(&self) -> Option<PathBuf> {
        self.get_nonempty(TARGET_VAR).map(PathBuf::from)
    }

    /// The core venv named by `HERMES_VENV`, if set.
    pub fn core_venv(&self) -> Option<PathBuf> {
        self.get_nonempty(VENV_VAR).map(PathBuf::from)
    }

    /// Finds an executable by name on this snapshot's `PATH`.
    pub fn which(&self, name: &str) -> Option<PathBuf> {
        self.which_not(name, |_| false)
    }

    /// Finds an executable by name on `PATH`, skipping the ones `skip` refuses (the `uv`
    /// shim, which is this very program under another name).
    pub fn which_not(&self, name: &str, skip: impl Fn(&Path) -> bool) -> Option<PathBuf> {
        let path = self.get("PATH")?;
        std::env::split_paths(path)
            .map(|d| d.join(name))
            .find(|p| is_executable(p) && !skip(p))
    }

    /// Variables handed to installer children: everything except credentials,
    /// which a package build has no business seeing.
    pub fn child_vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars
            .iter()
            .filter(|(k, _)| !is_credential(k))
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Names that look like secrets (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`).
pub fn is_credential(key: &str) -> bool {
    let k = key.to_ascii_uppercase();
    k.ends_with("_API_KEY")
        || k.ends_with("_TOKEN")
        || k.ends_with("_SECRET")
        || k.contains("PASSWORD")
}

/// Whether `path` is the running program itself (a link to it under another name, as the
/// `uv` shim is): both resolve to the same file.
pub fn is_this_program(path: &Path) -> bool {
    match (std::fs::canonicalize(path), std::env::current_exe()) {
        (Ok(found), Ok(me)) => std::fs::canonicalize(me).is_ok_and(|me| me == found),
        _ => false,
    }
}

/// True for a regular file with an execute bit.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_needs_exactly_one() {
        let e = Environment::default();
        assert!(!e.sealed());
        assert!(e.clone().with(DISABLE_VAR, "1").sealed());
        assert!(!e.clone().with(DISABLE_VAR, "true").sealed());
        assert!(!e.with(DISABLE_VAR, " 1").sealed());
    }

    #[test]
    fn target_is_trimmed_and_empty_means_unset() {
        let e = Environment::default().with(TARGET_VAR, "   ");
        assert_eq!(e.durable_target(), None);
        let e = e.with(TARGET_VAR, " /opt/data/lazy-packages ");
        assert_eq!(
            e.durable_target(),
            Some(PathBuf::from("/opt/data/lazy-packages"))
        );
    }

    #[test]
    fn credentials_are_not_passed_to_children() {
        let e = Environment::default()
            .with("HONCHO_API_KEY", "s")
            .with("GITHUB_TOKEN", "t")
            .with("PATH", "/bin");
        let kept: Vec<_> = e.child_vars().map(|(k, _)| k).collect();
        assert_eq!(kept, vec!["PATH"]);
    }

    #[test]
    fn which_searches_path() {
        let e = Environment::default().with("PATH", "/nonexistent:/bin:/usr/bin");
        assert!(e.which("sh").is_some());
        assert!(e.which("hermes-definitely-missing").is_none());
    }
}
