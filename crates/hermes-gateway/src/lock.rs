//! One gateway per profile: the `gateway.lock` file lock and its record.
//!
//! Words:
//! * *lock* — an exclusive `flock` (std `File::try_lock`) on `<home>/gateway.lock`, held for
//!   the gateway's whole life and released by the kernel when the process dies, so a crash
//!   never leaves a stale lock behind.
//! * *record* — the JSON the holder writes into the lock file once it holds the lock:
//!   `{pid, kind: "hermes-gateway", argv, start_time, hermes_home}` (the original's format;
//!   `start_time` is `/proc/<pid>/stat` field 22, in clock ticks).
//! * *PID file* — `gateway.pid` next to the lock, the file the original's tools read first
//!   (`gateway/status.py`: `get_running_pid`, behind `hermes gateway status|stop`). Written
//!   once the lock is held, in the original's exact format ([`pid_file_text`]), replacing a
//!   stale one; removed when the lock is released, if it still names this process (as the
//!   original's `remove_pid_file` does, so a `--replace` successor's file is never removed).
//!   A failure to write it is logged, not fatal: the original's readers fall back to the lock
//!   record.
//! * *takeover* (`--replace`) — SIGTERM the holder named by the record, wait for the lock up to
//!   a timeout, then SIGKILL and wait a little more. The holder's `start_time` must match the
//!   record before any signal is sent, so a recycled pid is never signalled.
//! * *hand-over* (`HERMES_HANDOVER_FROM=<pid>`, set by the supervisor) — the new gateway starts
//!   while its predecessor still serves and holds the lock. When the lock's record names
//!   exactly that live process, the start is not refused: [`GatewayLock::acquire_after`]
//!   returns a [`Successor`], which takes the lock once the predecessor lets go (the
//!   supervisor sends it SIGTERM when the successor is ready) and only then writes its record
//!   and `gateway.pid`. Any other holder is refused (or taken over) as without it.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use crate::error::Error;

// The reading side (is the lock held; a process's start time) is the volume's, shared with
// `hermes_services::stop`, which must not link the gateway.
pub use hermes_home::gateway_lock::{is_held, process_start_time};

/// The `kind` written into every gateway lock record.
pub const LOCK_KIND: &str = "hermes-gateway";

/// The original's PID file, in the lock's directory.
pub const PID_FILE: &str = "gateway.pid";

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

/// A held gateway lock. Dropping it removes `gateway.pid` (when it still names this
/// process), then releases the lock (the lock file stays, as in the original).
#[derive(Debug)]
pub struct GatewayLock {
    /// The open lock file; the flock lives as long as this descriptor.
    _file: File,
    path: PathBuf,
    pid_path: PathBuf,
    pid: i32,
}

impl Drop for GatewayLock {
    fn drop(&mut self) {
        // Runs before the fields drop: the lock is still held while the PID file goes.
        remove_pid_file(&self.pid_path, self.pid);
    }
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
        let mut file = open_lock(path)?;
        if !try_lock(&file).map_err(io_err)? {
            refuse_or_take_over(&mut file, path, profile, replace)?;
        }
        GatewayLock::claim(file, path, record)
    }

    /// As [`GatewayLock::acquire`], for a gateway handed over from `predecessor`: while that
    /// process holds the lock (its record names it, with its start time), the start goes on as
    /// its [`Successor`] instead of being refused.
    ///
    /// # Errors
    ///
    /// Those of [`GatewayLock::acquire`], when another process holds the lock.
    pub fn acquire_after(
        path: &Path,
        profile: &str,
        record: &LockRecord,
        replace: Option<Duration>,
        predecessor: i32,
    ) -> Result<Acquired, Error> {
        let io_err = |source| Error::Lock {
            path: path.to_path_buf(),
            source,
        };
        let mut file = open_lock(path)?;
        if !try_lock(&file).map_err(io_err)? {
            let held_by_predecessor = read_record(&mut file).is_some_and(|holder| {
                holder.pid == predecessor && same_process(holder.pid, holder.start_time)
            });
            if held_by_predecessor {
                return Ok(Acquired::AfterPredecessor(Successor {
                    file,
                    path: path.to_path_buf(),
                    record: record.clone(),
                    predecessor,
                }));
            }
            refuse_or_take_over(&mut file, path, profile, replace)?;
        }
        GatewayLock::claim(file, path, record).map(Acquired::Held)
    }

    /// We hold the lock on `file`: replace whatever a previous holder left with `record`, and
    /// write `gateway.pid`.
    fn claim(mut file: File, path: &Path, record: &LockRecord) -> Result<GatewayLock, Error> {
        let io_err = |source| Error::Lock {
            path: path.to_path_buf(),
            source,
        };
        // `gateway.pid` first: whoever sees our record in the lock file finds the PID file
        // naming us too (a successor's lock record must never point at a missing PID file).
        let pid_path = path.with_file_name(PID_FILE);
        if let Err(e) = write_pid_file(&pid_path, record) {
            tracing::warn!(
                error = %e,
                path = %pid_path.display(),
                "could not write the PID file; the original's tools will read the lock record instead"
            );
        }
        let json = serde_json::to_vec(record).map_err(|e| io_err(std::io::Error::other(e)))?;
        file.set_len(0).map_err(io_err)?;
        file.seek(SeekFrom::Start(0)).map_err(io_err)?;
        file.write_all(&json).map_err(io_err)?;
        file.sync_all().map_err(io_err)?;
        Ok(GatewayLock {
            _file: file,
            path: path.to_path_buf(),
            pid_path,
            pid: record.pid,
        })
    }
}

