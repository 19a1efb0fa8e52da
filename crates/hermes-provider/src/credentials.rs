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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use hermes_home::auth::AuthStore;
use serde_json::{Map, Value, json};

// The pool's keys as configured, resolved with the rest of a profile's settings.
pub use hermes_gateway_settings::provider::keys::{
    COOLDOWN_401, COOLDOWN_DEFAULT, NOUS_INVOKE_SCOPE, PoolStore, PooledKey, Strategy,
    TOKEN_EXPIRY_SKEW, cooldown, invoke_token_use_until, to_secs,
};

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
#[cfg(test)]
mod tests {
    use super::*;
    use hermes_test_support::jwt::unsigned as jwt;
    use std::time::Duration;

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
}
