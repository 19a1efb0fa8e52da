//! Test support: a scriptable OpenAI-compatible upstream on 127.0.0.1:0, an in-memory
//! state recorder, and a helper that runs a real gateway on port 0.
//!
//! Words: the *upstream* is the fake provider; a *step* is a scripted answer it gives to the
//! next request before falling back to its normal echo answer ("echo: <last user text>").

#![allow(dead_code)]

use hermes_test_support::poll::until_async;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hermes_gateway::{ExitReason, GatewaySettings, Phase, ShutdownRequest, StateRecorder};
use hermes_provider::ProviderSettings;
use serde_json::{Value, json};

/// A scripted answer for one upstream request.
#[derive(Debug, Clone)]
pub enum Step {
    /// Answer with this HTTP status and an OpenAI-style error body.
    Status(u16),
    /// Wait this long, then answer normally.
    Hang(Duration),
    /// Wait for a permit of this semaphore (the test decides when), then answer normally.
    Gate(Arc<tokio::sync::Semaphore>),
}

/// One request the upstream received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub body: Value,
    pub authorization: Option<String>,
}

#[derive(Default)]
pub struct UpState {
    pub seen: Mutex<Vec<Seen>>,
    pub script: Mutex<VecDeque<Step>>,
    /// Delay before each stream chunk.
    pub chunk_delay: Mutex<Duration>,
    /// Extra pieces appended to every streamed answer (to make streams long).
    pub padding_pieces: AtomicUsize,
    /// Key the upstream demands, if any.
    pub required_key: Mutex<Option<String>>,
    /// Streams whose body was dropped before `[DONE]` was sent.
    pub aborted: AtomicUsize,
    /// Streams that sent `[DONE]`.
    pub completed: AtomicUsize,
}

pub struct Upstream {
    pub addr: SocketAddr,
    pub state: Arc<UpState>,
}

impl Upstream {
    pub async fn start() -> Upstream {
        let state = Arc::new(UpState::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // Like a real provider: no Nagle delay between stream chunks.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Upstream { addr, state }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn script(&self, steps: &[Step]) {
        self.state
            .script
            .lock()
            .unwrap()
            .extend(steps.iter().cloned());
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// Provider settings pointing at this upstream, with fast retries for tests.
    pub fn provider(&self) -> ProviderSettings {
        let mut p = ProviderSettings::new(self.base_url(), "test-model");
        p.api_key = Some("upstream-key".into());
        p.retry_base_delay = Duration::from_millis(20);
        p.max_retries = 3;
        p.request_timeout = Duration::from_secs(20);
        p.idle_timeout = Duration::from_secs(20);
        p
    }
}

struct StreamGuard {
    state: Arc<UpState>,
    done: bool,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if self.done {
            self.state.completed.fetch_add(1, Ordering::SeqCst);
        } else {
            self.state.aborted.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The normal answer's text for a request.
pub fn echo_of(text: &str) -> String {
    format!("echo: {text}")
}

async fn chat(State(state): State<Arc<UpState>>, headers: HeaderMap, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(String::from);
    state.seen.lock().unwrap().push(Seen {
        body: body.clone(),
        authorization: authorization.clone(),
    });

    let required = state.required_key.lock().unwrap().clone();
    if let Some(key) = required
        && authorization.as_deref() != Some(&format!("Bearer {key}"))
    {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}})),
        )
            .into_response();
    }
    let step = state.script.lock().unwrap().pop_front();
    match step {
        Some(Step::Status(code)) => {
            let status = StatusCode::from_u16(code).unwrap();
            return (
                status,
                axum::Json(json!({"error": {"message": format!("scripted {code}"), "type": "server_error"}})),
            )
                .into_response();
        }
        Some(Step::Hang(d)) => tokio::time::sleep(d).await,
        Some(Step::Gate(gate)) => {
            if let Ok(permit) = gate.acquire().await {
                permit.forget();
            }
        }
        None => {}
    }

    let last_user = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let reply = echo_of(&last_user);
    let model = body["model"].clone();
    if body["stream"] != json!(true) {
        return axum::Json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
        }))
        .into_response();
    }
    let mut pieces: Vec<String> = reply.split_inclusive(' ').map(String::from).collect();
    for _ in 0..state.padding_pieces.load(Ordering::SeqCst) {
        pieces.push(String::new());
    }
    let pieces = Arc::new(pieces);
    let delay = *state.chunk_delay.lock().unwrap();
    let guard = StreamGuard {
        state: Arc::clone(&state),
        done: false,
    };
    let stream = futures_util::stream::unfold((0usize, guard), move |(i, mut guard)| {
        let pieces = Arc::clone(&pieces);
        let model = model.clone();
        async move {
            if i > pieces.len() {
                return None;
            }
            // sleep(0) would still wait for the next timer tick (about 1 ms).
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let data = if i < pieces.len() {
                json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model,
                       "choices": [{"index": 0, "delta": {"content": pieces[i]}, "finish_reason": null}]})
                .to_string()
            } else {
                guard.done = true;
                "[DONE]".to_string()
            };
            Some((
                Ok::<_, Infallible>(Bytes::from(format!("data: {data}\n\n"))),
                (i + 1, guard),
            ))
        }
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// Records phases, exits and the listening address.
#[derive(Default)]
pub struct MemoryRecorder {
    pub phases: Mutex<Vec<(Phase, Option<String>)>>,
    pub exits: Mutex<Vec<(u8, String)>>,
    pub addr: Mutex<Option<SocketAddr>>,
}

