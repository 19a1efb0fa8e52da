//! The Backups page in headless Chromium, against a dashboard started in-process: Create shows
//! its result and the archive appears in the list; Restore… shows the dry run first (the
//! replaced file named) and only Restore applies it, putting the file back; a damaged upload
//! is refused inline; a plan the schema check refuses is restored only once "Restore it anyway"
//! is ticked.
//!
//! Screenshots: with `HERMES_DASHBOARD_SCREENSHOTS=<dir>`, `dashboard-backups.png` is saved
//! there (`HERMES_DASHBOARD_SCREENSHOTS=$PWD/docs/images cargo test -p hermes-dashboard --test
//! dashboard backups_ui`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;
use std::time::Duration;

use hermes_test_support::browser::Browser;

use crate::common::page_text as text;
use crate::common::page_visible as visible;
use crate::common::{self, TOKEN};

/// How long a page may take to show what the test waits for.
const WAIT: Duration = Duration::from_secs(20);

#[test]
fn create_then_plan_then_restore_in_the_browser() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().to_path_buf();
    fs::write(root.join("config.yaml"), "_config_version: 35\nmodel: a\n").unwrap();
    fs::write(root.join("SOUL.md"), "the soul\n").unwrap();
    fs::create_dir_all(root.join("profiles/work")).unwrap();
    fs::write(root.join("profiles/work/SOUL.md"), "work\n").unwrap();
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    // The scheduled backups' state, as they write it (their last archive pruned since).
    fs::create_dir_all(root.join("backups")).unwrap();
    fs::write(
        root.join("backups/.schedule.json"),
        r#"{"schedule": "daily", "next_run": "2026-12-03T00:00:00Z",
            "last_run": {"started": "2026-12-02T00:00:00Z", "ok": true, "result": "ok",
                         "file": "hermes-backup-20261202-000000.zip", "size": 2048,
                         "duration_ms": 40, "pruned": []}}"#,
    )
    .unwrap();
    let d = common::start_in(home, "127.0.0.1", &common::TOKEN_ENV);
    let base = format!("http://127.0.0.1:{}", d.addr.port());
    browser.goto(&format!("{base}/?token={TOKEN}"));
    browser.wait_for("nav a[aria-current=page]", WAIT);
    browser.goto(&format!("{base}/backups"));
    browser.wait_for("#rows tr.empty", WAIT);
    assert_eq!(text(&browser, "nav a[aria-current=page]"), "Backups");
    assert_eq!(
        text(&browser, "#schedule"),
        "Scheduled backups (daily): last run 2026-12-02 00:00:00 UTC: ok \
         (hermes-backup-20261202-000000.zip, 2.0 KiB); next run 2026-12-03 00:00:00 UTC."
    );

    // Create: the result line, then the row.
    browser.find("#create").click();
    browser.wait_for("#create-status.done", WAIT);
    let created = text(&browser, "#create-status");
    assert!(
        created.starts_with("Created hermes-dashboard-"),
        "{created}"
    );
    let row = browser.wait_for("#rows tr[data-archive]", WAIT);
    let name = row.attribute("data-archive").unwrap();
    assert!(created.contains(&name), "{created} / {name}");
    assert_eq!(
        text(&browser, "#rows tr[data-archive] td:nth-child(4)"),
        "manual"
    );
    let href = browser
        .find("#rows tr[data-archive] a[data-action=download]")
        .attribute("href")
        .unwrap();
    assert_eq!(href, format!("api/backups/{name}"));

    // After the backup the volume changes; the dry run names the change before anything runs.
    fs::write(
        root.join("config.yaml"),
        "_config_version: 35\nmodel: changed\n",
    )
    .unwrap();
    browser
        .find("#rows tr[data-archive] button[data-action=plan]")
        .click();
    browser.wait_until("the plan's Restore button", WAIT, |b| {
        visible(b, "#confirm")
    });
    let summary = text(&browser, "#plan-summary");
    assert!(
        summary.starts_with("Dry run: 0 added, 1 replaced, "),
        "{summary}"
    );
    assert_eq!(
        text(&browser, "details[data-list=replaced] li"),
        "config.yaml"
    );
    assert_eq!(
        text(&browser, "#plan-restarts"),
        "The gateways serving default are stopped for the restore and started after."
    );
    assert_eq!(text(&browser, "#confirm"), "Restore 1 file");
    assert!(
        fs::read_to_string(root.join("config.yaml"))
            .unwrap()
            .contains("changed"),
        "showing the plan restored nothing"
    );
    if let Some(dir) = std::env::var_os("HERMES_DASHBOARD_SCREENSHOTS") {
        let dir = std::path::PathBuf::from(dir);
        fs::create_dir_all(&dir).unwrap();
        browser.screenshot(&dir.join("dashboard-backups.png"));
    }

    browser.find("#confirm").click();
    browser.wait_for("#restore-status.done", WAIT);
    let done = text(&browser, "#restore-status");
    assert!(
        done.starts_with("Restored: 0 added, 1 replaced, "),
        "{done}"
    );
    assert_eq!(
        fs::read_to_string(root.join("config.yaml")).unwrap(),
        "_config_version: 35\nmodel: a\n"
    );
    assert!(!visible(&browser, "#confirm"), "a plan is applied once");

    // A damaged upload: the error inline under the form, nothing added to the list.
    let junk = root.join("user-junk.zip");
    fs::write(&junk, "not a zip").unwrap();
    browser
        .find("#upload-file")
        .send_keys(junk.to_str().unwrap());
    browser.find("#upload").click();
    browser.wait_until("the upload's error", WAIT, |b| visible(b, "#upload-error"));
    let error = text(&browser, "#upload-error");
    assert!(error.contains("is not a readable zip"), "{error}");
    assert_eq!(browser.find_all("#rows tr[data-archive]").len(), 1);
}

