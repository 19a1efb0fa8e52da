//! The control protocol: newline-delimited JSON over the Unix socket
//! `<runtime dir>/supervisor.sock`. `docs/control-protocol.md` is the prose version.
//!
//! Words defined here:
//! * **frame** — one JSON object on one line, at most [`MAX_REQUEST`] bytes for requests.
//! * **queued replies** — responses written for a client that it has not read yet; at most
//!   about [`MAX_QUEUED_REPLIES`] bytes before the server stops reading from it.
//! * **protocol version** — the `v` field every request and response carries; a server
//!   answers an unknown version with `unsupported_version` and the version it speaks.
//! * **error code** — the machine-readable reason of a refusal ([`ErrorCode`]); the server,
//!   the client's [`crate::Error::Refused`] and every caller that tells refusals apart use
//!   this one enum, so a code is never compared as a string.
#![deny(missing_docs)]

use serde::{Deserialize, Serialize};

use crate::spec::ServiceSpec;
use crate::status::ServiceStatus;

/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// Largest request frame the server accepts (bytes, newline excluded).
pub const MAX_REQUEST: usize = 64 * 1024;
/// Replies queued for one client beyond which the server stops reading (and parsing) that
/// client's requests until it reads its replies; one that does not for the client deadline is
/// disconnected. Keeps a client that pipelines requests and never reads from growing the
/// supervisor.
pub const MAX_QUEUED_REPLIES: usize = 1024 * 1024;
/// Largest response frame the client accepts.
pub const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// One request: the version plus a command, flattened (`{"v":1,"op":"stop","service":"x"}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Protocol version; must be [`PROTOCOL_VERSION`].
    pub v: u32,
    /// The operation.
    #[serde(flatten)]
    pub command: Command,
}

impl Request {
    /// A request at the current version.
    pub fn new(command: Command) -> Self {
        Self {
            v: PROTOCOL_VERSION,
            command,
        }
    }
}

/// The operations, tagged by `op`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Command {
    /// Status of every service, or of one.
    Status {
        /// Only this service.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        service: Option<String>,
    },
    /// Start a service (operator intent: running).
    Start {
        /// Service name.
        service: String,
    },
    /// Stop a service (operator intent: stopped).
    Stop {
        /// Service name.
        service: String,
    },
    /// Stop then start.
    Restart {
        /// Service name.
        service: String,
    },
    /// Add a service at run time.
    Register {
        /// The spec (see `ServiceSpec`'s serde form).
        spec: Box<ServiceSpec>,
    },
    /// How a registered service listens and restarts — its held sockets, hand-over, stop
    /// grace — from its configuration now: the running process goes on, the next start or
    /// restart binds a changed address (and the service's log says so).
    Listen {
        /// Service name.
        service: String,
        /// The sockets to hold.
        #[serde(default)]
        listen: Vec<crate::spec::Listen>,
        /// Restart by hand-over.
        #[serde(default)]
        handover: bool,
        /// Grace between the stop signal and SIGKILL.
        #[serde(with = "crate::spec::duration_ms")]
        stop_grace: std::time::Duration,
        /// Its memory limit, bytes (absent: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        memory_max: Option<u64>,
    },
    /// Stop, wait for the exit, forget. Answers only once the process is gone.
    Unregister {
        /// Service name.
        service: String,
    },
    /// Stop every service and end the supervisor.
    Shutdown,
}

/// Why the server refused a request: the `code` of an [`ErrorBody`], on the wire as a
/// snake_case string (`"unknown_service"`).
///
/// A client reads a code it does not know (from a newer server) as [`ErrorCode::Other`],
/// keeping the string, so an additive change to the protocol never breaks an older client.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The peer's uid may not use the control socket, or a `register` chose a log directory
    /// this client may not choose. The connection is closed after a refused peer.
    Forbidden,
    /// Too many connections at once; the connection is closed.
    Busy,
    /// A request line over [`MAX_REQUEST`] bytes; the connection is closed.
    TooLarge,
    /// Not JSON, no `v`, an unknown `op`, a missing field, a bad spec, or EOF mid-request.
    InvalidRequest,
    /// `v` is not [`PROTOCOL_VERSION`].
    UnsupportedVersion,
    /// No service by that name.
    UnknownService,
    /// `register` with a name that exists with a different spec.
    AlreadyRegistered,
    /// `start`, `restart` or `register` while the supervisor shuts down.
    ShuttingDown,
    /// The server could not encode its own response (a bug).
    Internal,
    /// A code this version does not know, as received.
    Other(String),
}

impl ErrorCode {
    /// Every code this version sends, in the order of `docs/control-protocol.md`.
    pub const KNOWN: [ErrorCode; 9] = [
        ErrorCode::Forbidden,
        ErrorCode::Busy,
        ErrorCode::TooLarge,
        ErrorCode::InvalidRequest,
        ErrorCode::UnsupportedVersion,
        ErrorCode::UnknownService,
        ErrorCode::AlreadyRegistered,
        ErrorCode::ShuttingDown,
        ErrorCode::Internal,
    ];

    /// The wire form.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::Busy => "busy",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::UnknownService => "unknown_service",
            ErrorCode::AlreadyRegistered => "already_registered",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Internal => "internal",
            ErrorCode::Other(code) => code,
        }
    }

    /// The code for a wire string; unknown strings become [`ErrorCode::Other`].
    pub fn parse(code: &str) -> Self {
        Self::KNOWN
            .into_iter()
            .find(|known| known.as_str() == code)
            .unwrap_or_else(|| ErrorCode::Other(code.to_owned()))
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        Ok(ErrorCode::parse(&code))
    }
}

/// An error in a response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// Why the request was refused.
    pub code: ErrorCode,
    /// Human message (lowercase, no trailing period).
    pub message: String,
}

