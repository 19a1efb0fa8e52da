//! The session store's one error type.
//!
//! The message says what failed; [`Error::hint`] says what to do about it. None is a
//! configuration error: a gateway that meets one exits 1 and is retried.

use std::path::PathBuf;

/// Everything that can go wrong with `state.db`.
///
/// Not `#[non_exhaustive]`: the gateway lists every variant in its own error's examples.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The session store (`state.db`) could not be opened or used.
    #[error("session store `{}` failed", path.display())]
    SessionStore {
        /// The database file.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: rusqlite::Error,
    },

    /// The session store's file could not be created (private, mode 0600) before SQLite
    /// opened it.
    #[error("cannot create session store `{}`", path.display())]
    SessionFile {
        /// The database file.
        path: PathBuf,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },

    /// A session id is not acceptable.
    #[error(
        "invalid session id `{id}`: use 1-256 characters without control characters, surrounding spaces, `/`, `\\` or `..`"
    )]
    InvalidSessionId {
        /// The id as received (truncated for display).
        id: String,
    },

    /// A background task died (a bug or a runtime shutting down).
    #[error("internal task failed: {reason}")]
    Task {
        /// What the runtime reported.
        reason: String,
    },
}

impl Error {
    /// The "what to do" line for this error, when there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::SessionStore { path, .. } | Error::SessionFile { path, .. } => Some(format!(
                "check that `{}` is a writable SQLite database",
                path.display()
            )),
            Error::InvalidSessionId { .. } => Some(
                "use an id as `hermes chat` prints it (`chat-…`), or leave `--session` out to start a new conversation"
                    .into(),
            ),
            Error::Task { .. } => Some(
                "retry; if it happens again, report it with the output of `hermes dump`".into(),
            ),
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::SessionStore { .. } => Error::SessionStore {
        path: "/opt/data/profiles/work/state.db".into(),
        source: rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
            Some("attempt to write a readonly database".into()),
        ),
    },
    Error::SessionFile { .. } => Error::SessionFile {
        path: "/opt/data/profiles/work/state.db".into(),
        source: std::io::Error::from_raw_os_error(13),
    },
    Error::InvalidSessionId { .. } => Error::InvalidSessionId {
        id: "../etc".into(),
    },
    Error::Task { .. } => Error::Task {
        reason: "task 7 panicked".into(),
    },
});
