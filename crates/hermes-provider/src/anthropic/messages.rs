//! Messages: the conversation of a chat completions request as Anthropic's system prompt
//! and turns, following the original agent's conversion (`agent/anthropic_adapter.py`,
//! `convert_messages_to_anthropic`): its placeholders for empty messages, its tool-id
//! sanitizing, its removal of tool calls without an adjacent result, its merging of
//! consecutive same-role turns. What Anthropic has no counterpart for is refused.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::refusal::Refusal;
use super::{block_text, block_type, str_field, text_block};

/// Anthropic rejects empty text; these stand in for empty messages, as in the original.
const EMPTY_USER: &str = "(empty message)";
const EMPTY_ASSISTANT: &str = "(empty)";
const EMPTY_TOOL_RESULT: &str = "(no output)";
const REMOVED_TOOL_CALL: &str = "(tool call removed)";
const REMOVED_TOOL_RESULT: &str = "(tool result removed)";

/// A turn's content: a plain string, or a list of blocks.
#[derive(Debug, Clone, PartialEq)]
enum Content {
    Text(String),
    Blocks(Vec<Value>),
}

impl Content {
    fn into_blocks(self) -> Vec<Value> {
        match self {
            Content::Text(text) => vec![text_block(&text)],
            Content::Blocks(blocks) => blocks,
        }
    }

    fn into_value(self) -> Value {
        match self {
            Content::Text(text) => Value::String(text),
            Content::Blocks(blocks) => Value::Array(blocks),
        }
    }

    fn blocks_mut(&mut self) -> Option<&mut Vec<Value>> {
        match self {
            Content::Text(_) => None,
            Content::Blocks(blocks) => Some(blocks),
        }
    }

    fn blocks(&self) -> &[Value] {
        match self {
            Content::Text(_) => &[],
            Content::Blocks(blocks) => blocks,
        }
    }
}

/// One Anthropic message.
#[derive(Debug, Clone, PartialEq)]
struct Turn {
    assistant: bool,
    content: Content,
}

/// The system prompt (every `system` and `developer` message, in order) and the turns.
pub(super) fn convert(messages: &[Value]) -> Result<(Option<Value>, Vec<Value>), Refusal> {
    let mut system = SystemPrompt::default();
    let mut turns: Vec<Turn> = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or(Refusal::NoRole { message: i })?;
        let content = m.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => system.add(content, i)?,
            "user" => turns.push(Turn {
                assistant: false,
                content: user_content(content, i)?,
            }),
            "assistant" => turns.push(Turn {
                assistant: true,
                content: Content::Blocks(assistant_blocks(m, i)?),
            }),
            "tool" => push_tool_result(&mut turns, m, i)?,
            other => {
                return Err(Refusal::Role {
                    message: i,
                    role: other.into(),
                });
            }
        }
    }
    strip_orphaned_tool_blocks(&mut turns);
    let turns = merge_consecutive(turns)
        .into_iter()
        .map(|t| {
            let role = if t.assistant { "assistant" } else { "user" };
            json!({"role": role, "content": t.content.into_value()})
        })
        .collect();
    Ok((system.into_value(), turns))
}

/// The text of every system message, kept as blocks so a `cache_control` mark survives.
#[derive(Debug, Default)]
struct SystemPrompt {
    /// One list of text blocks per system message.
    messages: Vec<Vec<Value>>,
}

impl SystemPrompt {
    fn add(&mut self, content: &Value, i: usize) -> Result<(), Refusal> {
        let blocks = match content {
            Value::Null => Vec::new(),
            Value::String(s) => vec![text_block(s)],
            Value::Array(parts) => {
                let mut blocks = Vec::with_capacity(parts.len());
                for part in parts {
                    let block = convert_part(part, i)?;
                    if block_type(&block) != "text" {
                        return Err(Refusal::SystemPart {
                            message: i,
                            kind: block_type(&block).into(),
                        });
                    }
                    blocks.push(block);
                }
                blocks
            }
            other => return Err(content_refused(i, other)),
        };
        self.messages.push(blocks);
        Ok(())
    }

