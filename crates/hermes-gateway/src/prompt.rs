//! The system prompt of a gateway turn, as the original assembles it for its API server
//! (hermes-agent 0.19.0: `agent/system_prompt.py`, `agent/prompt_builder.py`,
//! `tools/memory_tool.py`), less what only its tools need.
//!
//! Words:
//! * *part* — one block of the prompt. Parts are trimmed (Python's `str.strip`), empty ones are
//!   dropped, and the rest are joined with a blank line (`\n\n`).
//! * *memory* — the profile's built-in memory: `memories/MEMORY.md` (the agent's notes) and
//!   `memories/USER.md` (the user profile), each a list of *entries* separated by a line holding
//!   only `§`.
//!
//! The parts, in order (the original's "stable" tier, then its "volatile" tier):
//!
//! 1. **Identity**: `SOUL.md` with surrounding whitespace and a leading byte-order mark removed,
//!    scanned for prompt injection (`threats`, context scope: a match replaces the whole file
//!    by `[BLOCKED: SOUL.md contained potential prompt injection (<ids>). Content not loaded.]`),
//!    then cut to the context-file limit (below). A missing, empty or non-UTF-8 `SOUL.md` gives
//!    [`DEFAULT_AGENT_IDENTITY`] instead.
//! 2. [`HERMES_AGENT_HELP_GUIDANCE`] (always).
//! 3. With `provider` `alibaba` only: the line naming the model (that API reports another model
//!    name than the one asked for).
//! 4. The embedder's environment description: `HERMES_ENVIRONMENT_HINT`, else
//!    `agent.environment_hint`.
//! 5. The API-server platform hint ([`API_SERVER_HINT`]), replaced or extended by
//!    `platform_hints.api_server` (`{replace: …, append: …}`, or a string to append).
//! 6. `MEMORY.md` as a block (when `memory.memory_enabled`, default on), then `USER.md` (when
//!    `memory.user_profile_enabled`, default on), each framed by `memory_block`.
//! 7. `Conversation started: <Weekday, Month DD, YYYY>`, then `Model: <model>` and
//!    `Provider: <provider>` lines when known.
//!
//! Limits:
//! * Context-file limit for `SOUL.md`: `context_file_max_chars` when it is a positive number;
//!   else 6 % of the model's context window × 4 characters, at least 20 000 and at most
//!   500 000. The window is `model.context_length`, else [`DEFAULT_CONTEXT_WINDOW`] (the
//!   original's value for a model it has no metadata for; for models in its tables it uses
//!   their window, e.g. 128 000 tokens → 30 720 characters: set `model.context_length` to
//!   match). A longer file keeps its first 70 % and last 20 % of the limit around a marker.
//! * `memory.memory_char_limit` (2 200) and `memory.user_char_limit` (1 375) are *reported* in
//!   each block's header (`[42% — 924/2,200 chars]`), not enforced: the original enforces them
//!   only when its memory tool writes, and sends a longer hand-edited file whole.
//!
//! Memory entries are trimmed, empty ones dropped, duplicates dropped (the first is kept), and
//! each one is scanned (`threats`, strict scope); a match replaces that entry by a
//! `[BLOCKED: …]` line. `memory: <not a mapping>` turns memory off (the original's reader
//! fails on it); so does a limit that is not a number, and a memory file that is not UTF-8: as
//! in the original, one such file leaves out *both* blocks.
//!
//! Safety (decisions of ours; the original reads whatever the paths lead to): a memory file
//! that is a symlink (or under a symlinked `memories/`) resolving outside the profile home, that
//! is not a regular file (a FIFO would block), or that is larger than [`MAX_MEMORY_FILE_BYTES`]
//! is read as absent, with a warning. A missing or unreadable file is absent, as in the original.
//!
//! Left out, because only the original's tools make them meaningful: tool-use, task-completion,
//! parallel-call, memory/session-search/skills and steering guidance, the skills index, the
//! Nous subscription block, the coding-workspace and Python-toolchain probes, the host block of
//! the environment hints (OS, home and working directory the tools act in) and the WSL hint,
//! the active-profile block (which profile's files the tools may change), context files
//! (`AGENTS.md`, `.hermes.md`, `.cursorrules`, … of the tools' working directory), and the block
//! of an external memory provider plugin (`memory.provider`).
//!
//! When to build it: the original builds the prompt once per session — on the first turn, when
//! the memory files are read — stores it in `state.db` (`sessions.system_prompt`) and replays it
//! verbatim on every later turn of that session (rebuilding only when the stored `Model:` or
//! `Provider:` line no longer matches, see [`stored_prompt_matches`]). Memory written while a
//! session runs reaches the next new session, not the running one. Each request then sends one
//! system message: that prompt with the request's own system messages appended
//! ([`with_client_system`]).

