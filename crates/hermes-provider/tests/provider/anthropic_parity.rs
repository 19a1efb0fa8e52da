//! Our OpenAI -> Anthropic request translation against the original agent's own
//! (`convert_messages_to_anthropic` and `convert_tools_to_anthropic` in its
//! `agent/anthropic_adapter.py`), run on the same messages by the original's interpreter.
//!
//! Contents: a conversation with a system prompt, an image, a tool call and its result
//! (identical `system`, `messages` and `tools`); two system messages (where we deliberately
//! differ: see the test); tool-call arguments that are not JSON (where we refuse and the
//! original sends `{}`).
//!
//! Needs the original: `HERMES_TEST_PYPI=1` (see `hermes_test_support::original_agent`).

use std::io::Write;
use std::process::{Command, Stdio};

use hermes_provider::anthropic::{Refusal, to_messages_request};
use serde_json::{Value, json};

/// Reads `{"messages", "tools"}` on stdin, prints what the original builds from them.
const ORIGINAL_CONVERSION: &str = r#"
import json, sys
from agent.anthropic_adapter import convert_messages_to_anthropic, convert_tools_to_anthropic
request = json.load(sys.stdin)
system, messages = convert_messages_to_anthropic(request["messages"])
tools = convert_tools_to_anthropic(request.get("tools") or [])
json.dump({"system": system, "messages": messages, "tools": tools}, sys.stdout)
"#;

/// The original's `system`, `messages` and `tools` for an OpenAI-style request (`None`
/// after a skip message when the original is not available).
fn original(request: &Value) -> Option<Value> {
    let agent = hermes_test_support::original_agent()?;
    // A private home and working directory: the import must read nothing of the host's.
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(&agent.python)
        .args(["-c", ORIGINAL_CONVERSION])
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("HERMES_HOME", home.path().join(".hermes"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the original's conversion failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// Our `system`, `messages` and `tools` for the same request (`null` where absent, as the
/// original's `None`; `[]` for no tools, as its empty list).
fn ours(request: &Value) -> Value {
    let body = to_messages_request(request).unwrap();
    json!({
        "system": body.get("system").cloned().unwrap_or(Value::Null),
        "messages": body["messages"],
        "tools": body.get("tools").cloned().unwrap_or(json!([])),
    })
}

fn request(messages: Value, tools: Value) -> Value {
    json!({"model": "claude-sonnet-4-5", "stream": false, "messages": messages, "tools": tools})
}

#[test]
fn a_conversation_with_an_image_and_a_tool_call_converts_as_the_original_does() {
    let messages = json!([
        {"role": "system", "content": "You are Hermes.\n\nBe brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this picture, and what is the weather there?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/harbour.jpg"}},
        ]},
        {"role": "assistant", "content": "A harbour in Marseille. Checking the weather.", "tool_calls": [
            {"id": "call.9f:2", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Marseille\", \"days\": 2}"}},
            {"id": "call_b", "type": "function", "function": {"name": "now", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "call.9f:2", "content": "sunny, 24C"},
        {"role": "tool", "tool_call_id": "call_b", "content": ""},
        {"role": "user", "content": "And tomorrow?"},
        {"role": "assistant", "content": "Sunny again."},
        {"role": "user", "content": "Thanks"},
    ]);
    let tools = json!([
        {"type": "function", "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string"},
                "days": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null,
                         "description": "how many days"},
            }, "required": ["city"]},
        }},
        {"type": "function", "function": {"name": "now", "description": "The time"}},
    ]);
    let request = request(messages, tools);
    let Some(original) = original(&request) else {
        return;
    };
    let ours = ours(&request);
    // Nothing to mask: the same blocks, the same sanitized tool ids, the same placeholder
    // for the empty tool result, the same merged user turn, the same schemas.
    assert_eq!(ours, original);
    // And the comparison saw the interesting parts, not two empty lists.
    assert_eq!(ours["messages"].as_array().unwrap().len(), 5);
    assert_eq!(ours["messages"][1]["content"][1]["id"], "call_9f_2");
    assert_eq!(
        ours["tools"][0]["input_schema"]["properties"]["days"]["type"],
        "integer"
    );
}

#[test]
fn every_system_message_is_kept_where_the_original_keeps_the_last() {
    let request = request(
        json!([
            {"role": "system", "content": "The soul."},
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "A client's instruction."},
            {"role": "user", "content": "again"},
        ]),
        json!([]),
    );
    let Some(original) = original(&request) else {
        return;
    };
    let ours = ours(&request);
    // Masked, because we differ on purpose: the original's own gateway sends one system
    // message, so it only ever needs one; a client of our HTTP API may send several, and
    // dropping all but the last would silently lose the profile's soul.
    assert_eq!(original["system"], "A client's instruction.");
    assert_eq!(ours["system"], "The soul.\n\nA client's instruction.");
    assert_eq!(ours["messages"], original["messages"]);
}

#[test]
fn arguments_that_are_not_json_are_refused_where_the_original_sends_nothing() {
    let request = request(
        json!([
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{\"cmd\": "}},
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"},
        ]),
        json!([]),
    );
    let Some(original) = original(&request) else {
        return;
    };
    // The original replaces the arguments with `{}`, so the model is told it called `run`
    // with nothing; we refuse the request and say which call is broken.
    assert_eq!(original["messages"][1]["content"][0]["input"], json!({}));
    let err = to_messages_request(&request).unwrap_err();
    assert!(
        matches!(&err, Refusal::ArgumentsNotJson { message: 1, name, .. } if name == "run"),
        "{err:?}"
    );
    let err = err.to_string();
    assert!(
        err.contains("`run`") && err.contains("not valid JSON"),
        "{err}"
    );
}
