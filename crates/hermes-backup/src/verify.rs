//! `hermes backup verify`: is an archive whole, and are its databases sound?
//!
//! Every entry is read to its end (which checks its CRC), its SHA-256 compared with the
//! manifest's (its entry comment, [`crate::manifest`]), every database extracted to a scratch
//! file and run through `PRAGMA integrity_check`, and the manifest's list compared with the
//! archive's. An archive without a manifest (the original's) gets every check but the
//! manifest's.
//!
//! An archive is untrusted input (an upload to the dashboard, a file someone handed over), so
//! what reading it may cost is bounded: an entry is read no further than the size its header
//! declares, an entry that claims more than [`MAX_RATIO`] times its compressed size is refused
//! unread, and a database is copied for its check only when it fits in the scratch file system's
//! free space with [`SCRATCH_RESERVE`] to spare. Copies go to a private directory made for this
//! verification (mode 0700), removed on every way out, SQLite's side files with it.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The most an entry may declare per byte it takes in the archive: deflate itself cannot
/// compress better than about 1032:1, so more is a lie or another method's bomb.
pub const MAX_RATIO: u64 = 1024;
/// Entries declaring less than this are not judged by their ratio (a small file of one repeated
/// byte compresses that well honestly, and costs nothing to read).
const RATIO_FROM: u64 = 1 << 20;
/// What a database's scratch copy leaves free on its file system, for everyone else.
pub const SCRATCH_RESERVE: u64 = 64 << 20;

use crate::Error;
use crate::create::SQLITE_MAGIC;
use crate::manifest::{self, FileEntry, Manifest};
use crate::select;

/// One file of an archive, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveFile {
    /// Its index in the zip.
    pub index: usize,
    /// The volume path it restores to (see [`select::archive_path`]).
    pub rel: String,
    /// Its size.
    pub size: u64,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
    /// Whether it is an SQLite database.
    pub database: bool,
    /// For a sound database, the digest of its schema and rows ([`crate::content::digest`]),
    /// which a restore compares with the volume's copy.
    pub content: Option<String>,
    /// Its mode in the archive, if it has one.
    pub mode: Option<u32>,
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The archive.
    pub path: PathBuf,
    /// Its manifest; `None` for the original's archives.
    pub manifest: Option<Manifest>,
    /// Every file it holds, in archive order (the manifest excluded).
    pub files: Vec<ArchiveFile>,
    /// Entries a restore leaves out, with why (outside the volume in the original's
    /// `_external/`, runtime files).
    pub skipped: Vec<(String, String)>,
    /// What is wrong, one line each; empty when the archive is sound.
    pub problems: Vec<String>,
    /// Each profile's config schema version (`_config_version`) in the archive, read from its
    /// `config.yaml` (an archive of the original's has no manifest to say it).
    pub config_versions: std::collections::BTreeMap<String, u64>,
}

impl Verified {
    /// The newest config schema version in the archive, with its profile.
    pub fn newest_config_version(&self) -> Option<(u64, &str)> {
        self.config_versions
            .iter()
            .map(|(p, v)| (*v, p.as_str()))
            .max_by_key(|(v, _)| *v)
    }
}

impl Verified {
    /// [`Error::Verification`] when there are problems.
    ///
    /// # Errors
    /// The problems, when there are any.
    pub fn ok(self) -> Result<Verified, Error> {
        if self.problems.is_empty() {
            Ok(self)
        } else {
            Err(Error::Verification {
                path: self.path,
                problems: self.problems,
            })
        }
    }
}