/// How a start got the profile's lock ([`GatewayLock::acquire_after`]).
#[derive(Debug)]
pub enum Acquired {
    /// Held from now on.
    Held(GatewayLock),
    /// Held by the predecessor this gateway is handed over from: taken when it lets go.
    AfterPredecessor(Successor),
}

/// A gateway serving beside its predecessor, which still holds the lock.
#[derive(Debug)]
pub struct Successor {
    file: File,
    path: PathBuf,
    record: LockRecord,
    predecessor: i32,
}

impl Successor {
    /// The predecessor's pid.
    pub fn predecessor(&self) -> i32 {
        self.predecessor
    }

    /// Waits for the predecessor to let go of the lock, then takes it and writes this
    /// gateway's record and `gateway.pid`; `None` when `cancelled` is set first. Blocking:
    /// call it from `spawn_blocking`.
    ///
    /// # Errors
    ///
    /// [`Error::Lock`] on I/O.
    pub fn wait(self, cancelled: &AtomicBool) -> Result<Option<GatewayLock>, Error> {
        loop {
            if cancelled.load(Ordering::SeqCst) {
                return Ok(None);
            }
            let locked = try_lock(&self.file).map_err(|source| Error::Lock {
                path: self.path.clone(),
                source,
            })?;
            if locked {
                return GatewayLock::claim(self.file, &self.path, &self.record).map(Some);
            }
            std::thread::sleep(POLL);
        }
    }
}

/// Opens (creating) the lock file at `path`, and its directory.
fn open_lock(path: &Path) -> Result<File, Error> {
    let io_err = |source| Error::Lock {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err)?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io_err)
}

/// Another process holds the lock on `file`: refused, or taken over with `replace`.
fn refuse_or_take_over(
    file: &mut File,
    path: &Path,
    profile: &str,
    replace: Option<Duration>,
) -> Result<(), Error> {
    let Some(timeout) = replace else {
        return Err(Error::AlreadyRunning {
            profile: profile.into(),
            pid: read_record(file).map(|r| r.pid),
            path: path.to_path_buf(),
        });
    };
    take_over(file, path, timeout)
}

