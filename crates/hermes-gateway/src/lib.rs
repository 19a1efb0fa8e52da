//! `hermes-gateway`: one profile's agent, served over an OpenAI-compatible HTTP API.
//!
//! A *gateway* serves one *profile* (a directory with `SOUL.md`, `config.yaml`, `.env` and
//! `state.db`). It listens on `API_SERVER_HOST:API_SERVER_PORT`, answers
//! `POST /v1/chat/completions` (streamed or not) by calling the profile's provider with
//! `SOUL.md` as the first system message, and keeps conversations named by
//! `X-Hermes-Session-Id` in `state.db`.
//!
//! The caller (the `hermes` binary) reads the profile ([`source::SettingsSource::read`]: the
//! settings, resolved once by [`GatewaySettings::resolve`], with the prompt source and the
//! live-reload source beside them), supplies a [`StateRecorder`] that writes `gateway_state.json`, and a shutdown future built from its
//! signals; [`run`] does the rest:
//!
//! ```text
//! validate -> lock gateway.lock -> record(starting) -> open state.db -> bind (or adopt)
//!   -> READY=1 (sd_notify) -> record(running) -> serve ... shutdown -> drain
//!   -> release the lock -> record(stopped, reason) -> exited(code, reason)
//!                                   [a startup failure: record(startup_failed, reason)]
//! ```
//!
//! Under a supervisor that owns the API socket ([`run_with`]): the gateway *adopts* the
//! listening socket passed to it (named `api`, or on the bind address; `hermes_listen`)
//! instead of binding, so connections arriving while no gateway serves wait in its backlog.
//! A restart is a *hand-over* ([`settings::GatewaySettings::handover_from`]): the new gateway
//! serves beside its predecessor, which holds `gateway.lock` until it has drained, and takes
//! the lock when it lets go ([`lock::Successor`]). A stopping gateway stops accepting at once
//! (the socket stays open in the supervisor and the successor), lets its requests in flight
//! (SSE streams included) finish for up to `drain_timeout`, cuts the rest, logs both counts and
//! adds them to `gateway_drains.json` ([`hermes_home::drains`]), which `/metrics` reports.
//!
//! With the API server off ([`api_server`]: neither `API_SERVER_ENABLED` nor a key), `run`
//! takes the lock and records `running` with `platforms.api_server` `disabled` and the reason,
//! opens no port, and waits for the shutdown.
//!
//! `starting` is recorded only once the lock is held, as the original does: a start refused
//! because another gateway holds the profile (`AlreadyRunning`, a `--replace` that timed
//! out) records nothing, so the live gateway's record is never overwritten. A configuration
//! error (found before the lock is taken, so that nothing is created) is recorded only when
//! no gateway holds the lock.
//!
//! With [`GatewaySettings::multiplex`] (the default profile's gateway, the switch on), the
//! one gateway serves every profile of the volume: named ones at `/p/<profile>/...`, each with
//! its own state (`multiplex`).
//!
//! The public API is what other crates use, and no more: [`run`] and [`chat_once`], the
//! lifecycle types, [`Error`] and [`ApiError`], and three modules of its own — [`source`]
//! (reading a profile, [`Profile`], reading it again), [`prompt`] (system prompts), [`lock`]
//! (single instance, `--replace`) — beside three it re-exports: [`settings`] and
//! [`api_server`] (`hermes_gateway_settings`: what a gateway runs with, which `doctor` and the
//! dashboard resolve by the same code) and [`readiness`] (`hermes_home`: the original's
//! readiness checks, which the dashboard's status rolls up). The rest is the server's own:
//! `server` (routes, auth, errors), `live` (reload while running), `assemble` (a request's
//! messages with the session history), `notify` (sd_notify), `lifecycle` (phases, exit
//! reasons), `chat`, `error`. Beside it: `hermes-http` (accept loop, connection cap, header and
//! idle timeouts), `hermes-sessions` (the store) and `hermes-provider` (the upstream client,
//! its retries and SSE).

mod access;
mod api_error;
mod assemble;
mod chat;
mod completions;
mod error;
mod lifecycle;
mod live;
pub mod lock;
mod metrics;
mod multiplex;
mod notify;
mod probes;
pub mod prompt;
mod server;
pub mod source;
mod state_file;

use std::future::IntoFuture;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub use api_error::ApiError;
pub use chat::{ChatAnswer, chat_once};
pub use error::Error;
pub use lifecycle::{ExitReason, NoopRecorder, Phase, ShutdownRequest, StateRecorder};
pub use server::{AppState, router, serve, serve_with_limits};
// The settings a gateway runs with are resolved by `hermes_gateway_settings` (which `doctor`
// and the dashboard use without linking the server); the readiness document's checks are
// hermes-home's (the dashboard rolls them up too).
pub use hermes_gateway_settings::{
    GatewaySettings, KnownProvider, ProviderKey, api_server, choose_provider_key, default_port,
    known_provider, known_providers, resolve as settings,
};
pub use hermes_home::readiness;
pub use source::Profile;
pub use state_file::StateFileRecorder;

