//! Credential pools: the keys one provider endpoint may use, which one a request takes, and
//! what a 401, 402 or 429 does to it — the original's `credential_pool` in `auth.json`
//! (hermes-agent 0.19.0, `agent/credential_pool.py` and `agent/agent_runtime_helpers.py`).
//!
//! Words:
//! * *pool* — the ordered keys of one endpoint ([`PooledKey`]): the entries of
//!   `credential_pool.<id>` that are API keys allowed to go to the endpoint's address, then
//!   the provider's variable when no stored entry already stands for it. A key configured for
//!   the endpoint itself (`model.api_key`) is a pool of one.
//! * *exhausted* — a key cooling down after a failure: 5 minutes after a 401, one hour after a
//!   429, a 402 or anything else, or until the reset time the provider gave. The original
//!   writes this state into the entry (`last_status: exhausted`, `last_status_at`,
//!   `last_error_code`, `last_error_reason`, `last_error_message`, `last_error_reset_at`), so
//!   every process sharing the volume skips the key; so does the gateway, through
//!   [`AuthStore::edit`], keeping every other key of the file. `dead` entries (a revoked
//!   OAuth login) are never used.
//! * *strategy* — `credential_pool_strategies.<id>` in `config.yaml`: `fill_first` (the
//!   default: the first available key), `round_robin`, `random`, `least_used`. Round-robin
//!   order and use counts live in memory (the original rewrites priorities on disk at every
//!   pick; the gateway does not write the file on the hot path).
//!
//! When every key is cooling down, a request still takes the one that recovers first (a pool
//! of one key keeps working as it did before, as the original's fallback to the variable
//! does), marked *pre-exhausted*: a 429 on it rotates at once.

use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hermes_home::auth::AuthStore;
use serde_json::{Map, Value, json};

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

fn to_secs(t: SystemTime) -> f64 {
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

/// Why a key failed, as written into its entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The HTTP status.
    pub status: u16,
    /// The provider's error code or type, if it gave one (`insufficient_quota`).
    pub reason: Option<String>,
    /// The provider's message.
    pub message: Option<String>,
    /// When the provider said the key recovers (`Retry-After`).
    pub reset_at: Option<SystemTime>,
}

/// The key a request uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pick {
    /// Its index in the pool.
    pub index: usize,
    /// The key.
    pub key: String,
    /// It was cooling down (every key was): a 429 rotates at once.
    pub pre_exhausted: bool,
}

#[derive(Debug, Clone)]
struct Slot {
    exhausted_until: Option<SystemTime>,
    dead: bool,
    requests: u64,
    expires_at: Option<SystemTime>,
}

impl Slot {
    /// Never usable again (dead), or not any more (its token expired).
    fn gone(&self, now: SystemTime) -> bool {
        self.dead || self.expires_at.is_some_and(|t| t <= now)
    }
}

/// A pool in use: the keys and their live state. Shared by the clones of one provider client.
#[derive(Debug, Clone)]
pub struct KeyPool {
    keys: Arc<Vec<PooledKey>>,
    strategy: Strategy,
    store: Option<PoolStore>,
    state: Arc<Mutex<PoolState>>,
}

#[derive(Debug)]
struct PoolState {
    slots: Vec<Slot>,
    /// Indices in the order `fill_first` and `round_robin` try them.
    order: Vec<usize>,
}

impl KeyPool {
    /// A pool of `keys` (priority order), written back to `store` when set.
    pub fn new(keys: Vec<PooledKey>, strategy: Strategy, store: Option<PoolStore>) -> Self {
        let slots = keys
            .iter()
            .map(|k| Slot {
                exhausted_until: k.exhausted_until,
                dead: k.dead,
                requests: k.request_count,
                expires_at: k.expires_at,
            })
            .collect();
        let order = (0..keys.len()).collect();
        KeyPool {
            keys: Arc::new(keys),
            strategy,
            store,
            state: Arc::new(Mutex::new(PoolState { slots, order })),
        }
    }

