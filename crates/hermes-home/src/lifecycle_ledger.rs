//! `state/gateway.lifecycle.json`: how a profile's last gateway life ended.
//!
//! Shared with the original (`gateway/lifecycle_ledger.py`, 0.20): a gateway claims the file
//! when it starts serving (`{"phase": "running", "pid", "start_time", "started_at"}`) and
//! rewrites it on every clean exit path (`{"phase": "exited", "pid", "exit_code",
//! "exit_reason", "exited_at"}`). A life that no exit path ended — SIGKILL, the OOM killer, a
//! host that died — leaves `running` behind, which the next container boot reads as
//! `unclean` ([`prior_exit`]). The field names, the meaning of each phase and the rule that a
//! life only marks *its own* claim exited (a `--replace` successor's claim is not erased by
//! the predecessor's exit) are the original's, so a volume either wrote reads the same.
//!
//! `start_time` here is the original's: epoch seconds as a float (`time.time()`), unlike
//! `gateway_state.json`'s clock ticks. Times are Python's `isoformat()` of an aware UTC time.
//!
//! The reader runs in PID 1's boot: it never follows a symlink (neither `state/` nor the
//! file), never blocks on a FIFO, and reads at most [`MAX_BYTES`]. Writing is best effort for
//! the caller — a ledger failure must never change a gateway's life — but is reported.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::Error;
use crate::atomic::write_atomic;

/// The ledger's directory in a profile's directory.
pub const DIR_NAME: &str = "state";

/// The ledger's file name in [`DIR_NAME`].
pub const FILE_NAME: &str = "gateway.lifecycle.json";

/// A ledger larger than this is not a ledger (the original's is well under 1 KiB).
pub const MAX_BYTES: u64 = 64 * 1024;

/// The mode of a new ledger (the original's `atomic_json_write` creates it with `mkstemp`).
const MODE: u32 = 0o600;

/// The ledger of the profile whose directory is `profile_dir`.
pub fn path(profile_dir: &Path) -> PathBuf {
    profile_dir.join(DIR_NAME).join(FILE_NAME)
}

/// How the profile's last gateway life ended, in the words of the original's boot log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PriorExit {
    /// The last life ran an exit path (`phase: exited`).
    Clean,
    /// The last life claimed the ledger and never exited (`phase: running`): at a boot its
    /// process is gone, so it died without running any exit path.
    Unclean,
    /// No ledger, an unreadable one, or another phase: nothing is known.
    Unknown,
}

