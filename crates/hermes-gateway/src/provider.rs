//! The client for the provider: an endpoint speaking OpenAI chat completions
//! (`POST <base_url>/chat/completions`) or Anthropic's Messages API (`POST
//! <base_url>/v1/messages`, translated by [`crate::anthropic`]), then the endpoints of the
//! `fallback_providers` chain.
//!
//! Words:
//! * *attempt* — one HTTP request upstream. A request is retried (with exponential backoff, or
//!   the provider's `Retry-After` when shorter than the cap) on 429, on 5xx (and Anthropic's
//!   overloaded 529) and on connection failures, at most `max_retries` times, and only before
//!   any byte of the answer has been passed on: once a stream has started, a failure ends it.
//! * *pool* — the endpoint's keys ([`crate::credentials`]). A request takes one by the pool's
//!   strategy; a 401 or 403 (not an Anthropic 403, which is about the account's entitlement,
//!   not the key), or a 402, cools that key down and the request goes on at once with the
//!   next available key; a 429 is retried once on the same key, and a second 429 (or a 429 on
//!   a key that was already cooling down) cools it down and rotates the same way — the
//!   original's `_recover_with_credential_pool`. Rotations are not retries.
//! * *chain* — the primary endpoint, then the fallbacks. When an endpoint fails for good (its
//!   retries and keys used up) with anything but a refusal of the request itself (400, 413,
//!   422), the next endpoint gets the request; only before a stream has started. Each request
//!   starts again with the primary (the original makes fallback turn-scoped the same way),
//!   except for [`PRIMARY_COOLDOWN`] after the primary fell back with a 429 or a 402, when
//!   requests start with the first fallback (the original's `_rate_limited_until`).
//!   The log says each switch, and when every endpoint failed the client's error names what
//!   was tried.
//! * *stream* — an SSE answer (`stream: true`), read as [`StreamEvent`]s as they arrive.
//! * *delta* — the text in one stream chunk (`choices[0].delta.content`).
//!
//! Timeouts: `connect_timeout` for the connection, `request_timeout` for a whole non-streaming
//! answer (or a stream's headers), `idle_timeout` between two pieces of a stream.

use std::pin::Pin;
use std::sync::{Arc, Once};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use crate::anthropic;
use crate::credentials::{Failure, KeyPool, Pick};
use crate::error::Error;
use crate::settings::{ApiKind, ProviderSettings};

/// Longest backoff between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest upstream error body we read (and quote).
const MAX_ERROR_BODY: usize = 2000;
/// Anthropic's "overloaded" status: retried like a 5xx.
const OVERLOADED: u16 = 529;

/// A configured provider client: the primary endpoint and its fallbacks. Cheap to clone
/// (clones share the pools' state).
#[derive(Debug, Clone)]
pub struct Provider {
    client: reqwest::Client,
    settings: Arc<ProviderSettings>,
    chain: Arc<Vec<Endpoint>>,
    /// Until when requests skip the primary and start with the first fallback: set when the
    /// primary fell back after a rate limit or a billing refusal ([`PRIMARY_COOLDOWN`]).
    primary_cooldown: Arc<std::sync::Mutex<Option<Instant>>>,
}

/// How long requests go straight to the fallbacks after the primary fell back with a 429 or a
/// 402 (the original's 60 s `_rate_limited_until`, here for the whole gateway rather than one
/// conversation).
pub const PRIMARY_COOLDOWN: Duration = Duration::from_secs(60);

/// One endpoint of the chain with its live key pool.
#[derive(Debug)]
struct Endpoint {
    settings: ProviderSettings,
    pool: KeyPool,
}

/// One event of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    /// The event's `data:` payload: a `chat.completion.chunk` JSON document (exactly as an
    /// OpenAI-compatible provider sent it, or translated from Anthropic's events).
    pub data: String,
    /// The text it adds to the answer, if any.
    pub delta: Option<String>,
}

