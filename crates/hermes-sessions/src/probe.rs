//! A read-only look at a `state.db`, for the readiness checks
//! ([`hermes_home::readiness::StateDb`]) of the gateway and the dashboard.

use std::path::Path;
use std::time::Duration;

use hermes_home::readiness::StateDb;

/// How long the probe may wait for a busy database.
const TIMEOUT: Duration = Duration::from_secs(1);

/// Reads `path`'s schema read-only, as the original's probe does: it never creates the file,
/// never takes a write lock, and waits at most a second for a busy database.
pub fn probe(path: &Path) -> StateDb {
    if !path.exists() {
        return StateDb::Missing;
    }
    let read = || -> Result<(), rusqlite::Error> {
        // No CREATE flag: a file removed since the look above is an error, not a new file.
        let conn = rusqlite::Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(TIMEOUT)?;
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |row| {
            row.get::<_, i64>(0)
        })?;
        Ok(())
    };
    match read() {
        Ok(()) => StateDb::Readable,
        Err(e) => StateDb::Unreadable(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_db_probe_reads_without_creating() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        assert_eq!(probe(&path), StateDb::Missing);
        assert!(!path.exists(), "a probe must not create the database");
        assert_eq!(StateDb::Missing.check(true)["status"], "ok");
        assert_eq!(StateDb::Missing.check(true)["detail"], "not initialized");
        assert_eq!(StateDb::Missing.check(false)["status"], "degraded");
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (x)")
            .unwrap();
        assert_eq!(probe(&path), StateDb::Readable);
        std::fs::write(&path, b"this is not a database, just bytes long enough").unwrap();
        let bad = probe(&path);
        assert!(matches!(bad, StateDb::Unreadable(_)), "{bad:?}");
        assert_eq!(bad.check(true)["status"], "degraded");
    }
}
