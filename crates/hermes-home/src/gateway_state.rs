//! `gateway_state.json`: the runtime record of a profile's gateway, and its one writer.
//!
//! Shared with the original (field table in `../shared/reference`, §5.7). Every write of the
//! file goes through this module:
//! * the gateway process records its own life with [`record_process`] ([`ProcessRecord`]:
//!   `pid`, `kind`, `argv`, `start_time`, `hermes_home`, `gateway_state`, `exit_reason`,
//!   `code_sha`, `code_version`, stamped with `updated_at`);
//! * the supervisor records the operator's choice with [`set_desired`] (`desired_state` =
//!   `running` | `stopped`, stamped with `updated_at`);
//! * the first boot of a container started with `HERMES_GATEWAY_BOOTSTRAP_STATE=running`
//!   creates the file with [`bootstrap_running`] (only when there is none).
//!
//! The first two go through [`merge`], which changes only the fields given and keeps every
//! other key — including keys this version of Hermes does not know — and holds
//! `gateway_state.json.lock` from the read to the write, so the gateway and the supervisor
//! never erase each other's fields.
//!
//! Reading tolerates a UTF-8 BOM. A file that is not UTF-8 or not a JSON object reads as
//! [`StateRead::Invalid`] (callers treat it as "unknown" and warn); [`merge`] onto such a file
//! first copies it aside to `gateway_state.json.corrupt.<timestamp>`, so nothing is lost, and
//! does not replace it if the copy fails.
//!
//! Beside the record, the original's *planned-stop marker* `.gateway-planned-stop.json`
//! (`{"target_pid", "target_start_time", "stopper_pid", "written_at"}`, written by its
//! `hermes gateway stop` and `hermes update` just before they SIGTERM a gateway): a gateway
//! that finds one naming itself when it stops treats the stop as planned
//! ([`consume_planned_stop`]).
//!
//! Every `updated_at` this module writes is one type: the ISO time the original's gateway
//! writes (`gateway/status.py` `_utc_now_iso`, Python's `isoformat()` of an aware UTC time,
//! `2026-05-20T10:11:12.123456+00:00`), which its readers parse with `fromisoformat`. (The
//! original's service manager stamped `desired_state` with integer epoch seconds; a reader
//! then met two types in one field.)
//!
//! The *effective* state decides boot autostart: `desired_state` when present and not null,
//! else `gateway_state`, with `draining` and `degraded` counting as `running`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Error;
use crate::atomic::write_atomic;
use crate::seeds::{Seeded, seed_file};
use crate::{damage, lock};

/// The file's name in a profile's directory.
pub const FILE_NAME: &str = "gateway_state.json";

/// The mode of `gateway_state.json` and of its lock file (the record holds no secret).
const MODE: u32 = 0o644;

/// The record of the profile whose directory is `profile_dir`.
pub fn path(profile_dir: &Path) -> PathBuf {
    profile_dir.join(FILE_NAME)
}

/// A parsed record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayState {
    fields: Map<String, Value>,
}

/// The result of reading a state file.
#[derive(Debug, Clone, PartialEq)]
pub enum StateRead {
    /// No file.
    Missing,
    /// A valid record.
    Valid(GatewayState),
    /// The file exists but is not UTF-8 or not a JSON object; the reason says why.
    Invalid(String),
}

impl StateRead {
    /// The record, if valid.
    pub fn state(&self) -> Option<&GatewayState> {
        match self {
            StateRead::Valid(state) => Some(state),
            _ => None,
        }
    }
}

impl GatewayState {
    /// Builds a record from fields.
    pub fn from_fields(fields: Map<String, Value>) -> Self {
        GatewayState { fields }
    }

