//! `fallback_providers`: the endpoints tried, in order, when the primary fails — read as the
//! original reads them (hermes-agent 0.19.0, `hermes_cli/fallback_config.py`,
//! `get_fallback_chain`).
//!
//! * `fallback_providers` is a list of mappings (a single mapping counts as a list of one);
//!   the legacy `fallback_model` (one mapping, or a list) is appended after it.
//! * An entry needs a non-blank `provider` and `model`; anything else (a bare name, a
//!   mapping without a model) is skipped, as the original skips it, with a warning in the
//!   gateway's log naming its position.
//! * `base_url` is optional (trailing `/` removed); the key is the inline `api_key`, else the
//!   variable named by `key_env` (or its alias `api_key_env`); without either, the provider's
//!   own credentials apply, by the same rules as the primary's.
//! * An entry whose provider, model and base URL (case-insensitive) repeat an earlier one is
//!   dropped.

use hermes_home::config::{Config, expand_vars};
use serde_json::Value;

/// One entry of the chain, as configured.
#[non_exhaustive]
#[derive(Clone, PartialEq, Eq)]
pub struct FallbackSpec {
    /// `provider` (`openrouter`, `anthropic`, `custom`).
    pub provider: String,
    /// `model`.
    pub model: String,
    /// `base_url`, without a trailing `/`.
    pub base_url: Option<String>,
    /// The entry's own key (`api_key`, else the value of `key_env` / `api_key_env`).
    pub api_key: Option<String>,
}

impl FallbackSpec {
    /// An entry for `model` of `provider`, with no `base_url` or key of its own (the
    /// `model` section of `config.yaml` is resolved as one too).
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> Self {
        FallbackSpec {
            provider: provider.into(),
            model: model.into(),
            base_url: None,
            api_key: None,
        }
    }
}

impl std::fmt::Debug for FallbackSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackSpec")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The chain configured in `config` (`var` looks up `.env` and the environment).
pub fn chain(config: &Config, var: &dyn Fn(&str) -> Option<String>) -> Vec<FallbackSpec> {
    let mut out: Vec<FallbackSpec> = Vec::new();
    for key in ["fallback_providers", "fallback_model"] {
        // The YAML value as JSON: mappings, lists and scalars keep their shape.
        let raw = config.raw(key).and_then(|v| serde_json::to_value(v).ok());
        for spec in entries(raw.as_ref(), var) {
            if !out.iter().any(|seen| same_route(seen, &spec)) {
                out.push(spec);
            }
        }
    }
    out
}

fn entries(raw: Option<&Value>, var: &dyn Fn(&str) -> Option<String>) -> Vec<FallbackSpec> {
    let candidates: Vec<&Value> = match raw {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(one @ Value::Object(_)) => vec![one],
        _ => Vec::new(),
    };
    candidates
        .into_iter()
        .enumerate()
        .filter_map(|(index, entry)| {
            let found = spec(entry, var);
            if found.is_none() {
                // Skipped as the original skips it, but never silently: a typo (`modle:`)
                // would otherwise quietly remove a fallback.
                tracing::warn!(
                    index,
                    "a fallback_providers entry is skipped: it needs a `provider` and a `model`"
                );
            }
            found
        })
        .collect()
}

fn spec(entry: &Value, var: &dyn Fn(&str) -> Option<String>) -> Option<FallbackSpec> {
    let text = |k: &str| {
        entry
            .get(k)
            .and_then(scalar)
            .map(|v| expand_vars(&v, var).trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let api_key = text("api_key").or_else(|| {
        let name = text("key_env").or_else(|| text("api_key_env"))?;
        var(&name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    });
    Some(FallbackSpec {
        provider: text("provider")?,
        model: text("model")?,
        base_url: text("base_url")
            .map(|u| u.trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty()),
        api_key,
    })
}

/// A YAML scalar as text (a number or a boolean is spelled as YAML reads it).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn same_route(a: &FallbackSpec, b: &FallbackSpec) -> bool {
    let url = |s: &FallbackSpec| s.base_url.clone().unwrap_or_default().to_lowercase();
    a.provider.eq_ignore_ascii_case(&b.provider)
        && a.model.eq_ignore_ascii_case(&b.model)
        && url(a) == url(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(yaml: &str) -> Vec<FallbackSpec> {
        let config = Config::parse(Path::new("config.yaml"), yaml).unwrap();
        let env = |k: &str| (k == "BACKUP_KEY").then(|| "sk-backup".to_string());
        chain(&config, &env)
    }

    fn route(s: &FallbackSpec) -> (&str, &str, Option<&str>, Option<&str>) {
        (
            s.provider.as_str(),
            s.model.as_str(),
            s.base_url.as_deref(),
            s.api_key.as_deref(),
        )
    }

    #[test]
    fn entries_are_read_in_order_with_their_keys() {
        let chain = parse(
            "fallback_providers:\n\
             - {provider: openrouter, model: anthropic/claude-sonnet-4}\n\
             - {provider: custom, model: llama3, base_url: 'http://127.0.0.1:11434/v1/', key_env: BACKUP_KEY}\n\
             - {provider: together, model: m, api_key: sk-inline, key_env: BACKUP_KEY}\n\
             - {provider: deepseek, model: chat, api_key_env: BACKUP_KEY}\n",
        );
        let routes: Vec<_> = chain.iter().map(route).collect();
        assert_eq!(
            routes,
            [
                ("openrouter", "anthropic/claude-sonnet-4", None, None),
                (
                    "custom",
                    "llama3",
                    Some("http://127.0.0.1:11434/v1"),
                    Some("sk-backup")
                ),
                ("together", "m", None, Some("sk-inline")),
                ("deepseek", "chat", None, Some("sk-backup")),
            ]
        );
    }

    #[test]
    fn invalid_entries_are_skipped_and_the_legacy_key_follows_without_repeats() {
        let chain = parse(
            "fallback_providers:\n\
             - openrouter\n\
             - {provider: openrouter}\n\
             - {model: m}\n\
             - {provider: ' ', model: m}\n\
             - {provider: openai, model: gpt-4o}\n\
             fallback_model: [{provider: OpenAI, model: GPT-4o}, {provider: deepseek, model: chat}]\n",
        );
        let routes: Vec<_> = chain.iter().map(route).collect();
        assert_eq!(
            routes,
            [
                ("openai", "gpt-4o", None, None),
                ("deepseek", "chat", None, None)
            ]
        );
        // A single mapping is a chain of one; anything else is no chain.
        assert_eq!(
            parse("fallback_providers: {provider: openai, model: m}\n").len(),
            1
        );
        assert!(parse("fallback_providers: openai\n").is_empty());
        assert!(parse("").is_empty());
        // A missing variable is no key: the provider's own credentials apply.
        let chain = parse("fallback_model: {provider: openai, model: m, key_env: UNSET}\n");
        assert_eq!(chain[0].api_key, None);
    }

    #[test]
    fn debug_hides_the_key() {
        let text = format!(
            "{:?}",
            parse("fallback_model: {provider: x, model: m, api_key: sk-hidden}\n")
        );
        assert!(!text.contains("sk-hidden"), "{text}");
    }
}
