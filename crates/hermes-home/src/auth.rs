//! `auth.json`: provider credentials of a profile.
//!
//! Shape (shared with the original): `{"version": 1, "providers": {<id>: {...}},
//! "active_provider": <id|null>, "credential_pool": {...}, "updated_at": <ISO-8601 UTC>}`.
//! Unknown keys are kept.
//!
//! Loading rules, in order — each exists because getting it wrong loses credentials:
//! * missing file → an empty store;
//! * permission denied → [`Error::AuthUnreadable`] naming the owner, the mode and the `chown`
//!   that fixes it; the file is left exactly as it is (degrading to an empty store would let
//!   the next save erase every credential — the original's bug);
//! * any other read error → [`Error::Io`], file untouched;
//! * damaged content ([`AuthStore::parse`]: not UTF-8, not JSON, not a JSON object, or a
//!   `providers` / `credential_pool` that is not an object) → the file is *copied* aside to
//!   `auth.json.corrupt.<timestamp>` and an empty store is returned with a [`CorruptCopy`]
//!   report, so the caller can say where the old bytes are; [`AuthStore::edit`] replaces
//!   such a file only once the copy exists.
//!
//! The only way to write is [`AuthStore::edit`]: it holds the sibling `auth.lock` (the
//! original's lock file, so both implementations exclude each other) from the load to the
//! atomic 0600 write, so credentials another process saves meanwhile are never lost.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::Error;
use crate::atomic::write_atomic;
use crate::{damage, lock};

/// Why a file is damaged, and where it was copied (or why the copy failed).
type Damaged = Option<(String, Result<PathBuf, Error>)>;

/// The mode of `auth.json` and of `auth.lock`.
const MODE: u32 = 0o600;

/// The credential store.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthStore {
    doc: Map<String, Value>,
}

/// Where an unparseable `auth.json` was preserved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptCopy {
    /// The file that failed to parse.
    pub path: PathBuf,
    /// Where its bytes were copied, or `None` if the copy itself failed.
    pub preserved_at: Option<PathBuf>,
    /// The parser's description.
    pub reason: String,
}

impl CorruptCopy {
    fn report(path: &Path, reason: String, copy: Result<PathBuf, Error>) -> Self {
        CorruptCopy {
            path: path.to_path_buf(),
            preserved_at: copy.ok(),
            reason,
        }
    }
}

/// The result of [`AuthStore::load`].
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// The store (empty when the file was missing or corrupt).
    pub store: AuthStore,
    /// Set when the file existed but could not be parsed.
    pub corrupt: Option<CorruptCopy>,
}

impl Default for AuthStore {
    fn default() -> Self {
        let mut doc = Map::new();
        doc.insert("version".into(), json!(1));
        doc.insert("providers".into(), json!({}));
        AuthStore { doc }
    }
}

impl AuthStore {
    /// Loads the store at `path` following the rules in the module doc.
    pub fn load(path: &Path) -> Result<Loaded, Error> {
        let (store, damaged) = Self::read(path)?;
        Ok(Loaded {
            store,
            corrupt: damaged.map(|(reason, copy)| CorruptCopy::report(path, reason, copy)),
        })
    }

