use std::fs;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::*;
use crate::create::{Identity, create_file};
use crate::schedule::archive_name;
use crate::select::Scope;

/// A volume with a default profile and `work`, each with a `state.db` of `rows` messages.
fn volume(dir: &Path, rows: usize) -> PathBuf {
    let root = dir.join("data");
    for profile in [root.clone(), root.join("profiles/work")] {
        fs::create_dir_all(&profile).unwrap();
        fs::write(profile.join("SOUL.md"), "soul").unwrap();
        let conn = Connection::open(profile.join("state.db")).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE messages(id INTEGER PRIMARY KEY, content TEXT);",
        )
        .unwrap();
        add_rows(&conn, 0, rows);
    }
    root
}

fn add_rows(conn: &Connection, from: usize, to: usize) {
    let tx = conn.unchecked_transaction().unwrap();
    for i in from..to {
        tx.execute(
            "INSERT INTO messages(content) VALUES (?1)",
            [format!("message {i} {}", "x".repeat(300))],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

fn rows(db: &Path) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap()
}

/// Eight bytes overwritten inside a table page, the file checkpointed first so the page is in
/// it: `quick_check` finds it, the file still opens.
fn damage(db: &Path) {
    Connection::open(db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    let mut bytes = fs::read(db).unwrap();
    let at = 4096 * 4;
    bytes[at..at + 8].copy_from_slice(&[0xff; 8]);
    fs::write(db, bytes).unwrap();
}

/// A backup of the whole volume into `archives`, named as a scheduled one made at `unix`.
fn archive(root: &Path, archives: &Path, unix: i64) -> PathBuf {
    fs::create_dir_all(archives).unwrap();
    let name = archive_name(time::OffsetDateTime::from_unix_timestamp(unix).unwrap());
    let out = archives.join(name);
    create_file(
        root,
        &Scope::default(),
        &Identity::default(),
        crate::Compression::default(),
        &out,
        &mut |_| {},
    )
    .unwrap();
    out
}

fn check(root: &Path, archives: &Path, mode: Mode) -> Vec<Checked> {
    let found = check_volume(root, &[archives.to_path_buf()], &mode, &mut |_| {}).unwrap();
    assert!(found.warnings.is_empty(), "{:?}", found.warnings);
    found.databases
}

#[test]
fn a_sound_volume_is_sound_and_leaves_no_record() {
    let dir = tempfile::tempdir().unwrap();
    let root = volume(dir.path(), 50);
    fs::create_dir_all(root.join("state")).unwrap();
    fs::write(db_check::path(&root), r#"{"checked_at":"x","damaged":[]}"#).unwrap();
    let found = check(&root, &root.join("backups"), Mode::Repair);
    assert_eq!(found.len(), 2);
    assert!(
        found.iter().all(|c| c.verdict == Verdict::Sound),
        "{found:?}"
    );
    assert!(!db_check::path(&root).exists(), "an old record is removed");
}

#[test]
fn a_damaged_database_without_an_archive_is_kept_in_place_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let root = volume(dir.path(), 200);
    let work = root.join("profiles/work");
    damage(&work.join("state.db"));
    let before = fs::read(work.join("state.db")).unwrap();

    for mode in [Mode::Report, Mode::Repair] {
        let found = check(&root, &root.join("backups"), mode);
        let bad = found.iter().find(|c| c.damaged.is_some()).unwrap();
        assert_eq!(
            (bad.profile.as_str(), bad.file.as_str()),
            ("work", "state.db")
        );
        assert_eq!(
            fs::read(work.join("state.db")).unwrap(),
            before,
            "unchanged"
        );
        let record = db_check::read(&work).unwrap();
        assert!(record.damaged[0].still_served());
        assert!(
            bad.describe().contains("still served"),
            "{}",
            bad.describe()
        );
    }
    assert!(
        db_check::read(&root).is_none(),
        "the default profile is sound"
    );
}

#[test]
fn a_damaged_database_is_restored_from_the_newest_sound_copy_and_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let root = volume(dir.path(), 200);
    let archives = root.join("backups");
    let older = archive(&root, &archives, 1_700_000_000);
    let work_db = root.join("profiles/work/state.db");
    add_rows(&Connection::open(&work_db).unwrap(), 200, 300);
    let newer = archive(&root, &archives, 1_700_003_600);
    // Written after the newest archive: in a `-wal` the damage check reads through.
    let conn = Connection::open(&work_db).unwrap();
    add_rows(&conn, 300, 310);
    drop(conn);
    damage(&work_db);
    let damaged = fs::read(&work_db).unwrap();

    let found = check(&root, &archives, Mode::Repair);
    let bad = found.iter().find(|c| c.damaged.is_some()).unwrap();
    let Some(Damaged {
        repair: Repair::Restored {
            archive, set_aside, ..
        },
        ..
    }) = &bad.damaged
    else {
        panic!("not restored: {}", bad.describe());
    };
    assert_eq!(archive, &newer, "the newest archive, not {older:?}");
    assert_eq!(rows(&work_db), 300, "the rows of the newest archive");
    assert_eq!(
        fs::read(set_aside).unwrap(),
        damaged,
        "the damaged copy kept"
    );
    assert!(set_aside.starts_with(archives.join(SET_ASIDE_DIR)));
    assert_eq!(
        integrity::quick_check(&work_db, CHECK_BUDGET),
        Verdict::Sound
    );
    let record = db_check::read(&root.join("profiles/work")).unwrap();
    assert!(!record.damaged[0].still_served());

    // The next check finds it sound: the record goes.
    check(&root, &archives, Mode::Repair);
    assert!(db_check::read(&root.join("profiles/work")).is_none());
}

#[test]
fn an_archive_whose_copy_is_damaged_too_is_passed_over_for_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let root = volume(dir.path(), 200);
    let archives = root.join("backups");
    archive(&root, &archives, 1_700_000_000);
    let db = root.join("state.db");
    damage(&db);
    // The newest archive was taken of the damaged file: its copy fails `integrity_check`.
    archive(&root, &archives, 1_700_003_600);

    let found = check(&root, &archives, Mode::Repair);
    let bad = found.iter().find(|c| c.profile == "default").unwrap();
    match &bad.damaged.as_ref().unwrap().repair {
        Repair::Restored { archive, .. } => {
            assert!(archive.ends_with(archive_name(
                time::OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap()
            )));
        }
        kept => panic!("not restored: {kept:?}"),
    }
    assert_eq!(rows(&db), 200);
}

#[test]
fn a_start_that_is_told_to_keep_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let root = volume(dir.path(), 200);
    let archives = root.join("backups");
    archive(&root, &archives, 1_700_000_000);
    damage(&root.join("state.db"));
    let before = fs::read(root.join("state.db")).unwrap();
    let found = check(
        &root,
        &archives,
        Mode::Keep("`backup.restore_corrupt` is off".into()),
    );
    let bad = found.iter().find(|c| c.damaged.is_some()).unwrap();
    assert!(
        bad.describe().contains("restore_corrupt"),
        "{}",
        bad.describe()
    );
    assert_eq!(fs::read(root.join("state.db")).unwrap(), before);
}