/// Reads and checks every entry of the archive at `path` (module doc).
///
/// # Errors
/// Only when the file is not a zip at all; everything else is a problem in [`Verified`].
pub fn verify(
    path: &Path,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Verified, Error> {
    let file = File::open(path).map_err(|e| Error::io("read", path, e))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|source| Error::Zip {
        path: path.to_path_buf(),
        source,
    })?;
    // Everything after the archive is open happens as the owner of the scratch directory.
    let scratch_dir = scratch_dir_for(path);
    let _as_owner = crate::as_owner_of(&scratch_dir)?;
    let scratch = tempfile::Builder::new()
        .prefix(".hermes-verify-")
        .tempdir_in(&scratch_dir)
        .or_else(|_| tempfile::Builder::new().prefix(".hermes-verify-").tempdir())
        .map_err(|e| Error::io("create a scratch directory beside", path, e))?;
    let mut found = Verified {
        path: path.to_path_buf(),
        manifest: None,
        files: Vec::new(),
        skipped: Vec::new(),
        problems: Vec::new(),
        config_versions: Default::default(),
    };
    let header = match manifest::parse_header(zip.comment()) {
        Ok(header) => header,
        Err(problem) => {
            found.problems.push(problem);
            None
        }
    };
    // What the entries' comments list, for an archive whose header says it has a manifest.
    let mut listed = Vec::new();
    let total = zip.len();
    for index in 0..total {
        let mut entry = match zip.by_index(index) {
            Ok(entry) => entry,
            Err(e) => {
                found.problems.push(format!("entry {index}: {e}"));
                continue;
            }
        };
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        if entry.is_dir() {
            continue;
        }
        let rel = match select::archive_path(&name) {
            Ok(rel) => rel,
            Err(why) => {
                found.problems.push(why);
                continue;
            }
        };
        progress(index + 1, total, &rel);
        if header.is_some()
            && let Some((sha256, database)) = manifest::parse_entry_comment(entry.comment())
        {
            listed.push(FileEntry {
                path: rel.clone(),
                size: entry.size(),
                sha256,
                database,
            });
        }
        if rel == manifest::LEGACY_PATH {
            let mut text = Vec::new();
            match entry.read_to_end(&mut text) {
                Ok(_) => match serde_json::from_slice::<Manifest>(&text) {
                    Ok(m) => found.manifest = Some(m),
                    Err(e) => found
                        .problems
                        .push(format!("the manifest cannot be read: {e}")),
                },
                Err(e) => found
                    .problems
                    .push(format!("the manifest cannot be read: {e}")),
            }
            continue;
        }
        if entry.is_symlink() {
            found.skipped.push((rel, "a symlink".into()));
            continue;
        }
        let mode = entry.unix_mode();
        let declared = entry.size();
        let compressed = entry.compressed_size();
        if declared >= RATIO_FROM && declared / compressed.max(1) > MAX_RATIO {
            found.problems.push(format!(
                "{rel}: declares {declared} bytes in {compressed} compressed, more than \
                 {MAX_RATIO}:1; not read"
            ));
            continue;
        }
        match read_entry(&mut entry, declared, scratch.path()) {
            Ok(EntryRead {
                size,
                sha256,
                database,
                integrity,
                content,
            }) => {
                if let Some(problem) = integrity {
                    found.problems.push(format!("{rel}: {problem}"));
                }
                if rel.starts_with("_external/") {
                    found
                        .skipped
                        .push((rel.clone(), "was outside HERMES_HOME".into()));
                } else if select::is_runtime(&rel) {
                    found
                        .skipped
                        .push((rel.clone(), "a runtime file, never restored".into()));
                }
                found.files.push(ArchiveFile {
                    index,
                    rel,
                    size,
                    sha256,
                    database,
                    content,
                    mode,
                });
            }
            Err(e) => found.problems.push(format!(
                "{rel}: cannot be read: {}",
                hermes_errors::describe_io(&e)
            )),
        }
    }
    for f in &found.files {
        if let (profile, hermes_home::layout::CONFIG_FILE) = select::split_profile(&f.rel)
            && let Some(version) = config_version(&mut zip, f)
        {
            let profile = profile.unwrap_or(hermes_home::DEFAULT_PROFILE).to_owned();
            found.config_versions.insert(profile, version);
        }
    }
    if let Some(header) = header {
        if header.files != listed.len() {
            found.problems.push(format!(
                "the archive's header counts {} files, {} entries carry a checksum",
                header.files,
                listed.len()
            ));
        }
        found.manifest = Some(Manifest::from_header(header, listed));
    }
    if let Some(manifest) = &found.manifest {
        compare(manifest, &found.files, &mut found.problems);
    }
    Ok(found)
}

/// The `_config_version` of an archived `config.yaml` (0 when it has none, as the original
/// reads it), `None` when it is not YAML.
fn config_version(zip: &mut zip::ZipArchive<File>, f: &ArchiveFile) -> Option<u64> {
    let mut text = String::new();
    zip.by_index(f.index)
        .ok()?
        .take(16 << 20)
        .read_to_string(&mut text)
        .ok()?;
    let config = hermes_settings::parse_config(Path::new(&f.rel), &text).ok()?;
    Some(hermes_home::schema::stamp_in(&config).unwrap_or(0))
}

