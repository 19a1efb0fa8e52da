//! `hermes-http`: the HTTP/1.1 accept loop the gateway and the dashboard share, with
//! connection limits: a cap on open connections, a time limit on reading a request head, and
//! one on idleness.
//!
//! Words:
//! * *tracker* — what the loop knows about one open connection: its activity, and whether
//!   it was told to make room.
//! * *idle* — no request in flight, and nothing received since the last answer (or since the
//!   connection opened).
//! * *reading a head* — bytes of a request arrived, its headers are not complete yet.
//! * *busy* — a request is in flight: from its complete head until its answer's last byte was
//!   handed to the socket (a long stream included).
//! * *eviction* — at the cap, a new connection takes the place of the longest-idle one (else of
//!   the one that has been reading a head longest). A busy connection is never evicted.
//!
//! Timeouts: an idle connection is closed after `idle_timeout`, a head not complete within
//! `header_timeout` of its first byte closes the connection, and so does a new connection that
//! sends nothing at all within `header_timeout` (or `idle_timeout`, when that is shorter: a
//! silent client holds a descriptor for the header timeout, not the idle one).
//!
//! Descriptors: the cap is never more than the process's open-file limit allows
//! ([`within_descriptor_limit`]: `RLIMIT_NOFILE` less a reserve for the
//! listener, logs, databases and the provider's connections), so at the cap the loop evicts an
//! idle connection to answer a new one instead of failing to accept it. Busy connections have no limit
//! here (the provider timeouts bound them). At the cap with every connection busy, a new
//! connection is answered `503` with an OpenAI-style `too_many_connections` error and
//! `Connection: close`, then closed: a client, or a health check, learns at once what is
//! wrong instead of hanging.
//!
//! Shutdown: the listener is closed at once (a socket another process also holds, as a
//! supervisor's passed one, stays open there and keeps queueing connections for it); idle
//! connections are closed; busy ones finish their request (keep-alive off: an answer not yet
//! begun says `Connection: close`) within the grace period, after which they are cut. What the
//! drain did is returned as a [`DrainReport`]: the requests in flight (streams included), how
//! many finished, how many were cut, how long it took.
//!
//! [`prometheus`]: the text exposition format both `/metrics` endpoints write.
//!
//! Counts: every admitted connection counts as open until its task ends (an evicted one
//! until it is actually closed), and every connection over the cap counts as rejected, both
//! told to a [`ConnectionObserver`] (the gateway's `/metrics`).

pub mod prometheus;

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use bytes::Bytes;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::ServiceExt;

/// What the accept loop tells about connections as they come and go (the gateway counts them
/// for `/metrics`). Every method does nothing by default.
pub trait ConnectionObserver: Send + Sync + 'static {
    /// A connection was admitted.
    fn opened(&self) {}
    /// An admitted connection's task ended.
    fn closed(&self) {}
    /// A connection over the cap was refused (answered 503 or closed).
    fn rejected(&self) {}
}

/// An observer that counts nothing ([`serve_app`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct Unobserved;

impl ConnectionObserver for Unobserved {}

/// Limits on client connections: a setting (`gateway.*` in `config.yaml`), resolved with the
/// rest of a profile's settings.
pub use hermes_gateway_settings::ConnectionLimits;

pub use hermes_gateway_settings::limits::DESCRIPTOR_RESERVE;

/// `limits` [`fitted_to`](ConnectionLimits::fitted_to) this process's `RLIMIT_NOFILE` (its soft
/// limit); a warning is logged when that lowers the cap.
pub fn within_descriptor_limit(limits: ConnectionLimits) -> ConnectionLimits {
    let Some(soft) = soft_descriptor_limit() else {
        return limits;
    };
    let fitted = limits.fitted_to(soft);
    if fitted.max_connections < limits.max_connections {
        tracing::warn!(
            configured = limits.max_connections,
            max_connections = fitted.max_connections,
            open_file_limit = soft,
            "the open-file limit leaves room for {} client connections, not {}: raise it (`ulimit -n`, Docker's --ulimit nofile) to serve more",
            fitted.max_connections,
            limits.max_connections
        );
    }
    fitted
}