    /// One string (parts of a message joined by a line break, messages by a blank line), or
    /// a list of text blocks when any part carries `cache_control` (a string cannot); `None`
    /// when there is no text at all.
    fn into_value(self) -> Option<Value> {
        let cached = self
            .messages
            .iter()
            .flatten()
            .any(|b| b.get("cache_control").is_some());
        if cached {
            let blocks: Vec<Value> = self
                .messages
                .into_iter()
                .flatten()
                .filter(|b| !block_text(b).is_empty())
                .collect();
            return (!blocks.is_empty()).then_some(Value::Array(blocks));
        }
        let text = self
            .messages
            .iter()
            .map(|blocks| blocks.iter().map(block_text).collect::<Vec<_>>().join("\n"))
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n");
        (!text.is_empty()).then_some(Value::String(text))
    }
}

/// A message's `content` that is neither text, parts nor null.
fn content_refused(i: usize, content: &Value) -> Refusal {
    Refusal::Content {
        message: i,
        content: content.clone(),
    }
}

/// A user message's content; an empty one becomes a placeholder (Anthropic refuses empty
/// text), blank text parts beside other parts are left out.
fn user_content(content: &Value, i: usize) -> Result<Content, Refusal> {
    match content {
        Value::Null => Ok(Content::Text(EMPTY_USER.into())),
        Value::String(s) if s.trim().is_empty() => Ok(Content::Text(EMPTY_USER.into())),
        Value::String(s) => Ok(Content::Text(s.clone())),
        Value::Array(parts) => {
            let blocks = convert_parts(parts, i)?;
            if blocks.is_empty() {
                Ok(Content::Text(EMPTY_USER.into()))
            } else {
                Ok(Content::Blocks(blocks))
            }
        }
        other => Err(content_refused(i, other)),
    }
}

/// Content parts as blocks, without blank text blocks.
fn convert_parts(parts: &[Value], i: usize) -> Result<Vec<Value>, Refusal> {
    let mut blocks = Vec::with_capacity(parts.len());
    for part in parts {
        let block = convert_part(part, i)?;
        if block_type(&block) == "text" && block_text(&block).trim().is_empty() {
            continue;
        }
        blocks.push(block);
    }
    Ok(blocks)
}

/// One OpenAI content part as an Anthropic block. Anthropic's own `image` and `document`
/// blocks pass as they are (a client that knows Anthropic may send them); a part with no
/// counterpart (`input_audio`, `file`) is refused.
fn convert_part(part: &Value, i: usize) -> Result<Value, Refusal> {
    let mut block = match part {
        Value::String(s) => return Ok(text_block(s)),
        Value::Object(_) => match block_type(part) {
            "text" | "input_text" => text_block(block_text(part)),
            "refusal" => text_block(part.get("refusal").and_then(Value::as_str).unwrap_or("")),
            "image_url" | "input_image" => {
                let url = match part.get("image_url") {
                    Some(Value::Object(o)) => o.get("url").and_then(Value::as_str),
                    Some(Value::String(s)) => Some(s.as_str()),
                    _ => None,
                };
                json!({"type": "image", "source": image_source(url.unwrap_or(""), i)?})
            }
            "image" | "document" => return Ok(part.clone()),
            other => {
                return Err(Refusal::PartType {
                    message: i,
                    kind: other.into(),
                });
            }
        },
        other => {
            return Err(Refusal::Part {
                message: i,
                part: other.clone(),
            });
        }
    };
    if let Some(cache) = part.get("cache_control").filter(|c| c.is_object()) {
        block["cache_control"] = cache.clone();
    }
    Ok(block)
}

