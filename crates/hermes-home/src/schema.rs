//! The config schema version a data volume was last written with.
//!
//! The original agent stamps `_config_version` into every `config.yaml` it migrates (0.19.0
//! writes 33, 0.20.1 35, 0.21.3 44). An agent reading a file stamped with a version newer than
//! its own does not know the newer keys, and its next write drops or misreads them: so the
//! runtime never runs an agent older than the volume ([`VolumeSchema::newest`]), and migrates
//! the files that are older than the agent ([`ProfileSchema::version`]).
//!
//! Words: a **stamp** is a file's `_config_version`, read as the original's
//! `_coerce_config_version` reads it (an integer or a string of one; a boolean, anything else or
//! a negative number is 0, "legacy"); a missing key is also 0. A missing `config.yaml` has no
//! stamp (`None`): nothing was written there.

use std::path::{Path, PathBuf};

use yaml_serde::Value;

use crate::config::{CONFIG_VERSION_KEY, Config};
use crate::profile;

/// One profile's `config.yaml` and its stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileSchema {
    /// The profile's name (`default` for the root).
    pub profile: String,
    /// The profile's directory.
    pub dir: PathBuf,
    /// Its `config.yaml`.
    pub config: PathBuf,
    /// The stamp; `Ok(None)` when there is no `config.yaml`, `Err` (one line) when it cannot be
    /// read or parsed.
    pub version: Result<Option<u64>, String>,
}

/// Every profile's stamp on a volume.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VolumeSchema {
    /// Root first, then the named profiles in name order.
    pub profiles: Vec<ProfileSchema>,
    /// Set when the profile list itself could not be read (only the root is in `profiles`).
    pub list_error: Option<String>,
}

impl VolumeSchema {
    /// Reads the stamps of every profile under `root` (read-only).
    pub fn read(root: &Path) -> VolumeSchema {
        let (dirs, list_error) = profile::dirs_or_default(root);
        let profiles = dirs
            .into_iter()
            .map(|(profile, dir)| {
                let config = dir.join("config.yaml");
                let version = stamp_of(&config);
                ProfileSchema {
                    profile,
                    dir,
                    config,
                    version,
                }
            })
            .collect();
        VolumeSchema {
            profiles,
            list_error,
        }
    }

    /// The newest stamp on the volume and the file that carries it (the first such file when
    /// several do); `None` when no `config.yaml` could be read.
    pub fn newest(&self) -> Option<(u64, &Path)> {
        let mut newest: Option<(u64, &Path)> = None;
        for p in &self.profiles {
            if let Ok(Some(v)) = p.version
                && newest.is_none_or(|(n, _)| v > n)
            {
                newest = Some((v, p.config.as_path()));
            }
        }
        newest
    }
}

/// The stamp of the `config.yaml` at `path` (module doc).
///
/// # Errors
/// One line saying why the file cannot be read or parsed.
pub fn stamp_of(path: &Path) -> Result<Option<u64>, String> {
    let config = Config::load(path).map_err(|e| hermes_errors::one_line(&e))?;
    if !config.exists() {
        return Ok(None);
    }
    Ok(Some(stamp_in(&config).unwrap_or(0)))
}

/// The stamp written in `config`, `None` when it has no `_config_version` key at all (which the
/// original reads as 0, "legacy": [`stamp_of`] does).
pub fn stamp_in(config: &Config) -> Option<u64> {
    config.raw(CONFIG_VERSION_KEY).map(coerce)
}

/// The original's `_coerce_config_version`: an integer, or a string holding one; 0 otherwise.
fn coerce(value: &Value) -> u64 {
    match value {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .unwrap_or(0),
        Value::String(s) => s.trim().parse::<u64>().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn profile(root: &Path, name: &str, config: Option<&str>) {
        let dir = if name == "default" {
            root.to_path_buf()
        } else {
            root.join("profiles").join(name)
        };
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("SOUL.md"), "soul").unwrap();
        if let Some(text) = config {
            fs::write(dir.join("config.yaml"), text).unwrap();
        }
    }

    #[test]
    fn stamps_are_read_as_the_original_coerces_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        assert_eq!(stamp_of(&path), Ok(None), "no file, no stamp");
        for (text, want) in [
            ("_config_version: 35\n", 35),
            ("_config_version: '44'\n", 44),
            ("_config_version: true\n", 0),
            ("_config_version: -3\n", 0),
            ("_config_version: [1]\n", 0),
            ("model: m\n", 0),
            ("", 0),
        ] {
            fs::write(&path, text).unwrap();
            assert_eq!(stamp_of(&path), Ok(Some(want)), "{text:?}");
        }
        fs::write(&path, "model: [unclosed\n").unwrap();
        assert!(stamp_of(&path).unwrap_err().contains("config.yaml"));
    }

    #[test]
    fn the_newest_stamp_of_the_volume_names_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        profile(root, "default", Some("_config_version: 33\n"));
        profile(root, "work", Some("_config_version: 35\n"));
        profile(root, "bad", Some("x: [\n"));
        profile(root, "empty", None);
        let schema = VolumeSchema::read(root);
        let names: Vec<_> = schema.profiles.iter().map(|p| p.profile.as_str()).collect();
        assert_eq!(names, ["default", "bad", "empty", "work"]);
        let (version, file) = schema.newest().unwrap();
        assert_eq!(version, 35);
        assert_eq!(file, root.join("profiles/work/config.yaml"));
        assert!(schema.profiles[1].version.is_err());
        assert_eq!(schema.profiles[2].version, Ok(None));
        assert_eq!(VolumeSchema::read(&root.join("nothing")).newest(), None);
    }
}
