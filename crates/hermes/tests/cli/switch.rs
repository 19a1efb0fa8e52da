//! Switching from the original, end to end, so it stays good: a volume written by the
//! original's own commands — hermes-agent 0.19.0 (PyPI) and 0.20.1 (the fixture) — with two
//! profiles, each with its API key and port, its model and a cron job, Telegram configured on
//! the default one; then `hermes migrate check` (every ✓ true, every gap with its fix), then
//! `hermes up` with that agent installed, separately and multiplexed: every profile's clients
//! get in with their own keys, its chats reach the model, its jobs are the agent's as before.
//! Opt-in with the PyPI suites: `HERMES_TEST_PYPI=1` (CI runs them).

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hermes_test_support::{OriginalAgent, poll};
use serde_json::Value;

use crate::load::StubUpstream;
use crate::migrate::{original, profile};
use crate::util::{TestContext, free_port};

const KEY: &str = "switch-default-key-0123456789abcdef";
const WORK_KEY: &str = "switch-work-key-0123456789abcdef";
const TOKEN: &str = "123456:switch-telegram-token";

/// `method path` with `key` (a JSON `body` for a POST); the status and the whole response.
fn call(port: u16, method: &str, path: &str, key: &str, body: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, String::new());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    let _ = write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, raw)
}

const CHAT: &str = r#"{"model":"stub-model","messages":[{"role":"user","content":"ping"}]}"#;

/// The volume, as an operator of `agent` leaves it, with its own commands only.
fn write_volume(t: &TestContext, agent: &OriginalAgent, model: u16, port: u16, work_port: u16) {
    fs::create_dir_all(t.home()).unwrap();
    let base_url = format!("http://127.0.0.1:{model}/v1");
    for (profile, key, port) in [(None, KEY, port), (Some("work"), WORK_KEY, work_port)] {
        if let Some(name) = profile {
            original(t, agent, &["profile", "create", name]);
        }
        let p: Vec<&str> = profile.map(|n| vec!["-p", n]).unwrap_or_default();
        let set = |k: &str, v: &str| {
            let mut args = p.clone();
            args.extend(["config", "set", k, v]);
            original(t, agent, &args);
        };
        set("model.default", "stub-model");
        set("model.provider", "custom");
        set("model.base_url", &base_url);
        set("API_SERVER_KEY", key);
        set("API_SERVER_PORT", &port.to_string());
        let mut cron = p.clone();
        cron.extend(["cron", "create", "every 2h", "Summarise the day", "--name"]);
        cron.push(if profile.is_some() {
            "work-digest"
        } else {
            "digest"
        });
        original(t, agent, &cron);
    }
    original(t, agent, &["config", "set", "TELEGRAM_BOT_TOKEN", TOKEN]);
}

/// What `hermes up` and the CLI run with: the agent, its API server's `aiohttp` from
/// `overlay`, and no lazy installs — the agent would otherwise install a configured platform's
/// package (Telegram's, here) into the test venv other tests share.
fn agent_env<'a>(
    agent: &'a OriginalAgent,
    overlay: &'a std::path::Path,
) -> [(&'static str, &'a std::ffi::OsStr); 3] {
    [
        ("HERMES_AGENT_CLI", agent.hermes.as_os_str()),
        ("PYTHONPATH", overlay.as_os_str()),
        ("HERMES_DISABLE_LAZY_INSTALLS", std::ffi::OsStr::new("1")),
    ]
}

/// `migrate check --json` in the environment `hermes up` gets ([`agent_env`]).
fn check(t: &TestContext, agent: &OriginalAgent, overlay: &std::path::Path) -> Value {
    let out = t
        .cmd(&["migrate", "check", "--json"])
        .envs(agent_env(agent, overlay))
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", crate::util::render(&out)))
}

/// Every finding of the check (the volume's and each profile's).
fn findings(doc: &Value) -> Vec<&Value> {
    let mut all: Vec<&Value> = doc["findings"].as_array().into_iter().flatten().collect();
    for p in doc["profiles"].as_array().into_iter().flatten() {
        all.extend(p["findings"].as_array().into_iter().flatten());
    }
    all
}

