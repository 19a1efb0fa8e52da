//! Anthropic's Messages API (`POST /v1/messages`) spoken on behalf of a client that speaks
//! OpenAI chat completions: pure translation, no I/O.
//!
//! * [`to_messages_request`]: an OpenAI chat request body becomes a Messages API body.
//! * [`to_chat_completion`]: a Messages API answer becomes a `chat.completion` document.
//! * [`StreamTranslator`]: a Messages API event stream becomes `chat.completion.chunk`s.
//! * [`error_message`]: the message of an Anthropic error body.
//!
//! Words: a *block* is one element of an Anthropic `content` array (`text`, `image`,
//! `tool_use`, `tool_result`, `thinking`); a *turn* is one Anthropic message (`user` or
//! `assistant`), which the API wants strictly alternating.
//!
//! The conversion of messages follows the original agent's (`agent/anthropic_adapter.py`,
//! `convert_messages_to_anthropic`), so a conversation it started reads the same to the model
//! when we serve it: the placeholders it puts in empty messages, the tool-id sanitizing, the
//! removal of tool calls without an adjacent result, the merging of consecutive same-role
//! turns. Where a client of an HTTP API deserves better than the original's silent repairs
//! (arguments that are not JSON, a content part Anthropic has no counterpart for), the
//! request is refused with the reason instead. `docs/gateway.md` ("Anthropic") lists every
//! field that is mapped, dropped, or defaulted.

use std::collections::{HashMap, HashSet};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// The `anthropic-version` header every Messages API request carries.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The most output tokens each model family can produce, by substring of the model name
/// (lowercase, dots as hyphens); the longest matching substring wins. Anthropic requires
/// `max_tokens`, and a client that sets none gets the model's ceiling, as in the original
/// (its `_ANTHROPIC_OUTPUT_LIMITS`).
const OUTPUT_LIMITS: &[(&str, u64)] = &[
    ("claude-fable", 128_000),
    ("claude-sonnet-5", 128_000),
    ("claude-opus-4-8", 128_000),
    ("claude-opus-4-7", 128_000),
    ("claude-opus-4-6", 128_000),
    ("claude-sonnet-4-6", 64_000),
    ("claude-opus-4-5", 64_000),
    ("claude-sonnet-4-5", 64_000),
    ("claude-haiku-4-5", 64_000),
    ("claude-opus-4", 32_000),
    ("claude-sonnet-4", 64_000),
    ("claude-3-7-sonnet", 128_000),
    ("claude-3-5-sonnet", 8_192),
    ("claude-3-5-haiku", 8_192),
    ("claude-3-opus", 4_096),
    ("claude-3-sonnet", 4_096),
    ("claude-3-haiku", 4_096),
    ("minimax", 131_072),
    ("qwen3", 65_536),
];

/// The ceiling assumed for a model not in [`OUTPUT_LIMITS`] (newer models have not had less).
const DEFAULT_OUTPUT_LIMIT: u64 = 128_000;

/// Anthropic rejects empty text; these stand in for empty messages, as in the original.
const EMPTY_USER: &str = "(empty message)";
const EMPTY_ASSISTANT: &str = "(empty)";
const EMPTY_TOOL_RESULT: &str = "(no output)";
const REMOVED_TOOL_CALL: &str = "(tool call removed)";
const REMOVED_TOOL_RESULT: &str = "(tool result removed)";

/// JSON Schema keywords Anthropic refuses at the root of a tool's `input_schema`.
const ROOT_UNIONS: [&str; 3] = ["oneOf", "allOf", "anyOf"];

// ---------------------------------------------------------------------------------------
// Request: chat completions -> Messages API
// ---------------------------------------------------------------------------------------

