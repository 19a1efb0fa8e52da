//! Request: an OpenAI chat completions body as a Messages API body. This module maps the
//! body's own fields (`model`, `max_tokens`, sampling, `stop`, `user`, `thinking`); the
//! conversation is [`super::messages`]'s, the tool definitions [`super::tools`]'.
//!
//! Anthropic requires `max_tokens`: a client that sets none gets the model's ceiling.

use serde_json::{Map, Value, json};

use super::refusal::Refusal;
use super::{messages, tools};

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

/// An OpenAI chat request body (with `model`, `stream` and `messages` set) as a Messages API
/// body.
///
/// # Errors
///
/// The request cannot be expressed (a 400 for the client), with the reason: a message or
/// content part Anthropic has no counterpart for, tool-call arguments that are not a JSON
/// object, a bad `max_tokens`, `n` above 1, a malformed `tools` or `tool_choice`.
pub fn to_messages_request(openai_body: &Value) -> Result<Value, Refusal> {
    let body = openai_body.as_object().ok_or(Refusal::NotAnObject)?;
    let model = field(body, "model")
        .and_then(Value::as_str)
        .ok_or(Refusal::Model)?;
    let messages = field(body, "messages")
        .and_then(Value::as_array)
        .ok_or(Refusal::Messages)?;
    if let Some(n) = field(body, "n")
        && n.as_u64() != Some(1)
    {
        return Err(Refusal::Choices { n: n.clone() });
    }

    let (system, turns) = messages::convert(messages)?;
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
    tools::add(body, &mut out)?;
    Ok(Value::Object(out))
}

/// `body[name]`, with JSON `null` read as absent (clients send `"stop": null` and the like).
pub(super) fn field<'a>(body: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
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
fn max_tokens(body: &Map<String, Value>, model: &str) -> Result<u64, Refusal> {
    let Some((name, value)) = ["max_completion_tokens", "max_tokens"]
        .into_iter()
        .find_map(|name| field(body, name).map(|v| (name, v)))
    else {
        return Ok(output_limit(model));
    };
    match value.as_u64() {
        Some(n) if n > 0 => Ok(n),
        _ => value
            .as_f64()
            .and_then(whole_tokens)
            .ok_or_else(|| Refusal::MaxTokens {
                name,
                value: value.clone(),
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
fn copy_sampling(body: &Map<String, Value>, out: &mut Map<String, Value>) -> Result<(), Refusal> {
    for name in ["temperature", "top_p", "top_k"] {
        if let Some(v) = field(body, name) {
            if !v.is_number() {
                return Err(Refusal::Sampling {
                    name,
                    value: v.clone(),
                });
            }
            out.insert(name.into(), v.clone());
        }
    }
    Ok(())
}

/// `stop` (one string or a list of them) as `stop_sequences` (always a list).
fn stop_sequences(body: &Map<String, Value>) -> Result<Option<Value>, Refusal> {
    match field(body, "stop") {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(json!([s]))),
        Some(Value::Array(list)) if list.iter().all(Value::is_string) => {
            Ok((!list.is_empty()).then(|| Value::Array(list.clone())))
        }
        Some(other) => Err(Refusal::Stop {
            value: other.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::testing::{convert, refused, request};

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
}