    /// All fields.
    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    fn str_field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }

    /// `gateway_state`: what the gateway last said about itself.
    pub fn gateway_state(&self) -> Option<&str> {
        self.str_field("gateway_state")
    }

    /// `desired_state`: what the operator last asked for.
    pub fn desired_state(&self) -> Option<&str> {
        self.str_field("desired_state")
    }

    /// `pid` of the gateway that wrote the record.
    pub fn pid(&self) -> Option<i64> {
        self.fields.get("pid").and_then(Value::as_i64)
    }

    /// `exit_reason`, if any.
    pub fn exit_reason(&self) -> Option<&str> {
        self.str_field("exit_reason")
    }

    /// The state that decides autostart (see module doc).
    pub fn effective_state(&self) -> Option<&str> {
        match self.desired_state().or_else(|| self.gateway_state()) {
            Some("draining" | "degraded") => Some("running"),
            other => other,
        }
    }

    /// What a supervisor's start-up makes of the record: the [`effective_state`]
    /// (Self::effective_state), except that without an operator's `desired_state` two records
    /// meant to run, and a boot that comes after them brings the gateway back
    /// (`Some("running")`: it starts):
    /// * a gateway that last stopped *asking for a restart* — the agent engine's `/restart` or
    ///   `hermes update` write `gateway_state: stopped` with `restart_requested: true` before
    ///   exiting 75;
    /// * a gateway still `starting`: a start cut short (everything killed a few ms into a
    ///   restart), since every start that ends writes its verdict (`running`, or
    ///   `startup_failed`, which stays down). The original registers it down, for good.
    pub fn run_intent(&self) -> Option<&str> {
        let restart_pending = self.gateway_state() == Some("stopped")
            && self
                .fields
                .get("restart_requested")
                .and_then(Value::as_bool)
                == Some(true);
        let start_cut_short = self.gateway_state() == Some("starting");
        if self.desired_state().is_none() && (restart_pending || start_cut_short) {
            Some("running")
        } else {
            self.effective_state()
        }
    }
}

/// Reads the record at `path`. Only I/O errors other than "not found" are errors.
pub fn read(path: &Path) -> Result<StateRead, Error> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(StateRead::Missing),
        Err(e) => return Err(Error::io("read", path, e)),
    };
    // Strict: a lossy decode would read damage as a record and a merge would store the
    // replacement characters for good.
    let text = match damage::decode(&bytes) {
        Ok(text) => text,
        Err(bad) => return Ok(StateRead::Invalid(bad.to_string())),
    };
    Ok(match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(fields)) => StateRead::Valid(GatewayState { fields }),
        Ok(_) => StateRead::Invalid("not a JSON object".into()),
        Err(e) => StateRead::Invalid(e.to_string()),
    })
}

/// The state to show for the record at `path`: its effective state, `unknown` when the file
/// cannot be read or is not a valid record, `None` when there is no file (never started).
pub fn recorded_state(path: &Path) -> Option<String> {
    match read(path) {
        Ok(StateRead::Valid(state)) => state.effective_state().map(str::to_string),
        Ok(StateRead::Missing) => None,
        Ok(StateRead::Invalid(_)) | Err(_) => Some("unknown".into()),
    }
}

/// Merges `updates` into the record at `path` (creating it), keeping every other key.
/// A `null` value in `updates` is written as `null` (the original's readers expect that).
/// Returns where an invalid previous file was preserved, if there was one.
pub fn merge(path: &Path, updates: Map<String, Value>) -> Result<Option<PathBuf>, Error> {
    update(path, |fields| fields.extend(updates))
}

/// Records one platform's state as the original's `write_runtime_status(platform=...)` does:
/// `platforms.<platform>` gets `state`, `error_message` (`null` when `None`) and
/// `updated_at`, keeping the platform's other keys, the other platforms and the rest of the
/// file. Returns where an invalid previous file was preserved, if there was one.
pub fn record_platform(
    path: &Path,
    platform: &str,
    state: &str,
    error_message: Option<&str>,
) -> Result<Option<PathBuf>, Error> {
    update(path, |fields| {
        let platforms = fields
            .entry("platforms")
            .or_insert_with(|| Value::Object(Map::new()));
        if !platforms.is_object() {
            *platforms = Value::Object(Map::new());
        }
        if let Value::Object(platforms) = platforms {
            let entry = platforms
                .entry(platform)
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(entry) = entry {
                entry.insert("state".into(), Value::from(state));
                entry.insert("error_message".into(), Value::from(error_message));
                entry.insert(
                    "updated_at".into(),
                    Value::from(crate::time::python_iso_utc_now()),
                );
            }
        }
    })
}

