//! `config.yaml`: a profile's settings.
//!
//! Reading is tolerant: the whole document is kept as a YAML value, so keys Hermes does not
//! know survive a write unchanged, and a typed view ([`Config::model`], [`Config::memory_provider`],
//! ...) is computed on demand. String values may reference environment variables as `${VAR}`
//! or `${env:VAR}`; the typed view expands them (an unset variable is kept verbatim), the
//! stored document never does, so a write can never bake a secret into the file.
//!
//! Parsing follows the original's loader (PyYAML's `safe_load`): a key written twice in one
//! mapping keeps its last value and is listed by [`Config::duplicate_keys`] (for `doctor`),
//! and merge keys (`<<: *anchor`) are resolved.
//!
//! A file that fails to parse is reported with its line and column and is never rewritten.
//! A missing file reads as an empty mapping (every default applies). The only way to write is
//! [`Config::edit`], which holds `config.yaml.lock` from the read to the write, so concurrent
//! writers never lose each other's settings, and writes through the byte-preserving editor
//! ([`crate::yaml_edit`]): only the keys a change sets or removes are touched; comments,
//! quoting, order, indentation, line endings, the mode and the owner stay. A layout the editor
//! cannot change exactly is refused with [`Error::ConfigLayout`] and nothing is written — never
//! a re-serialization of the whole file, which would silently drop every comment.
//!
//! Keys Hermes reads (defaults in `seeds/config.yaml`, documented in `docs/configuration.md`):
//!
//! | key                            | type          | default     |
//! |--------------------------------|---------------|-------------|
//! | `model` (string = `default`)   | string / map  |             |
//! | `model.default`                | string        | (not set)   |
//! | `model.provider`               | string        | `auto`      |
//! | `model.base_url`               | string        | (not set)   |
//! | `model.api_key`                | string        | (not set)   |
//! | `memory.provider`              | string        | `""` (built-in) |
//! | `security.allow_lazy_installs` | bool          | `true`      |
//! | `gateway.*`                    | map           | `{}`        |
//! | `services.*`                   | map           | `{}`        |

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use yaml_serde::{Mapping, Value};

use crate::Error;
use crate::{config_file, damage, lock, yaml_edit};

/// The mode of `config.yaml` and of its lock file.
pub(crate) const MODE: u32 = 0o640;

/// The original's current config schema version (`DEFAULT_CONFIG["_config_version"]` in
/// hermes-agent 0.19.0's `hermes_cli/config.py`). Its `check_config_version` reads the raw
/// `_config_version` of the file, and a file without one (or with a lower one) is "outdated":
/// `hermes config check` offers a migration and `hermes setup` / `hermes update` run it. So a
/// config Hermes creates carries this version (the seed and [`Config::edit`] of a missing
/// file); an existing file keeps whatever it has — its migrations are the original's to run.
pub const ORIGINAL_CONFIG_VERSION: u64 = 33;

/// The key holding the original's schema version.
pub const CONFIG_VERSION_KEY: &str = "_config_version";

/// A loaded `config.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    path: PathBuf,
    doc: Value,
    exists: bool,
    duplicates: Vec<DuplicateKey>,
}

/// A key written more than once in one mapping of `config.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateKey {
    /// Dotted path of the key (`model`, `model.default`; a sequence item is `[index]`).
    pub key: String,
    /// 1-based lines where the key is written, when it is in block style (`key: value` on its
    /// own line); empty when it could not be located (flow style `{a: 1, a: 2}`).
    pub lines: Vec<usize>,
}

/// The `model` section, with `${VAR}` references expanded and empty strings treated as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelSettings {
    /// Model name sent to the provider.
    pub default: Option<String>,
    /// Provider name, `auto` when unset.
    pub provider: Option<String>,
    /// OpenAI-compatible base URL.
    pub base_url: Option<String>,
    /// API key (normally a `${VAR}` reference or unset).
    pub api_key: Option<String>,
}

