//! `hermes-sessions`: conversations kept in the profile's `state.db` (SQLite, WAL), in the
//! original hermes-agent's own tables. The gateway writes them (how a request's messages are
//! combined with them is the gateway's `assemble`); the CLI, the dashboard and `hermes-diag`
//! read them ([`browse`]) without linking the gateway.
//!
//! Words:
//! * *session* — a conversation named by an id (`X-Hermes-Session-Id`, `hermes chat
//!   --session`); the same id names the same conversation for the original.
//! * *history* — the session's stored messages, in insertion order.
//! * *new turn* — the request's non-system messages that are not already in the history.
//!
//! Storage is the original's schema (see [`schema`]): a session is a row of `sessions`
//! (`id`, `source`, `model`, `started_at`, `profile_name`, `message_count`,
//! `tool_call_count`, ...), a message a row of `messages` (`role`, `content`, `tool_calls`,
//! `tool_call_id`, `tool_name`, `timestamp`, `active`), written as the original's API server
//! writes a turn (see [`rows`]). So the original lists, searches and resumes our
//! conversations, and we continue the original's. Tables of earlier gateway versions are moved
//! into these once ([`migrate`]).
//!
//! System messages are never stored: the soul and the client's system prompt are applied fresh
//! on every request.
//!
//! Concurrency: the original (its CLI, its gateway) may write the same file at the same time.
//! WAL lets readers and one writer work together; every write here is one `BEGIN IMMEDIATE`
//! transaction (the write lock is taken first, so it never has to be upgraded midway, which
//! SQLite can refuse without waiting), and a busy database is waited for, up to
//! [`BUSY_TIMEOUT`], instead of failing.
//!
//! Privacy: every conversation is in this file, so a new `state.db` is created mode `0600`
//! (whatever the umask) before SQLite opens it; SQLite gives its `-wal`, `-shm` and `-journal`
//! side files the database file's mode. An existing `state.db` keeps the mode it has.

pub mod browse;
pub mod error;
pub mod integrity;
mod migrate;
pub mod probe;
mod rows;
mod schema;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use serde_json::Value;

pub use error::Error;

use rows::{MessageRow, SessionRow, Statements};

/// Request header that names a session.
pub const SESSION_HEADER: &str = "x-hermes-session-id";

/// The `source` the original's API server records for its sessions.
pub const SOURCE_API_SERVER: &str = "api_server";

/// The `source` the original records for sessions of its command line.
pub const SOURCE_CLI: &str = "cli";

/// The longest session id the original's API server accepts.
const MAX_SESSION_ID_CHARS: usize = 256;

/// How long a write waits for another process (the original) to finish its own.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Checks a session id by the original API server's rules, so that every id the original
/// creates or accepts (`20250101_120000_a1b2c3`, `api-<hex>`, `cron_<job>_<time>`, a UUID, a
/// client's own) is accepted, and every id we accept can be continued by the original: 1-256
/// characters, no control characters, no surrounding spaces, and nothing that reads as a path
/// (`/`, `\`, `..`, or a drive prefix like `c:`), since the original names files after ids.
///
/// # Errors
///
/// [`Error::InvalidSessionId`].
pub fn validate_session_id(id: &str) -> Result<(), Error> {
    let chars = id.chars().count();
    let path_like = id.contains(['/', '\\'])
        || id.contains("..")
        || (id.as_bytes().get(1) == Some(&b':')
            && id.starts_with(|c: char| c.is_ascii_alphabetic()));
    let ok = (1..=MAX_SESSION_ID_CHARS).contains(&chars)
        && !id.chars().any(char::is_control)
        && id.trim() == id
        && !path_like;
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidSessionId {
            id: id.chars().filter(|c| !c.is_control()).take(64).collect(),
        })
    }
}

/// What a stored turn records about its session besides the messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnMeta {
    /// The profile the turn was served in (the original records none for `default`).
    pub profile: String,
    /// Where the conversation happens, in the original's words: [`SOURCE_API_SERVER`] for
    /// the HTTP API, [`SOURCE_CLI`] for `hermes chat`. A session keeps the source it was
    /// created with.
    pub source: String,
    /// The model that answered; recorded when the session has none yet.
    pub model: Option<String>,
    /// The system prompt built for this session (its first turn, or a rebuild when the model
    /// changed), stored as the original stores it (`sessions.system_prompt`) so later turns
    /// replay it verbatim; `None` keeps the stored one.
    pub system_prompt: Option<String>,
}

