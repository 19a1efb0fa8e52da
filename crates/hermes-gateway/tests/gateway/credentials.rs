//! Credentials end to end: settings resolved from a real `config.yaml` and `auth.json` (the
//! original's shape), then real requests to fake upstreams on 127.0.0.1. What the upstreams
//! receive (path, key, model) and what is written back into `auth.json` are the evidence.
//!
//! Contents: a pooled key arrives upstream; a 429 is retried once on the same key, then the
//! key cools down (in `auth.json` too) and the next key is used; a 401 and a 402 rotate at
//! once; a pooled key never goes to another host; a corrupt `auth.json` does not stop the
//! gateway; `auto` finds a key stored only in a pool; a Nous Portal login's inference key is
//! used while valid, at its own address only; `fallback_providers` are tried after the
//! primary's retries (streams too, and each request starts with the primary again, except
//! after a rate limit), not after a 400, and an error naming every endpoint tried reaches the
//! client (also through the HTTP gateway); Anthropic's Messages API (plain, streamed, tool
//! call, usage, an error event midway) with `x-api-key` and `anthropic-version`; with the
//! original installed, keys stored by its own CLI and the status we write back as it reads it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use hermes_test_support::jwt::unsigned as jwt;
use hermes_test_support::poll::until_async;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hermes_gateway::GatewaySettings;
use hermes_gateway::source::read_profile;
use hermes_home::Home;
use hermes_home::auth::AuthStore;
use hermes_home::config::Config;
use hermes_provider::{Error, Provider, ProviderSettings};
use serde_json::{Value, json};

/// One request a fake upstream received.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    /// `Authorization: Bearer` value, or `x-api-key`.
    key: Option<String>,
    anthropic_version: Option<String>,
    body: Value,
}

/// How the fake answers: a status per key (default 200), and a status for every request
/// (overrides the keys) when set.
#[derive(Default)]
struct Script {
    by_key: HashMap<String, u16>,
    always: Option<u16>,
}

#[derive(Default)]
struct Fake {
    seen: Mutex<Vec<Seen>>,
    script: Mutex<Script>,
}

struct Upstream {
    addr: SocketAddr,
    fake: Arc<Fake>,
}