#[test]
fn archives_of_both_names_are_tried_newest_first() {
    assert_eq!(
        made_at("hermes-backup-20261202-101500.zip").as_deref(),
        Some("20261202101500")
    );
    assert_eq!(
        made_at("hermes-backup-20261202T101501Z.zip").as_deref(),
        Some("20261202101501")
    );
    assert_eq!(
        made_at("hermes-dashboard-20261202-101502-2.zip").as_deref(),
        Some("20261202101502")
    );
    assert_eq!(
        made_at("hermes-backup-20261202T101501Z-2.zip").as_deref(),
        Some("20261202101501")
    );
    for other in [
        "hermes-backup-2026-12-02-101500.zip",
        "hermes-backup-20261202T1015Z.zip",
        "notes.zip",
        "hermes-backup-2026120x-101500.zip",
        "hermes-dashboard-20261202-101502-x.zip",
        "hermes-backup-20261202T101501Z-.zip",
        "hermes-backup-20261202T101501Z-x.zip",
        "hermes-dashboard-20261202.zip",
    ] {
        assert_eq!(made_at(other), None, "{other}");
    }
    let dir = tempfile::tempdir().unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    for name in [
        "hermes-backup-20261202-101500.zip",
        "hermes-backup-20261202T101501Z.zip",
        "hermes-backup-20261201-000000.zip",
        "other.zip",
    ] {
        fs::write(dir.path().join(name), "").unwrap();
    }
    fs::write(
        other_dir
            .path()
            .join("hermes-dashboard-20261202-101502.zip"),
        "",
    )
    .unwrap();
    let dirs = [
        dir.path().to_path_buf(),
        other_dir.path().to_path_buf(),
        dir.path().to_path_buf(),
    ];
    let names: Vec<String> = archives_newest_first(&dirs)
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "hermes-dashboard-20261202-101502.zip",
            "hermes-backup-20261202T101501Z.zip",
            "hermes-backup-20261202-101500.zip",
            "hermes-backup-20261201-000000.zip",
        ]
    );
}

#[test]
fn a_damaged_database_a_process_holds_open_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let root = volume(dir.path(), 200);
    let archives = root.join("backups");
    archive(&root, &archives, 1_700_000_000);
    let db = root.join("state.db");
    damage(&db);
    let before = fs::read(&db).unwrap();
    // A gateway still running: it has the database open.
    let gateway = hermes_test_support::held::HeldOpen::new(&db);
    let found = check(&root, &archives, Mode::Repair);
    drop(gateway);
    let bad = found.iter().find(|c| c.damaged.is_some()).unwrap();
    assert!(
        bad.describe().contains("is open in sh (pid") && bad.describe().contains("gateway stop"),
        "{}",
        bad.describe()
    );
    assert_eq!(fs::read(&db).unwrap(), before, "not replaced under it");
}
