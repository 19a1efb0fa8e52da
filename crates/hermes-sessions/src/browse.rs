//! Reading conversations for people (the dashboard's Sessions page): the newest sessions, one
//! session's messages, a text search. Strictly read-only: the file is opened with
//! `SQLITE_OPEN_READ_ONLY` and never created, prepared or migrated from here, because the
//! gateway and the original agent own it and a browser must not change what they wrote. A
//! missing `state.db` is a profile without conversations, not an error.
//!
//! Search goes through the original's full-text index (`messages_fts`, kept by its triggers)
//! with the original's snippet markers (`>>>` and `<<<` around a hit). The user's text is
//! never handed to FTS5 as syntax: every word becomes a quoted prefix term (`"word"*`), so
//! quotes, `NEAR(`, `*`, `AND`/`OR`/`NOT` or a lone `-` are searched for as text and can never
//! make the query fail.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, Row, params};
use serde::Serialize;

use crate::error::Error;

/// How long a read waits for a writer holding the file (a checkpoint, a migration). Shorter
/// than the gateway's own [`super::BUSY_TIMEOUT`]: a page should answer, not hang.
pub const READ_BUSY_TIMEOUT: Duration = Duration::from_secs(3);

/// The most rows one list or search answers.
pub const MAX_LIMIT: usize = 200;
/// The longest search text accepted (characters): enough for any phrase someone types, and a
/// bound on the full-text query a client can make the database run.
pub const MAX_QUERY_CHARS: usize = 1000;

/// Where a hit starts and ends in a search snippet (the original's markers).
pub const SNIPPET_OPEN: &str = ">>>";
/// See [`SNIPPET_OPEN`].
pub const SNIPPET_CLOSE: &str = "<<<";

/// One session as a list shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionSummary {
    /// The session id.
    pub id: String,
    /// Its title, when one was set.
    pub title: Option<String>,
    /// Who started it (`api_server`, `cli`, `telegram`, ...).
    pub source: String,
    /// The model recorded for it.
    pub model: Option<String>,
    /// When it started (Unix seconds).
    pub started_at: f64,
    /// When it ended, if it did.
    pub ended_at: Option<f64>,
    /// Messages stored for it (the original's counter).
    pub message_count: i64,
    /// The start of its first user message, on one line (at most [`PREVIEW_CHARS`]
    /// characters, `...` when cut): what lists show for a session without a title, as the
    /// original's do.
    pub preview: Option<String>,
}

/// The most characters of a session's first user message a list shows.
pub const PREVIEW_CHARS: usize = 60;

/// One stored message, as stored (content is text, never interpreted).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredMessage {
    /// Row id (insertion order).
    pub id: i64,
    /// `user`, `assistant`, `tool`, ...
    pub role: String,
    /// The text, if any.
    pub content: Option<String>,
    /// The tool a `tool` message answers.
    pub tool_name: Option<String>,
    /// An assistant's tool calls (JSON text, as stored).
    pub tool_calls: Option<String>,
    /// When it was written (Unix seconds).
    pub timestamp: f64,
    /// False for a message the original rewound or compacted away (not replayed).
    pub active: bool,
}

/// A session with its messages.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionDetail {
    /// The session.
    pub session: SessionSummary,
    /// Its messages in insertion order.
    pub messages: Vec<StoredMessage>,
}

/// One search hit: a message and its session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// The session the message belongs to.
    pub session_id: String,
    /// The message's row id.
    pub message_id: i64,
    /// The message's role.
    pub role: String,
    /// The text around the hit, the hit between [`SNIPPET_OPEN`] and [`SNIPPET_CLOSE`].
    pub snippet: String,
    /// The session's title.
    pub title: Option<String>,
    /// The session's source.
    pub source: String,
    /// The session's model.
    pub model: Option<String>,
    /// When the session started.
    pub session_started: f64,
}

/// A read-only view of one `state.db`.
#[derive(Debug)]
pub struct Reader {
    conn: Connection,
    path: PathBuf,
}

