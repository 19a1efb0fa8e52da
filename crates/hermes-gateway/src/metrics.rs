//! What the gateway counts about itself, for `GET /metrics` (Prometheus text format 0.0.4),
//! `/ready` and `/health/detailed`.
//!
//! Words:
//! * *route* — the endpoint a request went to ([`Route`]); any other path is `other`, so a
//!   scanner probing random paths cannot create new series.
//! * *upstream call* — one chat request sent to the provider, retries included (the provider
//!   client retries inside one call, so its status is the final one).
//! * *added latency* — the time the gateway itself adds before the client sees the answer
//!   start: from the request's head received to the first byte of the answer's body handed to
//!   the connection, minus the upstream's time to first byte (for a stream, from sending the
//!   request to its first event; for a plain answer, the whole call, since it arrives whole).
//!   It includes reading the body, the session history, assembling the prompt and (for plain
//!   answers) storing the turn.
//! * *last call* — the upstream call that finished last ([`LastCall`]); `/ready` is built on it.
//!
//! Everything on the request path is a relaxed atomic add: no lock, no allocation. The one
//! lock (`last_call`) is taken once per upstream call for a few assignments, never across an
//! `.await`. Nothing recorded here is a secret or message content: counts, durations, status
//! codes, error kinds and the version.

use hermes_http::prometheus::{escape_label, gauge, header};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hermes_provider::Error;

use crate::live::Snapshot;

/// The endpoints, as metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Health,
    HealthDetailed,
    Ready,
    Metrics,
    Models,
    Capabilities,
    ChatCompletions,
    Other,
}

impl Route {
    const ALL: [Route; 8] = [
        Route::Health,
        Route::HealthDetailed,
        Route::Ready,
        Route::Metrics,
        Route::Models,
        Route::Capabilities,
        Route::ChatCompletions,
        Route::Other,
    ];

    /// The route a request path belongs to.
    pub(crate) fn of(path: &str) -> Route {
        match path {
            "/health" => Route::Health,
            "/health/detailed" => Route::HealthDetailed,
            "/ready" => Route::Ready,
            "/metrics" => Route::Metrics,
            "/v1/models" => Route::Models,
            "/v1/capabilities" => Route::Capabilities,
            "/v1/chat/completions" => Route::ChatCompletions,
            _ => Route::Other,
        }
    }

    /// The label value (the path itself, `other` for the rest).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Route::Health => "/health",
            Route::HealthDetailed => "/health/detailed",
            Route::Ready => "/ready",
            Route::Metrics => "/metrics",
            Route::Models => "/v1/models",
            Route::Capabilities => "/v1/capabilities",
            Route::ChatCompletions => "/v1/chat/completions",
            Route::Other => "other",
        }
    }

    /// Probes and scrapes: asked every few seconds by machines.
    pub(crate) fn is_probe(self) -> bool {
        matches!(self, Route::Health | Route::Ready | Route::Metrics)
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// HTTP status classes `1xx` .. `5xx`.
const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

fn class_index(status: u16) -> usize {
    usize::from(status / 100).clamp(1, 5) - 1
}

/// Why an upstream call failed, as a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UpstreamError {
    /// The provider refused the key (401/403).
    Auth,
    /// The provider answered another error status.
    Status,
    /// No answer in time.
    Timeout,
    /// No connection.
    Unreachable,
    /// The connection broke while the answer arrived.
    Transport,
    /// The answer was not an OpenAI-compatible one.
    Protocol,
    /// The client's request cannot be expressed in the provider's API (nothing was sent).
    Unsupported,
    /// Anything else.
    Other,
}

impl UpstreamError {
    const ALL: [UpstreamError; 8] = [
        UpstreamError::Auth,
        UpstreamError::Status,
        UpstreamError::Timeout,
        UpstreamError::Unreachable,
        UpstreamError::Transport,
        UpstreamError::Protocol,
        UpstreamError::Unsupported,
        UpstreamError::Other,
    ];

