//! One gateway serving every profile (`GatewaySettings::multiplex`): the default profile at
//! `/v1/...`, each named profile at `/p/<profile>/v1/...` with its own key, model, soul and
//! sessions; a key opens only its own profile's routes; unknown and invalid names are 404;
//! profiles created and deleted while it runs are found and dropped.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use hermes_test_support::poll::until_async;
use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::support::{Running, Upstream, client, start};
use hermes_gateway::ShutdownRequest;
use hermes_gateway::source::SettingsSource;
use hermes_home::Home;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A profile of the test volume: where it is served, its key, model and soul.
struct Profile {
    name: &'static str,
    prefix: &'static str,
    key: &'static str,
    model: &'static str,
    soul: &'static str,
}

const PROFILES: [Profile; 3] = [
    Profile {
        name: "default",
        prefix: "",
        key: "key-of-default-0123456789",
        model: "model-default",
        soul: "soul of default",
    },
    Profile {
        name: "alpha",
        prefix: "/p/alpha",
        key: "key-of-alpha-0123456789ab",
        model: "model-alpha",
        soul: "soul of alpha",
    },
    Profile {
        name: "beta",
        prefix: "/p/beta",
        key: "key-of-beta-0123456789abc",
        model: "model-beta",
        soul: "soul of beta",
    },
];

fn config(upstream: &Upstream, model: &str) -> String {
    format!(
        "model:\n  default: {model}\n  provider: custom\n  base_url: {}\n  api_key: upstream-key\n",
        upstream.base_url()
    )
}

/// Writes a profile's files in `dir` (the default profile's also carry the port).
fn write_profile(dir: &Path, upstream: &Upstream, key: Option<&str>, model: &str, soul: &str) {
    let is_root = !dir.parent().is_some_and(|p| p.ends_with("profiles"));
    hermes_home::layout::ensure_skeleton(dir, is_root, &hermes_home::seeds::KeySeed::Generate)
        .unwrap();
    let mut env = String::new();
    if is_root {
        env.push_str("API_SERVER_PORT=0\n");
    }
    if let Some(key) = key {
        env.push_str(&format!("API_SERVER_KEY={key}\n"));
    }
    fs::write(dir.join(".env"), env).unwrap();
    fs::write(dir.join("config.yaml"), config(upstream, model)).unwrap();
    fs::write(dir.join("SOUL.md"), soul).unwrap();
}

fn dir_of(root: &Path, name: &str) -> std::path::PathBuf {
    if name == "default" {
        root.to_path_buf()
    } else {
        root.join("profiles").join(name)
    }
}

/// A volume with the three [`PROFILES`].
fn volume(upstream: &Upstream) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for p in &PROFILES {
        let dir = dir_of(root.path(), p.name);
        fs::create_dir_all(&dir).unwrap();
        write_profile(&dir, upstream, Some(p.key), p.model, p.soul);
    }
    root
}

/// The default profile's gateway, read from its files as `hermes gateway run` reads them,
/// multiplexing or not.
async fn run(root: &Path, multiplex: bool) -> Running {
    let home = Home::select(root.to_path_buf(), None).unwrap();
    let source = SettingsSource::new(home, Vec::new());
    let mut profile = source.read().1.unwrap();
    profile.settings.multiplex = multiplex;
    start(profile).await
}