impl PriorExit {
    /// `clean`, `unclean` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            PriorExit::Clean => "clean",
            PriorExit::Unclean => "unclean",
            PriorExit::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for PriorExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Reads how the last gateway life of the profile in `profile_dir` ended (the original's
/// `read_prior_exit_label`): `phase` `exited` → clean, `running` → unclean, anything else —
/// missing, a symlink, not a regular file, too large, not a JSON object — unknown.
pub fn prior_exit(profile_dir: &Path) -> PriorExit {
    match read_record(profile_dir) {
        Some(record) => match record.get("phase").and_then(Value::as_str) {
            Some("exited") => PriorExit::Clean,
            Some("running") => PriorExit::Unclean,
            _ => PriorExit::Unknown,
        },
        None => PriorExit::Unknown,
    }
}

/// The ledger as a JSON object, or `None` when it cannot be read safely (see [`prior_exit`]).
fn read_record(profile_dir: &Path) -> Option<Map<String, Value>> {
    // Component by component, no link followed, a FIFO never waited on, at most MAX_BYTES.
    let bytes = crate::no_follow::read(profile_dir, &[DIR_NAME, FILE_NAME], MAX_BYTES).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?;
    match serde_json::from_str(text.trim_start_matches('\u{feff}')) {
        Ok(Value::Object(record)) => Some(record),
        _ => None,
    }
}

/// Claims the ledger for the gateway process `pid` that starts serving now (the original's
/// `record_startup`): `phase: running`, so a death without an exit path reads `unclean`.
pub fn record_running(profile_dir: &Path, pid: u32) -> Result<(), Error> {
    let now = time::OffsetDateTime::now_utc();
    let mut claim = Map::new();
    claim.insert("phase".into(), Value::from("running"));
    claim.insert("pid".into(), Value::from(pid));
    claim.insert(
        "start_time".into(),
        Value::from(now.unix_timestamp_nanos() as f64 / 1e9),
    );
    claim.insert(
        "started_at".into(),
        Value::from(crate::time::python_iso(now)),
    );
    write(profile_dir, &claim)
}

/// Marks the life of gateway process `pid` exited with `exit_code` for `reason` (the
/// original's `mark_exited`). A ledger that names another process, or no process, is left as
/// it is — a `--replace` successor's claim survives its predecessor's exit — and `Ok(false)`
/// says so; a missing or unreadable one is rewritten.
pub fn mark_exited(
    profile_dir: &Path,
    pid: u32,
    exit_code: i32,
    reason: &str,
) -> Result<bool, Error> {
    // As the original: a record that cannot be read has no owner to protect; a readable
    // one that names another process (or none) is not ours.
    if let Some(record) = read_record(profile_dir)
        && record.get("pid").and_then(Value::as_u64) != Some(u64::from(pid))
    {
        return Ok(false);
    }
    let mut record = Map::new();
    record.insert("phase".into(), Value::from("exited"));
    record.insert("pid".into(), Value::from(pid));
    record.insert("exit_code".into(), Value::from(exit_code));
    record.insert("exit_reason".into(), Value::from(reason));
    record.insert(
        "exited_at".into(),
        Value::from(crate::time::python_iso_utc_now()),
    );
    write(profile_dir, &record).map(|()| true)
}

/// Writes `record` as the ledger, creating `state/` (never through a symlink: `write_atomic`
/// renames over the final name, and a symlinked `state/` is refused).
fn write(profile_dir: &Path, record: &Map<String, Value>) -> Result<(), Error> {
    let dir = profile_dir.join(DIR_NAME);
    match fs::symlink_metadata(&dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(Error::io(
                "write into",
                &dir,
                io::Error::other("not a directory (a symlink is not followed)"),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::create_dir(&dir).map_err(|e| Error::io("create", &dir, e))?;
        }
        Err(e) => return Err(Error::io("inspect", &dir, e)),
    }
    let text = serde_json::to_string(record).unwrap_or_default();
    write_atomic(&dir.join(FILE_NAME), text.as_bytes(), MODE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(dir: &Path, text: &str) {
        fs::create_dir_all(dir.join(DIR_NAME)).unwrap();
        fs::write(path(dir), text).unwrap();
    }

    #[test]
    fn phases_read_as_the_original_reads_them() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        assert_eq!(prior_exit(dir), PriorExit::Unknown, "no ledger");
        // What the original's gateway writes (json.dumps, indent=None).
        ledger(
            dir,
            r#"{"phase": "exited", "pid": 7, "exit_code": 0, "exit_reason": "graceful_shutdown", "exited_at": "2026-05-20T10:11:12.123456+00:00"}"#,
        );
        assert_eq!(prior_exit(dir), PriorExit::Clean);
        ledger(
            dir,
            r#"{"phase": "running", "pid": 7, "start_time": 1.5, "started_at": "x"}"#,
        );
        assert_eq!(prior_exit(dir), PriorExit::Unclean);
        for other in [
            r#"{"phase": "starting"}"#,
            r#"{"pid": 7}"#,
            "[1]",
            "{not json",
            "",
        ] {
            ledger(dir, other);
            assert_eq!(prior_exit(dir), PriorExit::Unknown, "{other:?}");
        }
        assert_eq!(PriorExit::Unclean.to_string(), "unclean");
    }

    #[test]
    fn symlinks_fifos_and_huge_files_read_unknown() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        ledger(&elsewhere, r#"{"phase": "exited"}"#);
        assert_eq!(prior_exit(&elsewhere), PriorExit::Clean);

        let linked_file = tmp.path().join("a");
        fs::create_dir_all(linked_file.join(DIR_NAME)).unwrap();
        std::os::unix::fs::symlink(path(&elsewhere), path(&linked_file)).unwrap();
        assert_eq!(prior_exit(&linked_file), PriorExit::Unknown, "file symlink");

        let linked_dir = tmp.path().join("b");
        fs::create_dir_all(&linked_dir).unwrap();
        std::os::unix::fs::symlink(elsewhere.join(DIR_NAME), linked_dir.join(DIR_NAME)).unwrap();
        assert_eq!(prior_exit(&linked_dir), PriorExit::Unknown, "dir symlink");

        let fifo = tmp.path().join("c");
        fs::create_dir_all(fifo.join(DIR_NAME)).unwrap();
        nix::unistd::mkfifo(
            &path(&fifo),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        assert_eq!(prior_exit(&fifo), PriorExit::Unknown, "fifo");

        let huge = tmp.path().join("d");
        let padding = " ".repeat(MAX_BYTES as usize);
        ledger(&huge, &format!(r#"{{"phase": "exited"}}{padding}"#));
        assert_eq!(prior_exit(&huge), PriorExit::Unknown, "over the bound");
    }

    #[test]
    fn a_life_claims_then_exits_and_never_erases_a_successor() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        record_running(dir, 41).unwrap();
        let claim: Value = serde_json::from_slice(&fs::read(path(dir)).unwrap()).unwrap();
        assert_eq!(claim["phase"], "running");
        assert_eq!(claim["pid"], 41);
        assert!(claim["start_time"].as_f64().unwrap() > 1.6e9, "{claim}");
        assert!(claim["started_at"].as_str().unwrap().ends_with("+00:00"));
        assert_eq!(prior_exit(dir), PriorExit::Unclean, "killed now: unclean");

        assert!(
            !mark_exited(dir, 40, 0, "stopped").unwrap(),
            "not 40's claim"
        );
        assert_eq!(prior_exit(dir), PriorExit::Unclean);

        assert!(mark_exited(dir, 41, 75, "restart requested").unwrap());
        let exited: Value = serde_json::from_slice(&fs::read(path(dir)).unwrap()).unwrap();
        assert_eq!(exited["phase"], "exited");
        assert_eq!(exited["exit_code"], 75);
        assert_eq!(exited["exit_reason"], "restart requested");
        assert!(exited["exited_at"].as_str().is_some());
        assert_eq!(prior_exit(dir), PriorExit::Clean);
    }

    #[test]
    fn exiting_without_a_ledger_writes_one_and_a_symlinked_state_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(mark_exited(tmp.path(), 9, 0, "stopped").unwrap());
        assert_eq!(prior_exit(tmp.path()), PriorExit::Clean);

        let target = tmp.path().join("target");
        fs::create_dir_all(&target).unwrap();
        let profile = tmp.path().join("p");
        fs::create_dir_all(&profile).unwrap();
        std::os::unix::fs::symlink(&target, profile.join(DIR_NAME)).unwrap();
        assert!(record_running(&profile, 9).is_err());
        assert!(
            fs::read_dir(&target).unwrap().next().is_none(),
            "nothing written through the link"
        );
    }
}
