//! Install method: how this binary got here, and therefore how to upgrade it.
//!
//! Resolution: a stamp file `.install_method` next to the binary (`docker`, `release`,
//! `cargo`; anything else is ignored), then a source checkout (the binary lives inside a git
//! work tree that holds a `Cargo.toml`, e.g. `target/release/hermes`), else `unknown`.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// Name of the stamp file next to the binary.
pub const STAMP_FILE: &str = ".install_method";

/// How Hermes was installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstallMethod {
    /// The published container image.
    Docker,
    /// A release archive.
    Release,
    /// `cargo install`.
    Cargo,
    /// Built from a source checkout.
    Source,
    /// None of the above could be established.
    Unknown,
}

impl InstallMethod {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            InstallMethod::Docker => "docker",
            InstallMethod::Release => "release",
            InstallMethod::Cargo => "cargo",
            InstallMethod::Source => "source",
            InstallMethod::Unknown => "unknown",
        }
    }

    /// How to upgrade an installation of this kind.
    pub fn upgrade_advice(self) -> &'static str {
        match self {
            InstallMethod::Docker => {
                "pull the new image and recreate the container (`docker compose pull && docker compose up -d`); your data in `/opt/data` is kept"
            }
            InstallMethod::Release => {
                "download the latest release archive and replace the `hermes` binary"
            }
            InstallMethod::Cargo => "run `cargo install --locked --force hermes`",
            InstallMethod::Source => "run `git pull && cargo build --release` in the checkout",
            InstallMethod::Unknown => "reinstall Hermes from the latest release",
        }
    }
}

/// The install method and directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Install {
    /// How it was installed.
    pub method: InstallMethod,
    /// The directory holding the binary.
    pub dir: Option<PathBuf>,
}

impl Install {
    /// Detects the method for a binary living in `dir`.
    pub fn detect(dir: Option<&Path>) -> Self {
        let method = dir.map_or(InstallMethod::Unknown, detect_method);
        Install {
            method,
            dir: dir.map(Path::to_path_buf),
        }
    }

    /// The install of the running binary.
    pub fn current() -> Self {
        let dir = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.canonicalize().ok())
            .and_then(|exe| exe.parent().map(Path::to_path_buf));
        Self::detect(dir.as_deref())
    }
}

fn detect_method(dir: &Path) -> InstallMethod {
    if let Ok(stamp) = fs::read_to_string(dir.join(STAMP_FILE)) {
        match stamp.trim().to_ascii_lowercase().as_str() {
            "docker" => return InstallMethod::Docker,
            "release" => return InstallMethod::Release,
            "cargo" => return InstallMethod::Cargo,
            _ => {}
        }
    }
    match crate::git::find_repo(dir) {
        Some(repo) if repo.work_tree.join("Cargo.toml").is_file() => InstallMethod::Source,
        _ => InstallMethod::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_beats_checkout_and_unknown_stamps_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("target/release");
        fs::create_dir_all(&bin).unwrap();
        assert_eq!(Install::detect(Some(&bin)).method, InstallMethod::Unknown);
        fs::create_dir(dir.path().join(".git")).unwrap();
        fs::write(dir.path().join("Cargo.toml"), "").unwrap();
        assert_eq!(Install::detect(Some(&bin)).method, InstallMethod::Source);
        fs::write(bin.join(STAMP_FILE), "pip\n").unwrap();
        assert_eq!(Install::detect(Some(&bin)).method, InstallMethod::Source);
        fs::write(bin.join(STAMP_FILE), " Docker\n").unwrap();
        assert_eq!(Install::detect(Some(&bin)).method, InstallMethod::Docker);
        assert!(
            InstallMethod::Docker
                .upgrade_advice()
                .contains("docker compose pull")
        );
    }
}