/// `GET path` with `key` (none when `None`): status and JSON body.
async fn get(gw: &Running, path: &str, key: Option<&str>) -> (u16, Value) {
    let mut req = client().get(gw.url(path));
    if let Some(key) = key {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// One chat turn at `prefix` with `key`: the status.
async fn chat(gw: &Running, prefix: &str, key: &str, session: &str, text: &str) -> u16 {
    client()
        .post(gw.url(&format!("{prefix}/v1/chat/completions")))
        .bearer_auth(key)
        .header("X-Hermes-Session-Id", session)
        .json(&json!({"messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// The model and the first line of the system message of the upstream's last request.
fn last_upstream(upstream: &Upstream) -> (String, String) {
    let seen = upstream.seen();
    let last = seen.last().expect("the upstream received a request");
    let first_line = last.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    (
        last.body["model"].as_str().unwrap_or_default().to_string(),
        first_line,
    )
}

/// A raw `GET` with the path exactly as given (an HTTP client would normalise `..`): the
/// status and the body.
async fn raw_get(gw: &Running, path: &str) -> (u16, String) {
    let mut tcp = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Polls `check` until it holds (a rescan is rate-limited), at most 10 s.
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    until_async(what, Duration::from_secs(10), async || {
        check().await.then_some(())
    })
    .await;
}

#[tokio::test]
async fn each_profile_is_served_with_its_own_key_model_soul_and_sessions() {
    let upstream = Upstream::start().await;
    let root = volume(&upstream);
    let gw = run(root.path(), true).await;

    let (status, health) = get(&gw, "/health", None).await;
    assert_eq!(status, 200);
    assert_eq!(health["profile"], "default");
    assert_eq!(health["mode"], "multiplex");
    assert_eq!(
        health.get("profiles"),
        None,
        "no key, no profile names: {health}"
    );
    assert_eq!(health["status"], "ok", "the existing fields stay: {health}");
    assert_eq!(health["model_configured"], true);
    let (_, health) = get(&gw, "/health", Some(PROFILES[1].key)).await;
    assert_eq!(
        health.get("profiles"),
        None,
        "another profile's key: {health}"
    );
    let (_, health) = get(&gw, "/health", Some(PROFILES[0].key)).await;
    assert_eq!(health["profiles"], json!(["default", "alpha", "beta"]));
    let (_, health) = get(&gw, "/p/alpha/health", Some(PROFILES[1].key)).await;
    assert_eq!(
        health.get("profiles"),
        None,
        "a named profile lists none: {health}"
    );

    // Metrics: the listener's stay open to scrapers; a named profile's need its key.
    assert_eq!(raw_get(&gw, "/metrics").await.0, 200);
    assert_eq!(raw_get(&gw, "/p/alpha/metrics").await.0, 401);
    assert_eq!(
        get(&gw, "/p/alpha/metrics", Some(PROFILES[0].key)).await.0,
        401
    );
    let resp = client()
        .get(gw.url("/p/alpha/metrics"))
        .bearer_auth(PROFILES[1].key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.text().await.unwrap().contains("alpha"));

    let (_, wrong) = get(&gw, "/p/alpha/v1/models", Some("not-a-key-of-anyone-123")).await;
    assert_eq!(wrong["error"]["code"], "invalid_api_key", "{wrong}");
    for p in &PROFILES {
        let (status, h) = get(&gw, &format!("{}/health", p.prefix), None).await;
        assert_eq!((status, h["profile"].as_str()), (200, Some(p.name)), "{h}");
        let models = format!("{}/v1/models", p.prefix);
        let (status, body) = get(&gw, &models, Some(p.key)).await;
        assert_eq!(status, 200, "{}: {body}", p.name);
        assert_eq!(body["data"][0]["id"], p.model, "{body}");
        // Every other profile's key is refused here, with the very body of a wrong key.
        for other in PROFILES.iter().filter(|o| o.name != p.name) {
            assert_eq!(
                get(&gw, &models, Some(other.key)).await,
                (401, wrong.clone()),
                "{}'s key at {}",
                other.name,
                p.name
            );
            let chat_status = chat(&gw, p.prefix, other.key, "s-x", "intruder").await;
            assert_eq!(chat_status, 401, "{}'s key chats as {}", other.name, p.name);
        }
        assert_eq!(chat(&gw, p.prefix, p.key, "s-1", p.name).await, 200);
        assert_eq!(
            last_upstream(&upstream),
            (p.model.to_string(), p.soul.to_string()),
            "{}'s turn",
            p.name
        );
    }
    // `/p/default/` is the default profile too, as in the original.
    let (status, body) = get(&gw, "/p/default/v1/models", Some(PROFILES[0].key)).await;
    assert_eq!(
        (status, body["data"][0]["id"].as_str()),
        (200, Some("model-default"))
    );

    // Each profile's session `s-1` is its own, in its own state.db.
    let before = upstream.seen().len();
    assert_eq!(
        chat(&gw, "/p/beta", PROFILES[2].key, "s-1", "again").await,
        200
    );
    let seen = upstream.seen();
    let history: Vec<String> = seen[before].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(history, ["beta", "again"], "beta's history only");
    for p in &PROFILES {
        assert!(
            dir_of(root.path(), p.name).join("state.db").is_file(),
            "{}",
            p.name
        );
    }

    // Hot reload per profile: alpha's key and beta's soul change; the others stay.
    let new_key = "new-key-of-alpha-0123456789";
    fs::write(
        dir_of(root.path(), "alpha").join(".env"),
        format!("API_SERVER_KEY={new_key}\n"),
    )
    .unwrap();
    fs::write(dir_of(root.path(), "beta").join("SOUL.md"), "beta reborn").unwrap();
    assert_eq!(
        get(&gw, "/p/alpha/v1/models", Some(PROFILES[1].key))
            .await
            .0,
        401
    );
    assert_eq!(get(&gw, "/p/alpha/v1/models", Some(new_key)).await.0, 200);
    assert_eq!(
        chat(&gw, "/p/beta", PROFILES[2].key, "s-2", "hi").await,
        200
    );
    assert_eq!(last_upstream(&upstream).1, "beta reborn");
    assert_eq!(get(&gw, "/v1/models", Some(PROFILES[0].key)).await.0, 200);

    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn unknown_and_invalid_profile_names_are_404_and_reach_no_file() {
    let upstream = Upstream::start().await;
    let root = volume(&upstream);
    // Directories that would be served if a name were decoded, folded or joined as given.
    for dir in ["profiles/Alpha", "profiles/test", "profiles/a.b"] {
        fs::create_dir_all(root.path().join(dir)).unwrap();
        fs::write(root.path().join(dir).join("SOUL.md"), "not a profile").unwrap();
    }
    let gw = run(root.path(), true).await;
    let long = "a".repeat(65);
    for path in [
        "/p/nope/v1/models".to_string(),
        "/p/nope/health".into(),
        "/p/../v1/models".into(),
        "/p/..".into(),
        "/p/%2e%2e/v1/models".into(),
        "/p/%2E%2E/health".into(),
        "/p/.%2e/health".into(),
        "/p/Alpha/health".into(),
        "/p/ALPHA/v1/models".into(),
        "/p/test/health".into(),
        "/p/a.b/health".into(),
        "/p/alpha%2f..%2f../health".into(),
        format!("/p/{long}/health"),
        "/p//health".into(),
        "/p/".into(),
    ] {
        let (status, body) = raw_get(&gw, &path).await;
        assert_eq!(status, 404, "{path}: {body}");
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert_eq!(body["error"]["code"], "profile_not_found", "{path}: {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{path}");
    }
    // The real profile is still there, and a valid name is only ever exactly itself.
    let (status, _) = raw_get(&gw, "/p/alpha/health").await;
    assert_eq!(status, 200);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn a_profile_created_while_running_is_served_and_a_deleted_one_is_not() {
    let upstream = Upstream::start().await;
    let root = volume(&upstream);
    let gw = run(root.path(), true).await;
    assert_eq!(get(&gw, "/p/gamma/health", None).await.0, 404);

    let gamma = root.path().join("profiles/gamma");
    fs::create_dir_all(&gamma).unwrap();
    let key = "key-of-gamma-0123456789abcd";
    write_profile(&gamma, &upstream, Some(key), "model-gamma", "soul of gamma");
    eventually("gamma to be served", async || {
        get(&gw, "/p/gamma/health", None).await.0 == 200
    })
    .await;
    assert_eq!(chat(&gw, "/p/gamma", key, "s-1", "hello").await, 200);
    assert_eq!(
        last_upstream(&upstream),
        ("model-gamma".into(), "soul of gamma".into())
    );
    let (_, health) = get(&gw, "/health", Some(PROFILES[0].key)).await;
    assert_eq!(
        health["profiles"],
        json!(["default", "alpha", "beta", "gamma"])
    );

    fs::remove_dir_all(&gamma).unwrap();
    let (status, body) = get(&gw, "/p/gamma/v1/models", Some(key)).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "profile_not_found");
    eventually("gamma to leave /health", async || {
        get(&gw, "/health", Some(PROFILES[0].key)).await.1["profiles"]
            == json!(["default", "alpha", "beta"])
    })
    .await;
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn a_named_profile_without_a_key_or_with_broken_files_refuses_every_request() {
    let upstream = Upstream::start().await;
    let root = volume(&upstream);
    let nokey = root.path().join("profiles/nokey");
    fs::create_dir_all(&nokey).unwrap();
    write_profile(&nokey, &upstream, None, "model-nokey", "soul");
    let broken = root.path().join("profiles/broken");
    fs::create_dir_all(&broken).unwrap();
    write_profile(
        &broken,
        &upstream,
        Some("key-of-broken-0123456789"),
        "m",
        "s",
    );
    fs::write(broken.join("config.yaml"), "model: [unclosed\n").unwrap();
    let gw = run(root.path(), true).await;

    let (_, wrong) = get(&gw, "/v1/models", Some("not-a-key-of-anyone-123")).await;
    for prefix in ["/p/nokey", "/p/broken"] {
        let models = format!("{prefix}/v1/models");
        // Not even the listener's own key: a profile never borrows another's.
        for key in [
            PROFILES[0].key,
            "key-of-broken-0123456789",
            "anything-at-all-123",
        ] {
            assert_eq!(
                get(&gw, &models, Some(key)).await,
                (401, wrong.clone()),
                "{prefix} {key}"
            );
        }
        assert_eq!(get(&gw, &models, None).await.0, 401, "{prefix}");
        assert_eq!(chat(&gw, prefix, PROFILES[0].key, "s", "x").await, 401);
    }
    let (status, health) = get(&gw, "/p/broken/health", None).await;
    assert_eq!(status, 200);
    let why = health["config_error"]
        .as_str()
        .expect("the reason in /health");
    assert!(why.contains("config.yaml"), "{why}");

    // Fixed files are read again: the profile is served with its key from the next request.
    fs::write(broken.join("config.yaml"), config(&upstream, "model-fixed")).unwrap();
    let (status, body) = get(&gw, "/p/broken/v1/models", Some("key-of-broken-0123456789")).await;
    assert_eq!(
        (status, body["data"][0]["id"].as_str()),
        (200, Some("model-fixed"))
    );
    let (_, health) = get(&gw, "/p/broken/health", None).await;
    assert!(health.get("config_error").is_none(), "{health}");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn without_the_switch_the_gateway_serves_its_profile_alone() {
    let upstream = Upstream::start().await;
    let root = volume(&upstream);
    let gw = run(root.path(), false).await;
    let (status, health) = get(&gw, "/health", None).await;
    assert_eq!(status, 200);
    assert_eq!(health["mode"], "single");
    assert_eq!(health["profiles"], json!(["default"]));
    let (status, _) = raw_get(&gw, "/p/alpha/health").await;
    assert_eq!(status, 404, "no /p/ routes without the switch");
    assert_eq!(
        get(&gw, "/p/alpha/v1/models", Some(PROFILES[1].key))
            .await
            .0,
        404
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn a_key_in_the_environment_opens_the_default_profile_only() {
    // The container's environment gives `API_SERVER_KEY` (docs/docker.md): the default profile,
    // whose `.env` has no key, uses it; a named profile without a key of its own must not.
    const ENV_KEY: &str = "key-from-the-environment-0123";
    let upstream = Upstream::start().await;
    let root = volume(&upstream);
    write_profile(root.path(), &upstream, None, PROFILES[0].model, "soul");
    let nokey = root.path().join("profiles/nokey");
    fs::create_dir_all(&nokey).unwrap();
    write_profile(&nokey, &upstream, None, "model-nokey", "soul");
    let home = Home::select(root.path().to_path_buf(), None).unwrap();
    let env = vec![("API_SERVER_KEY".to_owned(), ENV_KEY.to_owned())];
    let mut profile = SettingsSource::new(home, env).read().1.unwrap();
    profile.settings.multiplex = true;
    let gw = start(profile).await;

    assert_eq!(get(&gw, "/v1/models", Some(ENV_KEY)).await.0, 200);
    let (_, wrong) = get(&gw, "/v1/models", Some("not-a-key-of-anyone-123")).await;
    assert_eq!(
        get(&gw, "/p/nokey/v1/models", Some(ENV_KEY)).await,
        (401, wrong),
        "the environment's key does not open a named profile"
    );
    assert_eq!(chat(&gw, "/p/nokey", ENV_KEY, "s", "x").await, 401);
    // A named profile with its own key is opened by it, as before.
    assert_eq!(
        get(&gw, "/p/alpha/v1/models", Some(PROFILES[1].key))
            .await
            .0,
        200
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}