impl Upstream {
    async fn start() -> Upstream {
        let fake = Arc::new(Fake::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/anthropic/v1/messages", post(anthropic))
            .with_state(Arc::clone(&fake));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Upstream { addr, fake }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn answer(&self, key: &str, status: u16) {
        self.fake
            .script
            .lock()
            .unwrap()
            .by_key
            .insert(key.into(), status);
    }

    fn always(&self, status: u16) {
        self.fake.script.lock().unwrap().always = Some(status);
    }

    fn seen(&self) -> Vec<Seen> {
        self.fake.seen.lock().unwrap().clone()
    }

    fn keys(&self) -> Vec<Option<String>> {
        self.seen().into_iter().map(|s| s.key).collect()
    }
}

fn record(fake: &Fake, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> (Seen, Option<u16>) {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(String::from)
    };
    let key = header("authorization")
        .map(|a| a.trim_start_matches("Bearer ").to_string())
        .or_else(|| header("x-api-key"));
    let seen = Seen {
        path: uri.path().to_string(),
        key: key.clone(),
        anthropic_version: header("anthropic-version"),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    };
    fake.seen.lock().unwrap().push(seen.clone());
    let script = fake.script.lock().unwrap();
    let status = script
        .always
        .or_else(|| key.and_then(|k| script.by_key.get(&k).copied()))
        .filter(|s| *s != 200);
    (seen, status)
}

fn error_answer(status: u16) -> Response {
    (
        StatusCode::from_u16(status).unwrap(),
        axum::Json(json!({"error": {"message": format!("scripted {status}"), "type": "scripted", "code": format!("code_{status}")}})),
    )
        .into_response()
}

async fn openai(
    State(fake): State<Arc<Fake>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (seen, status) = record(&fake, &uri, &headers, &body);
    if let Some(status) = status {
        return error_answer(status);
    }
    let model = seen.body["model"].as_str().unwrap_or("").to_string();
    let text = format!("from {model}");
    if seen.body["stream"] == json!(true) {
        let chunk = json!({"id": "c", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": {"content": text}}]});
        let sse = format!("data: {chunk}\n\ndata: [DONE]\n\n");
        return ([("content-type", "text/event-stream")], sse).into_response();
    }
    axum::Json(json!({"id": "c", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}))
    .into_response()
}

/// Anthropic's Messages API: a tool call when the request offers tools, else text; usage in
/// both; an event stream when asked.
async fn anthropic(
    State(fake): State<Arc<Fake>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (seen, status) = record(&fake, &uri, &headers, &body);
    if let Some(status) = status {
        return (
            StatusCode::from_u16(status).unwrap(),
            axum::Json(json!({"type": "error", "error": {"type": "overloaded_error", "message": format!("scripted {status}")}})),
        )
            .into_response();
    }
    let model = seen.body["model"].as_str().unwrap_or("").to_string();
    let tools = seen.body.get("tools").is_some();
    if seen.body["stream"] != json!(true) {
        let content = if tools {
            json!([{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}])
        } else {
            json!([{"type": "text", "text": format!("from {model}")}])
        };
        return axum::Json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": content,
            "stop_reason": if tools { "tool_use" } else { "end_turn" },
            "usage": {"input_tokens": 11, "output_tokens": 7},
        }))
        .into_response();
    }
    let fail_midway = seen.body.pointer("/messages/0/content") == Some(&json!("fail midway"));
    if fail_midway {
        let events = [
            json!({"type": "message_start", "message": {"id": "msg_3", "type": "message", "role": "assistant", "model": model, "content": [], "usage": {"input_tokens": 3, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half"}}),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ];
        let sse: String = events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
            .collect();
        return ([("content-type", "text/event-stream")], sse).into_response();
    }
    let events = [
        json!({"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant", "model": model, "content": [], "usage": {"input_tokens": 11, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " there"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ];
    let sse: String = events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect();
    ([("content-type", "text/event-stream")], sse).into_response()
}

/// Settings of a home with `config.yaml` text `yaml`, `auth.json` text `auth` and env `env`,
/// as the gateway reads them, with fast retries.
fn settings(home: &Path, yaml: &str, auth: Option<&str>, env: &[(&str, &str)]) -> ProviderSettings {
    let config = Config::parse(Path::new("config.yaml"), yaml).unwrap();
    if let Some(auth) = auth {
        std::fs::write(home.join("auth.json"), auth).unwrap();
    }
    let store = AuthStore::load(&home.join("auth.json")).unwrap().store;
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let s = GatewaySettings::resolve_with_auth("work", home, None, &config, &env, &store).unwrap();
    fast(s.provider.unwrap())
}

fn fast(mut p: ProviderSettings) -> ProviderSettings {
    p.retry_base_delay = Duration::from_millis(5);
    p.fallbacks = p.fallbacks.into_iter().map(fast).collect();
    p
}

/// An `auth.json` with pool `pool` holding one manual API key per `(id, key)`, stored for
/// `base_url`, as the original's `hermes auth add` writes them.
fn pool_json(pool: &str, base_url: &str, keys: &[(&str, &str)]) -> String {
    let entries: Vec<Value> = keys
        .iter()
        .enumerate()
        .map(|(i, (id, key))| {
            json!({"id": id, "label": format!("api-key-{}", i + 1), "auth_type": "api_key",
                "priority": i, "source": "manual", "access_token": key,
                "last_status": null, "last_status_at": null, "last_error_code": null,
                "last_error_reason": null, "last_error_message": null,
                "last_error_reset_at": null, "base_url": base_url, "request_count": 0})
        })
        .collect();
    json!({"version": 1, "providers": {}, "credential_pool": {pool: entries}, "kept": "as is"})
        .to_string()
}

fn stored_entry(home: &Path, pool: &str, id: &str) -> Value {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("auth.json")).unwrap()).unwrap();
    doc["credential_pool"][pool]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id)
        .cloned()
        .unwrap()
}

/// Waits for the background write of a key's status.
async fn wait_for_status(home: &Path, pool: &str, id: &str, status: &str) -> Value {
    let what = format!("{id} to become {status}");
    until_async(&what, Duration::from_secs(10), async || {
        let e = stored_entry(home, pool, id);
        (e["last_status"] == status).then_some(e)
    })
    .await
}

fn ask() -> Value {
    json!({"messages": [{"role": "user", "content": "hi"}]})
}

fn together(up: &Upstream) -> String {
    format!(
        "model: {{default: m, provider: together, base_url: '{}'}}\n",
        up.base_url()
    )
}

fn k(s: &str) -> Option<String> {
    Some(s.to_string())
}

#[tokio::test]
async fn a_pooled_key_from_auth_json_arrives_upstream() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let auth = pool_json(
        "together",
        &up.base_url(),
        &[("a1", "sk-pool-first"), ("b2", "sk-pool-second")],
    );
    let p = settings(
        home.path(),
        &together(&up),
        Some(&auth),
        &[("TOGETHER_API_KEY", "sk-env")],
    );
    let sources: Vec<&str> = p.credentials.iter().map(|c| c.source.as_str()).collect();
    assert_eq!(sources, ["manual", "manual", "env:TOGETHER_API_KEY"]);
    let provider = Provider::new(p).unwrap();
    for _ in 0..2 {
        provider.complete(ask()).await.unwrap();
    }
    // fill_first: the first key until it fails.
    assert_eq!(up.keys(), [k("sk-pool-first"), k("sk-pool-first")]);
}

#[tokio::test]
async fn a_429_is_retried_once_then_the_key_cools_down_and_the_next_one_is_used() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let auth = pool_json(
        "together",
        &up.base_url(),
        &[("a1", "sk-limited"), ("b2", "sk-fresh")],
    );
    up.answer("sk-limited", 429);
    let provider = Provider::new(settings(home.path(), &together(&up), Some(&auth), &[])).unwrap();
    let answer = provider.complete(ask()).await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "from m");
    assert_eq!(up.keys(), [k("sk-limited"), k("sk-limited"), k("sk-fresh")]);
    let e = wait_for_status(home.path(), "together", "a1", "exhausted").await;
    assert_eq!(e["last_error_code"], 429);
    assert_eq!(e["last_error_reason"], "code_429");
    assert_eq!(e["last_error_message"], "scripted 429");
    assert_eq!(
        e["access_token"], "sk-limited",
        "the rest of the entry is kept"
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("auth.json")).unwrap())
            .unwrap();
    assert_eq!(doc["kept"], "as is");
    // The cooling key is skipped by the next request, and by a gateway reading the file anew.
    provider.complete(ask()).await.unwrap();
    assert_eq!(up.keys().last().unwrap(), &k("sk-fresh"));
    let again = settings(home.path(), &together(&up), None, &[]);
    Provider::new(again).unwrap().complete(ask()).await.unwrap();
    assert_eq!(up.keys().len(), 5);
    assert_eq!(up.keys().last().unwrap(), &k("sk-fresh"));
}

#[tokio::test]
async fn a_401_or_402_rotates_at_once() {
    for status in [401, 402] {
        let up = Upstream::start().await;
        let home = tempfile::tempdir().unwrap();
        let auth = pool_json(
            "together",
            &up.base_url(),
            &[("a1", "sk-bad"), ("b2", "sk-good")],
        );
        up.answer("sk-bad", status);
        let provider =
            Provider::new(settings(home.path(), &together(&up), Some(&auth), &[])).unwrap();
        provider.complete(ask()).await.unwrap();
        assert_eq!(up.keys(), [k("sk-bad"), k("sk-good")], "{status}");
        let e = wait_for_status(home.path(), "together", "a1", "exhausted").await;
        assert_eq!(e["last_error_code"], status);
    }
}

#[tokio::test]
async fn when_every_key_is_rejected_the_client_gets_the_auth_error() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let auth = pool_json(
        "together",
        &up.base_url(),
        &[("a1", "sk-x"), ("b2", "sk-y")],
    );
    up.always(401);
    let provider = Provider::new(settings(home.path(), &together(&up), Some(&auth), &[])).unwrap();
    let err = provider.complete(ask()).await.unwrap_err();
    assert!(
        matches!(err, Error::ProviderAuth { status: 401, .. }),
        "{err:?}"
    );
    assert_eq!(
        up.keys(),
        [k("sk-x"), k("sk-y")],
        "each key once, no retry loop"
    );
}

#[tokio::test]
async fn a_pooled_key_never_goes_to_another_host() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    // OpenRouter's stored key, with `base_url` pointing here: withheld (its domain only).
    let auth = pool_json(
        "openrouter",
        "https://openrouter.ai/api/v1",
        &[("a1", "sk-or-stored")],
    );
    let yaml = format!(
        "model: {{default: m, provider: openrouter, base_url: '{}'}}\n",
        up.base_url()
    );
    let p = settings(home.path(), &yaml, Some(&auth), &[]);
    assert!(p.credentials.is_empty());
    assert!(
        p.unusable
            .iter()
            .any(|u| u.contains("api-key-1") && u.contains("openrouter.ai")),
        "{:?}",
        p.unusable
    );
    Provider::new(p).unwrap().complete(ask()).await.unwrap();
    // Another provider's key stored for its own address: not sent here either.
    let auth = pool_json(
        "together",
        "https://api.together.xyz/v1",
        &[("a1", "sk-tg-stored")],
    );
    let p = settings(home.path(), &together(&up), Some(&auth), &[]);
    assert!(p.credentials.is_empty(), "{:?}", p.credentials);
    Provider::new(p).unwrap().complete(ask()).await.unwrap();
    assert_eq!(up.keys(), [None, None]);
}