/// The manifest's list against the archive's.
fn compare(manifest: &Manifest, files: &[ArchiveFile], problems: &mut Vec<String>) {
    use std::collections::HashMap;
    if ![manifest::FORMAT, manifest::LEGACY_FORMAT].contains(&manifest.format.as_str()) {
        problems.push(format!(
            "the manifest's format is `{}`, this build reads `{}` and `{}`",
            manifest.format,
            manifest::FORMAT,
            manifest::LEGACY_FORMAT
        ));
    }
    let in_archive: HashMap<&str, &ArchiveFile> =
        files.iter().map(|f| (f.rel.as_str(), f)).collect();
    for listed in &manifest.files {
        match in_archive.get(listed.path.as_str()) {
            None => problems.push(format!(
                "{}: in the manifest, not in the archive",
                listed.path
            )),
            Some(f) if f.size != listed.size => problems.push(format!(
                "{}: {} bytes, the manifest says {}",
                listed.path, f.size, listed.size
            )),
            Some(f) if f.sha256 != listed.sha256 => {
                problems.push(format!("{}: sha256 differs from the manifest", listed.path));
            }
            Some(_) => {}
        }
    }
    let listed: std::collections::HashSet<&str> =
        manifest.files.iter().map(|f| f.path.as_str()).collect();
    for f in files.iter() {
        if !listed.contains(f.rel.as_str()) {
            problems.push(format!("{}: in the archive, not in the manifest", f.rel));
        }
    }
}

/// Reads one entry to its end, no further than the `declared` size: size, SHA-256, whether it
/// is a database and, for one, what `integrity_check` says when it is not `ok` (or why it
/// could not be checked) and the digest of what it holds. The copy checked is made in `scratch_dir` and removed here.
fn read_entry(entry: &mut impl Read, declared: u64, scratch_dir: &Path) -> io::Result<EntryRead> {
    let mut entry = entry.take(declared.saturating_add(1));
    let mut unchecked: Option<String> = None;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    let mut head = Vec::with_capacity(16);
    let mut copy: Option<tempfile::NamedTempFile> = None;
    loop {
        let n = match entry.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let chunk = &buf[..n];
        hasher.update(chunk);
        if head.len() < 16 {
            let take = (16 - head.len()).min(chunk.len());
            head.extend_from_slice(&chunk[..take]);
            if head.len() == 16 && head == SQLITE_MAGIC {
                let free = hermes_home::disk::usage(scratch_dir)?.available_bytes;
                if declared.saturating_add(SCRATCH_RESERVE) > free {
                    unchecked = Some(format!(
                        "not checked: a copy of its {} would leave less than {} free in `{}`",
                        hermes_errors::bytes::human(declared),
                        hermes_errors::bytes::human(SCRATCH_RESERVE),
                        scratch_dir.parent().unwrap_or(scratch_dir).display()
                    ));
                } else {
                    let mut file = tempfile::Builder::new()
                        .prefix("db-")
                        .tempfile_in(scratch_dir)?;
                    file.write_all(&head)?;
                    file.write_all(&chunk[take..])?;
                    copy = Some(file);
                }
            }
        } else if let Some(file) = &mut copy {
            file.write_all(chunk)?;
        }
        size += n as u64;
    }
    if size > declared {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it holds more than the {declared} bytes its header declares"),
        ));
    }
    let mut content = None;
    let integrity = match &mut copy {
        Some(file) => {
            file.flush()?;
            let verdict = integrity_check(file.path());
            if verdict.is_none() {
                content = crate::content::digest(file.path()).ok();
            }
            for side in ["-wal", "-shm", "-journal"] {
                let mut p = file.path().as_os_str().to_owned();
                p.push(side);
                let _ = std::fs::remove_file(PathBuf::from(p));
            }
            verdict
        }
        None => unchecked,
    };
    Ok(EntryRead {
        size,
        sha256: manifest::hex(&hasher.finalize()),
        database: copy.is_some(),
        integrity,
        content,
    })
}

/// What [`read_entry`] learns of an entry.
struct EntryRead {
    size: u64,
    sha256: String,
    database: bool,
    /// For a database, what `integrity_check` says when it is not `ok` (or why it could not be
    /// checked).
    integrity: Option<String>,
    /// For a sound database, [`crate::content::digest`].
    content: Option<String>,
}

/// `None` when `PRAGMA integrity_check` says `ok`; what it says otherwise.
pub(crate) fn integrity_check(db: &Path) -> Option<String> {
    let check = || -> rusqlite::Result<Vec<String>> {
        let conn =
            rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE)?;
        let mut stmt = conn.prepare("PRAGMA integrity_check")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect()
    };
    match check() {
        Ok(rows) if rows == ["ok"] => None,
        Ok(rows) => Some(format!("integrity_check: {}", rows.join("; "))),
        Err(e) => Some(format!("not a sound database: {e}")),
    }
}

/// Where databases are extracted to be checked: beside the archive when that directory is
/// writable (it had room for the archive), the system's temporary directory otherwise.
fn scratch_dir_for(archive: &Path) -> PathBuf {
    let dir = crate::create::parent_of(archive);
    let writable = nix::unistd::access(dir, nix::unistd::AccessFlags::W_OK).is_ok();
    if writable {
        dir.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}
