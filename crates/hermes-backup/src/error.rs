//! The backup crate's one error type: what failed, with the path or archive entry it failed on.

use std::path::PathBuf;

/// Everything that can go wrong making, checking or restoring a backup.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read, written or renamed.
    #[error("could not {action} `{}`", path.display())]
    Io {
        /// What was being done (`read`, `write`, `rename`, ...).
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },

    /// A file that belongs in the backup could not be included: the backup fails rather than
    /// being "complete" with it missing.
    #[error("could not include `{}` in the backup", path.display())]
    NotIncluded {
        /// The file on the volume.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<Error>,
    },

    /// SQLite's online backup of a database failed.
    #[error("could not copy the database `{}`", path.display())]
    Database {
        /// The database file.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: rusqlite::Error,
    },

    /// The archive could not be written or read as a zip.
    #[error("the archive `{}` is not a readable zip", path.display())]
    Zip {
        /// The archive.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: zip::result::ZipError,
    },

    /// The output file is already there; a backup never replaces one.
    #[error("`{}` already exists", path.display())]
    OutputExists {
        /// The output path given.
        path: PathBuf,
    },

    /// Another backup or restore holds the volume's backup lock.
    #[error("another backup or restore is running on this volume")]
    Busy {
        /// The lock file.
        lock: PathBuf,
    },

    /// `verify` found problems (listed in the message).
    #[error("`{}` failed verification: {}", path.display(), problems.join("; "))]
    Verification {
        /// The archive.
        path: PathBuf,
        /// What is wrong, one line each.
        problems: Vec<String>,
    },

    /// A restore would write through a symlink, over a directory, or outside the volume.
    #[error("cannot restore `{rel}`: {why}")]
    UnsafeTarget {
        /// The archive path.
        rel: String,
        /// What is in the way.
        why: String,
    },

    /// The archive holds nothing of the profiles asked for.
    #[error("the archive holds nothing of {what}")]
    NothingToRestore {
        /// The profiles asked for.
        what: String,
    },

    /// An interrupted restore could not be rolled back.
    #[error("could not roll back the interrupted restore in `{}`", staging.display())]
    Rollback {
        /// The staging directory the restore left.
        staging: PathBuf,
        /// Why.
        #[source]
        source: Box<Error>,
    },

    /// A file of `hermes-home` could not be read or written.
    #[error(transparent)]
    Home(#[from] hermes_home::Error),
}

impl Error {
    /// `action` failed on `path` (the usual I/O error).
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// Whether this failure is the disk (or a quota) being full.
    pub fn is_disk_full(&self) -> bool {
        let mut error: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = error {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && matches!(
                    io.raw_os_error(),
                    Some(nix::libc::ENOSPC | nix::libc::EDQUOT)
                )
            {
                return true;
            }
            error = e.source();
        }
        false
    }

    /// The "what to do" line for this error, when there is one.
    pub fn hint(&self) -> Option<String> {
        if self.is_disk_full() {
            return Some(
                "free space on that file system (a backup needs room for its archive and a copy of the largest database), or write it elsewhere with `-o`"
                    .into(),
            );
        }
        match self {
            Error::Io { path, .. } | Error::NotIncluded { path, .. } => Some(format!(
                "check that `{}` is readable by this user (run as root, or as the volume's owner)",
                path.display()
            )),
            Error::Database { path, .. } => Some(format!(
                "check `{}` with `sqlite3 {} 'PRAGMA integrity_check'`",
                path.display(),
                path.display()
            )),
            Error::Zip { .. } => Some(
                "make sure the file is a whole archive made by `hermes backup create` or the original's `hermes backup`"
                    .into(),
            ),
            Error::OutputExists { .. } => {
                Some("choose another name with `-o`, or remove the old archive first".into())
            }
            Error::Busy { lock } => Some(format!(
                "wait for it to finish (the lock is `{}`), then run this again",
                lock.display()
            )),
            Error::Verification { .. } => Some(
                "the archive is damaged or incomplete: restore from another one, or make a new backup"
                    .into(),
            ),
            Error::UnsafeTarget { .. } => Some(
                "move the link or directory out of the way on the volume, then restore again".into(),
            ),
            Error::NothingToRestore { .. } => Some(
                "run `hermes backup verify FILE` to list what the archive holds, and name profiles it has with `--profile`"
                    .into(),
            ),
            Error::Rollback { staging, .. } => Some(format!(
                "fix the cause and run `hermes backup recover`; the files of the volume before the restore are under `{}/old`",
                staging.display()
            )),
            Error::Home(e) => e.hint(),
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::Io { .. } => Error::io(
        "write",
        "/opt/data/backups/.hermes-backup-20261202-101500.zip.partial",
        std::io::Error::from_raw_os_error(nix::libc::EACCES),
    ),
    Error::NotIncluded { .. } => Error::NotIncluded {
        path: "/opt/data/profiles/work/kanban.db".into(),
        source: Box::new(Error::io(
            "read",
            "/opt/data/profiles/work/kanban.db",
            std::io::Error::from_raw_os_error(nix::libc::EIO),
        )),
    },
    Error::Database { .. } => Error::Database {
        path: "/opt/data/state.db".into(),
        source: rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
            Some("database disk image is malformed".into()),
        ),
    },
    Error::Zip { .. } => Error::Zip {
        path: "/root/hermes-backup.zip".into(),
        source: zip::result::ZipError::InvalidArchive("Could not find EOCD".into()),
    },
    Error::OutputExists { .. } => Error::OutputExists {
        path: "/opt/data/backups/nightly.zip".into(),
    },
    Error::Busy { .. } => Error::Busy {
        lock: "/opt/data/.backup.lock".into(),
    },
    Error::Verification { .. } => Error::Verification {
        path: "/root/hermes-backup.zip".into(),
        problems: vec![
            "state.db: sha256 differs from the manifest".into(),
            "config.yaml: in the manifest, not in the archive".into(),
        ],
    },
    Error::UnsafeTarget { .. } => Error::UnsafeTarget {
        rel: "profiles/work/config.yaml".into(),
        why: "`/opt/data/profiles/work` is a symlink".into(),
    },
    Error::NothingToRestore { .. } => Error::NothingToRestore {
        what: "profile `work`".into(),
    },
    Error::Rollback { .. } => Error::Rollback {
        staging: "/opt/data/.restore-20261202-101500-42".into(),
        source: Box::new(Error::io(
            "rename",
            "/opt/data/.restore-20261202-101500-42/old/state.db",
            std::io::Error::from_raw_os_error(nix::libc::EIO),
        )),
    },
    Error::Home(_) => Error::Home(hermes_home::Error::NoHome),
});
