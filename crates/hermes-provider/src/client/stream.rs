//! A streamed answer being read: SSE events off the connection ([`crate::sse`]), as
//! [`StreamEvent`]s, an Anthropic stream translated on the way
//! ([`crate::anthropic::StreamTranslator`]); the idle timeout between two pieces.

use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use serde_json::Value;

use crate::anthropic;
use crate::error::Error;
use crate::sse::SseDecoder;

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
    pending: VecDeque<String>,
    /// Chunks translated from an Anthropic stream, not yet handed out.
    ready: VecDeque<String>,
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

impl ChatStream {
    /// The stream of the answer `body`, from the endpoint at `base_url`; `translator` set
    /// for an Anthropic stream.
    pub(super) fn new(
        body: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
        idle_timeout: Duration,
        base_url: String,
        translator: Option<anthropic::StreamTranslator>,
    ) -> ChatStream {
        ChatStream {
            body,
            decoder: SseDecoder::default(),
            pending: VecDeque::new(),
            ready: VecDeque::new(),
            idle_timeout,
            base_url,
            translator,
            done: false,
        }
    }

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