impl Config {
    /// An empty config that would be written to `path` (every default applies).
    pub fn empty(path: &Path) -> Self {
        Config {
            path: path.to_path_buf(),
            doc: Value::Mapping(Mapping::new()),
            exists: false,
            duplicates: Vec::new(),
        }
    }

    /// Loads `path`; a missing file is an empty config, bytes that are not UTF-8 are
    /// [`Error::NotUtf8`].
    pub fn load(path: &Path) -> Result<Self, Error> {
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Config {
                    path: path.to_path_buf(),
                    doc: Value::Mapping(Mapping::new()),
                    exists: false,
                    duplicates: Vec::new(),
                });
            }
            Err(e) => return Err(Error::io("read", path, e)),
        };
        let text = damage::decode_text(path, &bytes)?;
        Self::parse(path, text)
    }

    /// Parses config text that came from `path`, as the original's loader (PyYAML's
    /// `safe_load`) reads it: a key written twice in one mapping keeps its **last** value (the
    /// duplicates are listed by [`Config::duplicate_keys`]), and merge keys (`<<: *anchor`,
    /// `<<: [*a, *b]`) are resolved — keys written in the mapping win over merged ones, and an
    /// earlier merged mapping wins over a later one.
    pub fn parse(path: &Path, text: &str) -> Result<Self, Error> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let parse_error = |e: yaml_serde::Error| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((0, 0));
            let message = e.to_string();
            // The parser appends " at line X column Y"; we report those separately.
            let message = match message.find(" at line ") {
                Some(at) => message[..at].to_string(),
                None => message,
            };
            Error::ConfigParse {
                path: path.to_path_buf(),
                line,
                column,
                message,
            }
        };
        let Lenient {
            value: mut doc,
            duplicates,
        } = yaml_serde::from_str(text).map_err(parse_error)?;
        // A merged mapping may itself hold a merge key (`b: &b {<<: *a}` merged into `c`):
        // one pass brings it up a level, so repeat until none is left (bounded by nesting).
        for _ in 0..64 {
            doc.apply_merge().map_err(parse_error)?;
            if !has_merge_key(&doc) {
                break;
            }
        }
        let doc = match doc {
            Value::Null => Value::Mapping(Mapping::new()),
            Value::Mapping(_) => doc,
            _ => {
                return Err(Error::ConfigNotMapping {
                    path: path.to_path_buf(),
                });
            }
        };
        let duplicates = duplicates
            .into_iter()
            .map(|keys| DuplicateKey {
                lines: key_lines(text, &keys),
                key: keys.join("."),
            })
            .collect();
        Ok(Config {
            path: path.to_path_buf(),
            doc,
            exists: true,
            duplicates,
        })
    }

    /// Keys written more than once in the same mapping, in document order (the last value of
    /// each is the one in effect). `hermes doctor` warns about them.
    pub fn duplicate_keys(&self) -> &[DuplicateKey] {
        &self.duplicates
    }

    /// The whole document as read (merges applied, `${VAR}` unexpanded): `yaml_edit`'s check of
    /// its result, and the dashboard's `GET /api/config`.
    pub fn document(&self) -> &Value {
        &self.doc
    }

    /// Whether the file existed when loaded.
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// The file this config came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The raw value at a dotted path (`"model.default"`), unexpanded.
    pub fn raw(&self, dotted: &str) -> Option<&Value> {
        dotted
            .split('.')
            .try_fold(&self.doc, |value, key| value.get(key))
    }

    /// A string at a dotted path with `${VAR}` expanded through `var`. Empty means unset.
    pub fn string(&self, dotted: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        let raw = match self.raw(dotted)? {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => return None,
        };
        let expanded = expand_vars(&raw, var);
        (!expanded.trim().is_empty()).then(|| expanded.trim().to_string())
    }

    /// The `model` section. `model: gpt-4o` is shorthand for `model.default`.
    pub fn model(&self, var: &dyn Fn(&str) -> Option<String>) -> ModelSettings {
        if let Some(Value::String(name)) = self.raw("model") {
            let name = expand_vars(name, var);
            return ModelSettings {
                default: (!name.trim().is_empty()).then(|| name.trim().to_string()),
                ..Default::default()
            };
        }
        ModelSettings {
            default: self
                .string("model.default", var)
                .or_else(|| self.string("model.model", var)),
            provider: self.string("model.provider", var),
            base_url: self.string("model.base_url", var),
            api_key: self.string("model.api_key", var),
        }
    }

    /// `memory.provider`; `None` for the built-in memory (empty, `built-in`, `builtin`, `none`).
    pub fn memory_provider(&self) -> Option<String> {
        let name = self.string("memory.provider", &|_| None)?;
        match name.to_ascii_lowercase().as_str() {
            "built-in" | "builtin" | "none" => None,
            _ => Some(name),
        }
    }

    /// `security.allow_lazy_installs`, default `true`. Only an explicit `false` (or a false-like
    /// string) switches installs off.
    pub fn allow_lazy_installs(&self) -> bool {
        match self.raw("security.allow_lazy_installs") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => !matches!(
                s.trim().to_ascii_lowercase().as_str(),
                "false" | "no" | "0" | "off"
            ),
            _ => true,
        }
    }

    /// The `gateway` section (an empty mapping when absent).
    pub fn gateway(&self) -> Value {
        self.raw("gateway")
            .cloned()
            .unwrap_or(Value::Mapping(Mapping::new()))
    }

    /// The `services` section (an empty mapping when absent).
    pub fn services(&self) -> Value {
        self.raw("services")
            .cloned()
            .unwrap_or(Value::Mapping(Mapping::new()))
    }

    /// Sets a value at a dotted path, creating intermediate mappings; every other key is kept.
    /// A non-mapping value in the way is replaced by a mapping.
    pub fn set(&mut self, dotted: &str, value: Value) {
        set_path(&mut self.doc, dotted, value);
    }

    /// Removes the value at a dotted path, and then every mapping on the path left empty by
    /// that (as the original's `hermes config unset` does). Returns whether the key was there.
    pub fn unset(&mut self, dotted: &str) -> bool {
        let keys: Vec<&str> = dotted.split('.').collect();
        remove_path(&mut self.doc, &keys)
    }

    /// Changes the `config.yaml` at `path`: loads it, runs `change` and, if `change` changed
    /// the document, writes exactly those changes into the file's text through
    /// [`crate::yaml_edit`] (every other byte kept) and writes them as [`crate::config_file`]
    /// does (atomically, keeping mode and owner), all
    /// while holding `config.yaml.lock`, so a setting another process writes meanwhile is
    /// never lost. A file that does not parse is an error and is not rewritten; when `change`
    /// fails nothing is written. A file this creates also gets `_config_version:`
    /// [`ORIGINAL_CONFIG_VERSION`], so the original does not take it for a legacy file.
    ///
    /// # Errors
    ///
    /// [`Error::ConfigLayout`] when the change touches a part of the file the editor cannot
    /// change exactly (flow style, anchors, a list as the new value, …): nothing is written.
    pub fn edit<T>(
        path: &Path,
        change: impl FnOnce(&mut Config) -> Result<T, Error>,
    ) -> Result<T, Error> {
        lock::with_locked(&lock::sidecar(path), MODE, || {
            let old = config_file::read_text(path)?;
            let mut config = match &old {
                Some(text) => Config::parse(path, text)?,
                None => Config::empty(path),
            };
            let before = config.doc.clone();
            let out = change(&mut config)?;
            if config.doc == before {
                return Ok(out);
            }
            let changes = yaml_edit::diff(&before, &config.doc).map_err(|refusal| {
                let at = match &refusal {
                    yaml_edit::Refusal::UnaddressableKey(at) => at.clone(),
                    _ => String::new(),
                };
                yaml_edit::refused(path, &at, refusal)
            })?;
            let new = yaml_edit::apply(path, &yaml_edit::base_text(old.as_deref()), &changes)?;
            config_file::write_if_changed(path, old.as_deref(), &new)?;
            Ok(out)
        })
    }
}