/// The `gateway.pid` text for `record`, byte for byte what the original writes:
/// `json.dumps({"pid", "kind", "argv", "start_time"})` with Python's default separators
/// (`", "`, `": "`), non-ASCII (and DEL) escaped as `\uXXXX` (UTF-16, lowercase hex), no
/// trailing newline (`gateway/status.py`: `write_pid_file`, `_build_pid_record`).
pub fn pid_file_text(record: &LockRecord) -> String {
    #[derive(Serialize)]
    struct PidRecord<'a> {
        pid: i32,
        kind: &'a str,
        argv: &'a [String],
        start_time: Option<u64>,
    }
    let fields = PidRecord {
        pid: record.pid,
        kind: &record.kind,
        argv: &record.argv,
        start_time: record.start_time,
    };
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonJson);
    // Serializing integers and strings into a Vec cannot fail.
    if fields.serialize(&mut ser).is_err() {
        return String::new();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Python's `json.dumps` defaults (`ensure_ascii=True`, separators `", "` and `": "`).
struct PythonJson;

/// `", "` before every array item and object key but the first.
fn python_separator<W: ?Sized + Write>(writer: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

impl serde_json::ser::Formatter for PythonJson {
    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        python_separator(writer, first)
    }

    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        python_separator(writer, first)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        for c in fragment.chars() {
            if (' '..='~').contains(&c) {
                writer.write_all(&[c as u8])?;
            } else {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// Writes `gateway.pid` for `record` (replacing a stale one: the caller holds the lock).
fn write_pid_file(path: &Path, record: &LockRecord) -> std::io::Result<()> {
    let tmp = path.with_file_name(format!(".{PID_FILE}.{}.tmp", record.pid));
    let written =
        std::fs::write(&tmp, pid_file_text(record)).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Removes `gateway.pid` unless it names another pid (the original's `remove_pid_file`).
fn remove_pid_file(path: &Path, pid: i32) {
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let named = match serde_json::from_str::<serde_json::Value>(text.trim()) {
        Ok(serde_json::Value::Object(record)) => {
            record.get("pid").and_then(serde_json::Value::as_i64)
        }
        Ok(serde_json::Value::Number(n)) => n.as_i64(),
        _ => None,
    };
    if named.is_some_and(|named| named != i64::from(pid)) {
        return;
    }
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(error = %e, path = %path.display(), "could not remove the PID file");
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

    /// The expected text was produced by the original (hermes-agent 0.19.0,
    /// `gateway/status.py` `write_pid_file`) with this argv, pid and start time.
    #[test]
    fn pid_file_text_is_the_originals_json_dumps() {
        let record = LockRecord {
            pid: 14223,
            kind: LOCK_KIND.into(),
            argv: [
                "/opt/hermes/.venv/bin/hermes",
                "-p",
                "caf\u{e9}",
                "gateway",
                "run",
                "\u{7f}\u{1F600}",
            ]
            .map(String::from)
            .to_vec(),
            start_time: Some(737789),
            hermes_home: "/ignored".into(),
        };
        assert_eq!(
            pid_file_text(&record),
            r#"{"pid": 14223, "kind": "hermes-gateway", "argv": ["/opt/hermes/.venv/bin/hermes", "-p", "caf\u00e9", "gateway", "run", "\u007f\ud83d\ude00"], "start_time": 737789}"#
        );
        let unknown = LockRecord {
            start_time: None,
            argv: vec!["a\"b\n".into()],
            ..record
        };
        assert_eq!(
            pid_file_text(&unknown),
            r#"{"pid": 14223, "kind": "hermes-gateway", "argv": ["a\"b\n"], "start_time": null}"#
        );
    }

    #[test]
    fn the_pid_file_lives_while_the_lock_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let (path, pid_path) = (dir.path().join("gateway.lock"), dir.path().join(PID_FILE));
        std::fs::write(&pid_path, "999999").unwrap();
        let rec = LockRecord::for_this_process(vec!["hermes".into()], dir.path());
        let held = GatewayLock::acquire(&path, "p", &rec, None).unwrap();
        assert_eq!(
            std::fs::read_to_string(&pid_path).unwrap(),
            pid_file_text(&rec),
            "a stale PID file is replaced"
        );
        let refused = GatewayLock::acquire(&path, "p", &rec, None);
        assert!(refused.is_err());
        assert!(
            pid_path.exists(),
            "a refused acquire leaves the holder's file"
        );
        drop(held);
        assert!(!pid_path.exists(), "released: removed");

        // A file naming another process (a `--replace` successor's) is left alone.
        let held = GatewayLock::acquire(&path, "p", &rec, None).unwrap();
        std::fs::write(&pid_path, r#"{"pid": 1}"#).unwrap();
        drop(held);
        assert!(pid_path.exists());
    }

    #[test]
    fn a_successor_waits_for_its_predecessor_and_nobody_else() {
        let dir = tempfile::tempdir().unwrap();
        let (path, pid_path) = (dir.path().join("gateway.lock"), dir.path().join(PID_FILE));
        let rec = LockRecord::for_this_process(vec!["old".into()], dir.path());
        let held = GatewayLock::acquire(&path, "p", &rec, None).unwrap();

        // Handed over from another process: the holder is not it, refused as ever.
        let err = GatewayLock::acquire_after(&path, "p", &rec, None, rec.pid + 1).unwrap_err();
        assert!(matches!(err, Error::AlreadyRunning { .. }), "{err:?}");

        let new = LockRecord {
            argv: vec!["new".into()],
            ..rec.clone()
        };
        let Acquired::AfterPredecessor(successor) =
            GatewayLock::acquire_after(&path, "p", &new, None, rec.pid).unwrap()
        else {
            panic!("the predecessor holds the lock");
        };
        assert_eq!(successor.predecessor(), rec.pid);
        let cancelled = std::sync::Arc::new(AtomicBool::new(false));
        let waiting = std::thread::spawn({
            let cancelled = std::sync::Arc::clone(&cancelled);
            move || successor.wait(&cancelled)
        });
        std::thread::sleep(POLL * 4);
        assert!(
            !waiting.is_finished(),
            "took the lock while the predecessor held it"
        );
        assert_eq!(read_holder(&path).unwrap().argv, ["old"]);
        drop(held);
        let lock = waiting.join().unwrap().unwrap().expect("taken");
        assert_eq!(read_holder(&path).unwrap().argv, ["new"]);
        assert_eq!(
            std::fs::read_to_string(&pid_path).unwrap(),
            pid_file_text(&new)
        );
        assert!(is_held(&path));

        // Cancelled before the predecessor lets go: nothing taken.
        let Acquired::AfterPredecessor(successor) =
            GatewayLock::acquire_after(&path, "p", &rec, None, rec.pid).unwrap()
        else {
            panic!("the predecessor holds the lock");
        };
        assert!(successor.wait(&AtomicBool::new(true)).unwrap().is_none());
        drop(lock);
        // A free lock is simply held.
        assert!(matches!(
            GatewayLock::acquire_after(&path, "p", &rec, None, 1).unwrap(),
            Acquired::Held(_)
        ));
    }

    #[test]
    fn legacy_bare_pid_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway.lock");
        std::fs::write(&path, "1234\n").unwrap();
        assert_eq!(read_holder(&path).unwrap().pid, 1234);
    }
}