mod threats;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hermes_home::config::Config;
use time::Date;
use yaml_serde::Value;

pub use hermes_gateway_settings::prompt::{
    CONTEXT_FILE_DYNAMIC_CEILING, CONTEXT_FILE_MAX_CHARS, DEFAULT_CONTEXT_WINDOW,
    context_file_max_chars,
};
use hermes_home::config::py_strip;
pub use threats::{Scope, prepare, prepare_in_background, scan};

/// The identity used when `SOUL.md` gives none (the original's `DEFAULT_AGENT_IDENTITY`).
pub const DEFAULT_AGENT_IDENTITY: &str = "You are Hermes Agent, an intelligent AI assistant created by Nous Research. You are helpful, knowledgeable, and direct. You assist users with a wide range of tasks including answering questions, writing and editing code, analyzing information, creative work, and executing actions via your tools. You communicate clearly, admit uncertainty when appropriate, and prioritize being genuinely useful over being verbose unless otherwise directed below. Be targeted and efficient in your exploration and investigations.";

/// Where help about Hermes itself is (always the second part).
pub const HERMES_AGENT_HELP_GUIDANCE: &str = "You run on Hermes Agent (by Nous Research). When the user needs help with Hermes itself — configuring, setting up, using, extending, or troubleshooting it — or when you need to understand your own features, tools, or capabilities, the documentation at https://hermes-agent.nousresearch.com/docs is your authoritative reference and always holds the latest, most up-to-date information. Load the `hermes-agent` skill with skill_view(name='hermes-agent') for additional guidance and proven workflows, but treat the docs as the source of truth when the two differ.";

/// The original's rendering hint for its API server platform.
pub const API_SERVER_HINT: &str = "You're responding through an API server. The rendering layer is unknown — assume plain text. No markdown formatting (no asterisks, bullets, headers, code fences). Treat this like a conversation, not a document. Keep responses brief and natural.";

/// The platform name whose hint applies (the key under `platform_hints`).
pub const PLATFORM: &str = "api_server";

/// Default `memory.memory_char_limit`.
pub const MEMORY_CHAR_LIMIT: i64 = 2_200;
/// Default `memory.user_char_limit`.
pub const USER_CHAR_LIMIT: i64 = 1_375;
/// Memory files larger than this are read as absent (the tool keeps them to a few KiB).
pub const MAX_MEMORY_FILE_BYTES: u64 = 4 << 20;
/// The line between two memory entries.
pub const ENTRY_DELIMITER: &str = "\n§\n";

/// What the prompt is built from besides the profile home.
#[non_exhaustive]
#[derive(Debug, Clone, Copy)]
pub struct PromptInputs<'a> {
    /// Text of `SOUL.md` as read (`None`: missing or not UTF-8).
    pub soul: Option<&'a str>,
    /// The profile's `config.yaml`.
    pub config: &'a Config,
    /// The env map (`.env` over the process environment): `HERMES_ENVIRONMENT_HINT`.
    pub env: &'a BTreeMap<String, String>,
    /// Model name sent upstream (the `Model:` line).
    pub model: Option<&'a str>,
    /// Provider id as the original names it (`custom`, `openrouter`, …: the `Provider:` line).
    pub provider: Option<&'a str>,
    /// The day the conversation starts (the original uses `HERMES_TIMEZONE`, else the
    /// `timezone` setting, else the server's local time).
    pub today: Date,
}

