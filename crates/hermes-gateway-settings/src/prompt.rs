//! How much of a context file (`SOUL.md`) enters the system prompt: `context_file_max_chars`
//! when it is a positive number; else 6 % of the model's context window × 4 characters, at
//! least [`CONTEXT_FILE_MAX_CHARS`] and at most [`CONTEXT_FILE_DYNAMIC_CEILING`]. The window
//! is `model.context_length`, else [`DEFAULT_CONTEXT_WINDOW`] (the original's rule, which the
//! gateway's prompt applies and the dashboard shows).

use hermes_home::config::{Config, py_float, py_int};

/// Smallest context-file limit derived from a context window.
pub const CONTEXT_FILE_MAX_CHARS: usize = 20_000;
/// Context window assumed without `model.context_length`: the original's fallback for a model
/// it has no metadata for (its `DEFAULT_FALLBACK_CONTEXT`), giving a 61 440-character limit.
pub const DEFAULT_CONTEXT_WINDOW: i64 = 256_000;
/// Largest context-file limit derived from `model.context_length`.
pub const CONTEXT_FILE_DYNAMIC_CEILING: usize = 500_000;

/// The context-file limit (see the module doc).
pub fn context_file_max_chars(config: &Config) -> usize {
    let explicit = config
        .raw("context_file_max_chars")
        .and_then(py_float)
        .filter(|v| *v > 0.0);
    if let Some(v) = explicit {
        return v as usize;
    }
    let window = config
        .raw("model")
        .filter(|m| m.is_mapping())
        .and_then(|m| m.get("context_length"))
        .and_then(py_int)
        .filter(|n| *n > 0);
    match window {
        Some(tokens) => dynamic_limit(tokens),
        None => dynamic_limit(DEFAULT_CONTEXT_WINDOW),
    }
}

/// 6 % of a window of `tokens` at 4 characters a token, within the floor and the ceiling.
fn dynamic_limit(tokens: i64) -> usize {
    // Python: int(tokens * 4 * 0.06), a float product truncated.
    let budget = ((tokens as f64) * 4.0 * 0.06) as usize;
    budget.clamp(CONTEXT_FILE_MAX_CHARS, CONTEXT_FILE_DYNAMIC_CEILING)
}
