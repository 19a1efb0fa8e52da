//! `hermes migrate check` on volumes the originals wrote with their own commands: hermes-agent
//! 0.19.0 (PyPI) and 0.20.1 (the fixture source tree). Opt-in: `HERMES_TEST_PYPI=1` (CI runs
//! them). Hand-made volumes (malformed files, symlinks): `hermes_diag::migrate`'s unit tests.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hermes_test_support::OriginalAgent;
use serde_json::Value;

use crate::util::{TestContext, render};

const KEY: &str = "k3y-for-the-api-server-0123456789";
const TOKEN: &str = "123456:telegram-secret-token";

/// Runs the original's CLI on the test's volume, as an operator would.
pub(crate) fn original(t: &TestContext, agent: &OriginalAgent, args: &[&str]) {
    let out = Command::new(&agent.hermes)
        .args(args)
        .env_clear()
        .env("HOME", t.home())
        .env("HERMES_HOME", t.root())
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "original hermes {args:?}:\n{}",
        render(&out)
    );
}

/// A volume as an operator of the original leaves it: the default profile with a model, a
/// Telegram token and the API server on; a `work` profile with its API server on too (both
/// on the original's default port); the config of both migrated to the agent's schema; one
/// conversation stored by the original's own SessionDB.
fn write_volume(t: &TestContext, agent: &OriginalAgent) {
    fs::create_dir_all(t.home()).unwrap();
    original(t, agent, &["config", "set", "model.default", "some/model"]);
    original(t, agent, &["config", "set", "TELEGRAM_BOT_TOKEN", TOKEN]);
    original(t, agent, &["config", "set", "API_SERVER_KEY", KEY]);
    original(t, agent, &["config", "migrate"]);
    original(t, agent, &["profile", "create", "work"]);
    original(
        t,
        agent,
        &["-p", "work", "config", "set", "API_SERVER_KEY", KEY],
    );
    original(t, agent, &["-p", "work", "config", "migrate"]);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/docker/original/session.py");
    let out = Command::new(&agent.python)
        .arg(script)
        .arg(t.root())
        .arg("20260801_120000_abcdef")
        .env("HOME", t.home())
        .output()
        .unwrap();
    assert!(out.status.success(), "session.py:\n{}", render(&out));
}

/// Our report of the volume with `agent` as this image's agent: exit code and document.
fn check(t: &TestContext, agent: &OriginalAgent) -> (i32, Value, String) {
    let out = t
        .cmd(&["migrate", "check", "--json"])
        .env("HERMES_AGENT_CLI", &agent.hermes)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {}", render(&out)));
    (out.status.code().unwrap(), doc, text)
}

pub(crate) fn profile<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no profile {name} in {doc:#}"))
}

fn attention<'a>(findings: &'a Value, area: &str) -> Vec<&'a Value> {
    findings
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["area"] == area && f["status"] == "attention")
        .collect()
}

