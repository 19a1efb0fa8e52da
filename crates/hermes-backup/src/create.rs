//! `hermes backup create`: a zip of the volume taken while everything runs.
//!
//! * Every SQLite database goes through SQLite's online backup API in one step, which copies
//!   one consistent snapshot (in WAL mode writers go on meanwhile; in rollback mode they wait
//!   for the copy, up to their busy timeout). The copy is staged in `.backup-tmp-<pid>/` at the
//!   top of the volume — the file system that already holds the database, never a small
//!   `/tmp` (upstream #35376) — and removed once it is in the archive.
//! * Every other file is read under the lock its writers hold ([`writers_lock`]), when they
//!   have ever taken one, so it is read between two of their read-modify-write cycles.
//! * A file that cannot be included fails the backup, naming it; nothing is ever skipped
//!   quietly. Each file is staged before its entry starts (a database's snapshot, a small file
//!   in memory, a larger one copied beside the snapshots), so its checksum is known when the
//!   entry's comment is written and the entry holds exactly the bytes hashed. The manifest
//!   ([`crate::manifest`]) is in the zip's comments, written with its directory at the end, so an
//!   archive that has one is whole.
//! * An archive file is written as `.<name>.<pid>.partial` beside its final name, mode 0600,
//!   fsynced, then renamed: a crash or a full disk leaves no archive under the final name.
//!
//! One backup or restore runs on a volume at a time: each holds an exclusive `flock` on the
//! volume's root directory ([`VolumeLock`]), which creates no file on the volume.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hermes_home::layout::BACKUP_SCRATCH_PREFIX;
use hermes_home::lock::{with_locked, writers_lock};
use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;

use crate::Error;
use crate::manifest::{self, FORMAT, FileEntry, Manifest};
use crate::select::{self, Scope, Selected};

/// What the archive says made it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// This build, as `hermes --version` names it.
    pub build: String,
    /// The installed agent's version, if there is one.
    pub agent_version: Option<String>,
}

/// How the archive's entries are compressed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Compression {
    /// Databases stored as they are, every other file deflated: a backup takes about the time
    /// of SQLite's own backup, for an archive about as large as the databases (they are most
    /// of a volume). The default: a backup fast enough to take often.
    #[default]
    Fast,
    /// Databases deflated too (level 6): about half the archive, about eight times the time.
    Small,
}

/// How far a backup has got, after each file.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// Files in the archive so far.
    pub files_done: usize,
    /// Files the walk found.
    pub files_total: usize,
    /// Bytes read so far.
    pub bytes_done: u64,
    /// Bytes the walk found.
    pub bytes_total: u64,
    /// The file just added.
    pub current: &'a str,
}

/// What a finished backup holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Where it was written (`None`: to the writer given).
    pub path: Option<PathBuf>,
    /// Files in it.
    pub files: usize,
    /// Of which SQLite databases.
    pub databases: usize,
    /// Their bytes before compression.
    pub bytes: u64,
    /// The archive's size.
    pub archive_bytes: u64,
    /// Its manifest.
    pub manifest: Manifest,
}

/// The first bytes of every SQLite 3 database file.
pub(crate) const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// How long the online backup waits for a database a writer has locked (rollback mode).
const DATABASE_WAIT: Duration = Duration::from_secs(30);