pub use hermes_http::DrainReport;
/// Sockets passed by a supervisor (`LISTEN_FDS`), for [`run_with`].
pub use hermes_listen as listen;
pub use hermes_listen::Inherited;

use crate::api_server::ApiServer;
use crate::lock::{Acquired, GatewayLock, LockRecord, Successor};

/// Runs the gateway for `profile` until `shutdown` resolves, reporting phases to `recorder`.
///
/// `profile` is a [`Profile`] read from its files (reloaded when they change), or
/// [`GatewaySettings`] built in code. `shutdown` may resolve to `()` (a plain stop) or to a [`ShutdownRequest`].
///
/// Returns `Ok(ExitReason::ConfigError)` for unusable settings (exit 78, nothing started),
/// `Ok(Stopped)` / `Ok(RestartRequested)` after a drained shutdown (exit 0 / 75).
///
/// # Errors
///
/// Startup failures other than configuration (lock held, port in use, unusable `state.db`):
/// `startup_failed` is recorded with the error's message first. The caller exits 1 (or
/// [`Error::exit_code`]) so the supervisor retries with backoff.
pub async fn run<F>(
    profile: impl Into<Profile>,
    recorder: &dyn StateRecorder,
    shutdown: F,
) -> Result<ExitReason, Error>
where
    F: IntoFuture + Send + 'static,
    F::IntoFuture: Send,
    F::Output: Into<ShutdownRequest>,
{
    run_with(profile, recorder, shutdown, Inherited::none()).await
}

/// As [`run`], serving on the API socket in `sockets` when the supervisor passed one (named
/// [`listen::API_SOCKET_NAME`], else listening on the bind address) instead of binding.
///
/// # Errors
///
/// Those of [`run`]; a socket named `api` that is not a listening TCP socket is
/// [`Error::Serve`].
pub async fn run_with<F>(
    profile: impl Into<Profile>,
    recorder: &dyn StateRecorder,
    shutdown: F,
    mut sockets: Inherited,
) -> Result<ExitReason, Error>
where
    F: IntoFuture + Send + 'static,
    F::IntoFuture: Send,
    F::Output: Into<ShutdownRequest>,
{
    let profile = profile.into();
    let settings = &profile.settings;
    if let Err(e) = settings.validate().map_err(Error::from) {
        record_unlocked_failure(settings, recorder, &e);
        return Ok(ExitReason::ConfigError(e));
    }
    let lock = match take_lock(settings).await {
        Ok(lock) => lock,
        Err(e) => {
            // Refused because another gateway holds the profile: its record stays as it is.
            if !matches!(
                e,
                Error::AlreadyRunning { .. } | Error::TakeoverTimedOut { .. }
            ) {
                record_unlocked_failure(settings, recorder, &e);
            }
            return Err(e);
        }
    };
    recorder.record(Phase::Starting, None);
    if let ApiServer::Off { reason } = &settings.api_server {
        // No port: a socket passed anyway is not held open for nothing.
        drop(sockets);
        return Ok(serve_nothing(settings, recorder, lock, reason, shutdown).await);
    }
    let (listener, state) = match open(&profile, recorder, &mut sockets).await {
        Ok(parts) => parts,
        Err(e) => {
            recorder.record(Phase::StartupFailed, Some(&hermes_errors::one_line(&e)));
            lock.release().await;
            return Err(e);
        }
    };
    // Passed sockets this gateway does not serve close now, not at exit.
    drop(sockets);

    if let Some(socket) = &settings.notify_socket
        && let Err(e) = notify::notify(socket, "READY=1")
    {
        tracing::warn!(error = %e, socket, "could not send READY=1 to the notify socket");
    }
    recorder.record(Phase::Running, None);
    tracing::info!(profile = settings.profile, "gateway running");
    prompt::prepare_in_background();
    if settings.multiplex {
        tracing::info!(
            "serving every profile (multiplexing): `default` at /v1/..., each named profile at \
             /p/<profile>/v1/... with its own API_SERVER_KEY"
        );
    }

    let requested = Arc::new(Mutex::new(ShutdownRequest::Stop));
    let seen = Arc::clone(&requested);
    let shutdown = shutdown.into_future();
    let trigger = async move {
        let req: ShutdownRequest = shutdown.await.into();
        *seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = req;
    };
    let served = serve_with_limits(
        listener,
        state,
        trigger,
        settings.drain_timeout,
        settings.connection_limits,
    )
    .await;
    let request = *requested
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(socket) = &settings.notify_socket {
        let _ = notify::notify(socket, "STOPPING=1");
    }
    if let Ok(report) = &served {
        drained(settings, report).await;
    }
    // The listener is already closed (serve consumed it), so releasing the lock last means
    // a `--replace` successor never finds the port still taken.
    lock.release().await;

    match served {
        Ok(_) => {
            let (reason, exit) = stopped_by(request);
            recorder.record(Phase::Stopped, Some(reason));
            recorder.exited(exit.exit_code(), reason);
            Ok(exit)
        }
        Err(source) => {
            let e = Error::Serve {
                addr: settings.bind_addr(),
                source,
            };
            let reason = hermes_errors::one_line(&e);
            recorder.record(Phase::Stopped, Some(&reason));
            recorder.exited(e.exit_code(), &reason);
            Err(e)
        }
    }
}

