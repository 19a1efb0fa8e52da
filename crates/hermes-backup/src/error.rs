//! The backup crate's one error type: what failed, with the path or archive entry it failed on.

use std::path::PathBuf;

use hermes_errors::text::printable;

/// Everything that can go wrong making, checking or restoring a backup.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file or directory could not be read, written or renamed.
    #[error("could not {action} `{}`", printable(&path.display().to_string()))]
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

    /// Another backup or restore holds the volume's lock (a `flock` on its root directory).
    #[error("another backup or restore is running on the volume `{}`", root.display())]
    Busy {
        /// The volume's root.
        root: PathBuf,
    },

    /// `verify` found problems (listed in the message).
    #[error("`{}` failed verification: {}", path.display(), printable(&problems.join("; ")))]
    Verification {
        /// The archive.
        path: PathBuf,
        /// What is wrong, one line each.
        problems: Vec<String>,
    },

    /// A restore would write through a symlink, over a directory, or outside the volume.
    #[error("cannot restore `{}`: {}", printable(rel), printable(why))]
    UnsafeTarget {
        /// The archive path.
        rel: String,
        /// What is in the way.
        why: String,
    },

    /// The files a restore would write do not fit on the volume with room to spare.
    #[error(
        "restoring needs {} on the volume `{}`, which has {} free (with {} left for the gateways)",
        hermes_errors::bytes::human(*needed),
        root.display(),
        hermes_errors::bytes::human(*available),
        hermes_errors::bytes::human(*reserve)
    )]
    NoSpace {
        /// The volume's root.
        root: PathBuf,
        /// What the staged files take.
        needed: u64,
        /// What the volume has free.
        available: u64,
        /// What a restore leaves free.
        reserve: u64,
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

    /// The archive was written with a newer config schema than the installed agent's.
    #[error(
        "the archive's `{profile}` profile has config schema {archive}, newer than this image's \
         hermes-agent {} (schema {agent}): an older agent would misread and rewrite it",
        agent_version.as_deref().unwrap_or("(unknown version)")
    )]
    NewerThanAgent {
        /// The profile whose `config.yaml` carries the newest schema.
        profile: String,
        /// That schema.
        archive: u64,
        /// The installed agent's version.
        agent_version: Option<String>,
        /// The installed agent's schema.
        agent: u64,
    },

    /// A gateway runs without a supervisor that could stop it for a restore.
    #[error(
        "the `{profile}` gateway (pid {pid}) runs outside the supervisor, so nothing can stop it for the restore"
    )]
    GatewayOutsideSupervisor {
        /// The profile.
        profile: String,
        /// The gateway's pid.
        pid: i32,
    },

    /// A gateway stopped for a restore was still running when the wait ended: nothing was
    /// restored (the gateways are started again).
    #[error("{} still running {}s after the stop, so nothing was restored", services.join(", "), waited.as_secs())]
    GatewayWouldNotStop {
        /// The services still running.
        services: Vec<String>,
        /// How long the restore waited.
        waited: std::time::Duration,
    },

    /// A database the restore would replace is held open by a process (one the supervisor did
    /// not stop: a gateway run by hand, the original's own process, a `sqlite3` shell).
    #[error("`{}` is open in {holders}, so nothing was restored", path.display())]
    DatabaseInUse {
        /// The database (or the one whose side file is open).
        path: PathBuf,
        /// Who holds it: `name (pid N)`, comma-separated.
        holders: String,
    },

    /// The supervisor could not be asked to stop or start a gateway.
    #[error(transparent)]
    Services(#[from] hermes_services::Error),

    /// The supervisor refused to stop or start a gateway.
    #[error(transparent)]
    Supervisor(#[from] hermes_supervisor::Error),

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
            if let Some(rusqlite::Error::SqliteFailure(code, _)) =
                e.downcast_ref::<rusqlite::Error>()
                && code.code == rusqlite::ErrorCode::DiskFull
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
            Error::Io { action, path, .. } => Some(format!(
                "check that this user may {action} `{}` (run as root, or as the volume's owner)",
                path.display()
            )),
            Error::NotIncluded { path, .. } => Some(format!(
                "check that `{}` is readable by this user (run as root, or as the volume's owner); a backup never leaves a file out",
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
            Error::Busy { .. } => Some(
                "wait for it to finish (a scheduled backup takes as long as a manual one), then run this again"
                    .into(),
            ),
            Error::Verification { .. } => Some(
                "the archive is damaged or incomplete: restore from another one, or make a new backup"
                    .into(),
            ),
            Error::UnsafeTarget { .. } => Some(
                "move the link or directory out of the way on the volume, then restore again".into(),
            ),
            Error::NoSpace { .. } => Some(
                "free space on the volume, or restore fewer profiles with `--profile`; nothing was changed"
                    .into(),
            ),
            Error::NothingToRestore { .. } => Some(
                "run `hermes backup verify FILE` to list what the archive holds, and name profiles it has with `--profile`"
                    .into(),
            ),
            Error::Rollback { staging, .. } => Some(format!(
                "fix the cause and run `hermes backup recover`; the files of the volume before the restore are under `{}/old`",
                staging.display()
            )),
            Error::NewerThanAgent { .. } => Some(
                "run an image whose hermes-agent is at least the release that made the backup \
                 (docs/docker.md: HERMES_AGENT_SOURCE), or pass `--force` to restore it anyway"
                    .into(),
            ),
            Error::GatewayOutsideSupervisor { pid, .. } => Some(format!(
                "stop it first (`kill {pid}`), then restore again"
            )),
            Error::GatewayWouldNotStop { .. } => Some(
                "see why with `hermes service status` and its log (`hermes service logs NAME`), then restore again"
                    .into(),
            ),
            Error::DatabaseInUse { .. } => Some(
                "stop that process (the gateways of a supervisor are stopped for you), then \
                 restore again: replaced under it, it would go on writing into the old file"
                    .into(),
            ),
            Error::Services(e) => e.hint(),
            Error::Supervisor(e) => e.hint(),
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
        root: "/opt/data".into(),
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
    Error::NoSpace { .. } => Error::NoSpace {
        root: "/opt/data".into(),
        needed: 734_003_200,
        available: 524_288_000,
        reserve: 67_108_864,
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
    Error::NewerThanAgent { .. } => Error::NewerThanAgent {
        profile: "work".into(),
        archive: 35,
        agent_version: Some("0.19.0".into()),
        agent: 33,
    },
    Error::GatewayOutsideSupervisor { .. } => Error::GatewayOutsideSupervisor {
        profile: "work".into(),
        pid: 4242,
    },
    Error::GatewayWouldNotStop { .. } => Error::GatewayWouldNotStop {
        services: vec!["gateway-work".into()],
        waited: std::time::Duration::from_secs(60),
    },
    Error::DatabaseInUse { .. } => Error::DatabaseInUse {
        path: "/opt/data/profiles/work/state.db".into(),
        holders: "python3 (pid 4242)".into(),
    },
    Error::Services(_) => Error::Services(hermes_services::Error::NotRunning {
        root: "/opt/data".into(),
        socket: "/run/hermes/supervisor.sock".into(),
    }),
    Error::Supervisor(_) => Error::Supervisor(hermes_supervisor::Error::Refused {
        code: hermes_supervisor::ErrorCode::ShuttingDown,
        message: "the supervisor is shutting down".into(),
    }),
    Error::Home(_) => Error::Home(hermes_home::Error::NoHome),
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_recognised_through_the_chain_and_says_what_to_do() {
        let sqlite_full = Error::NotIncluded {
            path: "/v/kanban.db".into(),
            source: Box::new(Error::Database {
                path: "/v/kanban.db".into(),
                source: rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
                    Some("database or disk is full".into()),
                ),
            }),
        };
        let enospc = Error::NotIncluded {
            path: "/v/a".into(),
            source: Box::new(Error::io(
                "write",
                "/v/b",
                std::io::Error::from_raw_os_error(nix::libc::ENOSPC),
            )),
        };
        for e in [sqlite_full, enospc] {
            assert!(e.is_disk_full(), "{e:?}");
            assert!(e.hint().unwrap().contains("free space"));
        }
        assert!(
            !Error::every_variant()
                .into_iter()
                .any(|(_, e)| e.is_disk_full())
        );
    }
}
