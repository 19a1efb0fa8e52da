//! Gateway overhead benchmark: the same streaming chat load sent straight to a local
//! OpenAI-compatible upstream and through a gateway (a separate process) in front of it.
//!
//! Reports p50/p99 latency of a whole streamed answer, p50 time to first byte, requests per
//! second at a fixed concurrency, and the gateway process's RSS (idle and peak). The upstream
//! is the fake one the tests use (`tests/support`), answering instantly, so the difference
//! between the two runs is the gateway's own cost.
//!
//! ```text
//! cargo run --release -p hermes-gateway --example gateway_bench -- [concurrency] [seconds]
//! ```
//!
//! More modes serve `bench/gateway/compare.sh` and `bench/gateway/latency.sh`, which put our
//! gateway and other gateways in front of the same upstream and drive all with the same
//! client:
//!
//! * `--serve-upstream [<first_ms> <gap_ms>]`: run an upstream alone that answers like the
//!   test one (plus the final `finish_reason` chunk real providers send), print
//!   `LISTENING <base_url>`, and on SIGUSR1 print `SEEN <chat requests> <their body bytes>
//!   <other requests as JSON>` (what the gateways sent it so far); exit on SIGTERM. With
//!   the two numbers it paces a stream like a provider: the first event after `first_ms`,
//!   each later one `gap_ms` after the previous (a plain answer after the whole stream's
//!   time); without them it answers at once.
//! * `--load <url> <key> <requests> <concurrency> <stream|plain>`: send that many chat
//!   requests (a *fixed count*, not a duration, so both peers get exactly the same work) and
//!   print one JSON line: `ok`, `errors`, `first_error`, `p50_ms`, `p99_ms`, `mean_ms`,
//!   `rps`.
//! * `--timed <url> <key> <stream|plain> <concurrency> <warmup_s> <run_s> <grace_s>
//!   <max_requests>`: keep that many requests in flight (each worker sends the next when
//!   its answer ended) for `warmup_s` untimed, then `run_s` timed on the same connections,
//!   starting no more than `max_requests`; a request still open `grace_s` after a phase is
//!   abandoned. Prints one JSON line: answered, failed and abandoned counts, the first
//!   error, answers per second, and the latency distribution (p50, p90, p99, p99.9, min,
//!   max) of whole answers and of their first byte.
//! * `--serve-gateway <home> <base_url>`: the library's gateway alone (key `bench-key`),
//!   printing `LISTENING <addr>`; `GATEWAY_BENCH_RUNTIME=current` runs it on a
//!   current-thread runtime instead of the multi-thread one `hermes gateway run` uses.
//!
//! In `--load` and `--timed` an answer counts as ok only when its text is exactly the
//! upstream's echo of the question, so a gateway that answers from somewhere else (or with
//! an error in a 200) is never timed as a success.

#![allow(clippy::print_stdout, clippy::print_stderr)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark run by hand on the test support code: a set-up that fails ends it \
              with the panic's message, as a test would"
)]

#[path = "../tests/gateway/support.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hermes_gateway::{GatewaySettings, Phase, StateRecorder};
use serde_json::json;

const KEY: &str = "bench-key";

struct PrintAddr;

impl StateRecorder for PrintAddr {
    fn record(&self, _phase: Phase, _reason: Option<&str>) {}
    fn listening(&self, addr: std::net::SocketAddr) {
        println!("LISTENING {addr}");
        let _ = std::io::stdout().flush();
    }
}