/// A streamed answer being read.
pub struct ChatStream {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    decoder: SseDecoder,
    /// Events' data not yet handed out (raw, as the provider sent them).
    pending: std::collections::VecDeque<String>,
    /// Chunks translated from an Anthropic stream, not yet handed out.
    ready: std::collections::VecDeque<String>,
    idle_timeout: Duration,
    base_url: String,
    /// Set for an Anthropic stream: its events become chunks here.
    translator: Option<anthropic::StreamTranslator>,
    done: bool,
}

impl std::fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStream")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

pub(crate) fn install_crypto_provider() {
    // reqwest is built without a bundled crypto provider (its default, aws-lc, needs cmake);
    // ring is installed as the process default once, unless the program chose one already.
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

/// Says, once per client, what an endpoint's settings leave out: a key withheld from its
/// address, stored logins it cannot use.
fn log_endpoint(s: &ProviderSettings) {
    if let Some(w) = &s.withheld_key {
        tracing::warn!(
            variable = %w.var,
            base_url = %s.base_url,
            "provider key withheld: {}",
            w.reason
        );
    }
    for what in &s.unusable {
        tracing::warn!(endpoint = %s.describe(), "credential not used: {what}");
    }
}

/// Whether the next endpoint of the chain may get a request that failed with `e`: anything
/// but a refusal of the request itself, which another provider would refuse too.
fn falls_back(e: &Error) -> bool {
    match e {
        Error::ProviderStatus { status, .. } => !matches!(status, 400 | 413 | 422),
        Error::UnsupportedRequest { .. } => false,
        _ => true,
    }
}

/// A rate limit or a billing refusal (429, 402): the primary is left alone for a while.
fn is_rate_limit(e: &Error) -> bool {
    matches!(
        e,
        Error::ProviderStatus {
            status: 402 | 429,
            ..
        }
    )
}

/// Where an endpoint sends requests.
fn endpoint_url(s: &ProviderSettings) -> String {
    let base = s.base_url.trim_end_matches('/');
    match s.api {
        ApiKind::ChatCompletions => format!("{base}/chat/completions"),
        // The Messages API path carries its own version: a base URL given with `/v1` (as
        // OpenAI-style URLs are) must not get a second one.
        ApiKind::AnthropicMessages => {
            format!("{}/v1/messages", base.trim_end_matches("/v1"))
        }
    }
}

impl Provider {
    /// Builds the HTTP client for `settings` (and its fallbacks).
    ///
    /// # Errors
    ///
    /// [`Error::HttpClient`] when TLS or the client cannot be set up.
    pub fn new(settings: ProviderSettings) -> Result<Provider, Error> {
        install_crypto_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|source| Error::HttpClient { source })?;
        let chain = std::iter::once(&settings)
            .chain(settings.fallbacks.iter())
            .map(|s| {
                log_endpoint(s);
                let mut s = s.clone();
                s.fallbacks.clear();
                Endpoint {
                    pool: KeyPool::new(s.credentials.clone(), s.strategy, s.pool_store.clone()),
                    settings: s,
                }
            })
            .collect();
        Ok(Provider {
            client,
            settings: Arc::new(settings),
            chain: Arc::new(chain),
            primary_cooldown: Arc::default(),
        })
    }

    /// The settings this client uses (the primary endpoint's, with its fallbacks).
    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// Sends `body` (an OpenAI chat request; `model` and `stream` are overwritten) and returns
    /// the whole JSON answer, from the primary or, when it fails, from a fallback.
    ///
    /// # Errors
    ///
    /// The provider variants of [`Error`]: auth, unreachable, timeout, status, protocol;
    /// [`Error::ProviderFallbacksFailed`] when fallbacks were tried too.
    pub async fn complete(&self, mut body: Value) -> Result<Value, Error> {
        let mut tried = Vec::new();
        let first = self.first_endpoint(&mut tried);
        for (i, ep) in self.chain.iter().enumerate().skip(first) {
            match self
                .complete_on(ep, body_for(&mut body, i, self.chain.len()))
                .await
            {
                Ok(answer) => {
                    announce_success(ep, i);
                    return Ok(answer);
                }
                Err(e) => self.failed(ep, i, e, &mut tried)?,
            }
        }
        Err(no_endpoint(&self.settings))
    }

    /// Sends `body` with `stream: true` and returns the stream once an endpoint has answered
    /// with a success status (so every error before the first byte is a plain [`Error`], and
    /// the fallbacks are tried before it).
    ///
    /// # Errors
    ///
    /// As [`Provider::complete`].
    pub async fn stream(&self, mut body: Value) -> Result<ChatStream, Error> {
        let mut tried = Vec::new();
        let first = self.first_endpoint(&mut tried);
        for (i, ep) in self.chain.iter().enumerate().skip(first) {
            match self
                .stream_on(ep, body_for(&mut body, i, self.chain.len()))
                .await
            {
                Ok(stream) => {
                    announce_success(ep, i);
                    return Ok(stream);
                }
                Err(e) => self.failed(ep, i, e, &mut tried)?,
            }
        }
        Err(no_endpoint(&self.settings))
    }

    /// Where a request starts: the first fallback while the primary cools down after a rate
    /// limit (noted in `tried`), else the primary.
    fn first_endpoint(&self, tried: &mut Vec<String>) -> usize {
        if self.chain.len() < 2 {
            return 0;
        }
        let mut until = self
            .primary_cooldown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match *until {
            Some(t) if t > Instant::now() => {
                tried.push(format!(
                    "{}: skipped, rate limited or out of credit less than {}s ago",
                    self.settings.describe(),
                    PRIMARY_COOLDOWN.as_secs()
                ));
                1
            }
            Some(_) => {
                *until = None;
                0
            }
            None => 0,
        }
    }

    /// After endpoint `i` failed with `e`: `Ok` to go on with the next one (logged, and noted
    /// in `tried`), or the error for the client — `e` itself when no fallback was tried.
    fn failed(
        &self,
        ep: &Endpoint,
        i: usize,
        e: Error,
        tried: &mut Vec<String>,
    ) -> Result<(), Error> {
        let what = format!(
            "{}: {}",
            ep.settings.describe(),
            hermes_errors::one_line(&e)
        );
        let next = self.chain.get(i + 1).filter(|_| falls_back(&e));
        match next {
            Some(next) => {
                tracing::warn!(
                    failed = %ep.settings.describe(),
                    next = %next.settings.describe(),
                    "provider failed ({}); trying the next of fallback_providers",
                    hermes_errors::one_line(&e)
                );
                if i == 0 && is_rate_limit(&e) {
                    *self
                        .primary_cooldown
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(Instant::now() + PRIMARY_COOLDOWN);
                }
                tried.push(what);
                Ok(())
            }
            None if tried.is_empty() => Err(e),
            None => {
                tried.push(what);
                tracing::warn!("every provider failed: {}", tried.join("; "));
                Err(Error::ProviderFallbacksFailed {
                    tried: tried.join("; "),
                    source: Box::new(e),
                })
            }
        }
    }

    async fn complete_on(&self, ep: &Endpoint, mut body: Value) -> Result<Value, Error> {
        let s = &ep.settings;
        prepare(s, &mut body, false);
        let body = upstream_body(s, body)?;
        let resp = self.send(ep, &body, false).await?;
        let bytes = resp.bytes().await.map_err(|e| transport_error(s, e))?;
        let answer: Value =
            serde_json::from_slice(&bytes).map_err(|e| Error::ProviderProtocol {
                base_url: s.base_url.clone(),
                reason: format!("answer is not JSON: {e}"),
            })?;
        Ok(match s.api {
            ApiKind::ChatCompletions => answer,
            ApiKind::AnthropicMessages => anthropic::to_chat_completion(&answer),
        })
    }

    async fn stream_on(&self, ep: &Endpoint, mut body: Value) -> Result<ChatStream, Error> {
        let s = &ep.settings;
        prepare(s, &mut body, true);
        let include_usage = body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let body = upstream_body(s, body)?;
        let resp = self.send(ep, &body, true).await?;
        Ok(ChatStream {
            body: Box::pin(resp.bytes_stream()),
            decoder: SseDecoder::default(),
            pending: Default::default(),
            ready: Default::default(),
            idle_timeout: s.idle_timeout,
            base_url: s.base_url.clone(),
            translator: (s.api == ApiKind::AnthropicMessages)
                .then(|| anthropic::StreamTranslator::new(&s.model, include_usage)),
            done: false,
        })
    }

    /// One request on `pick`'s key (or the endpoint's single key when it has no pool).
    fn request(
        &self,
        s: &ProviderSettings,
        pick: Option<&Pick>,
        body: &Value,
        stream: bool,
    ) -> reqwest::RequestBuilder {
        let mut req = self.client.post(endpoint_url(s)).json(body);
        let key = pick
            .map(|p| p.key.as_str())
            .or(s.api_key.as_deref())
            .filter(|k| !k.is_empty());
        req = match (s.api, key) {
            (ApiKind::ChatCompletions, Some(key)) => req.bearer_auth(key),
            (ApiKind::AnthropicMessages, Some(key)) => req.header("x-api-key", key),
            (_, None) => req,
        };
        if s.api == ApiKind::AnthropicMessages {
            req = req.header("anthropic-version", anthropic::ANTHROPIC_VERSION);
        }
        if !stream {
            // Covers the body too: a non-streaming answer must arrive whole in time.
            req = req.timeout(s.request_timeout);
        }
        req
    }

    /// The retry loop of one endpoint, with its key rotation. Invariant: it returns only a
    /// success response or a final error; every retry happens before the caller has seen
    /// anything.
    async fn send(
        &self,
        ep: &Endpoint,
        body: &Value,
        stream: bool,
    ) -> Result<reqwest::Response, Error> {
        let s = &ep.settings;
        let mut pick = ep.pool.select(SystemTime::now());
        // Keys this request has used and given up on.
        let mut tried: Vec<usize> = Vec::new();
        // The key whose first 429 was retried.
        let mut retried_429: Option<usize> = None;
        let mut attempt: u32 = 0;
        loop {
            let req = self.request(s, pick.as_ref(), body, stream);
            let result = match tokio::time::timeout(s.request_timeout, req.send()).await {
                Ok(r) => r,
                Err(_) => {
                    return Err(Error::ProviderTimeout {
                        base_url: s.base_url.clone(),
                        after: s.request_timeout,
                    });
                }
            };
            let retries_left = attempt < s.max_retries;
            match result {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status();
                    let code = status.as_u16();
                    let delay = retry_after(&resp);
                    if let Some(current) = pick.clone()
                        && let Some(rotation) = pool_verdict(s, &current, code, retried_429)
                    {
                        match rotation {
                            Verdict::RetrySame => retried_429 = Some(current.index),
                            Verdict::Rotate => {
                                let (message, reason) = error_details(resp).await;
                                let failure = Failure {
                                    status: code,
                                    reason: reason.clone(),
                                    message: Some(message.clone()),
                                    reset_at: delay.map(|d| SystemTime::now() + d),
                                };
                                let now = SystemTime::now();
                                ep.pool.mark_exhausted(current.index, &failure, now);
                                tried.push(current.index);
                                if let Some(next) = ep.pool.rotate(now, &tried) {
                                    log_rotation(ep, &current, &next, code);
                                    pick = Some(next);
                                    continue;
                                }
                                if !(is_retryable(code) && retries_left) {
                                    return Err(status_error(s, code, attempt, message));
                                }
                                let d = delay
                                    .map_or_else(|| backoff(s, attempt), |d| d.min(MAX_BACKOFF));
                                tracing::warn!(%status, attempt, delay = ?d, "provider error; retrying");
                                tokio::time::sleep(d).await;
                                attempt += 1;
                                continue;
                            }
                        }
                    }
                    if is_retryable(code) && retries_left {
                        let delay =
                            delay.map_or_else(|| backoff(s, attempt), |d| d.min(MAX_BACKOFF));
                        tracing::warn!(%status, attempt, ?delay, "provider error; retrying");
                        drop(resp);
                        tokio::time::sleep(delay).await;
                        attempt += 1;
                        continue;
                    }
                    let (message, _) = error_details(resp).await;
                    return Err(status_error(s, code, attempt, message));
                }
                Err(e) if e.is_timeout() => {
                    return Err(Error::ProviderTimeout {
                        base_url: s.base_url.clone(),
                        after: s.request_timeout,
                    });
                }
                // A refused connection, or a pooled keep-alive connection the provider had
                // already closed: nothing reached the client yet, so another attempt is safe.
                Err(e) if (e.is_connect() || e.is_request()) && retries_left => {
                    let delay = backoff(s, attempt);
                    tracing::warn!(error = %e, attempt, ?delay, "provider request failed; retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(e) if e.is_connect() => {
                    return Err(Error::ProviderUnreachable {
                        base_url: s.base_url.clone(),
                        source: e,
                    });
                }
                Err(e) => return Err(transport_error(s, e)),
            }
        }
    }
}

