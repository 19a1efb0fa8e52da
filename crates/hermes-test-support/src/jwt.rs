//! Tokens in the shape of a JWT for tests of code that reads one (key pools, `auth.json`).

use base64::Engine;

/// An unsigned JWT carrying `claims` (`{"alg":"none"}` header, a placeholder signature): the
/// code under test reads only the payload, as the gateway does with a provider's token.
pub fn unsigned(claims: &serde_json::Value) -> String {
    let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("eyJhbGciOiJub25lIn0.{payload}.sig")
}