/// An OpenAI chat request body (with `model`, `stream` and `messages` set) as a Messages API
/// body.
///
/// # Errors
///
/// The request cannot be expressed (a 400 for the client), with the reason: a message or
/// content part Anthropic has no counterpart for, tool-call arguments that are not a JSON
/// object, a bad `max_tokens`, `n` above 1, a malformed `tools` or `tool_choice`.
pub fn to_messages_request(openai_body: &Value) -> Result<Value, String> {
    let body = openai_body
        .as_object()
        .ok_or("the request body must be a JSON object")?;
    let model = field(body, "model")
        .and_then(Value::as_str)
        .ok_or("`model` must be a string")?;
    let messages = field(body, "messages")
        .and_then(Value::as_array)
        .ok_or("`messages` must be an array")?;
    if let Some(n) = field(body, "n")
        && n.as_u64() != Some(1)
    {
        return Err(format!(
            "`n` is {n}, but Anthropic answers with one choice only; send `n: 1` or leave it out"
        ));
    }

    let (system, turns) = convert_messages(messages)?;
    let model = normalize_model(model);
    let mut out = Map::new();
    out.insert("model".into(), json!(model));
    out.insert("max_tokens".into(), json!(max_tokens(body, &model)?));
    out.insert("messages".into(), Value::Array(turns));
    if let Some(system) = system {
        out.insert("system".into(), system);
    }
    if field(body, "stream").and_then(Value::as_bool) == Some(true) {
        out.insert("stream".into(), json!(true));
    }
    copy_sampling(body, &mut out)?;
    if let Some(stop) = stop_sequences(body)? {
        out.insert("stop_sequences".into(), stop);
    }
    if let Some(user) = field(body, "user").and_then(Value::as_str) {
        out.insert("metadata".into(), json!({"user_id": user}));
    }
    // Extended thinking has no OpenAI field; clients that know Anthropic send it as is.
    if let Some(thinking) = field(body, "thinking").filter(|t| t.is_object()) {
        out.insert("thinking".into(), thinking.clone());
    }
    add_tools(body, &mut out)?;
    Ok(Value::Object(out))
}

/// `body[name]`, with JSON `null` read as absent (clients send `"stop": null` and the like).
fn field<'a>(body: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    body.get(name).filter(|v| !v.is_null())
}

/// The model name as Anthropic spells it: without an OpenRouter-style `anthropic/` prefix,
/// and with hyphens for dots in a Claude version (`claude-opus-4.6` -> `claude-opus-4-6`).
/// Other names keep their dots (`qwen3.5-plus` on a compatible endpoint).
fn normalize_model(model: &str) -> String {
    let bare = match model.get(..10) {
        Some(prefix) if prefix.eq_ignore_ascii_case("anthropic/") => &model[10..],
        _ => model,
    };
    if bare.to_ascii_lowercase().starts_with("claude-") {
        bare.replace('.', "-")
    } else {
        bare.to_string()
    }
}

/// The model's output ceiling ([`OUTPUT_LIMITS`]).
fn output_limit(model: &str) -> u64 {
    let name = model.to_ascii_lowercase().replace('.', "-");
    OUTPUT_LIMITS
        .iter()
        .filter(|(key, _)| name.contains(key))
        .max_by_key(|(key, _)| key.len())
        .map_or(DEFAULT_OUTPUT_LIMIT, |&(_, limit)| limit)
}

/// `max_completion_tokens` (the current OpenAI name), else `max_tokens`, else the model's
/// ceiling. A fractional count is truncated, as the original does.
fn max_tokens(body: &Map<String, Value>, model: &str) -> Result<u64, String> {
    let Some((name, value)) = ["max_completion_tokens", "max_tokens"]
        .into_iter()
        .find_map(|name| field(body, name).map(|v| (name, v)))
    else {
        return Ok(output_limit(model));
    };
    match value.as_u64() {
        Some(n) if n > 0 => Ok(n),
        _ => value.as_f64().and_then(whole_tokens).ok_or_else(|| {
            format!("`{name}` is {value}, but Anthropic needs a positive number of tokens")
        }),
    }
}

/// A fractional token count truncated (the count is a ceiling: 1.9 tokens is 1); `None`
/// below 1 or not finite.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the value is checked to be finite and at least 1 first; `as` saturates"
)]
fn whole_tokens(f: f64) -> Option<u64> {
    (f.is_finite() && f >= 1.0).then_some(f as u64)
}

/// `temperature`, `top_p` (and Anthropic's own `top_k`) as they are: the ranges differ
/// (OpenAI's temperature goes to 2, Anthropic's to 1), and Anthropic's refusal of an
/// out-of-range value says so more exactly than a silent clamp would.
fn copy_sampling(body: &Map<String, Value>, out: &mut Map<String, Value>) -> Result<(), String> {
    for name in ["temperature", "top_p", "top_k"] {
        if let Some(v) = field(body, name) {
            if !v.is_number() {
                return Err(format!("`{name}` must be a number, not {v}"));
            }
            out.insert(name.into(), v.clone());
        }
    }
    Ok(())
}