#[tokio::test]
async fn a_corrupt_auth_json_does_not_stop_the_gateway() {
    let up = Upstream::start().await;
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("config.yaml"), together(&up)).unwrap();
    std::fs::write(root.path().join("auth.json"), "{not json").unwrap();
    let home = Home::select(root.path().to_path_buf(), None).unwrap();
    let env = [("TOGETHER_API_KEY".to_string(), "sk-env".to_string())];
    let s = read_profile(&home, env).unwrap().settings;
    let p = s.provider.unwrap();
    assert_eq!(p.api_key.as_deref(), Some("sk-env"));
    let copies = std::fs::read_dir(root.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("auth.json.corrupt.")
        })
        .count();
    assert_eq!(
        copies, 1,
        "the damaged file is copied aside, as the CLI does"
    );
    Provider::new(p).unwrap().complete(ask()).await.unwrap();
    assert_eq!(up.keys(), [k("sk-env")]);
}

fn with_fallbacks(primary: &Upstream, fallbacks: &[&Upstream]) -> String {
    let mut yaml = format!(
        "model: {{default: main, provider: custom, base_url: '{}', api_key: sk-primary}}\nagent: {{api_max_retries: 2}}\nfallback_providers:\n",
        primary.base_url()
    );
    for (i, f) in fallbacks.iter().enumerate() {
        yaml.push_str(&format!(
            "  - {{provider: custom, model: backup-{i}, base_url: '{}', key_env: BACKUP_KEY}}\n",
            f.base_url()
        ));
    }
    yaml
}

