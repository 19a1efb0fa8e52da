//! `cron/`: the agent's scheduled jobs of a profile, the reading side.
//!
//! The agent (`hermes-agent` 0.19 and 0.20, `cron/jobs.py`) keeps a profile's jobs in
//! `<profile>/cron/jobs.json` as `{"jobs": [...], "updated_at": ...}` (a bare list is read too,
//! as the agent repairs it), each job an object with `id`, `name`, `schedule` (`{kind, display,
//! expr | minutes | run_at}`), `schedule_display`, `enabled`, `state`, `paused_at`,
//! `next_run_at`, `last_run_at`, `last_status`, `last_error`, `repeat` and more. Its ticker
//! (inside the agent's gateway) records liveness beside them: `ticker_heartbeat` and
//! `ticker_last_success` hold the epoch seconds of the last loop and the last tick that did not
//! fail, `ticker_last_error` (0.20) the epoch and the message of the last failure. A run's
//! output is `cron/output/<job id>/<timestamp>.md`.
//!
//! This module only reads. Every change to `jobs.json` is the agent's own code's to make (it
//! holds `cron/.jobs.lock`, computes the next run of a cron expression, merges concurrent
//! writes), so callers that pause, resume or trigger a job run the agent for it. Reading
//! follows the agent's readers: a UTF-8 BOM is skipped, entries that are not objects are left
//! out, and each job is shown the way `_normalize_job_record` shows it (a name when it has
//! none, `schedule_display`, and the *effective* state of `effective_job_state`: `enabled` is
//! what the scheduler honours, so an enabled job never shows as paused).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use crate::no_follow;

/// The directory of a profile's jobs, beside its `config.yaml`.
pub const DIR: &str = "cron";
/// The jobs file's name in [`DIR`].
pub const JOBS_FILE: &str = "jobs.json";
/// How long a run's output excerpt may be (the agent's own excerpts stop at 2000 characters).
pub const EXCERPT_CHARS: usize = 2000;
/// The largest `jobs.json` read (the agent's are kilobytes; a bigger one is refused, never
/// read into memory).
pub const MAX_JOBS_BYTES: u64 = 16 << 20;
/// The largest ticker file read (an epoch and one error line).
const MAX_TICKER_BYTES: u64 = 64 << 10;

/// The jobs file of the profile whose directory is `profile_dir`.
pub fn jobs_path(profile_dir: &Path) -> PathBuf {
    profile_dir.join(DIR).join(JOBS_FILE)
}

/// Why `jobs.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JobsFileError {
    /// It exists but cannot be read.
    #[error("could not read `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// It is not JSON.
    #[error("`{}` is not valid JSON (line {line}, column {column}): {message}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where the parser stopped (1-based).
        line: usize,
        /// Where the parser stopped (1-based).
        column: usize,
        /// The parser's reason.
        message: String,
    },
    /// It is JSON, but neither `{"jobs": [...]}` nor a list.
    #[error("`{}` holds {found}, not the agent's `{{\"jobs\": [...]}}`", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What it holds instead.
        found: &'static str,
    },
}

impl JobsFileError {
    /// What to do about it.
    pub fn hint(&self) -> String {
        match self {
            JobsFileError::Io { .. } => {
                "it must be a regular file (never a symlink) of at most 16 MiB that the service user can read: check its owner and mode".to_string()
            }
            JobsFileError::Json { .. } | JobsFileError::Shape { .. } => {
                "the agent's scheduler cannot read it either: restore it from a backup, or fix it by hand and keep a copy".to_string()
            }
        }
    }
}