/// The runtime a `--serve-gateway` child runs on: a multi-thread one with a worker per core,
/// as `hermes gateway run` builds, unless `GATEWAY_BENCH_RUNTIME=current` asks for a
/// current-thread one (to measure what cross-thread wakeups cost the relay).
fn gateway_runtime() -> tokio::runtime::Runtime {
    let mut builder = match std::env::var("GATEWAY_BENCH_RUNTIME").as_deref() {
        Ok("current") => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    builder.enable_all().build().expect("runtime")
}

/// The gateway child: serve until SIGTERM.
fn serve_gateway(home: &str, base_url: &str) {
    let rt = gateway_runtime();
    rt.block_on(async {
        let mut s = GatewaySettings::new("bench", home);
        s.port = 0;
        s.api_key = Some(KEY.into());
        s.soul = Some("You are the benchmark soul.".into());
        let mut p = hermes_provider::ProviderSettings::new(base_url, "bench-model");
        p.api_key = Some("upstream".into());
        s.provider = Some(p);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("signal");
        let shutdown = async move {
            term.recv().await;
        };
        if let Err(e) = hermes_gateway::run(s, &PrintAddr, shutdown).await {
            eprintln!("gateway failed: {e}");
        }
    });
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

struct Stats {
    requests: usize,
    rps: f64,
    p50: Duration,
    p99: Duration,
    ttfb_p50: Duration,
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

async fn load(url: &str, concurrency: usize, seconds: u64) -> Stats {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency * 2)
        .build()
        .expect("client");
    let body = json!({"model": "x", "stream": true,
                      "messages": [{"role": "user", "content": "a benchmark question with some words"}]});
    // Warm up connections and code paths.
    let warm_until = Instant::now() + Duration::from_secs(1);
    let run = |until: Instant| {
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (c, url, body) = (client.clone(), url.to_string(), body.clone());
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::new();
                while Instant::now() < until {
                    let t = Instant::now();
                    let mut r = c
                        .post(&url)
                        .header("authorization", format!("Bearer {KEY}"))
                        .json(&body)
                        .send()
                        .await
                        .expect("request");
                    assert!(r.status().is_success(), "status {}", r.status());
                    let mut first = None;
                    while let Some(_chunk) = r.chunk().await.expect("chunk") {
                        first.get_or_insert_with(|| t.elapsed());
                    }
                    out.push((t.elapsed(), first.unwrap_or_default()));
                }
                out
            }));
        }
        tasks
    };
    for t in run(warm_until) {
        t.await.expect("warmup");
    }
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut all = Vec::new();
    for t in run(until) {
        all.extend(t.await.expect("worker"));
    }
    let elapsed = started.elapsed();
    let mut total: Vec<Duration> = all.iter().map(|(d, _)| *d).collect();
    let mut ttfb: Vec<Duration> = all.iter().map(|(_, f)| *f).collect();
    total.sort();
    ttfb.sort();
    Stats {
        requests: total.len(),
        rps: total.len() as f64 / elapsed.as_secs_f64(),
        p50: pct(&total, 0.50),
        p99: pct(&total, 0.99),
        ttfb_p50: pct(&ttfb, 0.50),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// What the comparison upstream has been sent: chat requests, their body bytes, and any
/// other method + path (a gateway probing `/models` and the like gets a 404 here).
#[derive(Default)]
struct Seen {
    chats: std::sync::atomic::AtomicUsize,
    bytes: std::sync::atomic::AtomicUsize,
    other: std::sync::Mutex<std::collections::BTreeMap<String, usize>>,
}

/// How the comparison upstream paces an answer, like a provider generating it: the first
/// event after `first`, every later one `gap` after the previous. Both zero (the default)
/// answer at once, as the test upstream does.
#[derive(Clone, Copy, Default)]
struct Pace {
    first: Duration,
    gap: Duration,
}

impl Pace {
    /// Waits before event `index` of a stream.
    async fn before(self, index: usize) {
        let wait = if index == 0 { self.first } else { self.gap };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Waits as long as a whole stream of `events` events would take.
    async fn whole(self, events: usize) {
        let wait = self.first + self.gap * events.saturating_sub(1) as u32;
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// The comparison upstream's state: what it was sent, and how it paces its answers.
struct Stub {
    seen: Seen,
    pace: Pace,
}

/// One chat answer of the comparison upstream. The text and its chunking are those of the
/// test upstream (`echo: <last user text>`, one piece per word); unlike it, the stream ends
/// with a `finish_reason: "stop"` chunk before `[DONE]`, as real providers do, because the
/// Python agent treats a stream without one as a dropped connection and retries it.
async fn compare_chat(
    axum::extract::State(stub): axum::extract::State<std::sync::Arc<Stub>>,
    body: bytes::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    use std::sync::atomic::Ordering;
    let seen = &stub.seen;
    seen.chats.fetch_add(1, Ordering::SeqCst);
    seen.bytes.fetch_add(body.len(), Ordering::SeqCst);
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let last_user = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            serde_json::Value::String(s) => s.clone(),
            // Content parts: join the text parts.
            serde_json::Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        })
        .unwrap_or_default();
    let reply = support::echo_of(&last_user);
    let model = body["model"].clone();
    let usage = json!({"prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18});
    if body["stream"] != json!(true) {
        // A plain answer arrives when the whole stream would have ended (its pieces, the
        // `finish_reason` chunk and `[DONE]`).
        stub.pace
            .whole(reply.split_inclusive(' ').count() + 2)
            .await;
        return axum::Json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply},
                         "finish_reason": "stop"}],
            "usage": usage,
        }))
        .into_response();
    }
    let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
        let data = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                          "model": model, "choices": [{"index": 0, "delta": delta,
                                                       "finish_reason": finish}]});
        format!("data: {data}\n\n")
    };
    let mut events: Vec<String> = reply
        .split_inclusive(' ')
        .map(|piece| chunk(json!({"content": piece}), serde_json::Value::Null))
        .collect();
    events.push(chunk(json!({}), json!("stop")));
    if body["stream_options"]["include_usage"] == json!(true) {
        events.push(format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                   "model": model, "choices": [], "usage": usage})
        ));
    }
    events.push("data: [DONE]\n\n".into());
    let pace = stub.pace;
    let stream = futures_util::StreamExt::then(
        futures_util::stream::iter(events.into_iter().enumerate()),
        move |(i, e)| async move {
            pace.before(i).await;
            Ok::<_, std::convert::Infallible>(bytes::Bytes::from(e))
        },
    );
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(axum::body::Body::from_stream(stream))
        .unwrap_or_default()
}

