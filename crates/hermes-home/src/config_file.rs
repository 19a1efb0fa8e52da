//! `config.yaml` on disk: the locked, owner-keeping write around the text editor
//! [`crate::yaml_edit`].
//!
//! Every write of the file reads it, edits the text and writes it back while holding
//! `config.yaml.lock` ([`crate::lock`]), so a setting another process writes meanwhile is never
//! lost; atomically, keeping the file's mode, and its owner when root writes it
//! ([`crate::owner`]; a file this creates gets the owner of its directory). A missing file is
//! created (mode 0640) starting with `_config_version` ([`crate::yaml_edit::base_text`]).
//! [`Config::edit`](crate::config::Config::edit) is built on the same two steps
//! ([`read_text`], then `write_if_changed`).

use std::fs;
use std::io;
use std::path::Path;

use crate::Error;
use crate::config::Config;
use crate::owner::write_atomic_keeping_owner;
use crate::yaml_edit::{Change, apply, base_text, string_changes};
use crate::{damage, lock};

/// Sets each `(dotted key, value)` of `changes` to that string in the `config.yaml` at `path`,
/// keeping every other byte, under the same lock as
/// [`Config::edit`](crate::config::Config::edit), atomically and keeping the file's mode. A
/// missing file is created (mode 0640) starting with `_config_version`, as `Config::edit`
/// creates one. A key that already has that value is left alone; returns whether the file was
/// written.
///
/// # Errors
///
/// [`Error::ConfigLayout`] when a layout is refused (nothing is written), the errors of
/// [`Config::parse`] for a file that does not parse, [`Error::NotUtf8`], and I/O errors.
pub fn set_in_file(path: &Path, changes: &[(&str, &str)]) -> Result<bool, Error> {
    apply_in_file(path, &string_changes(changes))
}

/// [`set_in_file`] for any [`Change`]s.
///
/// # Errors
///
/// As [`set_in_file`].
pub fn apply_in_file(path: &Path, changes: &[Change]) -> Result<bool, Error> {
    lock::with_locked(&lock::sidecar(path), crate::config::MODE, || {
        let old = read_text(path)?;
        let new = apply(path, &base_text(old.as_deref()), changes)?;
        write_if_changed(path, old.as_deref(), &new)
    })
}

/// What [`replace_in_file`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replaced {
    /// The new text is in place.
    Written,
    /// The file already held that text.
    Unchanged,
    /// The file is no longer the text the caller started from: another writer changed it
    /// meanwhile, and nothing was written.
    ChangedMeanwhile,
}

/// Replaces the whole `config.yaml` at `path` by `new` (an edited copy of `started_from`, the
/// text the caller read; `None`: the file did not exist) — for `hermes config edit`, which
/// edits a copy. Under the lock, only when the file is still `started_from`, and only text
/// that parses as a config; atomically, keeping mode and owner.
///
/// # Errors
///
/// The errors of [`Config::parse`] for `new`, and I/O errors; nothing is written then.
pub fn replace_in_file(
    path: &Path,
    started_from: Option<&str>,
    new: &str,
) -> Result<Replaced, Error> {
    Config::parse(path, new)?;
    lock::with_locked(&lock::sidecar(path), crate::config::MODE, || {
        let old = read_text(path)?;
        if old.as_deref() != started_from {
            return Ok(Replaced::ChangedMeanwhile);
        }
        Ok(if write_if_changed(path, old.as_deref(), new)? {
            Replaced::Written
        } else {
            Replaced::Unchanged
        })
    })
}

/// The text of `path`, `None` when it does not exist (a read-modify-write holds the lock).
pub fn read_text(path: &Path) -> Result<Option<String>, Error> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(damage::decode_text(path, &bytes)?.to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

/// Writes `new` over `path` (whose text was `old`) unless it is the same: atomically, keeping
/// the file's mode and owner. Returns whether it wrote.
pub(crate) fn write_if_changed(path: &Path, old: Option<&str>, new: &str) -> Result<bool, Error> {
    if old == Some(new) {
        return Ok(false);
    }
    write_atomic_keeping_owner(path, new.as_bytes(), crate::config::MODE)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const SEED: &str = "# Hermes configuration\n_config_version: 33\n\nmodel:\n  # The model.\n  default: \"\"   # empty = not configured\n  provider: auto\n  base_url: ''\n\n# memory\nmemory:\n  provider: \"\"\n\ngateway: {}\n";

    #[test]
    fn the_file_keeps_its_mode_and_a_new_one_gets_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        assert!(set_in_file(&path, &[("model.default", "m")]).unwrap());
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "_config_version: 33\nmodel:\n  default: m\n"
        );
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o640);
        fs::write(&path, SEED).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(set_in_file(&path, &[("model.provider", "deepseek")]).unwrap());
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            SEED.replace("provider: auto", "provider: deepseek")
        );
        assert_eq!(mode(&path), 0o600);
        // Nothing to change: not written.
        assert!(!set_in_file(&path, &[("model.provider", "deepseek")]).unwrap());
        // A refusal writes nothing (`model.provider` is a value, not a section).
        let before = fs::read_to_string(&path).unwrap();
        assert!(set_in_file(&path, &[("model.provider.port", "1")]).is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), before);
    }

    #[test]
    fn it_waits_for_the_config_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        fs::write(&path, "a: 1\n").unwrap();
        let held = lock::hold(&lock::sidecar(&path));
        lock::test_timeout::set(std::time::Duration::from_millis(100));
        assert!(matches!(
            set_in_file(&path, &[("a", "2")]),
            Err(Error::LockTimeout { .. })
        ));
        drop(held);
        assert_eq!(fs::read_to_string(&path).unwrap(), "a: 1\n");
    }
}
