//! `state/database-check.json`: what the last check of a profile's databases found, and what
//! was done about it.
//!
//! Before any gateway starts (PID 1's boot, `hermes up`) and on `hermes backup check`, each
//! SQLite database of a profile ([`DATABASES`]) goes through a bounded `PRAGMA quick_check`
//! (`hermes_backup::check`). A database that fails it is never served silently: the record
//! names it with what the check said and what was done — restored from the newest archive that
//! holds a sound copy, the damaged copy set aside, or left in place and why — and `hermes
//! service status`, the dashboard, `/metrics` and `hermes doctor` say it until a check finds
//! every database sound again, which removes the record.
//!
//! Like the lifecycle ledger, it is read without following a link and at most [`MAX_BYTES`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Error;

/// The record's directory in a profile's directory (the lifecycle ledger's).
pub const DIR_NAME: &str = crate::lifecycle_ledger::DIR_NAME;

/// The record's file name in [`DIR_NAME`].
pub const FILE_NAME: &str = "database-check.json";

/// A record larger than this is not one.
pub const MAX_BYTES: u64 = 256 * 1024;

/// The SQLite databases a profile may hold, relative to its directory (the original's and its
/// plugins'; each is a quick backup's too).
pub const DATABASES: &[&str] = &[
    "state.db",
    "cron/executions.db",
    "gateway/discord_message_recovery.db",
    "projects.db",
    "response_store.db",
    "memory_store.db",
    "verification_evidence.db",
    "kanban.db",
];

/// The record of the profile whose directory is `profile_dir`.
pub fn path(profile_dir: &Path) -> PathBuf {
    profile_dir.join(DIR_NAME).join(FILE_NAME)
}

/// What the last check found wrong in one profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// When the check ran (UTC, ISO 8601).
    pub checked_at: String,
    /// Each database that failed its check.
    pub damaged: Vec<Damaged>,
}

/// One database that failed its check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damaged {
    /// The database, relative to the profile's directory.
    pub file: String,
    /// What `quick_check` said (its first lines), or why it could not be opened.
    pub problem: String,
    /// What was done.
    pub repair: Repair,
}

/// What was done about a damaged database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Repair {
    /// Replaced by the sound copy in `archive`; the damaged files were moved to `set_aside`.
    Restored {
        /// The archive the copy came from.
        archive: PathBuf,
        /// When that archive was made, as its manifest says (empty when it does not).
        archive_created: String,
        /// Where the damaged database now is (its `-wal` and `-shm` beside it).
        set_aside: PathBuf,
    },
    /// Left in place, still served.
    Kept {
        /// Why it was not restored.
        why: String,
    },
}

impl Damaged {
    /// One line: the file, the problem and what was done.
    pub fn describe(&self) -> String {
        match &self.repair {
            Repair::Restored {
                archive,
                archive_created,
                set_aside,
            } => {
                let made = if archive_created.is_empty() {
                    String::new()
                } else {
                    format!(", made {archive_created}")
                };
                format!(
                    "`{}` failed its check ({}); restored from `{}`{made}; the damaged copy is \
                     at `{}`",
                    self.file,
                    self.problem,
                    archive.display(),
                    set_aside.display()
                )
            }
            Repair::Kept { why } => format!(
                "`{}` failed its check ({}) and is still served: {why}",
                self.file, self.problem
            ),
        }
    }

    /// Whether the damaged database is still the one served.
    pub fn still_served(&self) -> bool {
        matches!(self.repair, Repair::Kept { .. })
    }
}

/// Writes the record for `profile_dir`, or removes it when nothing is damaged.
///
/// # Errors
/// When it cannot be written or removed.
pub fn write(profile_dir: &Path, record: &Record) -> Result<(), Error> {
    let file = path(profile_dir);
    if record.damaged.is_empty() {
        return match std::fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io("remove", &file, e))
            }
            _ => Ok(()),
        };
    }
    let dir = profile_dir.join(DIR_NAME);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("create", &dir, e))?;
    let text = serde_json::to_vec_pretty(record)
        .map_err(|e| Error::io("encode", &file, std::io::Error::other(e)))?;
    crate::atomic::write_atomic(&file, &text, 0o600)
}

/// The record of `profile_dir`, `None` when there is none or it cannot be read safely.
pub fn read(profile_dir: &Path) -> Option<Record> {
    let bytes = crate::no_follow::read(profile_dir, &[DIR_NAME, FILE_NAME], MAX_BYTES).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_an_empty_one_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        let record = Record {
            checked_at: "2026-12-07T10:00:00Z".into(),
            damaged: vec![
                Damaged {
                    file: "state.db".into(),
                    problem: "database disk image is malformed".into(),
                    repair: Repair::Restored {
                        archive: "/v/backups/hermes-backup-20261207-000000.zip".into(),
                        archive_created: "2026-12-07T00:00:00Z".into(),
                        set_aside: "/v/backups/set-aside/x-state.db".into(),
                    },
                },
                Damaged {
                    file: "kanban.db".into(),
                    problem: "row 3 missing from index".into(),
                    repair: Repair::Kept {
                        why: "no archive holds a sound copy".into(),
                    },
                },
            ],
        };
        write(dir.path(), &record).unwrap();
        assert_eq!(read(dir.path()), Some(record.clone()));
        let text = std::fs::read_to_string(path(dir.path())).unwrap();
        assert!(text.contains(r#""action": "restored""#), "{text}");
        assert!(record.damaged[0].describe().contains("restored from"));
        assert!(record.damaged[1].still_served());
        write(
            dir.path(),
            &Record {
                checked_at: "later".into(),
                damaged: vec![],
            },
        )
        .unwrap();
        assert!(!path(dir.path()).exists());
    }

    #[test]
    fn a_planted_link_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = dir.path().join("elsewhere.json");
        std::fs::write(&elsewhere, r#"{"checked_at":"x","damaged":[]}"#).unwrap();
        std::fs::create_dir(dir.path().join(DIR_NAME)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, path(dir.path())).unwrap();
        assert_eq!(read(dir.path()), None);
    }
}
