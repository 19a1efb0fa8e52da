//! The retry loop of one endpoint: attempts with backoff (or the provider's `Retry-After`),
//! and the key pool's rotation on 401, 402, 403 and a second 429 (the module doc of
//! [`super`], "attempt" and "pool"). What an error status becomes: [`Error::ProviderAuth`] or
//! [`Error::ProviderStatus`], with the provider's own message.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::anthropic;
use crate::credentials::{Failure, Pick};
use crate::error::Error;
use crate::settings::{ApiKind, ProviderSettings};

use super::{Endpoint, Provider};

/// Longest backoff between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Longest upstream error body we read (and quote).
const MAX_ERROR_BODY: usize = 2000;

/// Anthropic's "overloaded" status: retried like a 5xx.
const OVERLOADED: u16 = 529;

impl Provider {
    /// The retry loop of one endpoint, with its key rotation. Invariant: it returns only a
    /// success response or a final error; every retry happens before the caller has seen
    /// anything.
    pub(super) async fn send(
        &self,
        ep: &Endpoint,
        body: &Value,
        stream: bool,
    ) -> Result<reqwest::Response, Error> {
        let s = &ep.settings;
        let mut pick = ep.pool.select(SystemTime::now());
        // Keys this request has used and given up on.
        let mut tried: Vec<usize> = Vec::new();
        // The key whose first 429 was retried.
        let mut retried_429: Option<usize> = None;
        let mut attempt: u32 = 0;
        loop {
            let req = self.request(s, pick.as_ref(), body, stream);
            let result = match tokio::time::timeout(s.request_timeout, req.send()).await {
                Ok(r) => r,
                Err(_) => {
                    return Err(Error::ProviderTimeout {
                        base_url: s.base_url.clone(),
                        after: s.request_timeout,
                    });
                }
            };
            let retries_left = attempt < s.max_retries;
            match result {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status();
                    let code = status.as_u16();
                    let delay = retry_after(&resp);
                    if let Some(current) = pick.clone()
                        && let Some(rotation) = pool_verdict(s, &current, code, retried_429)
                    {
                        match rotation {
                            Verdict::RetrySame => retried_429 = Some(current.index),
                            Verdict::Rotate => {
                                let (message, reason) = error_details(resp).await;
                                let failure = Failure {
                                    status: code,
                                    reason: reason.clone(),
                                    message: Some(message.clone()),
                                    reset_at: delay.map(|d| SystemTime::now() + d),
                                };
                                let now = SystemTime::now();
                                ep.pool.mark_exhausted(current.index, &failure, now);
                                tried.push(current.index);
                                if let Some(next) = ep.pool.rotate(now, &tried) {
                                    log_rotation(ep, &current, &next, code);
                                    pick = Some(next);
                                    continue;
                                }
                                if !(is_retryable(code) && retries_left) {
                                    return Err(status_error(s, code, attempt, message));
                                }
                                let d = delay
                                    .map_or_else(|| backoff(s, attempt), |d| d.min(MAX_BACKOFF));
                                tracing::warn!(%status, attempt, delay = ?d, "provider error; retrying");
                                tokio::time::sleep(d).await;
                                attempt += 1;
                                continue;
                            }
                        }
                    }
                    if is_retryable(code) && retries_left {
                        let delay =
                            delay.map_or_else(|| backoff(s, attempt), |d| d.min(MAX_BACKOFF));
                        tracing::warn!(%status, attempt, ?delay, "provider error; retrying");
                        drop(resp);
                        tokio::time::sleep(delay).await;
                        attempt += 1;
                        continue;
                    }
                    let (message, _) = error_details(resp).await;
                    return Err(status_error(s, code, attempt, message));
                }
                Err(e) if e.is_timeout() => {
                    return Err(Error::ProviderTimeout {
                        base_url: s.base_url.clone(),
                        after: s.request_timeout,
                    });
                }
                // A refused connection, or a pooled keep-alive connection the provider had
                // already closed: nothing reached the client yet, so another attempt is safe.
                Err(e) if (e.is_connect() || e.is_request()) && retries_left => {
                    let delay = backoff(s, attempt);
                    tracing::warn!(error = %e, attempt, ?delay, "provider request failed; retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(e) if e.is_connect() => {
                    return Err(Error::ProviderUnreachable {
                        base_url: s.base_url.clone(),
                        source: e,
                    });
                }
                Err(e) => return Err(transport_error(s, e)),
            }
        }
    }
}

/// The wait before retry `attempt + 1`: the base delay doubled per attempt, capped.
fn backoff(s: &ProviderSettings, attempt: u32) -> Duration {
    let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
    s.retry_base_delay.saturating_mul(factor).min(MAX_BACKOFF)
}

/// What a pool does about an error status on its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// A first 429 on this key: retry it once (as a normal retry).
    RetrySame,
    /// Cool the key down and go on with another.
    Rotate,
}

