//! Conversations in `state.db`, in the original hermes-agent's own tables (`sessions`,
//! `messages`), shared with the original.
//!
//! Pure Rust: the schema is created, a turn round-trips, the tables of earlier gateway
//! versions (made here with their old DDL) are moved once, without loss, atomically, and two
//! writers at once lose nothing.
//!
//! Against the original (`HERMES_TEST_PYPI=1`, see `hermes_test_support::original_agent`), run
//! as small Python scripts in its interpreter with `HERMES_HOME` a temp dir: it continues our
//! sessions and we continue its, its `SessionDB` lists ours, its `hermes sessions list` shows
//! ours, our new database has exactly the schema its own has (so it opens ours without
//! migrating it), and its writes racing with ours lose nothing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::path::Path;
use std::process::Command;

use hermes_sessions::{SOURCE_CLI, SessionStore, TurnMeta};
use rusqlite::Connection;
use serde_json::{Value, json};

fn msg(role: &str, content: &str) -> Value {
    json!({"role": role, "content": content})
}

fn tool_call(id: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":1}"}})
}

/// A turn with every kind of message the store must keep apart.
fn tool_turn() -> Vec<Value> {
    vec![
        msg("user", "what is in the box?"),
        json!({"role": "assistant", "content": null, "tool_calls": [tool_call("call_1")]}),
        json!({"role": "tool", "tool_call_id": "call_1", "name": "lookup", "content": "a cat"}),
        msg("assistant", "A cat."),
    ]
}

fn count(conn: &Connection, sql: &str) -> i64 {
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

fn table_exists(conn: &Connection, name: &str) -> bool {
    count(
        conn,
        &format!("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '{name}'"),
    ) == 1
}

/// `(source, model, message_count, tool_call_count)` of a session row.
fn session_row(db: &Path, id: &str) -> (String, Option<String>, i64, i64) {
    Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT source, model, message_count, tool_call_count FROM sessions WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap()
}

// ---- pure Rust ------------------------------------------------------------------------------

#[test]
fn a_new_store_has_the_original_tables_and_version() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    drop(SessionStore::open(&db).unwrap());
    let conn = Connection::open(&db).unwrap();
    for table in ["schema_version", "sessions", "messages", "messages_fts"] {
        assert!(table_exists(&conn, table), "{table}");
    }
    assert_eq!(count(&conn, "SELECT version FROM schema_version"), 22);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM schema_version"), 1);
    // Opening again adds nothing.
    drop(SessionStore::open(&db).unwrap());
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM schema_version"), 1);
}

#[test]
fn a_turn_round_trips_through_a_reopened_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let store = SessionStore::open(&db).unwrap();
    let meta = TurnMeta::api("work", Some("gpt-test".into()));
    store.append_turn("conv-1", &meta, &tool_turn()).unwrap();
    store
        .append_turn("conv-1", &meta, &[msg("user", "and now?")])
        .unwrap();
    drop(store);
    let mut expected = tool_turn();
    expected.push(msg("user", "and now?"));
    assert_eq!(
        SessionStore::open(&db).unwrap().history("conv-1").unwrap(),
        expected
    );
    assert_eq!(
        session_row(&db, "conv-1"),
        ("api_server".into(), Some("gpt-test".into()), 5, 1)
    );
}

/// The DDL of the tables earlier versions of the gateway kept, as they created them.
const OLD_DDL: &str = "
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
        ON gateway_messages(session_id, seq);";

/// Writes the old tables as the old code did: a session row, then one row per message with
/// the whole message as JSON.
fn write_old(db: &Path, sessions: &[(&str, &str, &[Value])]) {
    let conn = Connection::open(db).unwrap();
    conn.execute_batch(OLD_DDL).unwrap();
    for (n, (id, profile, messages)) in sessions.iter().enumerate() {
        let at = 1_700_000_000.0 + n as f64;
        conn.execute(
            "INSERT INTO gateway_sessions (id, profile, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
            rusqlite::params![id, profile, at],
        )
        .unwrap();
        for m in *messages {
            conn.execute(
                "INSERT INTO gateway_messages (session_id, role, message, created_at) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![id, m["role"].as_str().unwrap(), m.to_string(), at],
            )
            .unwrap();
        }
    }
}