const SUMMARY_COLUMNS: &str = "s.id, s.title, s.source, s.model, s.started_at, s.ended_at, \
     COALESCE(s.message_count, 0), \
     (SELECT SUBSTR(m.content, 1, 400) FROM messages m \
      WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL \
      ORDER BY m.timestamp, m.id LIMIT 1)";

fn summary(r: &Row<'_>) -> rusqlite::Result<SessionSummary> {
    Ok(SessionSummary {
        id: r.get(0)?,
        title: r.get(1)?,
        source: r.get(2)?,
        model: r.get(3)?,
        started_at: r.get(4)?,
        ended_at: r.get(5)?,
        message_count: r.get(6)?,
        preview: r.get::<_, Option<String>>(7)?.as_deref().and_then(preview),
    })
}

/// A message's start on one line: blanks (newlines included) run together, at most
/// [`PREVIEW_CHARS`] characters, `...` when cut; `None` for a blank message.
fn preview(content: &str) -> Option<String> {
    let line = content.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() {
        return None;
    }
    let mut chars = line.chars();
    let head: String = chars.by_ref().take(PREVIEW_CHARS).collect();
    Some(if chars.next().is_some() {
        format!("{head}...")
    } else {
        head
    })
}

impl Reader {
    /// Opens `path` read-only; `None` when there is no such file (no conversations yet). The
    /// file is never created.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`] when it exists but cannot be opened as a database.
    pub fn open(path: &Path) -> Result<Option<Reader>, Error> {
        if !path.exists() {
            return Ok(None);
        }
        let err = |source| Error::SessionStore {
            path: path.to_path_buf(),
            source,
        };
        // No CREATE flag: a file removed since the check above is an error, not a new file.
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(err)?;
        conn.busy_timeout(READ_BUSY_TIMEOUT).map_err(err)?;
        Ok(Some(Reader {
            conn,
            path: path.to_path_buf(),
        }))
    }

    /// Like [`Reader::open`], but leaves nothing behind beside the file: opening a WAL
    /// database read-only still creates its `-shm` and `-wal` files when they are absent, which
    /// a report that promises to change nothing (`hermes migrate check`) must not. With no
    /// `-wal` file every committed row is in the database file itself, so it is opened
    /// `immutable` (SQLite then makes no side file and takes no lock); with one (a writer is
    /// live, or one did not close cleanly) it is opened read-only as usual, to see those rows.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`] when it exists but cannot be opened as a database.
    pub fn open_untouched(path: &Path) -> Result<Option<Reader>, Error> {
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        if !path.exists() || Path::new(&wal).exists() {
            return Reader::open(path);
        }
        let err = |source| Error::SessionStore {
            path: path.to_path_buf(),
            source,
        };
        let uri = format!("file:{}?immutable=1", uri_path(path));
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(uri, flags).map_err(err)?;
        Ok(Some(Reader {
            conn,
            path: path.to_path_buf(),
        }))
    }

    fn err(&self, source: rusqlite::Error) -> Error {
        Error::SessionStore {
            path: self.path.clone(),
            source,
        }
    }

