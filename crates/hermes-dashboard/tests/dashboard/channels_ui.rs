//! The Channels page in headless Chromium with the real agent's catalogue (hermes-agent 0.19.0
//! from PyPI, opt-in with `HERMES_TEST_PYPI=1`, always in CI): each platform with enabled,
//! credentials and the gateway's word; Email set up in the form (credentials typed, enabled),
//! saved to `.env` and `config.yaml`, the row then showing the gateway's state and the restart
//! that applies it offered.
//!
//! Screenshots: with `HERMES_DASHBOARD_SCREENSHOTS=<dir>`, `dashboard-channels.png` is saved
//! there (`HERMES_DASHBOARD_SCREENSHOTS=$PWD/docs/images cargo test -p hermes-dashboard --test
//! dashboard channels_ui`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;
use std::time::Duration;

use hermes_test_support::browser::Browser;
use serde_json::json;

use crate::common::page_text as text;
use crate::common::{self, TOKEN, TOKEN_ENV};

/// How long a page may take to show what the test waits for (the first list asks the agent).
const WAIT: Duration = Duration::from_secs(60);

#[test]
fn email_is_set_up_from_the_page() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let root = home.path().to_path_buf();
    fs::write(
        root.join("config.yaml"),
        "model: gpt-4o\nplatforms:\n  telegram:\n    enabled: true\n",
    )
    .unwrap();
    fs::write(
        root.join(".env"),
        "TELEGRAM_BOT_TOKEN=123456789:abcdefghijklmnopqrstuvwxyz0123456\n",
    )
    .unwrap();
    fs::write(
        root.join("gateway_state.json"),
        json!({ "gateway_state": "running", "platforms": {
            "telegram": { "state": "connected", "updated_at": "2026-12-03T09:00:00Z" },
            "email": { "state": "fatal", "error_message": "IMAP login refused" },
        }})
        .to_string(),
    )
    .unwrap();
    let mut env = TOKEN_ENV.to_vec();
    let cli = agent.hermes.to_str().unwrap().to_string();
    env.push(("HERMES_AGENT_CLI", &cli));
    let d = common::start_in(home, "127.0.0.1", &env);
    let base = format!("http://127.0.0.1:{}", d.addr.port());
    browser.goto(&format!("{base}/?token={TOKEN}"));
    browser.wait_for("nav a[aria-current=page]", WAIT);
    browser.goto(&format!("{base}/channels"));
    let telegram = "#platforms tr[data-id=telegram]";
    let email = "#platforms tr[data-id=email]";
    browser.wait_for(telegram, WAIT);
    assert_eq!(text(&browser, "nav a[aria-current=page]"), "Channels");
    assert_eq!(text(&browser, &format!("{telegram} td.state")), "connected");
    assert_eq!(
        text(&browser, &format!("{telegram} td.credentials")),
        "present"
    );
    assert_eq!(text(&browser, &format!("{email} td.state")), "disabled");
    assert!(
        text(&browser, "#summary").contains("1 enabled"),
        "{}",
        text(&browser, "#summary")
    );
    assert!(
        !text(&browser, "main").contains("abcdefghijklmnopqrstuvwxyz"),
        "no value shown"
    );

    browser
        .find(&format!("{email} button[data-action=edit]"))
        .click();
    browser.wait_for("#edit:not([hidden]) input[name=EMAIL_ADDRESS]", WAIT);
    for (key, value) in [
        ("EMAIL_ADDRESS", "bot@example.org"),
        ("EMAIL_PASSWORD", "app-password-1"),
        ("EMAIL_IMAP_HOST", "imap.example.org"),
        ("EMAIL_SMTP_HOST", "smtp.example.org"),
    ] {
        browser
            .find(&format!("#edit-vars input[name={key}]"))
            .send_keys(value);
    }
    browser.find("#edit-enabled").click();
    browser.find("#edit-form button[type=submit]").click();
    browser.wait_for(&format!("{email}[data-state=fatal]"), WAIT);
    assert_eq!(
        text(&browser, &format!("{email} td.credentials")),
        "present"
    );
    assert_eq!(
        text(&browser, &format!("{email} td.error")),
        "IMAP login refused"
    );
    browser.wait_for("#restart:not([hidden])", WAIT);
    assert!(
        text(&browser, "#restart-note").contains("gateway-default"),
        "{}",
        text(&browser, "#restart-note")
    );
    assert_eq!(text(&browser, "#banner"), "", "no error shown");
    let dotenv = fs::read_to_string(root.join(".env")).unwrap();
    assert!(dotenv.contains("EMAIL_PASSWORD=app-password-1"), "{dotenv}");
    assert!(dotenv.starts_with("TELEGRAM_BOT_TOKEN="), "{dotenv}");
    let config = fs::read_to_string(root.join("config.yaml")).unwrap();
    assert!(config.contains("  email:\n    enabled: true"), "{config}");
    browser.execute("window.scrollTo(0, 0); return true;");
    if let Some(dir) = std::env::var_os("HERMES_DASHBOARD_SCREENSHOTS") {
        browser.screenshot(&std::path::Path::new(&dir).join("dashboard-channels.png"));
    }
}

