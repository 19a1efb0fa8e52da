//! Observability end to end: `/metrics` counters moving as requests happen, the access-log
//! line's fields, `/ready` and `/health/detailed`, and `stream_options.include_usage`, against
//! a real gateway on 127.0.0.1:0.
//!
//! Words: the *echo upstream* is `support`'s fake provider; the *usage upstream* (here) is a
//! smaller one that reports token usage the way providers do: as OpenAI's separate
//! `choices: []` chunk when asked, and on the finish chunk when not asked (as some providers,
//! and the original hermes-agent, do anyway).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use hermes_test_support::logs::Lines;
use hermes_test_support::poll::until_async;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{Running, Step, Upstream, client, settings, sse_data, sse_text, start};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use hermes_gateway::{GatewaySettings, ShutdownRequest};
use hermes_provider::ProviderSettings;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Helpers.

fn chat_body(content: &str, stream: bool) -> Value {
    json!({"model": "any", "stream": stream, "messages": [{"role": "user", "content": content}]})
}

/// The `Authorization` header for the gateway these settings describe.
fn bearer(s: &GatewaySettings) -> String {
    format!(
        "Bearer {}",
        s.api_key.clone().expect("test settings have a key")
    )
}

/// One sample per series (`name{labels}` -> value) from a Prometheus text exposition, after
/// checking every line is a comment or a `series value` sample.
fn parse_metrics(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with("# HELP ") || line.starts_with("# TYPE ") {
            continue;
        }
        let (series, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not a sample: {line:?}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line:?}"));
        assert!(
            out.insert(series.to_string(), value).is_none(),
            "series twice: {series}"
        );
    }
    out
}

