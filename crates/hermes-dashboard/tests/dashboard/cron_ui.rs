//! The Cron page in headless Chromium, against a dashboard started in-process: a profile's jobs
//! with schedule, state, runs and last result, the scheduler line, a job's last output; with no
//! agent the buttons are off and the page says why; with the real agent (0.19.0 from PyPI,
//! opt-in with `HERMES_TEST_PYPI=1`) Pause and Resume change the row.
//!
//! Screenshots: with `HERMES_DASHBOARD_SCREENSHOTS=<dir>`, `dashboard-cron.png` is saved there
//! (`HERMES_DASHBOARD_SCREENSHOTS=$PWD/docs/images cargo test -p hermes-dashboard --test
//! dashboard cron_ui`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hermes_test_support::browser::Browser;
use serde_json::json;

use crate::common::page_text as text;
use crate::common::{self, TOKEN, TOKEN_ENV};

/// How long a page may take to show what the test waits for.
const WAIT: Duration = Duration::from_secs(30);

fn disabled(browser: &Browser, css: &str) -> bool {
    let script = format!("var e = document.querySelector(\"{css}\"); return !!e && e.disabled;");
    browser.execute(&script).as_bool().unwrap_or(false)
}

fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let cron = home.path().join("cron");
    fs::create_dir_all(cron.join("output/a1b2c3d4e5f6")).unwrap();
    let job = |id: &str,
               name: &str,
               enabled: bool,
               state: &str,
               status: &str,
               error: Option<&str>| {
        json!({
            "id": id, "name": name, "prompt": "…",
            "schedule": { "kind": "cron", "expr": "0 9 * * 1-5", "display": "0 9 * * 1-5" },
            "schedule_display": "0 9 * * 1-5", "enabled": enabled, "state": state,
            "next_run_at": "2026-12-04T09:00:00+00:00", "last_run_at": "2026-12-03T09:00:00+00:00",
            "last_status": status, "last_error": error,
        })
    };
    let jobs = json!({ "jobs": [
        job("a1b2c3d4e5f6", "morning digest", true, "scheduled", "ok", None),
        job("0f0f0f0f0f0f", "weekly report", false, "paused", "error", Some("provider timed out")),
    ], "updated_at": "2026-12-03T09:00:01+00:00" });
    fs::write(cron.join("jobs.json"), jobs.to_string()).unwrap();
    fs::write(
        cron.join("output/a1b2c3d4e5f6/2026-12-03_09-00-00.md"),
        "Three new issues, none urgent.\n",
    )
    .unwrap();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    fs::write(cron.join("ticker_heartbeat"), format!("{}", now - 20.0)).unwrap();
    home
}

#[test]
fn the_jobs_show_and_without_an_agent_the_buttons_are_off() {
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let mut env = TOKEN_ENV.to_vec();
    env.push(("HERMES_AGENT_CLI", ""));
    let d = common::start_in(home(), "127.0.0.1", &env);
    let base = format!("http://127.0.0.1:{}", d.addr.port());
    browser.goto(&format!("{base}/?token={TOKEN}"));
    browser.wait_for("nav a[aria-current=page]", WAIT);
    browser.goto(&format!("{base}/cron"));
    browser.wait_for("#jobs tr[data-id='0f0f0f0f0f0f']", WAIT);
    assert_eq!(text(&browser, "nav a[aria-current=page]"), "Cron");
    let digest = "#jobs tr[data-id='a1b2c3d4e5f6']";
    let report = "#jobs tr[data-id='0f0f0f0f0f0f']";
    assert!(
        text(&browser, digest).contains("morning digest"),
        "{}",
        text(&browser, digest)
    );
    assert!(text(&browser, digest).contains("0 9 * * 1-5"));
    assert_eq!(text(&browser, &format!("{digest} td.state")), "scheduled");
    assert_eq!(text(&browser, &format!("{report} td.state")), "paused");
    assert!(text(&browser, report).contains("error: provider timed out"));
    // A paused job offers Resume, a scheduled one Pause; without an agent both are off.
    assert!(disabled(
        &browser,
        &format!("{report} button[data-action=resume]")
    ));
    assert!(disabled(
        &browser,
        &format!("{digest} button[data-action=pause]")
    ));
    assert!(disabled(
        &browser,
        &format!("{digest} button[data-action=trigger]")
    ));
    let line = text(&browser, "#scheduler");
    assert!(
        line.contains("ticked 20 s ago") || line.contains("ticked 21 s ago"),
        "{line}"
    );
    assert!(line.contains("Changing jobs is off"), "{line}");
    // A job's last output, as text.
    browser.find(&format!("{digest} td.clickable")).click();
    browser.wait_for("#detail:not([hidden])", WAIT);
    assert!(text(&browser, "#detail-output").contains("Three new issues, none urgent."));
    if let Some(dir) = std::env::var_os("HERMES_DASHBOARD_SCREENSHOTS") {
        browser.screenshot(&std::path::Path::new(&dir).join("dashboard-cron.png"));
    }
}

#[test]
fn pause_and_resume_with_the_real_agent() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let home = home();
    let mut env = TOKEN_ENV.to_vec();
    let cli = agent.hermes.to_str().unwrap().to_string();
    env.push(("HERMES_AGENT_CLI", &cli));
    let d = common::start_in(home, "127.0.0.1", &env);
    let base = format!("http://127.0.0.1:{}", d.addr.port());
    browser.goto(&format!("{base}/?token={TOKEN}"));
    browser.wait_for("nav a[aria-current=page]", WAIT);
    browser.goto(&format!("{base}/cron"));
    let digest = "#jobs tr[data-id='a1b2c3d4e5f6']";
    browser.wait_for(
        &format!("{digest} button[data-action=pause]:not([disabled])"),
        WAIT,
    );
    browser
        .find(&format!("{digest} button[data-action=pause]"))
        .click();
    browser.wait_for(
        &format!("{digest}[data-state=paused] button[data-action=resume]"),
        WAIT,
    );
    browser
        .find(&format!("{digest} button[data-action=resume]"))
        .click();
    browser.wait_for(
        &format!("{digest}[data-state=scheduled] button[data-action=pause]"),
        WAIT,
    );
    assert_eq!(text(&browser, "#banner"), "", "no error shown");
    let file: serde_json::Value =
        serde_json::from_slice(&fs::read(d.root().join("cron/jobs.json")).unwrap()).unwrap();
    assert_eq!(file["jobs"][0]["enabled"], true, "{file}");
    assert_eq!(
        file["jobs"][0]["paused_at"],
        serde_json::Value::Null,
        "{file}"
    );
}
