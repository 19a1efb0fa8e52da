//! What a client sees when a request fails: [`ApiError`], an OpenAI-style error body
//! `{"error": {"message", "type", "code"}}` with an HTTP status. Every failure the API returns
//! has this shape, and [`ApiError::from_error`] is the one place a gateway [`Error`] becomes
//! one.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

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
        let with_hint = |e: &Error| match e.hint() {
            Some(h) => format!("{e}; {h}"),
            None => e.to_string(),
        };
        match e {
            Error::NoModel { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "model_not_configured",
                with_hint(e),
            ),
            Error::Sessions(hermes_sessions::Error::InvalidSessionId { .. }) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_session_id",
                e.to_string(),
            ),
            Error::ProviderAuth { .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "provider_auth_failed",
                with_hint(e),
            ),
            Error::ProviderUnreachable { .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "provider_unreachable",
                with_hint(e),
            ),
            Error::ProviderTimeout { .. } => ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_error",
                "provider_timeout",
                e.to_string(),
            ),
            Error::ProviderStatus { status: 429, .. } => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "rate_limit_exceeded",
                e.to_string(),
            ),
            Error::ProviderStatus {
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
            Error::ProviderStatus { .. }
            | Error::ProviderProtocol { .. }
            | Error::ProviderTransport { .. } => ApiError::new(
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "provider_error",
                e.to_string(),
            ),
            // The last endpoint's status and code, with what was tried before it.
            Error::ProviderFallbacksFailed { source, .. } => {
                let mut last = ApiError::from_error(source);
                last.message = with_hint(e);
                last
            }
            Error::UnsupportedRequest { .. } => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "unsupported_by_provider",
                e.to_string(),
            ),
            _ => ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "internal_error",
                e.to_string(),
            ),
        }
    }
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

/// A 400 for a request that does not follow the API.
pub(crate) fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        "invalid_request",
        message.into(),
    )
}