async fn compare_other(
    axum::extract::State(stub): axum::extract::State<std::sync::Arc<Stub>>,
    method: axum::http::Method,
    uri: axum::http::Uri,
) -> axum::http::StatusCode {
    if let Ok(mut other) = stub.seen.other.lock() {
        *other.entry(format!("{method} {}", uri.path())).or_default() += 1;
    }
    axum::http::StatusCode::NOT_FOUND
}

/// `--serve-upstream`: the comparison upstream alone, until SIGTERM.
fn serve_upstream(pace: Pace) {
    use std::sync::atomic::Ordering;
    use tokio::signal::unix::{SignalKind, signal};
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let stub = std::sync::Arc::new(Stub {
            seen: Seen::default(),
            pace,
        });
        let seen = &stub.seen;
        let app = axum::Router::new()
            .route("/v1/chat/completions", axum::routing::post(compare_chat))
            .fallback(compare_other)
            .with_state(std::sync::Arc::clone(&stub));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        // Like a real provider (and the test upstream): no Nagle delay between chunks.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("upstream failed: {e}");
            }
        });
        let mut term = signal(SignalKind::terminate()).expect("signal");
        let mut usr1 = signal(SignalKind::user_defined1()).expect("signal");
        println!("LISTENING http://{addr}/v1");
        let _ = std::io::stdout().flush();
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = usr1.recv() => {
                    let other = seen.other.lock().map(|o| o.clone()).unwrap_or_default();
                    println!(
                        "SEEN {} {} {}",
                        seen.chats.load(Ordering::SeqCst),
                        seen.bytes.load(Ordering::SeqCst),
                        json!(other)
                    );
                    let _ = std::io::stdout().flush();
                }
            }
        }
    });
}

/// The text of an answer: the message of a plain answer, or the concatenated deltas of
/// every `data:` line of a streamed one.
fn answer_text(body: &str, stream: bool) -> Option<String> {
    if !stream {
        let v: serde_json::Value = serde_json::from_str(body).ok()?;
        return v["choices"][0]["message"]["content"]
            .as_str()
            .map(String::from);
    }
    let mut text = String::new();
    let mut done = false;
    for line in body.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == "[DONE]" {
            done = true;
            continue;
        }
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(data)
            && let Some(piece) = v["choices"][0]["delta"]["content"].as_str()
        {
            text.push_str(piece);
        }
    }
    done.then_some(text)
}

/// The question of request `i`: a different one each time, as separate clients would send.
fn question(i: usize) -> String {
    format!("benchmark question {i} with some words")
}

/// One timed chat answer: from sending the request to its last byte, and to its first
/// body byte (for a stream, its first event).
struct Timing {
    total: Duration,
    first_byte: Duration,
}

