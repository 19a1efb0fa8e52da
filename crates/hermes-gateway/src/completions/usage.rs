//! Token usage in streamed answers: `stream_options.include_usage`.
//!
//! Words:
//! * *usage chunk* — OpenAI's last chunk when a client asks for usage:
//!   `{"choices": [], "usage": {...}}`.
//! * *finish chunk* — the chunk whose choice carries a `finish_reason`.
//!
//! The rule: a client that asked (`"stream_options": {"include_usage": true}`) gets the usage
//! the provider reported; one that did not gets none, whatever the provider sends (some send
//! usage unasked).
//!
//! The shape: the usage is put on the finish chunk (the provider's usage chunk is folded into
//! it), which is what the original hermes-agent API server sends. A separate chunk with
//! `choices: []` would be refused by `hermes-agent-api-client` (0.3: a chunk must have exactly
//! one choice, and nothing but keepalives may follow the finish chunk), while the `openai` SDK
//! and other OpenAI clients read `usage` from whichever chunk carries it. So the finish chunk is
//! held back until the provider's usage chunk (which follows it at once) or the end.
//!
//! Cost: a chunk that has neither a non-null `usage` nor a non-null `finish_reason` (every
//! content chunk) is recognised by a byte scan and passed on untouched; only the finish and
//! usage chunks are parsed.

use serde_json::Value;

use crate::metrics::Tokens;

/// What to send now, in order (at most two events).
pub(crate) type Emit = [Option<String>; 2];

/// Applies the client's `include_usage` choice to one stream.
#[derive(Debug)]
pub(crate) struct UsageFilter {
    wanted: bool,
    /// The finish chunk, held until usage arrives (only when the client wants usage).
    held: Option<Value>,
    /// A usage chunk that came before any finish chunk (only when the client wants usage).
    early: Option<Value>,
    tokens: Option<Tokens>,
}

impl UsageFilter {
    /// For a chat request body: usage is wanted when `stream_options.include_usage` is `true`.
    pub(crate) fn new(request: &Value) -> UsageFilter {
        let wanted = request.pointer("/stream_options/include_usage") == Some(&Value::Bool(true));
        UsageFilter {
            wanted,
            held: None,
            early: None,
            tokens: None,
        }
    }

    /// The usage the provider reported, if it did.
    pub(crate) fn tokens(&self) -> Option<Tokens> {
        self.tokens
    }

    /// One event from the provider: what to send the client now.
    pub(crate) fn push(&mut self, data: String) -> Emit {
        if !has_value(&data, "usage") && !has_value(&data, "finish_reason") {
            return [self.release(), Some(data)];
        }
        let Ok(mut chunk) = serde_json::from_str::<Value>(&data) else {
            return [self.release(), Some(data)];
        };
        let usage = chunk.get("usage").filter(|u| !u.is_null()).cloned();
        if let Some(t) = usage.as_ref().and_then(Tokens::from_usage) {
            self.tokens = Some(t);
        }
        let no_choices = chunk
            .get("choices")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if !self.wanted {
            return match (usage.is_some(), no_choices) {
                (false, _) => [None, Some(data)],
                (true, true) => [None, None],
                (true, false) => {
                    if let Some(obj) = chunk.as_object_mut() {
                        obj.remove("usage");
                    }
                    [None, Some(chunk.to_string())]
                }
            };
        }
        if let (Some(u), true) = (&usage, no_choices) {
            return match self.held.take() {
                Some(mut finish) => {
                    finish["usage"] = u.clone();
                    [Some(finish.to_string()), None]
                }
                None => {
                    self.early = Some(chunk);
                    [None, None]
                }
            };
        }
        let released = self.release();
        if !finishes(&chunk) || usage.is_some() {
            return [released, Some(data)];
        }
        match self.early.take() {
            Some(early) => {
                chunk["usage"] = early["usage"].clone();
                [released, Some(chunk.to_string())]
            }
            None => {
                self.held = Some(chunk);
                [released, None]
            }
        }
    }

    /// The stream ended (or failed): whatever is still held.
    pub(crate) fn finish(&mut self) -> Emit {
        [self.release(), self.early.take().map(|c| c.to_string())]
    }

    fn release(&mut self) -> Option<String> {
        self.held.take().map(|c| c.to_string())
    }
}

/// True when some choice of `chunk` has a non-null `finish_reason`.
fn finishes(chunk: &Value) -> bool {
    chunk
        .get("choices")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.get("finish_reason").is_some_and(|f| !f.is_null()))
        })
}

/// True when the JSON text has a member `key` whose value is not `null`, at any depth.
///
/// Exact for keys: inside a JSON string every `"` is escaped, so `"key"` followed by `:` can
/// only be a member name. A false positive only costs a parse.
fn has_value(json: &str, key: &str) -> bool {
    let bytes = json.as_bytes();
    let mut from = 0;
    while let Some(pos) = find_quoted(&json[from..], key) {
        let mut i = from + pos + key.len() + 2;
        from = i;
        while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        if bytes.get(i) != Some(&b':') {
            continue;
        }
        i += 1;
        while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        if !bytes[i.min(bytes.len())..].starts_with(b"null") {
            return true;
        }
    }
    false
}

