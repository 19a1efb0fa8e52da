//! The layout on the volume: generations, the pointer that names the active one, the lock.
//!
//! For the durable target `T` (image: `/opt/data/lazy-packages`):
//!
//! ```text
//! T                            symlink → T.generations/0003 (the pointer)
//! T.generations/.lock          held (flock) by whoever builds, switches or collects
//! T.generations/0002/          the previous generation, sealed
//! T.generations/0003/          the active one, sealed; .hermes-generation.json, .python-abi
//! ```
//!
//! `T` keeps meaning "the packages" for everything that already reads
//! `HERMES_LAZY_INSTALL_TARGET` (the agent's `.pth` and installer, ours); only what it
//! points at changes, with one `rename(2)` of a new symlink over it, so a reader sees the old
//! generation or the new one, never a mix. The link is relative, so the volume reads the same
//! mounted anywhere.
//!
//! The lock is opened read-only: `flock` needs no write permission, so a lock file that a
//! `docker exec` as root created (and owns) never locks the service user out. Nothing here
//! changes owners: a caller running as root acts as the volume's owner first (the CLI does,
//! `hermes_privilege::AsUser::owner_of`), so what the store makes is that user's and no path the
//! user can swap is ever followed by root.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::record::{GenerationRecord, RECORD_FILE};
use super::tree;

/// Suffix of the store directory next to the target.
pub const STORE_SUFFIX: &str = ".generations";
const LOCK_FILE: &str = ".lock";

/// The generations of one durable target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    target: PathBuf,
    root: PathBuf,
}

/// One generation directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    /// Its number.
    pub id: u64,
    /// Its directory.
    pub path: PathBuf,
    /// Its record; `None` for an install that never finished.
    pub record: Option<GenerationRecord>,
}

/// What the pointer `T` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pointer {
    /// Nothing there yet.
    Missing,
    /// A directory from before generations (a flat target), to adopt.
    Flat,
    /// A link to generation `id` of this store.
    Generation(u64),
    /// Anything else: a link elsewhere, a file. Left alone and reported.
    Foreign(String),
}

/// The store's lock, released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