impl<'a> PromptInputs<'a> {
    /// Inputs with no soul, model or provider.
    pub fn new(config: &'a Config, env: &'a BTreeMap<String, String>, today: Date) -> Self {
        PromptInputs {
            soul: None,
            config,
            env,
            model: None,
            provider: None,
            today,
        }
    }

    /// The same inputs with `SOUL.md`'s text.
    pub fn soul(mut self, soul: Option<&'a str>) -> Self {
        self.soul = soul;
        self
    }

    /// The same inputs with the model and provider of the `Model:` / `Provider:` lines.
    pub fn runtime(mut self, model: Option<&'a str>, provider: Option<&'a str>) -> Self {
        self.model = model;
        self.provider = provider;
        self
    }
}

/// The system prompt the original sends for an API-server turn of the profile at `home`,
/// without its tool-only parts (see the module doc). Never empty: the identity is always there.
///
/// Reads `memories/MEMORY.md` and `memories/USER.md` under `home`; nothing else.
pub fn system_prompt(home: &Path, inputs: &PromptInputs<'_>) -> String {
    let config = inputs.config;
    let mut parts = vec![
        identity(home, inputs.soul, config),
        HERMES_AGENT_HELP_GUIDANCE.to_string(),
    ];
    parts.extend(model_identity_line(inputs.provider, inputs.model));
    parts.extend(environment_hint(inputs.env, config));
    parts.push(platform_hint(config));
    parts.extend(memory_blocks(home, config));
    parts.push(timestamp_line(inputs.today, inputs.model, inputs.provider));
    join_parts(parts)
}

/// What a gateway keeps to build the system prompt of each new session: the inputs of
/// [`system_prompt`] that outlive one request (the settings read it with the rest of the
/// profile's files, and a reload replaces it).
#[derive(Debug, Clone)]
pub struct PromptSource {
    /// The profile home (its `memories/` are read at each build, as the original reads them
    /// when a session starts).
    pub home: PathBuf,
    /// `SOUL.md` as read.
    pub soul: Option<String>,
    /// The profile's `config.yaml`.
    pub config: Config,
    /// The env map (`.env` over the process environment).
    pub env: BTreeMap<String, String>,
    /// The model sent upstream.
    pub model: Option<String>,
    /// The provider id as the original names it ([`original_provider_id`]).
    pub provider: Option<String>,
}

impl PromptSource {
    /// The prompt of a session starting on `today`.
    pub fn build(&self, today: Date) -> String {
        let inputs = PromptInputs::new(&self.config, &self.env, today)
            .soul(self.soul.as_deref())
            .runtime(self.model.as_deref(), self.provider.as_deref());
        system_prompt(&self.home, &inputs)
    }

    /// The prompt of a session starting now (the date in UTC).
    pub fn build_now(&self) -> String {
        self.build(time::OffsetDateTime::now_utc().date())
    }
}

/// The provider id the original writes on the `Provider:` line for a configured
/// `model.provider`: its local-server aliases are `custom`, and `auto` (or none) resolves to
/// `openrouter` (checked against the original for a key-only and a `base_url`-only profile).
pub fn original_provider_id(configured: Option<&str>) -> String {
    match configured.map(str::trim).filter(|p| !p.is_empty()) {
        None => "openrouter".into(),
        Some(p) if p.eq_ignore_ascii_case("auto") => "openrouter".into(),
        Some(p) if crate::settings::is_custom(p) => "custom".into(),
        Some(p) => p.to_ascii_lowercase(),
    }
}

