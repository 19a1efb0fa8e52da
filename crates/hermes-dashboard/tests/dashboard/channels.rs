//! The Channels API over real HTTP, with the real agents' catalogues (hermes-agent 0.19.0 from
//! PyPI and the 0.20.1 fixture, opt-in with `HERMES_TEST_PYPI=1`, always in CI): each platform
//! listed with its state and never a credential's value, a platform's variables set and
//! cleared in `.env` and the platform enabled in `config.yaml` (every other byte of both kept,
//! the agent's own loader reading the result), foreign keys, multi-line values and port-binding
//! platforms on a multiplexed secondary profile refused with nothing written.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::common::{self, Answer, Dashboard, TOKEN_ENV, agent_python, local, token_header};

const CONFIG: &str = "# my settings\nmodel: gpt-4o  # the one we pay for\nplatforms:\n  email:\n    enabled: false\n    # poll slowly\n    extra: {poll_interval: 300}\n";
const DOTENV: &str = "# keys\nOPENAI_API_KEY=sk-keep-me\n";
const SECRET: &str = "hunter2-app-password";

fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let root = home.path();
    fs::write(root.join("config.yaml"), CONFIG).unwrap();
    fs::write(root.join(".env"), DOTENV).unwrap();
    fs::create_dir_all(root.join("profiles/work")).unwrap();
    fs::write(root.join("profiles/work/config.yaml"), "model: small\n").unwrap();
    fs::write(root.join("profiles/work/SOUL.md"), "work\n").unwrap();
    // What a running agent gateway records of its platforms.
    fs::write(
        root.join("gateway_state.json"),
        json!({ "gateway_state": "running", "pid": 1, "platforms": {
            "email": { "state": "fatal", "error_code": "auth", "error_message": "IMAP login refused", "updated_at": "2026-12-03T09:00:00Z" },
        }})
        .to_string(),
    )
    .unwrap();
    home
}

fn put(d: &Dashboard, path: &str, body: &Value) -> Answer {
    common::send(
        d,
        "PUT",
        path,
        &local(d),
        &[token_header()],
        &body.to_string(),
    )
}

fn platform<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["platforms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed: {list}"))
}

#[test]
fn without_an_agent_the_page_says_why_and_nothing_is_written() {
    let mut env = TOKEN_ENV.to_vec();
    env.push(("HERMES_AGENT_CLI", ""));
    let d = common::start_in(home(), "127.0.0.1", &env);
    let got = common::get(&d, "/api/messaging/platforms");
    assert_eq!(got.status, 409, "{}", got.body);
    assert!(
        got.json()["hint"]
            .as_str()
            .unwrap()
            .contains("HERMES_AGENT_CLI"),
        "{}",
        got.body
    );
    let got = put(
        &d,
        "/api/messaging/platforms/email",
        &json!({ "enabled": true }),
    );
    assert_eq!(got.status, 409, "{}", got.body);
    let got = common::send(
        &d,
        "PUT",
        "/api/messaging/platforms/email",
        &local(&d),
        &[],
        "{}",
    );
    assert_eq!(got.status, 401, "not signed in: {}", got.body);
    assert_eq!(
        fs::read_to_string(d.root().join("config.yaml")).unwrap(),
        CONFIG
    );
    assert_eq!(fs::read_to_string(d.root().join(".env")).unwrap(), DOTENV);
    let page = common::get(&d, "/channels");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("assets/channels.js"), "{}", page.body);
}

