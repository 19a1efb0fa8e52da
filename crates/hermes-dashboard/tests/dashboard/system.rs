//! The Overview's System view (`GET /api/system`) over real HTTP, and on the page in headless
//! Chromium: this build, the installed agent (a stand-in answering the schema the test picks)
//! and its schema against the volume's with the verdict a gateway start gets, the backups, and
//! what the services (a stand-in supervisor's rows) use together.
//!
//! Screenshot: with `HERMES_DASHBOARD_SCREENSHOTS=<dir>`, `dashboard-overview-system.png`.

use std::fs;
use std::path::Path;
use std::time::Duration;

use hermes_backup::schedule::{LastRun, State, write_state};
use hermes_supervisor::StateName;
use hermes_test_support::browser::Browser;
use serde_json::Value;

use crate::common::{self, TOKEN, TOKEN_ENV};
use crate::metrics::{FakeSupervisor, resources, row};

const WAIT: Duration = Duration::from_secs(30);

/// The line called `name` of the view.
fn line(view: &Value, name: &str) -> (String, bool) {
    let item = view["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` line in {view}"));
    (
        item["text"].as_str().unwrap().to_string(),
        item["warning"].as_bool().unwrap(),
    )
}

/// A home whose root config is stamped `schema`.
fn home_with_schema(schema: u64) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    fs::write(
        home.path().join("config.yaml"),
        format!("_config_version: {schema}\nmodel:\n  default: m\n"),
    )
    .unwrap();
    home
}

/// The view of a dashboard on `home` with the agent at `agent` (`""`: none installed).
fn view(home: tempfile::TempDir, agent: &str) -> (common::Dashboard, Value) {
    let mut env = TOKEN_ENV.to_vec();
    env.push(("HERMES_AGENT_CLI", agent));
    let d = common::start_in(home, "127.0.0.1", &env);
    let v = common::get_json(&d, "/api/system", 200);
    (d, v)
}

#[test]
fn without_an_agent_or_a_supervisor_each_line_says_so() {
    let (_d, v) = view(home_with_schema(33), "");
    let (hermes, warn) = line(&v, "hermes");
    assert!(
        hermes.starts_with(env!("CARGO_PKG_VERSION")),
        "the build's version: {hermes}"
    );
    assert!(!warn);
    assert_eq!(v["hermes"]["label"], hermes.as_str());
    let (agent, _) = line(&v, "agent");
    assert_eq!(
        agent,
        "hermes-agent is not installed: every gateway is the native one"
    );
    assert!(v["agent"].is_null());
    let (schema, warn) = line(&v, "config_schema");
    assert!(schema.starts_with("33 on the volume ("), "{schema}");
    assert!(!warn, "no agent to disagree with: {schema}");
    assert_eq!(v["config_schema"]["volume"], 33);
    let (backups, warn) = line(&v, "backups");
    assert!(backups.starts_with("none yet in "), "{backups}");
    assert!(
        backups.ends_with("; none scheduled (backup.schedule)"),
        "{backups}"
    );
    assert!(!warn);
    assert_eq!(v["backups"]["count"], 0);
    let (services, warn) = line(&v, "services");
    assert_eq!(services, "the supervisor did not answer");
    assert!(warn);
}

#[test]
fn an_older_volume_is_migrated_and_a_newer_one_refused_as_a_gateway_start_would_be() {
    let home = home_with_schema(33);
    let agent = hermes_test_support::agent::with_schema(home.path(), 35);
    let (_d, v) = view(home, agent.to_str().unwrap());
    let (text, warn) = line(&v, "agent");
    assert!(text.ends_with(", config schema 35"), "{text}");
    assert!(!warn);
    assert_eq!(v["agent"]["config_version"], 35);
    let (schema, warn) = line(&v, "config_schema");
    assert!(
        schema.ends_with(
            "; older than the agent's 35 in default: migrated by the agent at the next boot"
        ),
        "{schema}"
    );
    assert!(!warn);

    let home = home_with_schema(36);
    let agent = hermes_test_support::agent::with_schema(home.path(), 35);
    let (_d, v) = view(home, agent.to_str().unwrap());
    let (schema, warn) = line(&v, "config_schema");
    assert!(
        schema.starts_with(
            "36 on the volume, newer than the agent's 35: its gateways do not start ("
        ),
        "{schema}"
    );
    assert!(schema.contains("HERMES_ALLOW_AGENT_DOWNGRADE"), "{schema}");
    assert!(warn);

    let home = home_with_schema(35);
    let agent = hermes_test_support::agent::with_schema(home.path(), 35);
    let (_d, v) = view(home, agent.to_str().unwrap());
    let (schema, warn) = line(&v, "config_schema");
    assert!(schema.ends_with(", the agent's own"), "{schema}");
    assert!(!warn);
}

#[test]
fn an_unreadable_profile_config_is_a_warning() {
    let home = home_with_schema(33);
    let dir = home.path().join("profiles/broken");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("SOUL.md"), "a profile\n").unwrap();
    fs::write(dir.join("config.yaml"), "model: [unclosed\n").unwrap();
    let (_d, v) = view(home, "");
    let (schema, warn) = line(&v, "config_schema");
    assert!(schema.starts_with("33 on the volume"), "{schema}");
    assert!(schema.contains("; unreadable: broken: "), "{schema}");
    assert!(warn);
}

