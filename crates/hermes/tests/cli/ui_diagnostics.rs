//! The dashboard's diagnostics page (see `ui`): its API answers exactly what `hermes dump` and
//! `hermes doctor --json` print for the same home (both run, under a running supervisor), and
//! in a real browser the page shows the dump and a failing check with its fix.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::ui::{UI_TOKEN, Ui, WAIT};
use crate::util::{Running, TestContext, free_port};
use hermes_test_support::poll;

/// `hermes dashboard` for `t` on a free port, with the tests' fixed token.
fn dashboard(t: &TestContext) -> (Running, u16) {
    let port = free_port();
    let child = t
        .cmd(&["dashboard", "--port", &port.to_string()])
        .env("HERMES_DASHBOARD_SESSION_TOKEN", UI_TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let running = Running(child);
    poll::until_true("the dashboard", WAIT, || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (running, port)
}

/// `GET path` with the token; the status and the body.
fn get(port: u16, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Hermes-Session-Token: {UI_TOKEN}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

fn get_json(port: u16, path: &str) -> Value {
    let (status, body) = get(port, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

/// A home with a named profile, a key, a model and a `.env` others can read (a ⚠ with a fix),
/// seeded by the CLI first (doctor seeds a missing home; the dashboard never does).
fn home_with_findings(t: &TestContext) {
    t.ok(&["profile", "create", "work", "--no-alias"]);
    std::fs::write(
        t.root().join("config.yaml"),
        "model:\n  default: gpt-4o-mini\n  provider: openai\n",
    )
    .unwrap();
}

#[test]
fn the_api_answers_what_dump_and_doctor_print() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    home_with_findings(&t);
    t.free_ports(&[]);
    std::fs::set_permissions(
        t.root().join(".env"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    // Under a supervisor, so the dump's supervisor part has services to agree on.
    let _up = t.start_up();
    poll::until_true("the gateway up", WAIT, || {
        t.service("gateway-default")["state"] == "up"
    });
    let (_dashboard, port) = dashboard(&t);

    let cli_text = t.ok(&["dump"]);
    let cli_json: Value = serde_json::from_str(&t.ok(&["dump", "--json"])).unwrap();
    let (status, api_text) = get(port, "/api/diagnostics/dump?format=text");
    assert_eq!(status, 200);
    assert_eq!(api_text, cli_text);
    assert!(cli_text.contains("gateway-default"), "{cli_text}");
    let both = get_json(port, "/api/diagnostics/dump");
    assert_eq!(both["text"], Value::String(cli_text));
    assert_eq!(both["report"], cli_json);

    // Doctor: the same rows, for the active profile and for a named one.
    for (flag, query) in [(None, ""), (Some("work"), "?profile=work")] {
        let mut args = vec!["doctor", "--json"];
        if let Some(p) = flag {
            args = vec!["-p", p, "doctor", "--json"];
        }
        let out = t.run(&args);
        let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
        let api = get_json(port, &format!("/api/diagnostics/doctor{query}"));
        assert_eq!(api, cli, "doctor {flag:?}");
        let mut text_args = args.clone();
        text_args.retain(|a| *a != "--json");
        let (_, api_text) = get(
            port,
            &format!(
                "/api/diagnostics/doctor?format=text{}",
                query.replace('?', "&")
            ),
        );
        assert_eq!(
            api_text,
            String::from_utf8_lossy(&t.run(&text_args).stdout),
            "doctor text {flag:?}"
        );
    }
    let default = get_json(port, "/api/diagnostics/doctor");
    assert!(
        default["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["status"] == "warn" && c["fix"].as_str().unwrap().contains("chmod 600")),
        "{default}"
    );
}

/// The rows of the checks table: (symbol, message, fix), read in one script.
fn check_rows(ui: &Ui) -> Vec<(String, String, String)> {
    let rows = ui.browser.execute(
        "return Array.from(document.querySelectorAll('#checks tr')).map(function (r) { return Array.from(r.cells).map(function (c) { return c.textContent; }); });",
    );
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let cell = |i: usize| r[i].as_str().unwrap_or("").to_string();
            (cell(0), cell(1), cell(2))
        })
        .collect()
}

#[test]
fn the_page_shows_the_dump_and_a_failing_check_with_its_fix() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    home_with_findings(&t);
    // An auth.json that is not a credential store: a failing check with a fix.
    std::fs::write(t.root().join("auth.json"), "{ not json").unwrap();
    let expected_dump = t.ok(&["dump"]);
    let Some(ui) = Ui::open(&t, &[]) else { return };

    ui.goto("diagnostics");
    ui.browser.wait_until("the dump", WAIT, |b| {
        b.execute("return document.getElementById('dump').textContent;")
            .as_str()
            .is_some_and(|s| s.starts_with("--- hermes dump ---"))
    });
    let shown = ui
        .browser
        .execute("return document.getElementById('dump').textContent;");
    assert_eq!(shown.as_str().unwrap(), expected_dump);

    ui.browser.wait_for("#checks tr.check-fail", WAIT);
    let rows = check_rows(&ui);
    let failing: Vec<_> = rows.iter().filter(|r| r.0 == "✗").collect();
    assert!(
        failing
            .iter()
            .any(|(_, message, fix)| message.contains("auth.json") && !fix.is_empty()),
        "{rows:?}"
    );
    assert!(rows.iter().any(|r| r.0 == "✓"), "{rows:?}");
    assert!(
        ui.browser
            .find("#doctor-summary")
            .text()
            .contains("1 failed"),
        "{}",
        ui.browser.find("#doctor-summary").text()
    );
    ui.screenshot("diagnostics");

    // Copy: the clipboard, or (where the page may not use it) the dump selected for Ctrl+C.
    ui.browser.wait_until("the copy button", WAIT, |b| {
        b.execute("return !document.getElementById('copy-dump').disabled;") == Value::Bool(true)
    });
    ui.browser.find("#copy-dump").click();
    ui.browser.wait_until("the copy said", WAIT, |b| {
        b.execute("return document.getElementById('copied').textContent;")
            .as_str()
            .is_some_and(|s| !s.is_empty())
    });
    let said = ui.browser.find("#copied").text();
    let selection = ui.browser.execute("return String(window.getSelection());");
    // The Clipboard API copied it, or the fallback left the whole dump selected (and copied
    // it, or asks for Ctrl+C).
    assert!(
        said == "Copied." && selection.as_str() == Some("")
            || selection.as_str() == Some(expected_dump.as_str()),
        "{said:?}, selection {selection}"
    );
}

/// The profile a page shows follows the address: `?profile=` opens Diagnostics (which has a
/// picker) and Sessions on that profile, and a pick is written back to the address.
#[test]
fn the_profile_follows_the_address_and_a_pick_is_kept_in_it() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let Some(ui) = Ui::open(&t, &[]) else { return };
    let summary = |ui: &Ui| {
        ui.browser
            .execute("return document.getElementById('doctor-summary').textContent;")
            .as_str()
            .unwrap_or("")
            .to_string()
    };

    ui.goto("diagnostics?profile=work");
    ui.browser
        .wait_until("the work profile's doctor", WAIT, |_| {
            summary(&ui).starts_with("profile work")
        });
    assert_eq!(ui.browser.find("#profile").value(), "work");

    // Picking another profile loads it and keeps it in the address.
    ui.browser.execute(
        "var p = document.getElementById('profile'); p.value = 'default'; \
         p.dispatchEvent(new Event('change')); return null;",
    );
    ui.browser
        .wait_until("the default profile's doctor", WAIT, |_| {
            summary(&ui).starts_with("profile default")
        });
    assert!(
        ui.browser
            .current_url()
            .ends_with("/diagnostics?profile=default"),
        "{}",
        ui.browser.current_url()
    );

    // Another page with a picker opens on the profile its address names.
    ui.goto("sessions?profile=work");
    ui.browser.wait_for("#profile", WAIT);
    assert_eq!(ui.browser.find("#profile").value(), "work");
}