/// The soft `RLIMIT_NOFILE` of this process (`None`: unlimited or unknown).
fn soft_descriptor_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the struct it is given, which outlives the call.
    #[allow(unsafe_code)]
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
    (ok && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

/// Rejections (503 answers) written at the same time; beyond this a connection over the cap
/// is closed without an answer.
const MAX_REJECTING: usize = 64;
/// Time a rejection waits for the request head, and then for writing the answer and the
/// client's close.
const REJECT_LINGER: Duration = Duration::from_secs(1);
/// At most one "connection limit reached" warning per this interval.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// What a shutdown's drain did ([`serve_observed`]).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DrainReport {
    /// Requests in flight when the shutdown began (an open stream is one), plus any that began
    /// during the drain.
    pub in_flight: usize,
    /// Those that finished within the grace period.
    pub finished: usize,
    /// Those still running when the grace period ended, cut.
    pub cut: usize,
    /// From the shutdown to the last connection closed (or cut).
    pub elapsed: Duration,
}

/// The requests of every connection: how many are in flight, how many ever began.
#[derive(Debug, Default)]
struct Requests {
    in_flight: AtomicUsize,
    begun: AtomicUsize,
}

/// What a connection is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Activity {
    /// Idle since this instant.
    Idle(Instant),
    /// Reading a request head whose first byte arrived at this instant.
    Head(Instant),
    /// This many requests in flight (one for HTTP/1.1, whose requests take turns).
    Busy(usize),
}

/// What the accept loop and the connection's task share about one connection.
#[derive(Debug)]
struct Tracker {
    /// The server's count of requests, which this connection's add to.
    requests: Arc<Requests>,
    activity: Mutex<Activity>,
    /// Told to make room for a new connection.
    evicted: AtomicBool,
    /// Requests it has begun: an idle moment after one is a kept-alive connection between two
    /// requests, not one whose first request is still on its way.
    begun: AtomicUsize,
    /// Woken on every change of `activity` and on eviction.
    changed: Notify,
}

/// Why a connection's task stops serving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    /// Close now: nothing is in flight.
    Close(&'static str),
    /// Evicted while idle: close, but let hyper finish writing an answer it may still be
    /// flushing (for at most the header timeout).
    CloseWhenFlushed,
    /// Evicted with a request in flight: let it finish, then close.
    AfterRequest,
}

impl Tracker {
    fn new(requests: Arc<Requests>) -> Tracker {
        Tracker {
            requests,
            activity: Mutex::new(Activity::Idle(Instant::now())),
            evicted: AtomicBool::new(false),
            begun: AtomicUsize::new(0),
            changed: Notify::new(),
        }
    }

    fn activity(&self) -> MutexGuard<'_, Activity> {
        // Every critical section is one assignment: a poisoned lock holds a valid value.
        self.activity.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes arrived: an idle connection starts reading a head.
    fn received(&self) {
        let mut a = self.activity();
        if let Activity::Idle(_) = *a {
            *a = Activity::Head(Instant::now());
            drop(a);
            self.changed.notify_one();
        }
    }

    /// A request's head is complete: it is in flight.
    fn begin(&self) {
        self.begun.fetch_add(1, Ordering::SeqCst);
        let mut a = self.activity();
        *a = match *a {
            Activity::Busy(n) => Activity::Busy(n + 1),
            _ => Activity::Busy(1),
        };
        drop(a);
        self.changed.notify_one();
    }

    /// A request's answer is done (or abandoned).
    fn end(&self) {
        let mut a = self.activity();
        *a = match *a {
            Activity::Busy(n) if n > 1 => Activity::Busy(n - 1),
            _ => Activity::Idle(Instant::now()),
        };
        drop(a);
        self.changed.notify_one();
    }

