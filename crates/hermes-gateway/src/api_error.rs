//! What a client sees when a request fails: [`ApiError`], an OpenAI-style error body
//! `{"error": {"message", "type", "code"}}` with an HTTP status. Every failure the API returns
//! has this shape, and [`ApiError::from_error`] is the one place a gateway [`Error`] becomes
//! one (a provider's error, met before the gateway wraps it, through
//! [`ApiError::from_provider`], which `from_error` uses too).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use hermes_provider::Error as ProviderError;

use crate::error::Error;

/// An OpenAI-style error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// `error.message`.
    pub message: String,
    /// `error.type` (`invalid_request_error`, `authentication_error`, `server_error`, ...).
    pub kind: &'static str,
    /// `error.code` (`invalid_api_key`, `model_not_configured`, ...).
    pub code: &'static str,
}

impl ApiError {
    pub(crate) fn new(
        status: StatusCode,
        kind: &'static str,
        code: &'static str,
        message: String,
    ) -> Self {
        ApiError {
            status,
            message,
            kind,
            code,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "code": self.code}})
    }

    /// Maps a gateway error to what the client sees. The message carries the hint, so an API
    /// client learns what to fix without reading the gateway's log.
    pub fn from_error(e: &Error) -> ApiError {
        match e {
            Error::NoModel { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "model_not_configured",
                with_hint(e.to_string(), e.hint()),
            ),
            Error::Sessions(hermes_sessions::Error::InvalidSessionId { .. }) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_session_id",
                e.to_string(),
            ),
            Error::Provider(e) => ApiError::from_provider(e),
            _ => internal(e.to_string()),
        }
    }

    /// Maps a provider error to what the client sees (as [`ApiError::from_error`]).
    pub fn from_provider(e: &ProviderError) -> ApiError {
        let hinted = |e: &ProviderError| with_hint(e.to_string(), e.hint());
        match e {
            ProviderError::ProviderAuth { .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "provider_auth_failed",
                hinted(e),
            ),
            ProviderError::ProviderUnreachable { .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "provider_unreachable",
                hinted(e),
            ),
            ProviderError::ProviderTimeout { .. } => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_error",
                "provider_timeout",
                e.to_string(),
            ),
            ProviderError::ProviderStatus { status: 429, .. } => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "rate_limit_exceeded",
                e.to_string(),
            ),
            ProviderError::ProviderStatus {
                status, message, ..
            } if (400..500).contains(status) => {
                // The request itself was refused: pass the provider's status and words on.
                ApiError::new(
                    StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
                    "invalid_request_error",
                    "provider_rejected_request",
                    message.clone(),
                )
            }
            ProviderError::ProviderStatus { .. }
            | ProviderError::ProviderProtocol { .. }
            | ProviderError::ProviderTransport { .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "provider_error",
                e.to_string(),
            ),
            // The last endpoint's status and code, with what was tried before it.
            ProviderError::ProviderFallbacksFailed { source, .. } => {
                let mut last = ApiError::from_provider(source);
                last.message = hinted(e);
                last
            }
            ProviderError::UnsupportedRequest { .. } => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "unsupported_by_provider",
                e.to_string(),
            ),
            ProviderError::HttpClient { .. } => internal(e.to_string()),
        }
    }
}

/// `message; hint`, or the message alone.
fn with_hint(message: String, hint: Option<String>) -> String {
    match hint {
        Some(h) => format!("{message}; {h}"),
        None => message,
    }
}

/// A 500 for a failure of the gateway itself.
fn internal(message: String) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        "internal_error",
        message,
    )
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = %self.status, code = self.code, "{}", self.message);
        }
        let mut resp = (self.status, axum::Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError::from_error(&e)
    }
}

impl From<hermes_sessions::Error> for ApiError {
    fn from(e: hermes_sessions::Error) -> Self {
        ApiError::from_error(&Error::from(e))
    }
}

impl From<ProviderError> for ApiError {
    fn from(e: ProviderError) -> Self {
        ApiError::from_provider(&e)
    }
}

/// A 500 for an answer whose turn could not be stored in its session (a full volume): the
/// client must not count it in the session's history, which does not hold it.
pub(crate) fn not_stored(session: &str, e: &hermes_sessions::Error) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        "session_not_stored",
        format!(
            "the answer could not be stored in session `{session}`, which does not hold this \
             turn: {e}; send the turn again once the volume has room"
        ),
    )
}

/// A 400 for a request that does not follow the API.
pub(crate) fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        "invalid_request",
        message.into(),
    )
}
