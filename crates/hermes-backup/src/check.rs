//! `hermes backup check`: every profile's databases checked before their gateways start, and
//! a damaged one restored from the newest archive that holds a sound copy of it.
//!
//! * Each SQLite database of each profile (`hermes_home::db_check::DATABASES`) goes through
//!   `PRAGMA quick_check` within [`CHECK_BUDGET`] (`hermes_sessions::integrity`). PID 1's boot
//!   and `hermes up` run it before any gateway starts.
//! * A damaged database is **repaired** when asked (`--repair`; at a start, when
//!   `backup.restore_corrupt` is on, the default): the archives in the backup directory
//!   (`backup.dir`, and `$HERMES_HOME/backups`: scheduled, `hermes backup create`'s and the
//!   dashboard's) are tried newest first, and
//!   the first whose copy of that database matches its checksum and passes `integrity_check`
//!   replaces it. The damaged file and its `-wal`/`-shm` are first moved to
//!   `<backup dir>/set-aside/` (never backed up, never deleted by us), so nothing is lost
//!   whichever copy the operator wants in the end. Without such an archive the database is
//!   left in place and said to be damaged: a guess at a repair could lose what it still holds.
//! * What was found is recorded per profile (`hermes_home::db_check`): `hermes service status`,
//!   the dashboard, `/metrics` and `hermes doctor` say it until a check finds every database
//!   sound again.
//!
//! Like every backup and restore, a check acts on the volume as its owner, and takes the
//! volume's lock, so it never runs beside a restore. A database some process still holds open
//! (a running gateway; `crate::holders`) is never replaced: that process would go on writing
//! into the damaged file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_home::ProfileRef;
use hermes_home::db_check::{self, Damaged, Record, Repair};
use hermes_sessions::integrity::{self, Verdict};
use sha2::{Digest, Sha256};

use crate::Error;
use crate::create::VolumeLock;

/// How long one database's check may take (a 1 GB `state.db` takes a few seconds).
pub const CHECK_BUDGET: Duration = Duration::from_secs(30);

/// Where damaged databases are moved, in the backup directory.
pub const SET_ASIDE_DIR: &str = "set-aside";

/// What a check does about a damaged database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Say it, change nothing.
    Report,
    /// Restore it from the newest archive that holds a sound copy.
    Repair,
    /// Leave it in place because this is why (a start with `backup.restore_corrupt: false`).
    Keep(String),
}

/// One database's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checked {
    /// The profile.
    pub profile: String,
    /// The database, relative to the profile's directory.
    pub file: String,
    /// What the check found.
    pub verdict: Verdict,
    /// For a damaged one, what was done.
    pub damaged: Option<Damaged>,
}

impl Checked {
    /// One line for the boot log and the CLI.
    pub fn describe(&self) -> String {
        let what = match (&self.damaged, &self.verdict) {
            (Some(damaged), _) => damaged.describe(),
            (None, Verdict::Sound) => format!("`{}` is sound", self.file),
            (None, Verdict::Unchecked(why)) | (None, Verdict::Damaged(why)) => {
                format!("`{}`: {why}", self.file)
            }
        };
        format!("profile `{}`: {what}", self.profile)
    }
}

/// What a check of the volume found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeCheck {
    /// Every database checked, profile by profile.
    pub databases: Vec<Checked>,
    /// What could not be recorded, one line each.
    pub warnings: Vec<String>,
}

impl VolumeCheck {
    /// The databases found damaged and still served.
    pub fn still_damaged(&self) -> impl Iterator<Item = &Checked> {
        self.databases
            .iter()
            .filter(|c| c.damaged.as_ref().is_some_and(Damaged::still_served))
    }
}

/// Checks every database of every profile of the volume at `root` (module doc); damaged ones
/// are handled as `mode` says, with archives from the directories `archives`. Records what was found in each
/// profile.
///
/// # Errors
/// The profiles cannot be listed, or another backup or restore runs.
pub fn check_volume(
    root: &Path,
    archives: &[PathBuf],
    mode: &Mode,
    progress: &mut dyn FnMut(&Checked),
) -> Result<VolumeCheck, Error> {
    let _as_owner = crate::as_owner_of(root)?;
    let _lock = VolumeLock::acquire(root)?;
    let profiles = hermes_home::profile::list(root)?;
    let mut all = VolumeCheck::default();
    for entry in profiles {
        let mut record = Record {
            checked_at: hermes_home::time::iso_utc_now(),
            damaged: Vec::new(),
        };
        for rel in db_check::DATABASES {
            let db = entry.dir.join(rel);
            // Only a regular file: a link is never followed (the volume is the service
            // user's, and this may run as root).
            if !fs::symlink_metadata(&db).is_ok_and(|m| m.is_file()) {
                continue;
            }
            let verdict = integrity::quick_check(&db, CHECK_BUDGET);
            let damaged = match &verdict {
                Verdict::Damaged(problem) => Some(Damaged {
                    file: (*rel).to_owned(),
                    problem: problem.clone(),
                    repair: repair(root, archives, &entry.profile, rel, mode),
                }),
                _ => None,
            };
            record.damaged.extend(damaged.clone());
            let checked = Checked {
                profile: entry.profile.name().to_owned(),
                file: (*rel).to_owned(),
                verdict,
                damaged,
            };
            progress(&checked);
            all.databases.push(checked);
        }
        if let Err(e) = db_check::write(&entry.dir, &record) {
            all.warnings.push(format!(
                "cannot record the check of profile `{}`: {}",
                entry.profile.name(),
                hermes_errors::one_line(&e)
            ));
        }
    }
    Ok(all)
}