#[tokio::test]
async fn fallbacks_are_tried_after_the_primarys_retries_and_each_request_starts_with_the_primary() {
    let primary = Upstream::start().await;
    let backup = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    primary.always(503);
    let p = settings(
        home.path(),
        &with_fallbacks(&primary, &[&backup]),
        None,
        &[("BACKUP_KEY", "sk-backup")],
    );
    let provider = Provider::new(p).unwrap();
    let answer = provider.complete(ask()).await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "from backup-0");
    assert_eq!(primary.seen().len(), 3, "the first attempt and 2 retries");
    assert_eq!(backup.keys(), [k("sk-backup")]);
    assert_eq!(backup.seen()[0].body["model"], "backup-0");
    // A stream falls back the same way, before anything reached the client.
    let mut stream = provider.stream(ask()).await.unwrap();
    let first = stream.next_event().await.unwrap().unwrap();
    assert_eq!(first.delta.as_deref(), Some("from backup-0"));
    assert!(stream.next_event().await.is_none());
    assert_eq!(
        primary.seen().len(),
        6,
        "the next request tried the primary again"
    );
    // The primary recovered: it answers.
    primary.fake.script.lock().unwrap().always = None;
    let answer = provider.complete(ask()).await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "from main");
    assert_eq!(backup.seen().len(), 2);
}

#[tokio::test]
async fn when_every_provider_fails_the_error_names_what_was_tried() {
    let primary = Upstream::start().await;
    let first = Upstream::start().await;
    let second = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    primary.always(503);
    first.always(429);
    second.always(500);
    let p = settings(
        home.path(),
        &with_fallbacks(&primary, &[&first, &second]),
        None,
        &[],
    );
    let err = Provider::new(p).unwrap().complete(ask()).await.unwrap_err();
    let Error::ProviderFallbacksFailed { tried, source } = &err else {
        panic!("{err:?}");
    };
    for (model, up, status) in [
        ("main", &primary, 503),
        ("backup-0", &first, 429),
        ("backup-1", &second, 500),
    ] {
        assert!(
            tried.contains(&format!("{model} at {}", up.base_url())),
            "{tried}"
        );
        assert!(tried.contains(&format!("HTTP {status}")), "{tried}");
    }
    assert!(matches!(
        **source,
        Error::ProviderStatus { status: 500, .. }
    ));
    // The client's error: the last endpoint's status, and the whole story.
    let api = hermes_gateway::ApiError::from_provider(&err);
    assert_eq!(api.status, StatusCode::BAD_GATEWAY);
    assert_eq!(api.code, "provider_error");
    assert!(
        api.message.contains("backup-1") && api.message.contains("main"),
        "{}",
        api.message
    );
}