    /// Resolves when the connection must stop being served: evicted, idle too long, or too
    /// slow with a request head.
    async fn expiry(&self, limits: ConnectionLimits) -> Expiry {
        loop {
            let activity = *self.activity();
            if self.evicted.load(Ordering::SeqCst) {
                return match activity {
                    Activity::Busy(_) => Expiry::AfterRequest,
                    Activity::Idle(_) => Expiry::CloseWhenFlushed,
                    Activity::Head(_) => Expiry::Close("evicted to make room for a new connection"),
                };
            }
            let deadline = match activity {
                // Nothing ever received: a silent client, given the header timeout (or the idle
                // one, when that is shorter).
                Activity::Idle(since)
                    if self.begun.load(Ordering::SeqCst) == 0
                        && limits.header_timeout < limits.idle_timeout =>
                {
                    Some((
                        since + limits.header_timeout,
                        "no request within the header timeout",
                    ))
                }
                Activity::Idle(since) => Some((since + limits.idle_timeout, "idle timeout")),
                Activity::Head(since) => Some((since + limits.header_timeout, "header timeout")),
                Activity::Busy(_) => None,
            };
            match deadline {
                None => self.changed.notified().await,
                Some((at, why)) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {
                            // Expired only if nothing changed meanwhile (the next turn of the
                            // loop re-reads the activity otherwise).
                            if *self.activity() == activity
                                && !self.evicted.load(Ordering::SeqCst)
                            {
                                return Expiry::Close(why);
                            }
                        }
                        () = self.changed.notified() => {}
                    }
                }
            }
        }
    }
}

/// Eviction rank: idle connections go first, the longest idle first; then connections
/// reading a head, the slowest first. Busy connections are never chosen.
fn eviction_rank(activity: Activity) -> Option<(u8, Instant)> {
    match activity {
        Activity::Idle(since) => Some((0, since)),
        Activity::Head(since) => Some((1, since)),
        Activity::Busy(_) => None,
    }
}

/// The open connections.
#[derive(Debug, Default)]
struct Registry {
    open: Mutex<HashMap<u64, Arc<Tracker>>>,
    next_id: AtomicU64,
    requests: Arc<Requests>,
}

/// The answer to a new connection.
enum Admission {
    /// Serve it (`evicted`: another connection was told to make room).
    Admitted {
        id: u64,
        tracker: Arc<Tracker>,
        evicted: bool,
    },
    /// At the cap and every connection is busy.
    Full,
}

impl Registry {
    fn open(&self) -> MutexGuard<'_, HashMap<u64, Arc<Tracker>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn admit(&self, max: usize) -> Admission {
        let mut open = self.open();
        let mut evicted = false;
        if open.len() >= max {
            let victim = open
                .iter()
                .filter_map(|(id, t)| eviction_rank(*t.activity()).map(|rank| (rank, *id)))
                .min()
                .map(|(_, id)| id);
            let Some(victim) = victim.and_then(|id| open.remove(&id)) else {
                return Admission::Full;
            };
            victim.evicted.store(true, Ordering::SeqCst);
            victim.changed.notify_one();
            evicted = true;
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let tracker = Arc::new(Tracker::new(Arc::clone(&self.requests)));
        open.insert(id, Arc::clone(&tracker));
        Admission::Admitted {
            id,
            tracker,
            evicted,
        }
    }

    fn remove(&self, id: u64) {
        self.open().remove(&id);
    }
}

/// Removes a connection from the registry (and from the open-connections gauge) when its
/// task ends (or is aborted).
struct Registered {
    registry: Arc<Registry>,
    id: u64,
    metrics: Arc<dyn ConnectionObserver>,
}