#[test]
fn old_tables_are_moved_once_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let first = [msg("user", "q1"), msg("assistant", "a1")];
    let parts = json!([{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]);
    let second = [
        json!({"role": "user", "content": parts}),
        msg("assistant", "seen"),
    ];
    let tools = tool_turn();
    write_old(
        &db,
        &[
            ("old-1", "default", &first),
            ("old-2", "work", &second),
            ("old-3", "work", &tools),
        ],
    );

    let store = SessionStore::open(&db).unwrap();
    assert_eq!(store.history("old-1").unwrap(), first.to_vec());
    assert_eq!(store.history("old-2").unwrap(), second.to_vec());
    assert_eq!(store.history("old-3").unwrap(), tools);
    drop(store);

    let conn = Connection::open(&db).unwrap();
    assert!(!table_exists(&conn, "gateway_sessions"));
    assert!(!table_exists(&conn, "gateway_messages"));
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM sessions"), 3);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM messages"), 8);
    assert_eq!(session_row(&db, "old-3"), ("api_server".into(), None, 4, 1));
    // The old rows keep their times; the profile is recorded as the original records it.
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM messages WHERE session_id = 'old-1' AND timestamp = 1700000000.0"
        ),
        2
    );
    assert_eq!(
        count(
            &conn,
            "SELECT COUNT(*) FROM sessions WHERE profile_name IS NULL AND id = 'old-1'"
        ),
        1
    );

    // Reopening moves nothing again.
    drop(SessionStore::open(&db).unwrap());
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM messages"), 8);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM sessions"), 3);
}

#[test]
fn a_session_in_both_tables_keeps_both_sides_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    // The original's side: a session already in `sessions` (here written through the store,
    // as a CLI session), then old tables holding the same id and another one.
    let theirs = [msg("user", "theirs q"), msg("assistant", "theirs a")];
    let cli = TurnMeta {
        profile: "default".into(),
        source: SOURCE_CLI.into(),
        model: Some("their-model".into()),
        system_prompt: None,
    };
    SessionStore::open(&db)
        .unwrap()
        .append_turn("shared", &cli, &theirs)
        .unwrap();
    let ours = [msg("user", "ours q"), msg("assistant", "ours a")];
    let other = [msg("user", "only ours")];
    write_old(
        &db,
        &[("shared", "default", &ours), ("mine", "default", &other)],
    );

    let store = SessionStore::open(&db).unwrap();
    let mut both = theirs.to_vec();
    both.extend(ours.iter().cloned());
    assert_eq!(store.history("shared").unwrap(), both);
    assert_eq!(store.history("mine").unwrap(), other.to_vec());
    // The existing session keeps its row; its counters include the appended messages.
    assert_eq!(
        session_row(&db, "shared"),
        ("cli".into(), Some("their-model".into()), 4, 0)
    );
}

#[test]
fn a_migration_that_fails_midway_leaves_the_old_tables_intact() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    // Create the original's schema first, so a trigger can make one insert fail.
    drop(SessionStore::open(&db).unwrap());
    let old = [
        msg("user", "fine"),
        msg("user", "boom"),
        msg("user", "after"),
    ];
    write_old(&db, &[("s", "default", &old)]);
    let conn = Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER fail_midway BEFORE INSERT ON messages WHEN new.content = 'boom'
         BEGIN SELECT RAISE(ABORT, 'simulated crash'); END;",
    )
    .unwrap();

    let err = SessionStore::open(&db).unwrap_err();
    assert!(err.to_string().contains("state.db"), "{err}");
    assert!(table_exists(&conn, "gateway_messages"));
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM gateway_messages"), 3);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM messages"), 0);
    assert_eq!(count(&conn, "SELECT COUNT(*) FROM sessions"), 0);

    // Once the cause is gone, the next open moves everything.
    conn.execute_batch("DROP TRIGGER fail_midway").unwrap();
    let store = SessionStore::open(&db).unwrap();
    assert_eq!(store.history("s").unwrap(), old.to_vec());
    assert!(!table_exists(&conn, "gateway_messages"));
}

