//! The access log and the per-request metrics: one line per request, written when its answer
//! has been sent (for a stream: when the stream ends), and the counters of [`crate::metrics`].
//!
//! Words:
//! * *exchange* — one request and its answer as the log sees it ([`Exchange`]): created when
//!   the request's head arrives, filled in by the chat endpoint (session, upstream status and
//!   times, tokens, how a stream ended) and read once the answer is done.
//! * *upstream call* — [`UpstreamCall`]: times one provider call and reports its end to the
//!   exchange and the metrics.
//!
//! The line (target `hermes_gateway::access`, level `info`; successful probes and scrapes of
//! `/health`, `/ready` and `/metrics` at `debug`, since machines ask them every few seconds):
//!
//! ```text
//! access method=POST path=/v1/chat/completions status=200 ms=812.417 bytes=1843 session=s-1
//!   stream=true outcome=complete upstream_status=200 upstream_ms=811.950
//!   upstream_first_ms=95.208 added_ms=0.377 prompt_tokens=12 completion_tokens=40
//! ```
//!
//! (one line; fields without a value are left out; a named profile served at `/p/<profile>/`
//! by a multiplexing gateway adds `profile=<name>` after `bytes`, its path being the one under
//! the prefix). Never a key, a query string or message
//! content: the path is logged without its query, and only a valid session id.

use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

use crate::live::Snapshot;
use crate::metrics::{LastCall, Metrics, Route, StreamEnd, Tokens, UpstreamError};
use crate::server::AppState;

/// The `tracing` target of access lines (`RUST_LOG=hermes_gateway::access=off` silences them).
pub(crate) const TARGET: &str = "hermes_gateway::access";

/// The status logged for a request whose client went away before any answer (nginx's).
const CLIENT_CLOSED: u16 = 499;

/// Longest path logged for a path that is not one of the routes.
const MAX_LOGGED_PATH: usize = 128;

/// What the chat endpoint reports about one request.
#[derive(Debug, Default)]
struct Record {
    session: Option<String>,
    streamed: bool,
    upstream_started: Option<Instant>,
    upstream_first: Option<Instant>,
    upstream_done: Option<Instant>,
    upstream_status: Option<u16>,
    upstream_error: Option<UpstreamError>,
    /// Set by the stream relay when it sent the last event: complete, or an error event.
    stream_end: Option<StreamEnd>,
    tokens: Option<Tokens>,
}

/// One request as the access log sees it. Shared (in an `Arc`) between the middleware, the
/// chat handler and its stream relay; each writes its part under a short lock, never held
/// across an `.await`.
#[derive(Debug)]
pub(crate) struct Exchange {
    received: Instant,
    record: Mutex<Record>,
}

impl Exchange {
    fn new(received: Instant) -> Exchange {
        Exchange {
            received,
            record: Mutex::new(Record::default()),
        }
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        // Every critical section is a few assignments: a poisoned lock holds valid data.
        self.record.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The (valid) session id the request continues.
    pub(crate) fn set_session(&self, id: &str) {
        self.record().session = Some(id.to_string());
    }

    /// The answer is a stream.
    pub(crate) fn set_streamed(&self) {
        self.record().streamed = true;
    }

    /// How the stream ended from the relay's side (the last event was sent).
    pub(crate) fn set_stream_end(&self, end: StreamEnd) {
        self.record().stream_end = Some(end);
    }

    /// Token counts the provider reported.
    pub(crate) fn set_tokens(&self, tokens: Tokens) {
        self.record().tokens = Some(tokens);
    }
}

/// Times one provider call and reports it: first byte and end to the exchange (for the log
/// line) and to the metrics (histograms, status counts, the last call behind `/ready`).
#[derive(Debug)]
pub(crate) struct UpstreamCall {
    started: Instant,
    first: Option<Instant>,
    metrics: Arc<Metrics>,
    exchange: Option<Arc<Exchange>>,
    snapshot: std::sync::Weak<Snapshot>,
}

impl UpstreamCall {
    /// A call sent now with the settings of `snapshot`.
    pub(crate) fn start(
        metrics: &Arc<Metrics>,
        exchange: Option<&Arc<Exchange>>,
        snapshot: &Arc<Snapshot>,
    ) -> UpstreamCall {
        let started = Instant::now();
        if let Some(x) = exchange {
            x.record().upstream_started = Some(started);
        }
        UpstreamCall {
            started,
            first: None,
            metrics: Arc::clone(metrics),
            exchange: exchange.cloned(),
            snapshot: Arc::downgrade(snapshot),
        }
    }