/// The one system message the original sends: the session's prompt, then — after a blank
/// line — the client's system messages of this request (its API server joins their texts with
/// `\n`), the whole trimmed. The client's part is never stored with the session.
pub fn with_client_system(prompt: &str, client_system: Option<&str>) -> String {
    match client_system.filter(|c| !c.is_empty()) {
        Some(client) => py_strip(&format!("{prompt}\n\n{client}")).to_string(),
        None => prompt.to_string(),
    }
}

/// Whether a prompt stored for a session may be replayed for a turn with `model` and
/// `provider`: the original rebuilds when the stored prompt's last `Model:` (or `Provider:`)
/// line names another non-empty value than the current one.
pub fn stored_prompt_matches(stored: &str, model: Option<&str>, provider: Option<&str>) -> bool {
    let agrees = |label: &str, current: Option<&str>| {
        let prefix = format!("{label}:");
        let stored = stored
            .split(is_line_break)
            .rev()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(py_strip)
            .unwrap_or_default();
        let current = current.map(py_strip).unwrap_or_default();
        stored.is_empty() || current.is_empty() || stored == current
    };
    agrees("Model", model) && agrees("Provider", provider)
}

/// The line boundaries of Python's `str.splitlines` (`\r\n` gives an extra empty line, which
/// no caller minds).
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\u{b}'
            | '\u{c}'
            | '\u{1c}'
            | '\u{1d}'
            | '\u{1e}'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Trims, drops empty parts, joins with a blank line.