/// The position of `"key"` in `s`.
fn find_quoted(s: &str, key: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(pos) = s[from..].find(key) {
        let at = from + pos;
        let quoted_before = at > 0 && s.as_bytes()[at - 1] == b'"';
        let quoted_after = s.as_bytes().get(at + key.len()) == Some(&b'"');
        if quoted_before && quoted_after {
            return Some(at - 1);
        }
        from = at + key.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const USAGE: &str = r#"{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}"#;

    fn content(text: &str) -> String {
        json!({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
            .to_string()
    }

    fn finish_chunk() -> String {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string()
    }

    fn usage_chunk() -> String {
        format!(r#"{{"id":"c","choices":[],"usage":{USAGE}}}"#)
    }

    /// Everything the client gets for these upstream events.
    fn run(filter: &mut UsageFilter, events: &[String]) -> Vec<Value> {
        let mut out: Vec<String> = Vec::new();
        for e in events {
            out.extend(filter.push(e.clone()).into_iter().flatten());
        }
        out.extend(filter.finish().into_iter().flatten());
        out.iter()
            .map(|s| serde_json::from_str(s).unwrap())
            .collect()
    }

    fn with_usage(asked: bool) -> UsageFilter {
        let body = if asked {
            json!({"stream_options": {"include_usage": true}})
        } else {
            json!({})
        };
        UsageFilter::new(&body)
    }

    #[test]
    fn the_scan_finds_only_non_null_members() {
        assert!(has_value(r#"{"usage": {"a":1}}"#, "usage"));
        assert!(has_value(r#"{"x":1,"usage" :3}"#, "usage"));
        assert!(!has_value(r#"{"usage":null}"#, "usage"));
        assert!(!has_value(r#"{"usage" : null}"#, "usage"));
        assert!(!has_value(r#"{"content":"the \"usage\": 1"}"#, "usage"));
        assert!(!has_value(r#"{"content":"usage"}"#, "usage"));
        assert!(has_value(r#"{"a":"usage","usage":{}}"#, "usage"));
        assert!(!has_value(r#"{"usage""#, "usage"));
        assert!(has_value(&finish_chunk(), "finish_reason"));
        assert!(!has_value(&content("hi"), "finish_reason"));
    }

    #[test]
    fn asked_usage_rides_on_the_finish_chunk() {
        let mut f = with_usage(true);
        let out = run(
            &mut f,
            &[content("a"), content("b"), finish_chunk(), usage_chunk()],
        );
        assert_eq!(out.len(), 3, "{out:?}");
        assert_eq!(out[2]["choices"][0]["finish_reason"], "stop");
        assert_eq!(out[2]["usage"]["completion_tokens"], 5);
        assert!(
            out.iter()
                .all(|c| !c["choices"].as_array().unwrap().is_empty())
        );
        assert_eq!(
            f.tokens(),
            Some(Tokens {
                prompt: 3,
                completion: 5,
                total: 8
            })
        );
    }

    #[test]
    fn asked_usage_that_comes_first_or_already_on_the_finish_chunk() {
        let mut f = with_usage(true);
        let out = run(&mut f, &[content("a"), usage_chunk(), finish_chunk()]);
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[1]["usage"]["total_tokens"], 8);

        let mut f = with_usage(true);
        let mut on_finish: Value = serde_json::from_str(&finish_chunk()).unwrap();
        on_finish["usage"] = serde_json::from_str(USAGE).unwrap();
        let out = run(&mut f, &[content("a"), on_finish.to_string()]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1]["usage"]["prompt_tokens"], 3);
    }

    #[test]
    fn asked_but_none_reported_sends_the_finish_chunk_at_the_end() {
        let mut f = with_usage(true);
        assert_eq!(f.push(finish_chunk()), [None, None]);
        let out = run(&mut f, &[]);
        assert_eq!(out.len(), 1);
        assert!(out[0].get("usage").is_none());
        assert_eq!(f.tokens(), None);
    }

    #[test]
    fn a_client_that_did_not_ask_gets_no_usage() {
        let mut f = with_usage(false);
        let mut on_finish: Value = serde_json::from_str(&finish_chunk()).unwrap();
        on_finish["usage"] = serde_json::from_str(USAGE).unwrap();
        let out = run(
            &mut f,
            &[content("a"), on_finish.to_string(), usage_chunk()],
        );
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out.iter().all(|c| c.get("usage").is_none()), "{out:?}");
        assert_eq!(out[1]["choices"][0]["finish_reason"], "stop");
        // ...but the gateway still learnt the counts (for the log and the metrics).
        assert_eq!(f.tokens().map(|t| t.total), Some(8));
    }

    #[test]
    fn content_chunks_pass_untouched() {
        let mut f = with_usage(false);
        let raw = r#"{"choices":[{"delta":{"content":"x"},"finish_reason":null}],"usage":null}"#;
        assert_eq!(f.push(raw.to_string()), [None, Some(raw.to_string())]);
        let mut f = with_usage(true);
        assert_eq!(f.push(raw.to_string()), [None, Some(raw.to_string())]);
        assert_eq!(f.push("not json".into()), [None, Some("not json".into())]);
    }
}
