//! issue 25, item 4: scheduled snapshots — the `backup` service under `hermes up` writes a
//! verified archive, prunes beyond `keep` (only scheduled archives), records the run in
//! `.schedule.json`, shows it in `hermes service status`, and stops at once on SIGTERM; an
//! invalid schedule parks it `failed` with the error.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::util::{Running, TestContext, render};
use hermes_test_support::poll;

/// The test hook of `hermes backup scheduled`: the first run starts at once.
const RUN_NOW: &str = "HERMES_BACKUP_RUN_NOW";

/// `hermes up` with the run-now hook, waited for until its socket answers.
fn start_up_running_now(t: &TestContext) -> Running {
    let child = t
        .cmd(&["up"])
        .env(RUN_NOW, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let up = Running(child);
    poll::until_true("the supervisor", Duration::from_secs(30), || {
        t.run(&["service", "list"]).status.success()
    });
    up
}

fn state(dir: &Path) -> serde_json::Value {
    fs::read(dir.join(".schedule.json"))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

#[test]
fn a_scheduled_run_writes_verifies_prunes_records_and_is_shown_by_status() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let root = t.root();
    // Once a year, and 2 kept: only the run the hook starts happens during the test.
    fs::write(
        root.join("config.yaml"),
        "backup:\n  schedule: '0 0 1 1 *'\n  keep: 2\n",
    )
    .unwrap();
    fs::write(root.join("SOUL.md"), "a persona\n").unwrap();
    let dir = root.join("backups");
    fs::create_dir_all(&dir).unwrap();
    let old = [
        "hermes-backup-20200101-000000.zip",
        "hermes-backup-20210101-000000.zip",
    ];
    for name in old {
        fs::write(dir.join(name), "an old scheduled archive").unwrap();
    }
    // What `hermes backup create` names by default, and someone's file: never pruned.
    let others = ["hermes-backup-20200101T000000Z.zip", "notes.txt"];
    for name in others {
        fs::write(dir.join(name), "not the schedule's").unwrap();
    }

    let mut up = start_up_running_now(&t);
    poll::until_true("the first scheduled run", Duration::from_secs(60), || {
        state(&dir)["last_run"].is_object()
    });
    // Ready as soon as its settings are read (`READY=1`).
    poll::until_true("the backup service up", Duration::from_secs(15), || {
        t.service("backup")["state"] == "up"
    });
    assert!(
        t.service("backup")["reason"]
            .as_str()
            .unwrap()
            .contains("notified"),
        "{}",
        t.service("backup")
    );
    let recorded = state(&dir);
    let run = &recorded["last_run"];
    assert_eq!(run["ok"], true, "{recorded:#}");
    assert_eq!(run["result"], "ok", "{recorded:#}");
    assert_eq!(recorded["schedule"], "0 0 1 1 *", "{recorded:#}");
    assert!(
        recorded["next_run"]
            .as_str()
            .unwrap()
            .ends_with("-01-01T00:00:00Z"),
        "{recorded:#}"
    );
    assert_eq!(recorded["last_success"], run["started"], "{recorded:#}");
    let file = Path::new(run["file"].as_str().unwrap()).to_path_buf();
    let name = file.file_name().unwrap().to_str().unwrap().to_owned();
    assert!(
        name.starts_with("hermes-backup-2") && name.len() == 33,
        "{name}"
    );
    assert_eq!(file.parent(), Some(dir.as_path()));
    assert_eq!(
        run["size"].as_u64(),
        Some(fs::metadata(&file).unwrap().len())
    );
    assert_eq!(run["pruned"], serde_json::json!([old[0]]), "{recorded:#}");

    // The archive restores: `hermes backup verify` checks it again, and it holds the volume.
    let verified = t.run(&["backup", "verify", file.to_str().unwrap(), "--json"]);
    assert!(verified.status.success(), "{}", render(&verified));
    let listed = String::from_utf8_lossy(&verified.stdout);
    assert!(listed.contains("SOUL.md"), "{listed}");

    // Pruned beyond `keep`: the oldest scheduled archive; nothing else in the directory.
    assert!(!dir.join(old[0]).exists());
    assert!(dir.join(old[1]).exists());
    for name in others {
        assert_eq!(
            fs::read_to_string(dir.join(name)).unwrap(),
            "not the schedule's"
        );
    }

    // `service status` shows the service up with its last and next run.
    let table = t.ok(&["service", "status"]);
    let row = table
        .lines()
        .position(|l| l.starts_with("backup "))
        .unwrap_or_else(|| panic!("no backup row:\n{table}"));
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[row].contains(" up "), "{table}");
    let last = format!(
        "  last backup: ok at {}: wrote `{}` (",
        run["started"].as_str().unwrap(),
        file.display()
    );
    assert!(lines[row + 1].starts_with(&last), "{table}");
    assert!(
        lines[row + 1].ends_with(&format!("), verified; pruned {}", old[0])),
        "{table}"
    );
    assert_eq!(
        lines[row + 2],
        format!(
            "  next backup: {} (schedule `0 0 1 1 *`, UTC)",
            recorded["next_run"].as_str().unwrap()
        ),
        "{table}"
    );
    let json = t.service("backup");
    assert_eq!(json["state"], "up", "{json:#}");
    assert_eq!(json["backup"], recorded, "{json:#}");
    // Other rows have no `backup` key.
    let all: serde_json::Value =
        serde_json::from_slice(&t.run(&["service", "status", "--json"]).stdout).unwrap();
    for other in all.as_array().unwrap() {
        if other["name"] != "backup" {
            assert!(other.get("backup").is_none(), "{other:#}");
        }
    }

    // A stop wakes it from its sleep: it exits 0 at once (not after the stop grace).
    let asked = Instant::now();
    t.ok(&["service", "stop", "backup"]);
    poll::until_true("the backup service down", Duration::from_secs(15), || {
        t.service("backup")["state"] == "down"
    });
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    let json = t.service("backup");
    assert_eq!(
        json["last_exit"],
        serde_json::json!({"code": 0}),
        "{json:#}"
    );
    assert_eq!(up.stop(), Some(0));
    let log = fs::read_to_string(root.join("logs/backup/current")).unwrap_or_default();
    assert!(
        log.contains("backup: running the first backup now"),
        "{log}"
    );
    assert!(log.contains("backup: next backup at "), "{log}");
    assert!(log.contains("backup: stopping"), "{log}");
}