#[tokio::test]
async fn a_request_the_provider_refuses_is_not_sent_to_the_fallbacks() {
    let primary = Upstream::start().await;
    let backup = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    primary.always(400);
    let p = settings(
        home.path(),
        &with_fallbacks(&primary, &[&backup]),
        None,
        &[],
    );
    let err = Provider::new(p).unwrap().complete(ask()).await.unwrap_err();
    assert!(
        matches!(err, Error::ProviderStatus { status: 400, .. }),
        "{err:?}"
    );
    assert!(backup.seen().is_empty());
}

fn anthropic_yaml(up: &Upstream) -> String {
    format!(
        "model: {{default: claude-sonnet-4.5, provider: anthropic, base_url: 'http://{}/anthropic', api_key: sk-ant-api-test}}\n",
        up.addr
    )
}

#[tokio::test]
async fn anthropic_is_spoken_natively() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let p = settings(
        home.path(),
        &anthropic_yaml(&up),
        None,
        &[("ANTHROPIC_API_KEY", "sk-ant-env")],
    );
    assert_eq!(p.api, hermes_provider::ApiKind::AnthropicMessages);
    let provider = Provider::new(p).unwrap();

    // A tool call, with usage.
    let body = json!({
        "messages": [{"role": "user", "content": "weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
    });
    let answer = provider.complete(body).await.unwrap();
    let call = &answer["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(call["function"]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "Paris"})
    );
    assert_eq!(answer["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(answer["usage"]["prompt_tokens"], 11);
    assert_eq!(answer["usage"]["completion_tokens"], 7);
    let seen = &up.seen()[0];
    assert_eq!(seen.path, "/anthropic/v1/messages");
    assert_eq!(
        seen.key,
        k("sk-ant-api-test"),
        "model.api_key, not the env key"
    );
    assert_eq!(seen.anthropic_version.as_deref(), Some("2023-06-01"));
    assert_eq!(seen.body["model"], "claude-sonnet-4-5");
    assert!(seen.body["max_tokens"].as_u64().unwrap() > 0);

    // Streamed, with the usage chunk the client asked for.
    let body = json!({"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}});
    let mut stream = provider.stream(body).await.unwrap();
    let mut text = String::new();
    let mut chunks = Vec::new();
    while let Some(ev) = stream.next_event().await {
        let ev = ev.unwrap();
        text.push_str(ev.delta.as_deref().unwrap_or(""));
        chunks.push(serde_json::from_str::<Value>(&ev.data).unwrap());
    }
    assert!(stream.finished());
    assert_eq!(text, "Hello there");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk"),
        "{chunks:?}"
    );
    assert!(
        chunks
            .iter()
            .any(|c| c["choices"][0]["finish_reason"] == "stop"),
        "{chunks:?}"
    );
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], 11);
    assert_eq!(usage["usage"]["completion_tokens"], 5);
    assert_eq!(up.seen()[1].body["stream"], true);
}

#[tokio::test]
async fn anthropic_overloaded_is_retried_and_its_key_stays_on_its_own_domain() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    up.always(529);
    let mut p = settings(home.path(), &anthropic_yaml(&up), None, &[]);
    p.max_retries = 2;
    let err = Provider::new(p).unwrap().complete(ask()).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::ProviderStatus {
                status: 529,
                attempts: 3,
                ..
            }
        ),
        "{err:?}"
    );
    // ANTHROPIC_API_KEY is Anthropic's: never sent to a loopback proxy.
    let yaml = format!(
        "model: {{default: claude-x, provider: anthropic, base_url: 'http://{}/anthropic'}}\n",
        up.addr
    );
    let p = settings(
        home.path(),
        &yaml,
        None,
        &[("ANTHROPIC_API_KEY", "sk-ant-secret")],
    );
    assert_eq!(p.api_key, None);
    assert_eq!(
        p.withheld_key.map(|w| w.var).as_deref(),
        Some("ANTHROPIC_API_KEY")
    );
    // At Anthropic's own address it is the key.
    let p = settings(
        home.path(),
        "model: {default: claude-x, provider: anthropic}\n",
        None,
        &[
            ("ANTHROPIC_API_KEY", "sk-ant-secret"),
            ("ANTHROPIC_TOKEN", "sk-ant-oat-x"),
        ],
    );
    assert_eq!(p.base_url, "https://api.anthropic.com");
    assert_eq!(p.api_key.as_deref(), Some("sk-ant-secret"));
    assert!(
        p.unusable.iter().any(|u| u.contains("ANTHROPIC_TOKEN")),
        "{:?}",
        p.unusable
    );
}

