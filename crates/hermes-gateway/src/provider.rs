//! The client for the OpenAI-compatible provider (`POST <base_url>/chat/completions`).
//!
//! Words:
//! * *attempt* — one HTTP request upstream. A request is retried (with exponential backoff, or
//!   the provider's `Retry-After` when shorter than the cap) on 429, on 5xx and on connection
//!   failures, at most `max_retries` times, and only before any byte of the answer has been
//!   passed on: once a stream has started, a failure ends it.
//! * *stream* — an SSE answer (`stream: true`), read as [`StreamEvent`]s as they arrive.
//! * *delta* — the text in one stream chunk (`choices[0].delta.content`).
//!
//! Timeouts: `connect_timeout` for the connection, `request_timeout` for a whole non-streaming
//! answer (or a stream's headers), `idle_timeout` between two pieces of a stream.

use std::pin::Pin;
use std::sync::{Arc, Once};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reqwest::StatusCode;
use serde_json::Value;

use crate::error::Error;
use crate::settings::ProviderSettings;

/// Longest backoff between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Longest upstream error body we read (and quote).
const MAX_ERROR_BODY: usize = 2000;

/// A configured provider client. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Provider {
    client: reqwest::Client,
    settings: Arc<ProviderSettings>,
}

/// One event of a streamed answer.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    /// The event's `data:` payload exactly as the provider sent it (a JSON chunk).
    pub data: String,
    /// The text it adds to the answer, if any.
    pub delta: Option<String>,
}

/// A streamed answer being read.
pub struct ChatStream {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    decoder: SseDecoder,
    pending: std::collections::VecDeque<String>,
    idle_timeout: Duration,
    base_url: String,
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

impl Provider {
    /// Builds the HTTP client for `settings`.
    ///
    /// # Errors
    ///
    /// [`Error::HttpClient`] when TLS or the client cannot be set up.
    pub fn new(settings: ProviderSettings) -> Result<Provider, Error> {
        install_crypto_provider();
        if let Some(w) = &settings.withheld_key {
            tracing::warn!(
                variable = %w.var,
                base_url = %settings.base_url,
                "provider key withheld: {}",
                w.reason
            );
        }
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .build()
            .map_err(|source| Error::HttpClient { source })?;
        Ok(Provider {
            client,
            settings: Arc::new(settings),
        })
    }

    /// The settings this client uses.
    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    /// Sends `body` (an OpenAI chat request; `model` and `stream` are overwritten) and returns
    /// the whole JSON answer.
    ///
    /// # Errors
    ///
    /// The provider variants of [`Error`]: auth, unreachable, timeout, status, protocol.
    pub async fn complete(&self, mut body: Value) -> Result<Value, Error> {
        self.prepare(&mut body, false);
        let resp = self.send(&body, false).await?;
        let bytes = resp.bytes().await.map_err(|e| self.transport_error(e))?;
        serde_json::from_slice(&bytes).map_err(|e| Error::ProviderProtocol {
            base_url: self.settings.base_url.clone(),
            reason: format!("answer is not JSON: {e}"),
        })
    }

    /// Sends `body` with `stream: true` and returns the stream once the provider has answered
    /// with a success status (so every error before the first byte is a plain [`Error`]).
    ///
    /// # Errors
    ///
    /// As [`Provider::complete`].
    pub async fn stream(&self, mut body: Value) -> Result<ChatStream, Error> {
        self.prepare(&mut body, true);
        let resp = self.send(&body, true).await?;
        Ok(ChatStream {
            body: Box::pin(resp.bytes_stream()),
            decoder: SseDecoder::default(),
            pending: Default::default(),
            idle_timeout: self.settings.idle_timeout,
            base_url: self.settings.base_url.clone(),
            done: false,
        })
    }

    fn prepare(&self, body: &mut Value, stream: bool) {
        if let Some(obj) = body.as_object_mut() {
            obj.insert("model".into(), Value::String(self.settings.model.clone()));
            obj.insert("stream".into(), Value::Bool(stream));
        }
    }