/// The API server is off: hold the profile (its lock and its record) without a port, saying
/// why, until asked to stop — as the original's gateway runs on with no platform enabled.
async fn serve_nothing<F>(
    settings: &GatewaySettings,
    recorder: &dyn StateRecorder,
    lock: ProfileLock,
    reason: &str,
    shutdown: F,
) -> ExitReason
where
    F: IntoFuture,
    F::Output: Into<ShutdownRequest>,
{
    recorder.api_server("disabled", Some(reason));
    if let Some(socket) = &settings.notify_socket
        && let Err(e) = notify::notify(socket, "READY=1")
    {
        tracing::warn!(error = %e, socket, "could not send READY=1 to the notify socket");
    }
    recorder.record(Phase::Running, None);
    tracing::info!(profile = settings.profile, "{reason}");
    let request: ShutdownRequest = shutdown.into_future().await.into();
    if let Some(socket) = &settings.notify_socket {
        let _ = notify::notify(socket, "STOPPING=1");
    }
    lock.release().await;
    let (why, exit) = stopped_by(request);
    recorder.record(Phase::Stopped, Some(why));
    recorder.exited(exit.exit_code(), why);
    exit
}

/// The recorded reason and the exit of a requested shutdown.
fn stopped_by(request: ShutdownRequest) -> (&'static str, ExitReason) {
    match request {
        ShutdownRequest::Restart => ("restart requested", ExitReason::RestartRequested),
        ShutdownRequest::Stop => ("stopped", ExitReason::Stopped),
    }
}

/// Records `starting` then `startup_failed` for a failure met without the lock, unless a
/// gateway holds the profile's lock: the record is then that gateway's, not ours to change.
fn record_unlocked_failure(settings: &GatewaySettings, recorder: &dyn StateRecorder, e: &Error) {
    if lock::is_held(&settings.lock_path) {
        tracing::debug!("another gateway holds the lock: its state record is left as it is");
        return;
    }
    recorder.record(Phase::Starting, None);
    recorder.record(Phase::StartupFailed, Some(&hermes_errors::one_line(e)));
}

/// The profile's `gateway.lock`: held, or (a hand-over) being waited for in the background
/// while the predecessor drains.
enum ProfileLock {
    Held(GatewayLock),
    Following {
        /// Set to stop waiting (this gateway stops before its predecessor let go).
        cancel: Arc<AtomicBool>,
        waiting: tokio::task::JoinHandle<Result<Option<GatewayLock>, Error>>,
    },
}

impl ProfileLock {
    /// Starts waiting for the predecessor's lock in the background.
    fn follow(successor: Successor) -> ProfileLock {
        let predecessor = successor.predecessor();
        tracing::info!(
            predecessor,
            "handed over from pid {predecessor}: serving now, taking gateway.lock when it has drained"
        );
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        // Waiting is flock polling: off the async workers.
        let waiting = tokio::task::spawn_blocking(move || {
            let taken = successor.wait(&flag)?;
            if taken.is_some() {
                tracing::info!(predecessor, "took gateway.lock from pid {predecessor}");
            }
            Ok(taken)
        });
        ProfileLock::Following { cancel, waiting }
    }

    /// Releases the lock (removing `gateway.pid`), or stops waiting for it.
    async fn release(self) {
        match self {
            ProfileLock::Held(lock) => drop(lock),
            ProfileLock::Following { cancel, waiting } => {
                cancel.store(true, Ordering::SeqCst);
                match waiting.await {
                    Ok(Ok(lock)) => drop(lock),
                    Ok(Err(e)) => tracing::warn!(
                        "could not take gateway.lock from the predecessor: {}",
                        hermes_errors::one_line(&e)
                    ),
                    Err(e) => tracing::warn!(error = %e, "the wait for gateway.lock failed"),
                }
            }
        }
    }
}

