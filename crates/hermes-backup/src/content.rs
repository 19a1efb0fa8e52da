//! What a database holds, as one digest: its schema and every row, not its bytes.
//!
//! A restore compares the volume's files with the archive's to leave the same ones alone. For a
//! database bytes say little: the archive's copy comes from SQLite's online backup API, whose
//! pages differ from the live file's (free pages, the WAL not yet checkpointed, page order), so
//! a restore right after a backup "replaced" every database and restarted every gateway. Two
//! databases with the same [`digest`] hold the same schema and rows: replacing one with the
//! other changes nothing a reader can see.
//!
//! The digest covers `user_version` and `application_id` (the schema versions the agent and
//! SQLite tools read), each object of `sqlite_master` but its root page (type, name, table,
//! SQL), and each table's rows in rowid order (or, for a table without rowid, in the order of
//! all its columns), each value with its type. A virtual table's rows are its shadow tables',
//! which are hashed as tables; the virtual table itself is hashed by its SQL only.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use sha2::{Digest, Sha256};

/// The digest of what the database at `db` holds (module doc), read in one read transaction,
/// so a writer's commit in between is wholly in it or wholly out.
///
/// Opened read-write, though it only reads: a read-only connection to a database in WAL mode
/// creates its `-wal` and `-shm` and cannot remove them, while the last read-write connection
/// removes them as it closes — the volume is left as it was found.
///
/// # Errors
/// The file cannot be opened as a database or read.
pub fn digest(db: &Path) -> rusqlite::Result<String> {
    let conn = Connection::open_with_flags(
        db,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch("BEGIN")?;
    let mut hasher = Sha256::new();
    for pragma in ["user_version", "application_id"] {
        let value: i64 = conn.query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))?;
        field(&mut hasher, pragma.as_bytes());
        field(&mut hasher, &value.to_le_bytes());
    }
    let mut objects = conn.prepare(
        "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name",
    )?;
    let objects: Vec<[String; 4]> = objects
        .query_map([], |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?]))?
        .collect::<rusqlite::Result<_>>()?;
    for object in &objects {
        for part in object {
            field(&mut hasher, part.as_bytes());
        }
    }
    for [kind, name, _, sql] in &objects {
        let is_virtual = sql
            .trim_start()
            .get(..20)
            .is_some_and(|head| head.eq_ignore_ascii_case("CREATE VIRTUAL TABLE"));
        if kind == "table" && !is_virtual {
            rows(&conn, name, &mut hasher)?;
        }
    }
    conn.execute_batch("COMMIT")?;
    Ok(crate::manifest::hex(&hasher.finalize()))
}

/// Hashes every row of `table`, in rowid order, else in the order of all its columns.
fn rows(conn: &Connection, table: &str, hasher: &mut Sha256) -> rusqlite::Result<()> {
    let quoted = format!("\"{}\"", table.replace('"', "\"\""));
    let mut stmt = match conn.prepare(&format!("SELECT * FROM {quoted} ORDER BY rowid")) {
        Ok(stmt) => stmt,
        // A table WITHOUT ROWID has no rowid to order by.
        Err(_) => {
            let columns = conn
                .prepare(&format!("SELECT * FROM {quoted} LIMIT 0"))?
                .column_count();
            let order: Vec<String> = (1..=columns).map(|i| i.to_string()).collect();
            conn.prepare(&format!(
                "SELECT * FROM {quoted} ORDER BY {}",
                order.join(", ")
            ))?
        }
    };
    let columns = stmt.column_count();
    field(hasher, table.as_bytes());
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        hasher.update(b"r");
        for i in 0..columns {
            match row.get_ref(i)? {
                ValueRef::Null => hasher.update(b"n"),
                ValueRef::Integer(v) => {
                    hasher.update(b"i");
                    hasher.update(v.to_le_bytes());
                }
                ValueRef::Real(v) => {
                    hasher.update(b"f");
                    hasher.update(v.to_bits().to_le_bytes());
                }
                ValueRef::Text(v) => {
                    hasher.update(b"t");
                    field(hasher, v);
                }
                ValueRef::Blob(v) => {
                    hasher.update(b"b");
                    field(hasher, v);
                }
            }
        }
    }
    Ok(())
}

/// A length-prefixed field, so `("ab", "c")` and `("a", "bc")` differ.
fn field(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(dir: &Path, name: &str, setup: &str) -> std::path::PathBuf {
        let path = dir.join(name);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(setup).unwrap();
        path
    }

    const SCHEMA: &str = "PRAGMA journal_mode=WAL;
        CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT, n INTEGER, score REAL, raw BLOB);
        CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
        CREATE VIRTUAL TABLE notes USING fts5(body);
        PRAGMA user_version = 7;";

    #[test]
    fn a_copy_by_the_backup_api_has_the_digest_of_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let live = db(
            dir.path(),
            "live.db",
            &format!(
                "{SCHEMA}
                INSERT INTO sessions VALUES ('a', 'first', 1, 0.5, x'00ff'), ('b', NULL, 2, NULL, NULL);
                INSERT INTO kv VALUES ('z', '1'), ('y', '2');
                INSERT INTO notes VALUES ('hello world');
                DELETE FROM sessions WHERE id = 'b';"
            ),
        );
        // The copy a backup takes: same rows, other bytes (the live file's WAL, free pages).
        let copy = dir.path().join("copy.db");
        {
            let src = Connection::open(&live).unwrap();
            let mut dst = Connection::open(&copy).unwrap();
            let backup = rusqlite::backup::Backup::new(&src, &mut dst).unwrap();
            backup
                .run_to_completion(64, std::time::Duration::ZERO, None)
                .unwrap();
        }
        Connection::open(&copy)
            .unwrap()
            .execute_batch("PRAGMA journal_mode=DELETE; VACUUM;")
            .unwrap();
        assert_ne!(std::fs::read(&live).unwrap(), std::fs::read(&copy).unwrap());
        assert_eq!(digest(&live).unwrap(), digest(&copy).unwrap());
    }

    #[test]
    fn any_change_a_reader_can_see_changes_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        let base = "INSERT INTO sessions VALUES ('a', 'first', 1, 0.5, x'00');
                    INSERT INTO kv VALUES ('k', 'v');";
        let reference = digest(&db(dir.path(), "ref.db", &format!("{SCHEMA}{base}"))).unwrap();
        let changes = [
            "UPDATE sessions SET title = 'other'",
            "UPDATE sessions SET raw = CAST(x'00' AS TEXT)", // the same byte, as text
            "UPDATE sessions SET score = 0.25",
            "UPDATE sessions SET raw = x'01'",
            "INSERT INTO sessions (id) VALUES ('b')",
            "UPDATE kv SET v = 'w'",
            "INSERT INTO notes VALUES ('new')",
            "PRAGMA user_version = 8",
            "CREATE INDEX by_title ON sessions(title)",
        ];
        for (i, change) in changes.iter().enumerate() {
            let other = db(
                dir.path(),
                &format!("other{i}.db"),
                &format!("{SCHEMA}{base}{change};"),
            );
            assert_ne!(digest(&other).unwrap(), reference, "{change}");
        }
    }

    #[test]
    fn a_file_that_is_not_a_database_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not.db");
        std::fs::write(&path, "hello, this is text and not SQLite at all").unwrap();
        assert!(digest(&path).is_err());
    }
}