/// Runs the original's own CLI (`hermes <args>`) on the home `hermes_home`, with `HOME` a
/// scratch directory, and returns its stdout.
fn original(
    agent: &hermes_test_support::OriginalAgent,
    hermes_home: &Path,
    args: &[&str],
) -> String {
    let scratch = hermes_home.join(".scratch-home");
    std::fs::create_dir_all(&scratch).unwrap();
    let out = std::process::Command::new(&agent.hermes)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &scratch)
        .env("HERMES_HOME", hermes_home)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "original `hermes {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Keys the original's `hermes auth add` stores are the keys our gateway takes, in its order
/// and by its strategy; the status we write back after a 429 is what the original's own
/// `hermes auth list` then reads (rate-limited, the next key marked). OpenRouter's keys go
/// only to openrouter.ai, so a loopback upstream cannot receive them: the selection is shown
/// through the settings and the pool (the requests themselves are covered above).
#[tokio::test]
async fn keys_stored_by_the_originals_cli_are_used_and_our_status_reads_back_in_it() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let (first, second) = (
        "sk-or-v1-first-aaaaaaaaaaaa1111",
        "sk-or-v1-second-bbbbbbbbbbb2222",
    );
    for (key, label) in [(first, "work"), (second, "spare")] {
        original(
            &agent,
            home.path(),
            &[
                "auth",
                "add",
                "openrouter",
                "--type",
                "api-key",
                "--api-key",
                key,
                "--label",
                label,
            ],
        );
    }
    let yaml = "model: {default: openai/gpt-4o, provider: openrouter}\ncredential_pool_strategies: {openrouter: fill_first}\n";
    let p = settings(home.path(), yaml, None, &[]);
    assert_eq!(p.base_url, "https://openrouter.ai/api/v1");
    let keys: Vec<(&str, &str, &str)> = p
        .credentials
        .iter()
        .map(|c| (c.label.as_str(), c.source.as_str(), c.key.as_str()))
        .collect();
    assert_eq!(
        keys,
        [("work", "manual", first), ("spare", "manual", second)]
    );
    assert_eq!(p.api_key.as_deref(), Some(first));

    // Our masking of what the original stored.
    let store = AuthStore::load(&home.path().join("auth.json"))
        .unwrap()
        .store;
    let views = store.credential_views("openrouter", &|_| None, 0.0);
    let shown: Vec<(&str, bool)> = views.iter().map(|v| (v.key.as_str(), v.current)).collect();
    assert_eq!(shown, [("sk-o...1111", true), ("sk-o...2222", false)]);

    // A 429 on the first key, recorded by our pool, is the original's "rate-limited".
    let pool = hermes_provider::credentials::KeyPool::new(
        p.credentials.clone(),
        p.strategy,
        p.pool_store.clone(),
    );
    let pick = pool.select(std::time::SystemTime::now()).unwrap();
    assert_eq!(pick.key, first);
    let failure = hermes_provider::credentials::Failure {
        status: 429,
        reason: Some("rate_limit_exceeded".into()),
        message: Some("Rate limit reached".into()),
        reset_at: None,
    };
    pool.mark_exhausted(pick.index, &failure, std::time::SystemTime::now());
    wait_for_status(
        home.path(),
        "openrouter",
        stored_entry_id(home.path(), "work").as_str(),
        "exhausted",
    )
    .await;
    let listed = original(&agent, home.path(), &["auth", "list"]);
    let work = listed.lines().find(|l| l.contains("work")).unwrap();
    let spare = listed.lines().find(|l| l.contains("spare")).unwrap();
    assert!(
        work.contains("rate-limited") && work.contains("(429)"),
        "{listed}"
    );
    assert!(!work.contains('←') && spare.contains('←'), "{listed}");
    // And a gateway reading the file anew skips it too.
    let again = settings(home.path(), yaml, None, &[]);
    let pool = hermes_provider::credentials::KeyPool::new(again.credentials, again.strategy, None);
    assert_eq!(
        pool.select(std::time::SystemTime::now()).unwrap().key,
        second
    );
}