/// Sets `dotted` in `node` to `value` as [`Config::set`] does (also what the text editor of
/// [`yaml_edit`] checks its result against).
pub(crate) fn set_path(node: &mut Value, dotted: &str, value: Value) {
    let mut node = node;
    let mut keys = dotted.split('.').peekable();
    while let Some(key) = keys.next() {
        if !node.is_mapping() {
            *node = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(map) = node else { return };
        if keys.peek().is_none() {
            map.insert(Value::from(key), value);
            return;
        }
        node = map
            .entry(Value::from(key))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
    }
}

/// Removes `keys` from `node` and the mappings the removal leaves empty; whether it was there.
fn remove_path(node: &mut Value, keys: &[&str]) -> bool {
    let Some((first, rest)) = keys.split_first() else {
        return false;
    };
    let Value::Mapping(map) = node else {
        return false;
    };
    if rest.is_empty() {
        return map.shift_remove(*first).is_some();
    }
    let Some(child) = map.get_mut(*first) else {
        return false;
    };
    let removed = remove_path(child, rest);
    if removed && child.as_mapping().is_some_and(Mapping::is_empty) {
        map.shift_remove(*first);
    }
    removed
}

/// A YAML document read the way PyYAML's `safe_load` reads it: a key repeated in a mapping
/// keeps its last value (yaml_serde's own `Value` rejects the document instead), and each
/// repetition is recorded as the path of keys that leads to it.
struct Lenient {
    value: Value,
    duplicates: Vec<Vec<String>>,
}

impl<'de> serde::Deserialize<'de> for Lenient {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LenientVisitor)
    }
}