impl StateRecorder for MemoryRecorder {
    fn record(&self, phase: Phase, exit_reason: Option<&str>) {
        self.phases
            .lock()
            .unwrap()
            .push((phase, exit_reason.map(String::from)));
    }
    fn listening(&self, addr: SocketAddr) {
        *self.addr.lock().unwrap() = Some(addr);
    }
    fn exited(&self, exit_code: u8, reason: &str) {
        self.exits
            .lock()
            .unwrap()
            .push((exit_code, reason.to_owned()));
    }
}

impl MemoryRecorder {
    pub fn exits(&self) -> Vec<(u8, String)> {
        self.exits.lock().unwrap().clone()
    }
    pub fn phases(&self) -> Vec<Phase> {
        self.phases
            .lock()
            .unwrap()
            .iter()
            .map(|(p, _)| *p)
            .collect()
    }
    pub fn last_reason(&self) -> Option<String> {
        self.phases
            .lock()
            .unwrap()
            .last()
            .and_then(|(_, r)| r.clone())
    }
}

/// A gateway running in this process.
pub struct Running {
    pub addr: SocketAddr,
    pub recorder: Arc<MemoryRecorder>,
    pub shutdown: Option<tokio::sync::oneshot::Sender<ShutdownRequest>>,
    pub task: tokio::task::JoinHandle<Result<ExitReason, hermes_gateway::Error>>,
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub async fn stop(mut self, how: ShutdownRequest) -> Result<ExitReason, hermes_gateway::Error> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(how);
        }
        tokio::time::timeout(Duration::from_secs(60), self.task)
            .await
            .unwrap()
            .unwrap()
    }
}

/// Settings for a test gateway in `home` on port 0 with key `gw-key`.
pub fn settings(home: &Path, profile: &str, upstream: Option<&Upstream>) -> GatewaySettings {
    let mut s = GatewaySettings::new(profile, home);
    s.port = 0;
    s.api_key = Some("gw-key".into());
    s.soul = Some("You are Hermes, the test soul.".into());
    s.provider = upstream.map(Upstream::provider);
    s.drain_timeout = Duration::from_secs(20);
    s
}

/// Starts `run` in a task and waits until the gateway reports `running`.
pub async fn start(settings: impl Into<hermes_gateway::Profile>) -> Running {
    start_with(settings, hermes_gateway::Inherited::none()).await
}

/// As [`start`], with these sockets passed as a supervisor passes them.
pub async fn start_with(
    settings: impl Into<hermes_gateway::Profile>,
    sockets: hermes_gateway::Inherited,
) -> Running {
    let settings = settings.into();
    let recorder = Arc::new(MemoryRecorder::default());
    let (tx, rx) = tokio::sync::oneshot::channel::<ShutdownRequest>();
    let rec = Arc::clone(&recorder);
    let task = tokio::spawn(async move {
        let shutdown = async move { rx.await.unwrap_or(ShutdownRequest::Stop) };
        hermes_gateway::run_with(settings, &*rec, shutdown, sockets).await
    });
    until_async(
        "the gateway to start",
        Duration::from_secs(30),
        async || {
            assert!(
                !task.is_finished(),
                "gateway exited early: {:?}",
                recorder.phases()
            );
            recorder.phases().contains(&Phase::Running).then_some(())
        },
    )
    .await;
    let addr = recorder.addr.lock().unwrap().expect("listening address");
    Running {
        addr,
        recorder,
        shutdown: Some(tx),
        task,
    }
}

/// A client with the gateway key.
pub fn client() -> reqwest::Client {
    // reqwest is built without a bundled crypto provider; plain HTTP still needs one installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().build().unwrap()
}

/// Splits an SSE body into its `data:` payloads.
pub fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|ev| ev.strip_prefix("data: "))
        .map(String::from)
        .collect()
}

/// Concatenates the deltas of SSE payloads.
pub fn sse_text(data: &[String]) -> String {
    data.iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(String::from)
        })
        .collect()
}