    /// True when the pool has no key at all.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key at `index`.
    pub fn key(&self, index: usize) -> Option<&PooledKey> {
        self.keys.get(index)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The key for a new request: an available one by the strategy, else the one that
    /// recovers first (pre-exhausted); `None` only when the pool is empty or every key is dead
    /// or expired.
    pub fn select(&self, now: SystemTime) -> Option<Pick> {
        if let Some(pick) = self.pick(now, &[]) {
            return Some(pick);
        }
        let state = self.lock();
        let index = state
            .order
            .iter()
            .copied()
            .filter(|&i| !state.slots[i].gone(now))
            .min_by_key(|&i| state.slots[i].exhausted_until)?;
        Some(Pick {
            index,
            key: self.keys[index].key.clone(),
            pre_exhausted: true,
        })
    }

    /// Another available key than those in `tried` (after one failed), by the strategy.
    pub fn rotate(&self, now: SystemTime, tried: &[usize]) -> Option<Pick> {
        self.pick(now, tried)
    }

    fn pick(&self, now: SystemTime, excluded: &[usize]) -> Option<Pick> {
        let mut recovered = Vec::new();
        let pick = {
            let mut guard = self.lock();
            let state = &mut *guard;
            let mut available = Vec::with_capacity(state.order.len());
            for &i in &state.order {
                let slot = &mut state.slots[i];
                if slot.gone(now) || excluded.contains(&i) {
                    continue;
                }
                match slot.exhausted_until {
                    Some(until) if until > now => continue,
                    Some(_) => {
                        // Cooled down: available again, and said so in the file as the
                        // original's `clear_expired` does.
                        slot.exhausted_until = None;
                        recovered.push(i);
                    }
                    None => {}
                }
                available.push(i);
            }
            let index = match self.strategy {
                Strategy::FillFirst => available.first().copied(),
                Strategy::RoundRobin => {
                    let first = available.first().copied();
                    if let Some(i) = first {
                        state.order.retain(|&o| o != i);
                        state.order.push(i);
                    }
                    first
                }
                Strategy::Random if !available.is_empty() => {
                    let r = std::collections::hash_map::RandomState::new()
                        .build_hasher()
                        .finish();
                    let n = u64::try_from(available.len()).unwrap_or(1);
                    usize::try_from(r % n).ok().map(|k| available[k])
                }
                Strategy::Random => None,
                Strategy::LeastUsed => available
                    .iter()
                    .copied()
                    .min_by_key(|&i| state.slots[i].requests),
            };
            if let Some(i) = index {
                state.slots[i].requests += 1;
            }
            index
        };
        for i in recovered {
            self.persist(i, cleared_status());
        }
        pick.map(|index| Pick {
            index,
            key: self.keys[index].key.clone(),
            pre_exhausted: false,
        })
    }

    /// Marks the key at `index` exhausted after `failure` (until the provider's reset time,
    /// else for the status's cooldown) and writes that into its entry.
    pub fn mark_exhausted(&self, index: usize, failure: &Failure, now: SystemTime) {
        let until = failure
            .reset_at
            .unwrap_or_else(|| now + cooldown(failure.status));
        {
            let mut state = self.lock();
            if let Some(slot) = state.slots.get_mut(index) {
                slot.exhausted_until = Some(until);
            }
        }
        if let Some(k) = self.keys.get(index) {
            tracing::warn!(
                credential = %k.describe(),
                status = failure.status,
                "credential marked exhausted, cooling down for {}s",
                until.duration_since(now).unwrap_or_default().as_secs()
            );
        }
        self.persist(index, exhausted_status(failure, now));
    }

    /// Writes `status` into the stored entry of the key at `index`, if it has one, without
    /// waiting: a failed write is logged, never a request's failure.
    fn persist(&self, index: usize, status: Map<String, Value>) {
        let (Some(store), Some(id)) = (
            self.store.clone(),
            self.keys.get(index).and_then(|k| k.id.clone()),
        ) else {
            return;
        };
        let write = move || {
            if let Err(e) = write_status(&store, &id, &status) {
                tracing::warn!(
                    path = %store.path.display(),
                    "cannot record the credential's status: {}",
                    hermes_errors::one_line(&e)
                );
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn_blocking(write);
            }
            Err(_) => write(),
        }
    }
}

/// Sets `status`'s keys on entry `id` of the pool, under `auth.json`'s lock; an entry that
/// is gone (removed meanwhile) is left gone.
pub fn write_status(
    store: &PoolStore,
    id: &str,
    status: &Map<String, Value>,
) -> Result<(), hermes_home::Error> {
    AuthStore::edit(&store.path, |auth| {
        if let Some(entry) = auth.pool_entry_mut(&store.pool_id, id) {
            for (k, v) in status {
                entry.insert(k.clone(), v.clone());
            }
        }
        Ok(())
    })
    .map(|_| ())
}

fn exhausted_status(failure: &Failure, now: SystemTime) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("last_status".into(), json!("exhausted"));
    m.insert("last_status_at".into(), json!(to_secs(now)));
    m.insert("last_error_code".into(), json!(failure.status));
    m.insert("last_error_reason".into(), json!(failure.reason));
    m.insert("last_error_message".into(), json!(failure.message));
    m.insert(
        "last_error_reset_at".into(),
        json!(failure.reset_at.map(to_secs)),
    );
    m
}