    /// The first byte of the answer arrived (the first stream event, or the whole answer).
    /// Only the first call counts.
    pub(crate) fn first_byte(&mut self) {
        if self.first.is_some() {
            return;
        }
        let now = Instant::now();
        self.first = Some(now);
        self.metrics
            .upstream_first_byte
            .observe(now.duration_since(self.started));
        if let Some(x) = &self.exchange {
            x.record().upstream_first = Some(now);
        }
    }

    /// The answer ended well (or the client left while it streamed: the provider was fine).
    pub(crate) fn succeeded(self) {
        self.finish(Some(200), None);
    }

    /// The call failed with `e`.
    pub(crate) fn failed(self, e: &hermes_provider::Error) {
        let (kind, status) = UpstreamError::of(e);
        self.finish(status, Some(kind));
    }

    fn finish(self, status: Option<u16>, error: Option<UpstreamError>) {
        let now = Instant::now();
        if let Some(x) = &self.exchange {
            let mut r = x.record();
            r.upstream_done = Some(now);
            r.upstream_status = status;
            r.upstream_error = error;
        }
        self.metrics.upstream_finished(LastCall {
            at: SystemTime::now(),
            status,
            error,
            latency: now.duration_since(self.started),
            snapshot: self.snapshot,
        });
    }
}

/// The middleware: counts the request in flight, hands the handler an [`Exchange`], and
/// wraps the answer's body so the line is written when the body is done.
pub(crate) async fn observe(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let received = Instant::now();
    let route = Route::of(req.uri().path());
    let exchange = Arc::new(Exchange::new(received));
    req.extensions_mut().insert(Arc::clone(&exchange));
    let metrics = Arc::clone(&state.inner.metrics);
    metrics.request_started(route);
    let mut observed = Observed {
        metrics,
        exchange,
        route,
        method: req.method().clone(),
        profile: state.is_mounted().then(|| state.inner.profile.clone()),
        path: (route == Route::Other).then(|| loggable_path(req.uri().path())),
        status: None,
        bytes: 0,
        first_byte: None,
        ended: false,
    };
    // If this future is dropped here (the client left while the handler waited), `observed`
    // is dropped without a status and logs the request as 499.
    let resp = next.run(req).await;
    observed.status = Some(resp.status().as_u16());
    resp.map(|inner| Body::new(LoggedBody { inner, observed }))
}

/// The path of a request that matched no route, cut to a bounded length.
fn loggable_path(path: &str) -> String {
    path.chars().take(MAX_LOGGED_PATH).collect()
}

/// A value in a `key=value` line: as is when it is one plain token, else quoted with Rust's
/// escapes (`"a b"`, `"x\"y"`), so a line always splits back into its fields.
struct Field<'a>(&'a str);

impl std::fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plain = !self.0.is_empty()
            && self
                .0
                .chars()
                .all(|c| c.is_ascii_graphic() && c != '"' && c != '=' && c != '\\');
        if plain {
            f.write_str(self.0)
        } else {
            write!(f, "{:?}", self.0)
        }
    }
}

/// What the log line and the metrics need, finished when dropped.
struct Observed {
    metrics: Arc<Metrics>,
    exchange: Arc<Exchange>,
    route: Route,
    method: Method,
    /// The named profile served at `/p/<profile>/` when multiplexing (its routes are logged
    /// by their own path).
    profile: Option<String>,
    /// For paths that are not a route (routes are logged by their label).
    path: Option<String>,
    /// `None`: no answer was produced (the client left first).
    status: Option<u16>,
    bytes: u64,
    first_byte: Option<Instant>,
    /// The whole body was handed to the connection.
    ended: bool,
}

impl Drop for Observed {
    fn drop(&mut self) {
        let done = Instant::now();
        let status = self.status.unwrap_or(CLIENT_CLOSED);
        let record = std::mem::take(&mut *self.exchange.record());
        let outcome = record.streamed.then(|| {
            if self.ended {
                record.stream_end.unwrap_or(StreamEnd::Complete)
            } else {
                StreamEnd::ClientGone
            }
        });
        let added = self.added_latency(&record);
        self.count(status, &record, outcome, added);
        self.log(status, done, &record, outcome, added);
    }
}