/// `stop` (one string or a list of them) as `stop_sequences` (always a list).
fn stop_sequences(body: &Map<String, Value>) -> Result<Option<Value>, String> {
    match field(body, "stop") {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(json!([s]))),
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => {
            Ok((!list.is_empty()).then(|| Value::Array(list.clone())))
        }
        Some(other) => Err(format!(
            "`stop` must be a string or a list of strings, not {other}"
        )),
    }
}

/// `tools` as Anthropic tool definitions and `tool_choice` / `parallel_tool_calls` as
/// Anthropic's `tool_choice`.
fn add_tools(body: &Map<String, Value>, out: &mut Map<String, Value>) -> Result<(), String> {
    let tools = match field(body, "tools") {
        None => return Ok(()),
        Some(Value::Array(tools)) => convert_tools(tools)?,
        Some(other) => return Err(format!("`tools` must be a list, not {other}")),
    };
    if tools.is_empty() {
        return Ok(());
    }
    let mut choice = tool_choice(field(body, "tool_choice"))?;
    if field(body, "parallel_tool_calls").and_then(Value::as_bool) == Some(false)
        && choice["type"] != "none"
    {
        choice["disable_parallel_tool_use"] = json!(true);
    }
    out.insert("tools".into(), Value::Array(tools));
    out.insert("tool_choice".into(), choice);
    Ok(())
}

/// OpenAI's `tool_choice` in Anthropic's words. `none` stays `none` (Anthropic has it): the
/// tools stay defined, so earlier `tool_use` blocks in the conversation remain valid.
fn tool_choice(choice: Option<&Value>) -> Result<Value, String> {
    let named = |v: &Value| {
        v.pointer("/function/name")
            .and_then(Value::as_str)
            .map(|name| json!({"type": "tool", "name": name}))
    };
    match choice {
        None => Ok(json!({"type": "auto"})),
        Some(Value::String(s)) => match s.as_str() {
            "auto" => Ok(json!({"type": "auto"})),
            "none" => Ok(json!({"type": "none"})),
            "required" => Ok(json!({"type": "any"})),
            other => Err(format!(
                "`tool_choice` is `{other}`; use auto, none, required or \
                 {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
            )),
        },
        Some(v) => named(v).ok_or_else(|| {
            format!("`tool_choice` {v} names no function; use {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}")
        }),
    }
}

/// OpenAI `function` tools as `{name, description, input_schema}`. A repeated name is
/// dropped (Anthropic refuses the request; the first definition wins, as in the original).
fn convert_tools(tools: &[Value]) -> Result<Vec<Value>, String> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let kind = tool
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("function");
        if kind != "function" {
            return Err(format!(
                "tool {i} is of type `{kind}`; only `function` tools can be sent to Anthropic"
            ));
        }
        let function = tool.get("function").unwrap_or(&Value::Null);
        let name = function
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("tool {i} has no `function.name`"))?;
        if !seen.insert(name) {
            continue;
        }
        let mut converted = json!({
            "name": name,
            "description": function.get("description").and_then(Value::as_str).unwrap_or(""),
            "input_schema": input_schema(function.get("parameters")),
        });
        if let Some(cache) = tool.get("cache_control").filter(|c| c.is_object()) {
            converted["cache_control"] = cache.clone();
        }
        out.push(converted);
    }
    Ok(out)
}

/// A function's `parameters` as an `input_schema` Anthropic's validator accepts: nullable
/// unions collapsed, no union keyword at the root, `properties` present on an object.
fn input_schema(parameters: Option<&Value>) -> Value {
    let empty = || json!({"type": "object", "properties": {}});
    let Some(schema) = parameters.filter(|p| p.as_object().is_some_and(|o| !o.is_empty())) else {
        return empty();
    };
    let Value::Object(mut schema) = strip_nullable_unions(schema) else {
        return empty();
    };
    if ROOT_UNIONS.iter().any(|k| schema.contains_key(*k)) {
        for k in ROOT_UNIONS {
            schema.remove(k);
        }
        schema.entry("type").or_insert_with(|| json!("object"));
    }
    if schema.get("type") == Some(&json!("object"))
        && !schema.get("properties").is_some_and(Value::is_object)
    {
        schema.insert("properties".into(), json!({}));
    }
    Value::Object(schema)
}

