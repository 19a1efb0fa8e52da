//! Every profile of a volume, its files read once ([`VolumeFiles`]): what boot, `hermes up`
//! and the reconciliation of gateway services build their services from, so no stage reads a
//! profile again and two stages cannot see two versions of it.

use std::fmt;
use std::path::{Path, PathBuf};

use hermes_home::config::Config;

use crate::files::{ProfileFiles, Scope};

/// Why a profile's files could not be read: the file and what is wrong, on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable(String);

impl fmt::Display for Unreadable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One profile as read: its name, its directory and its files (or why they cannot be read).
#[derive(Debug, Clone)]
pub struct ProfileRead {
    /// `default` or the profile's name.
    pub name: String,
    /// The profile's directory (the volume's root for `default`).
    pub dir: PathBuf,
    /// Its `.env` and `config.yaml` over the process environment, as its scope takes it.
    pub files: Result<ProfileFiles, Unreadable>,
}

impl ProfileRead {
    /// Reads the profile `name` in `dir` over `process_env`, in the scope its name gives
    /// ([`Scope::of`]).
    pub fn read(
        name: &str,
        dir: &Path,
        process_env: impl IntoIterator<Item = (String, String)>,
    ) -> ProfileRead {
        let files = ProfileFiles::read(dir, Scope::of(name), process_env)
            .map_err(|e| Unreadable(hermes_errors::one_line(&e)));
        ProfileRead {
            name: name.to_owned(),
            dir: dir.to_path_buf(),
            files,
        }
    }

    /// Its `config.yaml`, when the files could be read.
    pub fn config(&self) -> Option<&Config> {
        self.files.as_ref().ok().map(ProfileFiles::config)
    }
}

/// Every profile of a volume, the default one first, each read once.
#[derive(Debug, Clone)]
pub struct VolumeFiles {
    profiles: Vec<ProfileRead>,
    listing: Option<String>,
}

impl VolumeFiles {
    /// Reads the profiles of the volume at `root` (`hermes_home::profile::list`) over
    /// `process_env`. When `profiles/` cannot be listed, the default profile alone is read and
    /// [`VolumeFiles::listing_problem`] says why.
    pub fn read(root: &Path, process_env: &[(String, String)]) -> VolumeFiles {
        let (dirs, listing) = hermes_home::profile::dirs_or_default(root);
        let profiles = dirs
            .into_iter()
            .map(|(name, dir)| ProfileRead::read(&name, &dir, process_env.iter().cloned()))
            .collect();
        VolumeFiles { profiles, listing }
    }

    /// Every profile read, the default one first.
    pub fn profiles(&self) -> &[ProfileRead] {
        &self.profiles
    }

    /// The default profile (the volume's root).
    pub fn root(&self) -> &ProfileRead {
        // `read` always puts the default profile first, listed or not.
        &self.profiles[0]
    }

    /// The profile named `name`, if the volume has it.
    pub fn get(&self, name: &str) -> Option<&ProfileRead> {
        self.profiles.iter().find(|p| p.name == name)
    }

    /// Why the named profiles could not be listed (only the default one was read then).
    pub fn listing_problem(&self) -> Option<&str> {
        self.listing.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_profile_is_read_in_its_own_scope_and_a_bad_one_is_said_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("config.yaml"), "API_SERVER_PORT: 9000\n").unwrap();
        for name in ["work", "bad"] {
            // A profile is a directory holding `SOUL.md`.
            std::fs::create_dir_all(root.join("profiles").join(name)).unwrap();
            std::fs::write(root.join("profiles").join(name).join("SOUL.md"), "s").unwrap();
        }
        std::fs::write(root.join("profiles/bad/config.yaml"), "a: [\n").unwrap();
        let env = vec![("API_SERVER_KEY".to_owned(), "k".repeat(20))];
        let volume = VolumeFiles::read(root, &env);
        let names: Vec<&str> = volume.profiles().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["default", "bad", "work"]);
        let default = volume.root().files.as_ref().unwrap();
        assert_eq!(default.var("API_SERVER_PORT").unwrap().value, "9000");
        assert!(
            default.var("API_SERVER_KEY").is_some(),
            "the default takes the key"
        );
        let work = volume.get("work").unwrap().files.as_ref().unwrap();
        assert!(
            work.var("API_SERVER_KEY").is_none(),
            "a named profile does not"
        );
        let bad = volume.get("bad").unwrap();
        let why = bad.files.as_ref().unwrap_err().to_string();
        assert!(why.contains("config.yaml"), "{why}");
        assert!(bad.config().is_none());
        assert!(volume.listing_problem().is_none());
    }
}
