//! Anthropic's Messages API (`POST /v1/messages`) spoken on behalf of a client that speaks
//! OpenAI chat completions: pure translation, no I/O.
//!
//! * [`to_messages_request`] (`request`, with `messages` and `tools`): an OpenAI chat
//!   request body becomes a Messages API body, or a [`Refusal`] saying why it cannot.
//! * [`to_chat_completion`] (`response`): a Messages API answer becomes a `chat.completion`
//!   document.
//! * [`StreamTranslator`] (`stream`): a Messages API event stream becomes
//!   `chat.completion.chunk`s.
//! * [`error_message`]: the message of an Anthropic error body.
//!
//! Both directions of an answer count tokens the same way (`usage`).
//!
//! Words: a *block* is one element of an Anthropic `content` array (`text`, `image`,
//! `tool_use`, `tool_result`, `thinking`); a *turn* is one Anthropic message (`user` or
//! `assistant`), which the API wants strictly alternating.
//!
//! The conversion of messages follows the original agent's (`agent/anthropic_adapter.py`,
//! `convert_messages_to_anthropic`; see `messages`), so a conversation it started reads the
//! same to the model when we serve it. Where a client of an HTTP API deserves better than the
//! original's silent repairs (arguments that are not JSON, a content part Anthropic has no
//! counterpart for), the request is refused with the reason instead ([`Refusal`]).
//! `docs/gateway.md` ("Anthropic") lists every field that is mapped, dropped, or defaulted.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

mod messages;
mod refusal;
mod request;
mod response;
mod stream;
mod tools;
mod usage;

pub use refusal::Refusal;
pub use request::to_messages_request;
pub use response::to_chat_completion;
pub use stream::StreamTranslator;

/// The `anthropic-version` header every Messages API request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A `text` block.
fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// A block's `type` (`""` when it has none).
fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

/// A block's `text` (`""` when it has none).
fn block_text(block: &Value) -> &str {
    block.get("text").and_then(Value::as_str).unwrap_or("")
}

/// A string field of a block (`""` when absent).
fn str_field<'a>(block: &'a Value, name: &str) -> &'a str {
    block.get(name).and_then(Value::as_str).unwrap_or("")
}

/// Seconds since the epoch, for `created` (Anthropic's answers carry no time).
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The human message of an Anthropic error body (`{"type":"error","error":{...}}`).
pub fn error_message(body: &Value) -> Option<String> {
    let error = body.get("error")?;
    error
        .get("message")
        .and_then(Value::as_str)
        .or_else(|| error.as_str())
        .map(str::to_string)
}

/// Helpers of the request tests (`request`, `messages`, `tools`).
#[cfg(test)]
mod testing {
    use serde_json::{Value, json};

    use super::to_messages_request;

    /// A request of `messages` to a Claude model.
    pub(super) fn request(messages: Value) -> Value {
        json!({"model": "claude-sonnet-4-5", "stream": false, "messages": messages})
    }

    /// The Messages API body of `body`, which must translate.
    pub(super) fn convert(body: &Value) -> Value {
        to_messages_request(body).unwrap()
    }

    /// Why `body` is refused, as the client reads it.
    pub(super) fn refused(body: &Value) -> String {
        to_messages_request(body).unwrap_err().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_give_their_message() {
        let body = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(error_message(&body).as_deref(), Some("Overloaded"));
        assert_eq!(
            error_message(&json!({"error": "plain"})).as_deref(),
            Some("plain")
        );
        assert_eq!(error_message(&json!({"type": "error"})), None);
        assert_eq!(error_message(&json!([1])), None);
    }
}