/// Writes a backup of `root` in `scope` to the new file `output` (module doc).
///
/// # Errors
/// [`Error::OutputExists`], [`Error::Busy`], or the first file that could not be included;
/// nothing is left under `output` then.
pub fn create_file(
    root: &Path,
    scope: &Scope,
    identity: &Identity,
    compression: Compression,
    output: &Path,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<Summary, Error> {
    // The archive's directory as its owner (root's own directory as root), the volume as its.
    let _in_output_dir = crate::as_owner_of(parent_of(output))?;
    if fs::symlink_metadata(output).is_ok() {
        return Err(Error::OutputExists {
            path: output.to_path_buf(),
        });
    }
    let _lock = VolumeLock::acquire(root)?;
    let partial = PartialFile::create(output)?;
    let mut summary = {
        let _on_volume = crate::as_owner_of(root)?;
        write_archive(
            root,
            scope,
            identity,
            compression,
            BufWriter::new(&partial.file),
            progress,
        )?
    };
    summary.archive_bytes = partial.commit(output)?;
    summary.path = Some(output.to_path_buf());
    Ok(summary)
}

/// Writes a backup of `root` in `scope` to `out` (standard output, an HTTP response).
///
/// # Errors
/// As [`create_file`]; what was written to `out` by then is not a whole archive (it has no
/// manifest and no zip directory).
pub fn create_to(
    root: &Path,
    scope: &Scope,
    identity: &Identity,
    compression: Compression,
    out: impl Write,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<Summary, Error> {
    let _on_volume = crate::as_owner_of(root)?;
    let _lock = VolumeLock::acquire(root)?;
    write_archive(root, scope, identity, compression, out, progress)
}

fn write_archive(
    root: &Path,
    scope: &Scope,
    identity: &Identity,
    compression: Compression,
    out: impl Write,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<Summary, Error> {
    let created = hermes_home::time::iso_utc_now();
    let selected = select::walk(root, scope)?;
    let bytes_total = selected.iter().map(|s| s.size).sum();
    let scratch = Scratch::new(root)?;
    let counted = CountingWriter::new(out);
    let mut zip = zip::ZipWriter::new_stream(counted);
    let mut files = Vec::with_capacity(selected.len());
    let mut config_versions = std::collections::BTreeMap::new();
    let mut bytes_done = 0;
    for (i, file) in selected.iter().enumerate() {
        let entry = match add_file(&mut zip, file, &scratch, compression) {
            Ok(entry) => entry,
            // Gone since the walk listed it (a writer's temporary file renamed into place, a
            // file its program deleted): not part of the volume any more, so not missing.
            // Every open happens before the entry is started, so the archive is still whole.
            Err(e) if vanished(&e, &file.path) => continue,
            Err(e @ Error::NotIncluded { .. }) => return Err(e),
            Err(e) => {
                return Err(Error::NotIncluded {
                    path: file.path.clone(),
                    source: Box::new(e),
                });
            }
        };
        if let (profile, "config.yaml") = select::split_profile(&file.rel)
            && let Ok(Some(version)) = hermes_home::schema::stamp_of(&file.path)
        {
            config_versions.insert(
                profile.unwrap_or(hermes_home::DEFAULT_PROFILE).to_owned(),
                version,
            );
        }
        bytes_done += entry.size;
        files.push(entry);
        progress(&Progress {
            files_done: i + 1,
            files_total: selected.len(),
            bytes_done,
            bytes_total,
            current: &file.rel,
        });
    }
    let manifest = Manifest {
        format: FORMAT.to_owned(),
        created,
        build: identity.build.clone(),
        agent_version: identity.agent_version.clone(),
        scope: scope.describe(),
        config_versions,
        files,
    };
    let zip_err = |source| Error::Zip {
        path: PathBuf::from("(output)"),
        source,
    };
    let header = serde_json::to_string(&manifest.header())
        .map_err(|e| Error::io("encode", "(the archive's header)", io::Error::other(e)))?;
    zip.set_comment(header).map_err(zip_err)?;
    let mut counted = zip.finish().map_err(zip_err)?.into_inner();
    counted
        .flush()
        .map_err(|e| Error::io("write", "(output)", e))?;
    Ok(Summary {
        path: None,
        files: manifest.files.len(),
        databases: manifest.files.iter().filter(|f| f.database).count(),
        bytes: bytes_done,
        archive_bytes: counted.written,
        manifest,
    })
}

/// Whether `e` is the file at `path` having been removed since the walk listed it.
fn vanished(e: &Error, path: &Path) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
        && fs::symlink_metadata(path).is_err()
}

/// Adds one file to the archive: a database through a snapshot, anything else read under its
/// writers' lock.
fn add_file<W: Write>(
    zip: &mut zip::ZipWriter<zip::write::StreamWriter<W>>,
    file: &Selected,
    scratch: &Scratch,
    compression: Compression,
) -> Result<FileEntry, Error> {
    if is_database(&file.path)? {
        let snapshot = scratch.snapshot(&file.path)?;
        let staged = stage(
            &snapshot,
            &file.path,
            scratch,
            Some(ScratchFile(snapshot.clone())),
        )?;
        let deflate = compression == Compression::Small;
        return write_entry(zip, &file.rel, staged, &file.path, true, deflate);
    }
    let lock = writers_lock(&file.path);
    let staged = if fs::symlink_metadata(&lock).is_ok_and(|m| m.is_file()) {
        let mut result = None;
        with_locked(&lock, 0o600, || {
            result = Some(stage(&file.path, &file.path, scratch, None));
            Ok(())
        })?;
        result.unwrap_or_else(|| unreachable_result(&file.path))?
    } else {
        stage(&file.path, &file.path, scratch, None)?
    };
    write_entry(zip, &file.rel, staged, &file.path, false, true)
}

/// `with_locked` ran its cycle or returned an error; this is the other case, which cannot
/// happen, as an error rather than a panic.
fn unreachable_result(path: &Path) -> Result<Staged, Error> {
    Err(Error::io(
        "read",
        path,
        io::Error::other("the locked read did not run"),
    ))
}

/// Files up to this size are staged in memory; larger ones are copied beside the snapshots.
const STAGE_IN_MEMORY: u64 = 8 << 20;

/// A file's bytes as they go into the archive, read once and hashed.
struct Staged {
    body: Body,
    size: u64,
    sha256: String,
}

enum Body {
    Memory(Vec<u8>),
    File(ScratchFile),
}

/// A file in the scratch directory, removed when dropped.
struct ScratchFile(PathBuf);

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Reads `source` (the file, or its snapshot `owned`, which is then used as it is) once,
/// hashing it: into memory when small, else into a scratch copy. A live file is read no
/// further than its length when the read began (a log a writer keeps appending to can neither
/// hold the backup nor grow its memory without end). Errors name `original`.
fn stage(
    source: &Path,
    original: &Path,
    scratch: &Scratch,
    owned: Option<ScratchFile>,
) -> Result<Staged, Error> {
    let input = open_no_follow(source).map_err(|e| Error::io("read", original, e))?;
    let length = input
        .metadata()
        .map_err(|e| Error::io("inspect", source, e))?
        .len();
    let mut hasher = Sha256::new();
    let mut input = input.take(length);
    let (body, size) = if let Some(copy) = owned {
        let size = copy_all(&mut input, &mut HashingWriter(&mut hasher, io::sink()))
            .map_err(|e| Error::io("read", original, e))?;
        (Body::File(copy), size)
    } else if length <= STAGE_IN_MEMORY {
        let mut bytes = Vec::with_capacity(length as usize);
        input
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read", original, e))?;
        hasher.update(&bytes);
        let size = bytes.len() as u64;
        (Body::Memory(bytes), size)
    } else {
        let copy = ScratchFile(scratch.new_path()?);
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&copy.0)
            .map_err(|e| Error::io("create", &copy.0, e))?;
        let size = copy_all(&mut input, &mut HashingWriter(&mut hasher, &mut out))
            .map_err(|e| Error::io("copy", original, e))?;
        (Body::File(copy), size)
    };
    Ok(Staged {
        body,
        size,
        sha256: manifest::hex(&hasher.finalize()),
    })
}

/// `io::copy` in 1 MiB reads: a database is gigabytes, and 8 KiB reads cost a syscall each.
fn copy_all(from: &mut impl Read, to: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
}

/// Passes writes to `W`, hashing them.
struct HashingWriter<'h, W>(&'h mut Sha256, W);