/// An image URL as an Anthropic image source: a base64 `data:` URL carries the image itself
/// (its media type defaults to `image/jpeg`, as in the original, when it names no image
/// type); an http(s) URL is fetched by Anthropic.
fn image_source(url: &str, i: usize) -> Result<Value, Refusal> {
    let url = url.trim();
    if let Some(rest) = url.strip_prefix("data:") {
        let (header, data) = rest
            .split_once(',')
            .ok_or(Refusal::ImageWithoutData { message: i })?;
        let mut params = header.split(';');
        let mime = params.next().unwrap_or("").trim();
        if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
            return Err(Refusal::ImageNotBase64 { message: i });
        }
        let media_type = if mime.starts_with("image/") {
            mime
        } else {
            "image/jpeg"
        };
        return Ok(json!({"type": "base64", "media_type": media_type, "data": data}));
    }
    let lower = url.to_ascii_lowercase();
    if lower.starts_with("https://") || lower.starts_with("http://") {
        return Ok(json!({"type": "url", "url": url}));
    }
    Err(Refusal::ImageUrl { message: i })
}

/// An assistant message's blocks: its text, then one `tool_use` per tool call. Its
/// `reasoning_content` is left out: Anthropic only takes back thinking it signed.
fn assistant_blocks(m: &Value, i: usize) -> Result<Vec<Value>, Refusal> {
    let mut blocks = match m.get("content").unwrap_or(&Value::Null) {
        Value::Null => Vec::new(),
        Value::String(s) if s.is_empty() => Vec::new(),
        Value::String(s) => vec![text_block(s)],
        Value::Array(parts) => convert_parts(parts, i)?,
        other => return Err(content_refused(i, other)),
    };
    match m.get("tool_calls").unwrap_or(&Value::Null) {
        Value::Null => {}
        Value::Array(calls) => {
            for call in calls {
                blocks.push(tool_use_block(call, i)?);
            }
        }
        other => {
            return Err(Refusal::ToolCalls {
                message: i,
                value: other.clone(),
            });
        }
    }
    if let Some(cache) = m.get("cache_control").filter(|c| c.is_object())
        && let Some(last) = blocks
            .iter_mut()
            .rev()
            .find(|b| matches!(block_type(b), "text" | "tool_use"))
        && last.get("cache_control").is_none()
    {
        last["cache_control"] = cache.clone();
    }
    if blocks.is_empty() {
        blocks.push(text_block(EMPTY_ASSISTANT));
    }
    Ok(blocks)
}

/// One OpenAI tool call as a `tool_use` block: `arguments` (a JSON string) becomes `input`
/// (an object); empty arguments are `{}`.
fn tool_use_block(call: &Value, i: usize) -> Result<Value, Refusal> {
    let function = call.get("function").unwrap_or(&Value::Null);
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or(Refusal::ToolCallName { message: i })?;
    let input = match function.get("arguments").unwrap_or(&Value::Null) {
        Value::Null => json!({}),
        Value::String(s) if s.trim().is_empty() => json!({}),
        Value::String(s) => serde_json::from_str(s).map_err(|error| Refusal::ArgumentsNotJson {
            message: i,
            name: name.into(),
            error,
        })?,
        other => other.clone(),
    };
    if !input.is_object() {
        return Err(Refusal::ArgumentsNotObject {
            message: i,
            name: name.into(),
        });
    }
    let id = call.get("id").and_then(Value::as_str).unwrap_or("");
    Ok(json!({"type": "tool_use", "id": tool_id(id), "name": name, "input": input}))
}