/// The jobs of the profile whose directory is `profile_dir`, each shown as the agent shows it
/// ([`show`]); none when there is no `jobs.json` yet.
///
/// # Errors
/// [`JobsFileError`] when the file cannot be read or is not the agent's format.
pub fn read(profile_dir: &Path) -> Result<Vec<Map<String, Value>>, JobsFileError> {
    let path = jobs_path(profile_dir);
    // No planted link followed (the dashboard may run as root on the service user's files).
    let bytes = match no_follow::read(profile_dir, &[DIR, JOBS_FILE], MAX_JOBS_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(JobsFileError::Io { path, source }),
    };
    let text = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    let data: Value = serde_json::from_slice(text).map_err(|e| JobsFileError::Json {
        path: path.clone(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    let entries = match data {
        Value::Object(mut top) => match top.remove("jobs") {
            Some(Value::Array(jobs)) => jobs,
            None | Some(Value::Null) => Vec::new(),
            Some(other) => {
                return Err(JobsFileError::Shape {
                    path,
                    found: kind(&other),
                });
            }
        },
        Value::Array(jobs) => jobs,
        other => {
            return Err(JobsFileError::Shape {
                path,
                found: kind(&other),
            });
        }
    };
    Ok(entries
        .into_iter()
        .filter_map(|entry| match entry {
            Value::Object(job) => Some(show(job)),
            _ => None,
        })
        .collect())
}

/// The job whose `id` (or, failing that, `name`) is `reference`, as the agent's `resolve_job_ref`
/// finds it.
///
/// # Errors
/// As [`read`].
pub fn find(
    profile_dir: &Path,
    reference: &str,
) -> Result<Option<Map<String, Value>>, JobsFileError> {
    let jobs = read(profile_dir)?;
    let by = |field: &str| {
        jobs.iter()
            .find(|j| j.get(field).and_then(Value::as_str) == Some(reference))
            .cloned()
    };
    Ok(by("id").or_else(|| by("name")))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// `job` as the agent's readers show it: every stored field kept, with `id` and `name` as text
/// (a job without a name takes the start of its prompt, skill, script or id),
/// `schedule_display` filled in and `state` the effective one.
pub fn show(mut job: Map<String, Value>) -> Map<String, Value> {
    let text = |job: &Map<String, Value>, key: &str| match job.get(key) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let id = Some(text(&job, "id"))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    job.insert("id".into(), Value::String(id.clone()));
    if text(&job, "name").trim().is_empty() {
        let first_skill = match job.get("skills") {
            Some(Value::Array(skills)) => skills.first().and_then(Value::as_str).map(str::to_owned),
            _ => None,
        }
        .or_else(|| Some(text(&job, "skill")).filter(|s| !s.is_empty()));
        let source = [
            Some(text(&job, "prompt")),
            first_skill,
            Some(text(&job, "script")),
            Some(id),
        ]
        .into_iter()
        .flatten()
        .find(|s| !s.trim().is_empty())
        .unwrap_or_default();
        let name: String = source
            .chars()
            .take(50)
            .collect::<String>()
            .trim()
            .to_string();
        let name = if name.is_empty() {
            "cron job".to_string()
        } else {
            name
        };
        job.insert("name".into(), Value::String(name));
    }
    let display = schedule_display(&job);
    job.insert("schedule_display".into(), Value::String(display));
    let state = effective_state(&job);
    job.insert("state".into(), Value::String(state.to_string()));
    job
}

/// `schedule_display`, else the schedule's `display`, `value`, `expr` or `run_at`, else `?`.
fn schedule_display(job: &Map<String, Value>) -> String {
    let nonempty = |v: Option<&Value>| match v {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    if let Some(shown) = nonempty(job.get("schedule_display")) {
        return shown;
    }
    match job.get("schedule") {
        Some(Value::Object(schedule)) => ["display", "value", "expr", "run_at"]
            .iter()
            .find_map(|k| nonempty(schedule.get(*k)))
            .unwrap_or_else(|| "?".to_string()),
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => "?".to_string(),
    }
}

/// The agent's `effective_job_state`: `completed` and `error` stay; a disabled job is
/// `paused` (or its stored state); an enabled one is never `paused`.
fn effective_state(job: &Map<String, Value>) -> &str {
    let stored = match job.get("state") {
        Some(Value::String(s)) => s.trim(),
        _ => "",
    };
    let enabled = job.get("enabled").and_then(Value::as_bool).unwrap_or(true);
    let paused_at = job
        .get("paused_at")
        .is_some_and(|v| !v.is_null() && v != &Value::String(String::new()));
    match stored {
        "completed" | "error" => stored,
        _ if !enabled => {
            if stored.is_empty() || paused_at {
                "paused"
            } else {
                stored
            }
        }
        "paused" | "" => "scheduled",
        _ if paused_at => "scheduled",
        _ => stored,
    }
}

/// What the agent's ticker last recorded beside the jobs.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Ticker {
    /// Seconds since the ticker's loop last ran (`ticker_heartbeat`); `None` when it never
    /// recorded one (no agent gateway has run the jobs, or a release without the file).
    pub heartbeat_age_s: Option<f64>,
    /// Seconds since a tick last completed without failing (`ticker_last_success`).
    pub success_age_s: Option<f64>,
    /// The last tick's failure (`ticker_last_error`, 0.20), when one is recorded.
    pub last_error: Option<String>,
}

/// Reads the ticker's files of the profile whose directory is `profile_dir`; unreadable or
/// malformed files read as unknown (the agent's own `hermes cron status` does the same).
pub fn ticker(profile_dir: &Path) -> Ticker {
    let file = |name: &str| {
        let bytes = no_follow::read(profile_dir, &[DIR, name], MAX_TICKER_BYTES).ok()?;
        String::from_utf8(bytes).ok()
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let age = |name: &str| {
        let text = file(name)?;
        let at: f64 = text.trim().parse().ok()?;
        at.is_finite().then(|| (now - at).max(0.0))
    };
    let last_error = file("ticker_last_error").and_then(|text| {
        let message = text.lines().skip(1).collect::<Vec<_>>().join("\n");
        let message = message.trim();
        (!message.is_empty()).then(|| message.to_string())
    });
    Ticker {
        heartbeat_age_s: age("ticker_heartbeat"),
        success_age_s: age("ticker_last_success"),
        last_error,
    }
}

/// The newest saved output of the job `job_id` (`cron/output/<id>/*.md`, by name: the agent
/// names them by timestamp): its file name and up to [`EXCERPT_CHARS`] of its text. `None`
/// when there is none, or when `job_id` could leave the output directory.
pub fn last_output(profile_dir: &Path, job_id: &str) -> Option<(String, String)> {
    let safe = !job_id.is_empty()
        && job_id != "."
        && job_id != ".."
        && !job_id.contains(['/', '\\', '\0']);
    if !safe {
        return None;
    }
    // The names are listed only where no component is a link; the file is then read with no
    // link followed on the way (a race that swaps one in reads nothing).
    let mut dir = profile_dir.to_path_buf();
    for part in [DIR, "output", job_id] {
        dir.push(part);
        if !fs::symlink_metadata(&dir).ok()?.is_dir() {
            return None;
        }
    }
    let newest = fs::read_dir(&dir)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.ends_with(".md"))
        .max()?;
    // Four bytes per character at most: enough for the excerpt, whatever the file's size.
    let most = (EXCERPT_CHARS * 4) as u64;
    let bytes = no_follow::read_start(profile_dir, &[DIR, "output", job_id, &newest], most).ok()?;
    let text: String = String::from_utf8_lossy(&bytes)
        .trim()
        .chars()
        .take(EXCERPT_CHARS)
        .collect();
    Some((newest, text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(dir: &Path, text: &[u8]) {
        fs::create_dir_all(dir.join(DIR)).unwrap();
        fs::write(jobs_path(dir), text).unwrap();
    }

    fn job(value: Value) -> Map<String, Value> {
        show(value.as_object().unwrap().clone())
    }

    #[test]
    fn no_file_is_no_jobs() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn the_agents_shape_a_bare_list_and_a_bom_are_read() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            br#"{"jobs": [{"id": "a1", "name": "digest", "extra": {"kept": true}}, 7], "updated_at": "x"}"#,
        );
        let jobs = read(dir.path()).unwrap();
        assert_eq!(jobs.len(), 1, "the entry that is not an object is left out");
        assert_eq!(jobs[0]["extra"], json!({"kept": true}));
        write(dir.path(), b"\xEF\xBB\xBF[{\"id\": \"b2\"}]");
        assert_eq!(read(dir.path()).unwrap()[0]["id"], "b2");
    }

    #[test]
    fn a_broken_file_says_where() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), b"{\"jobs\": [\n  {\"id\": }\n]}");
        let e = read(dir.path()).unwrap_err();
        assert!(matches!(e, JobsFileError::Json { line: 2, .. }), "{e}");
        write(dir.path(), b"\"jobs\"");
        let e = read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("holds a string"), "{e}");
        assert!(!e.hint().is_empty());
    }

    #[test]
    fn a_job_without_a_name_takes_its_prompt() {
        let j = job(
            json!({"id": "x", "name": null, "prompt": "  Summarise the inbox every morning, then file it under today's date"}),
        );
        assert_eq!(j["name"], "Summarise the inbox every morning, then file it");
        let j = job(json!({"id": "x", "skills": ["news"]}));
        assert_eq!(j["name"], "news");
        let j = job(json!({}));
        assert_eq!(
            (j["id"].clone(), j["name"].clone()),
            (json!("unknown"), json!("unknown"))
        );
    }

    #[test]
    fn the_schedule_is_displayed_from_what_there_is() {
        assert_eq!(
            job(json!({"schedule_display": "every 30m"}))["schedule_display"],
            "every 30m"
        );
        assert_eq!(
            job(json!({"schedule": {"kind": "cron", "expr": "0 9 * * *"}}))["schedule_display"],
            "0 9 * * *"
        );
        assert_eq!(job(json!({"schedule": {}}))["schedule_display"], "?");
    }

    #[test]
    fn the_state_is_the_one_the_scheduler_honours() {
        let state = |v: Value| job(v)["state"].as_str().unwrap().to_string();
        assert_eq!(
            state(json!({"enabled": false, "state": "paused"})),
            "paused"
        );
        assert_eq!(state(json!({"enabled": false})), "paused");
        assert_eq!(
            state(json!({"enabled": true, "state": "paused"})),
            "scheduled"
        );
        assert_eq!(
            state(json!({"enabled": true, "state": "running", "paused_at": "t"})),
            "scheduled"
        );
        assert_eq!(
            state(json!({"enabled": false, "state": "completed"})),
            "completed"
        );
        assert_eq!(state(json!({"state": "error"})), "error");
        assert_eq!(state(json!({})), "scheduled");
    }

    #[test]
    fn find_takes_an_id_before_a_name() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            br#"{"jobs": [{"id": "n1", "name": "a2"}, {"id": "a2", "name": "b"}]}"#,
        );
        assert_eq!(find(dir.path(), "a2").unwrap().unwrap()["name"], "b");
        assert_eq!(find(dir.path(), "b").unwrap().unwrap()["id"], "a2");
        assert!(find(dir.path(), "zz").unwrap().is_none());
    }

    #[test]
    fn a_planted_link_is_not_followed() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let secret = tempfile::tempdir().unwrap();
        fs::write(
            secret.path().join("jobs.json"),
            br#"{"jobs": [{"id": "secret"}]}"#,
        )
        .unwrap();
        fs::write(
            secret.path().join("ticker_last_error"),
            "0\nroot's secret line\n",
        )
        .unwrap();
        fs::create_dir(dir.path().join(DIR)).unwrap();
        symlink(secret.path().join("jobs.json"), jobs_path(dir.path())).unwrap();
        symlink(
            secret.path().join("ticker_last_error"),
            dir.path().join(DIR).join("ticker_last_error"),
        )
        .unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        assert_eq!(ticker(dir.path()).last_error, None);
        // The whole directory a link: nothing read either.
        let other = tempfile::tempdir().unwrap();
        symlink(secret.path(), other.path().join(DIR)).unwrap();
        assert!(read(other.path()).is_err());
        // An output directory that is a link.
        fs::create_dir_all(secret.path().join("j1")).unwrap();
        fs::write(secret.path().join("j1/a.md"), "secret").unwrap();
        symlink(secret.path(), dir.path().join(DIR).join("output")).unwrap();
        assert_eq!(last_output(dir.path(), "j1"), None);
    }

    #[test]
    fn a_huge_output_is_read_only_as_far_as_the_excerpt() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("cron/output/j1");
        fs::create_dir_all(&out).unwrap();
        fs::write(out.join("a.md"), "é".repeat(1 << 20)).unwrap();
        let (_, excerpt) = last_output(dir.path(), "j1").unwrap();
        assert_eq!(excerpt.chars().count(), EXCERPT_CHARS);
        assert!(excerpt.chars().all(|c| c == 'é'));
    }

    #[test]
    fn the_ticker_files_give_ages_and_the_last_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(ticker(dir.path()), Ticker::default());
        let cron = dir.path().join(DIR);
        fs::create_dir_all(&cron).unwrap();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        fs::write(cron.join("ticker_heartbeat"), format!("{}", now - 30.0)).unwrap();
        fs::write(cron.join("ticker_last_success"), "not a number").unwrap();
        fs::write(
            cron.join("ticker_last_error"),
            format!("{now}\nPermissionError: jobs.json\n"),
        )
        .unwrap();
        let t = ticker(dir.path());
        let age = t.heartbeat_age_s.unwrap();
        assert!((29.0..60.0).contains(&age), "{age}");
        assert_eq!(t.success_age_s, None);
        assert_eq!(t.last_error.as_deref(), Some("PermissionError: jobs.json"));
    }

    #[test]
    fn the_last_output_is_the_newest_and_stays_in_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("cron/output/j1");
        fs::create_dir_all(&out).unwrap();
        fs::write(out.join("2026-12-01_09-00-00.md"), "old").unwrap();
        fs::write(out.join("2026-12-02_09-00-00.md"), "  new result\n").unwrap();
        fs::write(out.join("zzz.txt"), "not output").unwrap();
        assert_eq!(
            last_output(dir.path(), "j1"),
            Some(("2026-12-02_09-00-00.md".into(), "new result".into()))
        );
        assert_eq!(last_output(dir.path(), ".."), None);
        assert_eq!(last_output(dir.path(), "j1/../j1"), None);
        assert_eq!(last_output(dir.path(), "none"), None);
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret.md"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("cron/output/evil")).unwrap();
        assert_eq!(
            last_output(dir.path(), "evil"),
            None,
            "a planted symlink is not followed"
        );
    }
}