impl<W: Write> Write for HashingWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.1.write(buf)?;
        self.0.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.1.flush()
    }
}

/// Writes `staged` into the archive as `rel` (deflated or stored), with the mode and time of
/// `original` and its checksum in the entry's comment.
fn write_entry<W: Write>(
    zip: &mut zip::ZipWriter<zip::write::StreamWriter<W>>,
    rel: &str,
    staged: Staged,
    original: &Path,
    database: bool,
    deflate: bool,
) -> Result<FileEntry, Error> {
    let meta = fs::metadata(original).map_err(|e| Error::io("inspect", original, e))?;
    let opts = options(
        meta.mode() & 0o777,
        Some(meta.mtime()),
        staged.size,
        deflate,
    )
    .into_full_options()
    .with_file_comment(manifest::entry_comment(&staged.sha256, database));
    zip.start_file(rel, opts).map_err(|source| Error::Zip {
        path: PathBuf::from("(output)"),
        source,
    })?;
    let written = match &staged.body {
        Body::Memory(bytes) => zip.write_all(bytes),
        Body::File(copy) => File::open(&copy.0)
            .and_then(|mut f| copy_all(&mut f, zip))
            .map(|_| ()),
    };
    written.map_err(|e| Error::io("write", "(output)", e))?;
    Ok(FileEntry {
        path: rel.to_owned(),
        size: staged.size,
        sha256: staged.sha256,
        database,
    })
}

