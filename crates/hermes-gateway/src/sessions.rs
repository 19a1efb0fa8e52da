//! Conversations kept in the profile's `state.db` (SQLite, WAL), and how a request's messages
//! are combined with them.
//!
//! Words:
//! * *session* — a conversation named by a client-chosen id (`X-Hermes-Session-Id`).
//! * *history* — the session's stored non-system messages, oldest first.
//! * *new turn* — the request's non-system messages that are not already in the history.
//! * *upstream messages* — what the provider sees: `SOUL.md` as the first system message, the
//!   client's own system messages, the history, then the new turn.
//!
//! Tables (prefixed `gateway_` so they never collide with other tables in `state.db`):
//!
//! | table              | columns                                                          |
//! |--------------------|------------------------------------------------------------------|
//! | `gateway_sessions` | `id` TEXT PK, `profile`, `created_at`, `updated_at` (unix secs)  |
//! | `gateway_messages` | `seq` INTEGER PK, `session_id`, `role`, `message` (JSON object), `created_at` |
//!
//! Messages are stored as the whole JSON object the client sent (or the assistant message we
//! built), so multimodal content and extra fields survive. System messages are never stored:
//! the soul and the client's system prompt are applied fresh on every request.
//!
//! Privacy: every conversation is in this file, so a new `state.db` is created mode `0600`
//! (whatever the umask) before SQLite opens it; SQLite gives its `-wal`, `-shm` and `-journal`
//! side files the database file's mode. An existing `state.db` keeps the mode it has.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, params};
use serde_json::{Value, json};

use crate::error::Error;

/// Request header that names a session.
pub const SESSION_HEADER: &str = "x-hermes-session-id";

/// Checks a client-supplied session id: 1-128 characters from `A-Z a-z 0-9 . _ : -`.
///
/// # Errors
///
/// [`Error::InvalidSessionId`].
pub fn validate_session_id(id: &str) -> Result<(), Error> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidSessionId {
            id: id.chars().take(64).collect(),
        })
    }
}