/// Read-modify-write of the record at `path` under its lock: `change` edits the fields (an
/// absent file is an empty record; an invalid one is preserved aside first).
fn update(
    path: &Path,
    change: impl FnOnce(&mut Map<String, Value>),
) -> Result<Option<PathBuf>, Error> {
    lock::with_locked(&lock::sidecar(path), MODE, || {
        let (mut fields, preserved) = match read(path)? {
            StateRead::Valid(state) => (state.fields, None),
            StateRead::Missing => (Map::new(), None),
            StateRead::Invalid(_) => (Map::new(), Some(damage::preserve(path)?)),
        };
        change(&mut fields);
        let text = serde_json::to_string(&fields).unwrap_or_default();
        write_atomic(path, text.as_bytes(), MODE)?;
        Ok(preserved)
    })
}

/// An operator's choice for a gateway, as `desired_state` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DesiredState {
    /// Started or restarted: `running`.
    Running,
    /// Stopped: `stopped`.
    Stopped,
}

impl DesiredState {
    /// The spelling in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            DesiredState::Running => "running",
            DesiredState::Stopped => "stopped",
        }
    }
}

/// Records an operator's choice: `desired_state` plus `updated_at` (module doc).
pub fn set_desired(path: &Path, desired: DesiredState) -> Result<(), Error> {
    let mut updates = Map::new();
    updates.insert("desired_state".into(), Value::from(desired.as_str()));
    updates.insert(
        "updated_at".into(),
        Value::from(crate::time::python_iso_utc_now()),
    );
    merge(path, updates).map(|_| ())
}

/// What a gateway process records about itself at each phase (module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRecord<'a> {
    /// The gateway's pid.
    pub pid: u32,
    /// What kind of process wrote the record (`hermes-gateway`).
    pub kind: &'a str,
    /// Its command line.
    pub argv: &'a [String],
    /// Its start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`), which
    /// tells a live pid from a reused one.
    pub start_time: Option<u64>,
    /// The profile directory it serves.
    pub hermes_home: &'a Path,
    /// The phase (`starting`, `running`, `draining`, `stopped`, `startup_failed`, ...).
    pub gateway_state: &'a str,
    /// Why it stopped, if it did.
    pub exit_reason: Option<&'a str>,
    /// The build's commit, when known.
    pub code_sha: Option<&'a str>,
    /// The build's version.
    pub code_version: &'a str,
}

/// Merges a gateway's record of itself into the file at `path`, stamped with `updated_at`, keeping `desired_state` and every other key. Returns where an invalid
/// previous file was preserved, if there was one.
pub fn record_process(path: &Path, record: &ProcessRecord<'_>) -> Result<Option<PathBuf>, Error> {
    let mut fields = Map::new();
    fields.insert("pid".into(), Value::from(record.pid));
    fields.insert("kind".into(), Value::from(record.kind));
    fields.insert("argv".into(), Value::from(record.argv.to_vec()));
    fields.insert("start_time".into(), Value::from(record.start_time));
    fields.insert(
        "hermes_home".into(),
        Value::from(record.hermes_home.to_string_lossy().into_owned()),
    );
    fields.insert("gateway_state".into(), Value::from(record.gateway_state));
    fields.insert("exit_reason".into(), Value::from(record.exit_reason));
    fields.insert(
        "updated_at".into(),
        Value::from(crate::time::python_iso_utc_now()),
    );
    fields.insert("code_sha".into(), Value::from(record.code_sha));
    fields.insert("code_version".into(), Value::from(record.code_version));
    merge(path, fields)
}

/// Creates the record at `path` as `{"gateway_state":"running"}` when there is no file there
/// (first boot with `HERMES_GATEWAY_BOOTSTRAP_STATE=running`): an existing record, or
/// anything else at that name (a symlink included, which is never followed), is kept.
pub fn bootstrap_running(path: &Path) -> Result<Seeded, Error> {
    let mut fields = Map::new();
    fields.insert("gateway_state".into(), Value::from("running"));
    let mut text = serde_json::to_string(&fields).unwrap_or_default();
    text.push('\n');
    seed_file(path, &text, MODE)
}

/// The original's planned-stop marker, in a profile's directory (`gateway/status.py`,
/// `_PLANNED_STOP_MARKER_FILENAME`).
pub const PLANNED_STOP_FILE: &str = ".gateway-planned-stop.json";

/// Seconds after its `written_at` when a marker is stale (`_PLANNED_STOP_MARKER_TTL_S`).
pub const PLANNED_STOP_TTL_SECS: f64 = 60.0;