/// Zip options of one entry: deflated (level 6) or stored, the file's mode and time, ZIP64 when
/// it needs it.
fn options(mode: u32, mtime: Option<i64>, size: u64, deflate: bool) -> SimpleFileOptions {
    let method = if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    };
    let mut opts = SimpleFileOptions::default()
        .compression_method(method)
        .compression_level(deflate.then_some(6))
        .unix_permissions(mode)
        .large_file(size > 0xFFFF_FFFF);
    if let Some(time) = mtime.and_then(zip_time) {
        opts = opts.last_modified_time(time);
    }
    opts
}

fn zip_time(unix: i64) -> Option<zip::DateTime> {
    let t = time::OffsetDateTime::from_unix_timestamp(unix).ok()?;
    zip::DateTime::from_date_and_time(
        u16::try_from(t.year()).ok()?,
        t.month().into(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
    )
    .ok()
}

/// Opens `path` for reading without following a symlink in its last component: a file swapped
/// for a link after the walk (by a user who can write the volume, while root backs it up) is
/// refused, not read through.
fn open_no_follow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
}

/// Whether `path` is an SQLite database (by its header, whatever its name).
pub(crate) fn is_database(path: &Path) -> Result<bool, Error> {
    let mut head = [0u8; 16];
    let mut file = open_no_follow(path).map_err(|e| Error::io("read", path, e))?;
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read", path, e)),
        }
    }
    Ok(got == head.len() && &head == SQLITE_MAGIC)
}

/// `.backup-tmp-<pid>/` at the top of the volume, where database snapshots and large files are
/// staged; made when the first file needs it, removed (with anything in it) when dropped.
struct Scratch {
    dir: PathBuf,
    made: std::cell::Cell<bool>,
    count: std::cell::Cell<u32>,
}

impl Scratch {
    fn new(root: &Path) -> Result<Scratch, Error> {
        // Under the volume lock, so any scratch directory left is a killed backup's.
        if let Ok(entries) = fs::read_dir(root) {
            for entry in entries.flatten() {
                if entry
                    .file_name()
                    .to_string_lossy()
                    .starts_with(BACKUP_SCRATCH_PREFIX)
                {
                    let _ = fs::remove_dir_all(entry.path());
                }
            }
        }
        Ok(Scratch {
            dir: root.join(format!("{BACKUP_SCRATCH_PREFIX}{}", std::process::id())),
            made: false.into(),
            count: 0.into(),
        })
    }

    /// A new name in the directory, made on first use.
    fn new_path(&self) -> Result<PathBuf, Error> {
        if !self.made.get() {
            fs::DirBuilder::new()
                .mode(0o700)
                .create(&self.dir)
                .map_err(|e| Error::io("create", &self.dir, e))?;
            self.made.set(true);
        }
        self.count.set(self.count.get() + 1);
        Ok(self.dir.join(format!("{}.copy", self.count.get())))
    }

    /// A consistent copy of the database at `path`, through SQLite's online backup API.
    fn snapshot(&self, path: &Path) -> Result<PathBuf, Error> {
        use rusqlite::{Connection, OpenFlags};
        let copy = self.new_path()?;
        let db_err = |source| Error::Database {
            path: path.to_path_buf(),
            source,
        };
        // Read-write (never create) where allowed, so the last connection to close removes the
        // `-wal` and `-shm` files it made, as every writer's does; read-only otherwise.
        let flags = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let src = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_READ_WRITE)
            .or_else(|_| {
                Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_READ_ONLY)
            })
            .map_err(db_err)?;
        src.busy_timeout(DATABASE_WAIT).map_err(db_err)?;
        let mut dst = Connection::open(&copy).map_err(db_err)?;
        // A scratch copy, removed once archived: never worth an fsync (of a gigabyte, seconds)
        // nor a journal. The archive itself is fsynced before it gets its name.
        dst.execute_batch("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;")
            .map_err(db_err)?;
        {
            let backup = rusqlite::backup::Backup::new(&src, &mut dst).map_err(db_err)?;
            let deadline = Instant::now() + DATABASE_WAIT;
            loop {
                // All pages in one step: one read transaction, one consistent snapshot (a
                // step-wise copy restarts whenever another connection writes).
                match backup.step(-1).map_err(db_err)? {
                    rusqlite::backup::StepResult::Done => break,
                    rusqlite::backup::StepResult::More => {}
                    _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                    _ => {
                        return Err(db_err(rusqlite::Error::SqliteFailure(
                            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                            Some(format!("still locked after {}s", DATABASE_WAIT.as_secs())),
                        )));
                    }
                }
            }
        }
        dst.close().map_err(|(_, e)| db_err(e))?;
        drop(src);
        Ok(copy)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.made.get() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// The exclusive `flock` on the volume's root directory that one backup or restore holds.