/// The `id` the original gave the entry labelled `label` in the `openrouter` pool.
fn stored_entry_id(home: &Path, label: &str) -> String {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join("auth.json")).unwrap()).unwrap();
    doc["credential_pool"]["openrouter"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["label"] == label)
        .and_then(|e| e["id"].as_str())
        .unwrap()
        .to_string()
}

fn epoch_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A Nous Portal login as the original stores it (`providers.nous`), its inference key valid
/// for `ttl` seconds, at `inference_base_url`.
fn nous_login(inference_base_url: &str, ttl: f64) -> (String, String) {
    let key = jwt(&json!({"sub": "u1", "scope": "inference:invoke", "exp": epoch_now() + ttl}));
    let auth = json!({"version": 1, "active_provider": "nous", "providers": {"nous": {
        "access_token": "opaque-portal-token", "refresh_token": "refresh-me",
        "scope": "inference:invoke", "agent_key": key,
        "agent_key_expires_at": "2099-01-01T00:00:00+00:00",
        "inference_base_url": inference_base_url}}});
    (key, auth.to_string())
}

#[tokio::test]
async fn a_valid_nous_portal_inference_key_is_used_at_its_own_address_only() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let yaml = "model: {default: Hermes-4-405B, provider: nous}\n";
    let (key, auth) = nous_login(&up.base_url(), 3600.0);
    let p = settings(home.path(), yaml, Some(&auth), &[]);
    assert_eq!(p.base_url, up.base_url(), "the login's inference address");
    assert!(p.unusable.is_empty(), "{:?}", p.unusable);
    let provider = Provider::new(p).unwrap();
    provider.complete(ask()).await.unwrap();
    assert_eq!(up.keys(), [Some(key)]);

    // Expired (or within 2 minutes of it): not sent, and said why.
    let (_, auth) = nous_login(&up.base_url(), 60.0);
    let p = settings(home.path(), yaml, Some(&auth), &[]);
    assert_eq!(p.api_key, None);
    assert!(
        p.unusable
            .iter()
            .any(|u| u.contains("nous") && u.contains("expired")),
        "{:?}",
        p.unusable
    );
    Provider::new(p).unwrap().complete(ask()).await.unwrap();
    assert_eq!(up.keys().last().unwrap(), &None);

    // A key for the Portal's own address never goes to another `base_url`.
    let (_, auth) = nous_login("https://inference-api.nousresearch.com/v1", 3600.0);
    let yaml = format!(
        "model: {{default: Hermes-4-405B, provider: nous, base_url: '{}'}}\n",
        up.base_url()
    );
    let p = settings(home.path(), &yaml, Some(&auth), &[]);
    assert_eq!(p.api_key, None);
    assert!(
        p.unusable.iter().any(|u| u.contains("nousresearch.com")),
        "{:?}",
        p.unusable
    );
    // Other logins are named as unusable, never sent.
    let auth = json!({"providers": {"openai-codex": {"tokens": {"access_token": "t"}, "access_token": "t"}}})
        .to_string();
    let p = settings(
        home.path(),
        "model: {default: gpt-5, provider: openai-codex, base_url: 'https://chatgpt.com/backend-api/codex'}\n",
        Some(&auth),
        &[],
    );
    assert_eq!(p.api_key, None);
    assert!(
        p.unusable
            .iter()
            .any(|u| u.contains("openai-codex") && u.contains("OAuth")),
        "{:?}",
        p.unusable
    );
}

/// `provider: auto` (the default) with no key variable set: a key added with the original's
/// `hermes auth add openrouter` is found, as the original's `auto` finds it.
#[tokio::test]
async fn auto_finds_a_key_stored_only_in_openrouters_pool() {
    let home = tempfile::tempdir().unwrap();
    let auth = pool_json(
        "openrouter",
        "https://openrouter.ai/api/v1",
        &[("a1", "sk-or-only-in-pool")],
    );
    for yaml in [
        "model: {default: openai/gpt-4o}\n",
        "model: {default: openai/gpt-4o, provider: auto}\n",
    ] {
        let p = settings(home.path(), yaml, Some(&auth), &[]);
        assert_eq!(p.base_url, "https://openrouter.ai/api/v1", "{yaml}");
        assert_eq!(p.api_key.as_deref(), Some("sk-or-only-in-pool"), "{yaml}");
        assert_eq!(
            p.pool_store.map(|s| s.pool_id).as_deref(),
            Some("openrouter")
        );
    }
    // A key variable still decides first (auto's order), and a base_url keeps its address.
    let p = settings(
        home.path(),
        "model: {default: m}\n",
        None,
        &[("OPENAI_API_KEY", "sk-oa")],
    );
    assert_eq!(
        (p.base_url.as_str(), p.api_key.as_deref()),
        ("https://api.openai.com/v1", Some("sk-oa"))
    );
    let p = settings(
        home.path(),
        "model: {default: m, base_url: 'http://127.0.0.1:9/v1'}\n",
        None,
        &[],
    );
    assert_eq!(
        (p.base_url.as_str(), p.api_key.as_deref()),
        ("http://127.0.0.1:9/v1", None)
    );
}