impl Lenient {
    fn plain(value: impl Into<Value>) -> Self {
        Lenient {
            value: value.into(),
            duplicates: Vec::new(),
        }
    }
}

/// Whether a `<<` key is left anywhere in `value`.
fn has_merge_key(value: &Value) -> bool {
    match value {
        Value::Mapping(map) => map.contains_key("<<") || map.values().any(has_merge_key),
        Value::Sequence(items) => items.iter().any(has_merge_key),
        Value::Tagged(tagged) => has_merge_key(&tagged.value),
        _ => false,
    }
}

/// How a key reads in a dotted path: its text for a scalar, `?` for anything else.
fn key_name(key: &Value) -> String {
    match key {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        _ => "?".into(),
    }
}

struct LenientVisitor;

impl<'de> serde::de::Visitor<'de> for LenientVisitor {
    type Value = Lenient;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Lenient, E> {
        Ok(Lenient::plain(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Lenient, E> {
        Ok(Lenient::plain(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Lenient, E> {
        Ok(Lenient::plain(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Lenient, E> {
        Ok(Lenient::plain(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Lenient, E> {
        Ok(Lenient::plain(v))
    }
    fn visit_string<E>(self, v: String) -> Result<Lenient, E> {
        Ok(Lenient::plain(v))
    }
    fn visit_unit<E>(self) -> Result<Lenient, E> {
        Ok(Lenient::plain(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Lenient, E> {
        Ok(Lenient::plain(Value::Null))
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Lenient, D::Error> {
        serde::Deserialize::deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Lenient, A::Error> {
        let mut items = Vec::new();
        let mut duplicates = Vec::new();
        while let Some(item) = seq.next_element::<Lenient>()? {
            let index = format!("[{}]", items.len());
            duplicates.extend(item.duplicates.into_iter().map(|mut keys| {
                keys.insert(0, index.clone());
                keys
            }));
            items.push(item.value);
        }
        Ok(Lenient {
            value: Value::Sequence(items),
            duplicates,
        })
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Lenient, A::Error> {
        let mut mapping = Mapping::new();
        let mut duplicates = Vec::new();
        while let Some((key, value)) = map.next_entry::<Lenient, Lenient>()? {
            let name = key_name(&key.value);
            duplicates.extend(key.duplicates);
            duplicates.extend(value.duplicates.into_iter().map(|mut keys| {
                keys.insert(0, name.clone());
                keys
            }));
            // `insert` replaces the value and keeps the key's first position, as a Python
            // dict does.
            if mapping.insert(key.value, value.value).is_some()
                && !duplicates
                    .iter()
                    .any(|keys| keys.len() == 1 && keys[0] == name)
            {
                duplicates.push(vec![name]);
            }
        }
        Ok(Lenient {
            value: Value::Mapping(mapping),
            duplicates,
        })
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<Lenient, A::Error> {
        use serde::de::VariantAccess;
        let (tag, contents) = data.variant::<String>()?;
        let inner: Lenient = contents.newtype_variant()?;
        Ok(Lenient {
            value: Value::Tagged(Box::new(yaml_serde::value::TaggedValue {
                tag: yaml_serde::value::Tag::new(tag),
                value: inner.value,
            })),
            duplicates: inner.duplicates,
        })
    }
}

/// The 1-based lines where the key at `keys` is written in block style (`key:` starting a
/// line, nested by indentation). Only used to point at duplicates; the document itself is
/// always read by the YAML parser.
fn key_lines(text: &str, keys: &[String]) -> Vec<usize> {
    let mut lines = Vec::new();
    // (indentation, key) of the block mappings the current line is inside.
    let mut open: Vec<(usize, String)> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let body = line.trim_start_matches(' ');
        if body.is_empty() || body.starts_with('#') || body.starts_with('-') {
            continue;
        }
        let indent = line.len() - body.len();
        let Some((key, _)) = body.split_once(':') else {
            continue;
        };
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        while open.last().is_some_and(|(i, _)| *i >= indent) {
            open.pop();
        }
        if open.len() + 1 == keys.len()
            && key == keys[keys.len() - 1]
            && open.iter().zip(keys).all(|((_, k), want)| k == want)
        {
            lines.push(number + 1);
        }
        open.push((indent, key.to_string()));
    }
    lines
}

/// Expands `${VAR}` and `${env:VAR}`; unset variables and bare `$VAR` are left as written.
pub fn expand_vars(raw: &str, var: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = after[..end].strip_prefix("env:").unwrap_or(&after[..end]);
        match var(name) {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[start..start + 3 + end]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Python's `str.strip()`: its whitespace also counts the separators U+001C–U+001F.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// A YAML number (or bool, which Python counts as 0 / 1) as a float, as the original reads a
/// number from `config.yaml`.
pub fn py_float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// Python's `int(value)` for a YAML scalar: numbers truncate, strings must be integers.
pub fn py_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::Bool(b) => Some(i64::from(*b)),
        Value::String(s) => py_strip(s).replace('_', "").parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "KEY").then(|| "sk-123".to_string())
    }

    #[test]
    fn typed_view_and_expansion() {
        let cfg = Config::parse(
            Path::new("c.yaml"),
            "model:\n  default: gpt-4o\n  api_key: ${KEY}\n  base_url: ''\nmemory:\n  provider: honcho\nsecurity:\n  allow_lazy_installs: false\n",
        )
        .unwrap();
        let model = cfg.model(&env);
        assert_eq!(model.default.as_deref(), Some("gpt-4o"));
        assert_eq!(model.api_key.as_deref(), Some("sk-123"));
        assert_eq!(model.base_url, None);
        assert_eq!(cfg.memory_provider().as_deref(), Some("honcho"));
        assert!(!cfg.allow_lazy_installs());
    }

    #[test]
    fn string_model_is_shorthand() {
        let cfg = Config::parse(Path::new("c"), "model: llama3\n").unwrap();
        assert_eq!(cfg.model(&env).default.as_deref(), Some("llama3"));
        assert!(cfg.allow_lazy_installs());
        assert_eq!(cfg.memory_provider(), None);
    }

    #[test]
    fn expansion_rules() {
        assert_eq!(expand_vars("a${KEY}b${env:KEY}", &env), "ask-123bsk-123");
        assert_eq!(
            expand_vars("${MISSING} $KEY ${open", &env),
            "${MISSING} $KEY ${open"
        );
    }

    #[test]
    fn parse_error_has_line_and_column() {
        let err = Config::parse(
            Path::new("c.yaml"),
            "model:\n  default: [unclosed\nother: 1\n",
        )
        .unwrap_err();
        let Error::ConfigParse { line, column, .. } = err else {
            panic!("{err:?}")
        };
        assert!(line >= 2, "line {line}");
        assert!(column >= 1);
        assert!(matches!(
            Config::parse(Path::new("c"), "- a\n- b\n"),
            Err(Error::ConfigNotMapping { .. })
        ));
    }

    #[test]
    fn duplicate_keys_keep_the_last_value_like_pyyaml() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        let text = "model: a\nmemory:\n  provider: honcho\n  provider: mem0\nmodel: b\n";
        fs::write(&path, text).unwrap();
        let cfg = Config::load(&path).unwrap();
        // PyYAML's safe_load gives {'model': 'b', 'memory': {'provider': 'mem0'}}.
        assert_eq!(cfg.model(&env).default.as_deref(), Some("b"));
        assert_eq!(cfg.memory_provider().as_deref(), Some("mem0"));
        assert_eq!(
            cfg.duplicate_keys(),
            &[
                DuplicateKey {
                    key: "memory.provider".into(),
                    lines: vec![3, 4],
                },
                DuplicateKey {
                    key: "model".into(),
                    lines: vec![1, 5],
                },
            ]
        );
        let clean = Config::parse(Path::new("c"), "model: a\n").unwrap();
        assert!(clean.duplicate_keys().is_empty());
        // A key written three times is reported once; flow style has no line to point at.
        let flow = Config::parse(Path::new("c"), "m: {a: 1, a: 2, a: 3}\n").unwrap();
        assert_eq!(flow.raw("m.a").and_then(Value::as_u64), Some(3));
        assert_eq!(
            flow.duplicate_keys(),
            &[DuplicateKey {
                key: "m.a".into(),
                lines: vec![],
            }]
        );
    }

    #[test]
    fn merge_keys_are_resolved_like_pyyaml() {
        let text = "base: &base\n  default: gpt-4o\n  provider: openai\n  base_url: https://x/v1\nmodel:\n  <<: *base\n  provider: custom\nother:\n  <<: [{a: 1}, {a: 2, b: 2}]\n";
        let cfg = Config::parse(Path::new("c"), text).unwrap();
        let model = cfg.model(&env);
        // PyYAML: {'default': 'gpt-4o', 'provider': 'custom', 'base_url': 'https://x/v1'}.
        assert_eq!(model.default.as_deref(), Some("gpt-4o"));
        assert_eq!(model.provider.as_deref(), Some("custom"));
        assert_eq!(model.base_url.as_deref(), Some("https://x/v1"));
        assert!(cfg.raw("model.<<").is_none());
        assert_eq!(cfg.raw("other.a").and_then(Value::as_u64), Some(1));
        assert_eq!(cfg.raw("other.b").and_then(Value::as_u64), Some(2));
        assert!(cfg.duplicate_keys().is_empty());
        // A merged mapping that merges another one (PyYAML: c = {z: 3, y: 2, x: 1}).
        let chain = Config::parse(
            Path::new("c"),
            "a: &a {x: 1, y: 0}\nb: &b {<<: *a, y: 2}\nc: {<<: *b, z: 3}\n",
        )
        .unwrap();
        for (key, want) in [("c.x", 1), ("c.y", 2), ("c.z", 3), ("b.x", 1), ("b.y", 2)] {
            assert_eq!(chain.raw(key).and_then(Value::as_u64), Some(want), "{key}");
        }
        assert!(chain.raw("c.<<").is_none());
        let err = Config::parse(Path::new("c"), "m:\n  <<: 3\n").unwrap_err();
        assert!(matches!(err, Error::ConfigParse { .. }), "{err:?}");
    }

    #[test]
    fn set_keeps_unknown_keys_and_does_not_bake_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        fs::write(
            &path,
            "custom:\n  nested: [1, 2]\nmodel:\n  api_key: ${KEY}\n",
        )
        .unwrap();
        Config::edit(&path, |cfg| {
            cfg.set("memory.provider", Value::from("mem0"));
            Ok(())
        })
        .unwrap();
        let again = Config::load(&path).unwrap();
        assert_eq!(
            again
                .raw("custom.nested")
                .unwrap()
                .as_sequence()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(again.raw("model.api_key").unwrap().as_str(), Some("${KEY}"));
        assert_eq!(again.memory_provider().as_deref(), Some("mem0"));
    }

    /// What the original (hermes-agent 0.19.0) accepts in what we write: `_config_version`
    /// 33 (`DEFAULT_CONFIG`, hermes_cli/config.py; lower or missing = "update available"),
    /// `memory.provider` empty for built-in (its `hermes memory setup` writes `""` for
    /// "built-in only", hermes_cli/memory_setup.py; `built-in` would be looked up as a
    /// plugin), and a `model.provider` its `resolve_provider` (hermes_cli/auth.py) knows:
    /// `auto`, `custom`, `openrouter` or a `PROVIDER_REGISTRY` name — never `openai`.
    #[test]
    fn what_we_write_is_what_the_original_accepts() {
        let seed = Config::parse(Path::new("seed"), crate::seeds::DEFAULT_CONFIG_YAML).unwrap();
        assert_eq!(
            seed.raw(CONFIG_VERSION_KEY).and_then(Value::as_u64),
            Some(ORIGINAL_CONFIG_VERSION)
        );
        assert_eq!(
            seed.raw("memory.provider").and_then(Value::as_str),
            Some("")
        );
        assert_eq!(seed.memory_provider(), None);
        let provider = seed.raw("model.provider").and_then(Value::as_str).unwrap();
        assert!(
            ["auto", "custom", "openrouter"].contains(&provider),
            "{provider}"
        );

        let dir = tempfile::tempdir().unwrap();
        // A config we create gets the version ...
        let created = dir.path().join("created.yaml");
        Config::edit(&created, |cfg| {
            cfg.set("memory.provider", Value::from("honcho"));
            Ok(())
        })
        .unwrap();
        let text = fs::read_to_string(&created).unwrap();
        assert!(text.contains("_config_version: 33"), "{text}");
        // ... an existing file keeps its own, or its lack of one (the original migrates it).
        for (name, before, version) in [
            ("old.yaml", "_config_version: 20\nmodel: m\n", Some(20)),
            ("legacy.yaml", "model: m\n", None),
        ] {
            let path = dir.path().join(name);
            fs::write(&path, before).unwrap();
            Config::edit(&path, |cfg| {
                cfg.set("memory.provider", Value::from("mem0"));
                Ok(())
            })
            .unwrap();
            let cfg = Config::load(&path).unwrap();
            assert_eq!(
                cfg.raw(CONFIG_VERSION_KEY).and_then(Value::as_u64),
                version,
                "{name}"
            );
        }
    }

    #[test]
    fn concurrent_writers_keep_every_section() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        let n = 20;
        let shared = path.clone();
        for result in crate::test_support::race(n, move |i| {
            Config::edit(&shared, |cfg| {
                cfg.set(&format!("section_{i}.key"), Value::from(i));
                Ok(())
            })
        }) {
            result.unwrap();
        }
        let cfg = Config::load(&path).unwrap();
        let lost: Vec<usize> = (0..n)
            .filter(|i| {
                cfg.raw(&format!("section_{i}.key")).and_then(Value::as_u64) != Some(*i as u64)
            })
            .collect();
        assert!(
            lost.is_empty(),
            "lost {} of {n} sections: {lost:?}",
            lost.len()
        );
    }

    /// A file with comments, quoting, flow and block lists, odd indentation and CRLF endings.
    const HAND_WRITTEN: &str = "# my settings\r\nmodel:\r\n   default: 'gpt-4o'   # pinned\r\n   provider: \"openrouter\"\r\ntoolsets: [web, terminal]\r\nallow:\r\n- a\r\n-   b\r\nmemory:\r\n   provider: ''  # built-in for now\r\n\r\n# end\r\n";

    #[test]
    fn edit_changes_only_the_keys_it_sets_and_keeps_every_other_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        fs::write(&path, HAND_WRITTEN).unwrap();
        Config::edit(&path, |cfg| {
            cfg.set("memory.provider", Value::from("honcho"));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            HAND_WRITTEN.replace("provider: ''  #", "provider: 'honcho'  #")
        );
        // Typed values stay typed; a new key goes at the end of its mapping.
        Config::edit(&path, |cfg| {
            cfg.set("agent.max_turns", Value::from(64));
            cfg.set("model.stream", Value::Bool(false));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            HAND_WRITTEN
                .replace("provider: ''  #", "provider: 'honcho'  #")
                .replace(
                    "   provider: \"openrouter\"\r\n",
                    "   provider: \"openrouter\"\r\n   stream: false\r\n"
                )
                .replace(
                    "built-in for now\r\n",
                    "built-in for now\r\nagent:\r\n   max_turns: 64\r\n"
                )
        );
        let cfg = Config::load(&path).unwrap();
        assert_eq!(cfg.raw("agent.max_turns").and_then(Value::as_u64), Some(64));
        assert_eq!(cfg.raw("model.stream"), Some(&Value::Bool(false)));
    }

    #[test]
    fn unset_removes_the_key_and_parents_it_leaves_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        let text = "a: 1\nmodel:\n  # the model\n  default: x\n  extra:\n    deep: 1\n# after model\nb: 2\n";
        fs::write(&path, text).unwrap();
        let removed = Config::edit(&path, |cfg| Ok(cfg.unset("model.extra.deep"))).unwrap();
        assert!(removed);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "a: 1\nmodel:\n  # the model\n  default: x\n# after model\nb: 2\n"
        );
        assert!(!Config::edit(&path, |cfg| Ok(cfg.unset("model.nothing"))).unwrap());
        Config::edit(&path, |cfg| Ok(cfg.unset("model.default"))).unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "a: 1\n# after model\nb: 2\n"
        );
    }

    #[test]
    fn a_layout_the_editor_refuses_is_an_error_and_the_file_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        let text = "# flow\nmemory: {provider: ''}\n";
        fs::write(&path, text).unwrap();
        let err = Config::edit(&path, |cfg| {
            cfg.set("memory.provider", Value::from("honcho"));
            Ok(())
        })
        .unwrap_err();
        assert!(
            matches!(&err, Error::ConfigLayout { key, .. } if key == "memory.provider"),
            "{err:?}"
        );
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
        // A list as a new value is not written either.
        fs::write(&path, "a: 1\n").unwrap();
        let err = Config::edit(&path, |cfg| {
            cfg.set("toolsets", Value::Sequence(vec![Value::from("web")]));
            Ok(())
        })
        .unwrap_err();
        assert!(matches!(err, Error::ConfigLayout { .. }), "{err:?}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "a: 1\n");
    }

    #[test]
    fn a_scalar_that_becomes_a_mapping_is_rewritten_as_one_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        fs::write(&path, "# c\nmodel: gpt-4o\nother: 1\n").unwrap();
        Config::edit(&path, |cfg| {
            cfg.set("model.default", Value::from("m"));
            Ok(())
        })
        .unwrap();
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "# c\nmodel:\n  default: m\nother: 1\n"
        );
    }

    #[test]
    fn root_leaves_the_file_with_its_owner() {
        use std::os::unix::fs::{MetadataExt, chown};
        if hermes_test_support::skip_unless_root("only root can give a file away") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        fs::write(&path, "a: 1\n").unwrap();
        chown(&path, Some(12345), Some(12346)).unwrap();
        Config::edit(&path, |cfg| {
            cfg.set("a", Value::from(2));
            Ok(())
        })
        .unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (12345, 12346));
        // A file it creates belongs to the directory's owner.
        chown(dir.path(), Some(12347), Some(12348)).unwrap();
        let created = dir.path().join("new.yaml");
        Config::edit(&created, |cfg| {
            cfg.set("a", Value::from(1));
            Ok(())
        })
        .unwrap();
        let meta = fs::metadata(&created).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (12347, 12348));
    }
}