/// A code the agent's own store issues for `user` on Telegram.
fn issue_code(
    agent: &hermes_test_support::OriginalAgent,
    dir: &std::path::Path,
    user: &str,
) -> String {
    let code = format!(
        "from gateway.pairing import PairingStore; print(PairingStore().generate_code('telegram', '{user}', 'Ada'))"
    );
    let out = common::agent_python(agent, dir, &code);
    out.lines().last().unwrap().to_string()
}

/// A waiting user approved from the page — by the code the user relays (0.19), or by the
/// request's own Approve button (0.20) — then revoked.
fn a_user_is_approved_and_revoked(agent: &hermes_test_support::OriginalAgent, by_button: bool) {
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let root = home.path().to_path_buf();
    let code = issue_code(agent, &root, "2001");
    let mut env = TOKEN_ENV.to_vec();
    let cli = agent.hermes.to_str().unwrap().to_string();
    env.push(("HERMES_AGENT_CLI", &cli));
    let d = common::start_in(home, "127.0.0.1", &env);
    let base = format!("http://127.0.0.1:{}", d.addr.port());
    browser.goto(&format!("{base}/?token={TOKEN}"));
    browser.wait_for("nav a[aria-current=page]", WAIT);
    browser.goto(&format!("{base}/channels"));
    let waiting = "#pending tr[data-user='2001']";
    browser.wait_for(waiting, WAIT);
    assert!(
        text(&browser, waiting).contains("Ada (2001)"),
        "{}",
        text(&browser, waiting)
    );
    assert!(
        !text(&browser, "main").contains(&code),
        "the code is never shown"
    );
    if by_button {
        browser
            .find(&format!("{waiting} button[data-action=approve]"))
            .click();
    } else {
        browser.find("#code-platform").send_keys("telegram");
        browser.find("#code-value").send_keys(&code);
        browser.find("#approve-code button[type=submit]").click();
    }
    let approved = "#approved tr[data-user='2001']";
    browser.wait_for(approved, WAIT);
    assert!(
        text(&browser, "#pairing-summary").starts_with("0 waiting"),
        "{}",
        text(&browser, "#pairing-summary")
    );
    assert_eq!(text(&browser, "#banner"), "", "no error shown");
    if !by_button && let Some(dir) = std::env::var_os("HERMES_DASHBOARD_SCREENSHOTS") {
        browser.screenshot(&std::path::Path::new(&dir).join("dashboard-channels-pairing.png"));
    }
    browser
        .find(&format!("{approved} button[data-action=revoke]"))
        .click();
    browser.wait_for("#approved[hidden]", WAIT);
    assert!(
        text(&browser, "#pairing-summary").contains("0 approved"),
        "{}",
        text(&browser, "#pairing-summary")
    );
}

#[test]
fn a_user_is_approved_by_code_with_the_agent_0_19() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    a_user_is_approved_and_revoked(&agent, false);
}

#[test]
fn a_user_is_approved_by_request_with_the_agent_0_20() {
    let Some(agent) = hermes_test_support::fixture_agent() else {
        return;
    };
    a_user_is_approved_and_revoked(&agent, true);
}
