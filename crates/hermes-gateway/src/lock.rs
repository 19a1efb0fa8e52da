//! One gateway per profile: the `gateway.lock` file lock and its record.
//!
//! Words:
//! * *lock* — an exclusive `flock` (std `File::try_lock`) on `<home>/gateway.lock`, held for
//!   the gateway's whole life and released by the kernel when the process dies, so a crash
//!   never leaves a stale lock behind.
//! * *record* — the JSON the holder writes into the lock file once it holds the lock:
//!   `{pid, kind: "hermes-gateway", argv, start_time, hermes_home}` (the original's format;
//!   `start_time` is `/proc/<pid>/stat` field 22, in clock ticks).
//! * *takeover* (`--replace`) — SIGTERM the holder named by the record, wait for the lock up to
//!   a timeout, then SIGKILL and wait a little more. The holder's `start_time` must match the
//!   record before any signal is sent, so a recycled pid is never signalled.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The `kind` written into every gateway lock record.
pub const LOCK_KIND: &str = "hermes-gateway";

/// How long to wait for the lock after SIGKILL before giving up.
const AFTER_KILL: Duration = Duration::from_secs(5);
/// Poll interval while waiting for a holder to exit (flock has no blocking-with-timeout).
const POLL: Duration = Duration::from_millis(50);

/// The JSON record a lock holder writes into the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    /// Holder pid.
    pub pid: i32,
    /// Always [`LOCK_KIND`].
    pub kind: String,
    /// Holder command line.
    #[serde(default)]
    pub argv: Vec<String>,
    /// Holder start time (clock ticks since boot), to detect pid reuse.
    #[serde(default)]
    pub start_time: Option<u64>,
    /// The holder's `HERMES_HOME` (profile home), canonical when possible.
    #[serde(default)]
    pub hermes_home: String,
}

impl LockRecord {
    /// The record for this process.
    pub fn for_this_process(argv: Vec<String>, home: &Path) -> Self {
        let pid = std::process::id() as i32;
        LockRecord {
            pid,
            kind: LOCK_KIND.into(),
            argv,
            start_time: process_start_time(pid),
            hermes_home: std::fs::canonicalize(home)
                .unwrap_or_else(|_| home.to_path_buf())
                .display()
                .to_string(),
        }
    }
}

/// A held gateway lock. Dropping it releases the lock (the file stays, as in the original).
#[derive(Debug)]
pub struct GatewayLock {
    /// The open lock file; the flock lives as long as this descriptor.
    _file: File,
    path: PathBuf,
}

impl GatewayLock {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the lock at `path` and writes `record` into it. With `replace`, a running holder
    /// is asked to exit (SIGTERM, then SIGKILL after `replace_timeout`). Blocking: call it from
    /// `spawn_blocking` in async code.
    ///
    /// # Errors
    ///
    /// [`Error::AlreadyRunning`] when held and `replace` is `None`,
    /// [`Error::TakeoverTimedOut`] when the holder would not let go, [`Error::Lock`] on I/O.
    pub fn acquire(
        path: &Path,
        profile: &str,
        record: &LockRecord,
        replace: Option<Duration>,
    ) -> Result<GatewayLock, Error> {
        let io_err = |source| Error::Lock {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io_err)?;

        if !try_lock(&file).map_err(io_err)? {
            let holder = read_record(&mut file);
            let Some(timeout) = replace else {
                return Err(Error::AlreadyRunning {
                    profile: profile.into(),
                    pid: holder.map(|r| r.pid),
                    path: path.to_path_buf(),
                });
            };
            take_over(&mut file, path, timeout)?;
        }

        // We hold the lock: replace whatever a previous holder left with our record.
        let json = serde_json::to_vec(record).map_err(|e| io_err(std::io::Error::other(e)))?;
        file.set_len(0).map_err(io_err)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        file.write_all(&json).map_err(io_err)?;
        file.sync_all().map_err(io_err)?;
        Ok(GatewayLock {
            _file: file,
            path: path.to_path_buf(),
        })
    }
}

/// Reads the current holder's record from the lock file, if it parses. Also accepts the
/// legacy bare-integer pid format.
pub fn read_holder(path: &Path) -> Option<LockRecord> {
    let mut file = File::open(path).ok()?;
    read_record(&mut file)
}