    /// Whether the database has table `name` (a file of an older gateway, or an empty one,
    /// may not: it then has nothing to show).
    fn has_table(&self, name: &str) -> Result<bool, Error> {
        self.conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND name = ?1",
                [name],
                |_| Ok(()),
            )
            .optional()
            .map(|found| found.is_some())
            .map_err(|e| self.err(e))
    }

    /// Up to `limit` conversations, newest first; `before` (a session id from the previous
    /// page) continues after that session. An unknown `before` gives an empty page.
    ///
    /// As the original's session lists: archived sessions and the sessions an agent runs for
    /// itself (sub-agent and delegate runs, children of a live session) are not listed; a
    /// `/branch` and a compression's continuation are (the continuation holds the rest of a
    /// compressed conversation).
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`].
    pub fn list(&self, limit: usize, before: Option<&str>) -> Result<Vec<SessionSummary>, Error> {
        if !self.has_table("sessions")? {
            return Ok(Vec::new());
        }
        let limit = clamp(limit);
        let listed = self.listed_filter()?;
        // Ordered by (started_at, id), so a page boundary between sessions started in the
        // same instant neither repeats nor skips one.
        let (sql, bound): (String, Vec<&dyn rusqlite::ToSql>) = match &before {
            None => (
                format!(
                    "SELECT {SUMMARY_COLUMNS} FROM sessions s WHERE {listed} \
                     ORDER BY s.started_at DESC, s.id DESC LIMIT ?1"
                ),
                vec![&limit],
            ),
            Some(id) => (
                format!(
                    "SELECT {SUMMARY_COLUMNS} FROM sessions s, \
                     (SELECT started_at AS t, id AS b FROM sessions WHERE id = ?2) c \
                     WHERE (s.started_at < c.t OR (s.started_at = c.t AND s.id < c.b)) \
                     AND {listed} \
                     ORDER BY s.started_at DESC, s.id DESC LIMIT ?1"
                ),
                vec![&limit, id],
            ),
        };
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        stmt.query_map(bound.as_slice(), summary)
            .and_then(Iterator::collect)
            .map_err(|e| self.err(e))
    }

    /// The SQL condition on `s` (a `sessions` row) for [`Reader::list`], from the columns this
    /// file has (an older schema lacks some: nothing is hidden by a column it does not have).
    /// A `model_config` that is not JSON hides nothing and never fails the query.
    fn listed_filter(&self) -> Result<String, Error> {
        let has = |column: &str| {
            super::schema::has_column(&self.conn, "sessions", column).map_err(|e| self.err(e))
        };
        let marker = |col: &str, key: &str| {
            format!("(CASE WHEN json_valid({col}) THEN json_extract({col}, '$.{key}') END)")
        };
        let mut conditions = vec!["1".to_string()];
        if has("archived")? {
            conditions.push("COALESCE(s.archived, 0) = 0".into());
        }
        let config = has("model_config")?;
        if config {
            conditions.push(format!(
                "{} IS NULL",
                marker("s.model_config", "_delegate_from")
            ));
        }
        if has("parent_session_id")? && has("end_reason")? && has("ended_at")? {
            // A child is listed when it is a branch (its marker, or a parent that ended
            // `branched` before it started) or a compression's continuation.
            let branch_marker = if config {
                format!(
                    "{} IS NOT NULL OR ",
                    marker("s.model_config", "_branched_from")
                )
            } else {
                String::new()
            };
            conditions.push(format!(
                "(s.parent_session_id IS NULL OR {branch_marker}EXISTS (SELECT 1 FROM sessions p \
                 WHERE p.id = s.parent_session_id AND (p.end_reason = 'compression' \
                 OR (p.end_reason = 'branched' AND s.started_at >= p.ended_at))))"
            ));
        }
        Ok(conditions.join(" AND "))
    }

    /// One session and its messages; `None` when there is no such session.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`].
    pub fn session(&self, id: &str) -> Result<Option<SessionDetail>, Error> {
        if !self.has_table("sessions")? {
            return Ok(None);
        }
        let found = self
            .conn
            .query_row(
                &format!("SELECT {SUMMARY_COLUMNS} FROM sessions s WHERE s.id = ?1"),
                [id],
                summary,
            )
            .optional()
            .map_err(|e| self.err(e))?;
        let Some(session) = found else {
            return Ok(None);
        };
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, role, content, tool_name, tool_calls, timestamp, COALESCE(active, 1) \
                 FROM messages WHERE session_id = ?1 ORDER BY id",
            )
            .map_err(|e| self.err(e))?;
        let messages = stmt
            .query_map([id], |r| {
                Ok(StoredMessage {
                    id: r.get(0)?,
                    role: r.get(1)?,
                    content: r.get(2)?,
                    tool_name: r.get(3)?,
                    tool_calls: r.get(4)?,
                    timestamp: r.get(5)?,
                    active: r.get::<_, i64>(6)? != 0,
                })
            })
            .and_then(Iterator::collect)
            .map_err(|e| self.err(e))?;
        Ok(Some(SessionDetail { session, messages }))
    }

    /// Messages matching every word of `text` (each word also as a prefix, as the original's
    /// search does), newest first, at most `limit`. Text without any word finds nothing.
    /// Messages the original rewound away are left out, as its search leaves them out.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`].
    pub fn search(&self, text: &str, limit: usize) -> Result<Vec<Hit>, Error> {
        let Some(query) = fts_query(text) else {
            return Ok(Vec::new());
        };
        if !self.has_table("messages_fts")? || !self.has_table("sessions")? {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT m.session_id, m.id, m.role, \
                    snippet(messages_fts, 0, '{SNIPPET_OPEN}', '{SNIPPET_CLOSE}', '…', 24), \
                    s.title, s.source, s.model, s.started_at \
             FROM messages_fts \
             JOIN messages m ON m.id = messages_fts.rowid \
             JOIN sessions s ON s.id = m.session_id \
             WHERE messages_fts MATCH ?1 AND (m.active = 1 OR m.compacted = 1) \
             ORDER BY m.timestamp DESC, m.id DESC LIMIT ?2"
        );
        let mut stmt = self.conn.prepare(&sql).map_err(|e| self.err(e))?;
        stmt.query_map(params![query, clamp(limit)], |r| {
            Ok(Hit {
                session_id: r.get(0)?,
                message_id: r.get(1)?,
                role: r.get(2)?,
                snippet: r.get(3)?,
                title: r.get(4)?,
                source: r.get(5)?,
                model: r.get(6)?,
                session_started: r.get(7)?,
            })
        })
        .and_then(Iterator::collect)
        .map_err(|e| self.err(e))
    }
}

