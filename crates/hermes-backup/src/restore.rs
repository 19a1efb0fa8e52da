//! `hermes backup restore`: what an archive would change, then the change, all or nothing.
//!
//! A restore first **plans** ([`plan`]): the archive is verified, and each file in scope is
//! *added* (not on the volume), *replaced* (different there) or *unchanged*; files of the
//! volume the archive does not hold are *kept*; runtime files and the original's `_external/`
//! entries are *skipped*. Then it **applies** ([`apply`]), under the volume lock:
//!
//! 1. every added or replaced file is extracted into `.restore-<time>-<pid>/new/` at the top of
//!    the volume (the same file system, so the swap is renames), its SHA-256 checked again; a
//!    full disk here leaves the volume untouched;
//! 2. the **journal** (`journal.json`: the directories to create, each file and whether the
//!    volume had one) is written;
//! 3. each file is swapped: the volume's copy renamed into `old/`, the new one renamed into
//!    place;
//! 4. `done` is written and the staging directory removed.
//!
//! A restore that stops between 2 and 4 (killed, a power cut, an error) is **rolled back**
//! from its journal ([`recover`]): old files renamed back, new ones and created directories
//! removed, so the volume is byte for byte what it was. The failing restore does that itself;
//! after a kill, the next `hermes backup` command and the next boot do.
//!
//! For the tests that kill a restore at every step, `HERMES_BACKUP_FAULT=<point>:<n>` makes the
//! process SIGKILL itself at that point ([`fault_point`]): `extracted:<n>` after the n-th file
//! is staged, `journal:0` once the journal is written, `aside:<n>` / `swapped:<n>` after the n-th
//! file is moved aside / into place, `done:0` once `done` is written.
//!
//! Modes and owners follow the volume's rules: a replaced file keeps the mode and owner it had;
//! a new one gets its directory's owner (when root restores) and the mode its writers use
//! (`.env`, `auth.json`, `state.db` 0600; `config.yaml` at most 0640).

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Error;
use hermes_home::layout::RESTORE_STAGING_PREFIX;

use crate::create::{VolumeLock, sync_dir};
use crate::select::{self, Scope};
use crate::verify::{self, ArchiveFile, Verified};

/// What a restore does to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// Not on the volume: written.
    Added,
    /// On the volume, different: replaced.
    Replaced,
    /// On the volume, the same bytes: left alone.
    Unchanged,
}

/// One file of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The archive's file.
    pub file: ArchiveFile,
    /// What happens to it.
    pub change: Change,
}

/// What a restore would change (module doc).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The volume's root.
    pub root: PathBuf,
    /// The verified archive.
    pub archive: Verified,
    /// Files of the archive in scope, in path order.
    pub files: Vec<Planned>,
    /// Files on the volume, in scope, that the archive does not hold: left as they are.
    pub kept: Vec<String>,
    /// Archive entries left out, with why.
    pub skipped: Vec<(String, String)>,
}

impl Plan {
    /// How many files get `change`.
    pub fn count(&self, change: Change) -> usize {
        self.files.iter().filter(|p| p.change == change).count()
    }

    /// The profiles whose files change (`default` for the root's), in name order.
    pub fn profiles_changed(&self) -> Vec<String> {
        let names: BTreeSet<String> = self
            .files
            .iter()
            .filter(|p| p.change != Change::Unchanged)
            .map(|p| {
                select::split_profile(&p.file.rel)
                    .0
                    .unwrap_or(hermes_home::DEFAULT_PROFILE)
                    .to_owned()
            })
            .collect();
        names.into_iter().collect()
    }
}

