//! `hermes backup`: archives that hold what they say, restores that are all or nothing — killed
//! at every step, on a full disk, against hostile archives and planted symlinks.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use crate::util::{TestContext, render};
use hermes_test_support::disk::SmallDisk;

/// Every entry under `dir`: its kind, mode, owner and bytes (a symlink: its target), so two
/// trees compare byte for byte.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let rel = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let meta = fs::symlink_metadata(entry.path()).unwrap();
            let head = format!("{:o} {}:{}", meta.mode(), meta.uid(), meta.gid());
            if meta.file_type().is_symlink() {
                let target = fs::read_link(entry.path()).unwrap();
                out.insert(rel, format!("link {head} -> {}", target.display()));
            } else if meta.is_dir() {
                out.insert(rel.clone(), format!("dir {head}"));
                walk(&entry.path(), &format!("{rel}/"), out);
            } else {
                let bytes = fs::read(entry.path()).unwrap();
                out.insert(rel, format!("file {head} {:?}", sha(&bytes)));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out);
    out
}

fn sha(bytes: &[u8]) -> String {
    use std::fmt::Write;
    // A cheap stable digest is enough to compare trees; FNV-1a over the bytes and the length.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
    }
    let mut s = String::new();
    let _ = write!(s, "{h:016x}/{}", bytes.len());
    s
}

