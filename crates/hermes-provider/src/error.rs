//! The provider client's one error type.
//!
//! Every way a request to the provider can fail is a variant of [`Error`], with its context
//! (the endpoint's base URL, the status, what was tried) in fields. The message says what
//! failed; [`Error::hint`] says what to do about it. The gateway wraps it as it is
//! (`hermes_gateway::Error::Provider`), so users read the same lines from both.

use std::time::Duration;

use crate::anthropic::Refusal;

/// Everything that can go wrong between the client and the provider.
///
/// Not `#[non_exhaustive]`: the gateway maps every variant to what an API client sees (its
/// HTTP status and error code) and to a metric label, without a wildcard, so a new variant
/// is a decision there too.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The HTTP client for the provider could not be built.
    #[error("cannot build the HTTP client for the provider")]
    HttpClient {
        /// The underlying failure.
        #[source]
        source: reqwest::Error,
    },

    /// The provider refused our API key (HTTP 401/403).
    #[error("the provider at `{base_url}` rejected the API key (HTTP {status}): {message}")]
    ProviderAuth {
        /// Provider base URL.
        base_url: String,
        /// 401 or 403.
        status: u16,
        /// The provider's own message.
        message: String,
        /// A key variable that was set but not sent to this address (it belongs to another
        /// provider), if any.
        withheld_key: Option<String>,
    },

    /// The provider could not be reached at all.
    #[error("cannot reach the provider at `{base_url}`")]
    ProviderUnreachable {
        /// Provider base URL.
        base_url: String,
        /// The underlying failure.
        #[source]
        source: reqwest::Error,
    },

    /// The provider did not answer in time.
    #[error("the provider at `{base_url}` did not answer within {after:?}")]
    ProviderTimeout {
        /// Provider base URL.
        base_url: String,
        /// The timeout that expired.
        after: Duration,
    },

    /// The provider answered with an error status (after any retries).
    #[error(
        "the provider at `{base_url}` answered HTTP {status} after {attempts} attempt(s): {message}"
    )]
    ProviderStatus {
        /// Provider base URL.
        base_url: String,
        /// The final HTTP status.
        status: u16,
        /// How many requests were made.
        attempts: u32,
        /// The provider's own message.
        message: String,
    },

    /// The provider's answer was not what an OpenAI-compatible API sends.
    #[error("the provider at `{base_url}` sent an invalid answer: {reason}")]
    ProviderProtocol {
        /// Provider base URL.
        base_url: String,
        /// What was wrong.
        reason: String,
    },

    /// The connection to the provider failed after it had started answering.
    #[error("the connection to the provider at `{base_url}` failed")]
    ProviderTransport {
        /// Provider base URL.
        base_url: String,
        /// The underlying failure.
        #[source]
        source: reqwest::Error,
    },

    /// The primary provider and every `fallback_providers` entry failed.
    #[error("every provider failed; tried {tried}")]
    ProviderFallbacksFailed {
        /// Each endpoint tried, with why it failed, in order.
        tried: String,
        /// The last endpoint's error (what the client's status follows).
        #[source]
        source: Box<Error>,
    },

    /// The client's request cannot be expressed in the provider's API (a 400).
    // The refusal is the reason itself, said in the message (not a cause below it).
    #[error("the request cannot be sent to {endpoint}: {reason}")]
    UnsupportedRequest {
        /// The endpoint (`anthropic claude-sonnet-4 at https://api.anthropic.com`).
        endpoint: String,
        /// What in the request has no counterpart there.
        reason: Refusal,
    },
}

impl Error {
    /// The "what to do" line for this error, when there is one.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::HttpClient { .. } => Some(
                "check the system's TLS certificates (`ca-certificates`) and any `HTTPS_PROXY` or `ALL_PROXY` setting"
                    .into(),
            ),
            Error::ProviderAuth {
                withheld_key: Some(var),
                ..
            } => Some(format!(
                "`{var}` was not sent: it is only sent to its own provider's address; set `model.api_key` in `config.yaml` to this endpoint's key"
            )),
            Error::ProviderAuth { .. } => Some(
                "check the provider key (`model.api_key` in `config.yaml`, or the provider's variable such as `OPENAI_API_KEY` in `.env`)"
                    .into(),
            ),
            Error::ProviderUnreachable { .. } => Some(
                "check `model.base_url` and that the provider is up and reachable from here"
                    .into(),
            ),
            Error::ProviderTimeout { .. } => {
                Some("raise `model.timeout` (seconds) or check the provider's load".into())
            }
            Error::ProviderStatus { status: 429, .. } => {
                Some("the provider is rate limiting: wait and retry, or raise its limits".into())
            }
            Error::ProviderStatus { .. }
            | Error::ProviderProtocol { .. }
            | Error::ProviderTransport { .. } => {
                Some("check the provider's status and `model.base_url`".into())
            }
            Error::ProviderFallbacksFailed { source, .. } => source.hint().map(|h| {
                format!("for the last one: {h}; check each of `fallback_providers` in `config.yaml` too")
            }),
            Error::UnsupportedRequest { .. } => {
                Some("change the request, or use a provider that speaks chat completions".into())
            }
        }
    }
}

