//! Stream: a Messages API event stream as OpenAI `chat.completion.chunk`s, event by event.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::response::finish_reason;
use super::usage::Usage;
use super::{block_text, block_type, error_message, now, str_field};

/// What a content block of the stream turned into.
#[derive(Debug, Clone, Copy, PartialEq)]
enum StreamBlock {
    Text,
    Thinking,
    /// A `tool_use` block: its position among the answer's tool calls (OpenAI's `index`),
    /// and whether any argument text was sent for it.
    Tool {
        index: usize,
        sent_arguments: bool,
    },
    /// Anything else (redacted thinking, server tools): nothing to send.
    Other,
}

/// A Messages API stream, event by event, as OpenAI `chat.completion.chunk` JSON strings.
///
/// The first chunk carries `role: assistant`; `finish_reason` comes in a chunk of its own
/// when the message stops; the usage-only chunk (`choices: []`) follows only when the client
/// asked for it (`stream_options.include_usage`). An `error` event becomes an OpenAI error
/// object (`{"error": {...}}`) for the caller to relay, and ends the translation.
#[derive(Debug)]
pub struct StreamTranslator {
    id: String,
    model: String,
    created: u64,
    include_usage: bool,
    role_sent: bool,
    blocks: HashMap<u64, StreamBlock>,
    tool_calls: usize,
    stop_reason: Option<String>,
    usage: Usage,
    /// The stream ended (`message_stop`, an error, or [`StreamTranslator::finish`]).
    done: bool,
    failed: bool,
}

impl StreamTranslator {
    /// A translator for one answer; `model` names it until `message_start` says otherwise.
    pub fn new(model: &str, include_usage: bool) -> Self {
        StreamTranslator {
            id: "chatcmpl-anthropic".into(),
            model: model.to_string(),
            created: now(),
            include_usage,
            role_sent: false,
            blocks: HashMap::new(),
            tool_calls: 0,
            stop_reason: None,
            usage: Usage::default(),
            done: false,
            failed: false,
        }
    }