/// A volume with a named profile, a WAL database with rows, secrets, a lock file, and the
/// runtime files a backup must leave out.
fn volume(t: &TestContext) -> PathBuf {
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let root = t.root();
    let db = rusqlite::Connection::open(root.join("state.db")).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode=WAL; CREATE TABLE messages(id INTEGER PRIMARY KEY, body TEXT);",
    )
    .unwrap();
    for i in 0..200 {
        db.execute(
            "INSERT INTO messages(body) VALUES (?1)",
            [format!("message {i}")],
        )
        .unwrap();
    }
    drop(db);
    fs::write(root.join(".env"), "OPENAI_API_KEY=sk-test-1\n").unwrap();
    fs::set_permissions(root.join(".env"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(root.join("profiles/work/.env"), "WORK=1\n").unwrap();
    fs::write(root.join("config.yaml.lock"), "").unwrap();
    fs::write(
        root.join("gateway_state.json"),
        r#"{"gateway_state":"running"}"#,
    )
    .unwrap();
    fs::write(root.join("profiles/work/gateway.pid"), "4242").unwrap();
    fs::create_dir_all(root.join("skills/web")).unwrap();
    fs::write(root.join("skills/web/SKILL.md"), "# web\n").unwrap();
    root
}

/// The archive's comment and each entry's, by name.
fn comments_in(archive: &Path) -> (String, std::collections::BTreeMap<String, String>) {
    let mut zip = zip::ZipArchive::new(fs::File::open(archive).unwrap()).unwrap();
    let header = String::from_utf8(zip.comment().to_vec()).unwrap();
    let entries = (0..zip.len())
        .map(|i| {
            let entry = zip.by_index(i).unwrap();
            (
                entry.name().unwrap().into_owned(),
                entry.comment().to_owned(),
            )
        })
        .collect();
    (header, entries)
}

fn names_in(archive: &Path) -> Vec<String> {
    let mut zip = zip::ZipArchive::new(fs::File::open(archive).unwrap()).unwrap();
    (0..zip.len())
        .map(|i| zip.by_index(i).unwrap().name().unwrap().into_owned())
        .collect()
}

fn entry_text(archive: &Path, name: &str) -> String {
    let mut zip = zip::ZipArchive::new(fs::File::open(archive).unwrap()).unwrap();
    let mut text = String::new();
    zip.by_name(name)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[test]
fn an_archive_holds_the_volume_without_its_runtime_files_and_restores_what_changed() {
    let t = TestContext::new();
    let root = volume(&t);
    let archive = t.dir.path().join("a.zip");
    let out = t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);
    assert!(out.contains("Backed up the whole volume"), "{out}");
    assert_eq!(fs::metadata(&archive).unwrap().mode() & 0o777, 0o600);
    let names = names_in(&archive);
    for wanted in [
        ".env",
        "state.db",
        "config.yaml",
        "profiles/work/.env",
        "skills/web/SKILL.md",
    ] {
        assert!(
            names.iter().any(|n| n == wanted),
            "{wanted} missing from {names:?}"
        );
    }
    for unwanted in [
        "gateway_state.json",
        "profiles/work/gateway.pid",
        "config.yaml.lock",
        "state.db-wal",
    ] {
        assert!(
            !names.iter().any(|n| n == unwanted),
            "{unwanted} must not be in {names:?}"
        );
    }
    // The manifest is in the zip's comments, so every entry is a file of the volume (the
    // original's import extracts every entry).
    assert!(
        !names.iter().any(|n| n.starts_with("backups/")),
        "{names:?}"
    );
    let (header, comments) = comments_in(&archive);
    let manifest: serde_json::Value = serde_json::from_str(&header).unwrap();
    assert_eq!(manifest["format"], "hermes-backup/2", "{manifest}");
    assert_eq!(manifest["files"], names.len(), "{manifest}");
    assert_eq!(manifest["config_versions"]["work"], 33, "{manifest}");
    assert!(
        manifest["build"].as_str().unwrap().starts_with("hermes "),
        "{manifest}"
    );
    let sha_of = |bytes: &[u8]| {
        use sha2::Digest;
        hermes_backup::manifest::hex(&sha2::Sha256::digest(bytes))
    };
    assert_eq!(
        comments["config.yaml"],
        format!(
            "sha256:{}",
            sha_of(entry_text(&archive, "config.yaml").as_bytes())
        ),
    );
    assert!(
        comments["state.db"].starts_with("sha256:") && comments["state.db"].ends_with(" sqlite"),
        "{comments:?}"
    );
    // Databases stored (a backup as fast as SQLite's own), everything else deflated; with
    // `--compress`, databases deflated too.
    let method = |archive: &Path, name: &str| {
        let mut zip = zip::ZipArchive::new(fs::File::open(archive).unwrap()).unwrap();
        zip.by_name(name).unwrap().compression()
    };
    assert_eq!(method(&archive, "state.db"), zip::CompressionMethod::Stored);
    assert_eq!(
        method(&archive, "config.yaml"),
        zip::CompressionMethod::Deflated
    );
    let small = t.dir.path().join("small.zip");
    t.ok(&[
        "backup",
        "create",
        "--compress",
        "-o",
        small.to_str().unwrap(),
    ]);
    assert_eq!(method(&small, "state.db"), zip::CompressionMethod::Deflated);
    let verified = t.ok(&["backup", "verify", archive.to_str().unwrap()]);
    assert!(
        verified.contains("OK: ") && verified.contains("every checksum matches"),
        "{verified}"
    );

    // Change the volume: a secret rewritten, a skill removed, a file added, the database lost
    // rows; the runtime file says something else.
    fs::write(root.join(".env"), "OPENAI_API_KEY=sk-other\n").unwrap();
    fs::remove_file(root.join("skills/web/SKILL.md")).unwrap();
    fs::remove_dir(root.join("skills/web")).unwrap();
    fs::write(root.join("notes.txt"), "new\n").unwrap();
    let db = rusqlite::Connection::open(root.join("state.db")).unwrap();
    db.execute("DELETE FROM messages WHERE id > 10", [])
        .unwrap();
    drop(db);
    fs::write(
        root.join("gateway_state.json"),
        r#"{"gateway_state":"stopped"}"#,
    )
    .unwrap();

    let plan = t.ok(&["backup", "restore", archive.to_str().unwrap(), "--dry-run"]);
    assert!(plan.contains("skills/web/SKILL.md"), "{plan}");
    assert!(
        plan.contains("notes.txt") && plan.contains("left as they are"),
        "{plan}"
    );
    assert_eq!(
        fs::read_to_string(root.join(".env")).unwrap(),
        "OPENAI_API_KEY=sk-other\n",
        "a dry run changes nothing"
    );

    let refused = t.run(&["backup", "restore", archive.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1), "{}", render(&refused));
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--yes"),
        "{}",
        render(&refused)
    );

    let done = t.ok(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    assert!(done.contains("Restored: 1 added, 2 replaced"), "{done}");
    assert_eq!(
        fs::read_to_string(root.join(".env")).unwrap(),
        "OPENAI_API_KEY=sk-test-1\n"
    );
    assert_eq!(
        fs::metadata(root.join(".env")).unwrap().mode() & 0o777,
        0o600
    );
    assert_eq!(
        fs::read_to_string(root.join("skills/web/SKILL.md")).unwrap(),
        "# web\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("notes.txt")).unwrap(),
        "new\n",
        "kept"
    );
    assert_eq!(
        fs::read_to_string(root.join("gateway_state.json")).unwrap(),
        r#"{"gateway_state":"stopped"}"#,
        "a runtime file is never restored"
    );
    let db = rusqlite::Connection::open(root.join("state.db")).unwrap();
    let rows: i64 = db
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 200);
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    assert!(
        !fs::read_dir(&root).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".restore-")),
        "the staging directory is gone"
    );
}