/// The wait before retry `attempt + 1`: the base delay doubled per attempt, capped.
fn backoff(s: &ProviderSettings, attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
    s.retry_base_delay.saturating_mul(factor).min(MAX_BACKOFF)
}

/// The request body for endpoint `i` of `n`: a copy while another endpoint may still need
/// it, the body itself for the last (so a gateway without fallbacks copies nothing).
fn body_for(body: &mut Value, i: usize, n: usize) -> Value {
    if i + 1 < n {
        body.clone()
    } else {
        std::mem::take(body)
    }
}

/// What a pool does about an error status on its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// A first 429 on this key: retry it once (as a normal retry).
    RetrySame,
    /// Cool the key down and go on with another.
    Rotate,
}

/// The pool's verdict on `code` for the key `pick` (`None`: not the pool's business).
fn pool_verdict(
    s: &ProviderSettings,
    pick: &Pick,
    code: u16,
    retried_429: Option<usize>,
) -> Option<Verdict> {
    match code {
        401 | 402 => Some(Verdict::Rotate),
        // Anthropic's 403 says the account lacks an entitlement: another key of the same
        // account would not help, and the key is not at fault (the original's rule).
        403 if s.api == ApiKind::AnthropicMessages => None,
        403 => Some(Verdict::Rotate),
        429 if pick.pre_exhausted || retried_429 == Some(pick.index) => Some(Verdict::Rotate),
        429 => Some(Verdict::RetrySame),
        _ => None,
    }
}

