//! `gateway_drains.json`: what a profile's gateways did with the requests in flight when they
//! were stopped, for the CLI and `/metrics`, which read it without linking the gateway.
//!
//! ```json
//! {"drained_total": 12, "cut_total": 1,
//!  "last": {"pid": 4242, "drained": 3, "cut": 1, "seconds": 30.002, "finished_at": 1767225600}}
//! ```
//!
//! `drained_total` and `cut_total` count every request (an SSE stream is one) that a stopping
//! gateway of this profile let finish, or cut at its drain timeout; `last` is the most recent
//! drain (`finished_at` in Unix seconds). Two drains can overlap (a restart handed over while
//! the previous one is still draining): each [`record`] is a read-modify-write under
//! `gateway_drains.json.lock` ([`crate::lock`]), so neither count is lost. A file that is not
//! a drain record is copied aside (`gateway_drains.json.corrupt.<timestamp>`) before it is
//! replaced.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::atomic::write_atomic;
use crate::{Error, damage, lock};

/// The file's name in a profile's directory.
pub const FILE_NAME: &str = "gateway_drains.json";

/// Readable by the operator's tools as `gateway_state.json` is.
const MODE: u32 = 0o644;

/// `gateway_drains.json` of the profile in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE_NAME)
}

/// The profile's drains so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Drains {
    /// Requests let finish by every drain.
    #[serde(default)]
    pub drained_total: u64,
    /// Requests cut at the drain timeout by every drain.
    #[serde(default)]
    pub cut_total: u64,
    /// The most recent drain.
    #[serde(default)]
    pub last: Option<Drain>,
}

/// One gateway's drain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drain {
    /// The gateway process.
    pub pid: u32,
    /// Requests it let finish.
    pub drained: u64,
    /// Requests it cut.
    pub cut: u64,
    /// How long the drain took, in seconds (millisecond precision).
    pub seconds: f64,
    /// When it ended, in Unix seconds.
    pub finished_at: u64,
}

impl Drain {
    /// The drain of gateway `pid` ending now.
    pub fn now(pid: u32, drained: u64, cut: u64, took: Duration) -> Drain {
        Drain {
            pid,
            drained,
            cut,
            seconds: (took.as_secs_f64() * 1000.0).round() / 1000.0,
            finished_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }
}

/// The drains of the profile in `dir`: none yet when there is no file.
///
/// # Errors
///
/// [`Error::Io`] when the file cannot be read or is not a drain record.
pub fn read(dir: &Path) -> Result<Drains, Error> {
    let path = path(dir);
    match parse(&path)? {
        Parsed::Missing => Ok(Drains::default()),
        Parsed::Valid(drains) => Ok(drains),
        Parsed::Invalid(reason) => Err(Error::io(
            "read",
            &path,
            io::Error::new(io::ErrorKind::InvalidData, reason),
        )),
    }
}

/// Adds `drain` to the totals of the profile in `dir` and makes it the last one; returns the
/// new record.
///
/// # Errors
///
/// [`Error::Io`] or [`Error::LockTimeout`] when the file cannot be locked, read or written.
pub fn record(dir: &Path, drain: Drain) -> Result<Drains, Error> {
    let path = path(dir);
    lock::with_locked(&lock::sidecar(&path), MODE, || {
        let mut drains = match parse(&path)? {
            Parsed::Missing => Drains::default(),
            Parsed::Valid(drains) => drains,
            Parsed::Invalid(_) => {
                damage::preserve(&path)?;
                Drains::default()
            }
        };
        drains.drained_total = drains.drained_total.saturating_add(drain.drained);
        drains.cut_total = drains.cut_total.saturating_add(drain.cut);
        drains.last = Some(drain);
        let mut text = serde_json::to_string(&drains).unwrap_or_default();
        text.push('\n');
        write_atomic(&path, text.as_bytes(), MODE)?;
        Ok(drains)
    })
}

enum Parsed {
    Missing,
    Valid(Drains),
    Invalid(String),
}

fn parse(path: &Path) -> Result<Parsed, Error> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Parsed::Missing),
        Err(e) => return Err(Error::io("read", path, e)),
    };
    let text = match damage::decode(&bytes) {
        Ok(text) => text,
        Err(bad) => return Ok(Parsed::Invalid(bad.to_string())),
    };
    // An object first: serde would also read a struct from an array.
    let fields = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(fields @ serde_json::Value::Object(_)) => fields,
        Ok(_) => {
            return Ok(Parsed::Invalid(
                "not a drain record: not a JSON object".into(),
            ));
        }
        Err(e) => return Ok(Parsed::Invalid(format!("not a drain record: {e}"))),
    };
    Ok(match serde_json::from_value::<Drains>(fields) {
        Ok(drains) => Parsed::Valid(drains),
        Err(e) => Parsed::Invalid(format!("not a drain record: {e}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_add_up_and_the_last_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), Drains::default());
        record(dir.path(), Drain::now(7, 3, 0, Duration::from_millis(1500))).unwrap();
        let after = record(dir.path(), Drain::now(8, 2, 1, Duration::from_secs(30))).unwrap();
        assert_eq!(read(dir.path()).unwrap(), after);
        assert_eq!((after.drained_total, after.cut_total), (5, 1));
        let last = after.last.unwrap();
        assert_eq!((last.pid, last.drained, last.cut), (8, 2, 1));
        assert!((last.seconds - 30.0).abs() < 1e-9);
        assert!(last.finished_at > 1_700_000_000);

        let text = std::fs::read_to_string(path(dir.path())).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in ["drained_total", "cut_total", "last"] {
            assert!(json.get(key).is_some(), "{key} in {text}");
        }
    }

    #[test]
    fn overlapping_drains_lose_no_count() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let results = crate::test_support::race(8, move |i| {
            record(&root, Drain::now(100 + i as u32, 1, 1, Duration::ZERO))
        });
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let drains = read(dir.path()).unwrap();
        assert_eq!((drains.drained_total, drains.cut_total), (8, 8));
    }

    #[test]
    fn a_damaged_file_is_an_error_to_read_and_kept_aside_when_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(path(dir.path()), "[1, 2]").unwrap();
        let err = read(dir.path()).unwrap_err();
        assert!(
            hermes_errors::one_line(&err).contains("not a drain record"),
            "{err}"
        );
        let drains = record(dir.path(), Drain::now(1, 4, 0, Duration::ZERO)).unwrap();
        assert_eq!(drains.drained_total, 4);
        let kept = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().contains(".corrupt."));
        assert!(kept, "the damaged file was kept aside");
    }
}