/// What `mode` makes of the damaged database `rel` of `profile`.
fn repair(
    root: &Path,
    archives: &[PathBuf],
    profile: &ProfileRef,
    rel: &str,
    mode: &Mode,
) -> Repair {
    match mode {
        Mode::Report => Repair::Kept {
            why: "not repaired: `hermes backup check --repair` restores it from the newest \
                  archive that holds a sound copy"
                .into(),
        },
        Mode::Keep(why) => Repair::Kept { why: why.clone() },
        Mode::Repair => match restore_newest_sound(root, archives, profile, rel) {
            Ok(restored) => restored,
            Err(why) => Repair::Kept { why },
        },
    }
}

/// Replaces the database `rel` of `profile` with the newest sound copy in `archives`, the
/// damaged files set aside first; why not, when no archive has one.
fn restore_newest_sound(
    root: &Path,
    archives: &[PathBuf],
    profile: &ProfileRef,
    rel: &str,
) -> Result<Repair, String> {
    let dir = profile_dir(root, profile);
    let holders = crate::holders::of_database(&dir.join(rel));
    if !holders.is_empty() {
        let names: Vec<String> = holders.iter().map(ToString::to_string).collect();
        return Err(format!(
            "it is open in {}; stop the profile's gateway (`hermes -p {} gateway stop`) and run \
             `hermes backup check --repair` again",
            names.join(", "),
            profile.name()
        ));
    }
    let in_archive = match profile {
        ProfileRef::Default => rel.to_owned(),
        ProfileRef::Named(name) => format!("{}/{name}/{rel}", hermes_home::layout::PROFILES_DIR),
    };
    let found = archives_newest_first(archives).map_err(|e| e.to_string())?;
    let mut tried = Vec::new();
    for archive in found {
        let name = archive
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        let name = name.unwrap_or_default();
        match sound_copy(&archive, &in_archive, &dir.join(rel)) {
            Ok(Some((copy, created))) => {
                // Beside the archive it came from: the backup directory, never backed up.
                let aside_in = archive.parent().unwrap_or(root);
                let set_aside = set_aside(&dir.join(rel), aside_in, profile, rel).map_err(|e| {
                    let _ = fs::remove_file(&copy);
                    format!("the damaged copy cannot be set aside ({e}), so it was kept")
                })?;
                let db = dir.join(rel);
                fs::rename(&copy, &db).map_err(|e| {
                    format!(
                        "`{}` could not be put in place ({e}); the damaged copy is at `{}`",
                        copy.display(),
                        set_aside.display()
                    )
                })?;
                crate::create::sync_dir(crate::create::parent_of(&db));
                return Ok(Repair::Restored {
                    archive,
                    archive_created: created,
                    set_aside,
                });
            }
            Ok(None) => {}
            Err(why) => tried.push(format!("`{name}`: {why}")),
        }
    }
    let dirs: Vec<String> = archives
        .iter()
        .map(|d| format!("`{}`", d.display()))
        .collect();
    let mut why = format!(
        "no archive in {} holds a sound copy of it",
        dirs.join(" or ")
    );
    if !tried.is_empty() {
        why.push_str(&format!(" ({})", tried.join("; ")));
    }
    why.push_str(
        "; restore one with `hermes backup restore`, or recover what it holds with `sqlite3 \
         <file> .recover`",
    );
    Err(why)
}

/// The archives in `dirs` named by the time they were made, newest first: scheduled ones
/// (`hermes-backup-20261202-101500.zip`), `hermes backup create`'s
/// (`hermes-backup-20261202T101500Z.zip`) and the dashboard's
/// (`hermes-dashboard-20261202-101500.zip`, `…-2.zip`).
fn archives_newest_first(dirs: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    let mut dated = Vec::new();
    for dir in dirs {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if let Some(time) = made_at(&name)
                && entry.file_type().is_ok_and(|t| t.is_file())
                && !dated
                    .iter()
                    .any(|(_, p): &(String, PathBuf)| *p == entry.path())
            {
                dated.push((time, entry.path()));
            }
        }
    }
    dated.sort_unstable_by(|a, b| b.cmp(a));
    Ok(dated.into_iter().map(|(_, path)| path).collect())
}