fn log_rotation(ep: &Endpoint, from: &Pick, to: &Pick, code: u16) {
    let name = |p: &Pick| {
        ep.pool
            .key(p.index)
            .map(|k| k.describe())
            .unwrap_or_default()
    };
    tracing::warn!(
        endpoint = %ep.settings.describe(),
        status = code,
        "credential {} failed; rotating to {}",
        name(from),
        name(to)
    );
}

fn announce_success(ep: &Endpoint, i: usize) {
    if i > 0 {
        tracing::info!(endpoint = %ep.settings.describe(), "answered by fallback #{i}");
    }
}

fn no_endpoint(s: &ProviderSettings) -> Error {
    Error::ProviderProtocol {
        base_url: s.base_url.clone(),
        reason: "no endpoint to send the request to".into(),
    }
}

fn is_retryable(code: u16) -> bool {
    code == 429 || code == OVERLOADED || (500..600).contains(&code)
}

fn status_error(s: &ProviderSettings, code: u16, attempt: u32, message: String) -> Error {
    if matches!(code, 401 | 403) {
        Error::ProviderAuth {
            base_url: s.base_url.clone(),
            status: code,
            message,
            withheld_key: s.withheld_key.as_ref().map(|w| w.var.clone()),
        }
    } else {
        Error::ProviderStatus {
            base_url: s.base_url.clone(),
            status: code,
            attempts: attempt + 1,
            message,
        }
    }
}

