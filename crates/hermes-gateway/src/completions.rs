//! `POST /v1/chat/completions`: validate the request, assemble the conversation (the
//! session's system prompt, the session's history, the new messages), ask the provider, and answer as
//! one JSON document or relay the provider's stream as server-sent events, storing the turn
//! in the session.
//!
//! The provider call is timed ([`UpstreamCall`]) and reported, with the session and how a
//! stream ended, to the request's access-log [`Exchange`]. Streams honour
//! `stream_options.include_usage` ([`usage`]).

mod usage;

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::access::{Exchange, UpstreamCall};
use crate::api_error::{ApiError, invalid, not_stored};
use crate::error::Error;
use crate::live::Snapshot;
use crate::metrics::{StreamEnd, Tokens};
use crate::server::AppState;
use hermes_provider::ChatStream;
use hermes_sessions::{SESSION_HEADER, TurnMeta, validate_session_id};

use crate::assemble::assemble;
use usage::UsageFilter;

/// Events buffered between the provider reader and a slow client.
const STREAM_BUFFER: usize = 64;

/// One SSE event carrying `data`; a multi-line payload gets one `data:` line per line, as
/// the format requires.
fn sse_event(data: &str) -> Bytes {
    let mut out = String::with_capacity(data.len() + 8);
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// A chat request that follows the API: the body (without `messages`, which are assembled
/// with the soul and history before they go upstream), the client's messages, whether it
/// streams, and the session it continues.
#[derive(Debug)]
struct ChatRequest {
    body: Value,
    messages: Vec<Value>,
    stream: bool,
    session: Option<String>,
}

/// Validates a request body and its session header; every refusal is a 400 saying why.
fn parse_request(body: &[u8], headers: &HeaderMap) -> Result<ChatRequest, ApiError> {
    let mut body: Value = serde_json::from_slice(body)
        .map_err(|e| invalid(format!("request body is not valid JSON: {e}")))?;
    let Some(obj) = body.as_object_mut() else {
        return Err(invalid("request body must be a JSON object"));
    };
    let messages = match obj.remove("messages") {
        Some(Value::Array(m)) => m,
        _ => return Err(invalid("`messages` must be an array")),
    };
    if messages
        .iter()
        .any(|m| m.get("role").and_then(Value::as_str).is_none())
    {
        return Err(invalid("every message needs a string `role`"));
    }
    let stream = obj.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let session = match headers.get(SESSION_HEADER) {
        None => None,
        Some(v) => {
            let id = v
                .to_str()
                .map_err(|_| invalid("session id must be ASCII"))?
                .to_string();
            validate_session_id(&id)?;
            Some(id)
        }
    };
    Ok(ChatRequest {
        body,
        messages,
        stream,
        session,
    })
}

pub(crate) async fn chat_completions(
    State(state): State<AppState>,
    exchange: Option<Extension<Arc<Exchange>>>,
    checked: Option<Extension<Arc<Snapshot>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let exchange = exchange.map(|Extension(x)| x);
    let inner = &state.inner;
    let snapshot = checked.map_or_else(|| inner.live.current(), |Extension(s)| s);
    let provider = snapshot.provider.clone().ok_or_else(|| {
        ApiError::from_error(&Error::NoModel {
            profile: inner.profile.clone(),
            home: inner.home.clone(),
        })
    })?;
    let ChatRequest {
        body: mut request,
        messages,
        stream,
        session,
    } = parse_request(&body, &headers)?;
    if let (Some(x), Some(id)) = (&exchange, &session) {
        x.set_session(id);
    }
    let history = match &session {
        Some(id) => inner.sessions.history_async(id.clone()).await?,
        None => Vec::new(),
    };
    let prompt = snapshot
        .turn_prompt(&inner.sessions, session.as_deref())
        .await?;
    let assembled = assemble(prompt.text.as_deref(), &history, &messages);
    let meta = TurnMeta::api(
        inner.profile.clone(),
        Some(provider.settings().model.clone()),
    )
    .with_system_prompt(prompt.to_store);
    if assembled
        .upstream
        .iter()
        .all(|m| m.get("role").and_then(Value::as_str) == Some("system"))
    {
        return Err(invalid("`messages` has no user message"));
    }
    if let Some(obj) = request.as_object_mut() {
        obj.insert("messages".into(), Value::Array(assembled.upstream));
    }
    let session_header = session
        .as_deref()
        .and_then(|s| HeaderValue::from_str(s).ok());

    let mut call = UpstreamCall::start(&inner.metrics, exchange.as_ref(), &snapshot);
    let mut resp = if stream {
        let usage = UsageFilter::new(&request);
        // Every error up to here (and inside `provider.stream`, retries included) is still a
        // plain JSON error with a status. From here on the status is 200 and failures become
        // an error event in the stream.
        let upstream = match provider.stream(request).await {
            Ok(upstream) => upstream,
            Err(e) => {
                call.failed(&e);
                return Err(e.into());
            }
        };
        if let Some(x) = &exchange {
            x.set_streamed();
        }
        let relay = Relay {
            call: Some(call),
            usage,
            exchange,
            store: inner.sessions.clone(),
            meta,
            session,
            new_turn: assembled.new_turn,
        };
        relay_stream(upstream, relay)
    } else {
        let answer = match provider.complete(request).await {
            Ok(answer) => answer,
            Err(e) => {
                call.failed(&e);
                return Err(e.into());
            }
        };
        // A plain answer arrives whole: its first byte is its end.
        call.first_byte();
        call.succeeded();
        if let (Some(x), Some(t)) = (&exchange, answer.get("usage").and_then(Tokens::from_usage)) {
            x.set_tokens(t);
        }
        if let Some(id) = session {
            let mut turn = assembled.new_turn;
            let reply = answer
                .pointer("/choices/0/message")
                .cloned()
                .unwrap_or_else(|| json!({"role": "assistant", "content": ""}));
            turn.push(reply);
            if let Err(e) = inner
                .sessions
                .append_turn_async(id.clone(), meta, turn)
                .await
            {
                return Err(not_stored(&id, &e));
            }
        }
        axum::Json(answer).into_response()
    };
    if let Some(h) = session_header {
        resp.headers_mut().insert(SESSION_HEADER, h);
    }
    Ok(resp)
}

/// What the stream relay needs besides the provider's stream: the call's timer, the usage
/// filter, the access-log exchange, and what to store when the answer is complete.
struct Relay {
    /// `None` once reported.
    call: Option<UpstreamCall>,
    usage: UsageFilter,
    exchange: Option<Arc<Exchange>>,
    store: hermes_sessions::SessionStore,
    /// Profile, source, model and (for a session's first turn) its system prompt.
    meta: TurnMeta,
    session: Option<String>,
    new_turn: Vec<Value>,
}

/// The client left: nothing more is sent.
struct ClientGone;

/// Sends every event of `emit` (see [`usage::Emit`]) as SSE.
async fn send_all(
    tx: &tokio::sync::mpsc::Sender<Bytes>,
    emit: usage::Emit,
) -> Result<(), ClientGone> {
    for data in emit.into_iter().flatten() {
        tx.send(sse_event(&data)).await.map_err(|_| ClientGone)?;
    }
    Ok(())
}

impl Relay {
    /// Reads the provider's stream into `tx` until its end, a failure, or the client leaving.
    /// Returns the answer's text, or `None` when the upstream failed (the client got an error
    /// event).
    async fn pump(
        &mut self,
        upstream: &mut ChatStream,
        tx: &tokio::sync::mpsc::Sender<Bytes>,
    ) -> Result<Option<String>, ClientGone> {
        let mut answer = String::new();
        while let Some(event) = upstream.next_event().await {
            match event {
                Ok(ev) => {
                    if let Some(call) = &mut self.call {
                        call.first_byte();
                    }
                    if let Some(d) = &ev.delta {
                        answer.push_str(d);
                    }
                    send_all(tx, self.usage.push(ev.data)).await?;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "provider stream failed");
                    self.finish_call(Some(&e));
                    send_all(tx, self.usage.finish()).await?;
                    let event = sse_event(&ApiError::from_provider(&e).body().to_string());
                    tx.send(event).await.map_err(|_| ClientGone)?;
                    return Ok(None);
                }
            }
        }
        self.finish_call(None);
        send_all(tx, self.usage.finish()).await?;
        Ok(Some(answer))
    }

    /// Reports the provider call's end (once) and the tokens it reported.
    fn finish_call(&mut self, error: Option<&hermes_provider::Error>) {
        let Some(call) = self.call.take() else {
            return;
        };
        if let (Some(x), Some(t)) = (&self.exchange, self.usage.tokens()) {
            x.set_tokens(t);
        }
        match error {
            Some(e) => call.failed(e),
            None => call.succeeded(),
        }
    }
}