impl Observed {
    fn count(&self, status: u16, r: &Record, outcome: Option<StreamEnd>, added: Option<Duration>) {
        let m = &self.metrics;
        m.request_finished(self.route, status);
        if let Some(end) = outcome {
            m.stream_ended(end);
        }
        if let Some(added) = added {
            m.added_latency.observe(added);
        }
        if let Some(tokens) = r.tokens {
            m.tokens(tokens);
        }
    }

    /// Writes the line. Successful probes and scrapes go at debug: machines ask them every
    /// few seconds. The line is only built when someone will read it.
    fn log(
        &self,
        status: u16,
        done: Instant,
        r: &Record,
        outcome: Option<StreamEnd>,
        added: Option<Duration>,
    ) {
        let quiet = self.route.is_probe() && (200..300).contains(&status);
        let wanted = if quiet {
            tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
        } else {
            tracing::enabled!(target: TARGET, tracing::Level::INFO)
        };
        if !wanted {
            return;
        }
        let line = self.line(status, done, r, outcome, added);
        if quiet {
            tracing::debug!(target: TARGET, "{line}");
        } else {
            tracing::info!(target: TARGET, "{line}");
        }
    }

    /// Head received to first body byte sent, minus the upstream's time to first byte; only
    /// for answers that came from the upstream.
    fn added_latency(&self, r: &Record) -> Option<Duration> {
        let first_sent = self.first_byte?;
        let upstream = r
            .upstream_first?
            .checked_duration_since(r.upstream_started?)?;
        let to_client = first_sent.checked_duration_since(self.exchange.received)?;
        Some(to_client.saturating_sub(upstream))
    }

    fn line(
        &self,
        status: u16,
        done: Instant,
        r: &Record,
        outcome: Option<StreamEnd>,
        added: Option<Duration>,
    ) -> String {
        let mut l = String::with_capacity(256);
        let path = self.path.as_deref().unwrap_or(self.route.label());
        let _ = write!(
            l,
            "access method={} path={} status={status} ms={} bytes={}",
            self.method,
            Field(path),
            Millis(done.duration_since(self.exchange.received)),
            self.bytes
        );
        if let Some(p) = &self.profile {
            let _ = write!(l, " profile={}", Field(p));
        }
        if let Some(s) = &r.session {
            let _ = write!(l, " session={}", Field(s));
        }
        if r.streamed {
            l.push_str(" stream=true");
        } else if r.upstream_started.is_some() {
            l.push_str(" stream=false");
        }
        if let Some(end) = outcome {
            let _ = write!(l, " outcome={}", end.label());
        } else if self.status.is_none() {
            l.push_str(" outcome=client_gone");
        }
        if let Some(started) = r.upstream_started {
            match (r.upstream_status, r.upstream_done) {
                (Some(s), _) => {
                    let _ = write!(l, " upstream_status={s}");
                }
                (None, Some(_)) => l.push_str(" upstream_status=none"),
                (None, None) => {}
            }
            if let Some(kind) = r.upstream_error {
                let _ = write!(l, " upstream_error={}", kind.label());
            }
            // A call the client abandoned has no end: its time so far.
            let end = r.upstream_done.unwrap_or(done);
            let _ = write!(
                l,
                " upstream_ms={}",
                Millis(end.saturating_duration_since(started))
            );
            if let (true, Some(first)) = (r.streamed, r.upstream_first) {
                let _ = write!(
                    l,
                    " upstream_first_ms={}",
                    Millis(first.saturating_duration_since(started))
                );
            }
        }
        if let Some(a) = added {
            let _ = write!(l, " added_ms={}", Millis(a));
        }
        if let Some(t) = r.tokens {
            let _ = write!(
                l,
                " prompt_tokens={} completion_tokens={}",
                t.prompt, t.completion
            );
        }
        l
    }
}

/// A duration as milliseconds with three decimals (microsecond resolution).
struct Millis(Duration);

impl std::fmt::Display for Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let micros = self.0.as_micros();
        write!(f, "{}.{:03}", micros / 1000, micros % 1000)
    }
}

/// The answer's body, counting bytes and noting the first and the end, so that the line is
/// written when the connection is done with it (for a stream: when it ends or the client
/// leaves).
struct LoggedBody {
    inner: Body,
    observed: Observed,
}