/// The profile's session store. Cheap to clone; all clones share one connection.
#[derive(Clone)]
pub struct SessionStore {
    // A std Mutex: it is never held across an `.await` (every use is inside spawn_blocking).
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SessionStore {
    /// Opens (creating if needed) the store at `path`, in WAL mode.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`] when the file cannot be opened or the tables created.
    pub fn open(path: &Path) -> Result<SessionStore, Error> {
        let err = |source| Error::SessionStore {
            path: path.to_path_buf(),
            source,
        };
        create_private(path).map_err(|source| Error::SessionFile {
            path: path.to_path_buf(),
            source,
        })?;
        let conn = Connection::open(path).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
        // journal_mode returns a row, so it is read with query_row rather than execute.
        let _mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(err)?;
        conn.execute_batch(
            "PRAGMA synchronous=NORMAL;
             CREATE TABLE IF NOT EXISTS gateway_sessions (
                 id TEXT PRIMARY KEY,
                 profile TEXT NOT NULL,
                 created_at REAL NOT NULL,
                 updated_at REAL NOT NULL
             );
             CREATE TABLE IF NOT EXISTS gateway_messages (
                 seq INTEGER PRIMARY KEY AUTOINCREMENT,
                 session_id TEXT NOT NULL REFERENCES gateway_sessions(id),
                 role TEXT NOT NULL,
                 message TEXT NOT NULL,
                 created_at REAL NOT NULL
             );
             CREATE INDEX IF NOT EXISTS gateway_messages_by_session
                 ON gateway_messages(session_id, seq);",
        )
        .map_err(err)?;
        Ok(SessionStore {
            conn: Arc::new(Mutex::new(conn)),
            path: path.to_path_buf(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn err(&self, source: rusqlite::Error) -> Error {
        Error::SessionStore {
            path: self.path.clone(),
            source,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (each call is one
        // statement or one transaction), so a poisoned lock is safe to keep using.
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The session's history, oldest first (empty for an unknown session). Blocking.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`].
    pub fn history(&self, session: &str) -> Result<Vec<Value>, Error> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(
                "SELECT message FROM gateway_messages WHERE session_id = ?1 ORDER BY seq",
            )
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([session], |r| r.get::<_, String>(0))
            .map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in rows {
            let text = row.map_err(|e| self.err(e))?;
            // A row we cannot parse was not written by us; skip it rather than fail the chat.
            if let Ok(v) = serde_json::from_str::<Value>(&text) {
                out.push(v);
            }
        }
        Ok(out)
    }

    /// Appends `messages` to the session (creating it), in one transaction. Blocking.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`].
    pub fn append(&self, session: &str, profile: &str, messages: &[Value]) -> Result<(), Error> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut conn = self.lock();
        let tx = conn.transaction().map_err(|e| self.err(e))?;
        tx.execute(
            "INSERT INTO gateway_sessions (id, profile, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?3)
             ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at",
            params![session, profile, now],
        )
        .map_err(|e| self.err(e))?;
        for m in messages {
            let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
            tx.execute(
                "INSERT INTO gateway_messages (session_id, role, message, created_at)
                 VALUES (?1, ?2, ?3, ?4)",
                params![session, role, m.to_string(), now],
            )
            .map_err(|e| self.err(e))?;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// [`SessionStore::history`] on the blocking pool.
    pub(crate) async fn history_async(&self, session: String) -> Result<Vec<Value>, Error> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.history(&session))
            .await
            .map_err(|e| Error::Task {
                reason: e.to_string(),
            })?
    }

    /// [`SessionStore::append`] on the blocking pool.
    pub(crate) async fn append_async(
        &self,
        session: String,
        profile: String,
        messages: Vec<Value>,
    ) -> Result<(), Error> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.append(&session, &profile, &messages))
            .await
            .map_err(|e| Error::Task {
                reason: e.to_string(),
            })?
    }
}

/// Creates `path` empty with mode `0600` (exactly: the umask cannot loosen or tighten it) when
/// it does not exist yet; an existing file, or a symlink, is left as it is.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        // The umask may have removed bits from 0600 (e.g. 0400 under umask 0277, which would
        // leave the gateway unable to write): set the mode of the file we just made.
        Ok(file) => file.set_permissions(std::fs::Permissions::from_mode(0o600)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The result of combining a request with the soul and the session history.
#[derive(Debug, Clone, PartialEq)]
pub struct Assembled {
    /// Messages to send upstream.
    pub upstream: Vec<Value>,
    /// Messages to append to the session once the answer is complete (the assistant's answer
    /// is added by the caller).
    pub new_turn: Vec<Value>,
}

fn is_system(m: &Value) -> bool {
    matches!(
        m.get("role").and_then(Value::as_str),
        Some("system" | "developer")
    )
}

fn same_message(a: &Value, b: &Value) -> bool {
    a.get("role") == b.get("role") && a.get("content") == b.get("content")
}

/// Builds the upstream messages: soul first, then the client's system messages, the history,
/// and the new turn. A client that resends the whole conversation (OpenAI style) is detected:
/// when its non-system messages start with the history, that prefix is not duplicated.
pub fn assemble(soul: Option<&str>, history: &[Value], request: &[Value]) -> Assembled {
    let mut upstream = Vec::with_capacity(history.len() + request.len() + 1);
    if let Some(soul) = soul.map(str::trim).filter(|s| !s.is_empty()) {
        upstream.push(json!({"role": "system", "content": soul}));
    }
    upstream.extend(request.iter().filter(|m| is_system(m)).cloned());
    let rest: Vec<&Value> = request.iter().filter(|m| !is_system(m)).collect();
    let resent = !history.is_empty()
        && rest.len() >= history.len()
        && history.iter().zip(&rest).all(|(h, r)| same_message(h, r));
    let new_turn: Vec<Value> = if resent {
        rest[history.len()..].iter().map(|v| (*v).clone()).collect()
    } else {
        rest.into_iter().cloned().collect()
    };
    upstream.extend(history.iter().cloned());
    upstream.extend(new_turn.iter().cloned());
    Assembled { upstream, new_turn }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: &str) -> Value {
        json!({"role": role, "content": content})
    }

    #[test]
    fn soul_comes_first_then_client_system() {
        let a = assemble(
            Some("I am Hermes"),
            &[],
            &[msg("system", "be brief"), msg("user", "hi")],
        );
        assert_eq!(a.upstream[0], msg("system", "I am Hermes"));
        assert_eq!(a.upstream[1], msg("system", "be brief"));
        assert_eq!(a.upstream[2], msg("user", "hi"));
        assert_eq!(a.new_turn, vec![msg("user", "hi")]);
    }

    #[test]
    fn blank_soul_is_skipped() {
        let a = assemble(Some("  \n"), &[], &[msg("user", "hi")]);
        assert_eq!(a.upstream, vec![msg("user", "hi")]);
    }

    #[test]
    fn history_goes_before_the_new_turn() {
        let h = [msg("user", "q1"), msg("assistant", "a1")];
        let a = assemble(None, &h, &[msg("user", "q2")]);
        assert_eq!(
            a.upstream,
            vec![msg("user", "q1"), msg("assistant", "a1"), msg("user", "q2")]
        );
        assert_eq!(a.new_turn, vec![msg("user", "q2")]);
    }

    #[test]
    fn resent_history_is_not_duplicated() {
        let h = [msg("user", "q1"), msg("assistant", "a1")];
        let req = [msg("user", "q1"), msg("assistant", "a1"), msg("user", "q2")];
        let a = assemble(None, &h, &req);
        assert_eq!(a.upstream.len(), 3);
        assert_eq!(a.new_turn, vec![msg("user", "q2")]);
    }

    #[test]
    fn session_ids_are_validated() {
        assert!(validate_session_id("abc-1.2_3:x").is_ok());
        assert!(validate_session_id("").is_err());
        assert!(validate_session_id("a b").is_err());
        assert!(validate_session_id(&"x".repeat(129)).is_err());
    }

    #[test]
    fn store_round_trips_and_uses_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = SessionStore::open(&path).unwrap();
        store
            .append("s1", "p", &[msg("user", "q1"), msg("assistant", "a1")])
            .unwrap();
        store.append("s1", "p", &[msg("user", "q2")]).unwrap();
        store.append("s2", "p", &[msg("user", "other")]).unwrap();
        let h = store.history("s1").unwrap();
        assert_eq!(
            h,
            vec![msg("user", "q1"), msg("assistant", "a1"), msg("user", "q2")]
        );
        assert!(store.history("nope").unwrap().is_empty());
        let reopened = SessionStore::open(&path).unwrap();
        assert_eq!(reopened.history("s2").unwrap(), vec![msg("user", "other")]);
        let mode: String = Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode.to_lowercase(), "wal");
    }
}