    /// The kind of a provider error, and its HTTP status when the provider answered one.
    /// After fallbacks, the last endpoint's error is the one that counts (the client's status
    /// follows it too).
    pub(crate) fn of(e: &Error) -> (UpstreamError, Option<u16>) {
        match e {
            Error::ProviderFallbacksFailed { source, .. } => UpstreamError::of(source),
            Error::UnsupportedRequest { .. } => (UpstreamError::Unsupported, None),
            Error::ProviderAuth { status, .. } => (UpstreamError::Auth, Some(*status)),
            Error::ProviderStatus { status, .. } => (UpstreamError::Status, Some(*status)),
            Error::ProviderTimeout { .. } => (UpstreamError::Timeout, None),
            Error::ProviderUnreachable { .. } => (UpstreamError::Unreachable, None),
            Error::ProviderTransport { .. } => (UpstreamError::Transport, None),
            Error::ProviderProtocol { .. } => (UpstreamError::Protocol, None),
            Error::HttpClient { .. } => (UpstreamError::Other, None),
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            UpstreamError::Auth => "auth",
            UpstreamError::Status => "status",
            UpstreamError::Timeout => "timeout",
            UpstreamError::Unreachable => "unreachable",
            UpstreamError::Transport => "transport",
            UpstreamError::Protocol => "protocol",
            UpstreamError::Unsupported => "unsupported_request",
            UpstreamError::Other => "other",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How a streamed answer ended for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// The client got the whole answer, `[DONE]` included.
    Complete,
    /// The client went away before the end.
    ClientGone,
    /// The upstream failed midway; the client got an error event.
    UpstreamFailed,
    /// The answer was whole but its turn could not be stored in the session; the client got
    /// an error event.
    NotStored,
}

impl StreamEnd {
    const ALL: [StreamEnd; 4] = [
        StreamEnd::Complete,
        StreamEnd::ClientGone,
        StreamEnd::UpstreamFailed,
        StreamEnd::NotStored,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            StreamEnd::Complete => "complete",
            StreamEnd::ClientGone => "client_gone",
            StreamEnd::UpstreamFailed => "upstream_failed",
            StreamEnd::NotStored => "not_stored",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Bucket bounds (seconds) for durations that are mostly sub-millisecond (added latency).
const FINE_BUCKETS: [f64; 13] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];
/// Bucket bounds (seconds) for upstream durations: a model answers in tenths of seconds to
/// minutes.
const COARSE_BUCKETS: [f64; 13] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
];

/// A Prometheus histogram with fixed bounds, updated with atomics.
#[derive(Debug)]
pub(crate) struct Histogram {
    bounds: &'static [f64],
    /// Per-bucket counts (not cumulative); the last one is `+Inf`.
    counts: Vec<AtomicU64>,
    sum_nanos: AtomicU64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_nanos: AtomicU64::new(0),
        }
    }

    pub(crate) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = self
            .bounds
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        header(out, name, help, "histogram");
        let mut cumulative = 0u64;
        for (i, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            match self.bounds.get(i) {
                Some(b) => {
                    let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {cumulative}");
                }
                None => {
                    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
                }
            }
        }
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {cumulative}");
    }
}

/// The upstream call that finished last.
#[derive(Debug, Clone)]
pub(crate) struct LastCall {
    /// When it finished.
    pub(crate) at: SystemTime,
    /// The provider's HTTP status, when it answered one.
    pub(crate) status: Option<u16>,
    /// Why it failed (`None`: it succeeded, or the provider refused the request itself).
    pub(crate) error: Option<UpstreamError>,
    /// From sending the request to the end of the answer.
    pub(crate) latency: Duration,
    /// The settings snapshot it was made with: an edit of the settings makes a failure stale
    /// (the next call decides again), so fixing a key makes the gateway ready at once.
    pub(crate) snapshot: Weak<Snapshot>,
}

