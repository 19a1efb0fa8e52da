//! Configuration edits reach a running gateway without a restart (`hermes_gateway::live`):
//! the model, the provider address and key, `SOUL.md` and the client key are used by the
//! very next request; a broken edit keeps the previous configuration in use and says why in
//! `/health`; a changed address is not applied (the socket is open) and the running one
//! keeps its protection.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;
use std::path::Path;

use crate::support::{Running, Upstream, client, start};
use hermes_gateway::ShutdownRequest;
use hermes_gateway::source::SettingsSource;
use hermes_home::Home;
use serde_json::{Value, json};

const KEY: &str = "reload-test-key-0123456789";

/// A default-profile home with this `.env`, `config.yaml` and `SOUL.md`.
fn home(dir: &Path, env: &str, config: &str, soul: &str) -> Home {
    hermes_home::layout::ensure_skeleton(dir, true, &hermes_home::seeds::KeySeed::Generate)
        .unwrap();
    fs::write(dir.join(".env"), env).unwrap();
    fs::write(dir.join("config.yaml"), config).unwrap();
    fs::write(dir.join("SOUL.md"), soul).unwrap();
    Home::select(dir.to_path_buf(), None).unwrap()
}

/// Runs the gateway on the profile's files exactly as `hermes gateway run` does: settings read
/// through a [`SettingsSource`], so they are re-read on change.
async fn run_from_files(home: &Home) -> Running {
    let source = SettingsSource::new(home.clone(), Vec::new());
    let profile = source.read().1.unwrap();
    start(profile).await
}

fn model_yaml(upstream: &Upstream, model: &str, key: &str) -> String {
    format!(
        "model:\n  default: {model}\n  provider: custom\n  base_url: {}\n  api_key: {key}\n",
        upstream.base_url()
    )
}