/// Verifies the archive at `archive` and plans restoring it into `root` in `scope`.
///
/// # Errors
/// [`Error::Verification`] when the archive is damaged; [`Error::NothingToRestore`] when it
/// holds nothing in scope; [`Error::UnsafeTarget`] when a file would be written through a
/// symlink or over something that is not a file.
pub fn plan(
    root: &Path,
    archive: &Path,
    scope: &Scope,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Plan, Error> {
    let verified = verify::verify(archive, progress)?.ok()?;
    let _on_volume = crate::as_owner_of(root)?;
    let skipped_rels: BTreeSet<&str> = verified.skipped.iter().map(|(r, _)| r.as_str()).collect();
    let mut files = Vec::new();
    let mut live_logs = Vec::new();
    for file in &verified.files {
        if skipped_rels.contains(file.rel.as_str()) || !scope.contains(&file.rel) {
            continue;
        }
        let target = check_target(root, &file.rel)?;
        let change = match target {
            None => Change::Added,
            Some(path) if holds_the_same(&path, file)? => Change::Unchanged,
            Some(_) if is_log(&file.rel) => {
                live_logs.push(file.rel.clone());
                continue;
            }
            Some(_) => Change::Replaced,
        };
        files.push(Planned {
            file: file.clone(),
            change,
        });
    }
    if files.is_empty() {
        return Err(Error::NothingToRestore {
            what: scope.describe(),
        });
    }
    files.sort_by(|a, b| a.file.rel.cmp(&b.file.rel));
    let in_archive: BTreeSet<&str> = files
        .iter()
        .map(|p| p.file.rel.as_str())
        .chain(live_logs.iter().map(String::as_str))
        .collect();
    let kept = select::walk(root, scope)?
        .into_iter()
        .map(|s| s.rel)
        .filter(|rel| !in_archive.contains(rel.as_str()))
        .collect();
    let mut skipped = verified.skipped.clone();
    skipped.extend(live_logs.into_iter().map(|rel| (rel, LIVE_LOG.to_string())));
    skipped.sort();
    Ok(Plan {
        root: root.to_path_buf(),
        archive: verified,
        files,
        kept,
        skipped,
    })
}

/// Why a log the volume has is not restored: logs only grow, so the volume's is the newer, and
/// rolling it back would lose what happened since the backup.
const LIVE_LOG: &str = "the volume's log is newer; a log is never rolled back";

/// Whether `rel` is a log: under `logs/` of the root or of a profile.
fn is_log(rel: &str) -> bool {
    select::split_profile(rel)
        .1
        .starts_with(&format!("{}/", hermes_home::layout::LOGS_DIR))
}

/// Whether the volume's file at `path` holds what the archive's `file` does: the same bytes,
/// or, for a database, the same schema and rows ([`crate::content`]) — a backup's copy of a
/// database never has the live file's bytes.
fn holds_the_same(path: &Path, file: &ArchiveFile) -> Result<bool, Error> {
    if sha256_of(path)? == file.sha256 {
        return Ok(true);
    }
    Ok(match &file.content {
        Some(archived) => crate::content::digest(path).is_ok_and(|live| &live == archived),
        None => false,
    })
}

/// What a finished restore did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Applied {
    /// Files written that were not there.
    pub added: usize,
    /// Files replaced.
    pub replaced: usize,
    /// Files already the same.
    pub unchanged: usize,
    /// Files of the volume the archive does not hold, left alone.
    pub kept: usize,
}

/// The staging directory's journal (module doc).
#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    /// Directories created on the volume, parents first.
    dirs: Vec<String>,
    /// Files swapped, in order.
    files: Vec<JournalFile>,
}

#[derive(Debug, Serialize, Deserialize)]
struct JournalFile {
    rel: String,
    had_old: bool,
}

/// Applies `plan` (module doc): all of it, or — on any error — none of it.
///
/// # Errors
/// The first failure, after the volume has been rolled back; [`Error::Rollback`] if even that
/// failed (the journal then stays for [`recover`]).
pub fn apply(plan: &Plan) -> Result<Applied, Error> {
    let root = &plan.root;
    let _on_volume = crate::as_owner_of(root)?;
    let _lock = VolumeLock::acquire(root)?;
    recover_locked(root)?;
    refuse_databases_in_use(plan)?;
    let staging = Staging::create(root)?;
    let result = stage_and_swap(plan, &staging);
    match result {
        Ok(()) => {
            staging.finish();
            Ok(Applied {
                added: plan.count(Change::Added),
                replaced: plan.count(Change::Replaced),
                unchanged: plan.count(Change::Unchanged),
                kept: plan.kept.len(),
            })
        }
        Err(e) => match roll_back(root, &staging.dir) {
            Ok(()) => Err(e),
            Err(rollback) => Err(Error::Rollback {
                staging: staging.dir.clone(),
                source: Box::new(rollback),
            }),
        },
    }
}