/// Sends question `i` and reads the whole answer. It counts only when its text is exactly
/// the upstream's echo of the question, so a peer that answers from somewhere else (or
/// with an error in a 200) is never timed as a success.
async fn one_chat(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    i: usize,
    stream: bool,
) -> Result<Timing, String> {
    let asked = question(i);
    let body = json!({"model": "hermes-agent", "stream": stream,
                      "messages": [{"role": "user", "content": asked}]});
    let t = Instant::now();
    let mut r = client
        .post(url)
        .header("authorization", format!("Bearer {key}"))
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = r.status();
    let mut raw = Vec::new();
    let mut first_byte = None;
    while let Some(chunk) = r.chunk().await.map_err(|e| format!("body: {e}"))? {
        first_byte.get_or_insert_with(|| t.elapsed());
        raw.extend_from_slice(&chunk);
    }
    let total = t.elapsed();
    let text = String::from_utf8_lossy(&raw);
    let cut = || text.chars().take(300).collect::<String>();
    if !status.is_success() {
        return Err(format!("status {status}: {}", cut()));
    }
    match answer_text(&text, stream) {
        Some(a) if a == support::echo_of(&asked) => Ok(Timing {
            total,
            first_byte: first_byte.unwrap_or(total),
        }),
        _ => Err(format!("not the upstream's echo: {}", cut())),
    }
}

/// A duration in milliseconds, to 0.01 ms, for the JSON lines.
fn json_ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 100_000.0).round() / 100.0
}

/// The answers of a load run: timings of the good ones, and the count and first of the bad.
#[derive(Default)]
struct Outcome {
    ok: Vec<Timing>,
    errors: usize,
    first_error: Option<String>,
}

impl Outcome {
    fn add(&mut self, r: Result<Timing, String>) {
        match r {
            Ok(t) => self.ok.push(t),
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert(e);
            }
        }
    }

    fn merge(&mut self, other: Outcome) {
        self.ok.extend(other.ok);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }

    /// Sorted totals and sorted first-byte times of the good answers.
    fn sorted(&self) -> (Vec<Duration>, Vec<Duration>) {
        let mut total: Vec<Duration> = self.ok.iter().map(|t| t.total).collect();
        let mut first: Vec<Duration> = self.ok.iter().map(|t| t.first_byte).collect();
        total.sort();
        first.sort();
        (total, first)
    }
}

fn load_client(concurrency: usize, timeout: Duration) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency * 2)
        .timeout(timeout)
        .build()
        .expect("client")
}

/// `--load`: a fixed number of requests at a fixed concurrency; prints one JSON line.
fn fixed_load(url: &str, key: &str, requests: usize, concurrency: usize, stream: bool) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async move {
        // The Python gateway runs an agent turn per request; give it room on a busy box.
        let client = load_client(concurrency, Duration::from_secs(120));
        let next = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..concurrency.max(1) {
            let (c, url, key, next) = (
                client.clone(),
                url.to_string(),
                key.to_string(),
                std::sync::Arc::clone(&next),
            );
            tasks.push(tokio::spawn(async move {
                let mut out = Outcome::default();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if i >= requests {
                        break;
                    }
                    out.add(one_chat(&c, &url, &key, i, stream).await);
                }
                out
            }));
        }
        let mut all = Outcome::default();
        for t in tasks {
            all.merge(t.await.expect("worker"));
        }
        let elapsed = started.elapsed();
        let (ok, _) = all.sorted();
        let mean = if ok.is_empty() {
            0.0
        } else {
            ok.iter().map(Duration::as_secs_f64).sum::<f64>() / ok.len() as f64
        };
        println!(
            "{}",
            json!({
                "mode": if stream { "stream" } else { "plain" },
                "requests": requests, "concurrency": concurrency,
                "ok": ok.len(), "errors": all.errors, "first_error": all.first_error,
                "p50_ms": json_ms(pct(&ok, 0.50)), "p99_ms": json_ms(pct(&ok, 0.99)),
                "mean_ms": (mean * 100_000.0).round() / 100.0,
                "seconds": (elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
                "rps": (ok.len() as f64 / elapsed.as_secs_f64() * 10.0).round() / 10.0,
            })
        );
    });
}

