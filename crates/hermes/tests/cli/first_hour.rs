//! The first hour of a new user on a machine, end to end, so it stays good: the README's steps
//! on a fresh `HERMES_HOME`, a local OpenAI-compatible server as the model, `hermes up -d`, the
//! key, a request with curl's bytes and with the official `openai` SDK, a profile created while
//! the supervisor runs (and served), the dashboard's pages in Chromium with `?profile=` and no
//! console errors, a backup and the restore of the unchanged volume (nothing replaced, nothing
//! restarted), and `hermes down`.
//!
//! It needs Chromium and the SDK (from PyPI): without either it skips, saying why (a failure in
//! strict mode, as in CI).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hermes_test_support::browser::Browser;
use hermes_test_support::poll;

use crate::load::StubUpstream;
use crate::util::{TestContext, free_port};

/// `POST /v1/chat/completions` as curl sends it: the status and the body.
fn chat(port: u16, key: &str, text: &str) -> (u16, String) {
    let body = format!(r#"{{"model":"hermes","messages":[{{"role":"user","content":"{text}"}}]}}"#);
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, body.to_string())
}

/// The `API_SERVER_KEY` a profile's `.env` holds, where the README says to find it.
fn key_in(env_file: &std::path::Path) -> String {
    std::fs::read_to_string(env_file)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("API_SERVER_KEY="))
        .unwrap_or_else(|| panic!("no API_SERVER_KEY in {}", env_file.display()))
        .to_string()
}

#[test]
fn the_first_hour_on_a_machine() {
    let Some(sdk) = crate::gateway_clients::venv_or_skip() else {
        return;
    };
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let t = TestContext::new();
    let model = StubUpstream::start();
    let (port, work_port, dashboard_port) = (free_port(), free_port(), free_port());

    // The model, as the README's first steps set it; a port of our own for the test.
    t.ok(&["config", "set", "model.default", "stub-model"]);
    let base_url = format!("http://127.0.0.1:{}/v1", model.port);
    t.ok(&["config", "set", "model.base_url", &base_url]);
    t.ok(&["config", "set", "API_SERVER_PORT", &port.to_string()]);

    // `hermes up -d`: back at the prompt with everything running.
    let dashboard_port_text = dashboard_port.to_string();
    let (mut supervisor, _) = t.up_detached(&[
        ("HERMES_DASHBOARD", "1"),
        ("HERMES_DASHBOARD_PORT", &dashboard_port_text),
    ]);
    poll::until_true("the default gateway up", Duration::from_secs(60), || {
        t.service("gateway-default")["state"] == "up"
    });

    // The key, where the README says, and the first request.
    let shown = t.ok(&["config", "get", "API_SERVER_KEY"]);
    let key = key_in(&t.root().join(".env"));
    assert!(!shown.contains(&key), "config get masks the key: {shown}");
    let (status, body) = chat(port, &key, "hello");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("pong"), "{body}");
    assert_eq!(chat(port, "wrong-key", "hello").0, 401);

    // The official SDK, with the base URL the README gives.
    let script = format!(
        "from openai import OpenAI\n\
         c = OpenAI(base_url='http://127.0.0.1:{port}/v1', api_key='{key}')\n\
         r = c.chat.completions.create(model='hermes', messages=[{{'role': 'user', 'content': 'hi'}}])\n\
         print(r.choices[0].message.content)\n\
         s = c.chat.completions.create(model='hermes', stream=True, messages=[{{'role': 'user', 'content': 'hi'}}])\n\
         print(''.join(ch.choices[0].delta.content or '' for ch in s if ch.choices))\n"
    );
    let sdk_out = std::process::Command::new(&sdk.python)
        .args(["-c", &script])
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&sdk_out.stdout);
    assert!(sdk_out.status.success(), "{sdk_out:?}");
    assert!(printed.lines().next() == Some("pong"), "{printed}");
    assert!(
        printed.lines().nth(1).is_some_and(|l| l.starts_with("t0 ")),
        "{printed}"
    );

    // A profile created while the supervisor runs is served (its gateway finds its volume).
    t.ok(&["profile", "create", "work", "--no-alias"]);
    t.ok(&["-p", "work", "config", "set", "model.default", "stub-model"]);
    t.ok(&["-p", "work", "config", "set", "model.base_url", &base_url]);
    t.ok(&[
        "-p",
        "work",
        "config",
        "set",
        "API_SERVER_PORT",
        &work_port.to_string(),
    ]);
    t.ok(&["-p", "work", "gateway", "restart"]);
    poll::until_true("gateway-work up", Duration::from_secs(60), || {
        t.service("gateway-work")["state"] == "up"
    });
    let work_key = key_in(&t.root().join("profiles/work/.env"));
    let (status, body) = chat(work_port, &work_key, "hello work");
    assert_eq!(status, 200, "{body}");

    // The dashboard: the sign-in link, then each page for the `work` profile, kept in the
    // address, with nothing in the console.
    let link = t.ok(&["dashboard", "link"]);
    browser.goto(link.trim());
    browser.wait_for("nav a[aria-current=page]", Duration::from_secs(20));
    for page in [
        "config",
        "sessions",
        "channels",
        "cron",
        "diagnostics",
        "plugins",
    ] {
        browser.goto(&format!(
            "http://127.0.0.1:{dashboard_port}/{page}?profile=work"
        ));
        browser.wait_for("nav a[aria-current=page]", Duration::from_secs(20));
        browser.wait_until(
            &format!("{page}: the picker shows `work`"),
            Duration::from_secs(20),
            |b| {
                b.execute("var p = document.getElementById('profile'); return p ? p.value : null;")
                    == serde_json::json!("work")
            },
        );
        let errors: Vec<String> = browser
            .console_errors()
            .into_iter()
            // Without the agent, its pages are told so by a 409 they show (docs/dashboard.md).
            .filter(|e| !(matches!(page, "channels" | "cron") && e.contains("status of 409")))
            .collect();
        assert!(errors.is_empty(), "{page}: {errors:?}");
    }
    for page in ["", "logs", "profiles", "backups"] {
        browser.goto(&format!("http://127.0.0.1:{dashboard_port}/{page}"));
        browser.wait_for("nav a[aria-current=page]", Duration::from_secs(20));
        let errors = browser.console_errors();
        assert!(errors.is_empty(), "/{page}: {errors:?}");
    }

    // A backup, and the restore of the unchanged volume: nothing replaced, nothing restarted.
    let pids = |names: &[&str]| -> Vec<i64> {
        names
            .iter()
            .map(|n| t.service(n)["pid"].as_i64().unwrap_or_default())
            .collect()
    };
    let gateways = ["gateway-default", "gateway-work"];
    let before = pids(&gateways);
    let archive = t.dir.path().join("first-hour.zip");
    t.ok(&["backup", "create", "-o", archive.to_str().unwrap()]);
    let restored = t.ok(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    assert!(restored.contains("Nothing to change"), "{restored}");
    assert_eq!(pids(&gateways), before, "no gateway was restarted");
    assert_eq!(chat(port, &key, "still there").0, 200);

    // And stop.
    let out = t.run(&["down"]);
    assert!(out.status.success(), "{out:?}");
    supervisor.stopped();
    assert!(!t.run(&["service", "list"]).status.success());
}