    /// One SSE event's `data` (JSON with a `type`) in; zero or more chunks out. Events after
    /// the end, `ping`, unknown types and data that is not JSON give nothing (new event types
    /// may appear, as Anthropic's versioning policy says).
    pub fn push(&mut self, data: &str) -> Vec<String> {
        if self.done {
            return Vec::new();
        }
        let event: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => {
                if data.trim() != "[DONE]" {
                    tracing::warn!(error = %e, "skipping an Anthropic stream event that is not JSON");
                }
                return Vec::new();
            }
        };
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => self.message_start(&event),
            "content_block_start" => self.block_start(&event),
            "content_block_delta" => self.block_delta(&event),
            "content_block_stop" => self.block_stop(&event),
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_string());
                }
                if let Some(u) = event.get("usage") {
                    self.usage.update(u);
                }
                Vec::new()
            }
            "message_stop" => self.finish(),
            "error" => self.error(&event),
            _ => Vec::new(),
        }
    }

    /// The stream ended: whatever is still owed (the `finish_reason` chunk if the stop
    /// reason is known, the usage chunk if asked for). Idempotent.
    pub fn finish(&mut self) -> Vec<String> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let mut out = Vec::new();
        if let Some(reason) = self.stop_reason.as_deref() {
            let reason = finish_reason(Some(reason));
            out.push(self.chunk(Map::new(), Some(reason)));
        }
        if self.include_usage && self.usage.seen {
            out.push(
                json!({
                    "id": self.id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "choices": [],
                    "usage": self.usage.to_openai(),
                })
                .to_string(),
            );
        }
        out
    }

    /// Whether the stream carried an `error` event (the answer is incomplete).
    pub fn failed(&self) -> bool {
        self.failed
    }

    fn message_start(&mut self, event: &Value) -> Vec<String> {
        let message = event.get("message").unwrap_or(&Value::Null);
        if let Some(id) = message.get("id").and_then(Value::as_str) {
            self.id = id.to_string();
        }
        if let Some(model) = message.get("model").and_then(Value::as_str) {
            self.model = model.to_string();
        }
        if let Some(u) = message.get("usage") {
            self.usage.update(u);
        }
        let mut delta = Map::new();
        delta.insert("content".into(), json!(""));
        vec![self.chunk(delta, None)]
    }

    fn block_start(&mut self, event: &Value) -> Vec<String> {
        let Some(index) = event.get("index").and_then(Value::as_u64) else {
            return Vec::new();
        };
        let block = event.get("content_block").unwrap_or(&Value::Null);
        let (kind, delta) = match block_type(block) {
            "text" => (StreamBlock::Text, text_delta("content", block_text(block))),
            "thinking" => (
                StreamBlock::Thinking,
                text_delta("reasoning_content", str_field(block, "thinking")),
            ),
            "tool_use" => {
                let index = self.tool_calls;
                self.tool_calls += 1;
                // In a stream `input` starts empty and arrives as JSON text; a compatible
                // server that sends it whole at the start gets it passed on here.
                let arguments = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                    .map(Value::to_string)
                    .unwrap_or_default();
                let call = json!({
                    "index": index,
                    "id": str_field(block, "id"),
                    "type": "function",
                    "function": {"name": str_field(block, "name"), "arguments": arguments},
                });
                let kind = StreamBlock::Tool {
                    index,
                    sent_arguments: !arguments.is_empty(),
                };
                (kind, Some(tool_calls_delta(call)))
            }
            _ => (StreamBlock::Other, None),
        };
        self.blocks.insert(index, kind);
        delta.map(|d| vec![self.chunk(d, None)]).unwrap_or_default()
    }

    fn block_delta(&mut self, event: &Value) -> Vec<String> {
        let Some(index) = event.get("index").and_then(Value::as_u64) else {
            return Vec::new();
        };
        let Some(kind) = self.blocks.get_mut(&index) else {
            return Vec::new();
        };
        let d = event.get("delta").unwrap_or(&Value::Null);
        let delta = match (block_type(d), kind) {
            ("text_delta", StreamBlock::Text) => text_delta("content", str_field(d, "text")),
            ("thinking_delta", StreamBlock::Thinking) => {
                text_delta("reasoning_content", str_field(d, "thinking"))
            }
            (
                "input_json_delta",
                StreamBlock::Tool {
                    index,
                    sent_arguments,
                },
            ) => {
                let part = str_field(d, "partial_json");
                if part.is_empty() {
                    None
                } else {
                    *sent_arguments = true;
                    let call = json!({"index": *index, "function": {"arguments": part}});
                    Some(tool_calls_delta(call))
                }
            }
            // Signatures and citations have no OpenAI counterpart.
            _ => None,
        };
        delta.map(|d| vec![self.chunk(d, None)]).unwrap_or_default()
    }

    /// A tool call whose arguments never came (a function without parameters) gets `{}`, so
    /// the client parses valid JSON, as OpenAI sends it.
    fn block_stop(&mut self, event: &Value) -> Vec<String> {
        let Some(index) = event.get("index").and_then(Value::as_u64) else {
            return Vec::new();
        };
        match self.blocks.get(&index) {
            Some(&StreamBlock::Tool {
                index,
                sent_arguments: false,
            }) => {
                let call = json!({"index": index, "function": {"arguments": "{}"}});
                vec![self.chunk(tool_calls_delta(call), None)]
            }
            _ => Vec::new(),
        }
    }

    fn error(&mut self, event: &Value) -> Vec<String> {
        self.done = true;
        self.failed = true;
        let kind = event
            .pointer("/error/type")
            .and_then(Value::as_str)
            .unwrap_or("");
        let (kind, code) = if kind == "rate_limit_error" {
            ("rate_limit_error", "rate_limit_exceeded")
        } else {
            ("upstream_error", "provider_error")
        };
        let message = error_message(event)
            .unwrap_or_else(|| "the provider's stream ended with an error".to_string());
        vec![json!({"error": {"message": message, "type": kind, "code": code}}).to_string()]
    }

    /// One chunk with `delta`; the first chunk of the answer also says `role: assistant`.
    fn chunk(&mut self, mut delta: Map<String, Value>, finish: Option<&str>) -> String {
        if !self.role_sent {
            delta.insert("role".into(), json!("assistant"));
            self.role_sent = true;
        }
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        })
        .to_string()
    }
}

/// `{key: text}`, or nothing for empty text.
fn text_delta(key: &str, text: &str) -> Option<Map<String, Value>> {
    (!text.is_empty()).then(|| {
        let mut delta = Map::new();
        delta.insert(key.into(), json!(text));
        delta
    })
}