#[test]
fn a_restore_right_after_a_backup_replaces_nothing_and_never_rolls_a_log_back() {
    use std::os::unix::fs::MetadataExt;
    let t = TestContext::new();
    let root = volume(&t);
    // A gateway's view: the database open, its last writes still in the WAL; its log growing.
    let live = rusqlite::Connection::open(root.join("state.db")).unwrap();
    live.execute_batch("PRAGMA wal_autocheckpoint=0; INSERT INTO messages(body) VALUES ('live');")
        .unwrap();
    let log = root.join("logs/gateways/default/current");
    fs::create_dir_all(log.parent().unwrap()).unwrap();
    fs::write(&log, "before the backup\n").unwrap();
    let archive = t.dir.path().join("a.zip");
    t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);
    fs::write(&log, "before the backup\nafter the backup\n").unwrap();
    let inode = fs::metadata(root.join("state.db")).unwrap().ino();

    let plan = t.ok(&["backup", "restore", archive.to_str().unwrap(), "--dry-run"]);
    assert!(plan.contains("logs/gateways/default/current"), "{plan}");
    assert!(plan.contains("a log is never rolled back"), "{plan}");
    let done = t.ok(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    assert!(done.contains("Nothing to change"), "{done}");
    assert_eq!(
        fs::metadata(root.join("state.db")).unwrap().ino(),
        inode,
        "the database was left alone, not swapped for the archive's copy"
    );
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        "before the backup\nafter the backup\n"
    );
    let rows: i64 = live
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 201);

    // A database whose rows did change is still replaced.
    live.execute("DELETE FROM messages WHERE body = 'live'", [])
        .unwrap();
    drop(live);
    let done = t.ok(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    assert!(done.contains("Restored: 0 added, 1 replaced"), "{done}");
}