impl LastCall {
    /// True when this call says the upstream does not work. A refusal of the request itself
    /// (a 4xx other than 404, 408 and 429: the client's request was wrong, or one the
    /// provider's API cannot express) says nothing about the upstream.
    pub(crate) fn failed(&self) -> bool {
        match (self.error, self.status) {
            (None, _) | (Some(UpstreamError::Unsupported), _) => false,
            (Some(UpstreamError::Status), Some(s)) => {
                !(400..500).contains(&s) || matches!(s, 404 | 408 | 429)
            }
            (Some(_), _) => true,
        }
    }
}

/// Whether the gateway can serve chats now, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Readiness {
    Ready,
    NoModel,
    UpstreamFailed {
        status: Option<u16>,
        kind: &'static str,
    },
}

impl Readiness {
    /// Ready when a model is configured and the last upstream call made with the current
    /// settings did not fail (no call yet counts as ready).
    pub(crate) fn decide(
        model_configured: bool,
        last: Option<&LastCall>,
        current: &std::sync::Arc<Snapshot>,
    ) -> Readiness {
        if !model_configured {
            return Readiness::NoModel;
        }
        match last {
            Some(call)
                if call.failed()
                    && std::ptr::eq(call.snapshot.as_ptr(), std::sync::Arc::as_ptr(current)) =>
            {
                Readiness::UpstreamFailed {
                    status: call.status,
                    kind: call.error.map_or("other", UpstreamError::label),
                }
            }
            _ => Readiness::Ready,
        }
    }

    /// The reason code (`None` when ready).
    pub(crate) fn reason(&self) -> Option<&'static str> {
        match self {
            Readiness::Ready => None,
            Readiness::NoModel => Some("model_not_configured"),
            Readiness::UpstreamFailed { .. } => Some("last_upstream_call_failed"),
        }
    }

    /// One sentence for people.
    pub(crate) fn message(&self) -> Option<String> {
        match self {
            Readiness::Ready => None,
            Readiness::NoModel => Some("no model is configured for this profile".into()),
            Readiness::UpstreamFailed {
                status: Some(s),
                kind,
            } => Some(format!(
                "the last call to the provider failed ({kind}, HTTP {s})"
            )),
            Readiness::UpstreamFailed { status: None, kind } => {
                Some(format!("the last call to the provider failed ({kind})"))
            }
        }
    }
}

/// Token counts a provider reported for one answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tokens {
    pub(crate) prompt: u64,
    pub(crate) completion: u64,
    pub(crate) total: u64,
}

impl Tokens {
    /// Reads an OpenAI `usage` object.
    pub(crate) fn from_usage(usage: &serde_json::Value) -> Option<Tokens> {
        let field = |k: &str| usage.get(k).and_then(serde_json::Value::as_u64);
        let prompt = field("prompt_tokens")?;
        let completion = field("completion_tokens")?;
        let total = field("total_tokens").unwrap_or(prompt + completion);
        Some(Tokens {
            prompt,
            completion,
            total,
        })
    }
}

/// Upstream statuses counted one by one (100..=599); anything else is counted as `other`.
const STATUS_SLOTS: usize = 500;