    /// Parses the bytes of an `auth.json`, or says why they are damaged: not UTF-8 (a lossy
    /// decode would change a token), not JSON, not a JSON object, or a `providers` or
    /// `credential_pool` that is present and not an object (the store would drop it). A missing
    /// or null `providers` is an empty one.
    pub fn parse(bytes: &[u8]) -> Result<AuthStore, String> {
        let text = damage::decode(bytes).map_err(|bad| bad.to_string())?;
        let mut doc = match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(doc)) => doc,
            Ok(_) => return Err("not a JSON object".into()),
            Err(e) => return Err(e.to_string()),
        };
        for key in ["providers", "credential_pool"] {
            if doc.get(key).is_some_and(|v| !v.is_object() && !v.is_null()) {
                return Err(format!("`{key}` is not an object"));
            }
        }
        if !doc.get("providers").is_some_and(Value::is_object) {
            doc.insert("providers".into(), json!({}));
        }
        Ok(AuthStore { doc })
    }

    /// The store at `path` and, when the file is damaged, why and the result of copying it
    /// aside (kept as a `Result` so [`AuthStore::edit`] can refuse to replace an uncopied file).
    fn read(path: &Path) -> Result<(AuthStore, Damaged), Error> {
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok((AuthStore::default(), None));
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                return Err(unreadable(path, e));
            }
            Err(e) => return Err(Error::io("read", path, e)),
        };
        Ok(match AuthStore::parse(&bytes) {
            Ok(store) => (store, None),
            Err(reason) => (AuthStore::default(), Some((reason, damage::preserve(path)))),
        })
    }

    /// Provider ids that have stored state.
    pub fn providers(&self) -> Vec<String> {
        self.doc
            .get("providers")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The active provider id, if any.
    pub fn active_provider(&self) -> Option<&str> {
        self.doc.get("active_provider").and_then(Value::as_str)
    }

    /// One provider's state.
    pub fn provider(&self, id: &str) -> Option<&Value> {
        self.doc.get("providers")?.get(id)
    }

    /// Replaces one provider's state.
    pub fn set_provider(&mut self, id: &str, state: Value) {
        let providers = self.doc.entry("providers").or_insert_with(|| json!({}));
        if let Value::Object(map) = providers {
            map.insert(id.to_string(), state);
        }
    }

    /// Sets the active provider.
    pub fn set_active_provider(&mut self, id: Option<&str>) {
        self.doc.insert(
            "active_provider".into(),
            id.map_or(Value::Null, |id| json!(id)),
        );
    }

    /// The pool ids (`credential_pool` keys: `openrouter`, `openai-api`, `custom:<name>`) that
    /// hold at least one entry, sorted.
    pub fn pool_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .doc
            .get("credential_pool")
            .and_then(Value::as_object)
            .map(|pools| {
                pools
                    .iter()
                    .filter(|(_, v)| v.as_array().is_some_and(|a| !a.is_empty()))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids
    }

    /// The entries of one pool, as stored (objects only), sorted by their `priority` (stable,
    /// so equal priorities keep file order) as the original orders them.
    pub fn pool(&self, id: &str) -> Vec<&Map<String, Value>> {
        let mut entries: Vec<&Map<String, Value>> = self
            .doc
            .get("credential_pool")
            .and_then(|p| p.get(id))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_object).collect())
            .unwrap_or_default();
        entries.sort_by_key(|e| e.get("priority").and_then(Value::as_i64).unwrap_or(0));
        entries
    }

    /// The stored entry `entry_id` of pool `pool_id`, to change in place (every key the caller
    /// does not touch is kept).
    pub fn pool_entry_mut(
        &mut self,
        pool_id: &str,
        entry_id: &str,
    ) -> Option<&mut Map<String, Value>> {
        self.doc
            .get_mut("credential_pool")?
            .get_mut(pool_id)?
            .as_array_mut()?
            .iter_mut()
            .filter_map(Value::as_object_mut)
            .find(|e| e.get("id").and_then(Value::as_str) == Some(entry_id))
    }

    /// Changes the store at `path`: loads it (by the rules in the module doc), runs `change`
    /// and, if `change` changed the store, writes it (atomic, 0600, `version` and `updated_at`
    /// refreshed), all while holding `auth.lock`. Returns `change`'s value and, when the file
    /// was corrupt, where it was copied before being replaced; a corrupt file that could not
    /// be copied is never replaced. When `change` fails nothing is written.
    pub fn edit<T>(
        path: &Path,
        change: impl FnOnce(&mut AuthStore) -> Result<T, Error>,
    ) -> Result<(T, Option<CorruptCopy>), Error> {
        lock::with_locked(&lock::writers_lock(path), MODE, || {
            let (mut store, damaged) = AuthStore::read(path)?;
            let before = store.clone();
            let out = change(&mut store)?;
            let changed = store != before;
            let corrupt = match damaged {
                None => None,
                // Without a copy, replacing the file would lose its bytes for good.
                Some((_, Err(e))) if changed => return Err(e),
                Some((reason, copy)) => Some(CorruptCopy::report(path, reason, copy)),
            };
            if changed {
                store.write(path)?;
            }
            Ok((out, corrupt))
        })
    }

    /// Writes the store; only [`AuthStore::edit`] calls this, with the lock held.
    fn write(&mut self, path: &Path) -> Result<(), Error> {
        self.doc.insert("version".into(), json!(1));
        self.doc
            .insert("updated_at".into(), json!(crate::time::iso_utc_now()));
        let mut text = serde_json::to_string_pretty(&self.doc).unwrap_or_default();
        text.push('\n');
        write_atomic(path, text.as_bytes(), MODE)
    }
}