impl TurnMeta {
    /// A turn of the HTTP API in `profile`, answered by `model`.
    pub fn api(profile: impl Into<String>, model: Option<String>) -> TurnMeta {
        TurnMeta {
            profile: profile.into(),
            source: SOURCE_API_SERVER.to_string(),
            model,
            system_prompt: None,
        }
    }

    /// The same turn, storing `prompt` as the session's system prompt.
    pub fn with_system_prompt(mut self, prompt: Option<String>) -> TurnMeta {
        self.system_prompt = prompt;
        self
    }
}

/// The profile's session store. Cheap to clone; all clones share one connection.
#[derive(Clone)]
pub struct SessionStore {
    // A std Mutex: it is never held across an `.await` (every use is inside spawn_blocking).
    conn: Arc<Mutex<Connection>>,
    sql: Arc<Statements>,
    path: PathBuf,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Opens the connection the way both implementations share the file: WAL, a busy timeout,
/// and foreign keys enforced (the original turns them on for every connection).
fn connect(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // journal_mode returns a row, so it is read with query_row rather than execute.
    let _mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")?;
    Ok(conn)
}

/// Creates the original's schema if it is absent and moves the old tables' rows into it, in
/// one transaction; returns the statements this database's columns call for.
fn prepare(conn: &mut Connection) -> rusqlite::Result<Statements> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if schema::create_if_absent(&tx)? {
        tracing::info!("created the session tables in state.db");
    }
    let sql = Statements::new(schema::columns(&tx)?);
    let moved = migrate::move_old_tables(&tx, &sql)?;
    tx.commit()?;
    if moved != migrate::Moved::default() {
        tracing::info!(
            sessions = moved.sessions,
            messages = moved.messages,
            "moved conversations from the old gateway tables into sessions/messages"
        );
    }
    Ok(sql)
}