/// What a `state.db` holds, in numbers: for a migration report, which must say whether the
/// conversations carry over without reading (or printing) any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Overview {
    /// The original's schema marker (`schema_version.version`), `None` when the table is
    /// missing or empty.
    pub schema_version: Option<i64>,
    /// Rows of `sessions` (every conversation, archived and agent runs included).
    pub sessions: i64,
    /// Rows of `messages`.
    pub messages: i64,
}

impl Reader {
    /// The schema marker and the number of sessions and messages. A file without the tables
    /// (empty, or of an older gateway) counts zero.
    ///
    /// # Errors
    ///
    /// [`Error::SessionStore`] when the file is not a readable database.
    pub fn overview(&self) -> Result<Overview, Error> {
        let count = |table: &str| -> Result<i64, Error> {
            if !self.has_table(table)? {
                return Ok(0);
            }
            self.conn
                .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
                .map_err(|e| self.err(e))
        };
        let schema_version = if self.has_table("schema_version")? {
            self.conn
                .query_row("SELECT MAX(version) FROM schema_version", [], |r| {
                    r.get::<_, Option<i64>>(0)
                })
                .map_err(|e| self.err(e))?
        } else {
            None
        };
        Ok(Overview {
            schema_version,
            sessions: count("sessions")?,
            messages: count("messages")?,
        })
    }
}

/// `path` for a `file:` URI: the characters a URI gives a meaning (`%`, `?`, `#`) and any
/// byte outside printable ASCII percent-encoded.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_graphic() && !matches!(b, b'%' | b'?' | b'#') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `limit` within 1..=[`MAX_LIMIT`], as SQLite's integer.
fn clamp(limit: usize) -> i64 {
    i64::try_from(limit.clamp(1, MAX_LIMIT)).unwrap_or(1)
}