/// [`Error::DatabaseInUse`] when a database the plan replaces, or its `-wal`/`-shm`, is open in
/// another process (upstream #95531): replaced under it, that process would go on writing into
/// the old file, and its next checkpoint could write old pages into the new one.
fn refuse_databases_in_use(plan: &Plan) -> Result<(), Error> {
    for planned in &plan.files {
        if planned.change != Change::Replaced || !planned.file.database {
            continue;
        }
        let path = plan.root.join(&planned.file.rel);
        let holders = crate::holders::of_database(&path);
        if !holders.is_empty() {
            let names: Vec<String> = holders.iter().map(ToString::to_string).collect();
            return Err(Error::DatabaseInUse {
                path,
                holders: names.join(", "),
            });
        }
    }
    Ok(())
}

fn stage_and_swap(plan: &Plan, staging: &Staging) -> Result<(), Error> {
    let root = &plan.root;
    let changing: Vec<&Planned> = plan
        .files
        .iter()
        .filter(|p| p.change != Change::Unchanged)
        .collect();
    // 1. Extract (a full disk fails here, before the volume is touched; a volume that would be
    //    left with less than the reserve is refused before anything is written).
    let needed: u64 = changing.iter().map(|p| p.file.size).sum();
    let available = hermes_home::disk::usage(root)
        .map_err(|e| Error::io("inspect", root, e))?
        .available_bytes;
    if needed.saturating_add(verify::SCRATCH_RESERVE) > available {
        return Err(Error::NoSpace {
            root: root.clone(),
            needed,
            available,
            reserve: verify::SCRATCH_RESERVE,
        });
    }
    let file =
        File::open(&plan.archive.path).map_err(|e| Error::io("read", &plan.archive.path, e))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|source| Error::Zip {
        path: plan.archive.path.clone(),
        source,
    })?;
    let mut journal = Journal {
        dirs: Vec::new(),
        files: Vec::new(),
    };
    for planned in &changing {
        let rel = &planned.file.rel;
        let target = check_target(root, rel)?;
        let (mode, owner) = match &target {
            Some(path) => {
                let meta = fs::metadata(path).map_err(|e| Error::io("inspect", path, e))?;
                (meta.mode() & 0o7777, Some((meta.uid(), meta.gid())))
            }
            None => (new_file_mode(rel, &planned.file), nearest_owner(root, rel)),
        };
        let new = staging.new.join(rel);
        make_dirs_in(&staging.dir, &new)?;
        make_dirs_in(&staging.dir, &staging.old.join(rel))?;
        let mut entry = zip
            .by_index(planned.file.index)
            .map_err(|source| Error::Zip {
                path: plan.archive.path.clone(),
                source,
            })?;
        extract(&mut entry, &new, mode, owner, &planned.file)?;
        fault_point("extracted", journal.files.len() + 1);
        journal.files.push(JournalFile {
            rel: rel.clone(),
            had_old: target.is_some(),
        });
        for dir in missing_dirs(root, rel) {
            if !journal.dirs.contains(&dir) {
                journal.dirs.push(dir);
            }
        }
    }
    // 2. The journal: from here on, a stop is rolled back.
    let encoded = serde_json::to_vec(&journal)
        .map_err(|e| Error::io("write", staging.journal(), io::Error::other(e)))?;
    hermes_home::atomic::write_atomic(&staging.journal(), &encoded, 0o600)?;
    fault_point("journal", 0);
    // 3. Directories, then the swaps (renames on one file system: no space needed).
    for dir in &journal.dirs {
        let path = root.join(dir);
        let parent = crate::create::parent_of(&path);
        let meta = fs::metadata(parent).map_err(|e| Error::io("inspect", parent, e))?;
        fs::DirBuilder::new()
            .mode(meta.mode() & 0o7777)
            .create(&path)
            .map_err(|e| Error::io("create", &path, e))?;
        give_to(&path, Some((meta.uid(), meta.gid())))?;
    }
    for (i, f) in journal.files.iter().enumerate() {
        // Checked again right before the swap: a directory swapped for a link since staging
        // must not take the file elsewhere.
        check_journal_path(root, &f.rel)?;
        let target = root.join(&f.rel);
        if f.had_old {
            let old = staging.old.join(&f.rel);
            fs::rename(&target, &old).map_err(|e| Error::io("move aside", &target, e))?;
            fault_point("aside", i + 1);
        }
        let new = staging.new.join(&f.rel);
        fs::rename(&new, &target).map_err(|e| Error::io("move into place", &target, e))?;
        fault_point("swapped", i + 1);
    }
    let touched: BTreeSet<PathBuf> = journal
        .files
        .iter()
        .map(|f| crate::create::parent_of(&root.join(&f.rel)).to_path_buf())
        .collect();
    for dir in touched {
        sync_dir(&dir);
    }
    // 4. Done: from here on, a stop finishes instead of rolling back.
    hermes_home::atomic::write_atomic(&staging.dir.join("done"), b"", 0o600)?;
    fault_point("done", 0);
    Ok(())
}

