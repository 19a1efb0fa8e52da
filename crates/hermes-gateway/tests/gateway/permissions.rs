//! File modes of the session store: `state.db` holds every conversation, so a new one (and
//! the `-wal` / `-shm` files SQLite makes next to it) is private (0600) under the usual umask
//! 022, while an existing database keeps the mode its owner gave it.
//!
//! This file is its own test process, so setting the umask here affects no other test binary.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use hermes_sessions::SessionStore;
use nix::sys::stat::{Mode, umask};
use serde_json::json;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

fn side(db: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}

#[test]
fn a_new_state_db_and_its_wal_files_are_private() {
    umask(Mode::from_bits_truncate(0o022));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let store = SessionStore::open(&db).unwrap();
    store
        .append("s1", "p", &[json!({"role": "user", "content": "a secret"})])
        .unwrap();
    // The store is still open, so WAL mode keeps its side files in place.
    for path in [db.clone(), side(&db, "-wal"), side(&db, "-shm")] {
        assert_eq!(mode(&path), 0o600, "{}", path.display());
    }
    drop(store);
    // What the gateway writes can be read back.
    let again = SessionStore::open(&db).unwrap();
    assert_eq!(again.history("s1").unwrap().len(), 1);
    assert_eq!(mode(&db), 0o600);
}

#[test]
fn an_existing_state_db_keeps_its_mode() {
    umask(Mode::from_bits_truncate(0o022));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    // A database another program (the original, or an operator) made and chose a mode for.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE other (x); INSERT INTO other VALUES (1);")
        .unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o640)).unwrap();
    let store = SessionStore::open(&db).unwrap();
    store
        .append("s1", "p", &[json!({"role": "user", "content": "hi"})])
        .unwrap();
    assert_eq!(mode(&db), 0o640, "an existing database is not chmod-ed");
    // SQLite gives the side files the database's mode.
    assert_eq!(mode(&side(&db, "-wal")), 0o640);
}
