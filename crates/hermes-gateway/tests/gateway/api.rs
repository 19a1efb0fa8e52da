//! The HTTP API end to end: a real gateway on 127.0.0.1:0 in front of a fake
//! OpenAI-compatible upstream (see `support`), driven over real HTTP.
//!
//! Contents: non-streaming and streaming answers, auth, retries (429/500 then success, and
//! exhausted), timeouts, client disconnect mid-stream, 50 concurrent streams, session
//! continuation, SOUL.md first, upstream auth failure mapping, and `chat_once`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use hermes_test_support::poll::until_async;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::support::{Step, Upstream, client, echo_of, settings, sse_data, sse_text, start};
use hermes_gateway::{Error, ShutdownRequest, chat_once};
use hermes_provider::Error as ProviderError;
use serde_json::{Value, json};

const KEY: &str = "Bearer gw-key";

fn chat_body(content: &str, stream: bool) -> Value {
    json!({"model": "anything", "stream": stream, "messages": [{"role": "user", "content": content}]})
}

#[tokio::test]
async fn non_streaming_answer_with_one_system_message_soul_first() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;

    let body = json!({"messages": [
        {"role": "system", "content": "client system"},
        {"role": "user", "content": "hello"},
    ]});
    let resp = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], echo_of("hello"));

    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    let sent = &seen[0].body;
    assert_eq!(
        sent["model"], "test-model",
        "configured model replaces the client's"
    );
    // One system message, as the original's API server sends it: the soul, then the
    // client's system text after a blank line.
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(
        sent["messages"][0]["content"],
        "You are Hermes, the test soul.\n\nclient system"
    );
    assert_eq!(sent["messages"][1]["content"], "hello");
    assert_eq!(sent["messages"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Bearer upstream-key")
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn streaming_answer_passes_chunks_and_ends_with_done() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;

    let resp = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("stream me please", true))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = resp.text().await.unwrap();
    let data = sse_data(&text);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{text}");
    assert!(data.len() >= 4, "several chunks expected: {data:?}");
    assert_eq!(sse_text(&data), echo_of("stream me please"));
    assert_eq!(up.seen()[0].body["stream"], true);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn stream_chunks_are_passed_on_as_they_arrive() {
    let up = Upstream::start().await;
    *up.state.chunk_delay.lock().unwrap() = Duration::from_millis(300);
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;

    let mut r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("a b c d e f", true))
        .send()
        .await
        .unwrap();
    let first = r.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: {"), "{first:?}");
    // The upstream is still producing (7 more chunks, 300 ms apart): nothing was buffered
    // until the end.
    assert_eq!(up.state.completed.load(Ordering::SeqCst), 0);
    let mut rest = String::from_utf8(first.to_vec()).unwrap();
    while let Some(c) = r.chunk().await.unwrap() {
        rest.push_str(std::str::from_utf8(&c).unwrap());
    }
    assert_eq!(sse_text(&sse_data(&rest)), echo_of("a b c d e f"));
    assert_eq!(up.state.completed.load(Ordering::SeqCst), 1);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn missing_or_wrong_key_is_401_and_health_is_open() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;
    let c = client();

    let r = c
        .post(gw.url("/v1/chat/completions"))
        .json(&chat_body("x", false))
        .send()
        .await;
    let r = r.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "missing_api_key");

    let r = c
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", "Bearer gw-kez")
        .json(&chat_body("x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "invalid_api_key");
    assert!(
        up.seen().is_empty(),
        "unauthenticated requests never reach the provider"
    );

    let r = c.get(gw.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status(), 401);

    let health: Value = c
        .get(gw.url("/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["profile"], "work");

    let models: Value = c
        .get(gw.url("/v1/models"))
        .header("authorization", KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "test-model");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn upstream_429_and_500_are_retried_then_succeed() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;

    up.script(&[Step::Status(429), Step::Status(500)]);
    let r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("retry", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(up.seen().len(), 3);

    // The same before a stream starts: retries are invisible to the client.
    up.script(&[Step::Status(503)]);
    let r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("retry stream", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let data = sse_data(&r.text().await.unwrap());
    assert_eq!(sse_text(&data), echo_of("retry stream"));
    assert_eq!(up.seen().len(), 5);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn exhausted_retries_map_to_openai_errors() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", Some(&up));
    if let Some(p) = s.provider.as_mut() {
        p.max_retries = 2;
    }
    let gw = start(s).await;

    up.script(&[Step::Status(500), Step::Status(502), Step::Status(500)]);
    let r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("fail", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "upstream_error");
    assert_eq!(v["error"]["code"], "provider_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("scripted 500"),
        "{v}"
    );
    assert_eq!(up.seen().len(), 3, "one attempt plus two retries");

    up.script(&[Step::Status(429), Step::Status(429), Step::Status(429)]);
    let r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("limited", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["type"], "rate_limit_error");
    assert_eq!(v["error"]["code"], "rate_limit_exceeded");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn upstream_timeout_is_504() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let mut s = settings(home.path(), "work", Some(&up));
    if let Some(p) = s.provider.as_mut() {
        p.request_timeout = Duration::from_millis(500);
    }
    let gw = start(s).await;

    up.script(&[Step::Hang(Duration::from_secs(30))]);
    let started = Instant::now();
    let r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("slow", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 504);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "provider_timeout");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "timeout must cut the wait"
    );

    // Idle timeout inside a stream: the stream ends with an error event and [DONE].
    let up2 = Upstream::start().await;
    *up2.state.chunk_delay.lock().unwrap() = Duration::from_secs(5);
    let home2 = tempfile::tempdir().unwrap();
    let mut s = settings(home2.path(), "other", Some(&up2));
    if let Some(p) = s.provider.as_mut() {
        p.idle_timeout = Duration::from_millis(300);
    }
    let gw2 = start(s).await;
    let r = client()
        .post(gw2.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("idle", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let data = sse_data(&r.text().await.unwrap());
    assert!(data[0].contains("provider_timeout"), "{data:?}");
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    gw.stop(ShutdownRequest::Stop).await.unwrap();
    gw2.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn client_disconnect_mid_stream_stops_upstream_and_server_keeps_working() {
    let up = Upstream::start().await;
    *up.state.chunk_delay.lock().unwrap() = Duration::from_millis(20);
    up.state.padding_pieces.store(500, Ordering::SeqCst);
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;

    let mut r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("long one", true))
        .send()
        .await
        .unwrap();
    let first = r.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"data: "));
    drop(r);

    // The gateway notices, stops reading, and the upstream sees its stream dropped.
    until_async(
        "the upstream stream to be dropped",
        Duration::from_secs(30),
        async || (up.state.aborted.load(Ordering::SeqCst) != 0).then_some(()),
    )
    .await;
    assert_eq!(up.state.completed.load(Ordering::SeqCst), 0);

    up.state.padding_pieces.store(0, Ordering::SeqCst);
    let r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("still there", true))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        sse_text(&sse_data(&r.text().await.unwrap())),
        echo_of("still there")
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_streams() {
    let up = Upstream::start().await;
    *up.state.chunk_delay.lock().unwrap() = Duration::from_millis(10);
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;
    let c = client();
    let url = gw.url("/v1/chat/completions");

    let mut tasks = Vec::new();
    for i in 0..50 {
        let (c, url) = (c.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let r = c
                .post(url)
                .header("authorization", KEY)
                .header("x-hermes-session-id", format!("s{i}"))
                .json(&chat_body(&format!("question {i}"), true))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200);
            let data = sse_data(&r.text().await.unwrap());
            (i, sse_text(&data), data.last().cloned())
        }));
    }
    for t in tasks {
        let (i, text, last) = tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(text, echo_of(&format!("question {i}")));
        assert_eq!(last.as_deref(), Some("[DONE]"));
    }
    assert_eq!(up.state.completed.load(Ordering::SeqCst), 50);
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn session_continuation_sends_history_upstream() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;
    let c = client();

    let r = c
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .header("x-hermes-session-id", "conv-1")
        .json(&chat_body("my name is Ada", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-hermes-session-id"], "conv-1");

    // Streamed second turn: only the new message is sent.
    let r = c
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .header("x-hermes-session-id", "conv-1")
        .json(&chat_body("what is my name?", true))
        .send()
        .await
        .unwrap();
    r.text().await.unwrap();

    // Third turn sees both earlier turns, including the streamed answer.
    c.post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .header("x-hermes-session-id", "conv-1")
        .json(&chat_body("thanks", false))
        .send()
        .await
        .unwrap();

    let seen = up.seen();
    let contents = |i: usize| -> Vec<String> {
        seen[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                format!(
                    "{}:{}",
                    m["role"].as_str().unwrap(),
                    m["content"].as_str().unwrap()
                )
            })
            .collect()
    };
    let soul = "system:You are Hermes, the test soul.".to_string();
    assert_eq!(
        contents(1),
        vec![
            soul.clone(),
            "user:my name is Ada".into(),
            format!("assistant:{}", echo_of("my name is Ada")),
            "user:what is my name?".into(),
        ]
    );
    assert_eq!(contents(2).len(), 6, "{:?}", contents(2));
    assert_eq!(
        contents(2)[4],
        format!("assistant:{}", echo_of("what is my name?"))
    );

    // A request without the header is stateless.
    c.post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("alone", false))
        .send()
        .await
        .unwrap();
    assert_eq!(
        contents_of(&up.seen()[3]),
        vec![soul, "user:alone".to_string()]
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

fn contents_of(seen: &crate::support::Seen) -> Vec<String> {
    seen.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}:{}",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn upstream_401_maps_to_provider_auth_failed() {
    let up = Upstream::start().await;
    *up.state.required_key.lock().unwrap() = Some("other-key".into());
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", Some(&up))).await;
    let r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 502);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "provider_auth_failed");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Incorrect API key"),
        "{v}"
    );
    assert_eq!(up.seen().len(), 1, "401 is not retried");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn no_model_gateway_serves_health_and_503s_chat() {
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "work", None)).await;
    let c = client();
    let h = c.get(gw.url("/health")).send().await.unwrap();
    assert_eq!(h.status(), 200);
    let r = c
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .json(&chat_body("x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("model.default")
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn chat_once_streams_and_shares_sessions_with_the_api() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let s = settings(home.path(), "work", Some(&up));

    let mut pieces = Vec::new();
    let answer = chat_once(&s.clone().into(), "first question", Some("cli-1"), |d| {
        pieces.push(d.to_string())
    })
    .await
    .unwrap();
    assert_eq!(answer.text, echo_of("first question"));
    assert!(pieces.len() > 1, "answer arrives in pieces: {pieces:?}");
    assert_eq!(pieces.concat(), answer.text);
    assert_eq!(
        up.seen()[0].body["messages"][0]["content"],
        "You are Hermes, the test soul."
    );

    // The HTTP API continues the same session.
    let gw = start(s.clone()).await;
    client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", KEY)
        .header("x-hermes-session-id", "cli-1")
        .json(&chat_body("second", false))
        .send()
        .await
        .unwrap();
    let msgs = contents_of(&up.seen()[1]);
    assert_eq!(msgs[1], "user:first question");
    assert_eq!(msgs[3], "user:second");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn chat_once_errors_are_typed() {
    let home = tempfile::tempdir().unwrap();
    let s = settings(home.path(), "work", None);
    let err = chat_once(&s.clone().into(), "q", None, |_| {})
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoModel { .. }), "{err:?}");
    assert!(err.hint().unwrap().contains("model.default"));

    let up = Upstream::start().await;
    *up.state.required_key.lock().unwrap() = Some("right".into());
    let s = settings(home.path(), "work", Some(&up));
    let err = chat_once(&s.clone().into(), "q", None, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::ProviderAuth { status: 401, .. })
        ),
        "{err:?}"
    );

    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut s = settings(home.path(), "work", Some(&up));
    if let Some(p) = s.provider.as_mut() {
        p.base_url = format!("http://{dead}/v1");
        p.max_retries = 1;
    }
    let err = chat_once(&s.clone().into(), "q", None, |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Provider(ProviderError::ProviderUnreachable { .. })
        ),
        "{err:?}"
    );
}