async fn health(gw: &Running) -> Value {
    client()
        .get(gw.url("/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// One chat turn with `key`; returns the status.
async fn chat(gw: &Running, key: &str, text: &str) -> u16 {
    client()
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The request the upstream received last: (model, authorization, the first line of its
/// system message — `SOUL.md` opens the system prompt).
fn last_upstream(upstream: &Upstream) -> (String, String, String) {
    let seen = upstream.seen();
    let last = seen.last().expect("the upstream received a request");
    (
        last.body["model"].as_str().unwrap_or_default().to_string(),
        last.authorization.clone().unwrap_or_default(),
        last.body["messages"][0]["content"]
            .as_str()
            .unwrap_or_default()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string(),
    )
}

#[tokio::test]
async fn edits_apply_to_the_next_request_and_a_broken_edit_keeps_the_last_good_one() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let env = format!("API_SERVER_PORT=0\nAPI_SERVER_KEY={KEY}\n");
    let home = home(dir.path(), &env, "{}\n", "soul one");
    let gw = run_from_files(&home).await;

    // No model yet: /health says so, and a chat is refused.
    assert_eq!(health(&gw).await["model_configured"], false);
    assert_eq!(chat(&gw, KEY, "hi").await, 503);

    // The model is set: the next request uses it, with its key and the soul.
    fs::write(
        dir.path().join("config.yaml"),
        model_yaml(&upstream, "m-one", "k-one"),
    )
    .unwrap();
    assert_eq!(health(&gw).await["model_configured"], true);
    assert_eq!(chat(&gw, KEY, "first").await, 200);
    assert_eq!(
        last_upstream(&upstream),
        ("m-one".into(), "Bearer k-one".into(), "soul one".into())
    );

    // SOUL.md edited: the next request carries the new soul.
    fs::write(dir.path().join("SOUL.md"), "soul two").unwrap();
    assert_eq!(chat(&gw, KEY, "second").await, 200);
    assert_eq!(last_upstream(&upstream).2, "soul two");

    // Memory written meanwhile reaches the next conversation's system prompt.
    fs::write(dir.path().join("memories/MEMORY.md"), "The user likes tea.").unwrap();
    assert_eq!(chat(&gw, KEY, "memory").await, 200);
    let seen = upstream.seen();
    let system = seen.last().unwrap().body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(system.contains("The user likes tea."), "{system}");

    // A broken config.yaml: the previous configuration stays in use, /health says why.
    fs::write(dir.path().join("config.yaml"), "model: [unclosed\n").unwrap();
    let h = health(&gw).await;
    assert_eq!(h["status"], "ok");
    assert_eq!(h["model_configured"], true);
    let why = h["config_error"].as_str().expect("config_error in /health");
    assert!(why.contains("config.yaml"), "{why}");
    assert_eq!(chat(&gw, KEY, "third").await, 200);
    assert_eq!(last_upstream(&upstream).0, "m-one");

    // Fixed, with another model and provider key: applied, and the error is gone.
    fs::write(
        dir.path().join("config.yaml"),
        model_yaml(&upstream, "m-two", "k-two"),
    )
    .unwrap();
    assert_eq!(chat(&gw, KEY, "fourth").await, 200);
    assert_eq!(
        last_upstream(&upstream),
        ("m-two".into(), "Bearer k-two".into(), "soul two".into())
    );
    assert!(health(&gw).await.get("config_error").is_none());

    // The client key changes in .env: the old one is refused at once, the new one works.
    let new_key = "reload-test-key-abcdefghij";
    fs::write(
        dir.path().join(".env"),
        format!("API_SERVER_PORT=0\nAPI_SERVER_KEY={new_key}\n"),
    )
    .unwrap();
    assert_eq!(chat(&gw, KEY, "old key").await, 401);
    assert_eq!(chat(&gw, new_key, "new key").await, 200);

    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn an_address_change_is_not_applied_and_a_public_bind_keeps_its_key() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Bound on every address (port 0), so a client key is required.
    let env = format!("API_SERVER_HOST=0.0.0.0\nAPI_SERVER_PORT=0\nAPI_SERVER_KEY={KEY}\n");
    let config = model_yaml(&upstream, "m-one", "k-one");
    let home = home(dir.path(), &env, &config, "soul");
    let gw = run_from_files(&home).await;
    let gw = Running {
        addr: std::net::SocketAddr::from(([127, 0, 0, 1], gw.addr.port())),
        ..gw
    };
    assert_eq!(chat(&gw, KEY, "hi").await, 200);

    // The file now says loopback without a key, which switches the API server off: that
    // needs a restart, so the edit is refused and the key is still required meanwhile.
    fs::write(dir.path().join(".env"), "API_SERVER_PORT=0\n").unwrap();
    let h = health(&gw).await;
    let why = h["config_error"].as_str().expect("config_error in /health");
    assert!(why.contains("restart"), "{why}");
    assert_eq!(chat(&gw, "", "no key").await, 401);
    assert_eq!(chat(&gw, KEY, "key").await, 200);

    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

/// One chat turn in `session`; returns the system message the upstream received.
async fn chat_in_session(gw: &Running, upstream: &Upstream, session: &str, text: &str) -> String {
    let status = client()
        .post(gw.url("/v1/chat/completions"))
        .bearer_auth(KEY)
        .header("x-hermes-session-id", session)
        .json(&json!({"messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    upstream.seen().last().unwrap().body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// As the original: a session's system prompt is built at its first turn, stored in
/// `state.db` (`sessions.system_prompt`) and replayed verbatim; memory written meanwhile
/// reaches the next session, not the running one.
#[tokio::test]
async fn a_session_replays_its_stored_prompt_and_a_new_session_sees_new_memory() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let env = format!("API_SERVER_PORT=0\nAPI_SERVER_KEY={KEY}\n");
    let config = model_yaml(&upstream, "m-one", "k-one");
    let home = home(dir.path(), &env, &config, "the soul");
    fs::write(dir.path().join("memories/MEMORY.md"), "Fact one.").unwrap();
    let gw = run_from_files(&home).await;

    let first = chat_in_session(&gw, &upstream, "s-1", "q1").await;
    assert!(
        first.starts_with("the soul") && first.contains("Fact one."),
        "{first}"
    );
    let stored = hermes_sessions::SessionStore::open(&dir.path().join("state.db"))
        .unwrap()
        .system_prompt("s-1")
        .unwrap();
    assert_eq!(stored.as_deref(), Some(first.as_str()), "stored as sent");

    fs::write(dir.path().join("memories/MEMORY.md"), "Fact two.").unwrap();
    let again = chat_in_session(&gw, &upstream, "s-1", "q2").await;
    assert_eq!(again, first, "the running session replays its prompt");
    let other = chat_in_session(&gw, &upstream, "s-2", "q1").await;
    assert!(
        other.contains("Fact two.") && !other.contains("Fact one."),
        "{other}"
    );

    gw.stop(ShutdownRequest::Stop).await.unwrap();
}