/// Every file under `root` with its bytes.
fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                out.push((path.clone(), fs::read(&path).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// What carries over and what needs attention on the volume `agent` wrote, checked with
/// `agent` as this image's agent (at `schema`).
fn report_on_own_volume(agent: &OriginalAgent, schema: u64, brings_aiohttp: bool) {
    let t = TestContext::new();
    write_volume(&t, agent);
    let before = snapshot(&t.root());
    let (code, doc, text) = check(&t, agent);
    assert_eq!(snapshot(&t.root()), before, "the check changed the volume");
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["format"], 1);
    assert_eq!(doc["verdict"], "attention");
    assert_eq!(doc["agent"]["schema"], schema, "asked of the agent itself");
    assert_eq!(doc["volume_schema"], schema);
    assert_eq!(doc["agent_older_than_volume"], false);

    let default = profile(&doc, "default");
    assert_eq!(default["config"]["schema"], schema);
    assert_eq!(profile(&doc, "work")["config"]["schema"], schema);
    let keys = default["credentials"]["env_keys"].as_array().unwrap();
    assert!(keys.iter().any(|k| k == "TELEGRAM_BOT_TOKEN"), "{keys:?}");
    assert_eq!(default["sessions"]["sessions"], 1);
    assert_eq!(default["sessions"]["messages"], 2);
    assert!(default["sessions"]["schema_version"].as_i64().unwrap() >= 22);
    assert!(attention(&default["findings"], "sessions").is_empty());
    // The agent is installed without the Telegram adapter's package.
    let telegram = &default["platforms"][0];
    assert_eq!(telegram["name"], "telegram");
    assert_eq!(telegram["installed_in"], Value::Null);
    assert_eq!(attention(&default["findings"], "platforms").len(), 1);
    // Both API servers on the original's default port.
    assert_eq!(default["api_server"]["enabled"], true);
    assert_eq!(profile(&doc, "work")["api_server"]["port"], 8642);
    let ports = attention(&doc["findings"], "ports");
    assert_eq!(ports.len(), 1, "{doc:#}");
    assert!(
        ports[0]["message"]
            .as_str()
            .unwrap()
            .contains("default, work")
    );
    // 0.19.0 installed alone lacks its API server's `aiohttp` (its `messaging` extra has it).
    let aiohttp: Vec<&Value> = attention(&doc["findings"], "api_server")
        .into_iter()
        .filter(|f| f["message"].as_str().unwrap().contains("aiohttp"))
        .collect();
    assert_eq!(aiohttp.len(), usize::from(!brings_aiohttp), "{doc:#}");
    assert_eq!(doc["attention"], 3 - u64::from(brings_aiohttp), "{doc:#}");
    for secret in [KEY, TOKEN] {
        assert!(!text.contains(secret), "a secret was printed");
    }

    // Multiplexed (the original's own switch), the two profiles share one listener.
    original(
        &t,
        agent,
        &["config", "set", "gateway.multiplex_profiles", "true"],
    );
    let (_, doc, _) = check(&t, agent);
    assert_eq!(doc["multiplex"]["on"], true);
    assert!(attention(&doc["findings"], "ports").is_empty(), "{doc:#}");
}

#[test]
fn a_volume_written_by_0_19_is_reported_as_it_carries_over() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    report_on_own_volume(&agent, 33, false);
}

#[test]
fn a_volume_written_by_0_20_is_reported_as_it_carries_over() {
    let Some(agent) = hermes_test_support::fixture_agent() else {
        return;
    };
    report_on_own_volume(&agent, 35, true);
}

#[test]
fn a_volume_of_0_20_on_an_image_with_0_19_needs_attention_and_a_clean_one_does_not() {
    let Some(old) = hermes_test_support::original_agent() else {
        return;
    };
    let Some(new) = hermes_test_support::fixture_agent() else {
        return;
    };
    let t = TestContext::new();
    fs::create_dir_all(t.home()).unwrap();
    original(&t, &new, &["config", "set", "model.default", "some/model"]);
    original(&t, &new, &["config", "migrate"]);
    // Everything carries over to an image with the agent that wrote it.
    let (code, doc, _) = check(&t, &new);
    assert_eq!((code, &doc["verdict"]), (0, &Value::from("ok")), "{doc:#}");

    let (code, doc, _) = check(&t, &old);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["agent"]["schema"], 33);
    assert_eq!(doc["volume_schema"], 35);
    assert_eq!(doc["agent_older_than_volume"], true);
    assert_eq!(attention(&doc["findings"], "agent").len(), 1);
    // The text names both versions and what to do.
    let out = t
        .cmd(&["migrate", "check"])
        .env("HERMES_AGENT_CLI", &old.hermes)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("schema 35") && text.contains("schema 33"),
        "{text}"
    );
    assert!(text.contains("HERMES_AGENT_SOURCE"), "{text}");
}

#[test]
fn without_a_volume_it_says_so_and_creates_nothing() {
    let t = TestContext::new();
    let out = t.run(&["migrate", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the data volume"));
    assert!(!t.root().exists(), "the check created the volume");
    // A usage error is 2.
    assert_eq!(
        t.run(&["migrate", "check", "--bogus"]).status.code(),
        Some(2)
    );
}