fn read_record(file: &mut File) -> Option<LockRecord> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    if let Ok(r) = serde_json::from_str::<LockRecord>(&text) {
        return Some(r);
    }
    let pid = text.trim().parse().ok()?;
    Some(LockRecord {
        pid,
        kind: LOCK_KIND.into(),
        argv: vec![],
        start_time: None,
        hermes_home: String::new(),
    })
}

/// True when some process (this one included, through another descriptor) holds the lock at
/// `path`. A missing or unopenable file counts as not held; the file is never created.
pub fn is_held(path: &Path) -> bool {
    match File::open(path) {
        Ok(file) => matches!(file.try_lock(), Err(TryLockError::WouldBlock)),
        Err(_) => false,
    }
}

/// `Ok(true)` when we now hold the lock, `Ok(false)` when someone else does.
fn try_lock(file: &File) -> std::io::Result<bool> {
    match file.try_lock() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// The `--replace` protocol. Invariant: a signal is only sent to a pid whose current start
/// time matches the record (or whose record has none, the legacy format).
fn take_over(file: &mut File, path: &Path, timeout: Duration) -> Result<(), Error> {
    let io_err = |source| Error::Lock {
        path: path.to_path_buf(),
        source,
    };
    let started = Instant::now();
    let mut signalled: Option<i32> = None;
    let mut killed_at: Option<Instant> = None;
    loop {
        if try_lock(file).map_err(io_err)? {
            return Ok(());
        }
        // The holder may not have written its record yet: keep re-reading until it has.
        if signalled.is_none()
            && let Some(rec) = read_record(file)
            && rec.pid > 0
            && rec.pid != std::process::id() as i32
            && same_process(rec.pid, rec.start_time)
        {
            tracing::info!(
                pid = rec.pid,
                "asking the running gateway to exit (SIGTERM)"
            );
            let _ = kill(Pid::from_raw(rec.pid), Signal::SIGTERM);
            signalled = Some(rec.pid);
        }
        let now = Instant::now();
        match (signalled, killed_at) {
            (Some(pid), None) if now.duration_since(started) >= timeout => {
                tracing::warn!(pid, "running gateway ignored SIGTERM; sending SIGKILL");
                if same_process(pid, process_start_time(pid)) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
                killed_at = Some(now);
            }
            (Some(pid), Some(at)) if now.duration_since(at) >= AFTER_KILL => {
                return Err(Error::TakeoverTimedOut {
                    path: path.to_path_buf(),
                    pid,
                    waited: now.duration_since(started),
                });
            }
            (None, _) if now.duration_since(started) >= timeout + AFTER_KILL => {
                return Err(Error::TakeoverTimedOut {
                    path: path.to_path_buf(),
                    pid: read_record(file).map(|r| r.pid).unwrap_or(0),
                    waited: now.duration_since(started),
                });
            }
            _ => {}
        }
        std::thread::sleep(POLL);
    }
}

/// True when `pid` exists and, if `start_time` is known, started at that time.
fn same_process(pid: i32, start_time: Option<u64>) -> bool {
    match (process_start_time(pid), start_time) {
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// `/proc/<pid>/stat` field 22 (start time in clock ticks since boot).
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2 (comm) may contain spaces and parentheses: count fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3; field 22 is the 20th field of rest (index 19).
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_of_self_is_readable_and_stable() {
        let pid = std::process::id() as i32;
        let a = process_start_time(pid);
        assert!(a.is_some());
        assert_eq!(a, process_start_time(pid));
        assert!(same_process(pid, a));
        assert!(!same_process(pid, a.map(|t| t + 1)));
    }

    #[test]
    fn second_acquire_is_refused_and_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.lock");
        let rec = LockRecord::for_this_process(vec!["hermes".into()], dir.path());
        let held = GatewayLock::acquire(&path, "p", &rec, None).unwrap();
        let err = GatewayLock::acquire(&path, "p", &rec, None).unwrap_err();
        match err {
            Error::AlreadyRunning { pid, .. } => assert_eq!(pid, Some(rec.pid)),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(read_holder(&path).unwrap(), rec);
        drop(held);
        assert!(GatewayLock::acquire(&path, "p", &rec, None).is_ok());
    }

    #[test]
    fn legacy_bare_pid_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.lock");
        std::fs::write(&path, "1234\n").unwrap();
        assert_eq!(read_holder(&path).unwrap().pid, 1234);
    }
}
