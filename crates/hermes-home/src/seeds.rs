//! The files a new home or profile starts with, and the rule for seeding them.
//!
//! Seeding only ever creates a file that is absent: an existing `.env`, `config.yaml` or
//! `SOUL.md` — customised, empty, or even unreadable — is never touched.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::Error;
use crate::random::random_hex;

/// The comment header of a fresh `.env`.
pub const ENV_HEADER: &str = "\
# Per-profile secrets for this Hermes profile.
# API keys and tokens set here override the shell environment.
# Behavioral settings belong in config.yaml, not here.
";

/// What a new `.env` does about `API_SERVER_KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySeed {
    /// Carry a random key of its own.
    Generate,
    /// Carry none: the profile already has one, set where this says (`the container's
    /// environment`, `the top level of `config.yaml``). `.env` wins over every other place,
    /// so a generated key would silently replace the operator's.
    SetIn(String),
}

/// The `.env` of a new home or profile: [`ENV_HEADER`] and, for [`KeySeed::Generate`], a
/// random `API_SERVER_KEY` (64 hex characters), so its API server is on and protected from the
/// start (the original's rules switch the API server on by the key and refuse it without a
/// strong one). Without a random source, the header only: the API server then stays off
/// rather than weak. For [`KeySeed::SetIn`], a comment saying where the key comes from.
pub fn new_env_file(key: &KeySeed) -> String {
    match key {
        KeySeed::SetIn(place) => format!(
            "{ENV_HEADER}# {API_SERVER_KEY} comes from {place}; a value set here would override it.\n"
        ),
        KeySeed::Generate => match random_hex(32) {
            Ok(key) => format!("{ENV_HEADER}{API_SERVER_KEY}={key}\n"),
            Err(_) => ENV_HEADER.to_string(),
        },
    }
}

/// The gateway's client key: the variable first boot and new profiles seed in `.env`.
pub const API_SERVER_KEY: &str = "API_SERVER_KEY";

/// The default `config.yaml`: every key Hermes reads, with its default. Documented in
/// `docs/configuration.md`.
pub const DEFAULT_CONFIG_YAML: &str = include_str!("../seeds/config.yaml");

/// The default persona of a new profile.
pub const DEFAULT_SOUL_MD: &str = include_str!("../seeds/SOUL.md");

/// What [`seed_file`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seeded {
    /// The file was absent and has been written.
    Created,
    /// The file already existed and was left as it is.
    Kept,
}

/// Creates `path` with `contents` and `mode` unless something already exists there.
///
/// Uses `O_CREAT | O_EXCL`, so two processes seeding at once cannot both write, and a file
/// created between a check and the write is never clobbered.
pub fn seed_file(path: &Path, contents: &str, mode: u32) -> Result<Seeded, Error> {
    let mut file = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(Seeded::Kept),
        Err(e) => return Err(Error::io("create", path, e)),
    };
    let written = file
        .set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .and_then(|()| file.write_all(contents.as_bytes()))
        .and_then(|()| file.sync_all());
    if let Err(e) = written {
        // Never leave a half-written seed behind: the next run would keep it forever.
        let _ = std::fs::remove_file(path);
        return Err(Error::io("write", path, e));
    }
    Ok(Seeded::Created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_file_is_kept_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("SOUL.md");
        std::fs::write(&path, "mine").unwrap();
        assert_eq!(
            seed_file(&path, DEFAULT_SOUL_MD, 0o644).unwrap(),
            Seeded::Kept
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
    }

    #[test]
    fn a_new_env_file_carries_its_own_strong_key() {
        let (a, b) = (
            new_env_file(&KeySeed::Generate),
            new_env_file(&KeySeed::Generate),
        );
        assert!(a.starts_with(ENV_HEADER), "{a}");
        let key = |t: &str| {
            t.lines()
                .find_map(|l| l.strip_prefix("API_SERVER_KEY="))
                .map(String::from)
        };
        let ka = key(&a).expect("a key line");
        assert_eq!(ka.len(), 64);
        assert!(ka.bytes().all(|c| c.is_ascii_hexdigit()), "{ka}");
        assert_ne!(Some(ka), key(&b), "every file gets its own key");
    }

    #[test]
    fn a_key_set_elsewhere_is_not_replaced_by_a_generated_one() {
        let text = new_env_file(&KeySeed::SetIn("the container's environment".into()));
        assert!(text.starts_with(ENV_HEADER), "{text}");
        assert!(
            !text.lines().any(|l| l.starts_with("API_SERVER_KEY=")),
            "no key line (it would override the environment's): {text}"
        );
        assert!(
            text.contains("comes from the container's environment"),
            "{text}"
        );
    }

    #[test]
    fn default_config_is_valid_yaml_mapping() {
        let value: yaml_serde::Value = yaml_serde::from_str(DEFAULT_CONFIG_YAML).unwrap();
        assert!(value.is_mapping());
    }
}