fn prepare(s: &ProviderSettings, body: &mut Value, stream: bool) {
    if let Some(obj) = body.as_object_mut() {
        obj.insert("model".into(), Value::String(s.model.clone()));
        obj.insert("stream".into(), Value::Bool(stream));
    }
}

/// The body sent upstream: the client's for chat completions, translated for Anthropic.
fn upstream_body(s: &ProviderSettings, body: Value) -> Result<Value, Error> {
    match s.api {
        ApiKind::ChatCompletions => Ok(body),
        ApiKind::AnthropicMessages => {
            anthropic::to_messages_request(&body).map_err(|reason| Error::UnsupportedRequest {
                endpoint: s.describe(),
                reason,
            })
        }
    }
}

fn transport_error(s: &ProviderSettings, e: reqwest::Error) -> Error {
    let base_url = s.base_url.clone();
    if e.is_timeout() {
        Error::ProviderTimeout {
            base_url,
            after: s.request_timeout,
        }
    } else {
        Error::ProviderTransport {
            base_url,
            source: e,
        }
    }
}

fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    let v = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?;
    let secs: f64 = v.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// The provider's error message — `error.message` from an OpenAI- or Anthropic-style body,
/// else the body's text (truncated), else the status's reason — and its error code or type
/// (`insufficient_quota`, `rate_limit_error`), if any.
async fn error_details(resp: reqwest::Response) -> (String, Option<String>) {
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        let reason = ["/error/code", "/error/type"]
            .iter()
            .find_map(|p| v.pointer(p).and_then(Value::as_str))
            .map(str::to_string);
        if let Some(m) = anthropic::error_message(&v) {
            return (m, reason);
        }
    }
    let text = text.trim();
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no message")
            .to_string()
    } else {
        text.chars().take(MAX_ERROR_BODY).collect()
    };
    (message, None)
}