impl SessionStore {
    /// Opens (creating if needed) the store at `path`, in WAL mode: creates the original's
    /// tables when they are absent and moves conversations from the old gateway tables.
    ///
    /// # Errors
    ///
    /// [`Error::SessionFile`] when the file cannot be created, [`Error::SessionStore`] when
    /// it cannot be opened or prepared.
    pub fn open(path: &Path) -> Result<SessionStore, Error> {
        let err = |source| Error::SessionStore {
            path: path.to_path_buf(),
            source,
        };
        create_private(path).map_err(|source| Error::SessionFile {
            path: path.to_path_buf(),
            source,
        })?;
        let mut conn = connect(path).map_err(err)?;
        let sql = prepare(&mut conn).map_err(err)?;
        Ok(SessionStore {
            conn: Arc::new(Mutex::new(conn)),
            sql: Arc::new(sql),
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

    /// The session's history as OpenAI chat messages, in the order the original replays it
    /// (insertion order; messages the original rewound or compacted away are left out, and so
    /// are stray prompts of its background review, as it leaves them out).
    /// Empty for an unknown session. Blocking.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`].
    pub fn history(&self, session: &str) -> Result<Vec<Value>, Error> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare_cached(&self.sql.history)
            .map_err(|e| self.err(e))?;
        let found = stmt
            .query_map([session], |r| {
                Ok(MessageRow {
                    role: r.get(0)?,
                    content: rows::sql_text(r.get(1)?),
                    tool_call_id: r.get(2)?,
                    tool_calls: r.get(3)?,
                    tool_name: r.get(4)?,
                    tool_call_count: 0,
                })
            })
            .map_err(|e| self.err(e))?;
        let messages = found
            .map(|row| row.map(MessageRow::into_message).map_err(|e| self.err(e)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows::without_review_prompts(messages))
    }

    /// Appends `messages` to the session (creating it as an API-server session of `profile`),
    /// in one transaction. The model is not recorded; see [`SessionStore::append_turn`].
    /// Blocking.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`].
    pub fn append(&self, session: &str, profile: &str, messages: &[Value]) -> Result<(), Error> {
        self.append_turn(session, &TurnMeta::api(profile, None), messages)
    }

    /// Appends `messages` to the session in one transaction, creating the session with
    /// `meta`'s source, model and profile (an existing session keeps its source and gets only
    /// what it lacks). Blocking.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`].
    pub fn append_turn(
        &self,
        session: &str,
        meta: &TurnMeta,
        messages: &[Value],
    ) -> Result<(), Error> {
        let now = now_secs();
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let session_row = SessionRow {
            source: &meta.source,
            model: meta.model.as_deref(),
            profile_name: rows::profile_name(&meta.profile),
            started_at: now,
        };
        rows::upsert_session(&tx, &self.sql, session, session_row).map_err(|e| self.err(e))?;
        if let Some(prompt) = &meta.system_prompt {
            tx.execute(
                "UPDATE sessions SET system_prompt = ?1 WHERE id = ?2",
                rusqlite::params![prompt, session],
            )
            .map_err(|e| self.err(e))?;
        }
        let mut timestamp = now;
        for m in messages {
            rows::insert_message(
                &tx,
                &self.sql,
                session,
                &MessageRow::from_message(m),
                timestamp,
            )
            .map_err(|e| self.err(e))?;
            // One microsecond apart, as the original spaces the rows of one write, so that
            // ordering by time agrees with ordering by insertion.
            timestamp += 1e-6;
        }
        tx.commit().map_err(|e| self.err(e))
    }

    /// The system prompt stored for the session (`None`: unknown session, or none stored).
    /// Blocking.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`].
    pub fn system_prompt(&self, session: &str) -> Result<Option<String>, Error> {
        let conn = self.lock();
        conn.query_row(
            "SELECT system_prompt FROM sessions WHERE id = ?1",
            rusqlite::params![session],
            |r| r.get::<_, Option<String>>(0),
        )
        .optional()
        .map(Option::flatten)
        .map_err(|e| self.err(e))
    }

    /// [`SessionStore::system_prompt`] on the blocking pool.
    pub async fn system_prompt_async(&self, session: String) -> Result<Option<String>, Error> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.system_prompt(&session))
            .await
            .map_err(|e| Error::Task {
                reason: e.to_string(),
            })?
    }

    /// [`SessionStore::history`] on the blocking pool.
    pub async fn history_async(&self, session: String) -> Result<Vec<Value>, Error> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.history(&session))
            .await
            .map_err(|e| Error::Task {
                reason: e.to_string(),
            })?
    }

    /// [`SessionStore::append_turn`] on the blocking pool.
    pub async fn append_turn_async(
        &self,
        session: String,
        meta: TurnMeta,
        messages: Vec<Value>,
    ) -> Result<(), Error> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || store.append_turn(&session, &meta, &messages))
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(role: &str, content: &str) -> Value {
        json!({"role": role, "content": content})
    }

    #[test]
    fn session_ids_are_validated() {
        // Ids the original creates: its CLI and gateway, its API server (with and without a
        // client id), cron, and UUIDs; and ids earlier versions of ours created.
        for id in [
            "20260101_120000_a1b2c3",
            "20260101_120000_a1b2c3d4",
            "api_1767225600_0a1b2c3d",
            "api-0123456789abcdef",
            "cron_abc123def456_20260101_120000",
            "5f0c6d1e-8a3b-4c2d-9e7f-0a1b2c3d4e5f",
            "chat-0011223344556677",
            "abc-1.2_3:x",
            "Open WebUI chat 7",
            "café",
        ] {
            assert!(validate_session_id(id).is_ok(), "{id}");
        }
        assert!(validate_session_id(&"x".repeat(256)).is_ok());
        for bad in [
            "", " padded", "padded ", "a\nb", "a\tb", "../etc", "a/b", "a\\b", "x..y", "c:",
            "C:stuff",
        ] {
            assert!(validate_session_id(bad).is_err(), "{bad:?}");
        }
        assert!(validate_session_id(&"x".repeat(257)).is_err());
        // Characters, not bytes, are counted.
        assert!(validate_session_id(&"é".repeat(256)).is_ok());
    }

    fn open_temp() -> (tempfile::TempDir, SessionStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = SessionStore::open(&dir.path().join("state.db")).unwrap();
        (dir, store)
    }

    fn session_row(
        store: &SessionStore,
        id: &str,
    ) -> (String, Option<String>, Option<String>, i64, i64) {
        store
            .lock()
            .query_row(
                "SELECT source, model, profile_name, message_count, tool_call_count
                 FROM sessions WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap()
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

    #[test]
    fn a_turn_records_what_the_original_keeps_about_its_session() {
        let (_dir, store) = open_temp();
        let call =
            json!({"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}});
        let turn = [
            msg("user", "q"),
            json!({"role": "assistant", "content": null, "tool_calls": [call, call]}),
            json!({"role": "tool", "tool_call_id": "c1", "name": "f", "content": "r"}),
            msg("assistant", "done"),
        ];
        let meta = TurnMeta::api("work", Some("gpt-test".into()));
        store.append_turn("s", &meta, &turn).unwrap();
        assert_eq!(
            session_row(&store, "s"),
            (
                "api_server".into(),
                Some("gpt-test".into()),
                Some("work".into()),
                4,
                2
            )
        );
        assert_eq!(store.history("s").unwrap(), turn.to_vec());
        // Timestamps follow insertion order within the turn.
        let stamps: Vec<f64> = store
            .lock()
            .prepare("SELECT timestamp FROM messages WHERE session_id = 's' ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    }

    #[test]
    fn an_existing_session_keeps_its_source_and_model() {
        let (_dir, store) = open_temp();
        let cli = TurnMeta {
            profile: "default".into(),
            source: SOURCE_CLI.into(),
            model: None,
            system_prompt: None,
        };
        store.append_turn("s", &cli, &[msg("user", "q1")]).unwrap();
        let api = TurnMeta::api("default", Some("m1".into()));
        store.append_turn("s", &api, &[msg("user", "q2")]).unwrap();
        let later = TurnMeta::api("default", Some("m2".into()));
        store
            .append_turn("s", &later, &[msg("user", "q3")])
            .unwrap();
        // The source stays; the missing model is filled once and then kept; the default
        // profile is recorded as none.
        assert_eq!(
            session_row(&store, "s"),
            ("cli".into(), Some("m1".into()), None, 3, 0)
        );
    }

    #[test]
    fn rows_the_original_hid_are_not_history() {
        let (_dir, store) = open_temp();
        store
            .append(
                "s",
                "p",
                &[msg("user", "q1"), msg("assistant", "a1"), msg("user", "q2")],
            )
            .unwrap();
        // The original's rewind marks rows inactive instead of deleting them.
        store
            .lock()
            .execute("UPDATE messages SET active = 0 WHERE content = 'a1'", [])
            .unwrap();
        assert_eq!(
            store.history("s").unwrap(),
            vec![msg("user", "q1"), msg("user", "q2")]
        );
    }

    #[test]
    fn a_new_database_gets_the_original_schema_and_version() {
        let (_dir, store) = open_temp();
        let conn = store.lock();
        let version: i64 = conn
            .query_row("SELECT version FROM schema_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, schema::SCHEMA_VERSION);
        for table in [
            "sessions",
            "messages",
            "session_model_usage",
            "state_meta",
            "gateway_routing",
            "compression_locks",
            "async_delegations",
            "messages_fts",
            "messages_fts_trigram",
        ] {
            assert!(schema::table_exists(&conn, table).unwrap(), "{table}");
        }
        let triggers: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(triggers, 6);
    }

    #[test]
    fn messages_are_found_by_the_original_full_text_search() {
        let (_dir, store) = open_temp();
        store
            .append("s", "p", &[msg("user", "remember the zebra")])
            .unwrap();
        let conn = store.lock();
        for table in ["messages_fts", "messages_fts_trigram"] {
            let hits: i64 = conn
                .query_row(
                    &format!("SELECT COUNT(*) FROM {table} WHERE {table} MATCH 'zebra'"),
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(hits, 1, "{table}");
        }
    }

    #[test]
    fn an_older_original_schema_is_written_without_its_missing_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        // The core of an early original schema: no `active`, no `profile_name`.
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TABLE sessions (id TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT,
                     started_at REAL NOT NULL, message_count INTEGER DEFAULT 0,
                     tool_call_count INTEGER DEFAULT 0);
                 CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
                     session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
                     content TEXT, tool_call_id TEXT, tool_calls TEXT, tool_name TEXT,
                     timestamp REAL NOT NULL);",
            )
            .unwrap();
        let store = SessionStore::open(&path).unwrap();
        store.append("s", "work", &[msg("user", "q")]).unwrap();
        assert_eq!(store.history("s").unwrap(), vec![msg("user", "q")]);
        // Left as it is: no table of the current schema was added.
        assert!(!schema::table_exists(&store.lock(), "schema_version").unwrap());
    }
}
