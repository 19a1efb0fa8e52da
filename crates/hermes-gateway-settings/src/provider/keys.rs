//! The keys of a credential pool as `auth.json` stores them ([`PooledKey`]), how a pool
//! picks one ([`Strategy`]), where its status is written back ([`PoolStore`]), and when a
//! stored key or a login's token may be used. What a pool in use does with them (picking,
//! cooling down, writing status) is the provider client's (`hermes_provider::credentials`).

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// Cooldown after a 401 (a transient auth failure may recover).
pub const COOLDOWN_401: Duration = Duration::from_secs(5 * 60);
/// Cooldown after a 429, a 402 or any other failure.
pub const COOLDOWN_DEFAULT: Duration = Duration::from_secs(60 * 60);

/// How a pool picks its key (`credential_pool_strategies.<id>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// The first available key in priority order.
    #[default]
    FillFirst,
    /// The first available key, which then goes to the back of the order.
    RoundRobin,
    /// Any available key.
    Random,
    /// The available key with the fewest requests so far.
    LeastUsed,
}

impl Strategy {
    /// The strategy named `name` as the original spells it; `None` for another word (the
    /// original then uses `fill_first`).
    pub fn parse(name: &str) -> Option<Strategy> {
        match name.trim().to_ascii_lowercase().as_str() {
            "fill_first" => Some(Strategy::FillFirst),
            "round_robin" => Some(Strategy::RoundRobin),
            "random" => Some(Strategy::Random),
            "least_used" => Some(Strategy::LeastUsed),
            _ => None,
        }
    }
}

/// One key of a pool.
#[non_exhaustive]
#[derive(Clone, PartialEq, Eq)]
pub struct PooledKey {
    /// The entry's `id` in `auth.json`; `None` for a key stored nowhere there (a variable, or
    /// `model.api_key`), whose state lives only in memory.
    pub id: Option<String>,
    /// The entry's label (`api-key-2`, `OPENAI_API_KEY`).
    pub label: String,
    /// Where the key comes from: `manual`, `env:OPENAI_API_KEY`, `model.api_key`, ...
    pub source: String,
    /// The key itself.
    pub key: String,
    /// Until when it cools down, as stored (`None`: available).
    pub exhausted_until: Option<SystemTime>,
    /// Stored as `dead`: never used.
    pub dead: bool,
    /// `request_count` as stored (for `least_used`).
    pub request_count: u64,
    /// When the key stops being usable (a login's short-lived token); `None`: never.
    pub expires_at: Option<SystemTime>,
}

impl PooledKey {
    /// A key with no stored state.
    pub fn new(
        label: impl Into<String>,
        source: impl Into<String>,
        key: impl Into<String>,
    ) -> Self {
        PooledKey {
            id: None,
            label: label.into(),
            source: source.into(),
            key: key.into(),
            exhausted_until: None,
            dead: false,
            request_count: 0,
            expires_at: None,
        }
    }

    /// The key of a stored pool entry (`key` already looked up for `env:` sources), with its
    /// stored status.
    pub fn from_entry(entry: &Map<String, Value>, key: String) -> Self {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_string);
        let source = text("source").unwrap_or_else(|| "manual".into());
        let status = text("last_status");
        PooledKey {
            id: text("id"),
            label: text("label").unwrap_or_else(|| source.clone()),
            exhausted_until: (status.as_deref() == Some("exhausted"))
                .then(|| stored_cooldown_end(entry))
                .flatten(),
            dead: status.as_deref() == Some("dead"),
            request_count: entry
                .get("request_count")
                .and_then(Value::as_u64)
                .unwrap_or(0),
            expires_at: None,
            source,
            key,
        }
    }

    /// What to call it in a log line: label and source, never the key.
    pub fn describe(&self) -> String {
        if self.label == self.source || self.source.ends_with(&format!(":{}", self.label)) {
            self.source.clone()
        } else {
            format!("{} ({})", self.label, self.source)
        }
    }
}

impl std::fmt::Debug for PooledKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PooledKey")
            .field("id", &self.id)
            .field("label", &self.label)
            .field("source", &self.source)
            .field("key", &"<redacted>")
            .field("exhausted_until", &self.exhausted_until)
            .field("dead", &self.dead)
            .finish()
    }
}

/// Where a pool's state is written back: the `auth.json` and the pool id in it.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStore {
    /// The profile's `auth.json`.
    pub path: PathBuf,
    /// The `credential_pool` key (`openrouter`, `openai-api`).
    pub pool_id: String,
}

impl PoolStore {
    /// The store of pool `pool_id` in the file at `path`.
    pub fn new(path: impl Into<PathBuf>, pool_id: impl Into<String>) -> Self {
        PoolStore {
            path: path.into(),
            pool_id: pool_id.into(),
        }
    }
}

/// Seconds since the epoch of a stored timestamp: a number (seconds, or milliseconds when
/// larger than 10^12) or an ISO-8601 string of a number, as the original's
/// `_parse_absolute_timestamp` reads it (ISO dates are not parsed here: the original writes
/// numbers).
fn epoch_secs(v: &Value) -> Option<f64> {
    let n = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (n.is_finite() && n > 0.0).then(|| if n > 1e12 { n / 1000.0 } else { n })
}

fn to_time(secs: f64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs_f64(secs)
}