#[test]
fn two_writers_at_once_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    drop(SessionStore::open(&db).unwrap());
    // Two stores are two connections, as two processes would have.
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let store = SessionStore::open(&db).unwrap();
            std::thread::spawn(move || {
                for i in 0..40 {
                    let turn = [msg("user", &format!("w{w} q{i}")), msg("assistant", "a")];
                    store.append("race", "default", &turn).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let history = SessionStore::open(&db).unwrap().history("race").unwrap();
    assert_eq!(history.len(), 160);
    assert_eq!(session_row(&db, "race").2, 160);
    // Each writer's turns stay whole and in its order.
    for w in 0..2 {
        let asked: Vec<&str> = history
            .iter()
            .filter_map(|m| m["content"].as_str())
            .filter(|c| c.starts_with(&format!("w{w} ")))
            .collect();
        let expected: Vec<String> = (0..40).map(|i| format!("w{w} q{i}")).collect();
        assert_eq!(asked, expected);
    }
}

// ---- against the original -----------------------------------------------------------------

/// Runs `script` in the original's interpreter with `HERMES_HOME` (and `HOME`) set to `home`
/// and the database path as `sys.argv[1]`; returns what it printed as JSON.
fn python(agent: &hermes_test_support::OriginalAgent, home: &Path, script: &str) -> Value {
    let out = Command::new(&agent.python)
        .arg("-c")
        .arg(script)
        .arg(home.join("state.db"))
        .env("HERMES_HOME", home)
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the original's script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// The messages of a session as the original replays them, reduced to what we compare.
const READ_BACK: &str = "
import json, sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
sid = SESSION
out = []
for m in db.get_messages_as_conversation(sid):
    keep = {k: m[k] for k in ('role', 'content', 'tool_calls', 'tool_call_id', 'tool_name') if k in m}
    out.append(keep)
print(json.dumps({'session': db.get_session(sid), 'messages': out}))
db.close()
";

fn read_back(agent: &hermes_test_support::OriginalAgent, home: &Path, id: &str) -> Value {
    python(
        agent,
        home,
        &READ_BACK.replace("SESSION", &format!("{id:?}")),
    )
}

#[test]
fn we_continue_a_session_the_original_started() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let sid = "20260101_120000_a1b2c3";
    python(
        &agent,
        home.path(),
        &format!(
            "
import json, sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
sid = {sid:?}
db.create_session(sid, source='cli', model='their-model')
db.append_message(sid, 'user', 'what is in the box?')
db.append_message(sid, 'assistant', None, tool_calls=[{{'id': 'call_1', 'type': 'function', 'function': {{'name': 'lookup', 'arguments': '{{\"q\":1}}'}}}}])
db.append_message(sid, 'tool', 'a cat', tool_call_id='call_1', tool_name='lookup')
db.append_message(sid, 'assistant', 'A cat.')
db.close()
print('{{}}')
"
        ),
    );

    let store = SessionStore::open(&home.path().join("state.db")).unwrap();
    assert_eq!(store.history(sid).unwrap(), tool_turn());
    let next = [
        msg("user", "and the other box?"),
        msg("assistant", "A dog."),
    ];
    store
        .append_turn(
            sid,
            &TurnMeta::api("default", Some("our-model".into())),
            &next,
        )
        .unwrap();
    drop(store);

    let back = read_back(&agent, home.path(), sid);
    let roles_and_text: Vec<(String, Value)> = back["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_string(),
                m["content"].clone(),
            )
        })
        .collect();
    assert_eq!(
        roles_and_text,
        vec![
            ("user".into(), json!("what is in the box?")),
            ("assistant".into(), Value::Null),
            ("tool".into(), json!("a cat")),
            ("assistant".into(), json!("A cat.")),
            ("user".into(), json!("and the other box?")),
            ("assistant".into(), json!("A dog.")),
        ]
    );
    assert_eq!(
        back["messages"][1]["tool_calls"],
        json!([tool_call("call_1")])
    );
    assert_eq!(back["messages"][2]["tool_call_id"], "call_1");
    // The session stays the original's: its source and model, and counters that include ours.
    assert_eq!(back["session"]["source"], "cli");
    assert_eq!(back["session"]["model"], "their-model");
    assert_eq!(back["session"]["message_count"], 6);
    assert_eq!(back["session"]["tool_call_count"], 1);
}