/// A real `reqwest` error for the examples: a request to port 1 on loopback, which nothing
/// listens on (`connection refused`). Not to be called from inside a Tokio runtime.
#[cfg(any(test, feature = "examples"))]
#[allow(
    clippy::expect_used,
    reason = "example values for tests: a failure to build one is a failed test"
)]
fn refused_connection() -> reqwest::Error {
    crate::client::install_crypto_provider();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    runtime
        .block_on(
            reqwest::Client::new()
                .get("http://127.0.0.1:1/v1/models")
                .send(),
        )
        .expect_err("nothing listens on port 1")
}

/// A `reqwest` builder error, as a client that cannot be set up returns.
#[cfg(any(test, feature = "examples"))]
#[allow(
    clippy::expect_used,
    reason = "example values for tests: a failure to build one is a failed test"
)]
fn builder_error() -> reqwest::Error {
    reqwest::Proxy::all("http://[::1").expect_err("an unclosed IPv6 host is refused")
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::HttpClient { .. } => Error::HttpClient {
        source: builder_error(),
    },
    Error::ProviderAuth { .. } => Error::ProviderAuth {
        base_url: "https://llm.example.com/v1".into(),
        status: 401,
        message: "invalid api key".into(),
        withheld_key: Some("OPENAI_API_KEY".into()),
    },
    Error::ProviderUnreachable { .. } => Error::ProviderUnreachable {
        base_url: "http://127.0.0.1:1/v1".into(),
        source: refused_connection(),
    },
    Error::ProviderTimeout { .. } => Error::ProviderTimeout {
        base_url: "https://api.openai.com/v1".into(),
        after: Duration::from_secs(120),
    },
    Error::ProviderStatus { .. } => Error::ProviderStatus {
        base_url: "https://api.openai.com/v1".into(),
        status: 503,
        attempts: 3,
        message: "the engine is overloaded".into(),
    },
    Error::ProviderProtocol { .. } => Error::ProviderProtocol {
        base_url: "https://llm.example.com/v1".into(),
        reason: "answer is not JSON: expected value at line 1 column 1".into(),
    },
    Error::ProviderTransport { .. } => Error::ProviderTransport {
        base_url: "http://127.0.0.1:1/v1".into(),
        source: refused_connection(),
    },
    Error::ProviderFallbacksFailed { .. } => Error::ProviderFallbacksFailed {
        tried: "openai gpt-4o at https://api.openai.com/v1: the provider at `https://api.openai.com/v1` answered HTTP 503 after 4 attempt(s): overloaded; openrouter openai/gpt-4o at https://openrouter.ai/api/v1: the provider at `https://openrouter.ai/api/v1` answered HTTP 503 after 4 attempt(s): overloaded".into(),
        source: Box::new(Error::ProviderStatus {
            base_url: "https://openrouter.ai/api/v1".into(),
            status: 503,
            attempts: 4,
            message: "overloaded".into(),
        }),
    },
    Error::UnsupportedRequest { .. } => Error::UnsupportedRequest {
        endpoint: "anthropic claude-sonnet-4 at https://api.anthropic.com".into(),
        reason: Refusal::Choices {
            n: serde_json::json!(2),
        },
    },
});

// The conventions every variant follows (style, a hint, each cause said once) are checked
// for all libraries at once, where the binary renders them (`crates/hermes/src/failure.rs`).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_request_reads_as_its_refusal() {
        let e = Error::UnsupportedRequest {
            endpoint: "anthropic m at https://api.anthropic.com".into(),
            reason: Refusal::ToolName { tool: 2 },
        };
        assert_eq!(
            e.to_string(),
            "the request cannot be sent to anthropic m at https://api.anthropic.com: tool 2 has no `function.name`"
        );
        assert!(std::error::Error::source(&e).is_none());
    }

    #[test]
    fn after_fallbacks_the_hint_is_the_last_ones() {
        let e = Error::ProviderFallbacksFailed {
            tried: "a; b".into(),
            source: Box::new(Error::ProviderStatus {
                base_url: "http://b".into(),
                status: 429,
                attempts: 1,
                message: "slow down".into(),
            }),
        };
        assert_eq!(
            e.hint().as_deref(),
            Some(
                "for the last one: the provider is rate limiting: wait and retry, or raise its limits; check each of `fallback_providers` in `config.yaml` too"
            )
        );
    }
}
