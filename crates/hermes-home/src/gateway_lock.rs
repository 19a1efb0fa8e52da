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
///
/// The record is the volume's, which the service user can write: root stopping a gateway
/// (`docker exec … hermes gateway stop`) must not signal whatever pid a forged record names.
/// So the file is read without following a link, and its pid counts only when that process
/// belongs to the file's owner, as a gateway's own lock does (it creates the file as itself).
pub fn live_holder(path: &Path) -> Option<Holder> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    if !is_held(path) {
        return None;
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let owner = file.metadata().ok().filter(|m| m.is_file())?.uid();
    // A lock record is one short JSON line; more is not a record.
    let mut text = String::new();
    (&mut file).take(64 * 1024).read_to_string(&mut text).ok()?;
    let record: serde_json::Value = serde_json::from_str(text.trim()).ok()?;
    let pid = i32::try_from(record.get("pid")?.as_i64()?).ok()?;
    let recorded = record.get("start_time")?.as_u64()?;
    let process_owner = std::fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    (pid > 0 && process_owner == owner && process_start_time(pid) == Some(recorded)).then_some(
        Holder {
            pid,
            start_time: recorded,
        },
    )
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

    #[test]
    fn a_record_naming_another_users_process_names_no_one() {
        use std::os::unix::fs::{chown, symlink};
        if hermes_test_support::skip_unless_root("the forged record must belong to another user") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let lock = path(dir.path());
        let pid = std::process::id() as i32;
        let start_time = process_start_time(pid).unwrap();
        let record = serde_json::json!({"pid": pid, "start_time": start_time});
        std::fs::write(&lock, record.to_string()).unwrap();
        let held = File::open(&lock).unwrap();
        held.lock().unwrap();
        assert_eq!(
            live_holder(&lock),
            Some(Holder { pid, start_time }),
            "root's own record names root's process"
        );
        // The service user (uid 12345) writes a record naming a process of root's.
        chown(&lock, Some(12345), Some(12345)).unwrap();
        assert_eq!(live_holder(&lock), None, "another user's process");
        // Nor through a link to a file of root's.
        let elsewhere = dir.path().join("root-record");
        std::fs::write(&elsewhere, record.to_string()).unwrap();
        let linked = dir.path().join("linked.lock");
        symlink(&elsewhere, &linked).unwrap();
        let _also = File::open(&elsewhere).unwrap();
        _also.lock().unwrap();
        assert_eq!(live_holder(&linked), None, "a planted link");
    }
}
