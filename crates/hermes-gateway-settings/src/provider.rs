//! The provider client's configuration, already resolved: where an endpoint is, the API it
//! speaks, its keys, timeouts and retries, and its `fallback_providers` chain. Nothing here
//! reads a file or the environment; resolving these from a profile (`config.yaml`, `.env`,
//! `auth.json`, which key may go where) is [`crate::resolve`]'s job. The provider client
//! (`hermes-provider`) takes these as they are.

pub mod fallback;
pub mod keys;

use std::time::Duration;

use keys::{PoolStore, PooledKey, Strategy};

/// How to reach one endpoint (the primary or a fallback), already resolved.
#[non_exhaustive]
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    /// Base URL; `/chat/completions` is appended (`https://api.openai.com/v1`).
    pub base_url: String,
    /// Model name sent upstream (`model.default`).
    pub model: String,
    /// Bearer key for the provider; `None` for providers that need none (local servers).
    pub api_key: Option<String>,
    /// A key that was set but not sent because it belongs to another address; logged once
    /// when the client is built, and named in the hint of a 401 from the provider.
    pub withheld_key: Option<WithheldKey>,
    /// Time allowed to open a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Time allowed for a whole non-streaming answer, or for a stream's response headers.
    pub request_timeout: Duration,
    /// Longest silence allowed between two pieces of a streamed answer.
    pub idle_timeout: Duration,
    /// Retries after the first attempt on 429, 5xx and connection failures.
    pub max_retries: u32,
    /// Backoff before the first retry; doubled each time, capped at 30 s.
    pub retry_base_delay: Duration,
    /// The provider's name as configured (`openai`, `openrouter`, `custom`), for log lines
    /// and errors; empty for an endpoint built in code.
    pub name: String,
    /// The API the endpoint speaks.
    pub api: ApiKind,
    /// The keys of its credential pool, in priority order (see [`keys`]). When
    /// empty, [`ProviderSettings::api_key`] is the one key (or none).
    pub credentials: Vec<PooledKey>,
    /// How the pool picks a key (`credential_pool_strategies.<id>`).
    pub strategy: Strategy,
    /// Where the pool's key status is written back (`auth.json`), when its keys are stored.
    pub pool_store: Option<PoolStore>,
    /// Stored logins this endpoint cannot use (an OAuth login that needs a refresh flow), by
    /// description; logged once when the client is built.
    pub unusable: Vec<String>,
    /// The `fallback_providers` chain, tried in order when this endpoint fails.
    pub fallbacks: Vec<ProviderSettings>,
}

/// The API an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiKind {
    /// OpenAI chat completions: `POST <base_url>/chat/completions`, `Authorization: Bearer`.
    #[default]
    ChatCompletions,
    /// Anthropic's Messages API: `POST <base_url>/v1/messages`, `x-api-key` and
    /// `anthropic-version`.
    AnthropicMessages,
}

impl ProviderSettings {
    /// Settings with the built-in timeouts (10 s connect, 300 s request, 120 s idle, 3
    /// retries starting at 500 ms).
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        ProviderSettings {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            withheld_key: None,
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(300),
            idle_timeout: Duration::from_secs(120),
            max_retries: 3,
            retry_base_delay: Duration::from_millis(500),
            name: String::new(),
            api: ApiKind::ChatCompletions,
            credentials: Vec::new(),
            strategy: Strategy::FillFirst,
            pool_store: None,
            unusable: Vec::new(),
            fallbacks: Vec::new(),
        }
    }

    /// How the log and errors name this endpoint: `name model at base_url`.
    pub fn describe(&self) -> String {
        if self.name.is_empty() {
            format!("{} at {}", self.model, self.base_url)
        } else {
            format!("{} {} at {}", self.name, self.model, self.base_url)
        }
    }
}

/// A provider key that exists but is not sent, and why (for the one warning line).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WithheldKey {
    /// The variable whose value was withheld (`OPENAI_API_KEY`).
    pub var: String,
    /// Why, and what to do instead.
    pub reason: String,
}

impl WithheldKey {
    /// The key of `var` withheld because of `reason`.
    pub fn new(var: impl Into<String>, reason: impl Into<String>) -> Self {
        WithheldKey {
            var: var.into(),
            reason: reason.into(),
        }
    }
}

/// Secrets show as `<redacted>` so settings can be logged with `{:?}`.
fn redact(key: Option<&String>) -> Option<&'static str> {
    key.map(|_| "<redacted>")
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &redact(self.api_key.as_ref()))
            .field("withheld_key", &self.withheld_key)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_base_delay", &self.retry_base_delay)
            .field("name", &self.name)
            .field("api", &self.api)
            .field("credentials", &self.credentials)
            .field("strategy", &self.strategy)
            .field("pool_store", &self.pool_store)
            .field("unusable", &self.unusable)
            .field("fallbacks", &self.fallbacks)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_the_key() {
        let mut p = ProviderSettings::new("http://x", "m");
        p.api_key = Some("sk-secret".into());
        let shown = format!("{p:?}");
        assert!(!shown.contains("sk-secret"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn an_endpoint_is_described_by_name_model_and_address() {
        let mut p = ProviderSettings::new("https://api.example/v1", "m");
        assert_eq!(p.describe(), "m at https://api.example/v1");
        p.name = "openai".into();
        assert_eq!(p.describe(), "openai m at https://api.example/v1");
    }
}
