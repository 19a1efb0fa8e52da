//! How long PID 1's boot took: `boot.json` in the runtime directory, written once the boot
//! stages are done and the supervisor is about to start the services, read by the dashboard's
//! `/metrics` (`hermes_boot_duration_seconds`). Only PID 1 writes it (`hermes up` has no boot
//! stages); it lives beside the control socket, so it goes with the container.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The record's file name in the runtime directory.
pub const FILE_NAME: &str = "boot.json";

/// One boot.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootRecord {
    /// When PID 1 started, seconds since the Unix epoch.
    pub started_at: f64,
    /// From PID 1's start to its services being started: the boot stages, seconds.
    pub boot_seconds: f64,
}

impl BootRecord {
    /// A boot that started at `started` and took `took`.
    pub fn new(started: SystemTime, took: Duration) -> Self {
        Self {
            started_at: started
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
            boot_seconds: took.as_secs_f64(),
        }
    }
}

/// Writes `record` into `runtime_dir` (private to the supervisor's user): a temporary file
/// renamed over the last one, so a reader never sees half of it. The temporary is created
/// new (`O_EXCL`), so PID 1 never writes through a link someone left under its name.
///
/// # Errors
/// The write or the rename failing.
pub fn write(runtime_dir: &Path, record: &BootRecord) -> std::io::Result<()> {
    use std::io::Write;
    let path = runtime_dir.join(FILE_NAME);
    let tmp = runtime_dir.join(format!(".{FILE_NAME}.{}", std::process::id()));
    let text = serde_json::to_string(record).map_err(std::io::Error::other)?;
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    match written {
        Ok(()) => std::fs::rename(&tmp, &path),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// The boot of the supervisor serving `root` (found as clients find it), if PID 1 recorded one.
pub fn read(root: &Path, var: impl Fn(&str) -> Option<String>) -> Option<BootRecord> {
    let dir = crate::runtime::find_runtime_dir(root, var);
    let text = std::fs::read_to_string(dir.join(FILE_NAME)).ok()?;
    serde_json::from_str(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boot_is_read_back_as_it_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("home");
        let var = |k: &str| (k == "HERMES_RUNTIME_DIR").then(|| dir.path().display().to_string());
        assert_eq!(read(&root, var), None, "no boot recorded");
        let record = BootRecord::new(
            UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            Duration::from_millis(42),
        );
        write(dir.path(), &record).unwrap();
        assert_eq!(read(&root, var), Some(record));
        assert!((record.boot_seconds - 0.042).abs() < 1e-9);
        std::fs::write(dir.path().join(FILE_NAME), "{half").unwrap();
        assert_eq!(read(&root, var), None, "a damaged record is none");
    }
}
