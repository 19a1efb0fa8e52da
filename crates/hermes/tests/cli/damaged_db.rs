//! A damaged `state.db` is never served silently. A volume's default profile holds sessions;
//! its `state.db` is damaged in place (eight bytes over a page's header, as a torn write
//! leaves it) while nothing runs. The next `hermes up`:
//!
//! * with an archive of the volume: says the database failed its check and was restored from
//!   the archive, sets the damaged files aside, and serves the sessions again; `service
//!   status` and `doctor` say what happened;
//! * without one: says the database is damaged and still served, and why; `service status`
//!   says it, and `doctor` fails naming it with the fix.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use hermes_test_support::poll;

use crate::load::StubUpstream;
use crate::util::{TestContext, free_port};

/// A plain chat turn in `session`: the status.
fn chat(port: u16, session: &str) -> u16 {
    let body = r#"{"model":"hermes","messages":[{"role":"user","content":"hello"}]}"#;
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer test-key-0123456789abcdef\r\nX-Hermes-Session-Id: {session}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    raw.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Eight bytes over the header of the database's second page (the root of its first table),
/// once every page is in the file
/// (a page still in the `-wal` would be read from there).
fn damage(db: &Path) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let mut bytes = std::fs::read(db).unwrap();
    bytes[4096..4096 + 8].copy_from_slice(&[0xff; 8]);
    std::fs::write(db, bytes).unwrap();
}

/// `hermes up -d`, once the default gateway serves: what it said in its log (`up.log`).
fn up(t: &TestContext, port: u16) -> (crate::util::Detached, String) {
    let log = t.root().join("logs/up.log");
    let _ = std::fs::remove_file(&log);
    let (up, _) = t.up_detached(&[]);
    poll::until_true("the default gateway up", Duration::from_secs(60), || {
        t.service("gateway-default")["state"] == "up"
    });
    assert_eq!(chat(port, "new-one"), 200, "a new session is served");
    (up, std::fs::read_to_string(&log).unwrap())
}

#[test]
fn a_damaged_state_db_is_restored_or_said_at_the_next_start() {
    let t = TestContext::new();
    let model = StubUpstream::start();
    let port = free_port();
    t.ok(&["config", "set", "model.default", "stub-model"]);
    let base_url = format!("http://127.0.0.1:{}/v1", model.port);
    t.ok(&["config", "set", "model.base_url", &base_url]);
    std::fs::write(
        t.root().join(".env"),
        format!("API_SERVER_KEY=test-key-0123456789abcdef\nAPI_SERVER_PORT={port}\n"),
    )
    .unwrap();

    let (mut supervisor, said) = up(&t, port);
    assert!(
        said.contains("database check: 0 of 0 databases sound"),
        "{said}"
    );
    for i in 0..40 {
        assert_eq!(chat(port, &format!("s{i}")), 200);
    }
    t.ok(&["backup", "create"]);
    t.ok(&["down"]);
    supervisor.stopped();
    let db = t.root().join("state.db");
    damage(&db);

    // With an archive: restored, the damaged copy set aside, said everywhere.
    let (mut supervisor, said) = up(&t, port);
    assert!(
        said.contains("database check: profile `default`: `state.db` failed its check")
            && said.contains("restored from"),
        "{said}"
    );
    for i in 0..40 {
        assert_eq!(
            chat(port, &format!("s{i}")),
            200,
            "session s{i} after the restore"
        );
    }
    let status = t.ok(&["service", "status"]);
    assert!(
        status.contains("database: `state.db` failed its check"),
        "{status}"
    );
    let doctor = t.ok(&["doctor"]);
    assert!(
        doctor.contains("at the last start, `state.db` failed its check"),
        "{doctor}"
    );
    let set_aside = std::fs::read_dir(t.root().join("backups/set-aside"))
        .unwrap()
        .count();
    assert!(set_aside >= 1);
    t.ok(&["down"]);
    supervisor.stopped();

    // Without one: still served, and said.
    std::fs::remove_dir_all(t.root().join("backups")).unwrap();
    damage(&db);
    let (mut supervisor, said) = up(&t, port);
    assert!(
        said.contains("`state.db` failed its check") && said.contains("is still served"),
        "{said}"
    );
    let status = t.ok(&["service", "status"]);
    assert!(status.contains("is still served"), "{status}");
    // Degraded, not unhealthy: a restart would find it damaged again.
    let health = t.ok(&["health"]);
    assert!(
        health.contains("degraded: profile `default`: `state.db` failed its check"),
        "{health}"
    );
    assert_eq!(t.run(&["health", "--strict"]).status.code(), Some(1));
    let doctor = t.run(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(1), "{doctor:?}");
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("`state.db` is damaged") && text.contains("backup check --repair"),
        "{text}"
    );
    t.ok(&["down"]);
    supervisor.stopped();
}
