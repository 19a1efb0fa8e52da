//! Token counts: Anthropic's usage (an answer's, or a stream's running totals) as OpenAI's
//! usage object.

use serde_json::{Value, json};

/// Token counts as Anthropic reports them. Anthropic's `input_tokens` excludes the tokens
/// read from or written to the prompt cache; OpenAI's `prompt_tokens` includes them.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Usage {
    input: u64,
    output: u64,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    /// Whether any count was reported at all.
    pub(super) seen: bool,
}

impl Usage {
    /// Takes the counts present in `u`. Anthropic's stream reports running totals (in
    /// `message_start`, then `message_delta`), so a later count replaces an earlier one.
    pub(super) fn update(&mut self, u: &Value) {
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
    pub(super) fn to_openai(&self) -> Value {
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
