//! Our readers never take a live writer's side files away (upstream #101064, #110497: WAL
//! sidecars unlinked by short-lived processes, and the writer's next commits lost). A writer —
//! another process, as a gateway is — keeps `state.db` open in WAL mode with commits only in its
//! `-wal` (no checkpoint), while every command of ours that opens databases runs beside it:
//! `backup create`, `backup check` (and its `--repair`), `doctor`, `sessions list`, `backup
//! verify`. Afterwards the `-wal` and `-shm` are the same files, the writer goes on committing,
//! and once it closes every row it committed is in the database.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};

use crate::util::{TestContext, render};

/// A writer in another process: Python's sqlite3, WAL, no automatic checkpoint; it commits a
/// row per line it reads (`add`), and answers each line with `ok`.
const WRITER: &str = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=WAL")
c.execute("PRAGMA wal_autocheckpoint=0")
c.execute("CREATE TABLE IF NOT EXISTS messages(id INTEGER PRIMARY KEY, role TEXT, content TEXT)")
for line in sys.stdin:
    c.execute("INSERT INTO messages(role, content) VALUES ('user', ?)", (line.strip(),))
    print("ok", flush=True)
c.close()
"#;

fn id(path: &std::path::Path) -> (u64, u64) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (meta.dev(), meta.ino())
}

#[test]
fn our_readers_never_take_a_live_writers_side_files() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let db = t.root().join("state.db");
    let mut writer = Command::new("python3")
        .args(["-c", WRITER])
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_writer = writer.stdin.take().unwrap();
    let mut from_writer = BufReader::new(writer.stdout.take().unwrap());
    let mut commit = |n: usize| {
        writeln!(to_writer, "turn {n}").unwrap();
        let mut answer = String::new();
        from_writer.read_line(&mut answer).unwrap();
        assert_eq!(answer.trim(), "ok");
    };
    for n in 0..50 {
        commit(n);
    }
    let wal = t.root().join("state.db-wal");
    let shm = t.root().join("state.db-shm");
    let (wal_id, shm_id) = (id(&wal), id(&shm));
    let archive = t.dir.path().join("a.zip");
    let archive_arg = archive.to_str().unwrap();
    let commands: [&[&str]; 6] = [
        &["backup", "create", "-o", archive_arg],
        &["backup", "verify", archive_arg],
        &["backup", "check"],
        &["backup", "check", "--repair"],
        &["doctor"],
        &["sessions", "list"],
    ];
    let mut n = 50;
    for args in commands {
        let out = t.run(args);
        // What each says is its own business (doctor may warn); the side files are ours.
        let _ = render(&out);
        assert_eq!(
            id(&wal),
            wal_id,
            "`hermes {}` left the -wal alone",
            args.join(" ")
        );
        assert_eq!(
            id(&shm),
            shm_id,
            "`hermes {}` left the -shm alone",
            args.join(" ")
        );
        commit(n);
        n += 1;
    }
    drop(to_writer);
    assert!(writer.wait().unwrap().success());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, n as i64, "every committed row is there");
}