/// One stored credential as `hermes auth list` and `hermes dump` show it: never the key, only
/// its masked form.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CredentialView {
    /// Its position in its pool, from 1, in priority order (the original's `#N`).
    pub index: usize,
    /// The entry's `id`.
    pub id: String,
    /// The entry's label.
    pub label: String,
    /// `api_key` or `oauth`.
    pub auth_type: String,
    /// Where the key comes from: `manual`, `env:OPENAI_API_KEY`, ...
    pub source: String,
    /// The key masked ([`mask_secret`]); for an `env:` entry, the variable's value if set
    /// here, else empty.
    pub key: String,
    /// `ok`, `exhausted` or `dead` (`ok` when the entry says nothing).
    pub status: String,
    /// The stored HTTP status of its last failure.
    pub last_error_code: Option<u64>,
    /// Seconds until an exhausted key is tried again (0: it may be tried now).
    pub retry_in_secs: Option<u64>,
    /// The entry a request would take now (the first usable one), marked `←` in the list.
    pub current: bool,
}

/// Cooldown of a key after a failure, as the original's `_exhausted_ttl`: 5 minutes after a
/// 401, one hour otherwise.
fn cooldown_secs(code: Option<u64>) -> f64 {
    if code == Some(401) { 300.0 } else { 3600.0 }
}

/// Seconds since the epoch in a stored timestamp (a number, milliseconds above 10^12, or a
/// number in a string), as the original's `_parse_absolute_timestamp` reads numbers.
fn stored_secs(v: Option<&Value>) -> Option<f64> {
    let n = match v? {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    (n.is_finite() && n > 0.0).then(|| if n > 1e12 { n / 1000.0 } else { n })
}

impl AuthStore {
    /// The credentials of pool `id` as shown to a person. `env` looks up a variable (for
    /// `env:` entries, whose key the file does not hold); `now` is seconds since the epoch.
    pub fn credential_views(
        &self,
        id: &str,
        env: &dyn Fn(&str) -> Option<String>,
        now: f64,
    ) -> Vec<CredentialView> {
        let mut views: Vec<CredentialView> = self
            .pool(id)
            .iter()
            .enumerate()
            .map(|(i, e)| view(i + 1, e, env, now))
            .collect();
        let usable = |v: &CredentialView| {
            !v.key.is_empty()
                && v.auth_type == "api_key"
                && match v.status.as_str() {
                    "dead" => false,
                    "exhausted" => v.retry_in_secs == Some(0),
                    _ => true,
                }
        };
        if let Some(v) = views.iter_mut().find(|v| usable(v)) {
            v.current = true;
        }
        views
    }
}

fn view(
    index: usize,
    e: &Map<String, Value>,
    env: &dyn Fn(&str) -> Option<String>,
    now: f64,
) -> CredentialView {
    let text = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let source = Some(text("source"))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "manual".into());
    let key = match source.strip_prefix("env:") {
        Some(var) => env(var).unwrap_or_default(),
        None => text("access_token"),
    };
    let status = Some(text("last_status"))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "ok".into());
    let code = e.get("last_error_code").and_then(Value::as_u64);
    let retry_in_secs = (status == "exhausted").then(|| {
        let until = stored_secs(e.get("last_error_reset_at"))
            .or_else(|| stored_secs(e.get("last_status_at")).map(|at| at + cooldown_secs(code)));
        // Rounded up, so "0" means the cooldown is over.
        until.map_or(0, |u| (u - now).max(0.0).ceil() as u64)
    });
    CredentialView {
        index,
        id: text("id"),
        label: Some(text("label"))
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| source.clone()),
        auth_type: Some(text("auth_type"))
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "api_key".into()),
        key: mask_secret(&key),
        source,
        status,
        last_error_code: code,
        retry_in_secs,
        current: false,
    }
}