fn join_parts(parts: Vec<String>) -> String {
    parts
        .iter()
        .map(|p| py_strip(p))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Python's text-mode reading: `\r\n` and a lone `\r` both read as `\n`.
fn universal_newlines(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n")
}

/// Part 1: `SOUL.md` (scanned, cut to the context-file limit) or the default identity.
fn identity(home: &Path, soul: Option<&str>, config: &Config) -> String {
    let Some(soul) = soul.map(universal_newlines) else {
        return DEFAULT_AGENT_IDENTITY.to_string();
    };
    let soul = py_strip(&soul);
    if soul.is_empty() {
        return DEFAULT_AGENT_IDENTITY.to_string();
    }
    // Editors add a byte-order mark; it is not an injection, so it goes before the scan.
    let soul = soul.strip_prefix('\u{feff}').unwrap_or(soul);
    let findings = scan(soul, Scope::Context);
    let content = if findings.is_empty() {
        soul.to_string()
    } else {
        tracing::warn!(findings = %findings.join(", "), "SOUL.md blocked: it is not sent");
        format!(
            "[BLOCKED: SOUL.md contained potential prompt injection ({}). Content not loaded.]",
            findings.join(", ")
        )
    };
    truncate(
        &content,
        hermes_home::layout::SOUL_FILE,
        context_file_max_chars(config),
        &hermes_home::layout::soul_path(home),
    )
}

/// Keeps a text within `max_chars` characters: the first 70 % and the last 20 % of the limit
/// around a marker saying where the whole file is.
fn truncate(content: &str, label: &str, max_chars: usize, path: &Path) -> String {
    let len = content.chars().count();
    if len <= max_chars {
        return content.to_string();
    }
    tracing::warn!(
        file = label,
        chars = len,
        limit = max_chars,
        "context file truncated"
    );
    let head_chars = (max_chars as f64 * 0.7) as usize;
    let tail_chars = (max_chars as f64 * 0.2) as usize;
    let head: String = content.chars().take(head_chars).collect();
    // Python's `content[-0:]` is the whole text: a tail of zero characters keeps everything.
    let tail: String = if tail_chars == 0 {
        content.to_string()
    } else {
        content.chars().skip(len - tail_chars).collect()
    };
    format!(
        "{head}\n\n[...truncated {label}: kept {head_chars}+{tail_chars} of {len} chars. The middle is omitted — if you need the full instructions, read the complete file with the read_file tool: {}]\n\n{tail}",
        path.display()
    )
}

/// Part 3: the model's name, for `alibaba` only (its API answers with another model's name).
fn model_identity_line(provider: Option<&str>, model: Option<&str>) -> Option<String> {
    if provider != Some("alibaba") {
        return None;
    }
    let model = model.unwrap_or_default();
    let short = model.rsplit('/').next().unwrap_or(model);
    Some(format!(
        "You are powered by the model named {short}. The exact model ID is {model}. When asked what model you are, always answer based on this information, not on any model name returned by the API."
    ))
}

/// Part 4: `HERMES_ENVIRONMENT_HINT`, else `agent.environment_hint` (as Python's `str()` shows
/// a scalar: `~` is `None`).
fn environment_hint(env: &BTreeMap<String, String>, config: &Config) -> Option<String> {
    let from_env = env
        .get("HERMES_ENVIRONMENT_HINT")
        .map(|v| py_strip(v))
        .filter(|v| !v.is_empty());
    if let Some(hint) = from_env {
        return Some(hint.to_string());
    }
    let agent = config.raw("agent").filter(|a| a.is_mapping())?;
    match agent.get("environment_hint")? {
        Value::String(s) => Some(s.clone()),
        Value::Null => Some("None".into()),
        Value::Bool(true) => Some("True".into()),
        Value::Bool(false) => Some("False".into()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// Part 5: the API-server hint with `platform_hints.api_server` applied.
fn platform_hint(config: &Config) -> String {
    let spec = config
        .raw("platform_hints")
        .filter(|h| h.is_mapping())
        .and_then(|h| h.get(PLATFORM));
    fn text(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str)
            .map(py_strip)
            .filter(|s| !s.is_empty())
    }
    match spec {
        Some(Value::String(extra)) => match py_strip(extra) {
            "" => API_SERVER_HINT.to_string(),
            extra => format!("{API_SERVER_HINT}\n\n{extra}"),
        },
        Some(spec @ Value::Mapping(_)) => {
            let base = text(spec.get("replace")).unwrap_or(API_SERVER_HINT);
            match text(spec.get("append")) {
                Some(extra) => format!("{base}\n\n{extra}"),
                None => base.to_string(),
            }
        }
        _ => API_SERVER_HINT.to_string(),
    }
}

/// Part 7: the date, then the model and provider.
fn timestamp_line(today: Date, model: Option<&str>, provider: Option<&str>) -> String {
    let mut line = format!(
        "Conversation started: {}, {} {:02}, {}",
        today.weekday(),
        today.month(),
        today.day(),
        today.year()
    );
    for (label, value) in [("Model", model), ("Provider", provider)] {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            line.push_str(&format!("\n{label}: {value}"));
        }
    }
    line
}

/// Which memory blocks are on, and the limits their headers report.
#[derive(Debug, Clone, PartialEq)]
struct MemorySettings {
    memory_enabled: bool,
    user_enabled: bool,
    memory_limit: Option<Limit>,
    user_limit: Option<Limit>,
}

/// A char limit as the original computes with it (`value`) and prints it (`shown`).
#[derive(Debug, Clone, PartialEq)]
struct Limit {
    value: f64,
    shown: String,
}

impl Limit {
    fn of_int(n: i64) -> Limit {
        Limit {
            value: n as f64,
            shown: thousands(n),
        }
    }

    /// `None` for a value the original cannot compute with (a string, `~`, a list...).
    fn from_yaml(v: &Value) -> Option<Limit> {
        match v {
            Value::Bool(b) => Some(Limit::of_int(i64::from(*b))),
            Value::Number(n) => match n.as_i64() {
                Some(i) => Some(Limit::of_int(i)),
                None => n.as_f64().and_then(float_limit),
            },
            _ => None,
        }
    }
}

/// A float limit, shown as Python's `format(x, ",")` shows it (`2,200.5`, `2,200.0`), within the
/// range where that is plain positional notation; outside it the limit is unusable.
fn float_limit(f: f64) -> Option<Limit> {
    if !f.is_finite() || !(f == 0.0 || (1e-4..1e16).contains(&f.abs())) {
        return None;
    }
    let repr = format!("{f:?}");
    let (int_part, frac) = repr.split_once('.').unwrap_or((repr.as_str(), "0"));
    let int_part: i64 = int_part.parse().ok()?;
    let sign = if f < 0.0 && int_part == 0 { "-" } else { "" };
    Some(Limit {
        value: f,
        shown: format!("{sign}{}.{frac}", thousands(int_part)),
    })
}

/// `1234567` as `1,234,567` (Python's `format(n, ",")`).
fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// Python's truthiness of a YAML value (`memory_enabled: "false"` is *on*, as in the original).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Sequence(s) => !s.is_empty(),
        Value::Mapping(m) => !m.is_empty(),
        Value::Tagged(t) => truthy(&t.value),
    }
}