#[test]
fn the_original_lists_and_reads_a_session_we_created() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let sid = "conv-ours-1";
    let parts = json!([{"type": "text", "text": "describe"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]);
    let mut turn = tool_turn();
    turn.push(json!({"role": "user", "content": parts}));
    turn.push(msg("assistant", "a small image"));
    SessionStore::open(&home.path().join("state.db"))
        .unwrap()
        .append_turn(sid, &TurnMeta::api("work", Some("gpt-test".into())), &turn)
        .unwrap();

    let listed = python(
        &agent,
        home.path(),
        "
import json, sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
rows = db.list_sessions_rich(limit=10)
print(json.dumps([{k: r.get(k) for k in ('id', 'source', 'model', 'message_count', 'tool_call_count', 'profile_name', 'preview')} for r in rows]))
db.close()
",
    );
    assert_eq!(
        listed,
        json!([{
            "id": sid, "source": "api_server", "model": "gpt-test", "message_count": 6,
            "tool_call_count": 1, "profile_name": "work", "preview": "what is in the box?"
        }])
    );

    let back = read_back(&agent, home.path(), sid);
    let mut expected: Vec<Value> = turn.clone();
    // The original names a tool result's tool `tool_name`, and says nothing of an absent one.
    expected[2] = json!({"role": "tool", "tool_call_id": "call_1", "tool_name": "lookup", "content": "a cat"});
    assert_eq!(back["messages"], Value::Array(expected));
}

#[test]
fn the_original_cli_lists_our_session() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let sid = "api-0123456789abcdef";
    SessionStore::open(&home.path().join("state.db"))
        .unwrap()
        .append_turn(
            sid,
            &TurnMeta::api("default", Some("gpt-test".into())),
            &[
                msg("user", "hello from the native gateway"),
                msg("assistant", "hi"),
            ],
        )
        .unwrap();
    let out = Command::new(&agent.hermes)
        .args(["sessions", "list"])
        .env("HERMES_HOME", home.path())
        .env("HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.contains(sid))
        .unwrap_or_else(|| panic!("`hermes sessions list` does not show {sid}:\n{stdout}"));
    assert!(line.contains("hello from the native gateway"), "{line}");
    assert!(line.contains("api_se"), "{line}");
}

/// `sqlite_master` as `(type, name, table, sql)` rows, in a stable order.
fn schema_of(db: &Path) -> Vec<(String, String, String, Option<String>)> {
    let conn = Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn our_new_database_has_the_original_schema_and_it_opens_it_unchanged() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let theirs = tempfile::tempdir().unwrap();
    let created = python(
        &agent,
        theirs.path(),
        "
import json, sys
from pathlib import Path
from hermes_state import SessionDB
SessionDB(db_path=Path(sys.argv[1])).close()
print('{}')
",
    );
    assert_eq!(created, json!({}));
    let ours = tempfile::tempdir().unwrap();
    let db = ours.path().join("state.db");
    drop(SessionStore::open(&db).unwrap());
    let our_schema = schema_of(&db);
    assert_eq!(our_schema, schema_of(&theirs.path().join("state.db")));

    // The original opens ours and finds nothing to migrate: same schema, same version.
    let version = python(
        &agent,
        ours.path(),
        "
import json, sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
print(json.dumps(db._conn.execute('SELECT version FROM schema_version').fetchall()[0][0]))
db.close()
",
    );
    assert_eq!(version, json!(22));
    assert_eq!(schema_of(&db), our_schema);
}

#[test]
fn the_original_writing_at_the_same_time_loses_nothing() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("state.db");
    let store = SessionStore::open(&db).unwrap();
    let theirs = {
        let agent = agent.clone();
        let home = home.path().to_path_buf();
        std::thread::spawn(move || {
            python(
                &agent,
                &home,
                "
import json, sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
db.create_session('race', source='cli')
for i in range(100):
    db.append_message('race', 'user', f'theirs {i}')
db.close()
print('{}')
",
            )
        })
    };
    // Keep writing for as long as the original does, so the writes overlap.
    let mut ours = 0;
    while ours < 100 || !theirs.is_finished() {
        store
            .append("race", "default", &[msg("user", &format!("ours {ours}"))])
            .unwrap();
        ours += 1;
    }
    assert_eq!(theirs.join().unwrap(), json!({}));
    let history = store.history("race").unwrap();
    assert_eq!(history.len(), 100 + ours);
    for (side, n) in [("theirs", 100), ("ours", ours)] {
        let seen: Vec<String> = history
            .iter()
            .filter_map(|m| m["content"].as_str())
            .filter(|c| c.starts_with(side))
            .map(str::to_string)
            .collect();
        let expected: Vec<String> = (0..n).map(|i| format!("{side} {i}")).collect();
        assert_eq!(seen, expected, "{side}");
    }
    assert_eq!(
        session_row(&db, "race").2,
        i64::try_from(100 + ours).unwrap()
    );
}