/// A secret as the original shows it (`agent/redact.py`, `mask_secret`): the first 4 and last
/// 4 characters around `...`, and `***` for a value shorter than 12 characters (whose ends
/// would give away too much of it); empty stays empty.
pub fn mask_secret(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    match chars.len() {
        0 => String::new(),
        n if n < 12 => "***".into(),
        n => format!(
            "{}...{}",
            chars[..4].iter().collect::<String>(),
            chars[n - 4..].iter().collect::<String>()
        ),
    }
}

fn unreadable(path: &Path, source: io::Error) -> Error {
    let Ok(meta) = fs::metadata(path) else {
        return Error::io("read", path, source);
    };
    let me = nix::unistd::geteuid().as_raw();
    Error::AuthUnreadable {
        path: path.to_path_buf(),
        owner: describe_uid(meta.uid()),
        mode: meta.mode() & 0o7777,
        current: describe_uid(me),
        current_name: user_name(me).unwrap_or_else(|| me.to_string()),
    }
}

/// `name (uid N)`, or `uid N` when the uid has no passwd entry.
pub fn describe_uid(uid: u32) -> String {
    match user_name(uid) {
        Some(name) => format!("{name} (uid {uid})"),
        None => format!("uid {uid}"),
    }
}

fn user_name(uid: u32) -> Option<String> {
    nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_is_empty_store() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = AuthStore::load(&dir.path().join("auth.json")).unwrap();
        assert!(loaded.store.providers().is_empty());
        assert!(loaded.corrupt.is_none());
    }

    #[test]
    fn corrupt_file_is_copied_aside_and_left_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        fs::write(&path, "{not json").unwrap();
        let loaded = AuthStore::load(&path).unwrap();
        let corrupt = loaded.corrupt.unwrap();
        let copy = corrupt.preserved_at.unwrap();
        assert!(
            copy.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("auth.json.corrupt.")
        );
        assert_eq!(fs::read_to_string(copy).unwrap(), "{not json");
        assert_eq!(fs::read_to_string(&path).unwrap(), "{not json");
    }

    #[test]
    fn a_writer_waits_for_the_lock_held_by_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let held = lock::hold(&dir.path().join("auth.lock"));
        lock::test_timeout::set(std::time::Duration::from_millis(100));
        let add = |store: &mut AuthStore| {
            store.set_provider("nous", json!({"access_token": "t"}));
            Ok(())
        };
        assert!(
            matches!(AuthStore::edit(&path, add), Err(Error::LockTimeout { .. })),
            "the edit must wait while another process holds `auth.lock`"
        );
        assert!(!path.exists());
        drop(held);
        AuthStore::edit(&path, add).unwrap();
        assert_eq!(AuthStore::load(&path).unwrap().store.providers(), ["nous"]);
    }

    #[test]
    fn concurrent_edits_keep_every_provider() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let n = 20;
        let shared = path.clone();
        for result in crate::test_support::race(n, move |i| {
            AuthStore::edit(&shared, |store| {
                store.set_provider(&format!("p{i}"), json!({"n": i}));
                Ok(())
            })
        }) {
            result.unwrap();
        }
        let store = AuthStore::load(&path).unwrap().store;
        let lost: Vec<usize> = (0..n)
            .filter(|i| store.provider(&format!("p{i}")) != Some(&json!({"n": i})))
            .collect();
        assert!(
            lost.is_empty(),
            "lost {} of {n} providers: {lost:?}",
            lost.len()
        );
    }

    #[test]
    fn editing_a_corrupt_store_copies_it_first_and_reports_where() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        fs::write(&path, "{not json").unwrap();
        let ((), corrupt) = AuthStore::edit(&path, |store| {
            store.set_active_provider(Some("nous"));
            Ok(())
        })
        .unwrap();
        let copy = corrupt.unwrap().preserved_at.unwrap();
        assert_eq!(fs::read_to_string(copy).unwrap(), "{not json");
        let store = AuthStore::load(&path).unwrap();
        assert_eq!(store.store.active_provider(), Some("nous"));
        assert!(store.corrupt.is_none());
    }

    #[test]
    fn save_keeps_unknown_keys_and_the_files_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        fs::write(
            &path,
            "\u{feff}{\"providers\": {\"nous\": {\"access_token\": \"t\"}}, \"extra\": 5}",
        )
        .unwrap();
        assert_eq!(AuthStore::load(&path).unwrap().store.providers(), ["nous"]);
        AuthStore::edit(&path, |store| {
            store.set_active_provider(Some("nous"));
            Ok(())
        })
        .unwrap();
        let saved: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(saved["extra"], 5);
        assert_eq!(saved["version"], 1);
        assert_eq!(saved["active_provider"], "nous");
        // An existing file keeps its mode (doctor warns about a readable one); a new one is
        // created owner-only.
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o644
        );
        let fresh = dir.path().join("fresh-auth.json");
        AuthStore::edit(&fresh, |store| {
            store.set_active_provider(Some("nous"));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            fs::metadata(&fresh).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn invalid_utf8_is_corrupt_not_decoded_lossily() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("auth.json");
        let damaged: &[u8] = b"{\"providers\": {\"nous\": {\"access_token\": \"t\xff\"}}}";
        fs::write(&path, damaged).unwrap();
        let loaded = AuthStore::load(&path).unwrap();
        let corrupt = loaded
            .corrupt
            .expect("a token that is not UTF-8 is damage, not a value");
        assert!(corrupt.reason.contains("UTF-8"), "{}", corrupt.reason);
        assert_eq!(fs::read(corrupt.preserved_at.unwrap()).unwrap(), damaged);
        assert!(loaded.store.providers().is_empty());
        assert_eq!(fs::read(&path).unwrap(), damaged, "original left in place");
    }

    #[test]
    fn secrets_are_masked_as_the_original_masks_them() {
        // The original's own examples (agent/redact.py, mask_secret).
        assert_eq!(mask_secret("sk-proj-abcdef1234567890"), "sk-p...7890");
        assert_eq!(mask_secret("short"), "***");
        assert_eq!(mask_secret(""), "");
        assert_eq!(mask_secret("12345678901"), "***");
        assert_eq!(mask_secret("123456789012"), "1234...9012");
        // Characters, not bytes: a multi-byte key is never cut inside a character.
        assert_eq!(mask_secret("ééééabcdefghßßßß"), "éééé...ßßßß");
    }

    #[test]
    fn pools_are_read_in_priority_order_and_edited_in_place() {
        let text = r#"{"credential_pool": {
            "openrouter": [
                {"id": "b", "priority": 1, "access_token": "k2", "custom": true},
                {"id": "a", "priority": 0, "access_token": "k1"}
            ],
            "empty": [],
            "broken": 3
        }}"#;
        let mut store = AuthStore::parse(text.as_bytes()).unwrap();
        assert_eq!(store.pool_ids(), ["openrouter"]);
        let ids: Vec<&str> = store
            .pool("openrouter")
            .iter()
            .map(|e| e["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert!(store.pool("broken").is_empty() && store.pool("none").is_empty());
        let entry = store.pool_entry_mut("openrouter", "b").unwrap();
        entry.insert("last_status".into(), json!("exhausted"));
        let b = store.pool("openrouter")[1];
        assert_eq!(b["last_status"], "exhausted");
        assert_eq!(b["custom"], true, "keys we do not know are kept");
        assert!(store.pool_entry_mut("openrouter", "zz").is_none());
    }

    #[test]
    fn credential_views_mask_keys_and_say_which_key_is_next() {
        let text = r#"{"credential_pool": {"openai-api": [
            {"id": "e1", "label": "OPENAI_API_KEY", "source": "env:OPENAI_API_KEY", "priority": 0,
             "auth_type": "api_key", "secret_fingerprint": "sha256:00"},
            {"id": "m1", "label": "work", "source": "manual", "priority": 1, "auth_type": "api_key",
             "access_token": "sk-proj-abcdefghijkl7890", "last_status": "exhausted",
             "last_status_at": 1000.0, "last_error_code": 429},
            {"id": "m2", "label": "spare", "source": "manual", "priority": 2,
             "access_token": "sk-spare-0000000000001111"},
            {"id": "o1", "label": "login", "source": "manual:device_code", "priority": 3,
             "auth_type": "oauth", "access_token": "tok-zzzzzzzzzzzzzzzz"}
        ]}}"#;
        let store = AuthStore::parse(text.as_bytes()).unwrap();
        let no_env = |_: &str| None;
        let views = store.credential_views("openai-api", &no_env, 1000.0 + 60.0);
        let rows: Vec<(&str, &str, &str, Option<u64>, bool)> = views
            .iter()
            .map(|v| {
                (
                    v.label.as_str(),
                    v.key.as_str(),
                    v.status.as_str(),
                    v.retry_in_secs,
                    v.current,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("OPENAI_API_KEY", "", "ok", None, false),
                ("work", "sk-p...7890", "exhausted", Some(3540), false),
                ("spare", "sk-s...1111", "ok", None, true),
                ("login", "tok-...zzzz", "ok", None, false),
            ]
        );
        // With the variable set and the cooldown over, the first entry is next again.
        let env = |k: &str| (k == "OPENAI_API_KEY").then(|| "sk-env-123456789999".to_string());
        let views = store.credential_views("openai-api", &env, 1000.0 + 3600.0);
        assert_eq!(
            (views[0].key.as_str(), views[0].current),
            ("sk-e...9999", true)
        );
        assert_eq!(views[1].retry_in_secs, Some(0));
        let json = serde_json::to_string(&views).unwrap();
        assert!(
            !json.contains("abcdefghijkl") && !json.contains("123456789"),
            "{json}"
        );
    }

    #[test]
    fn parse_says_why_a_store_is_damaged() {
        let reason = |bytes: &[u8]| AuthStore::parse(bytes).unwrap_err();
        assert!(reason(b"{\"a\": \"\xff\"}").contains("UTF-8"));
        assert!(reason(b"{\"providers\": ").contains("EOF"));
        assert_eq!(reason(b"[1]"), "not a JSON object");
        assert_eq!(
            reason(b"{\"providers\": [\"nous\"]}"),
            "`providers` is not an object"
        );
        assert_eq!(
            reason(b"{\"credential_pool\": 3}"),
            "`credential_pool` is not an object"
        );
        for fine in [
            &b"{}"[..],
            b"\xef\xbb\xbf{\"providers\": null}",
            b"{\"providers\": {}}",
        ] {
            assert!(AuthStore::parse(fine).unwrap().providers().is_empty());
        }
    }
}