impl Registered {
    fn new(registry: &Arc<Registry>, id: u64, metrics: &Arc<dyn ConnectionObserver>) -> Registered {
        metrics.opened();
        Registered {
            registry: Arc::clone(registry),
            id,
            metrics: Arc::clone(metrics),
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.remove(self.id);
        self.metrics.closed();
    }
}

/// The socket, telling the tracker when bytes arrive.
struct TrackedIo {
    inner: TcpStream,
    tracker: Arc<Tracker>,
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.tracker.received();
        }
        polled
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Marks a request in flight until dropped (with the answer's body, or with the handler's
/// future when the client goes away first).
struct InFlight(Arc<Tracker>);

impl InFlight {
    fn new(tracker: &Arc<Tracker>) -> InFlight {
        tracker.requests.begun.fetch_add(1, Ordering::SeqCst);
        tracker.requests.in_flight.fetch_add(1, Ordering::SeqCst);
        tracker.begin();
        InFlight(Arc::clone(tracker))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.requests.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.end();
    }
}

/// An answer's body that keeps its request in flight until hyper is done with it.
struct TrackedBody {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The router as a hyper service, marking each request in flight and giving handlers the
/// client's address (`ConnectInfo<SocketAddr>`, as `axum::serve` does).
#[derive(Clone)]
struct TrackedService {
    app: Router,
    tracker: Arc<Tracker>,
    peer: SocketAddr,
}

impl hyper::service::Service<Request<Incoming>> for TrackedService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let in_flight = InFlight::new(&self.tracker);
        let app = self.app.clone();
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(ConnectInfo(self.peer));
        Box::pin(async move {
            let resp = match app.oneshot(req).await {
                Ok(resp) => resp,
                Err(never) => match never {},
            };
            Ok(resp.map(|inner| TrackedBody {
                inner,
                _in_flight: in_flight,
            }))
        })
    }
}

/// Serves one admitted connection until it ends, expires, or shutdown closes it.
async fn serve_connection(
    tcp: TcpStream,
    peer: SocketAddr,
    app: Router,
    tracker: Arc<Tracker>,
    limits: ConnectionLimits,
    mut stopping: watch::Receiver<bool>,
) {
    let io = TokioIo::new(TrackedIo {
        inner: tcp,
        tracker: Arc::clone(&tracker),
    });
    let service = TrackedService {
        app,
        tracker: Arc::clone(&tracker),
        peer,
    };
    let conn = hyper::server::conn::http1::Builder::new()
        // Head and idle limits are ours (hyper's header timer would also cut idle
        // keep-alive connections after the header timeout).
        .header_read_timeout(None)
        .serve_connection(io, service);
    tokio::pin!(conn);
    // Once set, hyper was told to close after the current exchange (keep-alive off): an idle
    // connection closes at once, one still writing an answer or serving a request closes when
    // done. `flush_deadline` bounds an evicted idle connection whose client does not read.
    let mut finishing = false;
    let mut flush_deadline: Option<Instant> = None;
    // Stopping with a request on its way (accepted, its head not read yet): when the stop
    // came and how many requests it had begun then; served before closing if it comes.
    let mut awaiting: Option<(Instant, usize)> = None;
    loop {
        tokio::select! {
            res = conn.as_mut() => {
                if let Err(e) = res {
                    tracing::debug!(error = %e, "client connection ended with an error");
                }
                return;
            }
            expiry = tracker.expiry(limits), if !finishing => match expiry {
                Expiry::Close(why) => {
                    tracing::debug!(why, "closing client connection");
                    return;
                }
                Expiry::CloseWhenFlushed => {
                    conn.as_mut().graceful_shutdown();
                    finishing = true;
                    flush_deadline = Some(Instant::now() + limits.header_timeout);
                }
                Expiry::AfterRequest => {
                    conn.as_mut().graceful_shutdown();
                    finishing = true;
                }
            },
            () = sleep_until_some(flush_deadline) => {
                tracing::debug!("closing an evicted client connection that does not read");
                return;
            }
            _ = stopping.changed(), if !finishing => {
                let activity = *tracker.activity();
                match activity {
                    Activity::Busy(_) => {
                        conn.as_mut().graceful_shutdown();
                        finishing = true;
                    }
                    // Kept alive between two requests: closed now (a client's pool opens
                    // another connection, which the successor accepts).
                    Activity::Idle(_) if tracker.begun.load(Ordering::SeqCst) > 0 => {
                        conn.as_mut().graceful_shutdown();
                        finishing = true;
                    }
                    // Accepted before the stop, its request on its way (a client writes it
                    // right after connecting) or arriving: the client sent it to this
                    // process, so it is answered (then closed) — if its first bytes come
                    // within a moment, and its head within the header timeout. A connection
                    // that stays silent (a preconnect) does not hold the drain.
                    Activity::Idle(_) | Activity::Head(_) => {
                        awaiting = Some((Instant::now(), tracker.begun.load(Ordering::SeqCst)));
                    }
                }
            }
            () = tokio::time::sleep(AWAIT_POLL), if awaiting.is_some() && !finishing => {
                // Begun (perhaps already answered): hyper closes after the exchange.
                if awaiting.is_some_and(|(_, begun)| tracker.begun.load(Ordering::SeqCst) > begun) {
                    conn.as_mut().graceful_shutdown();
                    finishing = true;
                } else if awaiting.is_some_and(|(stopped, _)| {
                    // Silent: a moment for its first bytes; arriving: the header timeout.
                    let wait = match *tracker.activity() {
                        Activity::Head(_) => limits.header_timeout,
                        Activity::Idle(_) | Activity::Busy(_) => {
                            FIRST_BYTES_GRACE.min(limits.header_timeout)
                        }
                    };
                    Instant::now() >= stopped + wait
                }) {
                    tracing::debug!("closing a connection whose request did not arrive before the drain");
                    return;
                }
            }
        }
    }
}

/// How often a stopping connection whose request is on its way looks whether it has arrived.
const AWAIT_POLL: Duration = Duration::from_millis(5);

/// How long a stopping server waits for the first bytes of a connection it accepted just
/// before the stop (its request is on its way), before closing it as silent.
const FIRST_BYTES_GRACE: Duration = Duration::from_secs(1);

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The body of the answer to a connection over the cap.
fn rejection_body(max: usize) -> String {
    serde_json::json!({"error": {
        "message": format!(
            "too many connections: this gateway serves at most {max} at once and all are busy; retry shortly"
        ),
        "type": "server_error",
        "code": "too_many_connections",
    }})
    .to_string()
}

/// Answers `503 too_many_connections` with `Connection: close`, then closes.
///
/// The answer waits for the request head (at most [`REJECT_LINGER`]): an HTTP client that
/// gets an answer before it has sent its request treats the connection as broken instead of
/// reading the answer.
async fn reject(mut tcp: TcpStream, max: usize) {
    let mut buf = [0u8; 1024];
    // The last bytes seen, to find the blank line that ends the head across reads.
    let mut tail: Vec<u8> = Vec::with_capacity(buf.len() + 3);
    let head = tokio::time::timeout(REJECT_LINGER, async {
        loop {
            let n = tcp.read(&mut buf).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            tail.extend_from_slice(&buf[..n]);
            if tail.windows(4).any(|w| w == b"\r\n\r\n") {
                return Ok(true);
            }
            let keep = tail.len().saturating_sub(3);
            tail.drain(..keep);
        }
    })
    .await;
    if matches!(head, Ok(Ok(false)) | Ok(Err(_))) {
        return; // The client closed (or broke) the connection: nobody to tell.
    }
    let body = rejection_body(max);
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REJECT_LINGER, async {
        tcp.write_all(answer.as_bytes()).await?;
        tcp.shutdown().await?;
        // Read what the client still sends until it closes: closing with unread bytes would
        // reset the connection, and the client could lose the answer.
        while tcp.read(&mut buf).await? > 0 {}
        Ok::<(), std::io::Error>(())
    })
    .await;
}