/// Seconds since the epoch of `t`, as `auth.json` stores times.
pub fn to_secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The cooldown of a status code (the original's `_exhausted_ttl`).
pub fn cooldown(status: u16) -> Duration {
    if status == 401 {
        COOLDOWN_401
    } else {
        COOLDOWN_DEFAULT
    }
}

/// When a stored exhausted entry becomes available again: its reset time, else the time it
/// was marked plus the cooldown of its error code (the original's `_exhausted_until`).
fn stored_cooldown_end(entry: &Map<String, Value>) -> Option<SystemTime> {
    if let Some(reset) = entry.get("last_error_reset_at").and_then(epoch_secs) {
        return Some(to_time(reset));
    }
    let at = entry.get("last_status_at").and_then(epoch_secs)?;
    let code = entry
        .get("last_error_code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(0);
    Some(to_time(at) + cooldown(code))
}

/// The scope a Nous Portal token needs for inference.
pub const NOUS_INVOKE_SCOPE: &str = "inference:invoke";

/// How long before its expiry a login's token is no longer used (the original's
/// `NOUS_INVOKE_JWT_MIN_TTL_SECONDS`): a request must not start with a token about to lapse.
pub const TOKEN_EXPIRY_SKEW: Duration = Duration::from_secs(120);

/// Until when an inference token of a login (the Nous Portal's `agent_key`, a JWT) may be
/// used, by the original's `_nous_invoke_jwt_status` rules: a JWT whose scopes (the stored
/// `scope`, the claims' `scope` or `scp`) include `inference:invoke`, with an `exp` claim more
/// than [`TOKEN_EXPIRY_SKEW`] away. `Err` says why not. The gateway cannot refresh it: once
/// expired, the original (or a new login) must renew it.
pub fn invoke_token_use_until(
    token: &str,
    stored_scope: Option<&Value>,
    now: SystemTime,
) -> Result<SystemTime, String> {
    let claims = jwt_claims(token).ok_or("it is not a JWT")?;
    let scopes: Vec<String> = [stored_scope, claims.get("scope"), claims.get("scp")]
        .into_iter()
        .flatten()
        .flat_map(scope_values)
        .collect();
    if !scopes.iter().any(|s| s == NOUS_INVOKE_SCOPE) {
        return Err(format!("it lacks the `{NOUS_INVOKE_SCOPE}` scope"));
    }
    let exp = claims
        .get("exp")
        .and_then(Value::as_f64)
        .filter(|e| e.is_finite() && *e > 0.0)
        .ok_or("its expiry is unknown")?;
    let until = to_time(exp) - TOKEN_EXPIRY_SKEW;
    if until <= now {
        return Err("it has expired (the original renews it when it next runs)".into());
    }
    Ok(until)
}

/// The claims of a JWT (`header.payload.signature`, base64url), unverified: the provider
/// checks the signature; the gateway only reads the expiry and scope.
fn jwt_claims(token: &str) -> Option<Map<String, Value>> {
    let mut parts = token.split('.');
    let (_, payload, _, None) = (parts.next()?, parts.next()?, parts.next()?, parts.next()) else {
        return None;
    };
    match serde_json::from_slice(&base64url(payload)?).ok()? {
        Value::Object(claims) => Some(claims),
        _ => None,
    }
}

/// Decodes base64url (padding optional); `None` for any other character.
fn base64url(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((acc >> bits) & 0xff) as u8);
        }
    }
    Some(out)
}

/// Scopes in a space- or comma-separated string, or a list of such strings.
fn scope_values(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => s
            .replace(',', " ")
            .split_whitespace()
            .map(str::to_string)
            .collect(),
        Value::Array(items) => items.iter().flat_map(scope_values).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategies_parse_as_the_original_spells_them() {
        assert_eq!(Strategy::parse(" Round_Robin"), Some(Strategy::RoundRobin));
        assert_eq!(Strategy::parse("least_used"), Some(Strategy::LeastUsed));
        assert_eq!(Strategy::parse("random"), Some(Strategy::Random));
        assert_eq!(Strategy::parse("fill_first"), Some(Strategy::FillFirst));
        assert_eq!(Strategy::parse("round-robin"), None);
    }

    #[test]
    fn stored_status_is_read_as_the_original_writes_it() {
        let now = to_secs(SystemTime::now());
        let entry = |v: Value| v.as_object().unwrap().clone();
        let k = PooledKey::from_entry(
            &entry(json!({"id": "a1", "label": "work", "source": "manual",
                "last_status": "exhausted", "last_status_at": now, "last_error_code": 401})),
            "sk".into(),
        );
        let until = to_secs(k.exhausted_until.unwrap());
        assert!((until - now - 300.0).abs() < 1.0, "{until} vs {now}");
        // A reset time (here in milliseconds) wins over the cooldown.
        let k = PooledKey::from_entry(
            &entry(json!({"last_status": "exhausted", "last_status_at": now,
                "last_error_code": 429, "last_error_reset_at": (now + 5.0) * 1000.0})),
            "sk".into(),
        );
        assert!((to_secs(k.exhausted_until.unwrap()) - now - 5.0).abs() < 1.0);
        let k = PooledKey::from_entry(&entry(json!({"last_status": "ok"})), "sk".into());
        assert_eq!(
            (k.exhausted_until, k.dead, k.label.as_str()),
            (None, false, "manual")
        );
        assert!(PooledKey::from_entry(&entry(json!({"last_status": "dead"})), "sk".into()).dead);
    }

    #[test]
    fn base64url_decodes_with_or_without_padding() {
        assert_eq!(base64url("aGk").unwrap(), b"hi");
        assert_eq!(base64url("aGk=").unwrap(), b"hi");
        assert_eq!(base64url("-_8").unwrap(), [0xfb, 0xff]);
        assert_eq!(base64url("a b"), None);
    }

    #[test]
    fn debug_never_shows_a_key() {
        let text = format!("{:?}", PooledKey::new("l", "manual", "sk-very-secret"));
        assert!(!text.contains("sk-very-secret"), "{text}");
    }
}