/// The `memory` section over the original's defaults; `None` when it is not a mapping (the
/// original's reader fails on it, which leaves memory off).
fn memory_settings(config: &Config) -> Option<MemorySettings> {
    let empty = Value::Mapping(Default::default());
    let section = match config.raw("memory") {
        None | Some(Value::Null) => &empty,
        Some(m @ Value::Mapping(_)) => m,
        Some(_) => return None,
    };
    let flag = |key: &str| section.get(key).is_none_or(truthy);
    let limit = |key: &str, default: i64| match section.get(key) {
        None => Some(Limit::of_int(default)),
        Some(v) => Limit::from_yaml(v),
    };
    Some(MemorySettings {
        memory_enabled: flag("memory_enabled"),
        user_enabled: flag("user_profile_enabled"),
        memory_limit: limit("memory_char_limit", MEMORY_CHAR_LIMIT),
        user_limit: limit("user_char_limit", USER_CHAR_LIMIT),
    })
}

/// A memory file whose bytes are not UTF-8: the original's reader stops on it.
#[derive(Debug)]
struct NotUtf8(PathBuf);

/// Part 6: the enabled memory blocks that have entries, `MEMORY.md` first.
fn memory_blocks(home: &Path, config: &Config) -> Vec<String> {
    let Some(settings) = memory_settings(config) else {
        tracing::warn!("`memory` in config.yaml is not a mapping: built-in memory is left out");
        return Vec::new();
    };
    if !settings.memory_enabled && !settings.user_enabled {
        return Vec::new();
    }
    // Both files are read and both blocks rendered whenever either is on, as the original
    // does: a failure in either leaves out both.
    let read = || -> Result<_, NotUtf8> {
        Ok((
            read_entries(home, "MEMORY.md")?,
            read_entries(home, "USER.md")?,
        ))
    };
    let (memory, user) = match read() {
        Ok(entries) => entries,
        Err(NotUtf8(path)) => {
            tracing::warn!(file = %path.display(), "memory file is not UTF-8: built-in memory is left out");
            return Vec::new();
        }
    };
    let rendered = (
        memory_block(
            MemoryTarget::Memory,
            &memory,
            settings.memory_limit.as_ref(),
        ),
        memory_block(MemoryTarget::User, &user, settings.user_limit.as_ref()),
    );
    let (Some(memory), Some(user)) = rendered else {
        tracing::warn!(
            "a `memory.*_char_limit` in config.yaml is not a number: built-in memory is left out"
        );
        return Vec::new();
    };
    [
        (settings.memory_enabled, memory),
        (settings.user_enabled, user),
    ]
    .into_iter()
    .filter(|(on, block)| *on && !block.is_empty())
    .map(|(_, block)| block)
    .collect()
}

/// Which memory file a block shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryTarget {
    /// `MEMORY.md`, the agent's notes.
    Memory,
    /// `USER.md`, the user profile.
    User,
}

impl MemoryTarget {
    fn header(self) -> &'static str {
        match self {
            MemoryTarget::Memory => "MEMORY (your personal notes)",
            MemoryTarget::User => "USER PROFILE (who the user is)",
        }
    }

    fn file_name(self) -> &'static str {
        match self {
            MemoryTarget::Memory => "MEMORY.md",
            MemoryTarget::User => "USER.md",
        }
    }
}