/// The gateway's counters. One per gateway, shared by every request.
#[derive(Debug)]
pub(crate) struct Metrics {
    started: Instant,
    started_unix: f64,
    /// `[route][class]`.
    requests: Vec<AtomicU64>,
    in_flight: AtomicI64,
    /// Chat completions in flight (streams until their body ends): `/health/detailed`'s
    /// `background_queues.active_api_runs`.
    chats_in_flight: AtomicI64,
    open_connections: AtomicI64,
    rejected_connections: AtomicU64,
    /// Index `status - 100`; the extra last slot counts calls without a status.
    upstream_status: Vec<AtomicU64>,
    upstream_errors: Vec<AtomicU64>,
    streams: Vec<AtomicU64>,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    pub(crate) upstream_first_byte: Histogram,
    pub(crate) upstream_duration: Histogram,
    pub(crate) added_latency: Histogram,
    last_call: Mutex<Option<LastCall>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

fn counters(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        Metrics {
            started: Instant::now(),
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            requests: counters(Route::ALL.len() * CLASSES.len()),
            in_flight: AtomicI64::new(0),
            chats_in_flight: AtomicI64::new(0),
            open_connections: AtomicI64::new(0),
            rejected_connections: AtomicU64::new(0),
            upstream_status: counters(STATUS_SLOTS + 1),
            upstream_errors: counters(UpstreamError::ALL.len()),
            streams: counters(StreamEnd::ALL.len()),
            prompt_tokens: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
            upstream_first_byte: Histogram::new(&COARSE_BUCKETS),
            upstream_duration: Histogram::new(&COARSE_BUCKETS),
            added_latency: Histogram::new(&FINE_BUCKETS),
            last_call: Mutex::new(None),
        }
    }

    /// Time since the gateway started.
    pub(crate) fn uptime(&self) -> Duration {
        self.started.elapsed()
    }