fn cleared_status() -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("last_status".into(), json!("ok"));
    for k in [
        "last_status_at",
        "last_error_code",
        "last_error_reason",
        "last_error_message",
        "last_error_reset_at",
    ] {
        m.insert(k.into(), Value::Null);
    }
    m
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
    use hermes_test_support::jwt::unsigned as jwt;

    fn keys(n: usize) -> Vec<PooledKey> {
        (0..n)
            .map(|i| PooledKey::new(format!("k{i}"), "manual", format!("key-{i}")))
            .collect()
    }

    fn fail(status: u16) -> Failure {
        Failure {
            status,
            reason: None,
            message: None,
            reset_at: None,
        }
    }

    #[test]
    fn strategies_parse_as_the_original_spells_them() {
        assert_eq!(Strategy::parse(" Round_Robin"), Some(Strategy::RoundRobin));
        assert_eq!(Strategy::parse("least_used"), Some(Strategy::LeastUsed));
        assert_eq!(Strategy::parse("random"), Some(Strategy::Random));
        assert_eq!(Strategy::parse("fill_first"), Some(Strategy::FillFirst));
        assert_eq!(Strategy::parse("round-robin"), None);
    }

    #[test]
    fn fill_first_keeps_the_first_key_until_it_fails() {
        let now = SystemTime::now();
        let pool = KeyPool::new(keys(3), Strategy::FillFirst, None);
        let picks: Vec<usize> = (0..3).map(|_| pool.select(now).unwrap().index).collect();
        assert_eq!(picks, [0, 0, 0]);
        pool.mark_exhausted(0, &fail(429), now);
        assert_eq!(pool.select(now).unwrap().index, 1);
        assert_eq!(pool.rotate(now, &[1]).unwrap().index, 2);
        assert_eq!(pool.rotate(now, &[1, 2]), None, "0 is cooling down");
        // After the cooldown (an hour for a 429) the first key is back.
        let later = now + COOLDOWN_DEFAULT + Duration::from_secs(1);
        assert_eq!(pool.select(later).unwrap().index, 0);
    }

    #[test]
    fn a_401_cools_down_for_five_minutes_and_a_reset_time_wins() {
        let now = SystemTime::now();
        let pool = KeyPool::new(keys(2), Strategy::FillFirst, None);
        pool.mark_exhausted(0, &fail(401), now);
        assert_eq!(
            pool.select(now + Duration::from_secs(299)).unwrap().index,
            1
        );
        assert_eq!(
            pool.select(now + Duration::from_secs(301)).unwrap().index,
            0
        );
        let mut f = fail(429);
        f.reset_at = Some(now + Duration::from_secs(10));
        pool.mark_exhausted(0, &f, now);
        assert_eq!(pool.select(now + Duration::from_secs(9)).unwrap().index, 1);
        assert_eq!(pool.select(now + Duration::from_secs(11)).unwrap().index, 0);
    }

    #[test]
    fn round_robin_and_least_used_spread_requests() {
        let now = SystemTime::now();
        let rr = KeyPool::new(keys(3), Strategy::RoundRobin, None);
        let picks: Vec<usize> = (0..6).map(|_| rr.select(now).unwrap().index).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
        let mut stored = keys(3);
        stored[0].request_count = 5;
        let lu = KeyPool::new(stored, Strategy::LeastUsed, None);
        let picks: Vec<usize> = (0..4).map(|_| lu.select(now).unwrap().index).collect();
        assert_eq!(picks, [1, 2, 1, 2]);
        let random = KeyPool::new(keys(4), Strategy::Random, None);
        let seen: std::collections::BTreeSet<usize> = (0..200)
            .map(|_| random.select(now).unwrap().index)
            .collect();
        assert!(seen.len() > 1, "random picked only {seen:?}");
    }

    #[test]
    fn when_every_key_cools_down_the_first_to_recover_is_used_pre_exhausted() {
        let now = SystemTime::now();
        let pool = KeyPool::new(keys(2), Strategy::FillFirst, None);
        pool.mark_exhausted(0, &fail(429), now);
        pool.mark_exhausted(1, &fail(401), now);
        let pick = pool.select(now).unwrap();
        assert_eq!((pick.index, pick.pre_exhausted), (1, true));
        let mut dead = keys(1);
        dead[0].dead = true;
        assert_eq!(
            KeyPool::new(dead, Strategy::FillFirst, None).select(now),
            None
        );
        assert_eq!(
            KeyPool::new(vec![], Strategy::FillFirst, None).select(now),
            None
        );
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
    fn exhaustion_is_written_into_the_entry_keeping_every_other_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        std::fs::write(
            &path,
            r#"{"version": 1, "providers": {}, "mine": 1, "credential_pool": {"openrouter": [
                {"id": "a1", "label": "work", "source": "manual", "access_token": "sk-1",
                 "priority": 0, "future_field": [1, 2]}]}}"#,
        )
        .unwrap();
        let mut k = PooledKey::new("work", "manual", "sk-1");
        k.id = Some("a1".into());
        let pool = KeyPool::new(
            vec![k],
            Strategy::FillFirst,
            Some(PoolStore::new(&path, "openrouter")),
        );
        let now = SystemTime::now();
        let f = Failure {
            status: 429,
            reason: Some("rate_limit_exceeded".into()),
            message: Some("slow down".into()),
            reset_at: None,
        };
        pool.mark_exhausted(0, &f, now);
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let e = &saved["credential_pool"]["openrouter"][0];
        assert_eq!(e["last_status"], "exhausted");
        assert_eq!(e["last_error_code"], 429);
        assert_eq!(e["last_error_reason"], "rate_limit_exceeded");
        assert_eq!(e["last_error_message"], "slow down");
        assert!((e["last_status_at"].as_f64().unwrap() - to_secs(now)).abs() < 0.01);
        assert_eq!(e["access_token"], "sk-1");
        assert_eq!(e["future_field"], json!([1, 2]));
        assert_eq!(saved["mine"], 1);
        // Cooled down: the next pick clears it, in the file too.
        pool.select(now + COOLDOWN_DEFAULT + Duration::from_secs(1))
            .unwrap();
        let saved: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let e = &saved["credential_pool"]["openrouter"][0];
        assert_eq!(
            (&e["last_status"], &e["last_error_code"]),
            (&json!("ok"), &Value::Null)
        );
    }

    #[test]
    fn a_login_token_is_used_until_shortly_before_it_expires() {
        let now = SystemTime::now();
        let exp = to_secs(now) + 3600.0;
        let token = jwt(&json!({"scope": "inference:invoke openid", "exp": exp}));
        let until = invoke_token_use_until(&token, None, now).unwrap();
        assert!((to_secs(until) - (exp - 120.0)).abs() < 0.01);
        // The scope may come from the stored state, or as a list.
        let bare = jwt(&json!({"exp": exp}));
        assert!(invoke_token_use_until(&bare, Some(&json!("inference:invoke")), now).is_ok());
        let listed = jwt(&json!({"scp": ["inference:invoke"], "exp": exp}));
        assert!(invoke_token_use_until(&listed, None, now).is_ok());
        let why = |t: &str| invoke_token_use_until(t, None, now).unwrap_err();
        assert!(why(&bare).contains("scope"));
        assert!(why("not-a-jwt").contains("not a JWT"));
        assert!(why(&jwt(&json!({"scope": "inference:invoke"}))).contains("expiry"));
        let soon = jwt(&json!({"scope": "inference:invoke", "exp": to_secs(now) + 60.0}));
        assert!(why(&soon).contains("expired"));
        // The pool stops using it once it expires.
        let mut k = PooledKey::new("nous", "providers.nous", token);
        k.expires_at = Some(until);
        let pool = KeyPool::new(vec![k], Strategy::FillFirst, None);
        assert!(pool.select(now).is_some());
        assert_eq!(pool.select(until + Duration::from_secs(1)), None);
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