/// What `--timed` runs: `concurrency` workers each sending one request after the other.
struct TimedPlan {
    url: String,
    key: String,
    stream: bool,
    concurrency: usize,
    /// Untimed, on the same connections, so the timed run pays no connection set-up.
    warmup: Duration,
    /// No request starts after this much time (measured from the end of the warmup).
    run: Duration,
    /// Requests still unanswered this long after `run` are abandoned and counted.
    grace: Duration,
    /// No more requests than this start (a bound for a peer that takes seconds per answer).
    max_requests: usize,
}

/// One phase of `--timed`: every worker sends requests until `stop` or until `max`
/// requests have started; a request still open at `hard_stop` is abandoned. Returns the
/// outcome and how many were abandoned.
async fn timed_phase(
    plan: &TimedPlan,
    client: &reqwest::Client,
    first_index: usize,
    stop: tokio::time::Instant,
    hard_stop: tokio::time::Instant,
    max: usize,
) -> (Outcome, usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = std::sync::Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..plan.concurrency.max(1) {
        let (c, url, key, next, stream) = (
            client.clone(),
            plan.url.clone(),
            plan.key.clone(),
            std::sync::Arc::clone(&next),
            plan.stream,
        );
        tasks.push(tokio::spawn(async move {
            let (mut out, mut abandoned) = (Outcome::default(), 0);
            while tokio::time::Instant::now() < stop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= max {
                    break;
                }
                let chat = one_chat(&c, &url, &key, first_index + i, stream);
                match tokio::time::timeout_at(hard_stop, chat).await {
                    Ok(r) => out.add(r),
                    Err(_) => {
                        abandoned += 1;
                        break;
                    }
                }
            }
            (out, abandoned)
        }));
    }
    let (mut all, mut abandoned) = (Outcome::default(), 0);
    for t in tasks {
        let (out, a) = t.await.expect("worker");
        all.merge(out);
        abandoned += a;
    }
    (all, abandoned)
}

/// `--timed`: a fixed concurrency for a fixed time, after an untimed warmup; prints one
/// JSON line with the latency distribution of the good answers (whole answer and first
/// byte), how many requests were answered, failed or abandoned, and the first error.
fn timed_load(plan: &TimedPlan) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async move {
        // Per request, no more than the whole run may take; the phases bound it anyway.
        let client = load_client(plan.concurrency, plan.warmup + plan.run + plan.grace * 2);
        let now = tokio::time::Instant::now();
        let (warm, warm_abandoned) = timed_phase(
            plan,
            &client,
            0,
            now + plan.warmup,
            now + plan.warmup + plan.grace,
            usize::MAX,
        )
        .await;
        let started = tokio::time::Instant::now();
        let (all, abandoned) = timed_phase(
            plan,
            &client,
            warm.ok.len() + warm.errors + warm_abandoned,
            started + plan.run,
            started + plan.run + plan.grace,
            plan.max_requests,
        )
        .await;
        let elapsed = started.elapsed();
        let (total, first) = all.sorted();
        let dist = |v: &[Duration]| {
            json!({"p50_ms": json_ms(pct(v, 0.50)), "p90_ms": json_ms(pct(v, 0.90)),
                   "p99_ms": json_ms(pct(v, 0.99)), "p999_ms": json_ms(pct(v, 0.999)),
                   "min_ms": json_ms(v.first().copied().unwrap_or_default()),
                   "max_ms": json_ms(v.last().copied().unwrap_or_default())})
        };
        println!(
            "{}",
            json!({
                "mode": if plan.stream { "stream" } else { "plain" },
                "concurrency": plan.concurrency,
                "warmup": {"ok": warm.ok.len(), "errors": warm.errors,
                           "abandoned": warm_abandoned, "first_error": warm.first_error},
                "ok": total.len(), "errors": all.errors, "abandoned": abandoned,
                "first_error": all.first_error,
                "seconds": (elapsed.as_secs_f64() * 1000.0).round() / 1000.0,
                "rps": (total.len() as f64 / elapsed.as_secs_f64() * 10.0).round() / 10.0,
                "latency": dist(&total),
                "first_byte": dist(&first),
            })
        );
    });
}