/// The UTC time in an archive's name as 14 digits (`20261202101500`), for each form.
fn made_at(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".zip")?;
    let digits = if crate::schedule::is_created_name(name) {
        stem["hermes-backup-".len()..].get(..15)?.replace('T', "")
    } else if let Some(stamp) = stem.strip_prefix("hermes-backup-") {
        match stamp.len() {
            15 if stamp.as_bytes()[8] == b'-' => stamp.replace('-', ""),
            _ => return None,
        }
    } else {
        let stamp = stem.strip_prefix("hermes-dashboard-")?;
        let stamp = stamp.get(..15).filter(|s| s.as_bytes()[8] == b'-')?;
        let rest = &stem["hermes-dashboard-".len() + 15..];
        let suffix_ok = rest.is_empty()
            || rest
                .strip_prefix('-')
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if !suffix_ok {
            return None;
        }
        stamp.replace('-', "")
    };
    (digits.len() == 14 && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
}

fn profile_dir(root: &Path, profile: &ProfileRef) -> PathBuf {
    match profile {
        ProfileRef::Default => root.to_path_buf(),
        ProfileRef::Named(name) => root
            .join(hermes_home::layout::PROFILES_DIR)
            .join(name.as_str()),
    }
}

/// The entry `in_archive` of `archive` extracted beside `db` (as `.<name>.restore-<pid>`),
/// when it is there, matches its checksum and passes `integrity_check`: the copy and when the
/// archive was made. `Ok(None)`: the archive does not hold it.
fn sound_copy(
    archive: &Path,
    in_archive: &str,
    db: &Path,
) -> Result<Option<(PathBuf, String)>, String> {
    let file = File::open(archive).map_err(|e| e.to_string())?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| e.to_string())?;
    let created = crate::manifest::parse_header(zip.comment())
        .ok()
        .flatten()
        .map(|h| h.created)
        .unwrap_or_default();
    let mut entry = match zip.by_name(in_archive) {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let expected = crate::manifest::parse_entry_comment(entry.comment()).map(|(sha, _)| sha);
    let declared = entry.size();
    let dir = crate::create::parent_of(db);
    let free = hermes_home::disk::usage(dir)
        .map_err(|e| e.to_string())?
        .available_bytes;
    if declared.saturating_add(crate::verify::SCRATCH_RESERVE) > free {
        return Err(format!(
            "its copy of {} does not fit beside the database",
            hermes_errors::bytes::human(declared)
        ));
    }
    let name = db.file_name().map(|n| n.to_string_lossy().into_owned());
    let copy = dir.join(format!(
        ".{}.restore-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    let _ = fs::remove_file(&copy);
    let written = (|| -> io::Result<String> {
        let mut out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&copy)?;
        let mut hasher = Sha256::new();
        let mut input = (&mut entry).take(declared.saturating_add(1));
        let mut buf = vec![0u8; 256 * 1024];
        let mut size = 0u64;
        loop {
            let n = input.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])?;
            size += n as u64;
        }
        if size != declared {
            return Err(io::Error::other(
                "its size is not the one its header declares",
            ));
        }
        out.sync_all()?;
        Ok(crate::manifest::hex(&hasher.finalize()))
    })();
    let verdict = match written {
        Err(e) => Some(format!("cannot be extracted: {e}")),
        Ok(sha) if expected.as_ref().is_some_and(|want| *want != sha) => {
            Some("its copy does not match the archive's checksum".into())
        }
        Ok(_) => crate::verify::integrity_check(&copy),
    };
    match verdict {
        None => Ok(Some((copy, created))),
        Some(why) => {
            for side in ["", "-wal", "-shm", "-journal"] {
                let mut p = copy.clone().into_os_string();
                p.push(side);
                let _ = fs::remove_file(PathBuf::from(p));
            }
            Err(why)
        }
    }
}

/// Moves the damaged `db` and its side files to `<archives>/set-aside/` (the directory of the
/// archive restored from), named by the time,
/// the profile and the file; returns where the database went.
fn set_aside(db: &Path, archives: &Path, profile: &ProfileRef, rel: &str) -> io::Result<PathBuf> {
    let dir = archives.join(SET_ASIDE_DIR);
    if fs::symlink_metadata(&dir).is_ok_and(|m| !m.is_dir()) {
        return Err(io::Error::other(format!(
            "`{}` is not a directory",
            dir.display()
        )));
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)?;
    // Moved by renames and a link, never copied: on another file system it is not set aside.
    let same_device = |a: &Path, b: &Path| -> io::Result<bool> {
        use std::os::unix::fs::MetadataExt;
        Ok(fs::metadata(a)?.dev() == fs::metadata(b)?.dev())
    };
    if !same_device(crate::create::parent_of(db), &dir)? {
        return Err(io::Error::other(format!(
            "`{}` is on another file system",
            dir.display()
        )));
    }
    let stamp = hermes_home::time::iso_utc_now().replace(':', "");
    let target = dir.join(format!(
        "{stamp}-{}-{}",
        profile.name(),
        rel.replace('/', "-")
    ));
    fs::hard_link(db, &target)?;
    // Then its side files: a `-wal` left beside the restored copy would be replayed into it.
    for side in ["-wal", "-shm", "-journal"] {
        let with = |path: &Path| {
            let mut p = path.as_os_str().to_owned();
            p.push(side);
            PathBuf::from(p)
        };
        match fs::rename(with(db), with(&target)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(target)
}

#[cfg(test)]
mod tests;