pub(crate) struct VolumeLock {
    _dir: File,
}

impl VolumeLock {
    /// Takes the lock, or [`Error::Busy`] at once when another backup or restore holds it.
    pub(crate) fn acquire(root: &Path) -> Result<VolumeLock, Error> {
        let dir = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_DIRECTORY)
            .open(root)
            .map_err(|e| Error::io("open", root, e))?;
        match dir.try_lock() {
            Ok(()) => Ok(VolumeLock { _dir: dir }),
            Err(fs::TryLockError::WouldBlock) => Err(Error::Busy {
                root: root.to_path_buf(),
            }),
            Err(fs::TryLockError::Error(e)) => Err(Error::io("lock", root, e)),
        }
    }
}

/// The archive being written: `.<name>.<pid>.partial` beside `output`, mode 0600.
struct PartialFile {
    path: PathBuf,
    file: File,
    committed: bool,
}

impl PartialFile {
    fn create(output: &Path) -> Result<PartialFile, Error> {
        let dir = parent_of(output);
        let name = output
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "backup.zip".into());
        remove_stale_partials(dir, &name);
        let path = dir.join(format!(".{name}.{}.partial", std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| Error::io("create", &path, e))?;
        Ok(PartialFile {
            path,
            file,
            committed: false,
        })
    }

    /// Flushes the archive to disk and gives it its final name; returns its size.
    fn commit(mut self, output: &Path) -> Result<u64, Error> {
        self.file
            .sync_all()
            .map_err(|e| Error::io("write", &self.path, e))?;
        let size = self
            .file
            .metadata()
            .map_err(|e| Error::io("inspect", &self.path, e))?
            .len();
        // A name taken meanwhile is not replaced: link fails on an existing name, rename would not.
        fs::hard_link(&self.path, output).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => Error::OutputExists {
                path: output.to_path_buf(),
            },
            _ => Error::io("write", output, e),
        })?;
        let _ = fs::remove_file(&self.path);
        self.committed = true;
        sync_dir(parent_of(output));
        Ok(size)
    }
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// `.<name>.<pid>.partial` files of `name` whose process is gone (a killed backup's).
fn remove_stale_partials(dir: &Path, name: &str) {
    let prefix = format!(".{name}.");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = file
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(".partial"))
        else {
            continue;
        };
        let alive = pid
            .parse::<i32>()
            .is_ok_and(|pid| nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok());
        if !alive {
            let _ = fs::remove_file(entry.path());
        }
    }
}

pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// fsyncs a directory so a rename in it survives a power cut (best effort: some file systems
/// cannot).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Counts what goes through to `inner` (the archive's size when writing to a pipe).
struct CountingWriter<W> {
    inner: W,
    written: u64,
}

impl<W> CountingWriter<W> {
    fn new(inner: W) -> Self {
        CountingWriter { inner, written: 0 }
    }
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file the walk listed and its writer then renamed away is skipped, not a failure; one
    /// that is there but unreadable is never "vanished".
    #[test]
    fn a_file_gone_since_the_walk_is_skipped_and_an_unreadable_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let scratch = Scratch::new(dir.path()).unwrap();
        let mut zip = zip::ZipWriter::new_stream(Vec::new());
        let gone = Selected {
            rel: ".config.yaml.tmp.1.2".into(),
            path: dir.path().join(".config.yaml.tmp.1.2"),
            size: 10,
        };
        let err = add_file(&mut zip, &gone, &scratch, Compression::Fast).unwrap_err();
        assert!(vanished(&err, &gone.path), "{err:?}");
        let there = dir.path().join("there");
        fs::write(&there, "x").unwrap();
        let not_found_elsewhere =
            Error::io("read", &there, io::Error::from(io::ErrorKind::NotFound));
        assert!(
            !vanished(&not_found_elsewhere, &there),
            "the file is still there"
        );
        let denied = Error::io(
            "read",
            &gone.path,
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        assert!(!vanished(&denied, &gone.path));
    }
}