/// Parses the arguments of `--timed` (after the flag).
fn timed_plan(args: &[String]) -> Option<TimedPlan> {
    let [url, key, mode, concurrency, warmup, run, grace, max] = args else {
        return None;
    };
    let secs = |v: &String| v.parse::<f64>().ok().map(Duration::from_secs_f64);
    Some(TimedPlan {
        url: url.clone(),
        key: key.clone(),
        stream: match mode.as_str() {
            "stream" => true,
            "plain" => false,
            _ => return None,
        },
        concurrency: concurrency.parse().ok()?,
        warmup: secs(warmup)?,
        run: secs(run)?,
        grace: secs(grace)?,
        max_requests: max.parse().ok()?,
    })
}

/// Parses the optional pacing of `--serve-upstream`: none, or `<first_ms> <gap_ms>`.
fn pace_args(args: &[String]) -> Option<Pace> {
    let ms = |v: &String| {
        v.parse::<f64>()
            .ok()
            .map(|v| Duration::from_secs_f64(v / 1000.0))
    };
    match args {
        [] => Some(Pace::default()),
        [first, gap] => Some(Pace {
            first: ms(first)?,
            gap: ms(gap)?,
        }),
        _ => None,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--serve-gateway") && args.len() == 4 {
        serve_gateway(&args[2], &args[3]);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--serve-upstream") {
        let Some(pace) = pace_args(&args[2..]) else {
            eprintln!("usage: gateway_bench --serve-upstream [<first_ms> <gap_ms>]");
            std::process::exit(2);
        };
        serve_upstream(pace);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--timed") {
        let Some(plan) = timed_plan(&args[2..]) else {
            eprintln!(
                "usage: gateway_bench --timed <url> <key> <stream|plain> <concurrency> \
                 <warmup_s> <run_s> <grace_s> <max_requests>"
            );
            std::process::exit(2);
        };
        timed_load(&plan);
        return;
    }
    if args.get(1).map(String::as_str) == Some("--load") && args.len() == 7 {
        let (Ok(requests), Ok(concurrency)) = (args[4].parse(), args[5].parse()) else {
            eprintln!(
                "usage: gateway_bench --load <url> <key> <requests> <concurrency> <stream|plain>"
            );
            std::process::exit(2);
        };
        fixed_load(
            &args[2],
            &args[3],
            requests,
            concurrency,
            args[6] == "stream",
        );
        return;
    }
    let concurrency: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(32);
    let seconds: u64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(10);

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async move {
        let up = support::Upstream::start().await;
        let home = tempfile::tempdir().expect("tempdir");
        let exe = std::env::current_exe().expect("current exe");
        let mut child = Command::new(exe)
            .args([
                "--serve-gateway",
                &home.path().display().to_string(),
                &up.base_url(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn gateway");
        let pid = child.id();
        let stdout = child.stdout.take().expect("stdout");
        let addr = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).expect("read");
            line.trim()
                .strip_prefix("LISTENING ")
                .map(String::from)
                .expect("listening line")
        })
        .await
        .expect("join");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle_rss = rss_kib(pid, "VmRSS:");

        let direct = load(
            &format!("{}/chat/completions", up.base_url()),
            concurrency,
            seconds,
        )
        .await;
        let via = load(
            &format!("http://{addr}/v1/chat/completions"),
            concurrency,
            seconds,
        )
        .await;
        let peak_rss = rss_kib(pid, "VmHWM:");
        let busy_rss = rss_kib(pid, "VmRSS:");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = child.wait();

        println!("concurrency {concurrency}, {seconds} s per run, streamed answers of ~8 chunks\n");
        println!("| path | requests | req/s | p50 | p99 | p50 first byte |");
        println!("|------|---------:|------:|----:|----:|---------------:|");
        for (name, s) in [("direct to upstream", &direct), ("through gateway", &via)] {
            println!(
                "| {name} | {} | {:.0} | {} | {} | {} |",
                s.requests,
                s.rps,
                ms(s.p50),
                ms(s.p99),
                ms(s.ttfb_p50)
            );
        }
        println!(
            "\nratios (gateway / direct): req/s {:.2}, p50 {:.2}, p99 {:.2}",
            via.rps / direct.rps,
            via.p50.as_secs_f64() / direct.p50.as_secs_f64(),
            via.p99.as_secs_f64() / direct.p99.as_secs_f64()
        );
        println!(
            "gateway RSS: idle {} KiB, after load {} KiB, peak {} KiB",
            idle_rss, busy_rss, peak_rss
        );
    });
}