/// The variable that names a point where a restore kills itself (module doc).
pub const FAULT_VAR: &str = "HERMES_BACKUP_FAULT";

/// SIGKILLs this process when [`FAULT_VAR`] is `<point>:<n>` (module doc): the way the tests
/// stop a restore between any two of its steps, as a kill -9 or a power cut would.
fn fault_point(point: &str, n: usize) {
    if std::env::var(FAULT_VAR).is_ok_and(|v| v == format!("{point}:{n}")) {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
}

/// Extracts one entry to `to`, checking its SHA-256 against the one `verify` read.
fn extract(
    entry: &mut impl Read,
    to: &Path,
    mode: u32,
    owner: Option<(u32, u32)>,
    file: &ArchiveFile,
) -> Result<(), Error> {
    let mut out = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(to)
        .map_err(|e| Error::io("write", to, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    // No further than the size verified: an entry that grew since is refused by its hash.
    let mut entry = entry.take(file.size.saturating_add(1));
    loop {
        let n = match entry.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("read the archive's", &file.rel, e)),
        };
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])
            .map_err(|e| Error::io("write", to, e))?;
    }
    if crate::manifest::hex(&hasher.finalize()) != file.sha256 {
        return Err(Error::Verification {
            path: to.to_path_buf(),
            problems: vec![format!("{}: changed since it was verified", file.rel)],
        });
    }
    out.sync_all().map_err(|e| Error::io("write", to, e))?;
    // Through the descriptor, never the path: the staging directory is on the volume.
    out.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))
        .map_err(|e| Error::io("set the mode of", to, e))?;
    if let Some((uid, gid)) = owner
        && nix::unistd::geteuid().is_root()
    {
        std::os::unix::fs::fchown(&out, Some(uid), Some(gid))
            .map_err(|e| Error::io("chown", to, e))?;
    }
    Ok(())
}

/// The mode of a file the volume does not have yet (module doc).
fn new_file_mode(rel: &str, file: &ArchiveFile) -> u32 {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let within = select::split_profile(rel).1;
    let from_archive = file.mode.map_or(0o644, |m| m & 0o755) | 0o600;
    if file.database || [".env", "auth.json"].contains(&name) {
        0o600
    } else if within == hermes_home::layout::CONFIG_FILE {
        from_archive & 0o640
    } else {
        from_archive
    }
}