    fn transport_error(&self, e: reqwest::Error) -> Error {
        let base_url = self.settings.base_url.clone();
        if e.is_timeout() {
            Error::ProviderTimeout {
                base_url,
                after: self.settings.request_timeout,
            }
        } else {
            Error::ProviderTransport {
                base_url,
                source: e,
            }
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
        self.settings
            .retry_base_delay
            .saturating_mul(factor)
            .min(MAX_BACKOFF)
    }

    /// The retry loop. Invariant: it returns only a success response or a final error; every
    /// retry happens before the caller has seen anything.
    async fn send(&self, body: &Value, stream: bool) -> Result<reqwest::Response, Error> {
        let s = &self.settings;
        let url = format!("{}/chat/completions", s.base_url.trim_end_matches('/'));
        let mut attempt: u32 = 0;
        loop {
            let mut req = self.client.post(&url).json(body);
            if let Some(key) = s.api_key.as_deref().filter(|k| !k.is_empty()) {
                req = req.bearer_auth(key);
            }
            if !stream {
                // Covers the body too: a non-streaming answer must arrive whole in time.
                req = req.timeout(s.request_timeout);
            }
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
                    let retryable =
                        status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
                    if retryable && retries_left {
                        let delay = retry_after(&resp)
                            .map_or_else(|| self.backoff(attempt), |d| d.min(MAX_BACKOFF));
                        tracing::warn!(%status, attempt, ?delay, "provider error; retrying");
                        drop(resp);
                        tokio::time::sleep(delay).await;
                        attempt += 1;
                        continue;
                    }
                    let message = error_message(resp).await;
                    return Err(if matches!(status.as_u16(), 401 | 403) {
                        Error::ProviderAuth {
                            base_url: s.base_url.clone(),
                            status: status.as_u16(),
                            message,
                            withheld_key: s.withheld_key.as_ref().map(|w| w.var.clone()),
                        }
                    } else {
                        Error::ProviderStatus {
                            base_url: s.base_url.clone(),
                            status: status.as_u16(),
                            attempts: attempt + 1,
                            message,
                        }
                    });
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
                    let delay = self.backoff(attempt);
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
                Err(e) => return Err(self.transport_error(e)),
            }
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

/// The provider's error message: `error.message` from an OpenAI-style body, else the body's
/// text (truncated), else the status's reason.
async fn error_message(resp: reqwest::Response) -> String {
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        if let Some(m) = v.pointer("/error/message").and_then(Value::as_str) {
            return m.to_string();
        }
        if let Some(m) = v.get("error").and_then(Value::as_str) {
            return m.to_string();
        }
    }
    let text = text.trim();
    if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no message")
            .to_string()
    } else {
        text.chars().take(MAX_ERROR_BODY).collect()
    }
}

impl ChatStream {
    /// The next event, `None` once the provider sent `[DONE]` or closed the stream.
    ///
    /// # Errors
    ///
    /// [`Error::ProviderTimeout`] when the provider is silent longer than the idle timeout,
    /// [`Error::ProviderTransport`] when the connection breaks.
    pub async fn next_event(&mut self) -> Option<Result<StreamEvent, Error>> {
        loop {
            if let Some(data) = self.pending.pop_front() {
                if data.trim() == "[DONE]" {
                    self.done = true;
                    self.pending.clear();
                    return None;
                }
                let delta = serde_json::from_str::<Value>(&data).ok().and_then(|v| {
                    v.pointer("/choices/0/delta/content")
                        .and_then(Value::as_str)
                        .map(String::from)
                });
                return Some(Ok(StreamEvent { data, delta }));
            }
            if self.done {
                return None;
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
        self.done && self.pending.is_empty()
    }
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
    fn backoff_doubles_and_caps() {
        let mut s = ProviderSettings::new("http://127.0.0.1:1", "m");
        s.retry_base_delay = Duration::from_millis(100);
        let p = Provider::new(s).unwrap();
        assert_eq!(p.backoff(0), Duration::from_millis(100));
        assert_eq!(p.backoff(3), Duration::from_millis(800));
        assert_eq!(p.backoff(40), MAX_BACKOFF);
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
