//! The `backup` service under `hermes init`: registered when `HERMES_BACKUP_SCHEDULE` is set
//! (as the Helm chart sets it), run like every service, its run recorded on the volume; no
//! service without a schedule.

use std::fs;
use std::process::Stdio;
use std::time::{Duration, Instant};

use hermes_supervisor::StateName;

use crate::util::*;

/// Runs `hermes init` with a main program that waits for `stop-now`, `env` added, and calls
/// `check` once the supervisor answers; then stops init.
fn with_init(env: &[(&str, &str)], check: impl FnOnce(&Sandbox, &mut hermes_supervisor::Client)) {
    let sb = Sandbox::new();
    fs::create_dir_all(sb.home()).unwrap();
    let mut child = sb
        .init(&["sh", "-c", "while [ ! -e stop-now ]; do sleep 0.05; done"])
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut client = connect_supervisor(&sb.runtime());
    check(&sb, &mut client);
    fs::write(sb.path().join("stop-now"), "").unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "init did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_schedule_in_the_environment_registers_the_backup_service_which_runs() {
    let env = [
        ("HERMES_BACKUP_SCHEDULE", "0 0 1 1 *"),
        ("HERMES_BACKUP_KEEP", "3"),
        ("HERMES_BACKUP_RUN_NOW", "1"),
    ];
    with_init(&env, |sb, client| {
        let mut state = || {
            client
                .status(Some("backup"))
                .ok()
                .and_then(|rows| rows.into_iter().next())
                .map(|r| r.state)
        };
        wait_for("backup up", || state() == Some(StateName::Up));
        let recorded = sb.home().join("backups/.schedule.json");
        wait_for("the first scheduled run recorded", || {
            fs::read_to_string(&recorded).is_ok_and(|t| t.contains("\"last_run\": {"))
        });
        let text = fs::read_to_string(&recorded).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["schedule"], "0 0 1 1 *", "{text}");
        assert_eq!(value["last_run"]["ok"], true, "{text}");
        let file = value["last_run"]["file"].as_str().unwrap();
        assert!(std::path::Path::new(file).is_file(), "{text}");
    });
}

#[test]
fn without_a_schedule_there_is_no_backup_service() {
    with_init(&[], |_, client| {
        let rows = client.status(None).unwrap();
        assert!(!rows.is_empty());
        assert!(rows.iter().all(|r| r.name != "backup"), "{rows:?}");
    });
}