/// `chown`s `path` when root restores and an owner is given.
fn give_to(path: &Path, owner: Option<(u32, u32)>) -> Result<(), Error> {
    let Some((uid, gid)) = owner else {
        return Ok(());
    };
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).map_err(|e| Error::io("chown", path, e))
}

/// The owner of the nearest directory of the volume above `rel` that exists.
fn nearest_owner(root: &Path, rel: &str) -> Option<(u32, u32)> {
    let mut dir = root.join(rel);
    while dir.pop() {
        if let Ok(meta) = fs::metadata(&dir) {
            return Some((meta.uid(), meta.gid()));
        }
        if dir == root {
            break;
        }
    }
    None
}

/// The directories above `rel` the volume lacks, parents first.
fn missing_dirs(root: &Path, rel: &str) -> Vec<String> {
    let mut missing = Vec::new();
    let mut at = String::new();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if !at.is_empty() {
            at.push('/');
        }
        at.push_str(part);
        if fs::symlink_metadata(root.join(&at)).is_err() {
            missing.push(at.clone());
        }
    }
    missing
}

/// Where `rel` goes on the volume, if it is a regular file there now (`None`: nothing there).
///
/// # Errors
/// [`Error::UnsafeTarget`] when a directory above it is a symlink or not a directory, or the
/// target itself is a symlink or not a regular file: a restore writes inside the volume only,
/// whatever was planted there.
fn check_target(root: &Path, rel: &str) -> Result<Option<PathBuf>, Error> {
    let unsafe_target = |why: String| Error::UnsafeTarget {
        rel: rel.to_owned(),
        why,
    };
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let meta = match fs::symlink_metadata(&at) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("inspect", &at, e)),
        };
        let last = i + 1 == parts.len();
        if meta.file_type().is_symlink() {
            return Err(unsafe_target(format!("`{}` is a symlink", at.display())));
        }
        if !last && !meta.is_dir() {
            return Err(unsafe_target(format!(
                "`{}` is not a directory",
                at.display()
            )));
        }
        if last && !meta.is_file() {
            return Err(unsafe_target(format!(
                "`{}` is not a regular file",
                at.display()
            )));
        }
    }
    Ok(Some(at))
}

/// A journal's path `rel` is a plain relative path (as [`select::archive_path`] writes it)
/// whose directories on the volume, where they exist, are real directories.
///
/// # Errors
/// [`Error::UnsafeTarget`] otherwise: the journal was not written by a restore.
fn check_journal_path(root: &Path, rel: &str) -> Result<(), Error> {
    let unsafe_target = |why: String| Error::UnsafeTarget {
        rel: rel.to_owned(),
        why,
    };
    if select::archive_path(rel).as_deref() != Ok(rel) {
        return Err(unsafe_target(
            "the journal names a path outside the volume".into(),
        ));
    }
    let mut at = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        at.push(part);
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(unsafe_target(format!(
                    "`{}` is not a directory",
                    at.display()
                )));
            }
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

fn sha256_of(path: &Path) -> Result<String, Error> {
    let mut file = File::open(path).map_err(|e| Error::io("read", path, e))?;
    let mut hasher = Sha256::new();
    io::copy(&mut file, &mut hasher).map_err(|e| Error::io("read", path, e))?;
    Ok(crate::manifest::hex(&hasher.finalize()))
}

/// Makes the directories above `path` inside the staging directory `staging` (mode 0700).
fn make_dirs_in(staging: &Path, path: &Path) -> Result<(), Error> {
    let parent = crate::create::parent_of(path);
    if parent.starts_with(staging) {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| Error::io("create", parent, e))?;
    }
    Ok(())
}

/// The staging directory of one restore.
struct Staging {
    dir: PathBuf,
    new: PathBuf,
    old: PathBuf,
}