/// Through the HTTP gateway: a client whose request every endpoint failed gets one OpenAI-style
/// error naming each endpoint tried; when a fallback answers, the client gets its answer.
#[tokio::test]
async fn a_client_of_the_gateway_sees_the_fallback_answer_or_what_was_tried() {
    let primary = Upstream::start().await;
    let backup = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    primary.always(503);
    let config = Config::parse(
        Path::new("config.yaml"),
        &with_fallbacks(&primary, &[&backup]),
    )
    .unwrap();
    let env: BTreeMap<String, String> = [
        ("API_SERVER_PORT", "0"),
        ("API_SERVER_KEY", "gw-key-0123456789abcdef"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut s = GatewaySettings::resolve_with_auth(
        "work",
        home.path(),
        None,
        &config,
        &env,
        &AuthStore::default(),
    )
    .unwrap();
    s.provider = s.provider.map(fast);
    let gw = crate::support::start(s).await;
    let ask_gateway = |stream: bool| {
        crate::support::client()
            .post(gw.url("/v1/chat/completions"))
            .header("authorization", "Bearer gw-key-0123456789abcdef")
            .json(&json!({"messages": [{"role": "user", "content": "hi"}], "stream": stream}))
            .send()
    };
    let r = ask_gateway(false).await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "from backup-0");

    backup.always(500);
    for stream in [false, true] {
        let r = ask_gateway(stream).await.unwrap();
        assert_eq!(r.status(), 502, "stream: {stream}");
        let body: Value = r.json().await.unwrap();
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("every provider failed; tried"),
            "{message}"
        );
        assert!(
            message.contains("main at") && message.contains("backup-0 at"),
            "{message}"
        );
        assert_eq!(body["error"]["code"], "provider_error");
    }
}

/// A primary that fell back because it is rate limited is left alone for a minute, as the
/// original stays on its fallback: the next requests start with the fallback.
#[tokio::test]
async fn a_rate_limited_primary_is_skipped_for_a_while() {
    let primary = Upstream::start().await;
    let backup = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    primary.always(429);
    let p = settings(
        home.path(),
        &with_fallbacks(&primary, &[&backup]),
        None,
        &[],
    );
    let provider = Provider::new(p).unwrap();
    provider.complete(ask()).await.unwrap();
    assert_eq!((primary.seen().len(), backup.seen().len()), (3, 1));
    provider.stream(ask()).await.unwrap();
    provider.complete(ask()).await.unwrap();
    assert_eq!((primary.seen().len(), backup.seen().len()), (3, 3));
    // The fallback failing meanwhile: the error says the primary was skipped, and why.
    backup.always(500);
    let err = provider.complete(ask()).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("main at") && text.contains("skipped, rate limited"),
        "{text}"
    );
    assert_eq!(primary.seen().len(), 3);
}

/// An `error` event in the middle of an Anthropic stream ends it with an error after what was
/// already relayed, never as a normal end.
#[tokio::test]
async fn an_anthropic_stream_error_event_ends_the_stream_with_an_error() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let provider = Provider::new(settings(home.path(), &anthropic_yaml(&up), None, &[])).unwrap();
    let mut stream = provider
        .stream(json!({"messages": [{"role": "user", "content": "fail midway"}]}))
        .await
        .unwrap();
    let mut text = String::new();
    let err = loop {
        match stream.next_event().await {
            Some(Ok(ev)) => text.push_str(ev.delta.as_deref().unwrap_or("")),
            Some(Err(e)) => break e,
            None => panic!("the stream ended normally after {text:?}"),
        }
    };
    assert_eq!(text, "Half");
    assert!(
        matches!(&err, Error::ProviderProtocol { reason, .. } if reason.contains("Overloaded")),
        "{err:?}"
    );
    assert!(stream.next_event().await.is_none());
}