/// The whole round with one agent: list, set, enable, the agent reading it, refusals, clear.
fn the_agent_platforms_are_set_up(agent: &hermes_test_support::OriginalAgent, editable: bool) {
    let home = home();
    let root = home.path().to_path_buf();
    let mut env = TOKEN_ENV.to_vec();
    let cli = agent.hermes.to_str().unwrap().to_string();
    env.push(("HERMES_AGENT_CLI", &cli));
    let d = common::start_in(home, "127.0.0.1", &env);

    let list = common::get_json(&d, "/api/messaging/platforms", 200);
    assert_eq!(list["profile"], "default");
    assert!(
        list["env_path"].as_str().unwrap().ends_with(".env"),
        "{list}"
    );
    let email = platform(&list, "email");
    assert_eq!(email["enabled"], false);
    assert_eq!(email["state"], "disabled");
    assert_eq!(email["configured"], false);
    let address = email["env_vars"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["key"] == "EMAIL_ADDRESS")
        .unwrap();
    assert_eq!(address["required"], true);
    assert_eq!(address["is_set"], false);
    assert!(platform(&list, "webhook")["env_vars"].is_array());
    // Remembered in the dashboard user's cache, so a restarted dashboard lists the platforms
    // without starting the agent (0.2 s against 1 to 6 s); never for an editable install,
    // whose source can change under the same files.
    let remembered = root.join("user/.cache/hermes/agent-facts.json");
    if editable {
        assert!(!remembered.exists());
    } else {
        assert_eq!(
            fs::metadata(&remembered).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let remembered: Value = serde_json::from_slice(&fs::read(&remembered).unwrap()).unwrap();
        let catalogue = remembered
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["question"] == "messaging-platforms")
            .unwrap_or_else(|| panic!("{remembered}"));
        assert_eq!(
            catalogue["answer"]["platforms"].as_array().unwrap().len(),
            list["platforms"].as_array().unwrap().len()
        );
    }

    let creds = json!({
        "EMAIL_ADDRESS": "bot@example.org", "EMAIL_PASSWORD": SECRET,
        "EMAIL_IMAP_HOST": "imap.example.org", "EMAIL_SMTP_HOST": "smtp.example.org",
    });
    let got = put(
        &d,
        "/api/messaging/platforms/email",
        &json!({ "env": creds, "enabled": true }),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["ok"], true);
    assert_eq!(got.json()["restart"]["needed"], true);
    assert_eq!(got.json()["restart"]["service"], "gateway-default");
    let dotenv = fs::read_to_string(root.join(".env")).unwrap();
    assert!(dotenv.starts_with(DOTENV), "the other lines kept: {dotenv}");
    assert!(dotenv.contains(SECRET), "{dotenv}");
    let config = fs::read_to_string(root.join("config.yaml")).unwrap();
    assert_eq!(
        config,
        CONFIG.replace("enabled: false", "enabled: true"),
        "one byte range changed"
    );
    // The agent's own loader reads what was written.
    let read = agent_python(
        agent,
        &root,
        "from hermes_cli.config import load_config, load_env; c = load_config(); e = load_env(); print(c['platforms']['email']['enabled'], e.get('EMAIL_ADDRESS'))",
    );
    assert_eq!(
        read.lines().last().unwrap(),
        "True bot@example.org",
        "{read}"
    );

    let list = common::get(&d, "/api/messaging/platforms");
    assert!(
        !list.body.contains(SECRET),
        "a value is never shown: {}",
        list.body
    );
    let email = platform(&list.json(), "email").clone();
    assert_eq!(email["enabled"], true);
    assert_eq!(email["configured"], true);
    assert_eq!(
        email["gateway_running"], true,
        "the profile's record says running"
    );
    assert_eq!(email["state"], "fatal", "the gateway's own word");
    assert_eq!(email["error_message"], "IMAP login refused");

    // Refused, nothing written: another platform's key, a second line, an unknown platform,
    // a value that is not text, a body that is not the shape.
    let before = (
        fs::read(root.join(".env")).unwrap(),
        fs::read(root.join("config.yaml")).unwrap(),
    );
    for (path, body, status) in [
        (
            "/api/messaging/platforms/email",
            json!({ "env": { "OPENAI_API_KEY": "sk-stolen" } }),
            400,
        ),
        (
            "/api/messaging/platforms/email",
            json!({ "clear_env": ["OPENAI_API_KEY"] }),
            400,
        ),
        (
            "/api/messaging/platforms/email",
            json!({ "env": { "EMAIL_ADDRESS": "a@b\nOPENAI_API_KEY=x" } }),
            400,
        ),
        (
            "/api/messaging/platforms/carrier-pigeon",
            json!({ "enabled": true }),
            404,
        ),
        (
            "/api/messaging/platforms/email",
            json!({ "env": { "EMAIL_ADDRESS": 7 } }),
            422,
        ),
        (
            "/api/messaging/platforms/email",
            json!({ "enable": true }),
            422,
        ),
        (
            "/api/messaging/platforms/email?profile=nobody",
            json!({ "enabled": true }),
            404,
        ),
    ] {
        let got = put(&d, path, &body);
        assert_eq!(got.status, status, "{path} {body}: {}", got.body);
        assert!(got.json()["detail"].is_string(), "{}", got.body);
    }
    assert_eq!(
        (
            fs::read(root.join(".env")).unwrap(),
            fs::read(root.join("config.yaml")).unwrap()
        ),
        before
    );

    // Multiplexing on: a port-binding platform cannot be enabled on a secondary profile.
    fs::write(
        root.join("config.yaml"),
        format!(
            "{}gateway:\n  multiplex_profiles: true\n",
            CONFIG.replace("enabled: false", "enabled: true")
        ),
    )
    .unwrap();
    let work_config = root.join("profiles/work/config.yaml");
    let got = put(
        &d,
        "/api/messaging/platforms/webhook?profile=work",
        &json!({ "enabled": true }),
    );
    assert_eq!(got.status, 409, "{}", got.body);
    assert!(
        got.json()["detail"]
            .as_str()
            .unwrap()
            .contains("multiplex_profiles"),
        "{}",
        got.body
    );
    assert_eq!(fs::read_to_string(&work_config).unwrap(), "model: small\n");
    // Disabling stays allowed there, and the restart is the shared gateway's.
    let got = put(
        &d,
        "/api/messaging/platforms/webhook?profile=work",
        &json!({ "enabled": false }),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["restart"]["service"], "gateway-default");

    // Clearing a required variable: configured no longer.
    let got = put(
        &d,
        "/api/messaging/platforms/email",
        &json!({ "clear_env": ["EMAIL_PASSWORD"] }),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    let dotenv = fs::read_to_string(root.join(".env")).unwrap();
    assert!(
        !dotenv.contains(SECRET) && dotenv.contains("EMAIL_ADDRESS=bot@example.org"),
        "{dotenv}"
    );
    let list = common::get_json(&d, "/api/messaging/platforms", 200);
    assert_eq!(platform(&list, "email")["state"], "not_configured");
}

#[test]
fn the_agent_0_19_platforms_are_listed_and_set_up() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    the_agent_platforms_are_set_up(&agent, false);
}