    pub(crate) fn request_started(&self, route: Route) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        if route == Route::ChatCompletions {
            self.chats_in_flight.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn request_finished(&self, route: Route, status: u16) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        if route == Route::ChatCompletions {
            self.chats_in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        let i = route.index() * CLASSES.len() + class_index(status);
        self.requests[i].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn in_flight(&self) -> i64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    pub(crate) fn chats_in_flight(&self) -> i64 {
        self.chats_in_flight.load(Ordering::Relaxed)
    }

    pub(crate) fn open_connections(&self) -> i64 {
        self.open_connections.load(Ordering::Relaxed)
    }

    /// An upstream call finished: counts it and makes it the last call.
    pub(crate) fn upstream_finished(&self, call: LastCall) {
        let slot = call
            .status
            .and_then(|s| usize::from(s).checked_sub(100))
            .filter(|i| *i < STATUS_SLOTS)
            .unwrap_or(STATUS_SLOTS);
        self.upstream_status[slot].fetch_add(1, Ordering::Relaxed);
        if let Some(kind) = call.error {
            self.upstream_errors[kind.index()].fetch_add(1, Ordering::Relaxed);
        }
        self.upstream_duration.observe(call.latency);
        *self
            .last_call
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(call);
    }

    pub(crate) fn last_call(&self) -> Option<LastCall> {
        self.last_call
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn stream_ended(&self, end: StreamEnd) {
        self.streams[end.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn tokens(&self, t: Tokens) {
        self.prompt_tokens.fetch_add(t.prompt, Ordering::Relaxed);
        self.completion_tokens
            .fetch_add(t.completion, Ordering::Relaxed);
    }

    /// The Prometheus text exposition (format 0.0.4). `ready` and `config_error` are the
    /// gateway's current state, decided by the caller; `drains` the profile's
    /// `gateway_drains.json` (the drains of every gateway it ran, not only this one's).
    pub(crate) fn render(
        &self,
        profile: &str,
        ready: bool,
        config_error: bool,
        drains: &hermes_home::drains::Drains,
    ) -> String {
        let mut out = String::with_capacity(8 * 1024);
        header(
            &mut out,
            "hermes_gateway_build_info",
            "The gateway's version and profile (always 1).",
            "gauge",
        );
        let _ = writeln!(
            out,
            "hermes_gateway_build_info{{version=\"{}\",profile=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            escape_label(profile)
        );
        gauge(
            &mut out,
            "hermes_gateway_start_time_seconds",
            "When the gateway started, in seconds since the Unix epoch.",
            self.started_unix,
        );
        gauge(
            &mut out,
            "hermes_gateway_ready",
            "1 when /ready answers 200 (a model is configured and the last upstream call did not fail).",
            f64::from(u8::from(ready)),
        );
        gauge(
            &mut out,
            "hermes_gateway_config_error",
            "1 while an edit of the profile's files is refused (the previous settings stay in use).",
            f64::from(u8::from(config_error)),
        );
        self.render_requests(&mut out);
        render_drains(&mut out, drains);
        self.render_upstream(&mut out);
        out
    }

    fn render_requests(&self, out: &mut String) {
        header(
            out,
            "hermes_gateway_requests_total",
            "HTTP requests answered, by route and status class.",
            "counter",
        );
        for route in Route::ALL {
            for (c, class) in CLASSES.iter().enumerate() {
                let n = self.requests[route.index() * CLASSES.len() + c].load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "hermes_gateway_requests_total{{route=\"{}\",code=\"{class}\"}} {n}",
                    route.label()
                );
            }
        }
        gauge(
            out,
            "hermes_gateway_requests_in_flight",
            "Requests received whose answer has not been fully sent yet (streams included).",
            self.in_flight() as f64,
        );
        gauge(
            out,
            "hermes_gateway_open_connections",
            "Client connections open now.",
            self.open_connections() as f64,
        );
        header(
            out,
            "hermes_gateway_connections_rejected_total",
            "Connections answered 503 too_many_connections (or closed) because every allowed connection was busy.",
            "counter",
        );
        let _ = writeln!(
            out,
            "hermes_gateway_connections_rejected_total {}",
            self.rejected_connections.load(Ordering::Relaxed)
        );
        header(
            out,
            "hermes_gateway_streams_total",
            "Streamed chat answers, by how they ended for the client.",
            "counter",
        );
        for end in StreamEnd::ALL {
            let n = self.streams[end.index()].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "hermes_gateway_streams_total{{outcome=\"{}\"}} {n}",
                end.label()
            );
        }
        self.added_latency.render(
            out,
            "hermes_gateway_added_latency_seconds",
            "Time the gateway adds: request head received to first answer byte sent, minus the upstream's time to first byte.",
        );
    }

    fn render_upstream(&self, out: &mut String) {
        header(
            out,
            "hermes_gateway_upstream_requests_total",
            "Calls to the provider, by final HTTP status after retries (none: no answer).",
            "counter",
        );
        let mut any = false;
        for (i, c) in self.upstream_status.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            if n == 0 {
                continue;
            }
            any = true;
            if i == STATUS_SLOTS {
                let _ = writeln!(
                    out,
                    "hermes_gateway_upstream_requests_total{{status=\"none\"}} {n}"
                );
            } else {
                let _ = writeln!(
                    out,
                    "hermes_gateway_upstream_requests_total{{status=\"{}\"}} {n}",
                    i + 100
                );
            }
        }
        if !any {
            // A series from the start, so rate() works from the first call on.
            let _ = writeln!(
                out,
                "hermes_gateway_upstream_requests_total{{status=\"200\"}} 0"
            );
        }
        header(
            out,
            "hermes_gateway_upstream_errors_total",
            "Failed calls to the provider, by kind.",
            "counter",
        );
        for kind in UpstreamError::ALL {
            let n = self.upstream_errors[kind.index()].load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "hermes_gateway_upstream_errors_total{{kind=\"{}\"}} {n}",
                kind.label()
            );
        }
        self.upstream_first_byte.render(
            out,
            "hermes_gateway_upstream_first_byte_seconds",
            "Time from sending a request to the provider to the first byte of its answer (a plain answer: all of it).",
        );
        self.upstream_duration.render(
            out,
            "hermes_gateway_upstream_duration_seconds",
            "Time from sending a request to the provider to the end of its answer (or its failure).",
        );
        header(
            out,
            "hermes_gateway_tokens_total",
            "Tokens the provider reported (when it reports usage).",
            "counter",
        );
        let _ = writeln!(
            out,
            "hermes_gateway_tokens_total{{kind=\"prompt\"}} {}",
            self.prompt_tokens.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "hermes_gateway_tokens_total{{kind=\"completion\"}} {}",
            self.completion_tokens.load(Ordering::Relaxed)
        );
    }
}

/// The drain counters, kept in `gateway_drains.json` across the gateway's restarts.
fn render_drains(out: &mut String, drains: &hermes_home::drains::Drains) {
    header(
        out,
        "hermes_gateway_drained_requests_total",
        "Requests (streams included) in flight at a gateway's stop that finished within the drain timeout, over every gateway of this profile.",
        "counter",
    );
    let _ = writeln!(
        out,
        "hermes_gateway_drained_requests_total {}",
        drains.drained_total
    );
    header(
        out,
        "hermes_gateway_cut_requests_total",
        "Requests (streams included) still running at the drain timeout of a gateway's stop, cut, over every gateway of this profile.",
        "counter",
    );
    let _ = writeln!(
        out,
        "hermes_gateway_cut_requests_total {}",
        drains.cut_total
    );
}

/// The accept loop's connection counts (`hermes_http`).
impl hermes_http::ConnectionObserver for Metrics {
    fn opened(&self) {
        self.open_connections.fetch_add(1, Ordering::Relaxed);
    }

