//! One request upstream as each API wants it: its address, its key header (and Anthropic's
//! version header), and its body (the client's for chat completions, translated for
//! Anthropic).

use serde_json::Value;

use crate::anthropic;
use crate::credentials::Pick;
use crate::error::Error;
use crate::settings::{ApiKind, ProviderSettings};

use super::Provider;

/// Where an endpoint sends requests.
fn endpoint_url(s: &ProviderSettings) -> String {
    let base = s.base_url.trim_end_matches('/');
    match s.api {
        ApiKind::ChatCompletions => format!("{base}/chat/completions"),
        // The Messages API path carries its own version: a base URL given with `/v1` (as
        // OpenAI-style URLs are) must not get a second one.
        ApiKind::AnthropicMessages => {
            format!("{}/v1/messages", base.trim_end_matches("/v1"))
        }
    }
}

impl Provider {
    /// One request on `pick`'s key (or the endpoint's single key when it has no pool).
    pub(super) fn request(
        &self,
        s: &ProviderSettings,
        pick: Option<&Pick>,
        body: &Value,
        stream: bool,
    ) -> reqwest::RequestBuilder {
        let mut req = self.client.post(endpoint_url(s)).json(body);
        let key = pick
            .map(|p| p.key.as_str())
            .or(s.api_key.as_deref())
            .filter(|k| !k.is_empty());
        req = match (s.api, key) {
            (ApiKind::ChatCompletions, Some(key)) => req.bearer_auth(key),
            (ApiKind::AnthropicMessages, Some(key)) => req.header("x-api-key", key),
            (_, None) => req,
        };
        if s.api == ApiKind::AnthropicMessages {
            req = req.header("anthropic-version", anthropic::ANTHROPIC_VERSION);
        }
        if !stream {
            // Covers the body too: a non-streaming answer must arrive whole in time.
            req = req.timeout(s.request_timeout);
        }
        req
    }
}

/// The client's body with the endpoint's `model` and the `stream` this call makes.
pub(super) fn prepare(s: &ProviderSettings, body: &mut Value, stream: bool) {
    if let Some(obj) = body.as_object_mut() {
        obj.insert("model".into(), Value::String(s.model.clone()));
        obj.insert("stream".into(), Value::Bool(stream));
    }
}

/// The body sent upstream: the client's for chat completions, translated for Anthropic.
pub(super) fn upstream_body(s: &ProviderSettings, body: Value) -> Result<Value, Error> {
    match s.api {
        ApiKind::ChatCompletions => Ok(body),
        ApiKind::AnthropicMessages => {
            anthropic::to_messages_request(&body).map_err(|reason| Error::UnsupportedRequest {
                endpoint: s.describe(),
                reason,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_api_has_its_address() {
        let mut s = ProviderSettings::new("https://api.anthropic.com/", "m");
        s.api = ApiKind::AnthropicMessages;
        assert_eq!(endpoint_url(&s), "https://api.anthropic.com/v1/messages");
        s.base_url = "https://proxy.example/anthropic/v1".into();
        assert_eq!(
            endpoint_url(&s),
            "https://proxy.example/anthropic/v1/messages"
        );
        s.api = ApiKind::ChatCompletions;
        s.base_url = "http://127.0.0.1:8080/v1/".into();
        assert_eq!(
            endpoint_url(&s),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
    }
}