#[test]
fn the_agent_0_20_platforms_are_listed_and_set_up() {
    let Some(agent) = hermes_test_support::fixture_agent() else {
        return;
    };
    the_agent_platforms_are_set_up(&agent, true);
}

fn post(d: &Dashboard, path: &str, body: &Value) -> Answer {
    common::send(
        d,
        "POST",
        path,
        &local(d),
        &[token_header()],
        &body.to_string(),
    )
}

/// A code the agent's own store issues, as its gateway issues one to a user who messages the bot.
fn issue_code(agent: &hermes_test_support::OriginalAgent, dir: &Path, user: &str) -> String {
    let out = agent_python(
        agent,
        dir,
        &format!(
            "from gateway.pairing import PairingStore; print(PairingStore().generate_code('telegram', '{user}', 'user {user}'))"
        ),
    );
    out.lines().last().unwrap().to_string()
}

/// Pairing with one agent: a pending request listed (no code shown), approved by its code and
/// (0.20) by its request id, revoked, cleared; bad input refused; the agent's store reads it.
fn the_agent_pairs_users(agent: &hermes_test_support::OriginalAgent) {
    let home = home();
    let root = home.path().to_path_buf();
    let mut env = TOKEN_ENV.to_vec();
    let cli = agent.hermes.to_str().unwrap().to_string();
    env.push(("HERMES_AGENT_CLI", &cli));
    let d = common::start_in(home, "127.0.0.1", &env);

    let code = issue_code(agent, &root, "1001");
    let list = common::get(&d, "/api/pairing");
    assert_eq!(list.status, 200, "{}", list.body);
    assert!(
        !list.body.contains(&code),
        "the code is never shown: {}",
        list.body
    );
    let pending = list.json()["pending"].as_array().unwrap().clone();
    assert_eq!(pending.len(), 1, "{}", list.body);
    assert_eq!(pending[0]["platform"], "telegram");
    assert_eq!(pending[0]["user_id"], "1001");

    // A wrong code, a hostile platform name, nothing at all: refused.
    let got = post(
        &d,
        "/api/pairing/approve",
        &json!({ "platform": "telegram", "code": "ZZZZZZZZ" }),
    );
    assert_eq!(got.status, 404, "{}", got.body);
    for body in [
        json!({ "platform": "../../etc", "code": code }),
        json!({ "platform": "telegram" }),
        json!({ "platform": "telegram", "code": "a\nb" }),
    ] {
        let got = post(&d, "/api/pairing/approve", &body);
        assert_eq!(got.status, 400, "{body}: {}", got.body);
    }
    let got = common::send(&d, "POST", "/api/pairing/approve", &local(&d), &[], "{}");
    assert_eq!(got.status, 401, "{}", got.body);

    let got = post(
        &d,
        "/api/pairing/approve",
        &json!({ "platform": "telegram", "code": code.to_lowercase() }),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["user"]["user_id"], "1001");
    let approved = agent_python(
        agent,
        &root,
        "from gateway.pairing import PairingStore; print(PairingStore().is_approved('telegram', '1001'))",
    );
    assert_eq!(
        approved.lines().last().unwrap(),
        "True",
        "the agent's store has it"
    );
    let list = common::get_json(&d, "/api/pairing", 200);
    assert!(list["pending"].as_array().unwrap().is_empty(), "{list}");
    assert_eq!(list["approved"][0]["user_id"], "1001", "{list}");

    if list["by_request_id"] == true {
        issue_code(agent, &root, "1002");
        let list = common::get_json(&d, "/api/pairing", 200);
        let id = list["pending"][0]["request_id"]
            .as_str()
            .unwrap()
            .to_string();
        let got = post(
            &d,
            "/api/pairing/approve",
            &json!({ "platform": "telegram", "request_id": id }),
        );
        assert_eq!(got.status, 200, "{}", got.body);
        assert_eq!(got.json()["user"]["user_id"], "1002");
    }

    let got = post(
        &d,
        "/api/pairing/revoke",
        &json!({ "platform": "telegram", "user_id": "1001" }),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    let got = post(
        &d,
        "/api/pairing/revoke",
        &json!({ "platform": "telegram", "user_id": "1001" }),
    );
    assert_eq!(got.status, 404, "{}", got.body);

    issue_code(agent, &root, "1003");
    let got = post(&d, "/api/pairing/clear-pending", &json!({}));
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["cleared"], 1);
    assert!(
        common::get_json(&d, "/api/pairing", 200)["pending"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // Each profile has its own store (the original's test_pairing_is_isolated_per_profile):
    // an approval on `work` lands where `hermes -p work pairing` and its gateway read, never in
    // the default profile's.
    let work = root.join("profiles/work");
    fs::write(work.join("SOUL.md"), "w\n").unwrap();
    issue_code(agent, &root, "global-1");
    let work_code = issue_code(agent, &work, "work-1");
    let listed = common::get_json(&d, "/api/pairing?profile=work", 200);
    let users: Vec<&str> = listed["pending"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["user_id"].as_str())
        .collect();
    assert_eq!(users, ["work-1"], "{listed}");
    let got = post(
        &d,
        "/api/pairing/approve",
        &json!({ "platform": "telegram", "code": work_code, "profile": "work" }),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    let approved_in = |dir: &Path| {
        agent_python(agent, dir, "from gateway.pairing import PairingStore; print(PairingStore().is_approved('telegram', 'work-1'))")
            .lines()
            .last()
            .unwrap()
            .to_string()
    };
    assert_eq!(approved_in(&work), "True");
    assert_eq!(approved_in(&root), "False");
    let global = common::get_json(&d, "/api/pairing", 200);
    assert!(
        global["pending"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["user_id"] == "global-1"),
        "{global}"
    );
    assert_eq!(common::get(&d, "/api/pairing?profile=ghost").status, 404);
}

#[test]
fn the_agent_0_19_pairs_users() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    the_agent_pairs_users(&agent);
}

#[test]
fn the_agent_0_20_pairs_users() {
    let Some(agent) = hermes_test_support::fixture_agent() else {
        return;
    };
    the_agent_pairs_users(&agent);
}

/// The original's own checks of its profile-scoped Channels endpoints
/// (`tests/hermes_cli/test_web_server_messaging_profiles.py` of 0.20.1), ported: a named
/// profile reads and writes only its own files, reports its gateway's failed start, refuses
/// every port-binding platform while multiplexing and may still disable one.
#[test]
fn the_originals_profile_scoped_channel_checks_hold() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let root = home.path().to_path_buf();
    fs::write(root.join(".env"), "TELEGRAM_BOT_TOKEN=root-token\n").unwrap();
    fs::write(root.join("config.yaml"), "model: big\n").unwrap();
    let worker = root.join("profiles/worker_alpha");
    fs::create_dir_all(&worker).unwrap();
    fs::write(worker.join("SOUL.md"), "w\n").unwrap();
    let mut env = TOKEN_ENV.to_vec();
    let cli = agent.hermes.to_str().unwrap().to_string();
    env.push(("HERMES_AGENT_CLI", &cli));
    let d = common::start_in(home, "127.0.0.1", &env);
    let scoped = "/api/messaging/platforms?profile=worker_alpha";

    // The root's credentials are not the profile's.
    let list = common::get_json(&d, scoped, 200);
    let telegram = platform(&list, "telegram");
    assert_eq!(telegram["configured"], false);
    let token = telegram["env_vars"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["key"] == "TELEGRAM_BOT_TOKEN")
        .unwrap();
    assert_eq!(token["is_set"], false);
    assert_eq!(
        common::get(&d, "/api/messaging/platforms?profile=ghost").status,
        404
    );

    // Its path, its start command, its gateway's failed start.
    fs::write(worker.join(".env"), "TELEGRAM_BOT_TOKEN=worker-token\n").unwrap();
    fs::write(
        worker.join("config.yaml"),
        "platforms:\n  telegram:\n    enabled: true\n",
    )
    .unwrap();
    fs::write(
        worker.join("gateway_state.json"),
        json!({ "gateway_state": "startup_failed", "exit_reason": "all configured messaging platforms failed to connect", "platforms": {} }).to_string(),
    )
    .unwrap();
    let list = common::get_json(&d, scoped, 200);
    assert_eq!(list["env_path"], worker.join(".env").to_str().unwrap());
    assert_eq!(
        list["gateway_start_command"],
        "hermes -p worker_alpha gateway start"
    );
    let telegram = platform(&list, "telegram");
    assert_eq!(telegram["state"], "startup_failed");
    assert_eq!(telegram["error_code"], "startup_failed");
    assert_eq!(
        telegram["error_message"],
        "all configured messaging platforms failed to connect"
    );

    // A scoped write lands in the profile's files only.
    let got = put(
        &d,
        "/api/messaging/platforms/telegram?profile=worker_alpha",
        &json!({ "env": { "TELEGRAM_BOT_TOKEN": "123456789:worker" }, "enabled": true }),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    assert!(
        fs::read_to_string(worker.join(".env"))
            .unwrap()
            .contains("TELEGRAM_BOT_TOKEN=123456789:worker")
    );
    assert_eq!(
        fs::read_to_string(root.join(".env")).unwrap(),
        "TELEGRAM_BOT_TOKEN=root-token\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("config.yaml")).unwrap(),
        "model: big\n"
    );

    // Multiplexing on: every port-binding platform refused on the secondary, with the reason.
    fs::write(
        root.join("config.yaml"),
        "model: big\ngateway:\n  multiplex_profiles: true\n",
    )
    .unwrap();
    fs::write(
        worker.join("config.yaml"),
        "platforms:\n  api_server:\n    enabled: true\n",
    )
    .unwrap();
    for id in ["api_server", "webhook", "msgraph_webhook"] {
        let got = put(
            &d,
            &format!("/api/messaging/platforms/{id}?profile=worker_alpha"),
            &json!({ "enabled": true }),
        );
        assert_eq!(got.status, 409, "{id}: {}", got.body);
        assert!(
            got.json()["detail"]
                .as_str()
                .unwrap()
                .contains("default profile"),
            "{}",
            got.body
        );
    }
    // The default profile may enable one, and the secondary may disable its invalid one.
    let got = put(
        &d,
        "/api/messaging/platforms/webhook",
        &json!({ "enabled": true }),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    let got = put(
        &d,
        "/api/messaging/platforms/api_server?profile=worker_alpha",
        &json!({ "enabled": false }),
    );
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(
        fs::read_to_string(worker.join("config.yaml")).unwrap(),
        "platforms:\n  api_server:\n    enabled: false\n"
    );
}
