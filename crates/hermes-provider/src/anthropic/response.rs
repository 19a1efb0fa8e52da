//! Answer: a Messages API answer as an OpenAI `chat.completion` document.

use serde_json::{Value, json};

use super::usage::Usage;
use super::{block_text, block_type, now, str_field};

/// A Messages API answer as an OpenAI `chat.completion` document.
///
/// Text blocks are concatenated (Anthropic splits one text into several blocks around
/// citations), `tool_use` blocks become `tool_calls`, thinking becomes `reasoning_content`.
/// The caller checks the HTTP status first: an error body is read with
/// [`super::error_message`].
/// An odd answer (missing fields) gives a completion with what is there, never a panic.
pub fn to_chat_completion(answer: &Value) -> Value {
    let blocks = answer
        .get("content")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block_type(block) {
            "text" => text.push_str(block_text(block)),
            "thinking" => reasoning.push_str(str_field(block, "thinking")),
            "tool_use" => tool_calls.push(json!({
                "id": str_field(block, "id"),
                "type": "function",
                "function": {
                    "name": str_field(block, "name"),
                    "arguments": block.get("input").unwrap_or(&json!({})).to_string(),
                },
            })),
            // Redacted thinking, server tool blocks: nothing an OpenAI client can show.
            _ => {}
        }
    }
    let mut message = json!({"role": "assistant", "content": text});
    if !tool_calls.is_empty() {
        if text.is_empty() {
            message["content"] = Value::Null;
        }
        message["tool_calls"] = Value::Array(tool_calls);
    }
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    let mut usage = Usage::default();
    if let Some(u) = answer.get("usage") {
        usage.update(u);
    }
    json!({
        "id": answer.get("id").and_then(Value::as_str).unwrap_or("chatcmpl-anthropic"),
        "object": "chat.completion",
        "created": now(),
        "model": answer.get("model").and_then(Value::as_str).unwrap_or(""),
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(answer.get("stop_reason").and_then(Value::as_str)),
        }],
        "usage": usage.to_openai(),
    })
}

/// Anthropic's `stop_reason` as OpenAI's `finish_reason` (the original's mapping; an absent
/// or unknown reason is `stop`).
pub(super) fn finish_reason(stop_reason: Option<&str>) -> &'static str {
    match stop_reason {
        Some("tool_use") => "tool_calls",
        Some("max_tokens" | "model_context_window_exceeded") => "length",
        Some("refusal") => "content_filter",
        _ => "stop",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_with_text_and_a_tool_call_becomes_a_chat_completion() {
        let answer = json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [
                {"type": "thinking", "thinking": "need weather", "signature": "sig"},
                {"type": "text", "text": "Let me "},
                {"type": "text", "text": "check.", "citations": null},
                {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 5,
                      "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20},
        });
        let c = to_chat_completion(&answer);
        assert_eq!(c["id"], "msg_01");
        assert_eq!(c["object"], "chat.completion");
        assert_eq!(c["model"], "claude-sonnet-4-5");
        assert!(c["created"].as_u64().unwrap() > 1_700_000_000);
        let choice = &c["choices"][0];
        assert_eq!(choice["finish_reason"], "tool_calls");
        assert_eq!(choice["message"]["content"], "Let me check.");
        assert_eq!(choice["message"]["reasoning_content"], "need weather");
        let call = &choice["message"]["tool_calls"][0];
        assert_eq!(call["id"], "toolu_1");
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], "weather");
        let args: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"city": "Paris"}));
        assert_eq!(
            c["usage"],
            json!({"prompt_tokens": 130, "completion_tokens": 5, "total_tokens": 135,
                   "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 20}})
        );
    }

    #[test]
    fn stop_reasons_become_finish_reasons() {
        for (stop, finish) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("max_tokens", "length"),
            ("tool_use", "tool_calls"),
            ("refusal", "content_filter"),
            ("model_context_window_exceeded", "length"),
            ("pause_turn", "stop"),
        ] {
            let c = to_chat_completion(&json!({"stop_reason": stop, "content": []}));
            assert_eq!(c["choices"][0]["finish_reason"], finish, "{stop}");
        }
    }

    #[test]
    fn odd_answers_give_what_is_there() {
        let c = to_chat_completion(&json!("nonsense"));
        assert_eq!(c["choices"][0]["message"]["content"], "");
        assert_eq!(c["choices"][0]["finish_reason"], "stop");
        assert_eq!(c["usage"]["total_tokens"], 0);
        let c =
            to_chat_completion(&json!({"content": [{"type": "tool_use"}, 7, {"type": "text"}]}));
        assert_eq!(
            c["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
        assert_eq!(c["choices"][0]["message"]["content"], Value::Null);
        let c = to_chat_completion(&json!({"usage": {"input_tokens": 3, "output_tokens": 4}}));
        assert_eq!(
            c["usage"],
            json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
        );
    }
}