impl http_body::Body for LoggedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let o = &mut self.observed;
                    o.first_byte.get_or_insert_with(Instant::now);
                    o.bytes += data.len() as u64;
                }
            }
            Poll::Ready(None) => self.observed.ended = true,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        // hyper stops polling a body whose length it knows once it has it all: a body at its
        // end was sent whole even without a final `None`.
        if http_body::Body::is_end_stream(&self.inner) {
            self.observed.ended = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_have_microsecond_resolution() {
        assert_eq!(
            Millis(Duration::from_micros(812_417)).to_string(),
            "812.417"
        );
        assert_eq!(Millis(Duration::from_micros(7)).to_string(), "0.007");
        assert_eq!(Millis(Duration::from_secs(2)).to_string(), "2000.000");
    }

    #[test]
    fn odd_values_stay_one_field() {
        assert_eq!(Field("s-1:x.y_z").to_string(), "s-1:x.y_z");
        assert_eq!(Field("a b").to_string(), "\"a b\"");
        assert_eq!(Field("x\"y=\n").to_string(), "\"x\\\"y=\\n\"");
        assert_eq!(Field("").to_string(), "\"\"");
        assert_eq!(loggable_path(&"/x".repeat(200)).len(), MAX_LOGGED_PATH);
    }

    fn observed(metrics: &Arc<Metrics>, received: Instant) -> Observed {
        Observed {
            metrics: Arc::clone(metrics),
            exchange: Arc::new(Exchange::new(received)),
            route: Route::ChatCompletions,
            method: Method::POST,
            profile: None,
            path: None,
            status: Some(200),
            bytes: 10,
            first_byte: None,
            ended: true,
        }
    }

    #[test]
    fn added_latency_subtracts_the_upstream_time_to_first_byte() {
        let metrics = Arc::new(Metrics::new());
        let t0 = Instant::now();
        let mut o = observed(&metrics, t0);
        let record = Record {
            upstream_started: Some(t0 + Duration::from_millis(2)),
            upstream_first: Some(t0 + Duration::from_millis(102)),
            ..Record::default()
        };
        o.first_byte = Some(t0 + Duration::from_millis(103));
        assert_eq!(o.added_latency(&record), Some(Duration::from_millis(3)));
        // No upstream answer (an error before the call): nothing to measure.
        assert_eq!(o.added_latency(&Record::default()), None);
        o.first_byte = None;
        assert_eq!(o.added_latency(&record), None);
    }

    #[test]
    fn the_line_has_the_fields_that_are_known() {
        let metrics = Arc::new(Metrics::new());
        let t0 = Instant::now();
        let o = observed(&metrics, t0);
        let record = Record {
            session: Some("s-1".into()),
            streamed: true,
            upstream_started: Some(t0),
            upstream_first: Some(t0 + Duration::from_millis(5)),
            upstream_done: Some(t0 + Duration::from_millis(20)),
            upstream_status: Some(200),
            tokens: Some(Tokens {
                prompt: 1,
                completion: 2,
                total: 3,
            }),
            ..Record::default()
        };
        let line = o.line(
            200,
            t0 + Duration::from_millis(21),
            &record,
            Some(StreamEnd::Complete),
            Some(Duration::from_micros(250)),
        );
        assert_eq!(
            line,
            "access method=POST path=/v1/chat/completions status=200 ms=21.000 bytes=10 session=s-1 stream=true outcome=complete upstream_status=200 upstream_ms=20.000 upstream_first_ms=5.000 added_ms=0.250 prompt_tokens=1 completion_tokens=2"
        );
        let failed = Record {
            upstream_started: Some(t0),
            upstream_done: Some(t0 + Duration::from_millis(3)),
            upstream_error: Some(UpstreamError::Timeout),
            ..Record::default()
        };
        let line = o.line(504, t0 + Duration::from_millis(4), &failed, None, None);
        assert_eq!(
            line,
            "access method=POST path=/v1/chat/completions status=504 ms=4.000 bytes=10 stream=false upstream_status=none upstream_error=timeout upstream_ms=3.000"
        );
        // A named profile served by a multiplexing gateway says which.
        let mut mounted = observed(&metrics, t0);
        mounted.profile = Some("work".into());
        let line = mounted.line(
            401,
            t0 + Duration::from_millis(1),
            &Record::default(),
            None,
            None,
        );
        assert_eq!(
            line,
            "access method=POST path=/v1/chat/completions status=401 ms=1.000 bytes=10 profile=work"
        );
    }
}