/// Consumes the planned-stop marker in `profile_dir` and says whether it named the process
/// `pid` started at `start_time` (clock ticks since boot), by the original's rules
/// (`gateway/status.py`, `consume_planned_stop_marker_for_self`):
/// * no file, or not a JSON object: `false`, the file is left;
/// * no integer `target_pid`, or `written_at` not an ISO time with an offset, or older than
///   [`PLANNED_STOP_TTL_SECS`]: `false`, the file is removed;
/// * a `replacer_hermes_home` naming another directory: `false`, the file is left for the
///   gateway it belongs to;
/// * otherwise the file is removed, and the answer is whether `target_pid` is `pid` and,
///   when both are known, `target_start_time` is `start_time` (a reused pid never matches).
pub fn consume_planned_stop(profile_dir: &Path, pid: u32, start_time: Option<u64>) -> bool {
    let path = profile_dir.join(PLANNED_STOP_FILE);
    // Best effort, as in the original: a marker that cannot be removed still expires.
    let remove = || {
        let _ = fs::remove_file(&path);
    };
    let Ok(bytes) = fs::read(&path) else {
        return false;
    };
    let record = match std::str::from_utf8(&bytes).map(|t| serde_json::from_str(t.trim())) {
        Ok(Ok(Value::Object(record))) => record,
        _ => return false,
    };
    let target_pid = match record.get("target_pid") {
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    let Some(target_pid) = target_pid else {
        remove();
        return false;
    };
    let written_at = record
        .get("written_at")
        .and_then(Value::as_str)
        .unwrap_or("");
    if marker_is_stale(written_at) {
        remove();
        return false;
    }
    match record.get("replacer_hermes_home") {
        None | Some(Value::Null) => {}
        Some(home) if home.as_str() == Some(&*profile_dir.to_string_lossy()) => {}
        Some(_) => return false,
    }
    let target_start = record.get("target_start_time").filter(|v| !v.is_null());
    let matches = target_pid == i64::from(pid)
        && match (target_start, start_time) {
            (Some(theirs), Some(ours)) => theirs.as_u64() == Some(ours),
            _ => true,
        };
    remove();
    matches
}

/// Writes the planned-stop marker into `profile_dir` for the gateway `target_pid` (started
/// at `target_start_time`), just before it is sent SIGTERM, as the original's `hermes gateway
/// stop` does (`gateway/status.py` `write_planned_stop_marker`: compact JSON, mode 0600,
/// `written_at` as Python's `isoformat()` of an aware UTC time). The gateway it names then
/// records `stopped` rather than `running` ([`consume_planned_stop`]), ours or the original.
pub fn write_planned_stop(
    profile_dir: &Path,
    target_pid: u32,
    target_start_time: Option<u64>,
) -> Result<(), Error> {
    let mut record = Map::new();
    record.insert("target_pid".into(), Value::from(target_pid));
    record.insert("target_start_time".into(), Value::from(target_start_time));
    record.insert("stopper_pid".into(), Value::from(std::process::id()));
    record.insert(
        "written_at".into(),
        Value::from(crate::time::python_iso_utc_now()),
    );
    let text = serde_json::to_string(&record).unwrap_or_default();
    write_atomic(&profile_dir.join(PLANNED_STOP_FILE), text.as_bytes(), 0o600)
}

/// `written_at` is unparseable, has no offset, or is older than the TTL (`_marker_is_stale`).
fn marker_is_stale(written_at: &str) -> bool {
    match parse_iso_with_offset(written_at) {
        Some(written) => {
            (time::OffsetDateTime::now_utc() - written).as_seconds_f64() > PLANNED_STOP_TTL_SECS
        }
        None => true,
    }
}

/// `YYYY-MM-DD[T ]HH:MM:SS[.f…](Z|±HH:MM)`: what Python's `datetime.isoformat()` writes for
/// an aware time (the original's `written_at`). A time without an offset is `None`: Python
/// cannot subtract it from an aware one either.
fn parse_iso_with_offset(text: &str) -> Option<time::OffsetDateTime> {
    let num = |s: &str| -> Option<i32> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
    };
    let (date, rest) = (text.get(..10)?, text.get(11..)?);
    if !matches!(text.as_bytes().get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let mut ymd = date.split('-');
    let (year, month, day) = (num(ymd.next()?)?, num(ymd.next()?)?, num(ymd.next()?)?);
    let split = rest.find(['Z', 'z', '+', '-'])?;
    let (clock, offset) = rest.split_at(split);
    let (hms, fraction) = clock.split_once('.').unwrap_or((clock, ""));
    let mut parts = hms.split(':');
    let (h, m, sec) = (
        num(parts.next()?)?,
        num(parts.next()?)?,
        num(parts.next()?)?,
    );
    let nanos = if fraction.is_empty() {
        0
    } else {
        let digits: String = fraction
            .chars()
            .chain("000000000".chars())
            .take(9)
            .collect();
        u32::try_from(num(&digits)?).ok()?
    };
    let offset_secs = match offset {
        "Z" | "z" => 0,
        _ => {
            let sign = if offset.starts_with('-') { -1 } else { 1 };
            let mut hm = offset.get(1..)?.split(':');
            let (oh, om) = (num(hm.next()?)?, num(hm.next()?)?);
            sign * (oh * 3600 + om * 60)
        }
    };
    let date = time::Date::from_calendar_date(
        year,
        time::Month::try_from(u8::try_from(month).ok()?).ok()?,
        u8::try_from(day).ok()?,
    )
    .ok()?;
    let clock = time::Time::from_hms_nano(
        u8::try_from(h).ok()?,
        u8::try_from(m).ok()?,
        u8::try_from(sec).ok()?,
        nanos,
    )
    .ok()?;
    let offset = time::UtcOffset::from_whole_seconds(offset_secs).ok()?;
    Some(time::PrimitiveDateTime::new(date, clock).assume_offset(offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_platform_state_is_merged_into_its_entry_only() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        std::fs::write(
            &p,
            r#"{"gateway_state":"running","platforms":{"telegram":{"state":"connected"},"api_server":{"error_code":"x"}}}"#,
        )
        .unwrap();
        record_platform(&p, "api_server", "disabled", Some("off")).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["gateway_state"], "running");
        assert_eq!(v["platforms"]["telegram"]["state"], "connected");
        let api = &v["platforms"]["api_server"];
        assert_eq!(
            (api["state"].as_str(), api["error_message"].as_str()),
            (Some("disabled"), Some("off"))
        );
        assert_eq!(api["error_code"], "x", "the entry's other keys stay");
        assert!(api["updated_at"].is_string());
        record_platform(&p, "api_server", "connected", None).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["platforms"]["api_server"]["state"], "connected");
        assert!(v["platforms"]["api_server"]["error_message"].is_null());
    }
    use serde_json::json;

    fn marker(dir: &Path, value: &Value) -> PathBuf {
        let path = dir.join(PLANNED_STOP_FILE);
        fs::write(&path, value.to_string()).unwrap();
        path
    }

    /// `datetime.now(timezone.utc).isoformat()`, shifted by `secs`.
    fn iso_in(secs: i64) -> String {
        crate::time::python_iso(time::OffsetDateTime::now_utc() + time::Duration::seconds(secs))
    }

    #[test]
    fn a_planned_stop_marker_is_consumed_by_the_process_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = |pid: u32, start: Value| {
            json!({"target_pid": pid, "target_start_time": start, "stopper_pid": 1,
                   "written_at": iso_in(-5)})
        };
        let path = marker(dir.path(), &fresh(42, json!(7)));
        assert!(consume_planned_stop(dir.path(), 42, Some(7)));
        assert!(!path.exists(), "consumed");
        assert!(!consume_planned_stop(dir.path(), 42, Some(7)), "once");

        marker(dir.path(), &fresh(42, Value::Null));
        assert!(
            consume_planned_stop(dir.path(), 42, Some(7)),
            "start time unknown"
        );

        for (other, why) in [
            (fresh(42, json!(8)), "a reused pid"),
            (fresh(43, json!(7)), "another process"),
        ] {
            let path = marker(dir.path(), &other);
            assert!(!consume_planned_stop(dir.path(), 42, Some(7)), "{why}");
            assert!(!path.exists(), "{why}: removed, as the original does");
        }
        let mut stale = fresh(42, json!(7));
        stale["written_at"] = json!(iso_in(-61));
        let path = marker(dir.path(), &stale);
        assert!(!consume_planned_stop(dir.path(), 42, Some(7)), "stale");
        assert!(!path.exists());
        let mut naive = fresh(42, json!(7));
        naive["written_at"] = json!("2026-01-01T00:00:00");
        marker(dir.path(), &naive);
        assert!(!consume_planned_stop(dir.path(), 42, Some(7)), "no offset");
        let mut zulu = fresh(42, json!(7));
        zulu["written_at"] = json!(crate::time::iso_utc_now());
        marker(dir.path(), &zulu);
        assert!(
            consume_planned_stop(dir.path(), 42, Some(7)),
            "Z is accepted"
        );

        let mut elsewhere = fresh(42, json!(7));
        elsewhere["replacer_hermes_home"] = json!("/somewhere/else");
        let path = marker(dir.path(), &elsewhere);
        assert!(!consume_planned_stop(dir.path(), 42, Some(7)));
        assert!(path.exists(), "left for the profile it names");

        write_planned_stop(dir.path(), 42, Some(7)).unwrap();
        let written: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            written.as_object().unwrap().keys().collect::<Vec<_>>(),
            [
                "target_pid",
                "target_start_time",
                "stopper_pid",
                "written_at"
            ]
        );
        assert!(consume_planned_stop(dir.path(), 42, Some(7)), "{written}");

        let path = dir.path().join(PLANNED_STOP_FILE);
        fs::write(&path, "not json").unwrap();
        assert!(!consume_planned_stop(dir.path(), 42, Some(7)));
        assert!(path.exists(), "left, as the original leaves it");
    }

    #[test]
    fn effective_state_rules() {
        let state = |v: Value| GatewayState::from_fields(v.as_object().unwrap().clone());
        assert_eq!(
            state(json!({"gateway_state": "running"})).effective_state(),
            Some("running")
        );
        assert_eq!(
            state(json!({"gateway_state": "draining"})).effective_state(),
            Some("running")
        );
        assert_eq!(
            state(json!({"gateway_state": "running", "desired_state": "stopped"}))
                .effective_state(),
            Some("stopped")
        );
        assert_eq!(
            state(json!({"gateway_state": "stopped", "desired_state": null})).effective_state(),
            Some("stopped")
        );
        assert_eq!(state(json!({})).effective_state(), None);
    }

    #[test]
    fn bom_is_tolerated_and_merge_keeps_other_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway_state.json");
        fs::write(
            &path,
            "\u{feff}{\"gateway_state\":\"running\",\"platforms\":{\"x\":1},\"future\":true}",
        )
        .unwrap();
        set_desired(&path, DesiredState::Stopped).unwrap();
        let StateRead::Valid(state) = read(&path).unwrap() else {
            panic!("invalid")
        };
        assert_eq!(state.gateway_state(), Some("running"));
        assert_eq!(state.desired_state(), Some("stopped"));
        assert_eq!(state.fields()["platforms"]["x"], 1);
        assert_eq!(state.fields()["future"], true);
    }

    #[test]
    fn invalid_file_reads_as_invalid_and_merge_preserves_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway_state.json");
        fs::write(&path, "garbage{").unwrap();
        assert!(matches!(read(&path).unwrap(), StateRead::Invalid(_)));
        assert_eq!(recorded_state(&path).as_deref(), Some("unknown"));
        assert_eq!(recorded_state(&dir.path().join("missing")), None);
        let mut updates = Map::new();
        updates.insert("gateway_state".into(), json!("starting"));
        let preserved = merge(&path, updates).unwrap().unwrap();
        assert_eq!(fs::read_to_string(preserved).unwrap(), "garbage{");
        assert_eq!(
            read(&path).unwrap().state().unwrap().gateway_state(),
            Some("starting")
        );
    }

    #[test]
    fn concurrent_merges_keep_every_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway_state.json");
        let n = 20;
        let shared = path.clone();
        for result in crate::test_support::race(n, move |i| {
            let mut updates = Map::new();
            updates.insert(format!("field_{i}"), json!(i));
            merge(&shared, updates)
        }) {
            assert_eq!(result.unwrap(), None, "nothing was corrupt");
        }
        let state = read(&path).unwrap();
        let fields = state.state().expect("a valid record").fields();
        let lost: Vec<usize> = (0..n)
            .filter(|i| fields.get(&format!("field_{i}")) != Some(&json!(i)))
            .collect();
        assert!(
            lost.is_empty(),
            "lost {} of {n} fields: {lost:?}",
            lost.len()
        );
    }

    #[test]
    fn invalid_utf8_is_invalid_and_preserved_before_a_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway_state.json");
        let damaged: &[u8] = b"{\"gateway_state\":\"running\",\"argv\":[\"caf\xe9\"]}";
        fs::write(&path, damaged).unwrap();
        let StateRead::Invalid(reason) = read(&path).unwrap() else {
            panic!("invalid UTF-8 must not read as a valid record")
        };
        assert!(reason.contains("UTF-8"), "{reason}");
        assert_eq!(recorded_state(&path).as_deref(), Some("unknown"));
        let mut updates = Map::new();
        updates.insert("desired_state".into(), json!("stopped"));
        let preserved = merge(&path, updates)
            .unwrap()
            .expect("the damaged file is copied aside before it is replaced");
        assert_eq!(fs::read(preserved).unwrap(), damaged, "byte for byte");
        let fresh = read(&path).unwrap();
        let fields = fresh.state().unwrap().fields();
        assert_eq!(fields.get("desired_state"), Some(&json!("stopped")));
        assert_eq!(
            fields.get("gateway_state"),
            None,
            "nothing of the damaged record is kept"
        );
    }

    #[test]
    fn bootstrap_creates_a_running_record_only_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        assert_eq!(bootstrap_running(&path).unwrap(), Seeded::Created);
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "{\"gateway_state\":\"running\"}\n"
        );
        fs::write(&path, "{\"gateway_state\":\"stopped\"}").unwrap();
        assert_eq!(bootstrap_running(&path).unwrap(), Seeded::Kept);
        assert_eq!(recorded_state(&path).as_deref(), Some("stopped"));
        // A symlink is kept and not followed.
        let outside = dir.path().join("outside");
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        assert_eq!(bootstrap_running(&link).unwrap(), Seeded::Kept);
        assert!(!outside.exists());
    }

    #[test]
    fn a_process_record_keeps_the_operators_choice_and_unknown_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        fs::write(&path, r#"{"desired_state":"stopped","future":1}"#).unwrap();
        let argv = vec!["hermes".to_string(), "gateway".to_string()];
        let record = ProcessRecord {
            pid: 42,
            kind: "hermes-gateway",
            argv: &argv,
            start_time: Some(7),
            hermes_home: dir.path(),
            gateway_state: "running",
            exit_reason: None,
            code_sha: Some("abc"),
            code_version: "0.1.0",
        };
        assert_eq!(record_process(&path, &record).unwrap(), None);
        let state = read(&path).unwrap();
        let fields = state.state().unwrap().fields();
        let keys: Vec<&str> = fields.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "desired_state",
                "future",
                "pid",
                "kind",
                "argv",
                "start_time",
                "hermes_home",
                "gateway_state",
                "exit_reason",
                "updated_at",
                "code_sha",
                "code_version"
            ]
        );
        assert_eq!(fields["argv"], json!(["hermes", "gateway"]));
        assert_eq!(fields["exit_reason"], Value::Null);
        assert_eq!(state.state().unwrap().effective_state(), Some("stopped"));
        assert!(fields["updated_at"].is_string());
    }

    /// What the original's gateway writes (`2026-05-20T10:11:12.123456+00:00`).
    fn is_python_iso(value: &Value) -> bool {
        value.as_str().is_some_and(|t| {
            t.len() == 32 && t.ends_with("+00:00") && parse_iso_with_offset(t).is_some()
        })
    }

    #[test]
    fn every_writer_stamps_updated_at_as_the_originals_iso_time() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        let stamp = |p: &Path| -> Value {
            serde_json::from_str::<Value>(&fs::read_to_string(p).unwrap()).unwrap()["updated_at"]
                .clone()
        };
        set_desired(&p, DesiredState::Stopped).unwrap();
        assert!(is_python_iso(&stamp(&p)), "set_desired: {}", stamp(&p));
        let argv = vec!["hermes".to_string()];
        let record = ProcessRecord {
            pid: 1,
            kind: "hermes-gateway",
            argv: &argv,
            start_time: None,
            hermes_home: dir.path(),
            gateway_state: "running",
            exit_reason: None,
            code_sha: None,
            code_version: "0.1.0",
        };
        record_process(&p, &record).unwrap();
        assert!(is_python_iso(&stamp(&p)), "record_process: {}", stamp(&p));
        record_platform(&p, "api_server", "connected", None).unwrap();
        let v: Value = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
        let platform = &v["platforms"]["api_server"]["updated_at"];
        assert!(is_python_iso(platform), "record_platform: {platform}");
    }
}