/// The pool's verdict on `code` for the key `pick` (`None`: not the pool's business).
fn pool_verdict(
    s: &ProviderSettings,
    pick: &Pick,
    code: u16,
    retried_429: Option<usize>,
) -> Option<Verdict> {
    match code {
        401 | 402 => Some(Verdict::Rotate),
        // Anthropic's 403 says the account lacks an entitlement: another key of the same
        // account would not help, and the key is not at fault (the original's rule).
        403 if s.api == ApiKind::AnthropicMessages => None,
        403 => Some(Verdict::Rotate),
        429 if pick.pre_exhausted || retried_429 == Some(pick.index) => Some(Verdict::Rotate),
        429 => Some(Verdict::RetrySame),
        _ => None,
    }
}

fn log_rotation(ep: &Endpoint, from: &Pick, to: &Pick, code: u16) {
    let name = |p: &Pick| {
        ep.pool
            .key(p.index)
            .map(|k| k.describe())
            .unwrap_or_default()
    };
    tracing::warn!(
        endpoint = %ep.settings.describe(),
        status = code,
        "credential {} failed; rotating to {}",
        name(from),
        name(to)
    );
}

fn is_retryable(code: u16) -> bool {
    code == 429 || code == OVERLOADED || (500..600).contains(&code)
}

fn status_error(s: &ProviderSettings, code: u16, attempt: u32, message: String) -> Error {
    if matches!(code, 401 | 403) {
        Error::ProviderAuth {
            base_url: s.base_url.clone(),
            status: code,
            message,
            withheld_key: s.withheld_key.as_ref().map(|w| w.var.clone()),
        }
    } else {
        Error::ProviderStatus {
            base_url: s.base_url.clone(),
            status: code,
            attempts: attempt + 1,
            message,
        }
    }
}

/// A failure of the connection once the request was sent: a timeout, else a transport error.
pub(super) fn transport_error(s: &ProviderSettings, e: reqwest::Error) -> Error {
    let base_url = s.base_url.clone();
    if e.is_timeout() {
        Error::ProviderTimeout {
            base_url,
            after: s.request_timeout,
        }
    } else {
        Error::ProviderTransport {
            base_url,
            source: e,
        }
    }
}

fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    let v = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?;
    let secs: f64 = v.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

/// The provider's error message — `error.message` from an OpenAI- or Anthropic-style body,
/// else the body's text (truncated), else the status's reason — and its error code or type
/// (`insufficient_quota`, `rate_limit_error`), if any.
async fn error_details(resp: reqwest::Response) -> (String, Option<String>) {
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if let Ok(v) = serde_json::from_str::<Value>(&text) {
        let reason = ["/error/code", "/error/type"]
            .iter()
            .find_map(|p| v.pointer(p).and_then(Value::as_str))
            .map(str::to_string);
        if let Some(m) = anthropic::error_message(&v) {
            return (m, reason);
        }
    }
    let text = text.trim();
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("no message")
            .to_string()
    } else {
        text.chars().take(MAX_ERROR_BODY).collect()
    };
    (message, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_rotates_on_401_402_and_a_second_429_but_not_on_anthropics_403() {
        let chat = ProviderSettings::new("https://api.example/v1", "m");
        let mut messages = chat.clone();
        messages.api = ApiKind::AnthropicMessages;
        let pick = |pre_exhausted: bool| Pick {
            index: 2,
            key: "k".into(),
            pre_exhausted,
        };
        let v = |s: &ProviderSettings, code: u16, pre: bool, retried: Option<usize>| {
            pool_verdict(s, &pick(pre), code, retried)
        };
        for code in [401, 402, 403] {
            assert_eq!(v(&chat, code, false, None), Some(Verdict::Rotate), "{code}");
        }
        assert_eq!(v(&messages, 403, false, None), None);
        assert_eq!(v(&messages, 401, false, None), Some(Verdict::Rotate));
        assert_eq!(v(&chat, 429, false, None), Some(Verdict::RetrySame));
        assert_eq!(v(&chat, 429, false, Some(0)), Some(Verdict::RetrySame));
        assert_eq!(v(&chat, 429, false, Some(2)), Some(Verdict::Rotate));
        assert_eq!(v(&chat, 429, true, None), Some(Verdict::Rotate));
        for code in [400, 404, 500, 529] {
            assert_eq!(v(&chat, code, false, None), None, "{code}");
        }
        assert!(is_retryable(529) && is_retryable(503) && is_retryable(429));
        assert!(!is_retryable(402) && !is_retryable(401));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let mut s = ProviderSettings::new("http://127.0.0.1:1", "m");
        s.retry_base_delay = Duration::from_millis(100);
        assert_eq!(backoff(&s, 0), Duration::from_millis(100));
        assert_eq!(backoff(&s, 3), Duration::from_millis(800));
        assert_eq!(backoff(&s, 40), MAX_BACKOFF);
    }
}