/// Collapses every `anyOf` / `oneOf` of exactly one schema and `{"type": "null"}` (what
/// Pydantic and MCP emit for an optional field) to that schema, keeping the union's
/// `title`, `description`, `default` and `examples`: Anthropic refuses the null branch, and
/// optionality is already said by the parent's `required`.
fn strip_nullable_unions(schema: &Value) -> Value {
    match schema {
        Value::Array(items) => Value::Array(items.iter().map(strip_nullable_unions).collect()),
        Value::Object(map) => {
            let stripped: Map<String, Value> = map
                .iter()
                .map(|(k, v)| (k.clone(), strip_nullable_unions(v)))
                .collect();
            for key in ["anyOf", "oneOf"] {
                let Some(Value::Array(variants)) = stripped.get(key) else {
                    continue;
                };
                let non_null: Vec<&Value> = variants
                    .iter()
                    .filter(|v| v.get("type") != Some(&json!("null")))
                    .collect();
                if let [only] = non_null[..]
                    && variants.len() > 1
                {
                    let mut replacement = only.as_object().cloned().unwrap_or_default();
                    for meta in ["title", "description", "default", "examples"] {
                        // `default` beside `$ref` is refused by strict validators.
                        let refused = meta == "default" && replacement.contains_key("$ref");
                        if let Some(v) = stripped.get(meta)
                            && !replacement.contains_key(meta)
                            && !refused
                        {
                            replacement.insert(meta.into(), v.clone());
                        }
                    }
                    return strip_nullable_unions(&Value::Object(replacement));
                }
            }
            Value::Object(stripped)
        }
        other => other.clone(),
    }
}

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

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The system prompt (every `system` and `developer` message, in order) and the turns.
fn convert_messages(messages: &[Value]) -> Result<(Option<Value>, Vec<Value>), String> {
    let mut system = SystemPrompt::default();
    let mut turns: Vec<Turn> = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("message {i} has no string `role`"))?;
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
                return Err(format!(
                    "message {i} has role `{other}`, which Anthropic cannot express; \
                     use system, user, assistant or tool"
                ));
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
    fn add(&mut self, content: &Value, i: usize) -> Result<(), String> {
        let blocks = match content {
            Value::Null => Vec::new(),
            Value::String(s) => vec![text_block(s)],
            Value::Array(parts) => {
                let mut blocks = Vec::with_capacity(parts.len());
                for part in parts {
                    let block = convert_part(part, i)?;
                    if block_type(&block) != "text" {
                        return Err(format!(
                            "message {i} (system) has a `{}` part; a system prompt holds text only",
                            block_type(&block)
                        ));
                    }
                    blocks.push(block);
                }
                blocks
            }
            other => return Err(format!("message {i} has content {other}")),
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

fn block_text(block: &Value) -> &str {
    block.get("text").and_then(Value::as_str).unwrap_or("")
}

/// A user message's content; an empty one becomes a placeholder (Anthropic refuses empty
/// text), blank text parts beside other parts are left out.
fn user_content(content: &Value, i: usize) -> Result<Content, String> {
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
        other => Err(format!("message {i} has content {other}")),
    }
}

/// Content parts as blocks, without blank text blocks.
fn convert_parts(parts: &[Value], i: usize) -> Result<Vec<Value>, String> {
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
fn convert_part(part: &Value, i: usize) -> Result<Value, String> {
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
                return Err(format!(
                    "message {i} has a content part of type `{other}`, which Anthropic \
                     cannot take; send text and images"
                ));
            }
        },
        other => return Err(format!("message {i} has a content part {other}")),
    };
    if let Some(cache) = part.get("cache_control").filter(|c| c.is_object()) {
        block["cache_control"] = cache.clone();
    }
    Ok(block)
}