/// True for accept errors that concern one connection only (the loop just goes on).
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Serves `app` on `listener` with the gateway's connection handling — at most
/// `limits.max_connections` at once (idle ones make room, a 503 when all are busy), request
/// heads within `limits.header_timeout`, idle connections closed after `limits.idle_timeout`
/// — until `shutdown` resolves, then drains for at most `grace`. For the binary's other HTTP
/// servers (the dashboard), so no listener of ours can be held open by slow or idle clients.
///
/// # Errors
///
/// The accept loop's I/O error.
pub async fn serve_app(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
    limits: ConnectionLimits,
) -> std::io::Result<()> {
    serve_observed(listener, app, shutdown, grace, limits, Arc::new(Unobserved))
        .await
        .map(drop)
}

/// [`serve_app`], telling `metrics` of connections opened, closed and rejected, and saying
/// what the drain did.
///
/// # Errors
///
/// None today: accept errors are logged and retried (the signature leaves room for fatal
/// ones).
pub async fn serve_observed(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
    limits: ConnectionLimits,
    metrics: Arc<dyn ConnectionObserver>,
) -> std::io::Result<DrainReport> {
    let limits = within_descriptor_limit(limits);
    let registry = Arc::new(Registry::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let rejecting = Arc::new(AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    let mut last_warning: Option<Instant> = None;
    let mut rejected: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                // Out of file descriptors, most likely: wait for connections to close.
                tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        // Without TCP_NODELAY, Nagle's algorithm holds each small SSE chunk back until the
        // previous one is acknowledged, adding up to 40 ms (delayed ACK) per token.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        match registry.admit(limits.max_connections) {
            Admission::Admitted {
                id,
                tracker,
                evicted,
            } => {
                if evicted {
                    tracing::debug!("connection limit reached; closed an idle connection");
                }
                let registered = Registered::new(&registry, id, &metrics);
                let conn =
                    serve_connection(tcp, peer, app.clone(), tracker, limits, stop_rx.clone());
                tasks.spawn(async move {
                    let _registered = registered;
                    conn.await;
                });
            }
            Admission::Full => {
                metrics.rejected();
                rejected += 1;
                if last_warning.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        rejected,
                        "connection limit reached and every connection is busy; answering new connections 503"
                    );
                    last_warning = Some(Instant::now());
                    rejected = 0;
                }
                if rejecting.fetch_add(1, Ordering::SeqCst) < MAX_REJECTING {
                    let rejecting = Arc::clone(&rejecting);
                    let mut stopping = stop_rx.clone();
                    tasks.spawn(async move {
                        // A rejection holds no work: shutdown does not wait for it.
                        tokio::select! {
                            () = reject(tcp, limits.max_connections) => {}
                            _ = stopping.changed() => {}
                        }
                        rejecting.fetch_sub(1, Ordering::SeqCst);
                    });
                } else {
                    rejecting.fetch_sub(1, Ordering::SeqCst);
                    drop(tcp);
                }
            }
        }
    }

    // Stop accepting at once: a successor (`--replace`) may bind the port while we drain, or
    // (a passed socket) accept from it.
    drop(listener);
    let stopped_at = Instant::now();
    let requests = Arc::clone(&registry.requests);
    // Requests are counted from here: those in flight, and any that begin while draining (a
    // request whose head was complete as the stop came).
    let (in_flight, begun) = (
        requests.in_flight.load(Ordering::SeqCst),
        requests.begun.load(Ordering::SeqCst),
    );
    let _ = stop_tx.send(true);
    let drained =
        tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    let cut = if drained.is_err() {
        let cut = requests.in_flight.load(Ordering::SeqCst);
        tracing::warn!(
            ?grace,
            cut,
            "drain grace period over; closing remaining connections"
        );
        tasks.abort_all();
        cut
    } else {
        0
    };
    let in_flight = in_flight + requests.begun.load(Ordering::SeqCst).saturating_sub(begun);
    Ok(DrainReport {
        in_flight,
        finished: in_flight.saturating_sub(cut),
        cut,
        elapsed: stopped_at.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_connections_are_evicted_first_busy_ones_never() {
        let registry = Registry::default();
        let admitted = |a: Admission| match a {
            Admission::Admitted { tracker, .. } => tracker,
            Admission::Full => panic!("expected admission"),
        };
        let busy = admitted(registry.admit(3));
        busy.begin();
        let head = admitted(registry.admit(3));
        head.received();
        let idle = admitted(registry.admit(3));
        // At the cap: the idle one makes room.
        let fourth = admitted(registry.admit(3));
        assert!(idle.evicted.load(Ordering::SeqCst));
        assert!(!head.evicted.load(Ordering::SeqCst));
        // No idle connection left: the one that has been reading a head longest goes.
        fourth.received();
        let fifth = admitted(registry.admit(3));
        assert!(head.evicted.load(Ordering::SeqCst));
        assert!(!fourth.evicted.load(Ordering::SeqCst));
        assert!(!busy.evicted.load(Ordering::SeqCst));
        assert_eq!(registry.open().len(), 3);
        // Every connection busy: no room.
        fourth.begin();
        fifth.begin();
        assert!(matches!(registry.admit(3), Admission::Full));
        assert!(!busy.evicted.load(Ordering::SeqCst));
    }

    #[test]
    fn in_flight_marks_busy_until_dropped() {
        let t = Arc::new(Tracker::new(Arc::default()));
        let guard = InFlight::new(&t);
        assert_eq!(*t.activity(), Activity::Busy(1));
        drop(guard);
        assert!(matches!(*t.activity(), Activity::Idle(_)));
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_follows_the_activity() {
        let limits = ConnectionLimits::new(1, Duration::from_secs(2), Duration::from_secs(5));
        // A new connection that sends nothing: the header timeout, not the idle one.
        let t = Arc::new(Tracker::new(Arc::default()));
        let start = Instant::now();
        assert_eq!(
            t.expiry(limits).await,
            Expiry::Close("no request within the header timeout")
        );
        assert_eq!(start.elapsed(), Duration::from_secs(2));

        let t = Arc::new(Tracker::new(Arc::default()));
        t.received();
        let start = Instant::now();
        assert_eq!(t.expiry(limits).await, Expiry::Close("header timeout"));
        assert_eq!(start.elapsed(), Duration::from_secs(2));

        // Busy: no timeout at all, until the request ends; then the idle clock starts.
        let t = Arc::new(Tracker::new(Arc::default()));
        let in_flight = InFlight::new(&t);
        let waiting = tokio::spawn({
            let t = Arc::clone(&t);
            async move { t.expiry(limits).await }
        });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!waiting.is_finished());
        let ended = Instant::now();
        drop(in_flight);
        assert_eq!(waiting.await.unwrap(), Expiry::Close("idle timeout"));
        assert_eq!(ended.elapsed(), Duration::from_secs(5));

        // Evicted: a request in flight finishes first; an idle connection closes once hyper
        // has written what it may still hold; a connection still sending its head closes.
        let t = Arc::new(Tracker::new(Arc::default()));
        let in_flight = InFlight::new(&t);
        t.evicted.store(true, Ordering::SeqCst);
        assert_eq!(t.expiry(limits).await, Expiry::AfterRequest);
        drop(in_flight);
        assert_eq!(t.expiry(limits).await, Expiry::CloseWhenFlushed);
        t.received();
        assert!(matches!(t.expiry(limits).await, Expiry::Close(_)));
    }

    /// Serves `app` on a fresh loopback listener with `grace`; the returned sender stops it.
    async fn serving(
        app: Router,
        grace: Duration,
    ) -> (
        SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<std::io::Result<DrainReport>>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let served = tokio::spawn(serve_observed(
            listener,
            app,
            shutdown,
            grace,
            ConnectionLimits::default(),
            Arc::new(Unobserved),
        ));
        (addr, stop, served)
    }

    /// A route that says when it was entered, then answers after `wait`.
    fn slow_app(wait: Duration, entered: Arc<Notify>) -> Router {
        Router::new()
            .route(
                "/slow",
                axum::routing::get(move || async move {
                    entered.notify_one();
                    tokio::time::sleep(wait).await;
                    "done"
                }),
            )
            .route("/fast", axum::routing::get(|| async { "fast" }))
    }

    async fn send(tcp: &mut TcpStream, path: &str) {
        let head = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
        tcp.write_all(head.as_bytes()).await.unwrap();
    }

    /// Reads until the peer closes (bounded), lower-cased.
    async fn read_to_close(tcp: &mut TcpStream) -> String {
        let mut out = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut out))
            .await
            .expect("the server closed the connection")
            .unwrap();
        String::from_utf8_lossy(&out).to_lowercase()
    }

    #[tokio::test]
    async fn a_request_in_flight_at_shutdown_finishes_says_close_and_counts_as_drained() {
        let entered = Arc::new(Notify::new());
        let app = slow_app(Duration::from_millis(300), Arc::clone(&entered));
        let (addr, stop, served) = serving(app, Duration::from_secs(10)).await;

        // An idle keep-alive connection: answered once, then waiting.
        let mut idle = TcpStream::connect(addr).await.unwrap();
        send(&mut idle, "/fast").await;
        let mut buf = [0u8; 512];
        let n = idle.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).ends_with("fast"));

        let mut busy = TcpStream::connect(addr).await.unwrap();
        send(&mut busy, "/slow").await;
        entered.notified().await;
        stop.send(()).unwrap();

        // The idle one closes at once, long before the slow answer.
        let started = Instant::now();
        assert_eq!(read_to_close(&mut idle).await, "");
        assert!(started.elapsed() < Duration::from_millis(250));

        let answer = read_to_close(&mut busy).await;
        assert!(answer.starts_with("http/1.1 200"), "{answer}");
        assert!(answer.contains("connection: close"), "{answer}");
        assert!(answer.ends_with("done"), "{answer}");

        let report = served.await.unwrap().unwrap();
        assert_eq!(
            (report.in_flight, report.finished, report.cut),
            (1, 1, 0),
            "{report:?}"
        );
        assert!(report.elapsed >= Duration::from_millis(200), "{report:?}");
    }

    #[tokio::test]
    async fn a_connection_accepted_before_the_stop_is_answered_when_its_request_comes_after() {
        let app = slow_app(Duration::ZERO, Arc::new(Notify::new()));
        let (addr, stop, served) = serving(app, Duration::from_secs(10)).await;
        // One with nothing sent yet, one halfway through its head: both accepted by now.
        let mut fresh = TcpStream::connect(addr).await.unwrap();
        let mut halfway = TcpStream::connect(addr).await.unwrap();
        halfway.write_all(b"GET /fast HTTP/1.1\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send(()).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        send(&mut fresh, "/fast").await;
        halfway.write_all(b"host: x\r\n\r\n").await.unwrap();
        let answered = Instant::now();
        for tcp in [&mut fresh, &mut halfway] {
            let answer = read_to_close(tcp).await;
            assert!(answer.starts_with("http/1.1 200"), "{answer}");
            assert!(answer.ends_with("fast"), "{answer}");
        }
        assert!(
            answered.elapsed() < Duration::from_secs(2),
            "closed after the answer, not at a timeout"
        );
        let report = served.await.unwrap().unwrap();
        assert_eq!((report.finished, report.cut), (2, 0), "{report:?}");
    }

    #[tokio::test]
    async fn a_request_longer_than_the_grace_is_cut_and_counted() {
        let entered = Arc::new(Notify::new());
        let app = slow_app(Duration::from_secs(30), Arc::clone(&entered));
        let (addr, stop, served) = serving(app, Duration::from_millis(200)).await;
        let mut busy = TcpStream::connect(addr).await.unwrap();
        send(&mut busy, "/slow").await;
        entered.notified().await;
        stop.send(()).unwrap();
        let report = served.await.unwrap().unwrap();
        assert_eq!(
            (report.in_flight, report.finished, report.cut),
            (1, 0, 1),
            "{report:?}"
        );
        assert!(
            (Duration::from_millis(200)..Duration::from_secs(5)).contains(&report.elapsed),
            "{report:?}"
        );
        // Cut: closed without an answer.
        assert_eq!(read_to_close(&mut busy).await, "");
    }

    #[tokio::test]
    async fn a_stop_with_nothing_in_flight_reports_nothing() {
        let app = slow_app(Duration::ZERO, Arc::new(Notify::new()));
        let (_, stop, served) = serving(app, Duration::from_secs(10)).await;
        stop.send(()).unwrap();
        let report = served.await.unwrap().unwrap();
        assert_eq!((report.in_flight, report.finished, report.cut), (0, 0, 0));
    }

    #[test]
    fn the_rejection_is_an_openai_style_error() {
        let v: serde_json::Value = serde_json::from_str(&rejection_body(7)).unwrap();
        assert_eq!(v["error"]["code"], "too_many_connections");
        assert_eq!(v["error"]["type"], "server_error");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("at most 7")
        );
    }
}