/// The FTS5 query for the user's `text`: each whitespace-separated word as a quoted prefix
/// term (`"it""s"*`), all required. Quoting makes every character literal (FTS5 reads a `""`
/// inside a string as one `"`), so no input is syntax. Words with no letter or digit (a lone
/// `*`, `(`, `-`) would be empty phrases, which match nothing: they are left out. `None` when
/// nothing is left to search for.
pub fn fts_query(text: &str) -> Option<String> {
    let terms: Vec<String> = text
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .map(|w| format!("\"{}\"*", w.replace('"', "\"\"")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// Whether `error` means another process holds the database (busy or locked past the busy
/// timeout), which passes, as opposed to a file that is not a usable database.
pub fn is_busy(error: &Error) -> bool {
    matches!(
        error,
        Error::SessionStore {
            source: rusqlite::Error::SqliteFailure(e, _),
            ..
        } if matches!(e.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SessionStore;
    use serde_json::json;

    fn msg(role: &str, content: &str) -> serde_json::Value {
        json!({ "role": role, "content": content })
    }

    fn store_with(sessions: &[(&str, &[(&str, &str)])]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = SessionStore::open(&path).unwrap();
        for (id, messages) in sessions {
            let messages: Vec<_> = messages.iter().map(|(r, c)| msg(r, c)).collect();
            store.append(id, "default", &messages).unwrap();
        }
        (dir, path)
    }

    #[test]
    fn an_overview_counts_sessions_and_messages_and_reads_the_schema_marker() {
        let (_dir, path) = store_with(&[
            ("a", &[("user", "one"), ("assistant", "two")]),
            ("b", &[("user", "three")]),
        ]);
        let reader = Reader::open(&path).unwrap().unwrap();
        let overview = reader.overview().unwrap();
        assert_eq!(overview.sessions, 2);
        assert_eq!(overview.messages, 3);
        assert_eq!(overview.schema_version, Some(crate::schema::SCHEMA_VERSION));
        // A database without the original's tables counts nothing and has no marker.
        let empty = _dir.path().join("empty.db");
        rusqlite::Connection::open(&empty)
            .unwrap()
            .execute_batch("CREATE TABLE other (x INTEGER);")
            .unwrap();
        let overview = Reader::open(&empty).unwrap().unwrap().overview().unwrap();
        assert_eq!(
            (
                overview.sessions,
                overview.messages,
                overview.schema_version
            ),
            (0, 0, None)
        );
    }

    #[test]
    fn an_untouched_open_leaves_no_side_files_and_still_sees_a_live_wal() {
        let dir = tempfile::tempdir().unwrap();
        // A name a URI would misread.
        let path = dir.path().join("state ?#%.db");
        let store = SessionStore::open(&path).unwrap();
        store.append("a", "default", &[msg("user", "one")]).unwrap();
        let listing = |d: &Path| {
            let mut names: Vec<_> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            names.sort();
            names
        };
        // While the writer is open its `-wal` exists: the rows in it are counted.
        let live = Reader::open_untouched(&path).unwrap().unwrap();
        assert_eq!(live.overview().unwrap().sessions, 1);
        drop(live);
        drop(store);
        let closed = listing(dir.path());
        assert_eq!(closed.len(), 1, "{closed:?}");
        let reader = Reader::open_untouched(&path).unwrap().unwrap();
        assert_eq!(reader.overview().unwrap().messages, 1);
        drop(reader);
        assert_eq!(listing(dir.path()), closed, "side files were created");
    }

    #[test]
    fn a_missing_file_has_no_sessions_and_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        assert!(Reader::open(&path).unwrap().is_none());
        assert!(!path.exists());
    }

    #[test]
    fn lists_newest_first_in_pages_without_repeats() {
        let (_dir, path) = store_with(&[
            ("a", &[("user", "one")]),
            ("b", &[("user", "two")]),
            ("c", &[("user", "three"), ("assistant", "3")]),
        ]);
        let reader = Reader::open(&path).unwrap().unwrap();
        let first = reader.list(2, None).unwrap();
        let ids: Vec<_> = first.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["c", "b"]);
        assert_eq!(first[0].message_count, 2);
        assert_eq!(first[0].source, "api_server");
        let rest = reader.list(2, Some("b")).unwrap();
        assert_eq!(
            rest.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["a"]
        );
        assert!(reader.list(2, Some("nope")).unwrap().is_empty());
    }

    #[test]
    fn lists_conversations_as_the_original_does_not_archived_or_agent_runs() {
        let ids = [
            "root", "archived", "subagent", "delegate", "branch", "cmp_root", "cmp_tip", "bad",
        ];
        let sessions: Vec<(&str, &[(&str, &str)])> =
            ids.iter().map(|id| (*id, &[("user", "hi")][..])).collect();
        let (_dir, path) = store_with(&sessions);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "UPDATE sessions SET archived = 1 WHERE id = 'archived';
             UPDATE sessions SET parent_session_id = 'root' WHERE id IN ('subagent', 'delegate', 'branch');
             UPDATE sessions SET model_config = '{\"_delegate_from\": \"root\"}' WHERE id = 'delegate';
             UPDATE sessions SET model_config = '{\"_branched_from\": \"root\"}' WHERE id = 'branch';
             UPDATE sessions SET end_reason = 'compression', ended_at = started_at WHERE id = 'cmp_root';
             UPDATE sessions SET parent_session_id = 'cmp_root' WHERE id = 'cmp_tip';
             UPDATE sessions SET model_config = 'not json {' WHERE id = 'bad';",
        )
        .unwrap();
        let reader = Reader::open(&path).unwrap().unwrap();
        let mut listed: Vec<String> = reader
            .list(50, None)
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        listed.sort();
        assert_eq!(listed, ["bad", "branch", "cmp_root", "cmp_tip", "root"]);
        // Hidden from the list, still readable by id (a link, a search hit).
        assert!(reader.session("subagent").unwrap().is_some());
        // Paging past a listed session keeps the filter.
        let first = reader.list(1, None).unwrap();
        let rest = reader.list(50, Some(&first[0].id)).unwrap();
        assert_eq!(rest.len(), 4, "{rest:?}");
    }

    #[test]
    fn one_session_has_its_messages_in_order() {
        let (_dir, path) = store_with(&[("s1", &[("user", "<b>hi</b>"), ("assistant", "hello")])]);
        let reader = Reader::open(&path).unwrap().unwrap();
        let detail = reader.session("s1").unwrap().unwrap();
        let got: Vec<_> = detail
            .messages
            .iter()
            .map(|m| (m.role.as_str(), m.content.as_deref().unwrap()))
            .collect();
        assert_eq!(got, [("user", "<b>hi</b>"), ("assistant", "hello")]);
        assert!(detail.messages.iter().all(|m| m.active));
        assert!(reader.session("s2").unwrap().is_none());
    }

    #[test]
    fn a_listed_session_shows_the_start_of_its_first_user_message() {
        let long = "Plan a trip\nto Lisbon: ".to_string() + &"x".repeat(80);
        let (_dir, path) = store_with(&[
            (
                "s1",
                &[
                    ("assistant", "hi"),
                    ("user", long.as_str()),
                    ("user", "later"),
                ],
            ),
            ("s2", &[("user", "  short  ")]),
            ("s3", &[("assistant", "no user yet")]),
        ]);
        let reader = Reader::open(&path).unwrap().unwrap();
        let listed = reader.list(10, None).unwrap();
        let preview = |id: &str| {
            listed
                .iter()
                .find(|s| s.id == id)
                .and_then(|s| s.preview.clone())
        };
        let first = preview("s1").unwrap();
        assert!(first.starts_with("Plan a trip to Lisbon: xxx"), "{first}");
        assert!(first.ends_with("..."), "{first}");
        assert_eq!(first.chars().count(), PREVIEW_CHARS + 3);
        assert_eq!(preview("s2").as_deref(), Some("short"));
        assert_eq!(preview("s3"), None);
    }

    #[test]
    fn search_finds_words_and_prefixes_with_a_marked_snippet() {
        let (_dir, path) = store_with(&[
            ("s1", &[("user", "the quick brown fox")]),
            ("s2", &[("user", "lazy dogs sleep")]),
        ]);
        let reader = Reader::open(&path).unwrap().unwrap();
        let hits = reader.search("brown", 10).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].session_id, "s1");
        assert!(
            hits[0].snippet.contains(">>>brown<<<"),
            "{}",
            hits[0].snippet
        );
        assert_eq!(reader.search("laz", 10).unwrap()[0].session_id, "s2");
        assert!(reader.search("fox dogs", 10).unwrap().is_empty());
    }

    #[test]
    fn hostile_text_is_searched_as_text_never_as_syntax() {
        let (_dir, path) = store_with(&[("s1", &[("user", "say \"NEAR\" (x) AND y")])]);
        let reader = Reader::open(&path).unwrap().unwrap();
        for q in [
            "\"",
            "\"unterminated",
            "NEAR(",
            "NEAR(a b",
            "*",
            "a OR",
            "-x",
            "()",
            "^",
            "col:x",
            "AND",
            "'; DROP TABLE sessions; --",
            "\u{0}",
        ] {
            reader
                .search(q, 10)
                .unwrap_or_else(|e| panic!("{q:?}: {e}"));
        }
        assert_eq!(reader.search("\"near\"", 10).unwrap().len(), 1);
        assert_eq!(reader.search("AND", 10).unwrap().len(), 1);
        assert_eq!(fts_query("* ("), None);
        assert_eq!(fts_query("it\"s x").unwrap(), "\"it\"\"s\"* \"x\"*");
    }

    #[test]
    fn reading_never_writes_the_file() {
        let (_dir, path) = store_with(&[("s1", &[("user", "hello there")])]);
        let before = (
            std::fs::read(&path).unwrap(),
            path.metadata().unwrap().modified().unwrap(),
        );
        let reader = Reader::open(&path).unwrap().unwrap();
        reader.list(10, None).unwrap();
        reader.session("s1").unwrap();
        reader.search("hello", 10).unwrap();
        drop(reader);
        let after = (
            std::fs::read(&path).unwrap(),
            path.metadata().unwrap().modified().unwrap(),
        );
        assert!(before == after, "state.db changed");
    }

    #[test]
    fn a_file_that_is_not_a_database_is_an_error_not_busy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        std::fs::write(
            &path,
            "this is not sqlite, just text long enough to have a header",
        )
        .unwrap();
        let e = Reader::open(&path)
            .and_then(|r| r.unwrap().list(10, None))
            .unwrap_err();
        assert!(matches!(e, Error::SessionStore { .. }), "{e:?}");
        assert!(!is_busy(&e));
    }

    #[test]
    fn a_database_held_by_a_writer_is_busy_after_the_timeout() {
        let (_dir, path) = store_with(&[("s1", &[("user", "hello")])]);
        // A rollback-journal database with an exclusive write lock: readers must wait (in WAL
        // mode they would not), so the reader gives up after its busy timeout.
        let writer = Connection::open(&path).unwrap();
        let _mode: String = writer
            .query_row("PRAGMA journal_mode=DELETE", [], |r| r.get(0))
            .unwrap();
        writer
            .execute_batch("BEGIN EXCLUSIVE; UPDATE sessions SET title = 't';")
            .unwrap();
        let e = Reader::open(&path)
            .and_then(|r| r.unwrap().list(10, None))
            .unwrap_err();
        assert!(is_busy(&e), "{e:?}");
    }

    #[test]
    fn a_database_without_the_tables_has_nothing_to_show() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE other (x)")
            .unwrap();
        let reader = Reader::open(&path).unwrap().unwrap();
        assert!(reader.list(10, None).unwrap().is_empty());
        assert!(reader.session("x").unwrap().is_none());
        assert!(reader.search("x", 10).unwrap().is_empty());
    }
}
