//! The Config page in headless Chromium, against a dashboard started in-process: a form
//! field changed and saved shows "needs a restart" with the Restart button (which calls the
//! Overview's action: without a supervisor it says why); a text with a syntax error shows its
//! line:column and leaves the file as it was; a text saved over a change made meanwhile is a
//! conflict offering Reload; another profile is chosen from the selector.
//!
//! Screenshots: with `HERMES_DASHBOARD_SCREENSHOTS=<dir>`, `dashboard-config.png` is saved
//! there (`HERMES_DASHBOARD_SCREENSHOTS=$PWD/docs/images cargo test -p hermes-dashboard --test
//! dashboard config_ui`).

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

const CONFIG: &str = "# Hermes configuration\n_config_version: 33\n\nmodel:\n  default: \"old-model\"   # the model\n  provider: openrouter\n\ngateway:\n  engine: native\n";

#[test]
fn edit_a_setting_then_the_text_in_the_browser() {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().to_path_buf();
    fs::write(root.join("config.yaml"), CONFIG).unwrap();
    fs::create_dir_all(root.join("profiles/work")).unwrap();
    fs::write(root.join("profiles/work/SOUL.md"), "work\n").unwrap();
    fs::write(root.join("profiles/work/config.yaml"), "model: w\n").unwrap();
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let d = common::start_in(home, "127.0.0.1", &common::TOKEN_ENV);
    let base = format!("http://127.0.0.1:{}", d.addr.port());
    browser.goto(&format!("{base}/?token={TOKEN}"));
    browser.wait_for("nav a[aria-current=page]", WAIT);
    browser.goto(&format!("{base}/config"));
    browser.wait_for("#settings tr[data-field=memory_max]", WAIT);
    assert_eq!(text(&browser, "nav a[aria-current=page]"), "Config");
    assert_eq!(browser.find("#field-model").value(), "old-model");
    assert_eq!(browser.find("#text").value(), CONFIG);

    // A form field: the memory limit is read when the gateway starts.
    let limit = browser.find("#field-memory_max");
    limit.clear();
    limit.send_keys("1GiB");
    browser.find("#settings-save").click();
    browser.wait_until("the save's result", WAIT, |b| {
        text(b, "#settings-result").starts_with("Saved.")
    });
    assert_eq!(
        text(&browser, "#settings-result"),
        "Saved. Needs a restart."
    );
    assert!(visible(&browser, "#restart-button"));
    let note = text(&browser, "#restart-note");
    assert!(
        note.starts_with("Needs a restart of gateway-default to apply (memory_max). The restart is uninterrupted:"),
        "{note}"
    );
    assert!(
        text(&browser, "#settings tr[data-field=memory_max]").contains("1 GiB"),
        "the view shows the new limit"
    );
    let saved = fs::read_to_string(root.join("config.yaml")).unwrap();
    assert_eq!(
        saved,
        CONFIG.replace(
            "  engine: native\n",
            "  engine: native\n  memory_max: \"1GiB\"\n"
        )
    );
    // The text below follows the save.
    assert_eq!(browser.find("#text").value(), saved);
    if let Some(dir) = std::env::var_os("HERMES_DASHBOARD_SCREENSHOTS") {
        let dir = std::path::PathBuf::from(dir);
        fs::create_dir_all(&dir).unwrap();
        browser.screenshot(&dir.join("dashboard-config.png"));
    }
    // Restart: the Overview's action; without a supervisor it says why.
    browser.find("#restart-button").click();
    browser.wait_until("the restart's answer", WAIT, |b| {
        text(b, "#restart-note").starts_with("Restart failed")
    });

    // The model applies live: no restart for it, and the earlier one is still offered.
    let model = browser.find("#field-model");
    model.clear();
    model.send_keys("new-model");
    browser.find("#settings-save").click();
    browser.wait_until("the model's save", WAIT, |b| {
        text(b, "#settings-result") == "Saved. Applies without a restart."
    });
    assert!(visible(&browser, "#restart-button"));
    let saved = fs::read_to_string(root.join("config.yaml")).unwrap();
    assert_eq!(
        saved,
        CONFIG.replace("old-model", "new-model").replace(
            "  engine: native\n",
            "  engine: native\n  memory_max: \"1GiB\"\n"
        )
    );

    // A bad form value: refused beside the form, nothing written.
    let port = browser.find("#field-api_port");
    port.clear();
    port.send_keys("99999");
    browser.find("#settings-save").click();
    browser.wait_until("the refusal", WAIT, |b| {
        text(b, "#settings-errors").contains("api_port")
    });
    assert_eq!(fs::read_to_string(root.join("config.yaml")).unwrap(), saved);

    // A form save never replaces unsaved edits of the text (saving them later is a conflict).
    browser.find("#field-api_port").clear();
    browser.execute("document.getElementById('text').value += 'mine: 1\\n'; return null;");
    let limit = browser.find("#field-memory_max");
    limit.clear();
    limit.send_keys("2GiB");
    browser.find("#settings-save").click();
    browser.wait_until("the save beside unsaved text", WAIT, |b| {
        text(b, "#settings-result").contains("unsaved edits")
    });
    assert!(browser.find("#text").value().ends_with("mine: 1\n"));
    let saved = fs::read_to_string(root.join("config.yaml")).unwrap();
    assert!(saved.contains("memory_max: \"2GiB\""), "{saved}");
    assert!(!saved.contains("mine"), "{saved}");

    // The text with a syntax error: its line:column, the file untouched.
    browser.execute(
        "document.getElementById('text').value = 'model:\\n  default: x\\n  provider: [a, b\\nzzz: 1\\n'; return null;",
    );
    browser.find("#text-save").click();
    browser.wait_until("the parse error", WAIT, |b| {
        text(b, "#text-result").starts_with("Error at ")
    });
    let error = text(&browser, "#text-result");
    let at = error
        .strip_prefix("Error at ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap();
    let (line, column) = at.split_once(':').unwrap();
    assert!(line.parse::<u32>().unwrap() >= 3, "{error}");
    assert!(column.parse::<u32>().unwrap() >= 1, "{error}");
    assert_eq!(fs::read_to_string(root.join("config.yaml")).unwrap(), saved);

    // A change made meanwhile: a conflict, Reload offered, the file as the other writer left it.
    let theirs = format!("{saved}added: by hand\n");
    fs::write(root.join("config.yaml"), &theirs).unwrap();
    browser.execute("document.getElementById('text').value = 'model: mine\\n'; return null;");
    browser.find("#text-save").click();
    browser.wait_until("the conflict", WAIT, |b| {
        text(b, "#text-result").starts_with("Conflict:")
    });
    assert!(visible(&browser, "#text-reload"));
    assert_eq!(
        fs::read_to_string(root.join("config.yaml")).unwrap(),
        theirs
    );
    browser.find("#text-reload").click();
    browser.wait_until("the reloaded text", WAIT, |b| {
        b.find("#text").value() == theirs
    });
    // Saved on top of the reloaded text, it is written.
    browser.execute("document.getElementById('text').value += 'more: 1\\n'; return null;");
    browser.find("#text-save").click();
    browser.wait_until("the save", WAIT, |b| {
        text(b, "#text-result").starts_with("Saved.")
    });
    assert_eq!(
        fs::read_to_string(root.join("config.yaml")).unwrap(),
        format!("{theirs}more: 1\n")
    );

    // Another profile from the selector.
    browser.execute(
        "var s = document.getElementById('profile'); s.value = 'work'; s.dispatchEvent(new Event('change')); return null;",
    );
    browser.wait_until("the work profile's text", WAIT, |b| {
        b.find("#text").value() == "model: w\n"
    });
    assert!(
        browser
            .find("#field-multiplex")
            .property("disabled")
            .is_some_and(|v| v == "true"),
        "multiplexing is the default profile's"
    );
}