/// A tool-call id as Anthropic accepts it (`[a-zA-Z0-9_-]+`): anything else becomes `_`,
/// an empty id `tool_0`, as in the original, so the call and its result still match.
fn tool_id(id: &str) -> String {
    if id.is_empty() {
        return "tool_0".into();
    }
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A `tool` message as a `tool_result` block, in the user turn of the results before it when
/// there is one (Anthropic wants all results of a turn's calls in the next user turn).
fn push_tool_result(turns: &mut Vec<Turn>, m: &Value, i: usize) -> Result<(), Refusal> {
    let id = m
        .get("tool_call_id")
        .and_then(Value::as_str)
        .ok_or(Refusal::NoToolCallId { message: i })?;
    let mut result = json!({
        "type": "tool_result",
        "tool_use_id": tool_id(id),
        "content": tool_result_content(m.get("content").unwrap_or(&Value::Null), i)?,
    });
    if let Some(cache) = m.get("cache_control").filter(|c| c.is_object()) {
        result["cache_control"] = cache.clone();
    }
    let results_turn = turns.last_mut().filter(|t| {
        !t.assistant && t.content.blocks().first().map(block_type) == Some("tool_result")
    });
    match results_turn.and_then(|t| t.content.blocks_mut()) {
        Some(blocks) => blocks.push(result),
        None => turns.push(Turn {
            assistant: false,
            content: Content::Blocks(vec![result]),
        }),
    }
    Ok(())
}

/// A tool message's content: text as is, parts as text and image blocks (what a
/// `tool_result` holds), anything else as its JSON text.
fn tool_result_content(content: &Value, i: usize) -> Result<Value, Refusal> {
    let value = match content {
        Value::Null => Value::String(String::new()),
        Value::String(s) => Value::String(s.clone()),
        Value::Array(parts) => {
            let blocks = convert_parts(parts, i)?;
            if let Some(b) = blocks
                .iter()
                .find(|b| !matches!(block_type(b), "text" | "image"))
            {
                return Err(Refusal::ToolResultPart {
                    message: i,
                    kind: block_type(b).into(),
                });
            }
            Value::Array(blocks)
        }
        other => Value::String(other.to_string()),
    };
    let empty = match &value {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    Ok(if empty {
        json!(EMPTY_TOOL_RESULT)
    } else {
        value
    })
}

/// Anthropic refuses a `tool_use` whose result is not in the very next user turn, and a
/// `tool_result` whose call is gone. A history cut short (a compressed or truncated session)
/// can hold either; both are removed, and a turn left empty says what was removed, as the
/// original does.
fn strip_orphaned_tool_blocks(turns: &mut [Turn]) {
    for i in 0..turns.len() {
        if !turns[i].assistant {
            continue;
        }
        let answered: HashSet<String> = turns
            .get(i + 1)
            .filter(|next| !next.assistant)
            .map(|next| ids_of(next.content.blocks(), "tool_result", "tool_use_id"))
            .unwrap_or_default();
        retain_blocks(&mut turns[i].content, REMOVED_TOOL_CALL, |b| {
            block_type(b) != "tool_use" || answered.contains(str_field(b, "id"))
        });
    }
    let called: HashSet<String> = turns
        .iter()
        .filter(|t| t.assistant)
        .flat_map(|t| ids_of(t.content.blocks(), "tool_use", "id"))
        .collect();
    for turn in turns.iter_mut().filter(|t| !t.assistant) {
        retain_blocks(&mut turn.content, REMOVED_TOOL_RESULT, |b| {
            block_type(b) != "tool_result" || called.contains(str_field(b, "tool_use_id"))
        });
    }
}

fn ids_of(blocks: &[Value], kind: &str, id_field: &str) -> HashSet<String> {
    blocks
        .iter()
        .filter(|b| block_type(b) == kind)
        .map(|b| str_field(b, id_field).to_string())
        .collect()
}

/// Keeps the blocks `keep` accepts; a list left empty by it holds `placeholder` instead.
fn retain_blocks(content: &mut Content, placeholder: &str, keep: impl Fn(&Value) -> bool) {
    if let Some(blocks) = content.blocks_mut() {
        let before = blocks.len();
        blocks.retain(|b| keep(b));
        if blocks.is_empty() && before > 0 {
            blocks.push(text_block(placeholder));
        }
    }
}

/// Consecutive turns of one role as one turn (Anthropic wants the roles to alternate): two
/// strings joined by a line break, otherwise the blocks of both.
fn merge_consecutive(turns: Vec<Turn>) -> Vec<Turn> {
    let mut merged: Vec<Turn> = Vec::with_capacity(turns.len());
    for turn in turns {
        match merged.last_mut() {
            Some(prev) if prev.assistant == turn.assistant => {
                let content = std::mem::replace(&mut prev.content, Content::Blocks(Vec::new()));
                prev.content = match (content, turn.content) {
                    (Content::Text(a), Content::Text(b)) => Content::Text(format!("{a}\n{b}")),
                    (a, b) => {
                        let mut blocks = a.into_blocks();
                        blocks.extend(b.into_blocks());
                        Content::Blocks(blocks)
                    }
                };
            }
            _ => merged.push(turn),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use crate::anthropic::testing::{convert, refused, request};
    use serde_json::json;

    #[test]
    fn every_system_message_joins_the_system_prompt_in_order() {
        let out = convert(&request(json!([
            {"role": "system", "content": "soul"},
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "system", "content": ""},
        ])));
        assert_eq!(out["system"], "soul\n\na\nb");
        assert_eq!(out["messages"], json!([{"role": "user", "content": "hi"}]));
    }

    #[test]
    fn a_cached_system_part_keeps_the_system_prompt_as_blocks() {
        let cache = json!({"type": "ephemeral"});
        let out = convert(&request(json!([
            {"role": "system", "content": "soul"},
            {"role": "system", "content": [{"type": "text", "text": "big", "cache_control": cache}]},
            {"role": "user", "content": "hi"},
        ])));
        assert_eq!(
            out["system"],
            json!([
                {"type": "text", "text": "soul"},
                {"type": "text", "text": "big", "cache_control": cache},
            ])
        );
    }

    #[test]
    fn no_system_text_means_no_system_field() {
        let out = convert(&request(json!([{"role": "user", "content": "hi"}])));
        assert!(out.get("system").is_none());
        let err = refused(&request(json!([
            {"role": "system", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]},
        ])));
        assert!(err.contains("text only"), "{err}");
    }

    #[test]
    fn consecutive_same_role_messages_are_merged() {
        let out = convert(&request(json!([
            {"role": "user", "content": "one"},
            {"role": "user", "content": "two"},
            {"role": "user", "content": [{"type": "text", "text": "three"}]},
            {"role": "assistant", "content": "a"},
            {"role": "assistant", "content": "b"},
        ])));
        assert_eq!(
            out["messages"],
            json!([
                {"role": "user", "content": [
                    {"type": "text", "text": "one\ntwo"},
                    {"type": "text", "text": "three"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b"},
                ]},
            ])
        );
    }

    #[test]
    fn tool_calls_and_results_become_tool_use_and_tool_result() {
        let out = convert(&request(json!([
            {"role": "user", "content": "weather in Paris and Rome?"},
            {"role": "assistant", "content": "Checking.", "tool_calls": [
                {"id": "call.1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": ""}},
            ]},
            {"role": "tool", "tool_call_id": "call.1", "content": "18C"},
            {"role": "tool", "tool_call_id": "call_2", "content": ""},
            {"role": "user", "content": "thanks"},
        ])));
        assert_eq!(
            out["messages"],
            json!([
                {"role": "user", "content": "weather in Paris and Rome?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "call_2", "name": "time", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "18C"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "(no output)"},
                    {"type": "text", "text": "thanks"},
                ]},
            ])
        );
    }

    #[test]
    fn tool_results_may_hold_text_and_images() {
        let out = convert(&request(json!([
            {"role": "user", "content": "look"},
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "shot", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": [
                {"type": "text", "text": "screen"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
            ]},
        ])));
        assert_eq!(
            out["messages"][2]["content"][0]["content"],
            json!([
                {"type": "text", "text": "screen"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
            ])
        );
        assert_eq!(out["messages"][1]["content"][0]["input"], json!({}));
    }

    #[test]
    fn arguments_that_are_not_a_json_object_are_refused() {
        for args in ["{\"city\": ", "[1, 2]", "42"] {
            let err = refused(&request(json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": args}}]},
                {"role": "tool", "tool_call_id": "c", "content": "x"},
            ])));
            assert!(
                err.contains("message 1") && err.contains("`f`"),
                "{args}: {err}"
            );
        }
        let err = refused(&request(json!([
            {"role": "user", "content": "hi"},
            {"role": "tool", "content": "x"},
        ])));
        assert!(err.contains("tool_call_id"), "{err}");
    }

    #[test]
    fn orphaned_tool_calls_and_results_are_removed() {
        let out = convert(&request(json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [
                {"id": "kept", "function": {"name": "f", "arguments": "{}"}},
                {"id": "lost", "function": {"name": "g", "arguments": "{}"}},
            ]},
            {"role": "tool", "tool_call_id": "kept", "content": "ok"},
            {"role": "tool", "tool_call_id": "stray", "content": "?"},
            {"role": "assistant", "tool_calls": [{"id": "late", "function": {"name": "h", "arguments": "{}"}}]},
            {"role": "user", "content": "never mind"},
        ])));
        assert_eq!(
            out["messages"],
            json!([
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "kept", "name": "f", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "kept", "content": "ok"},
                ]},
                {"role": "assistant", "content": [{"type": "text", "text": "(tool call removed)"}]},
                {"role": "user", "content": "never mind"},
            ])
        );
    }

    #[test]
    fn images_become_image_blocks() {
        let out = convert(&request(json!([{"role": "user", "content": [
            {"type": "text", "text": "what is it?"},
            {"type": "image_url", "image_url": {"url": "data:image/webp;base64,UklG", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {"type": "image_url", "image_url": "data:;base64,AAAA"},
        ]}])));
        assert_eq!(
            out["messages"][0]["content"],
            json!([
                {"type": "text", "text": "what is it?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/webp", "data": "UklG"}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}},
            ])
        );
        // An image alone is a message too (the original replaces it with a placeholder).
        let out = convert(&request(json!([{"role": "user", "content": [
            {"type": "text", "text": " "},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        ]}])));
        assert_eq!(
            out["messages"][0]["content"],
            json!([{"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}}])
        );
        for url in ["data:image/png,raw", "ftp://x/y.png", ""] {
            let err = refused(&request(json!([{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": url}},
            ]}])));
            assert!(err.contains("image"), "{url}: {err}");
        }
    }

    #[test]
    fn parts_without_a_counterpart_are_refused_and_native_blocks_pass() {
        let err = refused(&request(json!([{"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": "..", "format": "wav"}},
        ]}])));
        assert!(err.contains("`input_audio`"), "{err}");
        let doc = json!({"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}});
        let out = convert(&request(
            json!([{"role": "user", "content": [doc.clone()]}]),
        ));
        assert_eq!(out["messages"][0]["content"], json!([doc]));
        let err = refused(&request(json!([{"role": "function", "content": "x"}])));
        assert!(err.contains("`function`"), "{err}");
    }

    #[test]
    fn empty_messages_get_the_originals_placeholders() {
        let out = convert(&request(json!([
            {"role": "user", "content": "  "},
            {"role": "assistant", "content": null},
            {"role": "user", "content": [{"type": "text", "text": ""}]},
        ])));
        assert_eq!(
            out["messages"],
            json!([
                {"role": "user", "content": "(empty message)"},
                {"role": "assistant", "content": [{"type": "text", "text": "(empty)"}]},
                {"role": "user", "content": "(empty message)"},
            ])
        );
    }

    #[test]
    fn cache_control_is_kept_on_parts_messages_and_tools() {
        let cache = json!({"type": "ephemeral"});
        let mut body = request(json!([
            {"role": "user", "content": [{"type": "text", "text": "doc", "cache_control": cache}]},
            {"role": "assistant", "content": "sure", "cache_control": cache},
        ]));
        body["tools"] =
            json!([{"type": "function", "function": {"name": "f"}, "cache_control": cache}]);
        let out = convert(&body);
        assert_eq!(out["messages"][0]["content"][0]["cache_control"], cache);
        assert_eq!(out["messages"][1]["content"][0]["cache_control"], cache);
        assert_eq!(out["tools"][0]["cache_control"], cache);
    }
}