impl ChatStream {
    /// The next event, `None` once the provider sent `[DONE]` (or, for Anthropic,
    /// `message_stop`) or closed the stream.
    ///
    /// # Errors
    ///
    /// [`Error::ProviderTimeout`] when the provider is silent longer than the idle timeout,
    /// [`Error::ProviderTransport`] when the connection breaks, [`Error::ProviderProtocol`]
    /// when an Anthropic stream reports an error.
    pub async fn next_event(&mut self) -> Option<Result<StreamEvent, Error>> {
        loop {
            if let Some(chunk) = self.ready.pop_front() {
                return Some(Ok(chunk_event(chunk)));
            }
            if let Some(data) = self.pending.pop_front() {
                let Some(t) = &mut self.translator else {
                    if data.trim() == "[DONE]" {
                        self.done = true;
                        self.pending.clear();
                        return None;
                    }
                    return Some(Ok(chunk_event(data)));
                };
                let chunks = t.push(&data);
                if t.failed() {
                    self.done = true;
                    self.pending.clear();
                    return Some(Err(stream_error(&self.base_url, &chunks)));
                }
                self.ready.extend(chunks);
                continue;
            }
            if self.done {
                // What an Anthropic stream's end still owes (idempotent: nothing the second
                // time).
                match self.translator.as_mut().map(|t| t.finish()) {
                    Some(owed) if !owed.is_empty() => {
                        self.ready.extend(owed);
                        continue;
                    }
                    _ => return None,
                }
            }
            match tokio::time::timeout(self.idle_timeout, self.body.next()).await {
                Err(_) => {
                    self.done = true;
                    return Some(Err(Error::ProviderTimeout {
                        base_url: self.base_url.clone(),
                        after: self.idle_timeout,
                    }));
                }
                Ok(None) => {
                    self.done = true;
                    self.pending.extend(self.decoder.finish());
                }
                Ok(Some(Err(source))) => {
                    self.done = true;
                    return Some(Err(Error::ProviderTransport {
                        base_url: self.base_url.clone(),
                        source,
                    }));
                }
                Ok(Some(Ok(bytes))) => self.pending.extend(self.decoder.push(&bytes)),
            }
        }
    }

    /// True once the provider has sent `[DONE]` (a complete answer).
    pub fn finished(&self) -> bool {
        self.done && self.pending.is_empty() && self.ready.is_empty()
    }
}