fn id_of(name: &str) -> Option<u64> {
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

impl Store {
    /// The store of the durable target `target` (`<target>.generations` beside it).
    pub fn for_target(target: &Path) -> Self {
        let mut name = target
            .file_name()
            .map(|n| n.to_os_string())
            .unwrap_or_else(|| "lazy-packages".into());
        name.push(STORE_SUFFIX);
        Self {
            target: target.to_path_buf(),
            root: target.with_file_name(name),
        }
    }

    /// The pointer: the durable target's own path.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The directory that holds the generations.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of generation `id`.
    pub fn path_of(&self, id: u64) -> PathBuf {
        self.root.join(format!("{id:04}"))
    }

    /// Creates the store directory (and the target's parent) when missing.
    pub fn create(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)
    }

    /// Takes the store's lock, waiting for whoever holds it.
    ///
    /// A lock file this user cannot even read (one root created for itself, mode 0600) is
    /// replaced by a fresh one renamed over it: a lock nobody else could be waiting on through
    /// this user's eyes must not stop every install, nor the boot.
    pub fn lock(&self) -> std::io::Result<StoreLock> {
        self.create()?;
        let path = self.root.join(LOCK_FILE);
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.new_lock_file(&path)?,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                self.new_lock_file(&path)?
            }
            Err(e) => return Err(e),
        };
        file.lock()?;
        Ok(StoreLock { _file: file })
    }

    /// An empty lock file at `path`: made beside it, given to the volume's owner, renamed over
    /// whatever was there, then opened read-only like every other holder.
    fn new_lock_file(&self, path: &Path) -> std::io::Result<File> {
        let fresh = self
            .root
            .join(format!("{LOCK_FILE}.{}", std::process::id()));
        drop(File::create(&fresh)?);
        std::fs::set_permissions(&fresh, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
        if let Err(e) = std::fs::rename(&fresh, path) {
            let _ = std::fs::remove_file(&fresh);
            return Err(e);
        }
        File::open(path)
    }

    /// Every generation directory, oldest first.
    pub fn list(&self) -> Vec<Generation> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut out: Vec<Generation> = entries
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter_map(|e| {
                let id = id_of(&e.file_name().to_string_lossy())?;
                let path = e.path();
                Some(Generation {
                    id,
                    record: GenerationRecord::read(&path),
                    path,
                })
            })
            .collect();
        out.sort_by_key(|g| g.id);
        out
    }

    /// The number the next generation gets.
    pub fn next_id(&self) -> u64 {
        self.list().last().map_or(1, |g| g.id + 1)
    }

    /// What the pointer is.
    pub fn pointer(&self) -> Pointer {
        let Ok(meta) = std::fs::symlink_metadata(&self.target) else {
            return Pointer::Missing;
        };
        if meta.is_dir() {
            return Pointer::Flat;
        }
        if !meta.file_type().is_symlink() {
            return Pointer::Foreign("a file, not a directory or a link".into());
        }
        let Ok(link) = std::fs::read_link(&self.target) else {
            return Pointer::Foreign("an unreadable link".into());
        };
        let resolved = self.target.parent().unwrap_or(Path::new("/")).join(&link);
        match (resolved.parent(), resolved.file_name()) {
            (Some(dir), Some(name)) if dir == self.root => match id_of(&name.to_string_lossy()) {
                Some(id) => Pointer::Generation(id),
                None => Pointer::Foreign(format!("a link to `{}`", link.display())),
            },
            _ => Pointer::Foreign(format!("a link to `{}`", link.display())),
        }
    }

    /// The active generation: the one the pointer names, when it is complete.
    pub fn active(&self) -> Option<Generation> {
        let Pointer::Generation(id) = self.pointer() else {
            return None;
        };
        self.list()
            .into_iter()
            .find(|g| g.id == id && g.record.is_some())
    }

    /// Points the target at generation `id`: a new relative link renamed over the old one.
    pub fn point_to(&self, id: u64) -> std::io::Result<()> {
        let store_name = self.root.file_name().unwrap_or_default();
        let link = Path::new(store_name).join(format!("{id:04}"));
        let mut tmp_name = self.target.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(format!(".switch-{}", std::process::id()));
        let tmp = self.target.with_file_name(tmp_name);
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&link, &tmp)?;
        if let Err(e) = std::fs::rename(&tmp, &self.target) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if let Some(parent) = self.target.parent() {
            File::open(parent)?.sync_all()?;
        }
        Ok(())
    }

    /// Removes generations an install left unfinished (no record). Call with the lock held:
    /// then no install is running.
    pub fn remove_unfinished(&self) -> std::io::Result<Vec<u64>> {
        let mut removed = Vec::new();
        for g in self.list() {
            if g.record.is_none() {
                tree::remove(&g.path)?;
                removed.push(g.id);
            }
        }
        Ok(removed)
    }

    /// When the pointer is missing but finished generations exist (a crash between moving a
    /// flat target in and linking it), points at the newest. Call with the lock held.
    pub fn repair_pointer(&self) -> std::io::Result<Option<u64>> {
        if self.pointer() != Pointer::Missing {
            return Ok(None);
        }
        match self.list().into_iter().rev().find(|g| g.record.is_some()) {
            Some(g) => {
                self.point_to(g.id)?;
                Ok(Some(g.id))
            }
            None => Ok(None),
        }
    }

    /// Whether `path` is a finished generation of this store.
    pub fn is_finished(path: &Path) -> bool {
        path.join(RECORD_FILE).is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generations::record::{FORMAT, Origin};

    fn finished(store: &Store, id: u64) {
        let p = store.path_of(id);
        std::fs::create_dir_all(&p).unwrap();
        GenerationRecord {
            format: FORMAT,
            id,
            parent: None,
            origin: Origin::Install,
            created_at: 0,
            abi: String::new(),
            core_lock: String::new(),
            requests: vec![],
            resolved: vec![],
            unavailable: vec![],
        }
        .write(&p)
        .unwrap();
    }

    #[test]
    fn the_pointer_names_a_generation_through_a_relative_link() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::for_target(&d.path().join("lazy-packages"));
        assert_eq!(store.root(), d.path().join("lazy-packages.generations"));
        assert_eq!(store.pointer(), Pointer::Missing);
        store.create().unwrap();
        finished(&store, 1);
        finished(&store, 2);
        std::fs::create_dir_all(store.path_of(3)).unwrap(); // unfinished
        assert_eq!(store.next_id(), 4);
        store.point_to(2).unwrap();
        assert_eq!(store.pointer(), Pointer::Generation(2));
        assert_eq!(
            std::fs::read_link(store.target()).unwrap(),
            Path::new("lazy-packages.generations/0002")
        );
        assert_eq!(store.active().unwrap().id, 2);
        assert_eq!(store.remove_unfinished().unwrap(), vec![3]);
        assert_eq!(store.list().len(), 2);
        let leftovers: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("switch"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_missing_pointer_is_repaired_and_a_foreign_one_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::for_target(&d.path().join("t"));
        store.create().unwrap();
        finished(&store, 1);
        finished(&store, 2);
        assert_eq!(store.repair_pointer().unwrap(), Some(2));
        assert_eq!(store.repair_pointer().unwrap(), None);
        std::fs::remove_file(store.target()).unwrap();
        std::os::unix::fs::symlink("/etc", store.target()).unwrap();
        assert!(matches!(store.pointer(), Pointer::Foreign(_)));
        assert_eq!(store.active(), None);
        std::fs::remove_file(store.target()).unwrap();
        std::fs::create_dir(store.target()).unwrap();
        assert_eq!(store.pointer(), Pointer::Flat);
    }

    #[test]
    fn a_lock_file_nobody_may_write_still_locks() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::for_target(&d.path().join("t"));
        store.create().unwrap();
        let lock = store.root().join(LOCK_FILE);
        std::fs::write(&lock, "").unwrap();
        std::fs::set_permissions(&lock, std::os::unix::fs::PermissionsExt::from_mode(0o444))
            .unwrap();
        let held = store.lock().unwrap();
        let second = File::open(&lock).unwrap();
        assert!(second.try_lock().is_err(), "the first holder has it");
        drop(held);
        assert!(second.try_lock().is_ok());
    }
}