async fn metrics(gw: &Running) -> BTreeMap<String, f64> {
    let resp = client().get(gw.url("/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), 200, "/metrics needs no key");
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    parse_metrics(&resp.text().await.unwrap())
}

/// `after - before` for one series (absent counts as 0).
fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, series: &str) -> f64 {
    after.get(series).copied().unwrap_or(0.0) - before.get(series).copied().unwrap_or(0.0)
}

async fn get_json(gw: &Running, path: &str, auth: Option<&str>) -> (u16, Value) {
    let mut req = client().get(gw.url(path));
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn chat(gw: &Running, auth: &str, body: &Value, session: Option<&str>) -> (u16, String) {
    let mut req = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", auth)
        .json(body);
    if let Some(s) = session {
        req = req.header("x-hermes-session-id", s);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// Polls `check` every 20 ms for up to 10 s (the access line of a stream is written when the
/// connection is done with the body, just after the client has read it).
async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    until_async(what, Duration::from_secs(10), async || check()).await
}

// The access log, as `hermes_test_support::logs` captures it (`LEVEL target message`, per
// thread): a test that reads it runs on a current-thread runtime, so every line its gateway
// writes comes from its own thread.

/// The access lines among what a test's thread logged.
trait AccessLines {
    /// Access lines (level, fields) whose fields include every `key=value` of `want`.
    fn access(&self, want: &[(&str, &str)]) -> Vec<(String, BTreeMap<String, String>)>;
}

impl AccessLines for Lines {
    fn access(&self, want: &[(&str, &str)]) -> Vec<(String, BTreeMap<String, String>)> {
        self.all()
            .iter()
            .filter_map(|l| {
                let (level, rest) = l.split_once(' ')?;
                let line = rest.strip_prefix("hermes_gateway::access ")?;
                Some((level.to_string(), fields(line)))
            })
            .filter(|(_, f)| {
                want.iter()
                    .all(|(k, v)| f.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }
}

/// `access k=v k=v ...` as a map (values here are plain tokens).
fn fields(line: &str) -> BTreeMap<String, String> {
    let mut words = line.split(' ');
    assert_eq!(words.next(), Some("access"), "{line}");
    words
        .map(|w| {
            let (k, v) = w
                .split_once('=')
                .unwrap_or_else(|| panic!("not key=value: {w:?} in {line}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn millis(f: &BTreeMap<String, String>, key: &str) -> f64 {
    f.get(key)
        .unwrap_or_else(|| panic!("no {key} in {f:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a number in {f:?}"))
}

// ---------------------------------------------------------------------------------------
// The usage upstream.

#[derive(Default)]
struct UsageState {
    bodies: Mutex<Vec<Value>>,
}

/// `prompt_tokens` = number of messages, `completion_tokens` = 2, so tests can predict them.
fn usage_for(body: &Value) -> Value {
    let prompt = body["messages"].as_array().map_or(0, Vec::len) as u64;
    json!({"prompt_tokens": prompt, "completion_tokens": 2, "total_tokens": prompt + 2})
}

async fn usage_chat(State(state): State<Arc<UsageState>>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    state.bodies.lock().unwrap().push(body.clone());
    let usage = usage_for(&body);
    if body["stream"] != json!(true) {
        return axum::Json(json!({
            "id": "u-1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "two words"}, "finish_reason": "stop"}],
            "usage": usage,
        }))
        .into_response();
    }
    let asked = body.pointer("/stream_options/include_usage") == Some(&json!(true));
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "u-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut events = vec![
        chunk(json!({"role": "assistant", "content": "two"}), Value::Null),
        chunk(json!({"content": " words"}), Value::Null),
    ];
    let mut finish = chunk(json!({}), json!("stop"));
    if asked {
        events.push(finish);
        events.push(json!({"id": "u-1", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [], "usage": usage}));
    } else {
        finish["usage"] = usage;
        events.push(finish);
    }
    let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    let stream = futures_util::stream::iter([Ok::<_, Infallible>(Bytes::from(text))]);
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn usage_upstream() -> (SocketAddr, Arc<UsageState>) {
    let state = Arc::new(UsageState::default());
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(usage_chat))
        .with_state(Arc::clone(&state));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, state)
}

/// The stream's chunks as JSON (without `[DONE]`).
fn chunks(sse: &str) -> Vec<Value> {
    sse_data(sse)
        .iter()
        .filter(|d| d.trim() != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

// ---------------------------------------------------------------------------------------
// The tests.

#[tokio::test]
async fn metrics_move_as_requests_happen() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let s = settings(home.path(), "obs", Some(&up));
    let auth = bearer(&s);
    let gw = start(s).await;

    let before = metrics(&gw).await;
    assert_eq!(before["hermes_gateway_ready"], 1.0);
    assert!(
        before
            .keys()
            .any(|k| k.starts_with("hermes_gateway_build_info{version=")),
        "{before:?}"
    );

    let (status, body) = chat(&gw, &auth, &chat_body("plain one", false), None).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = chat(&gw, &auth, &chat_body("streamed one", true), None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(sse_text(&sse_data(&body)), "echo: streamed one");
    let (status, _) = chat(&gw, "Bearer wrong", &chat_body("no", false), None).await;
    assert_eq!(status, 401);
    let resp = client().get(gw.url("/no/such/path")).send().await.unwrap();
    assert_eq!(resp.status(), 404);

    let chat_route = "route=\"/v1/chat/completions\"";
    let chat_2xx = format!("hermes_gateway_requests_total{{{chat_route},code=\"2xx\"}}");
    let after = eventually_metrics(&gw, &before, &chat_2xx, 2.0).await;
    let d = |series: &str| delta(&before, &after, series);
    assert_eq!(
        d(&format!(
            "hermes_gateway_requests_total{{{chat_route},code=\"4xx\"}}"
        )),
        1.0
    );
    assert_eq!(
        d("hermes_gateway_requests_total{route=\"other\",code=\"4xx\"}"),
        1.0
    );
    // Earlier scrapes were answered (and counted) before this one rendered.
    assert!(d("hermes_gateway_requests_total{route=\"/metrics\",code=\"2xx\"}") >= 1.0);
    assert_eq!(
        d("hermes_gateway_upstream_requests_total{status=\"200\"}"),
        2.0
    );
    assert_eq!(d("hermes_gateway_upstream_first_byte_seconds_count"), 2.0);
    assert_eq!(d("hermes_gateway_upstream_duration_seconds_count"), 2.0);
    assert_eq!(d("hermes_gateway_added_latency_seconds_count"), 2.0);
    assert_eq!(
        d("hermes_gateway_added_latency_seconds_bucket{le=\"+Inf\"}"),
        2.0
    );
    assert_eq!(d("hermes_gateway_streams_total{outcome=\"complete\"}"), 1.0);
    // This scrape is in flight, on an open connection.
    assert_eq!(after["hermes_gateway_requests_in_flight"], 1.0);
    assert!(after["hermes_gateway_open_connections"] >= 1.0, "{after:?}");

    // An upstream failure (retried, then given up) shows by status and kind.
    up.script(&[
        Step::Status(503),
        Step::Status(503),
        Step::Status(503),
        Step::Status(503),
    ]);
    let (status, _) = chat(&gw, &auth, &chat_body("fails", false), None).await;
    assert_eq!(status, 502);
    let failed = metrics(&gw).await;
    assert_eq!(
        delta(
            &after,
            &failed,
            "hermes_gateway_upstream_requests_total{status=\"503\"}"
        ),
        1.0
    );
    assert_eq!(
        delta(
            &after,
            &failed,
            "hermes_gateway_upstream_errors_total{kind=\"status\"}"
        ),
        1.0
    );
    assert_eq!(
        delta(
            &after,
            &failed,
            &format!("hermes_gateway_requests_total{{{chat_route},code=\"5xx\"}}")
        ),
        1.0
    );
    assert_eq!(failed["hermes_gateway_ready"], 0.0);

    // Nothing secret in the exposition.
    let text = client()
        .get(gw.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for secret in ["upstream-key", "gw-key", "plain one", "streamed one"] {
        assert!(!text.contains(secret), "{secret} in /metrics");
    }
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn ready_flips_on_an_upstream_failure_and_back_on_a_success() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let s = settings(home.path(), "obs", Some(&up));
    let auth = bearer(&s);
    let gw = start(s).await;

    // Before any call: ready, since a model is configured. No key needed.
    let (status, body) = get_json(&gw, "/ready", None).await;
    assert_eq!((status, &body["status"]), (200, &json!("ready")), "{body}");

    up.script(&[Step::Status(401)]);
    let (status, _) = chat(&gw, &auth, &chat_body("bad key", false), None).await;
    assert_eq!(status, 502);
    let (status, body) = get_json(&gw, "/ready", None).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["reason"], "last_upstream_call_failed", "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("HTTP 401"),
        "{body}"
    );

    // A refusal of the client's own request says nothing about the upstream.
    up.script(&[Step::Status(400)]);
    let (status, _) = chat(&gw, &auth, &chat_body("bad request", false), None).await;
    assert_eq!(status, 400);
    let (status, _) = get_json(&gw, "/ready", None).await;
    assert_eq!(
        status, 200,
        "a 400 from the provider is the request's fault"
    );

    up.script(&[
        Step::Status(503),
        Step::Status(503),
        Step::Status(503),
        Step::Status(503),
    ]);
    let (status, _) = chat(&gw, &auth, &chat_body("down", true), None).await;
    assert_eq!(status, 502);
    let (status, _) = get_json(&gw, "/ready", None).await;
    assert_eq!(status, 503);

    let (status, _) = chat(&gw, &auth, &chat_body("back", true), None).await;
    assert_eq!(status, 200);
    let (status, body) = get_json(&gw, "/ready", None).await;
    assert_eq!(status, 200, "{body}");
    gw.stop(ShutdownRequest::Stop).await.unwrap();

    // No model: not ready, and it says why.
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "obs", None)).await;
    let (status, body) = get_json(&gw, "/ready", None).await;
    assert_eq!(status, 503);
    assert_eq!(body["reason"], "model_not_configured", "{body}");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn detailed_health_needs_the_key_and_shows_no_secret() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "obs", Some(&up));
    // A password in the address itself must not show either.
    let mut provider = up.provider();
    provider.base_url = format!("http://user:addr-secret@{}/v1", up.addr);
    s.provider = Some(provider);
    let auth = bearer(&s);
    let gw = start(s).await;

    let (status, _) = get_json(&gw, "/health/detailed", None).await;
    assert_eq!(status, 401);
    let (status, body) = get_json(&gw, "/health/detailed", Some(&auth)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ok", "{body}");
    assert_eq!(body["ready"], true, "{body}");
    assert_eq!(body["model"], "test-model", "{body}");
    assert_eq!(
        body["provider"]["base_url"],
        format!("http://{}/v1", up.addr),
        "{body}"
    );
    assert_eq!(body["last_upstream_call"], Value::Null, "{body}");
    assert_eq!(body["session_store"]["reachable"], true, "{body}");
    assert_eq!(body["requests_in_flight"], 1, "{body}");
    assert!(body["open_connections"].as_i64().unwrap() >= 1, "{body}");
    assert!(body["uptime_seconds"].as_f64().unwrap() >= 0.0, "{body}");
    assert_eq!(body["pid"], std::process::id(), "{body}");

    let (status, _) = chat(&gw, &auth, &chat_body("hi", false), None).await;
    assert_eq!(status, 200);
    let (_, body) = get_json(&gw, "/health/detailed", Some(&auth)).await;
    let last = &body["last_upstream_call"];
    assert_eq!(last["ok"], true, "{body}");
    assert_eq!(last["status"], 200, "{body}");
    assert!(last["latency_ms"].as_f64().unwrap() > 0.0, "{body}");
    assert!(last["seconds_ago"].as_f64().unwrap() < 60.0, "{body}");
    let text = body.to_string();
    for secret in ["upstream-key", "gw-key", "addr-secret"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    // `/health` stays the cheap liveness answer.
    let (status, body) = get_json(&gw, "/health", None).await;
    assert_eq!((status, &body["status"]), (200, &json!("ok")));
    assert!(body.get("last_upstream_call").is_none(), "{body}");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn one_access_line_per_request_with_its_fields() {
    let lines = Lines::of_this_thread();
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let s = settings(home.path(), "obs", Some(&up));
    let auth = bearer(&s);
    let gw = start(s).await;

    let (status, _) = chat(
        &gw,
        &auth,
        &chat_body("secret words one", true),
        Some("obs-s1"),
    )
    .await;
    assert_eq!(status, 200);
    let (level, f) = eventually("the stream's access line", || {
        lines.access(&[("session", "obs-s1")]).pop()
    })
    .await;
    assert_eq!(level, "INFO");
    for (k, v) in [
        ("method", "POST"),
        ("path", "/v1/chat/completions"),
        ("status", "200"),
        ("stream", "true"),
        ("outcome", "complete"),
        ("upstream_status", "200"),
    ] {
        assert_eq!(f.get(k).map(String::as_str), Some(v), "{k} in {f:?}");
    }
    let total = millis(&f, "ms");
    let upstream = millis(&f, "upstream_ms");
    let first = millis(&f, "upstream_first_ms");
    let added = millis(&f, "added_ms");
    assert!(first <= upstream && upstream <= total, "{f:?}");
    assert!(added >= 0.0 && added <= total, "{f:?}");
    assert!(f["bytes"].parse::<u64>().unwrap() > 0, "{f:?}");

    let (status, _) = chat(&gw, &auth, &chat_body("secret words two", false), None).await;
    assert_eq!(status, 200);
    let (_, f) = eventually("the plain answer's access line", || {
        lines
            .access(&[("stream", "false"), ("status", "200")])
            .pop()
    })
    .await;
    assert!(
        !f.contains_key("session") && !f.contains_key("outcome"),
        "{f:?}"
    );
    assert_eq!(f["upstream_status"], "200");

    let (status, _) = chat(
        &gw,
        "Bearer nope",
        &chat_body("secret words three", false),
        None,
    )
    .await;
    assert_eq!(status, 401);
    let (_, f) = eventually("the refusal's access line", || {
        lines.access(&[("status", "401")]).pop()
    })
    .await;
    assert!(
        !f.contains_key("upstream_status"),
        "no upstream call: {f:?}"
    );

    // Probes are logged at debug, so they do not drown the log.
    let (status, _) = get_json(&gw, "/ready", None).await;
    assert_eq!(status, 200);
    let (level, _) = eventually("the probe's access line", || {
        lines.access(&[("path", "/ready")]).pop()
    })
    .await;
    assert_eq!(level, "DEBUG");

    // A client that leaves mid-stream: logged when it leaves, as such.
    *up.state.chunk_delay.lock().unwrap() = Duration::from_millis(20);
    up.state
        .padding_pieces
        .store(500, std::sync::atomic::Ordering::SeqCst);
    let mut resp = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", &auth)
        .header("x-hermes-session-id", "obs-gone")
        .json(&chat_body("leaving", true))
        .send()
        .await
        .unwrap();
    assert!(resp.chunk().await.unwrap().is_some());
    drop(resp);
    let (_, f) = eventually("the abandoned stream's access line", || {
        lines.access(&[("session", "obs-gone")]).pop()
    })
    .await;
    assert_eq!(f["outcome"], "client_gone", "{f:?}");

    let all = lines.all();
    let access: Vec<&String> = all
        .iter()
        .filter(|l| l.contains("hermes_gateway::access"))
        .collect();
    // One line per request: the three chats, the probe, the abandoned stream.
    assert_eq!(access.len(), 5, "{access:#?}");
    for l in &all {
        for secret in ["gw-key", "upstream-key", "nope", "secret words"] {
            assert!(!l.contains(secret), "{secret} logged: {l}");
        }
    }
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

/// Settings for a gateway in front of the usage upstream.
fn usage_settings(home: &std::path::Path, addr: SocketAddr) -> GatewaySettings {
    let mut s = settings(home, "obs", None);
    let mut p = ProviderSettings::new(format!("http://{addr}/v1"), "usage-model");
    p.max_retries = 0;
    s.provider = Some(p);
    s
}

#[tokio::test]
async fn include_usage_is_honoured_on_streams() {
    let (addr, up) = usage_upstream().await;
    let home = tempfile::tempdir().unwrap();
    let s = usage_settings(home.path(), addr);
    let auth = bearer(&s);
    let gw = start(s).await;
    let before = metrics(&gw).await;

    // Asked: exactly one chunk carries usage, the finish chunk, with the provider's counts;
    // no chunk without a choice.
    let mut asked = chat_body("count me", true);
    asked["stream_options"] = json!({"include_usage": true});
    let (status, sse) = chat(&gw, &auth, &asked, None).await;
    assert_eq!(status, 200, "{sse}");
    let got = chunks(&sse);
    let with_usage: Vec<&Value> = got.iter().filter(|c| !c["usage"].is_null()).collect();
    assert_eq!(with_usage.len(), 1, "{got:#?}");
    let expected = usage_for(&up.bodies.lock().unwrap()[0]);
    assert!(
        expected["prompt_tokens"].as_u64().unwrap() >= 2,
        "{expected}"
    );
    assert_eq!(with_usage[0]["usage"], expected);
    assert_eq!(
        with_usage[0]["choices"][0]["finish_reason"], "stop",
        "{got:#?}"
    );
    assert!(
        got.iter()
            .all(|c| c["choices"].as_array().is_some_and(|a| a.len() == 1)),
        "{got:#?}"
    );
    assert_eq!(sse_text(&sse_data(&sse)), "two words");
    assert!(sse.ends_with("data: [DONE]\n\n"), "{sse}");
    // The client's wish went upstream as it was.
    assert_eq!(
        up.bodies.lock().unwrap()[0]["stream_options"],
        json!({"include_usage": true})
    );

    // Not asked: no usage at all, though this provider sends it anyway.
    let (status, sse) = chat(&gw, &auth, &chat_body("do not count me", true), None).await;
    assert_eq!(status, 200);
    let got = chunks(&sse);
    assert!(got.iter().all(|c| c.get("usage").is_none()), "{got:#?}");
    assert_eq!(got.last().unwrap()["choices"][0]["finish_reason"], "stop");
    assert_eq!(sse_text(&sse_data(&sse)), "two words");
    assert!(
        up.bodies.lock().unwrap()[1].get("stream_options").is_none(),
        "nothing added upstream"
    );

    // Plain answers keep their usage.
    let (status, body) = chat(&gw, &auth, &chat_body("plain", false), None).await;
    assert_eq!(status, 200);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        answer["usage"],
        usage_for(&up.bodies.lock().unwrap()[2]),
        "{answer}"
    );

    // The gateway counted all three answers' tokens, asked or not.
    let prompt: u64 = up
        .bodies
        .lock()
        .unwrap()
        .iter()
        .map(|b| usage_for(b)["prompt_tokens"].as_u64().unwrap())
        .sum();
    let series = "hermes_gateway_tokens_total{kind=\"prompt\"}";
    let after = eventually_metrics(&gw, &before, series, prompt as f64).await;
    assert_eq!(
        delta(
            &before,
            &after,
            "hermes_gateway_tokens_total{kind=\"completion\"}"
        ),
        6.0
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

/// Scrapes until `series` has moved by `want` since `before` (a stream's counts are recorded
/// when the connection is done with its body, just after the client read its end).
async fn eventually_metrics(
    gw: &Running,
    before: &BTreeMap<String, f64>,
    series: &str,
    want: f64,
) -> BTreeMap<String, f64> {
    let what = format!("{series} to move by {want}");
    until_async(&what, Duration::from_secs(10), async || {
        let now = metrics(gw).await;
        (delta(before, &now, series) == want).then_some(now)
    })
    .await
}

#[tokio::test]
async fn connections_are_counted_open_and_rejected() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "obs", Some(&up));
    s.connection_limits =
        hermes_http::ConnectionLimits::new(1, Duration::from_secs(30), Duration::from_secs(30));
    let auth = bearer(&s);
    let gw = start(s).await;
    let before = metrics(&gw).await;

    // One connection, busy with a chat the upstream holds back: the cap is reached.
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    up.script(&[Step::Gate(Arc::clone(&gate))]);
    let busy = tokio::spawn({
        let url = gw.url("/v1/chat/completions");
        let auth = auth.clone();
        async move {
            client()
                .post(url)
                .header("authorization", auth)
                .json(&chat_body("held", false))
                .send()
                .await
                .unwrap()
                .status()
        }
    });
    eventually("the upstream to hold the chat", || {
        (!up.seen().is_empty()).then_some(())
    })
    .await;
    // A second client gets the connection-level 503.
    let rejected = reqwest::Client::new()
        .get(gw.url("/ready"))
        .send()
        .await
        .unwrap();
    assert_eq!(rejected.status(), 503);
    assert!(
        rejected
            .text()
            .await
            .unwrap()
            .contains("too_many_connections")
    );
    gate.add_permits(1);
    assert_eq!(busy.await.unwrap(), 200);

    let after = metrics(&gw).await;
    assert_eq!(
        delta(&before, &after, "hermes_gateway_connections_rejected_total"),
        1.0
    );
    // The held chat's idle connection makes room for each new one (a new client per
    // scrape): soon only the scrape's own connection is open.
    until_async(
        "open connections to settle at 1",
        Duration::from_secs(10),
        async || (metrics(&gw).await["hermes_gateway_open_connections"] == 1.0).then_some(()),
    )
    .await;
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}