/// Relays the provider's stream to the client as server-sent events, then stores the turn
/// (only when the client got the whole answer) and ends with `data: [DONE]` — after an error
/// event when the turn could not be stored, so no client takes an answer the session does not
/// hold for a complete turn.
fn relay_stream(mut upstream: ChatStream, mut relay: Relay) -> Response {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Bytes>(STREAM_BUFFER);
    tokio::spawn(async move {
        let answer = match relay.pump(&mut upstream, &tx).await {
            Ok(answer) => answer,
            Err(ClientGone) => {
                // Stop reading (dropping the upstream response closes that connection too)
                // and store nothing, since the client never got the answer. The provider
                // itself was fine.
                relay.finish_call(None);
                return;
            }
        };
        let mut end = if answer.is_some() {
            StreamEnd::Complete
        } else {
            StreamEnd::UpstreamFailed
        };
        // Store the turn before `[DONE]`: a client may send its next turn the moment it sees
        // `[DONE]`, and that turn must find this one in the history.
        if let (Some(id), Some(text)) = (relay.session.take(), &answer) {
            let mut turn = std::mem::take(&mut relay.new_turn);
            turn.push(json!({"role": "assistant", "content": text}));
            if let Err(e) = relay
                .store
                .append_turn_async(id.clone(), relay.meta.clone(), turn)
                .await
            {
                let error = not_stored(&id, &e);
                tracing::warn!(code = error.code, "{}", error.message);
                let _ = tx.send(sse_event(&error.body().to_string())).await;
                end = StreamEnd::NotStored;
            }
        }
        if let Some(x) = &relay.exchange {
            x.set_stream_end(end);
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n")).await;
    });
    let body = futures_util::stream::poll_fn(move |cx| {
        rx.poll_recv(cx).map(|o| o.map(Ok::<Bytes, Infallible>))
    });
    let mut resp = Response::new(Body::from_stream(body));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_validated_before_anything_is_asked() {
        let none = HeaderMap::new();
        for (body, why) in [
            (&b"{"[..], "not valid JSON"),
            (b"[1]", "must be a JSON object"),
            (br#"{"messages": "hi"}"#, "`messages` must be an array"),
            (br#"{"messages": [{"content": "hi"}]}"#, "string `role`"),
        ] {
            let err = parse_request(body, &none).unwrap_err();
            assert_eq!(err.status, axum::http::StatusCode::BAD_REQUEST);
            assert!(err.message.contains(why), "{}: {}", why, err.message);
        }
        let mut bad_session = HeaderMap::new();
        bad_session.insert(SESSION_HEADER, HeaderValue::from_static("../etc"));
        let body = br#"{"messages": [{"role": "user", "content": "hi"}], "stream": true}"#;
        assert!(parse_request(body, &bad_session).is_err());
        let mut session = HeaderMap::new();
        session.insert(SESSION_HEADER, HeaderValue::from_static("s-1"));
        let ok = parse_request(body, &session).unwrap();
        assert!(ok.stream);
        assert_eq!(ok.session.as_deref(), Some("s-1"));
        assert_eq!(ok.messages.len(), 1);
        assert!(
            ok.body.get("messages").is_none(),
            "messages are assembled later"
        );
    }

    #[test]
    fn sse_events_are_framed_per_line() {
        assert_eq!(&sse_event("{}")[..], b"data: {}\n\n");
        assert_eq!(&sse_event("a\nb")[..], b"data: a\ndata: b\n\n");
    }
}