/// An archive of `size` bytes called `name` in the backups directory of `home`.
fn archive(home: &Path, name: &str, size: usize) {
    let dir = home.join("backups");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(name), vec![0u8; size]).unwrap();
}

#[test]
fn the_backups_line_names_the_newest_archive_and_a_failed_scheduled_run() {
    let home = home_with_schema(33);
    archive(home.path(), "hermes-backup-2026-12-01T00-00-00Z.zip", 10);
    std::thread::sleep(Duration::from_millis(20));
    archive(home.path(), "mine.zip", 3 << 20);
    // Not archives: left out of the count.
    archive(home.path(), ".upload-x.partial", 1);
    archive(home.path(), "notes.txt", 1);
    let dir = home.path().join("backups");
    let state = State {
        schedule: "daily".into(),
        next_run: Some("2026-12-03T00:00:00Z".into()),
        last_run: Some(LastRun {
            started: "2026-12-02T00:00:00Z".into(),
            ok: false,
            result: "no space left on device".into(),
            file: None,
            size: None,
            duration_ms: 5,
            pruned: Vec::new(),
        }),
        last_success: None,
    };
    write_state(&dir, &state).unwrap();
    let (_d, v) = view(home, "");
    let (text, warn) = line(&v, "backups");
    assert!(text.starts_with("2 in "), "{text}");
    assert!(text.contains("the newest mine.zip (3 MiB, "), "{text}");
    assert!(
        text.ends_with("; scheduled daily, next 2026-12-03T00:00:00Z; the last scheduled run failed: no space left on device"),
        "{text}"
    );
    assert!(warn);
    assert_eq!(v["backups"]["count"], 2);
    assert_eq!(v["backups"]["newest"]["name"], "mine.zip");
}

#[test]
fn bad_backup_settings_are_a_warning_not_an_error() {
    let home = tempfile::tempdir().unwrap();
    fs::write(
        home.path().join("config.yaml"),
        "_config_version: 33\nbackup:\n  keep: 0\n",
    )
    .unwrap();
    let (_d, v) = view(home, "");
    let (text, warn) = line(&v, "backups");
    assert!(
        text.starts_with("the backup settings cannot be read: "),
        "{text}"
    );
    assert!(warn);
}

#[test]
fn the_services_line_adds_up_what_the_running_services_use() {
    let home = home_with_schema(33);
    let mut a = row("a", StateName::Up, None);
    a.resources = Some(resources(3));
    let mut b = row("b", StateName::Up, None);
    b.resources = Some(resources(3));
    let c = row("c", StateName::Backoff, None);
    let d = row("d", StateName::Down, None);
    let _sup = FakeSupervisor::serve(home.path(), vec![a, b, c, d]);
    let (_d, v) = view(home, "");
    let (text, warn) = line(&v, "services");
    // Each running one holds 212 MiB at 3.2 % CPU (`metrics::resources`).
    assert_eq!(text, "2 of 4 running, 424 MiB memory, 6.4 % CPU; 1 failing");
    assert!(warn);
    assert_eq!(v["services"]["memory_bytes"], 2 * (212u64 << 20));
}

#[test]
fn the_overview_shows_the_system_view() {
    let home = home_with_schema(33);
    let agent = hermes_test_support::agent::with_schema(home.path(), 36);
    let mut a = row("gateway-default", StateName::Up, Some("default"));
    a.resources = Some(resources(3));
    let _sup = FakeSupervisor::serve(home.path(), vec![a]);
    archive(home.path(), "mine.zip", 2048);
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let mut env = TOKEN_ENV.to_vec();
    let cli = agent.to_str().unwrap().to_string();
    env.push(("HERMES_AGENT_CLI", &cli));
    let d = common::start_in(home, "127.0.0.1", &env);
    browser.goto(&format!(
        "http://127.0.0.1:{}/?token={TOKEN}",
        d.addr.port()
    ));
    browser.wait_for("#system:not([hidden]) dd[data-item=services]", WAIT);
    let text = |css: &str| {
        browser
            .execute(&format!(
                "var e = document.querySelector(\"{css}\"); return e ? e.textContent : '';"
            ))
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let labels = browser.execute(
        "return Array.from(document.querySelectorAll('#system dt')).map(e => e.textContent).join(',');",
    );
    assert_eq!(labels, "Hermes,Agent,Config schema,Backups,Services");
    assert!(
        text("#system dd[data-item=agent]").ends_with(", config schema 36"),
        "{}",
        text("#system dd[data-item=agent]")
    );
    assert_eq!(
        text("#system dd[data-item=services]"),
        "1 of 1 running, 212 MiB memory, 3.2 % CPU"
    );
    assert!(text("#system dd[data-item=backups]").starts_with("1 in "));
    // Volume 33, agent 36: older, so nothing for the operator to do but know.
    let schema = browser
        .execute("return document.querySelector('#system dd[data-item=config_schema]').className;");
    assert_eq!(schema, "");
    if let Some(dir) = std::env::var_os("HERMES_DASHBOARD_SCREENSHOTS") {
        let dir = std::path::PathBuf::from(dir);
        fs::create_dir_all(&dir).unwrap();
        browser.screenshot(&dir.join("dashboard-overview-system.png"));
    }
}