/// The agent's own cron list of `profile`, through our CLI (the agent runs it).
fn cron_list(t: &TestContext, agent: &OriginalAgent, profile: &str) -> String {
    let out = t
        .cmd(&["-p", profile, "cron", "list"])
        .env("HERMES_AGENT_CLI", &agent.hermes)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::util::render(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn switch_from(agent: &OriginalAgent) {
    let t = TestContext::new();
    let model = StubUpstream::start();
    let (port, work_port) = (free_port(), free_port());
    write_volume(&t, agent, model.port, port, work_port);
    // The API server platform's `aiohttp`, which the operator's install had (the PyPI
    // package alone does not bring it).
    let overlay = crate::engine::aiohttp_overlay(&agent.python);

    // What the check says is so, and what it cannot carry over comes with its fix.
    let doc = check(&t, agent, &overlay);
    for finding in findings(&doc) {
        if finding["status"] == "attention" {
            assert!(
                finding["action"].as_str().is_some_and(|a| !a.is_empty()),
                "a gap without its fix: {finding:#}"
            );
        }
    }
    let cron_of = |doc: &Value, name: &str| -> Vec<Value> {
        profile(doc, name)["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["area"] == "cron")
            .cloned()
            .collect()
    };
    for name in ["default", "work"] {
        assert_eq!(profile(&doc, name)["api_server"]["enabled"], true);
    }
    // The default profile's gateway starts on a fresh volume, so its job runs; `work`'s
    // never ran under the original, so it would not start by itself: said, with the fix.
    let default_cron = cron_of(&doc, "default");
    assert!(
        !default_cron.is_empty() && default_cron.iter().all(|f| f["status"] == "ok"),
        "{default_cron:#?}"
    );
    let work_cron = cron_of(&doc, "work");
    assert!(
        work_cron.iter().any(|f| f["status"] == "attention"
            && f["action"]
                .as_str()
                .is_some_and(|a| a.contains("hermes -p work gateway start"))),
        "{work_cron:#?}"
    );
    assert_eq!(profile(&doc, "work")["api_server"]["port"], work_port);
    let text = doc.to_string();
    for secret in [KEY, WORK_KEY, TOKEN] {
        assert!(!text.contains(secret), "a secret was printed");
    }

    // `hermes up` with the agent: each profile's gateway, its clients with their own keys.
    let mut up = t.start_up_with(agent_env(agent, &overlay));
    // The fix the check named.
    let started = t
        .cmd(&["-p", "work", "gateway", "start"])
        .envs(agent_env(agent, &overlay))
        .output()
        .unwrap();
    assert!(
        started.status.success(),
        "{}",
        crate::util::render(&started)
    );
    for (port, key, other) in [(port, KEY, WORK_KEY), (work_port, WORK_KEY, KEY)] {
        poll::until_true(
            &format!("the gateway on {port}"),
            Duration::from_secs(120),
            || call(port, "GET", "/health", key, "").0 == 200,
        );
        assert_eq!(call(port, "GET", "/v1/models", key, "").0, 200);
        assert_eq!(call(port, "GET", "/v1/models", other, "").0, 401);
        let (status, answer) = call(port, "POST", "/v1/chat/completions", key, CHAT);
        assert_eq!(status, 200, "{answer}");
    }
    let rows: Value = serde_json::from_str(&t.ok(&["service", "status", "--json"])).unwrap();
    for service in ["gateway-default", "gateway-work"] {
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == service)
            .unwrap();
        assert_eq!(
            (&row["state"], &row["engine"]),
            (&Value::from("up"), &Value::from("agent")),
            "{row:#}"
        );
    }
    // The jobs are the agent's, each profile's as it had them.
    assert!(cron_list(&t, agent, "default").contains("digest"));
    assert!(cron_list(&t, agent, "work").contains("work-digest"));
    assert_eq!(up.stop(), Some(0));
    // Started once, it starts at every boot: the check now says its jobs run.
    let doc = check(&t, agent, &overlay);
    let work_cron = cron_of(&doc, "work");
    assert!(
        work_cron.iter().all(|f| f["status"] == "ok"),
        "{work_cron:#?}"
    );

    // Multiplexed, with the original's own switch: one listener, each profile its own key.
    original(
        &t,
        agent,
        &["config", "set", "gateway.multiplex_profiles", "true"],
    );
    let doc = check(&t, agent, &overlay);
    assert_eq!(doc["multiplex"]["on"], true, "{doc:#}");
    // The agent's multiplexing gateway reads API_SERVER_* from a profile's `.env` only:
    // 0.19.0 the default profile's (a named one has no API server of its own there), 0.20.1
    // a named profile's. The check says so, with the fix, which is applied.
    let release_0_19 = agent_is_0_19(&doc);
    let moved: Vec<(&str, &str, u16)> = if release_0_19 {
        vec![(".env", KEY, port)]
    } else {
        vec![("profiles/work/.env", WORK_KEY, work_port)]
    };
    for (env, _, _) in &moved {
        let name = if *env == ".env" { "default" } else { "work" };
        let gaps: Vec<Value> = profile(&doc, name)["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["area"] == "api_server" && f["status"] == "attention")
            .cloned()
            .collect();
        assert!(
            gaps.iter().any(|f| f["action"]
                .as_str()
                .is_some_and(|a| a.contains("API_SERVER_KEY") && a.contains(".env"))),
            "{name}: {gaps:#?}"
        );
    }
    for (env, key, port) in &moved {
        let path = t.root().join(env);
        let mut text = fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&format!("API_SERVER_KEY={key}\nAPI_SERVER_PORT={port}\n"));
        fs::write(&path, text).unwrap();
    }
    let doc = check(&t, agent, &overlay);
    for name in ["default", "work"] {
        let gaps: Vec<&Value> = profile(&doc, name)["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["area"] == "api_server" && f["status"] == "attention")
            .collect();
        assert!(gaps.is_empty(), "{name}: {gaps:#?}");
    }
    let mut up = t.start_up_with(agent_env(agent, &overlay));
    poll::until_true("the multiplexing gateway", Duration::from_secs(120), || {
        call(port, "GET", "/health", KEY, "").0 == 200
    });
    // `work`'s clients: with its own key (0.20.1), with the default profile's under 0.19.0,
    // as that release's own multiplexing gateway serves them.
    let (work_key, refused) = if release_0_19 {
        (KEY, WORK_KEY)
    } else {
        (WORK_KEY, KEY)
    };
    assert_eq!(call(port, "GET", "/p/work/v1/models", work_key, "").0, 200);
    assert_eq!(call(port, "GET", "/p/work/v1/models", refused, "").0, 401);
    let (status, answer) = call(port, "POST", "/p/work/v1/chat/completions", work_key, CHAT);
    assert_eq!(status, 200, "{answer}");
    assert_eq!(up.stop(), Some(0));
}

/// Whether the check's agent is a 0.19 release.
fn agent_is_0_19(doc: &Value) -> bool {
    doc["agent"]["version"]
        .as_str()
        .is_some_and(|v| v.starts_with("0.19"))
}

#[test]
fn an_operator_of_0_19_switches_and_loses_nothing() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    switch_from(&agent);
}

#[test]
fn an_operator_of_0_20_switches_and_loses_nothing() {
    let Some(agent) = hermes_test_support::fixture_agent() else {
        return;
    };
    switch_from(&agent);
}
