//! What on the data volume belongs to the service user: the names ownership repair may touch.
//!
//! Words:
//! * **data volume** — `HERMES_HOME` in the container (`/opt/data`), often a bind mount of the
//!   operator's own directory, so nothing on it is re-owned unless it is named here.
//! * **owned file** — a top-level file Hermes keeps on the volume ([`OWNED_FILES`]); some have
//!   a most permissive mode, the one their writers use, restored every boot (`.env` at most
//!   0600, `config.yaml` at most 0640; a stricter file keeps its mode); the rest only need to
//!   be readable and writable by their owner.
//! * **owned subtree** — a directory, relative to the volume root, whose every entry is the
//!   service user's ([`OWNED_SUBTREES`]).
//!
//! The lists live here because this crate owns the names of the files; `hermes-privilege`
//! repairs exactly what it is given (`RepairPlan::data_volume`), and `hermes init` passes
//! these lists.

/// A top-level file of the data volume that belongs to the service user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnedFile {
    /// File name directly under the volume root.
    pub name: &'static str,
    /// The most permission bits kept every boot (owner read/write always), or `None` for
    /// "owner can read and write".
    pub mode: Option<u32>,
}

impl OwnedFile {
    const fn exact(name: &'static str, mode: u32) -> Self {
        OwnedFile {
            name,
            mode: Some(mode),
        }
    }

    const fn owned(name: &'static str) -> Self {
        OwnedFile { name, mode: None }
    }
}

/// Top-level files of a Hermes data volume that belong to the service user.
pub const OWNED_FILES: &[OwnedFile] = &[
    OwnedFile::exact(".env", 0o600),
    OwnedFile::exact("config.yaml", 0o640),
    OwnedFile::owned("SOUL.md"),
    OwnedFile::owned("auth.json"),
    OwnedFile::owned("auth.lock"),
    OwnedFile::owned(".env.lock"),
    OwnedFile::owned("config.yaml.lock"),
    OwnedFile::owned("gateway_state.json.lock"),
    OwnedFile::owned("active_profile.lock"),
    OwnedFile::owned("state.db"),
    OwnedFile::owned("state.db-shm"),
    OwnedFile::owned("state.db-wal"),
    OwnedFile::owned("hermes_state.db"),
    OwnedFile::owned("response_store.db"),
    OwnedFile::owned("response_store.db-shm"),
    OwnedFile::owned("response_store.db-wal"),
    OwnedFile::owned("gateway.pid"),
    OwnedFile::owned("gateway.lock"),
    OwnedFile::owned(crate::gateway_state::FILE_NAME),
    OwnedFile::owned("processes.json"),
    OwnedFile::owned("active_profile"),
];

/// Top-level entries that are the service user's and may be a symlink the volume holds itself:
/// `lazy-packages`, the image's durable install target, is a link to its active install
/// generation (a directory on volumes from before generations). A link is re-owned itself and
/// never followed; a directory is a subtree like [`OWNED_SUBTREES`].
pub const OWNED_LINKS: &[&str] = &["lazy-packages"];

/// Subtrees of a Hermes data volume that belong to the service user, relative to its root.
pub const OWNED_SUBTREES: &[&str] = &[
    "profiles",
    "logs",
    "sessions",
    "memories",
    "skills",
    "skins",
    "plugins",
    // The install generations the image's `lazy-packages` names (`hermes_deps::generations`).
    "lazy-packages.generations",
    "home",
    ".local",
    "cron",
    "hooks",
    "plans",
    "workspace",
    "backups",
    "pairing",
    "platforms/pairing",
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Component, Path};

    fn mode_of(name: &str) -> Option<Option<u32>> {
        OWNED_FILES.iter().find(|f| f.name == name).map(|f| f.mode)
    }

    #[test]
    fn the_lists_are_targeted() {
        assert_eq!(mode_of(".env"), Some(Some(0o600)));
        assert_eq!(mode_of("config.yaml"), Some(Some(0o640)));
        assert_eq!(mode_of("auth.json"), Some(None));
        assert_eq!(mode_of("gateway_state.json"), Some(None));
        assert_eq!(mode_of("host_secret.json"), None);
        for file in OWNED_FILES {
            let plain = Path::new(file.name).components().count() == 1
                && matches!(
                    Path::new(file.name).components().next(),
                    Some(Component::Normal(_))
                );
            assert!(plain, "{}", file.name);
        }
        // No subtree is the root itself or escapes it.
        for subtree in OWNED_SUBTREES {
            let plain = Path::new(subtree)
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
            assert!(plain && !subtree.is_empty(), "{subtree}");
        }
        assert!(OWNED_SUBTREES.contains(&"profiles"));
        assert!(OWNED_SUBTREES.contains(&".local"));
    }

    #[test]
    fn exact_modes_are_the_ones_their_writers_use() {
        let dir = tempfile::tempdir().unwrap();
        let mode = |name: &str| {
            std::fs::metadata(dir.path().join(name))
                .unwrap()
                .permissions()
                .mode()
                & 0o777
        };
        crate::dotenv::set_var(&dir.path().join(".env"), "A", "1").unwrap();
        crate::config::Config::edit(&dir.path().join("config.yaml"), |c| {
            c.set("a", yaml_serde::Value::from(1));
            Ok(())
        })
        .unwrap();
        assert_eq!(Some(Some(mode(".env"))), mode_of(".env"));
        assert_eq!(Some(Some(mode("config.yaml"))), mode_of("config.yaml"));
    }
}