/// Takes `gateway.lock` (waiting for a replaced gateway with `--replace`; following the
/// predecessor of a hand-over).
async fn take_lock(settings: &GatewaySettings) -> Result<ProfileLock, Error> {
    let record = LockRecord::for_this_process(settings.argv.clone(), &settings.home);
    let (path, profile) = (settings.lock_path.clone(), settings.profile.clone());
    let replace = settings.replace.then_some(settings.replace_timeout);
    let predecessor = settings
        .handover_from
        .and_then(|pid| i32::try_from(pid).ok());
    // Waiting for a replaced gateway blocks (flock polling): keep it off the async workers.
    let acquired = tokio::task::spawn_blocking(move || match predecessor {
        Some(pid) => GatewayLock::acquire_after(&path, &profile, &record, replace, pid),
        None => GatewayLock::acquire(&path, &profile, &record, replace).map(Acquired::Held),
    })
    .await
    .map_err(|e| Error::Task {
        reason: e.to_string(),
    })??;
    Ok(match acquired {
        Acquired::Held(lock) => ProfileLock::Held(lock),
        Acquired::AfterPredecessor(successor) => ProfileLock::follow(successor),
    })
}

/// Logs what the drain did and adds it to `gateway_drains.json` (a failure to write it is
/// logged: the gateway has stopped either way).
async fn drained(settings: &GatewaySettings, report: &DrainReport) {
    let seconds = report.elapsed.as_secs_f64();
    tracing::info!(
        drained = report.finished,
        seconds,
        "drained {} in {seconds:.1} s",
        requests(report.finished)
    );
    if report.cut > 0 {
        tracing::warn!(
            cut = report.cut,
            "cut {} still running after the drain timeout ({}s)",
            requests(report.cut),
            settings.drain_timeout.as_secs()
        );
    }
    // Nothing was in flight: nothing to count, and no file on the volume for it.
    if report.in_flight == 0 {
        return;
    }
    let drain = hermes_home::drains::Drain::now(
        std::process::id(),
        report.finished as u64,
        report.cut as u64,
        report.elapsed,
    );
    let dir = settings.home.clone();
    // A read-modify-write under a file lock: off the async workers.
    let written =
        tokio::task::spawn_blocking(move || hermes_home::drains::record(&dir, drain)).await;
    match written {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(
            "could not record the drain: {}",
            hermes_errors::one_line(&e)
        ),
        Err(e) => tracing::warn!(error = %e, "could not record the drain"),
    }
}

/// The API listener the supervisor passed in `sockets`, ready for tokio: the one named
/// [`listen::API_SOCKET_NAME`], else the one on the bind address (a literal one, not port 0).
fn adopt(
    settings: &GatewaySettings,
    sockets: &mut Inherited,
) -> Result<Option<tokio::net::TcpListener>, Error> {
    if !sockets.is_inherited() {
        return Ok(None);
    }
    let addr = settings.bind_addr();
    let serve_error = |source| Error::Serve {
        addr: addr.clone(),
        source,
    };
    let on_addr = addr
        .parse::<std::net::SocketAddr>()
        .ok()
        .filter(|a| a.port() != 0);
    let taken = sockets
        .take_listener(listen::API_SOCKET_NAME, on_addr)
        .map_err(|e| serve_error(std::io::Error::other(e)))?;
    let Some(listener) = taken else {
        tracing::warn!(
            "the supervisor passed sockets ({}) but none named `{}` or on {addr}: binding it",
            sockets.names().join(", "),
            listen::API_SOCKET_NAME
        );
        return Ok(None);
    };
    listener.set_nonblocking(true).map_err(serve_error)?;
    tokio::net::TcpListener::from_std(listener)
        .map(Some)
        .map_err(serve_error)
}

/// Store, bind (or adopt the supervisor's socket): what must succeed, once the lock is held,
/// before the gateway reports `running`.
async fn open(
    profile: &Profile,
    recorder: &dyn StateRecorder,
    sockets: &mut Inherited,
) -> Result<(tokio::net::TcpListener, AppState), Error> {
    let settings = &profile.settings;
    let state = AppState::for_profile(profile)?;
    let addr = settings.bind_addr();
    if let Some(listener) = adopt(settings, sockets)? {
        if let Ok(local) = listener.local_addr() {
            tracing::info!("adopted the supervisor's socket for {local}");
            recorder.listening(local);
        }
        recorder.api_server("connected", None);
        return Ok((listener, state));
    }
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .map_err(|source| {
            if source.kind() == std::io::ErrorKind::AddrInUse {
                Error::PortInUse {
                    profile: settings.profile.clone(),
                    host: settings.host.clone(),
                    port: settings.port,
                }
            } else {
                Error::Serve {
                    addr: addr.clone(),
                    source,
                }
            }
        })?;
    if let Ok(local) = listener.local_addr() {
        recorder.listening(local);
    }
    recorder.api_server("connected", None);
    Ok((listener, state))
}

/// `1 request`, `3 requests`.
fn requests(n: usize) -> String {
    if n == 1 {
        "1 request".into()
    } else {
        format!("{n} requests")
    }
}