fn tool_calls_delta(call: Value) -> Map<String, Value> {
    let mut delta = Map::new();
    delta.insert("tool_calls".into(), json!([call]));
    delta
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream as Anthropic sends it (`data:` payloads of one answer, from its streaming
    /// documentation's shape): text, then a tool call whose input arrives in many pieces.
    const RECORDED: &[&str] = &[
        r#"{"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","stop_sequence":null,"usage":{"input_tokens":472,"output_tokens":2,"cache_read_input_tokens":0,"cache_creation_input_tokens":0},"content":[],"stop_reason":null}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"ping"}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Okay"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", let's check the weather."}}"#,
        r#"{"type":"content_block_stop","index":0}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"location\":"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"San"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" Francisc"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"o, CA\""}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":", \"unit\": \"fah"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"renheit\"}"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
        r#"{"type":"message_stop"}"#,
    ];

    fn run(t: &mut StreamTranslator, events: &[&str]) -> Vec<Value> {
        let mut out: Vec<String> = events.iter().flat_map(|e| t.push(e)).collect();
        out.extend(t.finish());
        out.iter()
            .map(|c| serde_json::from_str(c).unwrap())
            .collect()
    }

    /// The answer a client rebuilds from the chunks: text, and each tool call's id, name and
    /// arguments by `index`.
    fn reassemble(chunks: &[Value]) -> (String, Vec<(String, String, String)>) {
        let mut text = String::new();
        let mut calls: Vec<(String, String, String)> = Vec::new();
        for c in chunks {
            let Some(delta) = c.pointer("/choices/0/delta") else {
                continue;
            };
            if let Some(t) = delta.get("content").and_then(Value::as_str) {
                text.push_str(t);
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let i = usize::try_from(call["index"].as_u64().unwrap()).unwrap();
                if i == calls.len() {
                    calls.push(Default::default());
                }
                let entry = &mut calls[i];
                if let Some(id) = call.get("id").and_then(Value::as_str) {
                    entry.0 = id.to_string();
                }
                if let Some(n) = call.pointer("/function/name").and_then(Value::as_str) {
                    entry.1 = n.to_string();
                }
                if let Some(a) = call.pointer("/function/arguments").and_then(Value::as_str) {
                    entry.2.push_str(a);
                }
            }
        }
        (text, calls)
    }

    #[test]
    fn a_recorded_stream_with_a_split_tool_call_translates_chunk_by_chunk() {
        let mut t = StreamTranslator::new("claude-sonnet-4-5", true);
        let chunks = run(&mut t, RECORDED);
        assert!(!t.failed());
        for c in &chunks {
            assert_eq!(c["id"], "msg_014p7gG3wDgGV9EUtLvnow3U");
            assert_eq!(c["object"], "chat.completion.chunk");
            assert_eq!(c["model"], "claude-sonnet-4-5-20250929");
        }
        assert_eq!(
            chunks[0]["choices"][0]["delta"],
            json!({"role": "assistant", "content": ""})
        );
        assert_eq!(
            chunks
                .iter()
                .filter(|c| c.pointer("/choices/0/delta/role").is_some())
                .count(),
            1,
            "only the first chunk names the role"
        );
        let (text, calls) = reassemble(&chunks);
        assert_eq!(text, "Okay, let's check the weather.");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
        assert_eq!(calls[0].1, "get_weather");
        let args: Value = serde_json::from_str(&calls[0].2).unwrap();
        assert_eq!(
            args,
            json!({"location": "San Francisco, CA", "unit": "fahrenheit"})
        );
        // One chunk per non-empty argument piece: the client sees the call as it is written.
        let argument_chunks = chunks
            .iter()
            .filter(|c| {
                c.pointer("/choices/0/delta/tool_calls/0/function/arguments")
                    .is_some()
            })
            .count();
        assert_eq!(argument_chunks, 7, "the start chunk and six pieces");

        let finish = &chunks[chunks.len() - 2];
        assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(finish["choices"][0]["delta"], json!({}));
        assert_eq!(
            chunks
                .iter()
                .filter(|c| !c["choices"][0]["finish_reason"].is_null())
                .count(),
            1
        );
        let usage = chunks.last().unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(
            usage["usage"],
            json!({"prompt_tokens": 472, "completion_tokens": 89, "total_tokens": 561,
                   "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}})
        );
        assert!(t.finish().is_empty(), "finish is idempotent");
        assert!(t.push(RECORDED[3]).is_empty(), "nothing after the end");
    }

    #[test]
    fn the_usage_chunk_comes_only_when_asked_for() {
        let mut t = StreamTranslator::new("m", false);
        let chunks = run(&mut t, RECORDED);
        assert!(chunks.iter().all(|c| c.get("usage").is_none()));
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "tool_calls"
        );
    }

    #[test]
    fn several_tool_calls_get_their_own_indexes() {
        let events = [
            r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"a","name":"f","input":{}}}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"b","name":"g","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\": 1}"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}"#,
        ];
        let mut t = StreamTranslator::new("m", false);
        let chunks = run(&mut t, &events);
        let (_, calls) = reassemble(&chunks);
        assert_eq!(
            calls,
            vec![
                ("a".into(), "f".into(), "{}".into()),
                ("b".into(), "g".into(), "{\"x\": 1}".into()),
            ],
            "a call without arguments gets `{{}}`, as OpenAI sends it"
        );
        assert_eq!(
            chunks.last().unwrap()["choices"][0]["finish_reason"],
            "tool_calls",
            "finish owes the finish reason when message_stop never came"
        );
    }

    #[test]
    fn thinking_becomes_reasoning_content_and_signatures_are_dropped() {
        let events = [
            r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me think"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"xx"}}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"text","text":"Hi"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#,
            r#"{"type":"message_stop"}"#,
        ];
        let mut t = StreamTranslator::new("m", false);
        let chunks = run(&mut t, &events);
        let deltas: Vec<&Value> = chunks.iter().map(|c| &c["choices"][0]["delta"]).collect();
        assert_eq!(
            deltas,
            vec![
                &json!({"role": "assistant", "content": ""}),
                &json!({"reasoning_content": "Let me think"}),
                &json!({"content": "Hi"}),
                &json!({}),
            ]
        );
        assert_eq!(chunks[3]["choices"][0]["finish_reason"], "stop");
    }

    #[test]
    fn an_error_event_becomes_an_error_chunk_and_ends_the_stream() {
        let mut t = StreamTranslator::new("m", true);
        let mut out = t.push(RECORDED[0]);
        out.extend(t.push(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ));
        let last: Value = serde_json::from_str(out.last().unwrap()).unwrap();
        assert_eq!(
            last,
            json!({"error": {"message": "Overloaded", "type": "upstream_error", "code": "provider_error"}})
        );
        assert!(t.failed());
        assert!(t.push(RECORDED[3]).is_empty());
        assert!(
            t.finish().is_empty(),
            "no usage is owed for a failed answer"
        );

        let mut t = StreamTranslator::new("m", false);
        let out = t.push(r#"{"type":"error","error":{"type":"rate_limit_error"}}"#);
        let err: Value = serde_json::from_str(&out[0]).unwrap();
        assert_eq!(err["error"]["code"], "rate_limit_exceeded");
        assert!(!err["error"]["message"].as_str().unwrap().is_empty());
    }

    #[test]
    fn odd_events_are_skipped_without_harm() {
        let mut t = StreamTranslator::new("fallback-model", true);
        for odd in [
            "not json",
            "[DONE]",
            "42",
            "{}",
            r#"{"type":"brand_new_event","x":1}"#,
            r#"{"type":"content_block_delta","index":9,"delta":{"type":"text_delta","text":"lost"}}"#,
            r#"{"type":"content_block_delta","delta":{"type":"text_delta","text":"no index"}}"#,
            r#"{"type":"content_block_start","index":"zero"}"#,
            r#"{"type":"content_block_stop","index":3}"#,
            r#"{"type":"message_delta"}"#,
        ] {
            assert!(t.push(odd).is_empty(), "{odd}");
        }
        // A text block that gets a tool delta (or the reverse) ignores it.
        t.push(
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        );
        assert!(
            t.push(r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#)
                .is_empty()
        );
        let out = t.push(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}"#,
        );
        let c: Value = serde_json::from_str(&out[0]).unwrap();
        assert_eq!(
            c["model"], "fallback-model",
            "no message_start: the configured model"
        );
        assert_eq!(
            c["choices"][0]["delta"],
            json!({"role": "assistant", "content": "ok"})
        );
        assert!(
            t.finish().is_empty(),
            "no usage and no stop reason were reported"
        );
    }

    #[test]
    fn the_latest_usage_counts_win() {
        let events = [
            r#"{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":5}}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":null},"usage":{"output_tokens":4}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":12,"output_tokens":9}}"#,
            r#"{"type":"message_stop"}"#,
        ];
        let mut t = StreamTranslator::new("m", true);
        let chunks = run(&mut t, &events);
        assert_eq!(
            chunks.last().unwrap()["usage"],
            json!({"prompt_tokens": 17, "completion_tokens": 9, "total_tokens": 26,
                   "prompt_tokens_details": {"cached_tokens": 5, "cache_write_tokens": 0}})
        );
    }
}