/// An image URL as an Anthropic image source: a base64 `data:` URL carries the image itself
/// (its media type defaults to `image/jpeg`, as in the original, when it names no image
/// type); an http(s) URL is fetched by Anthropic.
fn image_source(url: &str, i: usize) -> Result<Value, String> {
    let url = url.trim();
    if let Some(rest) = url.strip_prefix("data:") {
        let (header, data) = rest
            .split_once(',')
            .ok_or_else(|| format!("message {i} has an image `data:` URL without data"))?;
        let mut params = header.split(';');
        let mime = params.next().unwrap_or("").trim();
        if !params.any(|p| p.trim().eq_ignore_ascii_case("base64")) {
            return Err(format!(
                "message {i} has an image `data:` URL that is not base64; Anthropic takes \
                 base64 images only"
            ));
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
    Err(format!(
        "message {i} has an image URL that is neither http(s) nor a base64 `data:` URL"
    ))
}

/// An assistant message's blocks: its text, then one `tool_use` per tool call. Its
/// `reasoning_content` is left out: Anthropic only takes back thinking it signed.
fn assistant_blocks(m: &Value, i: usize) -> Result<Vec<Value>, String> {
    let mut blocks = match m.get("content").unwrap_or(&Value::Null) {
        Value::Null => Vec::new(),
        Value::String(s) if s.is_empty() => Vec::new(),
        Value::String(s) => vec![text_block(s)],
        Value::Array(parts) => convert_parts(parts, i)?,
        other => return Err(format!("message {i} has content {other}")),
    };
    match m.get("tool_calls").unwrap_or(&Value::Null) {
        Value::Null => {}
        Value::Array(calls) => {
            for call in calls {
                blocks.push(tool_use_block(call, i)?);
            }
        }
        other => return Err(format!("message {i} has `tool_calls` {other}, not a list")),
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
fn tool_use_block(call: &Value, i: usize) -> Result<Value, String> {
    let function = call.get("function").unwrap_or(&Value::Null);
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("message {i} has a tool call without `function.name`"))?;
    let input = match function.get("arguments").unwrap_or(&Value::Null) {
        Value::Null => json!({}),
        Value::String(s) if s.trim().is_empty() => json!({}),
        Value::String(s) => serde_json::from_str(s).map_err(|e| {
            format!("message {i} has a tool call `{name}` whose arguments are not valid JSON: {e}")
        })?,
        other => other.clone(),
    };
    if !input.is_object() {
        return Err(format!(
            "message {i} has a tool call `{name}` whose arguments are not a JSON object"
        ));
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
fn push_tool_result(turns: &mut Vec<Turn>, m: &Value, i: usize) -> Result<(), String> {
    let id = m
        .get("tool_call_id")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("message {i} (tool) has no `tool_call_id`"))?;
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
fn tool_result_content(content: &Value, i: usize) -> Result<Value, String> {
    let value = match content {
        Value::Null => Value::String(String::new()),
        Value::String(s) => Value::String(s.clone()),
        Value::Array(parts) => {
            let blocks = convert_parts(parts, i)?;
            if let Some(b) = blocks
                .iter()
                .find(|b| !matches!(block_type(b), "text" | "image"))
            {
                return Err(format!(
                    "message {i} (tool) has a `{}` part; a tool result holds text and images",
                    block_type(b)
                ));
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

fn str_field<'a>(block: &'a Value, name: &str) -> &'a str {
    block.get(name).and_then(Value::as_str).unwrap_or("")
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

// ---------------------------------------------------------------------------------------
// Answer: Messages API -> chat.completion
// ---------------------------------------------------------------------------------------

/// A Messages API answer as an OpenAI `chat.completion` document.
///
/// Text blocks are concatenated (Anthropic splits one text into several blocks around
/// citations), `tool_use` blocks become `tool_calls`, thinking becomes `reasoning_content`.
/// The caller checks the HTTP status first: an error body is read with [`error_message`].
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
fn finish_reason(stop_reason: Option<&str>) -> &'static str {
    match stop_reason {
        Some("tool_use") => "tool_calls",
        Some("max_tokens" | "model_context_window_exceeded") => "length",
        Some("refusal") => "content_filter",
        _ => "stop",
    }
}

/// Seconds since the epoch, for `created` (Anthropic's answers carry no time).
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Token counts as Anthropic reports them. Anthropic's `input_tokens` excludes the tokens
/// read from or written to the prompt cache; OpenAI's `prompt_tokens` includes them.
#[derive(Debug, Default, Clone, PartialEq)]
struct Usage {
    input: u64,
    output: u64,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    /// Whether any count was reported at all.
    seen: bool,
}

impl Usage {
    /// Takes the counts present in `u`. Anthropic's stream reports running totals (in
    /// `message_start`, then `message_delta`), so a later count replaces an earlier one.
    fn update(&mut self, u: &Value) {
        let count = |name: &str| u.get(name).and_then(Value::as_u64);
        if let Some(n) = count("input_tokens") {
            self.input = n;
            self.seen = true;
        }
        if let Some(n) = count("output_tokens") {
            self.output = n;
            self.seen = true;
        }
        if let Some(n) = count("cache_read_input_tokens") {
            self.cache_read = Some(n);
        }
        if let Some(n) = count("cache_creation_input_tokens") {
            self.cache_write = Some(n);
        }
    }

    /// OpenAI's usage object; the cache counts (when reported) as
    /// `prompt_tokens_details.cached_tokens` (read) and `.cache_write_tokens` (written).
    fn to_openai(&self) -> Value {
        let read = self.cache_read.unwrap_or(0);
        let write = self.cache_write.unwrap_or(0);
        let prompt = self.input + read + write;
        let mut usage = json!({
            "prompt_tokens": prompt,
            "completion_tokens": self.output,
            "total_tokens": prompt + self.output,
        });
        if self.cache_read.is_some() || self.cache_write.is_some() {
            usage["prompt_tokens_details"] =
                json!({"cached_tokens": read, "cache_write_tokens": write});
        }
        usage
    }
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

// ---------------------------------------------------------------------------------------
// Stream: Messages API events -> chat.completion.chunk
// ---------------------------------------------------------------------------------------

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

    fn request(messages: Value) -> Value {
        json!({"model": "claude-sonnet-4-5", "stream": false, "messages": messages})
    }

    fn convert(body: &Value) -> Value {
        to_messages_request(body).unwrap()
    }

    fn refused(body: &Value) -> String {
        to_messages_request(body).unwrap_err()
    }

    // --- requests: messages ---

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

    // --- requests: parameters ---

    #[test]
    fn max_tokens_comes_from_the_request_or_the_models_ceiling() {
        let mut body = request(json!([{"role": "user", "content": "hi"}]));
        assert_eq!(convert(&body)["max_tokens"], 64_000);
        body["max_tokens"] = json!(100);
        assert_eq!(convert(&body)["max_tokens"], 100);
        body["max_completion_tokens"] = json!(200.7);
        assert_eq!(convert(&body)["max_tokens"], 200);
        for bad in [json!(0), json!(-5), json!(0.5), json!("10")] {
            body["max_completion_tokens"] = bad.clone();
            let err = refused(&body);
            assert!(err.contains("max_completion_tokens"), "{bad}: {err}");
        }
        assert_eq!(output_limit("claude-3-5-haiku-20241022"), 8_192);
        assert_eq!(output_limit("claude-opus-4.6"), 128_000);
        assert_eq!(output_limit("claude-opus-4-1"), 32_000);
        assert_eq!(output_limit("some-new-model"), DEFAULT_OUTPUT_LIMIT);
    }

    #[test]
    fn model_names_are_spelled_as_anthropic_does() {
        assert_eq!(
            normalize_model("anthropic/claude-opus-4.6"),
            "claude-opus-4-6"
        );
        assert_eq!(
            normalize_model("Anthropic/claude-sonnet-4-5"),
            "claude-sonnet-4-5"
        );
        assert_eq!(normalize_model("qwen3.5-plus"), "qwen3.5-plus");
        assert_eq!(
            normalize_model("anthropic.claude-v2"),
            "anthropic.claude-v2"
        );
        let mut body = request(json!([{"role": "user", "content": "hi"}]));
        body["model"] = json!("anthropic/claude-haiku-4.5");
        assert_eq!(convert(&body)["model"], "claude-haiku-4-5");
    }

    #[test]
    fn sampling_stop_user_and_stream_are_mapped_and_openai_only_fields_dropped() {
        let mut body = request(json!([{"role": "user", "content": "hi"}]));
        body["stream"] = json!(true);
        body["temperature"] = json!(0.2);
        body["top_p"] = json!(0.9);
        body["stop"] = json!("END");
        body["user"] = json!("u-1");
        body["thinking"] = json!({"type": "enabled", "budget_tokens": 2048});
        for dropped in [
            "frequency_penalty",
            "presence_penalty",
            "seed",
            "logprobs",
            "response_format",
            "stream_options",
            "reasoning_effort",
        ] {
            body[dropped] = json!(1);
        }
        body["n"] = json!(1);
        let out = convert(&body);
        let keys: Vec<&str> = out
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = vec![
            "max_tokens",
            "messages",
            "metadata",
            "model",
            "stop_sequences",
            "stream",
            "temperature",
            "thinking",
            "top_p",
        ];
        expected.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(out["stop_sequences"], json!(["END"]));
        assert_eq!(out["metadata"], json!({"user_id": "u-1"}));
        assert_eq!(out["stream"], true);

        body["stop"] = json!(["a", "b"]);
        assert_eq!(convert(&body)["stop_sequences"], json!(["a", "b"]));
        body["stop"] = json!([1]);
        assert!(refused(&body).contains("`stop`"));
        body["stop"] = Value::Null;
        body["temperature"] = json!("hot");
        assert!(refused(&body).contains("`temperature`"));
        body["temperature"] = Value::Null;
        body["n"] = json!(3);
        assert!(refused(&body).contains("`n`"));
    }

    #[test]
    fn tools_become_input_schemas() {
        let mut body = request(json!([{"role": "user", "content": "hi"}]));
        body["tools"] = json!([
            {"type": "function", "function": {
                "name": "search",
                "description": "Search the web",
                "parameters": {"type": "object", "properties": {
                    "q": {"type": "string"},
                    "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null, "title": "Limit"},
                }, "required": ["q"]},
            }},
            {"type": "function", "function": {"name": "now"}},
            {"type": "function", "function": {"name": "search", "description": "duplicate"}},
            {"type": "function", "function": {"name": "pick", "parameters": {
                "oneOf": [{"type": "object"}, {"type": "string"}],
            }}},
        ]);
        let out = convert(&body);
        assert_eq!(
            out["tools"],
            json!([
                {"name": "search", "description": "Search the web", "input_schema": {
                    "type": "object", "properties": {
                        "q": {"type": "string"},
                        "limit": {"type": "integer", "default": null, "title": "Limit"},
                    }, "required": ["q"],
                }},
                {"name": "now", "description": "", "input_schema": {"type": "object", "properties": {}}},
                {"name": "pick", "description": "", "input_schema": {"type": "object", "properties": {}}},
            ])
        );
        assert_eq!(out["tool_choice"], json!({"type": "auto"}));
        body["tools"] = json!([{"type": "custom", "custom": {"name": "x"}}]);
        assert!(refused(&body).contains("`custom`"));
        body["tools"] = json!([{"type": "function", "function": {}}]);
        assert!(refused(&body).contains("function.name"));
    }

    #[test]
    fn tool_choice_and_parallel_tool_calls_are_mapped() {
        let mut body = request(json!([{"role": "user", "content": "hi"}]));
        body["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
        for (choice, expected) in [
            (json!("auto"), json!({"type": "auto"})),
            (json!("none"), json!({"type": "none"})),
            (json!("required"), json!({"type": "any"})),
            (
                json!({"type": "function", "function": {"name": "f"}}),
                json!({"type": "tool", "name": "f"}),
            ),
        ] {
            body["tool_choice"] = choice.clone();
            let out = convert(&body);
            assert_eq!(out["tool_choice"], expected, "{choice}");
            assert_eq!(out["tools"].as_array().unwrap().len(), 1, "{choice}");
        }
        body["parallel_tool_calls"] = json!(false);
        assert_eq!(
            convert(&body)["tool_choice"],
            json!({"type": "tool", "name": "f", "disable_parallel_tool_use": true})
        );
        body["tool_choice"] = json!("f");
        assert!(refused(&body).contains("`tool_choice`"));
        body["tool_choice"] = json!({"type": "function"});
        assert!(refused(&body).contains("names no function"));
        body["tools"] = json!([]);
        let out = convert(&body);
        assert!(out.get("tools").is_none() && out.get("tool_choice").is_none());
    }

    #[test]
    fn odd_request_bodies_are_refused_with_a_reason() {
        for (body, why) in [
            (json!([1]), "JSON object"),
            (json!({"messages": []}), "`model`"),
            (json!({"model": "m"}), "`messages`"),
            (
                json!({"model": "m", "messages": [{"content": "x"}]}),
                "`role`",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": 5}]}),
                "content 5",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": [5]}]}),
                "part 5",
            ),
            (
                json!({"model": "m", "messages": [], "tools": {}}),
                "`tools`",
            ),
        ] {
            let err = refused(&body);
            assert!(err.contains(why), "{body}: {err}");
        }
    }

    // --- answers ---

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

    // --- streams ---

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