#[test]
fn a_refused_schema_is_shown_and_restored_only_when_ticked() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().to_path_buf();
    fs::write(root.join("config.yaml"), "_config_version: 35\n").unwrap();
    fs::write(root.join("SOUL.md"), "the soul\n").unwrap();
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = hermes_test_support::agent::with_schema(agent_dir.path(), 33);
    let env = [
        ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
        ("HERMES_AGENT_CLI", agent.to_str().unwrap()),
    ];
    let d = common::start_in(home, "127.0.0.1", &env);
    let base = format!("http://127.0.0.1:{}", d.addr.port());
    browser.goto(&format!("{base}/?token={TOKEN}"));
    browser.wait_for("nav a[aria-current=page]", WAIT);
    browser.goto(&format!("{base}/backups"));
    browser.wait_for("#rows tr.empty", WAIT);
    browser.find("#create").click();
    browser.wait_for("#rows tr[data-archive]", WAIT);
    fs::write(root.join("SOUL.md"), "changed\n").unwrap();

    browser
        .find("#rows tr[data-archive] button[data-action=plan]")
        .click();
    browser.wait_until("the plan's Restore button", WAIT, |b| {
        visible(b, "#confirm")
    });
    let schema = text(&browser, "#plan-schema");
    assert!(
        schema.starts_with("Refused unless forced: ") && schema.contains("--force"),
        "{schema}"
    );
    assert!(visible(&browser, "#force-line"));
    assert_eq!(
        browser.find("#confirm").property("disabled").as_deref(),
        Some("true"),
        "Restore waits for the box"
    );
    browser.find("#force").click();
    assert_eq!(
        browser.find("#confirm").property("disabled").as_deref(),
        Some("false")
    );
    browser.find("#confirm").click();
    browser.wait_for("#restore-status.done", WAIT);
    assert_eq!(
        fs::read_to_string(root.join("SOUL.md")).unwrap(),
        "the soul\n"
    );
}