#[test]
fn an_invalid_schedule_parks_the_service_failed_with_the_error() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let config = t.root().join("config.yaml");
    fs::write(&config, "backup:\n  schedule: '0 0 * * 8'\n").unwrap();
    let _up = t.start_up();
    poll::until_true("the backup service failed", Duration::from_secs(30), || {
        t.service("backup")["state"] == "failed"
    });
    let json = t.service("backup");
    assert_eq!(
        json["last_exit"],
        serde_json::json!({"code": 78}),
        "{json:#}"
    );
    let table = t.ok(&["service", "status", "backup"]);
    assert!(
        table.contains(&format!(
            "  last error: invalid backup schedule in `backup.schedule` in `{}`: `0 0 * * 8`: \
             day-of-week `8` is out of range",
            config.display()
        )),
        "{table}"
    );
    assert!(!table.contains("next backup"), "{table}");
}

#[test]
fn without_a_schedule_there_is_no_service_and_the_subcommand_refuses() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let out = t.run(&["backup", "scheduled"]);
    assert_eq!(out.status.code(), Some(78), "{}", render(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("error: no backup schedule is set"), "{err}");
    assert!(err.contains("hint: set `backup.schedule`"), "{err}");
    // Hidden from the help.
    let help = t.ok(&["backup", "--help"]);
    assert!(!help.contains("scheduled"), "{help}");
    let _up = t.start_up();
    let out = t.run(&["service", "status", "backup"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
}

/// A run that fails (here: another backup holds the volume) is recorded and shown; the service
/// stays up, waiting for the next slot, and is not restarted.
#[test]
fn a_failed_run_is_recorded_and_the_service_stays_up() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let root = t.root();
    fs::write(
        root.join("config.yaml"),
        "backup:\n  schedule: '0 0 1 1 *'\n",
    )
    .unwrap();
    // The volume's backup lock, as a running `hermes backup create` holds it.
    let lock = fs::File::open(&root).unwrap();
    lock.try_lock().unwrap();
    let dir = root.join("backups");
    let _up = start_up_running_now(&t);
    poll::until_true("the first scheduled run", Duration::from_secs(60), || {
        state(&dir)["last_run"].is_object()
    });
    drop(lock);
    let recorded = state(&dir);
    let run = &recorded["last_run"];
    assert_eq!(run["ok"], false, "{recorded:#}");
    let busy = format!(
        "another backup or restore is running on the volume `{}`",
        root.display()
    );
    assert_eq!(run["result"], busy.as_str(), "{recorded:#}");
    assert!(run["file"].is_null(), "{recorded:#}");
    assert!(recorded["last_success"].is_null(), "{recorded:#}");
    assert!(recorded["next_run"].is_string(), "{recorded:#}");
    let row = t.service("backup");
    assert_eq!(row["state"], "up", "{row:#}");
    assert_eq!(row["restarts"], 0, "{row:#}");
    assert!(row["last_error"].is_null(), "{row:#}");
    let table = t.ok(&["service", "status", "backup"]);
    assert!(
        table.contains(&format!(
            "  last backup: failed at {}: {busy}\n",
            run["started"].as_str().unwrap()
        )),
        "{table}"
    );
    assert_eq!(
        fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect::<Vec<_>>(),
        [".schedule.json"],
        "nothing but the state is left"
    );
}