impl Staging {
    fn create(root: &Path) -> Result<Staging, Error> {
        let dir = root.join(format!(
            "{RESTORE_STAGING_PREFIX}{}-{}",
            hermes_home::time::compact_utc_now(),
            std::process::id()
        ));
        for d in [&dir, &dir.join("new"), &dir.join("old")] {
            fs::DirBuilder::new()
                .mode(0o700)
                .create(d)
                .map_err(|e| Error::io("create", d, e))?;
        }
        Ok(Staging {
            new: dir.join("new"),
            old: dir.join("old"),
            dir,
        })
    }

    fn journal(&self) -> PathBuf {
        self.dir.join("journal.json")
    }

    /// Removes the staging directory of a finished restore (the old files with it).
    fn finish(self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// What [`recover`] found a restore had got to when it stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupted {
    /// Still staging: the volume had not been touched; the staging was removed.
    Staging,
    /// Swapping: the volume was rolled back to what it was before.
    RolledBack,
    /// Finished (`done` written): only its staging directory was left, and removed.
    Finished,
}

/// One interrupted restore [`recover`] dealt with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    /// The staging directory.
    pub staging: PathBuf,
    /// How far it had got.
    pub state: Interrupted,
}

/// Rolls back (or finishes cleaning up) every restore a kill or power cut interrupted on the
/// volume at `root`. Returns at once, doing nothing, while another backup or restore runs.
///
/// # Errors
/// [`Error::Rollback`] when a staging directory cannot be rolled back.
pub fn recover(root: &Path) -> Result<Vec<Recovered>, Error> {
    let _on_volume = crate::as_owner_of(root)?;
    match VolumeLock::acquire(root) {
        Ok(_lock) => recover_locked(root),
        Err(Error::Busy { .. }) => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

fn recover_locked(root: &Path) -> Result<Vec<Recovered>, Error> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(root) else {
        return Ok(found);
    };
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .starts_with(RESTORE_STAGING_PREFIX)
        {
            continue;
        }
        // A link planted under that name is no restore's staging: removed, never followed.
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = fs::remove_file(entry.path());
            continue;
        }
        let staging = entry.path();
        let state = if staging.join("done").exists() {
            Interrupted::Finished
        } else if staging.join("journal.json").exists() {
            Interrupted::RolledBack
        } else {
            Interrupted::Staging
        };
        roll_back(root, &staging).map_err(|e| Error::Rollback {
            staging: staging.clone(),
            source: Box::new(e),
        })?;
        found.push(Recovered { staging, state });
    }
    Ok(found)
}

