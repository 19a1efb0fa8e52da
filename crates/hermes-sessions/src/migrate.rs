//! The one-time move of conversations from the tables earlier versions of the gateway kept
//! (`gateway_sessions`, `gateway_messages`) into the original's `sessions` and `messages`.
//!
//! It runs inside the transaction that opens the store: every row is copied, then the old
//! tables are dropped, and the transaction commits all of it or nothing. So it happens
//! exactly once (the next open finds no old tables), and a crash midway leaves the old
//! tables as they were, to be moved on the next open.
//!
//! Rule for a session id that is in both the old tables and `sessions` (the original already
//! has a conversation of that name): the existing session keeps its row (source, model,
//! start time) and its messages, and the old messages are appended after them, in their
//! order, keeping their own timestamps. Nothing of either side is dropped.

use rusqlite::Connection;
use serde_json::{Value, json};

use super::rows::{self, MessageRow, SessionRow, Statements};
use super::schema::table_exists;

/// The source recorded for moved sessions: the old tables were written by the HTTP API and
/// by `hermes chat`, which the old tables did not tell apart.
const MOVED_SOURCE: &str = super::SOURCE_API_SERVER;

/// What a migration moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Moved {
    pub(super) sessions: usize,
    pub(super) messages: usize,
}

/// Moves the old tables' rows (if the old tables exist) and drops the old tables. Must run
/// inside a transaction, after the original's schema exists.
pub(super) fn move_old_tables(conn: &Connection, sql: &Statements) -> rusqlite::Result<Moved> {
    let mut moved = Moved::default();
    if table_exists(conn, "gateway_sessions")? {
        moved.sessions = move_sessions(conn, sql)?;
    }
    if table_exists(conn, "gateway_messages")? {
        moved.messages = move_messages(conn, sql)?;
    }
    // Messages first: they referenced the old sessions table.
    conn.execute_batch(
        "DROP TABLE IF EXISTS gateway_messages;
         DROP TABLE IF EXISTS gateway_sessions;",
    )?;
    Ok(moved)
}

fn move_sessions(conn: &Connection, sql: &Statements) -> rusqlite::Result<usize> {
    let mut stmt =
        conn.prepare("SELECT id, profile, created_at FROM gateway_sessions ORDER BY rowid")?;
    let old: Vec<(String, Option<String>, f64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (id, profile, created_at) in &old {
        let row = SessionRow {
            source: MOVED_SOURCE,
            model: None,
            profile_name: profile.as_deref().and_then(rows::profile_name),
            started_at: *created_at,
        };
        rows::upsert_session(conn, sql, id, row)?;
    }
    Ok(old.len())
}

/// The stored message (with the row's role where the JSON has none), or, for a row whose
/// JSON no longer parses as a message, its role and raw text, so that nothing is lost.
fn old_message(role: &str, text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(mut m)) => {
            m.entry("role")
                .or_insert_with(|| Value::String(role.to_string()));
            Value::Object(m)
        }
        _ => json!({"role": role, "content": text}),
    }
}

fn move_messages(conn: &Connection, sql: &Statements) -> rusqlite::Result<usize> {
    let mut stmt = conn.prepare(
        "SELECT session_id, role, message, created_at FROM gateway_messages ORDER BY seq",
    )?;
    let old: Vec<(String, String, String, f64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (session, role, text, created_at) in &old {
        // The old tables did not enforce their foreign key, so a message may name a session
        // that has no row: give it one (an existing row is kept as it is).
        let session_row = SessionRow {
            source: MOVED_SOURCE,
            model: None,
            profile_name: None,
            started_at: *created_at,
        };
        rows::upsert_session(conn, sql, session, session_row)?;
        let row = MessageRow::from_message(&old_message(role, text));
        rows::insert_message(conn, sql, session, &row, *created_at)?;
    }
    Ok(old.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unparsable_old_rows_keep_their_text() {
        assert_eq!(
            old_message("assistant", "not json"),
            json!({"role": "assistant", "content": "not json"})
        );
        assert_eq!(
            old_message("user", "[1]"),
            json!({"role": "user", "content": "[1]"})
        );
        let m = json!({"role": "user", "content": "hi"});
        assert_eq!(old_message("user", &m.to_string()), m);
        assert_eq!(
            old_message("assistant", r#"{"content": "no role"}"#),
            json!({"role": "assistant", "content": "no role"})
        );
    }
}