/// The error an Anthropic stream's `error` event becomes (its translation is an OpenAI error
/// object among `chunks`).
fn stream_error(base_url: &str, chunks: &[String]) -> Error {
    let message = chunks
        .iter()
        .find_map(|c| {
            serde_json::from_str::<Value>(c)
                .ok()
                .and_then(|v| anthropic::error_message(&v))
        })
        .unwrap_or_else(|| "an error event".into());
    Error::ProviderProtocol {
        base_url: base_url.to_string(),
        reason: format!("the stream ended with an error: {message}"),
    }
}

fn chunk_event(data: String) -> StreamEvent {
    let delta = serde_json::from_str::<Value>(&data).ok().and_then(|v| {
        v.pointer("/choices/0/delta/content")
            .and_then(Value::as_str)
            .map(String::from)
    });
    StreamEvent { data, delta }
}

/// Incremental `text/event-stream` decoder: bytes in, complete events' `data` out.
///
/// Follows the SSE rules that matter here: lines end in `\n`, `\r\n` or `\r`; `data:` lines of
/// one event are joined with `\n`; a blank line ends the event; comments (`:`) and other
/// fields are ignored.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    data: Option<String>,
}

impl SseDecoder {
    /// Feeds bytes; returns the data of every event completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n' || b == b'\r') {
            // A lone trailing '\r' may be the first half of "\r\n": wait for more bytes.
            if self.buf[pos] == b'\r' && pos + 1 == self.buf.len() {
                break;
            }
            let skip = if self.buf[pos] == b'\r' && self.buf.get(pos + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
            let line: Vec<u8> = self.buf.drain(..pos + skip).take(pos).collect();
            self.line(&String::from_utf8_lossy(&line), &mut out);
        }
        out
    }

    /// Ends the input: an event not closed by a blank line is still delivered.
    pub fn finish(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            let line = String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_string();
            self.line(&line, &mut out);
        }
        if let Some(d) = self.data.take() {
            out.push(d);
        }
        out
    }

    fn line(&mut self, line: &str, out: &mut Vec<String>) {
        if line.is_empty() {
            if let Some(d) = self.data.take() {
                out.push(d);
            }
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_events_split_anywhere() {
        let input = b"data: {\"a\":1}\n\n: comment\ndata: x\r\ndata: y\r\n\r\ndata: [DONE]\n\n";
        for split in 0..input.len() {
            let mut d = SseDecoder::default();
            let mut got = d.push(&input[..split]);
            got.extend(d.push(&input[split..]));
            got.extend(d.finish());
            assert_eq!(got, vec!["{\"a\":1}", "x\ny", "[DONE]"], "split at {split}");
        }
    }

    #[test]
    fn unterminated_last_event_is_delivered_on_finish() {
        let mut d = SseDecoder::default();
        assert!(d.push(b"data: last").is_empty());
        assert_eq!(d.finish(), vec!["last"]);
    }

    #[test]
    fn the_pool_rotates_on_401_402_and_a_second_429_but_not_on_anthropics_403() {
        let chat = ProviderSettings::new("https://api.example/v1", "m");
        let mut messages = chat.clone();
        messages.api = ApiKind::AnthropicMessages;
        let pick = |pre_exhausted: bool| Pick {
            index: 2,
            key: "k".into(),
            pre_exhausted,
        };
        let v = |s: &ProviderSettings, code: u16, pre: bool, retried: Option<usize>| {
            pool_verdict(s, &pick(pre), code, retried)
        };
        for code in [401, 402, 403] {
            assert_eq!(v(&chat, code, false, None), Some(Verdict::Rotate), "{code}");
        }
        assert_eq!(v(&messages, 403, false, None), None);
        assert_eq!(v(&messages, 401, false, None), Some(Verdict::Rotate));
        assert_eq!(v(&chat, 429, false, None), Some(Verdict::RetrySame));
        assert_eq!(v(&chat, 429, false, Some(0)), Some(Verdict::RetrySame));
        assert_eq!(v(&chat, 429, false, Some(2)), Some(Verdict::Rotate));
        assert_eq!(v(&chat, 429, true, None), Some(Verdict::Rotate));
        for code in [400, 404, 500, 529] {
            assert_eq!(v(&chat, code, false, None), None, "{code}");
        }
        assert!(is_retryable(529) && is_retryable(503) && is_retryable(429));
        assert!(!is_retryable(402) && !is_retryable(401));
    }

    #[test]
    fn each_api_has_its_address() {
        let mut s = ProviderSettings::new("https://api.anthropic.com/", "m");
        s.api = ApiKind::AnthropicMessages;
        assert_eq!(endpoint_url(&s), "https://api.anthropic.com/v1/messages");
        s.base_url = "https://proxy.example/anthropic/v1".into();
        assert_eq!(
            endpoint_url(&s),
            "https://proxy.example/anthropic/v1/messages"
        );
        s.api = ApiKind::ChatCompletions;
        s.base_url = "http://127.0.0.1:8080/v1/".into();
        assert_eq!(
            endpoint_url(&s),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
    }

    #[test]
    fn only_a_refusal_of_the_request_itself_stays_on_the_primary() {
        let status = |status| Error::ProviderStatus {
            base_url: "x".into(),
            status,
            attempts: 1,
            message: String::new(),
        };
        for code in [400, 413, 422] {
            assert!(!falls_back(&status(code)), "{code}");
        }
        for code in [402, 404, 429, 500, 503, 529] {
            assert!(falls_back(&status(code)), "{code}");
        }
        assert!(!falls_back(&Error::UnsupportedRequest {
            endpoint: "e".into(),
            reason: "r".into()
        }));
        assert!(falls_back(&Error::ProviderTimeout {
            base_url: "x".into(),
            after: Duration::from_secs(1)
        }));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let mut s = ProviderSettings::new("http://127.0.0.1:1", "m");
        s.retry_base_delay = Duration::from_millis(100);
        assert_eq!(backoff(&s, 0), Duration::from_millis(100));
        assert_eq!(backoff(&s, 3), Duration::from_millis(800));
        assert_eq!(backoff(&s, 40), MAX_BACKOFF);
    }

    /// A `tracing` subscriber that keeps each event as one line: `LEVEL field=value ...`.
    #[derive(Clone, Default)]
    struct Lines(Arc<std::sync::Mutex<Vec<String>>>);

    struct LineVisitor(String);

    impl tracing::field::Visit for LineVisitor {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }

    impl tracing::Subscriber for Lines {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut v = LineVisitor(event.metadata().level().to_string());
            event.record(&mut v);
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(v.0);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    #[test]
    fn a_withheld_key_is_logged_once_by_name_never_by_value() {
        let env: std::collections::BTreeMap<&str, &str> =
            [("OPENAI_API_KEY", "sk-secret-value")].into();
        let get = |k: &str| env.get(k).copied();
        let key = crate::settings::choose_provider_key(None, "http://127.0.0.1:9/v1", None, &get);
        let mut s = ProviderSettings::new("http://127.0.0.1:9/v1", "m");
        s.api_key = key.key;
        s.withheld_key = key.withheld;
        let lines = Lines::default();
        tracing::subscriber::with_default(lines.clone(), || Provider::new(s).unwrap());
        let lines = lines.0.lock().unwrap().clone();
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert!(line.starts_with("WARN"), "{line}");
        assert!(line.contains("variable=OPENAI_API_KEY"), "{line}");
        assert!(line.contains("model.api_key"), "{line}");
        assert!(!line.contains("sk-secret-value"), "{line}");

        // Nothing withheld: nothing said.
        let quiet = Lines::default();
        tracing::subscriber::with_default(quiet.clone(), || {
            Provider::new(ProviderSettings::new("http://127.0.0.1:9/v1", "m")).unwrap()
        });
        assert!(quiet.0.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn unreachable_provider_is_a_typed_error() {
        // Bind then drop a listener to get a port nobody listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut s = ProviderSettings::new(format!("http://127.0.0.1:{port}/v1"), "m");
        s.max_retries = 1;
        s.retry_base_delay = Duration::from_millis(10);
        let p = Provider::new(s).unwrap();
        let err = p
            .complete(serde_json::json!({"messages": []}))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::ProviderUnreachable { .. }), "{err:?}");
    }
}