#[test]
fn a_scope_holds_only_its_profiles_and_quick_only_state() {
    let t = TestContext::new();
    volume(&t);
    let work = t.dir.path().join("work.zip");
    t.ok(&[
        "backup",
        "create",
        "-o",
        work.to_str().unwrap(),
        "--profile",
        "work",
    ]);
    let names = names_in(&work);
    assert!(
        names.iter().all(|n| n.starts_with("profiles/work/")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n == "profiles/work/config.yaml"),
        "{names:?}"
    );
    let quick = t.dir.path().join("quick.zip");
    t.ok(&["backup", "create", "-o", quick.to_str().unwrap(), "--quick"]);
    let names = names_in(&quick);
    assert!(
        names.iter().any(|n| n == "state.db") && names.iter().any(|n| n == "profiles/work/.env"),
        "{names:?}"
    );
    assert!(!names.iter().any(|n| n.starts_with("skills/")), "{names:?}");
    // A profile that is not there is named.
    let out = t.run(&["backup", "create", "-o", "x.zip", "--profile", "../etc"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
}

#[test]
fn an_archive_streamed_to_stdout_verifies_and_an_existing_output_is_never_replaced() {
    let t = TestContext::new();
    volume(&t);
    let out = t.cmd(&["backup", "create", "-o", "-"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Backed up"),
        "the summary goes to stderr"
    );
    let archive = t.dir.path().join("streamed.zip");
    fs::write(&archive, &out.stdout).unwrap();
    t.ok(&["backup", "verify", archive.to_str().unwrap()]);
    let again = t.run(&["backup", "create", "-o", archive.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already exists"),
        "{}",
        render(&again)
    );
    assert_eq!(
        fs::read(&archive).unwrap(),
        out.stdout,
        "the old archive is untouched"
    );
}

/// Rewrites `archive` with `change` applied to its entries (name, bytes), keeping their order.
type Change = dyn Fn(&str, Vec<u8>) -> Option<(String, Vec<u8>)>;

/// What a [`rewrite`] makes of the manifest (the zip's comments).
enum Manifest<'a> {
    /// Carried over as it is: it still lists what was archived.
    Kept,
    /// Left out: an archive of the original's kind.
    Dropped,
    /// The header (the archive's comment) edited, the entries' checksums kept.
    Edited(&'a dyn Fn(&mut serde_json::Value)),
    /// Moved to the entry `hermes-backup/1` archives kept it in, written last, listing what the
    /// archive held before the change.
    Legacy,
}

/// The `hermes-backup/1` manifest entry of an archive whose comments are `header` and
/// `comments` (name, comment, size of each entry).
fn legacy_manifest(header: &[u8], entries: &[(String, String, u64)]) -> Vec<u8> {
    let mut manifest: serde_json::Value = serde_json::from_slice(header).unwrap();
    manifest["format"] = "hermes-backup/1".into();
    manifest["files"] = entries
        .iter()
        .map(|(name, comment, size)| {
            let sha = comment.strip_prefix("sha256:").unwrap();
            let (sha, database) = sha.split_once(' ').map_or((sha, false), |(s, _)| (s, true));
            serde_json::json!({"path": name, "size": size, "sha256": sha, "database": database})
        })
        .collect();
    serde_json::to_vec_pretty(&manifest).unwrap()
}

/// Copies `archive` to `to`, each entry through `change` (renamed, edited, or left out).
fn rewrite(archive: &Path, to: &Path, manifest: Manifest<'_>, change: &Change) {
    let mut zip = zip::ZipArchive::new(fs::File::open(archive).unwrap()).unwrap();
    let mut out = zip::ZipWriter::new(fs::File::create(to).unwrap());
    let mut archived = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let name = entry.name().unwrap().into_owned();
        let comment = entry.comment().to_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        archived.push((name.clone(), comment.clone(), bytes.len() as u64));
        if let Some((name, bytes)) = change(&name, bytes) {
            let mut options = zip::write::SimpleFileOptions::default().into_full_options();
            if matches!(manifest, Manifest::Kept | Manifest::Edited(_)) {
                options = options.with_file_comment(comment.clone());
            }
            out.start_file(name, options).unwrap();
            out.write_all(&bytes).unwrap();
        }
    }
    match manifest {
        Manifest::Kept => out.set_raw_comment(zip.comment().into()).unwrap(),
        Manifest::Dropped => {}
        Manifest::Legacy => {
            out.start_file(
                "backups/hermes-backup-manifest.json",
                zip::write::SimpleFileOptions::default(),
            )
            .unwrap();
            out.write_all(&legacy_manifest(zip.comment(), &archived))
                .unwrap();
        }
        Manifest::Edited(edit) => {
            let mut header: serde_json::Value = serde_json::from_slice(zip.comment()).unwrap();
            edit(&mut header);
            out.set_comment(header.to_string()).unwrap();
        }
    }
    out.finish().unwrap();
}

#[test]
fn verify_names_what_is_wrong_and_restore_refuses_a_damaged_or_hostile_archive() {
    let t = TestContext::new();
    let root = volume(&t);
    let archive = t.dir.path().join("a.zip");
    t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);
    let before = tree(&root);

    let tampered = t.dir.path().join("tampered.zip");
    rewrite(&archive, &tampered, Manifest::Kept, &|name, mut bytes| {
        if name == "config.yaml" {
            bytes.extend_from_slice(b"# edited\n");
        }
        (name != "skills/web/SKILL.md").then(|| (name.to_owned(), bytes))
    });
    let out = t.run(&["backup", "verify", tampered.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("config.yaml: sha256 differs from the manifest"),
        "{text}"
    );
    assert!(
        text.contains("the archive's header counts ") && text.contains(" entries carry a checksum"),
        "a removed entry is counted missing: {text}"
    );

    // A database whose pages are damaged fails its integrity check.
    let corrupt = t.dir.path().join("corrupt.zip");
    rewrite(&archive, &corrupt, Manifest::Dropped, &|name, mut bytes| {
        if name == "state.db" {
            let len = bytes.len();
            for b in &mut bytes[len - 2000..len - 1000] {
                *b = 0x5a;
            }
        }
        Some((name.to_owned(), bytes))
    });
    let out = t.run(&["backup", "verify", corrupt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("state.db: "),
        "{}",
        render(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no manifest"),
        "{}",
        render(&out)
    );

    // An entry that climbs out of the volume.
    let hostile = t.dir.path().join("hostile.zip");
    rewrite(&archive, &hostile, Manifest::Kept, &|name, bytes| {
        Some(if name == "notes.md" || name == "SOUL.md" {
            ("../escaped.txt".into(), bytes)
        } else {
            (name.to_owned(), bytes)
        })
    });
    for file in [&tampered, &corrupt, &hostile] {
        let out = t.run(&["backup", "restore", file.to_str().unwrap(), "--yes"]);
        assert_eq!(out.status.code(), Some(1), "{}", render(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("failed verification"),
            "{}",
            render(&out)
        );
    }
    assert!(!t.dir.path().join("escaped.txt").exists());
    assert_eq!(tree(&root), before, "a refused restore changes nothing");

    // Not a zip at all.
    let junk = t.dir.path().join("junk.zip");
    fs::write(&junk, "not a zip").unwrap();
    let out = t.run(&["backup", "verify", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a readable zip"),
        "{}",
        render(&out)
    );
}

#[test]
fn a_planted_symlink_on_the_volume_stops_the_restore_before_anything_is_written() {
    let t = TestContext::new();
    let root = volume(&t);
    let archive = t.dir.path().join("a.zip");
    t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);
    // The profile directory replaced by a link to somewhere else.
    let elsewhere = t.dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    fs::rename(root.join("profiles/work"), t.dir.path().join("work-moved")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("profiles/work")).unwrap();
    fs::write(root.join(".env"), "CHANGED=1\n").unwrap();
    let before = tree(&root);
    let out = t.run(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is a symlink"),
        "{}",
        render(&out)
    );
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing written through the link"
    );
    assert_eq!(tree(&root), before);
}

/// The points where a restore can stop (see `HERMES_BACKUP_FAULT` in hermes-backup's
/// restore module), what `recover` then says, and whether the volume must be the one before
/// (`false`) or after (`true`: the restore had finished).
const KILL_POINTS: &[(&str, &str, bool)] = &[
    ("extracted:1", "changed nothing yet", false),
    ("extracted:3", "changed nothing yet", false),
    ("journal:0", "rolled back", false),
    ("aside:1", "rolled back", false),
    ("swapped:1", "rolled back", false),
    ("aside:2", "rolled back", false),
    ("swapped:3", "rolled back", false),
    ("swapped:4", "rolled back", false),
    ("done:0", "had finished", true),
];

#[test]
fn a_restore_killed_at_any_step_leaves_the_volume_byte_identical_once_recovered() {
    let t = TestContext::new();
    let root = volume(&t);
    let archive = t.dir.path().join("a.zip");
    t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);
    // Four files differ from the archive: two replaced, two added (one in a new directory).
    let change = |root: &Path| {
        fs::write(root.join(".env"), "OPENAI_API_KEY=sk-later\n").unwrap();
        fs::write(root.join("profiles/work/.env"), "WORK=2\n").unwrap();
        let _ = fs::remove_file(root.join("skills/web/SKILL.md"));
        let _ = fs::remove_dir(root.join("skills/web"));
        let _ = fs::remove_file(root.join("profiles/work/SOUL.md"));
    };
    // The live database's bytes differ from its snapshot's: restore once so that only the files
    // `change` touches differ.
    t.ok(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    change(&root);
    let before = tree(&root);
    t.ok(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    let after = tree(&root);
    assert_ne!(before, after);
    for (point, says, finished) in KILL_POINTS {
        change(&root);
        assert_eq!(
            tree(&root),
            before,
            "{point}: the set-up is the same each time"
        );
        let out = t
            .cmd(&["backup", "restore", archive.to_str().unwrap(), "--yes"])
            .env("HERMES_BACKUP_FAULT", point)
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            Some(9),
            "{point}: the restore must have been killed: {}",
            render(&out)
        );
        let recovered = t.run(&["backup", "recover"]);
        assert!(
            recovered.status.success(),
            "{point}: {}",
            render(&recovered)
        );
        let said = String::from_utf8_lossy(&recovered.stderr);
        assert!(said.contains(says), "{point}: {said}");
        let expected = if *finished { &after } else { &before };
        assert_eq!(
            &tree(&root),
            expected,
            "{point}: the volume is not what it was"
        );
    }
}

#[test]
fn a_disk_that_fills_during_create_or_restore_leaves_the_volume_as_it_was() {
    if hermes_test_support::skip_unless_root("mounting a small tmpfs as the volume needs root") {
        return;
    }
    let t = TestContext::new();
    let disk = SmallDisk::mount(&t.dir.path().join("disk"), "8m");
    let root = disk.path().join("data");
    let t_root = t.root();
    fs::create_dir_all(&t_root).unwrap();
    volume(&t);
    // A database of ~2 MB that does not compress much, on a volume with room for one copy only.
    let db = rusqlite::Connection::open(t_root.join("profiles/work/kanban.db")).unwrap();
    db.execute_batch("CREATE TABLE blobs(b BLOB)").unwrap();
    for i in 0..32u32 {
        let bytes: Vec<u8> = (0..64 * 1024u32)
            .map(|j| (j.wrapping_mul(2654435761).wrapping_add(i) >> 13) as u8)
            .collect();
        db.execute("INSERT INTO blobs VALUES (?1)", [bytes])
            .unwrap();
    }
    drop(db);
    copy_tree(&t_root, &root);
    let run = |args: &[&str]| t.cmd(args).env("HERMES_HOME", &root).output().unwrap();

    // An archive made while there was room, kept off the small disk, for the restore.
    let archive = t.dir.path().join("a.zip");
    let made = run(&["backup", "create", "-o", archive.to_str().unwrap()]);
    assert!(made.status.success(), "{}", render(&made));

    disk.fill("ballast-1", 1024 * 1024);
    let before = tree(&root);
    let out = run(&["backup", "create"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("could not include") && err.contains("free space"),
        "{err}"
    );
    assert_eq!(
        tree(&root),
        before,
        "a failed create leaves the volume as it was"
    );

    // The restore needs room for the database it replaces: there is none.
    fs::remove_file(root.join("profiles/work/kanban.db")).unwrap();
    disk.fill("ballast-2", 1024 * 1024);
    let before = tree(&root);
    let out = run(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("free space"),
        "{}",
        render(&out)
    );
    assert_eq!(
        tree(&root),
        before,
        "a failed restore leaves the volume as it was"
    );
    drop(disk);
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_restore_under_the_supervisor_stops_and_starts_only_the_gateways_whose_profiles_change() {
    use hermes_test_support::poll;
    use std::time::Duration;
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    t.free_ports(&["work"]);
    let _up = t.start_up();
    let up = |name: &str| t.service(name)["state"] == "up";
    poll::until_true("gateway-default up", Duration::from_secs(30), || {
        up("gateway-default")
    });
    t.ok(&["-p", "work", "gateway", "start"]);
    poll::until_true("gateway-work up", Duration::from_secs(30), || {
        up("gateway-work")
    });
    let archive = t.dir.path().join("work.zip");
    t.ok(&[
        "backup",
        "create",
        "-o",
        archive.to_str().unwrap(),
        "--profile",
        "work",
    ]);
    fs::write(t.root().join("profiles/work/SOUL.md"), "someone else\n").unwrap();
    let default_pid = t.service("gateway-default")["pid"].clone();
    let work_pid = t.service("gateway-work")["pid"].clone();

    let out = t.ok(&[
        "backup",
        "restore",
        archive.to_str().unwrap(),
        "--profile",
        "work",
        "--yes",
    ]);
    assert!(out.contains("Restarted: gateway-work"), "{out}");
    assert_ne!(
        fs::read_to_string(t.root().join("profiles/work/SOUL.md")).unwrap(),
        "someone else\n"
    );
    poll::until_true("gateway-work up again", Duration::from_secs(30), || {
        up("gateway-work")
    });
    assert_ne!(
        t.service("gateway-work")["pid"],
        work_pid,
        "the work gateway was restarted"
    );
    assert_eq!(
        t.service("gateway-default")["pid"],
        default_pid,
        "its neighbour was not"
    );
}

#[test]
fn an_archive_from_a_newer_config_schema_than_the_installed_agent_is_refused_unless_forced() {
    let t = TestContext::new();
    let root = volume(&t);
    let config = root.join("profiles/work/config.yaml");
    let text = fs::read_to_string(&config)
        .unwrap()
        .replace("_config_version: 33", "_config_version: 35");
    fs::write(&config, text).unwrap();
    let archive = t.dir.path().join("a.zip");
    t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);
    fs::write(root.join("SOUL.md"), "changed\n").unwrap();
    let agent = hermes_test_support::agent::with_schema(t.dir.path(), 33);
    let restore = |extra: &[&str]| {
        let mut args = vec!["backup", "restore", archive.to_str().unwrap()];
        args.extend_from_slice(extra);
        t.cmd(&args)
            .env("HERMES_AGENT_CLI", &agent)
            .output()
            .unwrap()
    };
    let plan = restore(&["--dry-run"]);
    assert!(plan.status.success(), "{}", render(&plan));
    assert!(
        String::from_utf8_lossy(&plan.stdout).contains("Refused without --force"),
        "{}",
        render(&plan)
    );
    let refused = restore(&["--yes"]);
    assert_eq!(refused.status.code(), Some(1), "{}", render(&refused));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("config schema 35, newer than this image's hermes-agent")
            && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        fs::read_to_string(root.join("SOUL.md")).unwrap(),
        "changed\n",
        "nothing restored"
    );
    let forced = restore(&["--yes", "--force"]);
    assert!(forced.status.success(), "{}", render(&forced));
    assert_ne!(
        fs::read_to_string(root.join("SOUL.md")).unwrap(),
        "changed\n"
    );
}

#[test]
fn a_backups_directory_planted_as_a_link_is_refused_and_nothing_is_written_through_it() {
    let t = TestContext::new();
    let root = volume(&t);
    let elsewhere = t.dir.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, root.join("backups")).unwrap();
    let out = t.run(&["backup", "create"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is a symlink"),
        "{}",
        render(&out)
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

/// Writes a zip at `path` holding `entries` (name, bytes), deflated.
fn zip_of(path: &Path, entries: &[(&str, &[u8])]) {
    let mut out = zip::ZipWriter::new(fs::File::create(path).unwrap());
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(true);
    for (name, bytes) in entries {
        out.start_file(*name, options).unwrap();
        out.write_all(bytes).unwrap();
    }
    out.finish().unwrap();
}

/// The names in `dir` that a verification's scratch would leave.
fn scratch_left(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".hermes-verify-"))
        .collect()
}

#[test]
fn verify_refuses_an_entry_that_claims_more_than_deflate_can_compress() {
    let t = TestContext::new();
    let bomb = t.dir.path().join("bomb.zip");
    let zeros = vec![0u8; 64 << 20];
    zip_of(&bomb, &[("SOUL.md", b"# soul\n"), ("notes.md", &zeros)]);
    let ratio = (64u64 << 20) / fs::metadata(&bomb).unwrap().len();
    assert!(ratio > 1000, "the test's archive is a bomb: {ratio}:1");

    let out = t.run(&["backup", "verify", bomb.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("notes.md: declares 67108864 bytes in")
            && text.contains("more than 1024:1; not read"),
        "{text}"
    );
    assert!(scratch_left(t.dir.path()).is_empty(), "no scratch left");
}

#[test]
fn verify_copies_no_database_that_would_fill_the_disk_and_leaves_no_scratch() {
    if hermes_test_support::skip_unless_root("mounting a small tmpfs for the archive needs root") {
        return;
    }
    let t = TestContext::new();
    let disk = SmallDisk::mount(&t.dir.path().join("disk"), "16m");
    // 24 MB that starts as a database and compresses about 60:1: more than the whole disk.
    let mut db = Vec::with_capacity(24 << 20);
    db.extend_from_slice(b"SQLite format 3\0");
    let mut x: u32 = 1;
    while db.len() < 24 << 20 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        db.extend_from_slice(&x.to_le_bytes());
        db.extend_from_slice(&[0u8; 252]);
    }
    let archive = disk.path().join("big.zip");
    zip_of(&archive, &[("SOUL.md", b"# soul\n"), ("state.db", &db)]);
    drop(db);
    let free = hermes_test_support::disk::available_bytes(disk.path());

    let out = t.run(&["backup", "verify", archive.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("state.db: not checked: a copy of its") && text.contains("free in"),
        "{text}"
    );
    let after = hermes_test_support::disk::available_bytes(disk.path());
    assert!(
        free.abs_diff(after) < 256 * 1024,
        "the disk is as free as before: {free} then {after}"
    );
    assert!(scratch_left(disk.path()).is_empty(), "no scratch left");
    drop(disk);
}

#[test]
fn names_builds_and_dates_from_an_archive_are_printed_escaped() {
    let t = TestContext::new();
    let root = volume(&t);
    let archive = t.dir.path().join("a.zip");
    t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);

    // A manifest whose build and date hide the line they are on, and names that would rewrite
    // the plan's lines: an archive that verifies (its manifest lists what it holds) except for
    // the two planted names.
    let hostile = t.dir.path().join("hostile.zip");
    let edit = |header: &mut serde_json::Value| {
        header["build"] = "hermes 9\u{1b}[2K\rhermes 1.0 (trusted)".into();
        header["created"] = "2026-01-01\u{1b}]0;x\u{7}".into();
    };
    rewrite(
        &archive,
        &hostile,
        Manifest::Edited(&edit),
        &|name, bytes| Some((name.to_owned(), bytes)),
    );
    let out = t.run(&["backup", "verify", hostile.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", render(&out));
    assert!(
        text.contains(
            "made by hermes 9\\x1b[2K\\rhermes 1.0 (trusted) at 2026-01-01\\x1b]0;x\\x07"
        ),
        "{text}"
    );

    // Names: an archive of the original's kind (no manifest) with an escape sequence and a
    // line break in two names; the plan shows them escaped, on one line each.
    let names = t.dir.path().join("names.zip");
    rewrite(
        &archive,
        &names,
        Manifest::Dropped,
        &|name, bytes| match name {
            "SOUL.md" => Some(("memories/x\u{1b}[1A\u{1b}[2K.md".into(), bytes)),
            "skills/web/SKILL.md" => Some(("notes\n  replaced      1  .env".into(), bytes)),
            _ => Some((name.to_owned(), bytes)),
        },
    );
    let out = t.run(&["backup", "restore", names.to_str().unwrap(), "--dry-run"]);
    assert!(out.status.success(), "{}", render(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains('\u{1b}'), "no escape byte printed: {text:?}");
    assert!(text.contains("memories/x\\x1b[1A\\x1b[2K.md"), "{text}");
    assert!(text.contains("notes\\n  replaced      1  .env"), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("  replaced      1  .env")),
        "no fake line: {text}"
    );
    assert!(root.join("SOUL.md").exists(), "a dry run changes nothing");
}

#[test]
fn an_archive_of_the_previous_format_verifies_and_restores_without_its_manifest_entry() {
    let t = TestContext::new();
    let root = volume(&t);
    let archive = t.dir.path().join("a.zip");
    t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);
    let legacy = t.dir.path().join("legacy.zip");
    rewrite(&archive, &legacy, Manifest::Legacy, &|name, bytes| {
        Some((name.to_owned(), bytes))
    });
    let verified = t.ok(&["backup", "verify", legacy.to_str().unwrap()]);
    assert!(verified.contains("every checksum matches"), "{verified}");

    // The manifest names a file the archive lacks: named, as that format can.
    let short = t.dir.path().join("short.zip");
    rewrite(&archive, &short, Manifest::Legacy, &|name, bytes| {
        (name != "skills/web/SKILL.md").then(|| (name.to_owned(), bytes))
    });
    let out = t.run(&["backup", "verify", short.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("skills/web/SKILL.md: in the manifest, not in the archive"),
        "{}",
        render(&out)
    );

    fs::remove_file(root.join("skills/web/SKILL.md")).unwrap();
    t.ok(&["backup", "restore", legacy.to_str().unwrap(), "--yes"]);
    assert!(root.join("skills/web/SKILL.md").exists());
    assert!(
        !root.join("backups/hermes-backup-manifest.json").exists(),
        "the manifest entry is never written to the volume"
    );
}

#[test]
fn a_restore_refuses_while_another_process_holds_a_database_it_replaces() {
    let t = TestContext::new();
    let root = volume(&t);
    let archive = t.dir.path().join("a.zip");
    t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);
    let db = rusqlite::Connection::open(root.join("state.db")).unwrap();
    db.execute("INSERT INTO messages(body) VALUES ('after the backup')", [])
        .unwrap();
    drop(db);
    let before = tree(&root);
    // A process the supervisor did not start (a gateway run by hand, a `sqlite3` shell) has
    // the database open.
    let holder = hermes_test_support::held::HeldOpen::new(&root.join("state.db"));
    let out = t.run(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    drop(holder);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("state.db` is open in sh (pid ") && said.contains("nothing was restored"),
        "{said}"
    );
    assert_eq!(tree(&root), before, "nothing was written");
    // Once it is closed, the restore goes through.
    t.ok(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
}

#[test]
fn create_keeps_the_newest_of_its_archives_once_the_new_one_is_verified() {
    let t = TestContext::new();
    let root = volume(&t);
    let dir = root.join("backups");
    fs::create_dir_all(&dir).unwrap();
    let older = [
        "hermes-backup-20200101T000000Z.zip",
        "hermes-backup-20200101T000001Z.zip",
        "hermes-backup-20200101T000002Z.zip",
    ];
    let others = ["hermes-backup-20200101-000000.zip", "notes.zip"];
    for name in older.iter().chain(&others) {
        fs::write(dir.join(name), "an older archive").unwrap();
    }
    let said = t.ok(&["backup", "create", "--keep", "2"]);
    assert!(
        said.contains(&format!(
            "Verified it, then removed the oldest: {}, {}",
            older[0], older[1]
        )),
        "{said}"
    );
    let mut left: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(left.contains(&older[2].to_owned()), "{left:?}");
    for other in others {
        assert!(left.contains(&other.to_owned()), "never touched: {left:?}");
    }

    // Two within one second: the second gets `-2` (or a later second), never a refusal; the
    // newest two are kept, in the order they were made.
    t.ok(&["backup", "create", "--keep", "2"]);
    t.ok(&["backup", "create", "--keep", "2"]);
    let mut ours: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| hermes_backup::schedule::is_created_name(n))
        .collect();
    ours.sort();
    assert_eq!(ours.len(), 2, "{ours:?}");
    assert!(!ours.contains(&older[2].to_owned()), "{ours:?}");

    // With `-o` the operator chose where it goes: nothing there is ours to remove.
    let out = t.run(&["backup", "create", "--keep", "2", "-o", "/tmp/x.zip"]);
    assert_eq!(out.status.code(), Some(2), "{}", render(&out));
    let out = t.run(&["backup", "create", "--keep", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", render(&out));
}
