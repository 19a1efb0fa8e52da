//! The reading side of a profile's `gateway.lock`: which process, if any, runs the profile's
//! gateway outside a supervisor. The gateway takes the lock (an exclusive `flock` held for
//! its whole life) and writes its record into it (`{pid, kind, argv, start_time,
//! hermes_home}`, `start_time` being `/proc/<pid>/stat` field 22); `hermes_gateway::lock`
//! is the writing side. This side never creates, locks or changes the file.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

/// The lock file's name in a profile's directory.
pub const LOCK_FILE: &str = "gateway.lock";

/// The lock file of the profile whose directory is `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(LOCK_FILE)
}

/// The process that holds a gateway lock, as its record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// Its pid (positive).
    pub pid: i32,
    /// Its start time (clock ticks since boot), matching the running process.
    pub start_time: u64,
}

/// True when some process holds the lock at `path` (a missing or unopenable file: not held).
pub fn is_held(path: &Path) -> bool {
    match File::open(path) {
        Ok(file) => matches!(file.try_lock(), Err(TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

/// The holder of the lock at `path` when it is held and its record names a process that is
/// still the one that wrote it: a record without a start time, or whose start time differs
/// from the running pid's (a reused pid, a forged record), names no one to signal.
pub fn live_holder(path: &Path) -> Option<Holder> {
    if !is_held(path) {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let record: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    let pid = i32::try_from(record.get("pid")?.as_i64()?).ok()?;
    let recorded = record.get("start_time")?.as_u64()?;
    (pid > 0 && process_start_time(pid) == Some(recorded)).then_some(Holder {
        pid,
        start_time: recorded,
    })
}

/// `/proc/<pid>/stat` field 22: the process's start time in clock ticks since boot (`None`
/// when there is no such process).
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 (comm) may hold spaces and parentheses: count the fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` starts at field 3, so field 22 is its 20th.
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_names_its_live_holder_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let lock = path(dir.path());
        assert_eq!(live_holder(&lock), None, "no file");
        let pid = std::process::id() as i32;
        let start_time = process_start_time(pid).unwrap();
        let record =
            serde_json::json!({"pid": pid, "kind": "hermes-gateway", "start_time": start_time});
        std::fs::write(&lock, record.to_string()).unwrap();
        assert_eq!(live_holder(&lock), None, "not held");
        let held = File::open(&lock).unwrap();
        held.lock().unwrap();
        assert_eq!(live_holder(&lock), Some(Holder { pid, start_time }));
        let stale = serde_json::json!({"pid": pid, "start_time": start_time + 1});
        std::fs::write(&lock, stale.to_string()).unwrap();
        assert_eq!(live_holder(&lock), None, "another process's record");
        std::fs::write(&lock, format!("{pid}\n")).unwrap();
        assert_eq!(live_holder(&lock), None, "no start time");
    }
}