    fn closed(&self) {
        self.open_connections.fetch_sub(1, Ordering::Relaxed);
    }

    fn rejected(&self) {
        self.rejected_connections.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A settings snapshot, as `Live` makes them (each call makes a new one).
    fn snapshot() -> Arc<Snapshot> {
        let dir = std::env::temp_dir();
        let settings = crate::settings::GatewaySettings::new("metrics", &dir);
        crate::live::Live::new(&settings.into(), crate::live::Role::Listener)
            .unwrap()
            .current()
    }

    fn call(status: Option<u16>, error: Option<UpstreamError>, s: &Arc<Snapshot>) -> LastCall {
        LastCall {
            at: SystemTime::now(),
            status,
            error,
            latency: Duration::from_millis(5),
            snapshot: Arc::downgrade(s),
        }
    }

    #[test]
    fn routes_are_bounded() {
        assert_eq!(Route::of("/v1/chat/completions"), Route::ChatCompletions);
        assert_eq!(Route::of("/v1/chat/completions/x"), Route::Other);
        assert_eq!(Route::of("/wp-admin"), Route::Other);
        for r in Route::ALL {
            assert_eq!(Route::of(r.label()), r, "{r:?}");
        }
        assert!(Route::of("/ready").is_probe());
        assert!(!Route::ChatCompletions.is_probe());
    }

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::new(&FINE_BUCKETS);
        h.observe(Duration::from_micros(30));
        h.observe(Duration::from_micros(700));
        h.observe(Duration::from_secs(5));
        let mut out = String::new();
        h.render(&mut out, "x", "help");
        assert!(out.contains("x_bucket{le=\"0.00005\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.0005\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"0.001\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"1\"} 2\n"), "{out}");
        assert!(out.contains("x_bucket{le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("x_count 3\n"), "{out}");
        assert!(out.contains("x_sum 5.00073\n"), "{out}");
    }

    #[test]
    fn after_fallbacks_the_last_endpoint_counts() {
        let last = Error::ProviderStatus {
            base_url: "http://b".into(),
            status: 503,
            attempts: 4,
            message: "down".into(),
        };
        let e = Error::ProviderFallbacksFailed {
            tried: "a, b".into(),
            source: Box::new(last),
        };
        assert_eq!(UpstreamError::of(&e), (UpstreamError::Status, Some(503)));
        let e = Error::ProviderTimeout {
            base_url: "http://a".into(),
            after: Duration::from_secs(1),
        };
        assert_eq!(UpstreamError::of(&e), (UpstreamError::Timeout, None));
    }

    #[test]
    fn a_refused_request_is_not_an_upstream_failure() {
        let s = snapshot();
        assert!(!call(Some(200), None, &s).failed());
        assert!(!call(Some(400), Some(UpstreamError::Status), &s).failed());
        assert!(!call(Some(422), Some(UpstreamError::Status), &s).failed());
        assert!(call(Some(429), Some(UpstreamError::Status), &s).failed());
        assert!(call(Some(404), Some(UpstreamError::Status), &s).failed());
        assert!(call(Some(503), Some(UpstreamError::Status), &s).failed());
        assert!(call(Some(401), Some(UpstreamError::Auth), &s).failed());
        assert!(call(None, Some(UpstreamError::Timeout), &s).failed());
        assert!(!call(None, Some(UpstreamError::Unsupported), &s).failed());
    }

    #[test]
    fn readiness_follows_the_model_and_the_last_call_with_these_settings() {
        let s = snapshot();
        assert_eq!(Readiness::decide(false, None, &s), Readiness::NoModel);
        assert_eq!(Readiness::decide(true, None, &s), Readiness::Ready);
        let failed = call(Some(503), Some(UpstreamError::Status), &s);
        let r = Readiness::decide(true, Some(&failed), &s);
        assert_eq!(r.reason(), Some("last_upstream_call_failed"));
        assert!(r.message().unwrap().contains("HTTP 503"), "{r:?}");
        // The settings changed since (a reload): the failure no longer counts.
        let edited = snapshot();
        assert_eq!(
            Readiness::decide(true, Some(&failed), &edited),
            Readiness::Ready
        );
        let ok = call(Some(200), None, &s);
        assert_eq!(Readiness::decide(true, Some(&ok), &s), Readiness::Ready);
    }

    #[test]
    fn render_counts_and_labels() {
        let m = Metrics::new();
        let s = snapshot();
        m.request_started(Route::ChatCompletions);
        m.request_started(Route::Health);
        m.request_finished(Route::ChatCompletions, 200);
        m.upstream_finished(call(Some(503), Some(UpstreamError::Status), &s));
        m.upstream_finished(call(None, Some(UpstreamError::Timeout), &s));
        m.stream_ended(StreamEnd::ClientGone);
        m.tokens(Tokens {
            prompt: 3,
            completion: 4,
            total: 7,
        });
        let drains = hermes_home::drains::Drains {
            drained_total: 5,
            cut_total: 2,
            last: None,
        };
        let text = m.render("we\"ird", true, false, &drains);
        for line in [
            "hermes_gateway_requests_total{route=\"/v1/chat/completions\",code=\"2xx\"} 1",
            "hermes_gateway_requests_total{route=\"other\",code=\"4xx\"} 0",
            "hermes_gateway_requests_in_flight 1",
            "hermes_gateway_upstream_requests_total{status=\"503\"} 1",
            "hermes_gateway_upstream_requests_total{status=\"none\"} 1",
            "hermes_gateway_upstream_errors_total{kind=\"timeout\"} 1",
            "hermes_gateway_upstream_errors_total{kind=\"status\"} 1",
            "hermes_gateway_streams_total{outcome=\"client_gone\"} 1",
            "hermes_gateway_tokens_total{kind=\"completion\"} 4",
            "hermes_gateway_ready 1",
            "hermes_gateway_config_error 0",
            "hermes_gateway_upstream_duration_seconds_count 2",
            "hermes_gateway_drained_requests_total 5",
            "hermes_gateway_cut_requests_total 2",
            "# TYPE hermes_gateway_drained_requests_total counter",
            "# TYPE hermes_gateway_cut_requests_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
        assert!(text.contains("profile=\"we\\\"ird\""), "{text}");
        assert_eq!(m.last_call().unwrap().error, Some(UpstreamError::Timeout));
        // Every sample line is `name{labels} value` or `name value` with a number.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
