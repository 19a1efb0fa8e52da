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
//!
//! This module is the client and its chain; one endpoint's request is `request` (its address,
//! headers and body for each API), its retries and key rotation `retry`, a streamed answer
//! being read `stream`.

use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::anthropic;
use crate::credentials::KeyPool;
use crate::error::Error;
use crate::settings::{ApiKind, ProviderSettings};

mod request;
mod retry;
mod stream;

use request::{prepare, upstream_body};
use retry::transport_error;

pub use stream::{ChatStream, StreamEvent};

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

/// Installs ring as the process's TLS crypto provider, once, unless one is installed already.
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
    pub async fn complete(&self, body: Value) -> Result<Value, Error> {
        self.over_chain(body, |ep, body| self.complete_on(ep, body))
            .await
    }

    /// Sends `body` with `stream: true` and returns the stream once an endpoint has answered
    /// with a success status (so every error before the first byte is a plain [`Error`], and
    /// the fallbacks are tried before it).
    ///
    /// # Errors
    ///
    /// As [`Provider::complete`].
    pub async fn stream(&self, body: Value) -> Result<ChatStream, Error> {
        self.over_chain(body, |ep, body| self.stream_on(ep, body))
            .await
    }

    /// Sends `body` with `send` to each endpoint of the chain in turn, from where
    /// [`Provider::first_endpoint`] says, until one answers: the primary, then each fallback
    /// while the failure is one a fallback can cure ([`Provider::failed`]).
    ///
    /// `send` borrows the endpoint for the whole call (one lifetime, not a closure generic over
    /// every lifetime: the server needs the request's future to be `Send`).
    async fn over_chain<'a, T, F>(
        &'a self,
        mut body: Value,
        send: impl Fn(&'a Endpoint, Value) -> F,
    ) -> Result<T, Error>
    where
        F: Future<Output = Result<T, Error>>,
    {
        let mut tried = Vec::new();
        let first = self.first_endpoint(&mut tried);
        for (i, ep) in self.chain.iter().enumerate().skip(first) {
            match send(ep, body_for(&mut body, i, self.chain.len())).await {
                Ok(answer) => {
                    announce_success(ep, i);
                    return Ok(answer);
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
        let translator = (s.api == ApiKind::AnthropicMessages)
            .then(|| anthropic::StreamTranslator::new(&s.model, include_usage));
        Ok(ChatStream::new(
            Box::pin(resp.bytes_stream()),
            s.idle_timeout,
            s.base_url.clone(),
            translator,
        ))
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::WithheldKey;
    use hermes_test_support::logs::Lines;

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
            reason: anthropic::Refusal::Messages,
        }));
        assert!(falls_back(&Error::ProviderTimeout {
            base_url: "x".into(),
            after: Duration::from_secs(1)
        }));
    }

    #[test]
    fn a_withheld_key_is_logged_once_by_name() {
        // As the gateway's key routing withholds `OPENAI_API_KEY` from a local address.
        let mut s = ProviderSettings::new("http://127.0.0.1:9/v1", "m");
        s.withheld_key = Some(WithheldKey::new(
            "OPENAI_API_KEY",
            "`OPENAI_API_KEY` is openai's key and is only sent over https to openai.com; set `model.api_key` in config.yaml to that endpoint's own key",
        ));
        let capture = Lines::of_this_thread();
        Provider::new(s).unwrap();
        let lines = capture.all();
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert!(line.starts_with("WARN"), "{line}");
        assert!(line.contains("variable=OPENAI_API_KEY"), "{line}");
        assert!(line.contains("model.api_key"), "{line}");

        // Nothing withheld: nothing said.
        let quiet = Lines::of_this_thread();
        Provider::new(ProviderSettings::new("http://127.0.0.1:9/v1", "m")).unwrap();
        assert_eq!(quiet.all(), Vec::<String>::new());
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