/// One memory block: a rule of 46 `═`, the header with how full the file is against its limit,
/// another rule, then the entries (each blocked one replaced) joined by [`ENTRY_DELIMITER`].
/// `Some("")` for no entries; `None` when there are entries and the limit is unusable.
fn memory_block(target: MemoryTarget, entries: &[String], limit: Option<&Limit>) -> Option<String> {
    if entries.is_empty() {
        return Some(String::new());
    }
    let limit = limit?;
    let content = entries
        .iter()
        .map(|e| sanitize_entry(e, target.file_name()))
        .collect::<Vec<_>>()
        .join(ENTRY_DELIMITER);
    let current = content.chars().count();
    let pct = if limit.value > 0.0 {
        (((current as f64 / limit.value) * 100.0) as i64).min(100)
    } else {
        0
    };
    let rule = "═".repeat(46);
    Some(format!(
        "{rule}\n{} [{pct}% — {}/{} chars]\n{rule}\n{content}",
        target.header(),
        thousands(current as i64),
        limit.shown
    ))
}

/// An entry as it may enter the prompt: itself, or a placeholder naming what matched.
fn sanitize_entry(entry: &str, file_name: &str) -> String {
    if entry.is_empty() || entry.starts_with("[BLOCKED:") {
        return entry.to_string();
    }
    let findings = scan(entry, Scope::Strict);
    if findings.is_empty() {
        return entry.to_string();
    }
    tracing::warn!(file = file_name, findings = %findings.join(", "), "memory entry blocked: it is not sent");
    format!(
        "[BLOCKED: {file_name} entry contained threat pattern(s): {}. Removed from system prompt; use memory(action=remove) to delete the original.]",
        findings.join(", ")
    )
}

/// The entries of `memories/<name>`: trimmed, non-empty, first of each duplicate kept.
/// Absent (empty) for a missing, unreadable, escaping, special or oversized file.
fn read_entries(home: &Path, name: &str) -> Result<Vec<String>, NotUtf8> {
    let path = home.join("memories").join(name);
    let Some(bytes) = read_inside(home, &path) else {
        return Ok(Vec::new());
    };
    let text = String::from_utf8(bytes).map_err(|_| NotUtf8(path))?;
    Ok(parse_entries(&universal_newlines(&text)))
}

/// Splits a memory file into entries (see [`read_entries`]).
fn parse_entries(text: &str) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    text.split(ENTRY_DELIMITER)
        .map(py_strip)
        .filter(|e| !e.is_empty())
        .filter(|e| seen.insert(*e))
        .map(str::to_string)
        .collect()
}

/// The bytes of `path` when it is a regular file of at most [`MAX_MEMORY_FILE_BYTES`] that
/// resolves inside `home`; `None` (with a warning for anything but a missing file) otherwise.
fn read_inside(home: &Path, path: &Path) -> Option<Vec<u8>> {
    let real = match path.canonicalize() {
        Ok(real) => real,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "memory file cannot be resolved: left out");
            return None;
        }
    };
    let real_home = home.canonicalize().unwrap_or_else(|_| home.to_path_buf());
    if !real.starts_with(&real_home) {
        tracing::warn!(file = %path.display(), target = %real.display(), "memory file leads outside the profile home: left out");
        return None;
    }
    let meta = std::fs::metadata(&real).ok()?;
    if !meta.is_file() {
        tracing::warn!(file = %path.display(), "memory file is not a regular file: left out");
        return None;
    }
    if meta.len() > MAX_MEMORY_FILE_BYTES {
        tracing::warn!(file = %path.display(), bytes = meta.len(), limit = MAX_MEMORY_FILE_BYTES, "memory file is too large: left out");
        return None;
    }
    match std::fs::read(&real) {
        Ok(bytes) => Some(bytes),
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "memory file cannot be read: left out");
            None
        }
    }
}

#[cfg(test)]
mod tests;
