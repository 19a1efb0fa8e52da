//! Is a database sound? `PRAGMA quick_check` within a time budget ([`quick_check`]).
//!
//! `quick_check` reads every page and checks each one's structure (it skips only the
//! cross-check of indexes against their tables that `integrity_check` adds), so it finds a
//! page overwritten in place — the damage a torn write or a stray writer leaves — in about the
//! time of reading the file. A database larger than the budget allows is interrupted and said
//! to be unchecked, never guessed sound.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// What a check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `quick_check` said `ok`.
    Sound,
    /// It found damage, or the file is not a database SQLite can open: what it said (the
    /// first few lines, joined).
    Damaged(String),
    /// It could not finish: the budget ran out, or the database was busy.
    Unchecked(String),
}

/// How many of `quick_check`'s lines a verdict keeps (a badly damaged file yields thousands).
const LINES_KEPT: usize = 3;

/// Runs `PRAGMA quick_check` on the database at `db`, interrupted after `budget`.
///
/// Opened read-write (never created, no link followed) where allowed, so that a database left
/// with a `-wal` by a killed writer is read with it and its side files are tidied as every
/// writer's last close does; read-only otherwise. Callers run it when no gateway of the profile
/// runs, or accept that a live writer's transaction is not seen.
pub fn quick_check(db: &Path, budget: Duration) -> Verdict {
    let flags = OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let mut conn = match Connection::open_with_flags(db, flags | OpenFlags::SQLITE_OPEN_READ_WRITE)
        .or_else(|_| Connection::open_with_flags(db, flags | OpenFlags::SQLITE_OPEN_READ_ONLY))
    {
        Ok(conn) => conn,
        Err(e) => return Verdict::Damaged(format!("cannot be opened: {e}")),
    };
    let _ = conn.busy_timeout(Duration::from_secs(5));
    let deadline = Instant::now() + budget;
    // Asked every few thousand virtual-machine steps: past the deadline, the statement stops.
    let _ = conn.progress_handler(4096, Some(move || Instant::now() >= deadline));
    let rows = run(&conn);
    match rows {
        Ok(lines) if lines == ["ok"] => Verdict::Sound,
        Ok(lines) => {
            let mut said: Vec<&str> = lines.iter().take(LINES_KEPT).map(String::as_str).collect();
            let more = lines.len().saturating_sub(LINES_KEPT);
            let extra = (more > 0).then(|| format!("and {more} more"));
            said.extend(extra.as_deref());
            Verdict::Damaged(format!("quick_check: {}", said.join("; ")))
        }
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::OperationInterrupted =>
        {
            Verdict::Unchecked(format!(
                "not checked: it takes longer than {} s",
                budget.as_secs()
            ))
        }
        Err(rusqlite::Error::SqliteFailure(e, msg))
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            Verdict::Unchecked(format!(
                "not checked: busy ({})",
                msg.unwrap_or_else(|| e.to_string())
            ))
        }
        Err(e) => Verdict::Damaged(e.to_string()),
    }
}

fn run(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare("PRAGMA quick_check")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(path: &Path, rows: usize) {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE messages(id INTEGER PRIMARY KEY, content TEXT);",
        )
        .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        for i in 0..rows {
            tx.execute(
                "INSERT INTO messages(content) VALUES (?1)",
                [format!("message {i} {}", "x".repeat(200))],
            )
            .unwrap();
        }
        tx.commit().unwrap();
        conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .unwrap();
    }

    #[test]
    fn a_sound_database_passes_and_an_overwritten_page_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        database(&db, 2000);
        assert_eq!(quick_check(&db, Duration::from_secs(10)), Verdict::Sound);

        // Eight bytes overwritten inside a table page (not the header: the file still opens).
        let mut bytes = std::fs::read(&db).unwrap();
        let page = 4096 * 5;
        bytes[page..page + 8].copy_from_slice(b"\xff\xff\xff\xff\xff\xff\xff\xff");
        std::fs::write(&db, &bytes).unwrap();
        match quick_check(&db, Duration::from_secs(10)) {
            Verdict::Damaged(said) => assert!(!said.is_empty()),
            other => panic!("damage not found: {other:?}"),
        }
    }

    #[test]
    fn a_file_that_is_no_database_is_damaged_and_a_missing_one_is_not_created() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        std::fs::write(&db, vec![0x41u8; 8192]).unwrap();
        assert!(matches!(
            quick_check(&db, Duration::from_secs(5)),
            Verdict::Damaged(_)
        ));
        let missing = dir.path().join("missing.db");
        assert!(matches!(
            quick_check(&missing, Duration::from_secs(5)),
            Verdict::Damaged(_)
        ));
        assert!(!missing.exists());
    }

    #[test]
    fn a_check_past_its_budget_is_unchecked_not_sound() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        database(&db, 20_000);
        let verdict = quick_check(&db, Duration::ZERO);
        assert!(matches!(verdict, Verdict::Unchecked(_)), "{verdict:?}");
    }
}