/// One response; exactly one per request, in request order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Protocol version of the server.
    pub v: u32,
    /// Whether the request succeeded.
    pub ok: bool,
    /// For `status`: the services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub services: Option<Vec<ServiceStatus>>,
    /// When `ok` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorBody>,
}

impl Response {
    /// A bare success.
    pub fn ok() -> Self {
        Self {
            v: PROTOCOL_VERSION,
            ok: true,
            services: None,
            error: None,
        }
    }

    /// A success carrying status rows.
    pub fn services(rows: Vec<ServiceStatus>) -> Self {
        Self {
            services: Some(rows),
            ..Self::ok()
        }
    }

    /// A failure.
    pub fn error(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            v: PROTOCOL_VERSION,
            ok: false,
            services: None,
            error: Some(ErrorBody {
                code,
                message: message.into(),
            }),
        }
    }

    /// Serialises as one frame, newline included.
    pub fn to_frame(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_else(|_| {
            br#"{"v":1,"ok":false,"error":{"code":"internal","message":"cannot encode response"}}"#
                .to_vec()
        });
        v.push(b'\n');
        v
    }
}

/// Result of looking for a frame in a receive buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A whole line (newline removed) was taken out of the buffer.
    Complete(Vec<u8>),
    /// No newline yet and still under the limit: read more.
    Incomplete,
    /// More than the limit arrived without a newline: the peer must be cut off.
    TooLarge,
}

/// Takes the first complete frame out of `buf` (mini-redis style: check, then parse).
pub fn take_frame(buf: &mut Vec<u8>, max: usize) -> Frame {
    match buf.iter().position(|&b| b == b'\n') {
        Some(p) if p <= max => {
            let mut line: Vec<u8> = buf.drain(..=p).collect();
            line.pop();
            Frame::Complete(line)
        }
        Some(_) => Frame::TooLarge,
        None if buf.len() > max => Frame::TooLarge,
        None => Frame::Incomplete,
    }
}

/// Parses a request frame, checking the version. The error is the response to send.
pub fn parse_request(line: &[u8]) -> Result<Request, Response> {
    let value: serde_json::Value = serde_json::from_slice(line)
        .map_err(|e| Response::error(ErrorCode::InvalidRequest, format!("not JSON: {e}")))?;
    match value.get("v").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(PROTOCOL_VERSION) => {}
        Some(v) => {
            return Err(Response::error(
                ErrorCode::UnsupportedVersion,
                format!(
                    "protocol version {v} is not supported (this supervisor speaks {PROTOCOL_VERSION})"
                ),
            ));
        }
        None => {
            return Err(Response::error(
                ErrorCode::InvalidRequest,
                "missing protocol version `v`",
            ));
        }
    }
    serde_json::from_value(value)
        .map_err(|e| Response::error(ErrorCode::InvalidRequest, format!("bad request: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_a_stable_wire_form() {
        let r = Request::new(Command::Stop {
            service: "web".into(),
        });
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"v":1,"op":"stop","service":"web"}"#
        );
        let r = Request::new(Command::Status { service: None });
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"v":1,"op":"status"}"#
        );
        assert_eq!(
            parse_request(br#"{"v":1,"op":"shutdown"}"#)
                .unwrap()
                .command,
            Command::Shutdown
        );
    }

    #[test]
    fn bad_requests_get_typed_answers() {
        let code = |l: &[u8]| parse_request(l).unwrap_err().error.unwrap().code;
        assert_eq!(code(b"garbage"), ErrorCode::InvalidRequest);
        assert_eq!(code(br#"{"op":"status"}"#), ErrorCode::InvalidRequest);
        assert_eq!(
            code(br#"{"v":2,"op":"status"}"#),
            ErrorCode::UnsupportedVersion
        );
        assert_eq!(
            code(br#"{"v":1,"op":"explode"}"#),
            ErrorCode::InvalidRequest
        );
        assert_eq!(code(br#"{"v":1,"op":"stop"}"#), ErrorCode::InvalidRequest);
    }

    #[test]
    fn error_codes_keep_their_wire_form() {
        let wire: Vec<String> = ErrorCode::KNOWN
            .iter()
            .map(|c| serde_json::to_string(c).unwrap())
            .collect();
        assert_eq!(
            wire,
            [
                "\"forbidden\"",
                "\"busy\"",
                "\"too_large\"",
                "\"invalid_request\"",
                "\"unsupported_version\"",
                "\"unknown_service\"",
                "\"already_registered\"",
                "\"shutting_down\"",
                "\"internal\"",
            ]
        );
        for code in ErrorCode::KNOWN {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), code);
        }
        // A newer server's code survives the round trip.
        let body: ErrorBody =
            serde_json::from_str(r#"{"code":"rate_limited","message":"slow down"}"#).unwrap();
        assert_eq!(body.code, ErrorCode::Other("rate_limited".into()));
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"code":"rate_limited","message":"slow down"}"#
        );
        // The fallback frame is still valid JSON with a known code.
        let r = Response::error(ErrorCode::Internal, "x");
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"v":1,"ok":false,"error":{"code":"internal","message":"x"}}"#
        );
    }

    #[test]
    fn framing_keeps_incomplete_apart_from_too_large() {
        let mut b = b"{\"a\":1}\n{\"b\"".to_vec();
        assert_eq!(
            take_frame(&mut b, 100),
            Frame::Complete(b"{\"a\":1}".to_vec())
        );
        assert_eq!(take_frame(&mut b, 100), Frame::Incomplete);
        let mut big = vec![b'x'; 101];
        assert_eq!(take_frame(&mut big, 100), Frame::TooLarge);
        big.push(b'\n');
        assert_eq!(take_frame(&mut big, 100), Frame::TooLarge);
    }
}