/// Puts the volume back as it was before the restore staged in `staging` (module doc); a
/// finished restore's staging is only removed. Safe to run again after being interrupted.
fn roll_back(root: &Path, staging: &Path) -> Result<(), Error> {
    let journal_path = staging.join("journal.json");
    if !staging.join("done").exists()
        && let Ok(text) = fs::read(&journal_path)
    {
        let journal: Journal = serde_json::from_slice(&text)
            .map_err(|e| Error::io("read", &journal_path, io::Error::other(e)))?;
        // The staging directory is on the volume, which a less privileged user can write, and
        // the boot rolls back as root: a journal is trusted for paths inside the volume only,
        // through no symlink, or not at all.
        for rel in journal
            .files
            .iter()
            .map(|f| f.rel.as_str())
            .chain(journal.dirs.iter().map(String::as_str))
        {
            check_journal_path(root, rel)?;
        }
        for f in journal.files.iter().rev() {
            let target = root.join(&f.rel);
            let old = staging.join("old").join(&f.rel);
            let new = staging.join("new").join(&f.rel);
            if f.had_old {
                if fs::symlink_metadata(&old).is_ok() {
                    fs::rename(&old, &target).map_err(|e| Error::io("move back", &target, e))?;
                }
            } else if fs::symlink_metadata(&new).is_err() {
                match fs::remove_file(&target) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(Error::io("remove", &target, e));
                    }
                    _ => {}
                }
            }
        }
        for dir in journal.dirs.iter().rev() {
            // Only if empty: anything else in it is not the restore's.
            let _ = fs::remove_dir(root.join(dir));
        }
        sync_dir(root);
    }
    fs::remove_dir_all(staging).map_err(|e| Error::io("remove", staging, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// A roll-back that was itself interrupted (one file already moved back) finishes the job
    /// when run again: every file as before, the new ones and the directory made for them gone.
    #[test]
    fn a_roll_back_interrupted_midway_finishes_when_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let staging = root.join(".restore-x-1");
        // Volume before: a.txt = "old a", b.txt = "old b"; the restore adds new/c.txt.
        // State after the kill: a.txt swapped (old in old/), b.txt moved aside and not yet
        // replaced, new/c.txt moved in; then a first roll-back moved b.txt back and died.
        write(&root.join("a.txt"), "new a");
        write(&staging.join("old/a.txt"), "old a");
        write(&root.join("b.txt"), "old b");
        write(&staging.join("new/b.txt"), "new b");
        write(&root.join("new/c.txt"), "new c");
        let journal = Journal {
            dirs: vec!["new".into()],
            files: vec![
                JournalFile {
                    rel: "a.txt".into(),
                    had_old: true,
                },
                JournalFile {
                    rel: "b.txt".into(),
                    had_old: true,
                },
                JournalFile {
                    rel: "new/c.txt".into(),
                    had_old: false,
                },
            ],
        };
        fs::write(
            staging.join("journal.json"),
            serde_json::to_vec(&journal).unwrap(),
        )
        .unwrap();
        let found = recover(root).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].state, Interrupted::RolledBack);
        assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "old a");
        assert_eq!(fs::read_to_string(root.join("b.txt")).unwrap(), "old b");
        assert!(
            !root.join("new").exists(),
            "the file and the directory made for it are gone"
        );
        assert!(!staging.exists());
        assert!(recover(root).unwrap().is_empty(), "nothing left to recover");
    }

    /// A journal planted on the volume (which a less privileged user can write; the boot rolls
    /// back as root) is never followed outside it, nor through a symlink.
    #[test]
    fn a_planted_journal_never_reaches_outside_the_volume() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("volume");
        let outside = dir.path().join("outside.txt");
        fs::write(&outside, "keep me").unwrap();
        fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
        fs::write(dir.path().join("elsewhere/x.txt"), "keep me too").unwrap();
        fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join("linked")).unwrap();
        for rel in ["../outside.txt", "linked/x.txt"] {
            let staging = root.join(".restore-z-3");
            let journal = Journal {
                dirs: vec![],
                files: vec![JournalFile {
                    rel: rel.into(),
                    had_old: false,
                }],
            };
            write(
                &staging.join("journal.json"),
                &serde_json::to_string(&journal).unwrap(),
            );
            let err = recover(&root).unwrap_err();
            assert!(matches!(err, Error::Rollback { .. }), "{rel}: {err:?}");
            fs::remove_dir_all(&staging).unwrap();
        }
        assert_eq!(fs::read_to_string(&outside).unwrap(), "keep me");
        assert_eq!(
            fs::read_to_string(dir.path().join("elsewhere/x.txt")).unwrap(),
            "keep me too"
        );
        // A staging "directory" that is a link is removed, not followed.
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), root.join(".restore-l-4"))
            .unwrap();
        let found = recover(&root).unwrap();
        assert!(found.is_empty(), "{found:?}");
        assert!(dir.path().join("elsewhere/x.txt").exists() && !root.join(".restore-l-4").exists());
    }

    /// While another backup or restore holds the volume, recovery leaves its staging alone.
    #[test]
    fn recovery_never_touches_a_restore_that_is_still_running() {
        let dir = tempfile::tempdir().unwrap();
        let staging = dir.path().join(".restore-y-2");
        write(&staging.join("new/x.txt"), "x");
        let _running = VolumeLock::acquire(dir.path()).unwrap();
        // Another open file description of the same directory: a second process's view.
        assert!(recover(dir.path()).unwrap().is_empty());
        assert!(staging.exists());
    }
}
