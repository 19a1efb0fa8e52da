//! The `storage` component's probe of `state.db`, remembered for a moment: `/api/status` is
//! polled by every open Overview and by monitors (32 clients in the bench), and opening the
//! database for each poll is work, and one more handle beside the gateway's writer, that says
//! nothing new a second later. A verdict is reused for [`FRESH_FOR`] while the path still names
//! the same file; a file replaced since (a restore, a repair) is probed again at once. Concurrent
//! polls wait for one probe instead of each opening the database.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a probe's verdict stands for a file that is still the same.
pub const FRESH_FOR: Duration = Duration::from_secs(2);

/// A verdict, when it was reached, and which file (device, inode; none: no file) it was of.
struct Verdict {
    at: Instant,
    file: Option<(u64, u64)>,
    storage: Value,
}

static VERDICTS: Mutex<Option<HashMap<PathBuf, Verdict>>> = Mutex::new(None);

/// The readiness probe's `storage` document for `db` (`hermes_sessions::probe`), remembered.
pub fn storage(db: &Path) -> Value {
    remembered(db, |db| hermes_sessions::probe::probe(db).check(true))
}

fn remembered(db: &Path, probe: impl FnOnce(&Path) -> Value) -> Value {
    let file = std::fs::metadata(db).ok().map(|m| (m.dev(), m.ino()));
    let mut verdicts = VERDICTS.lock().unwrap_or_else(PoisonError::into_inner);
    let verdicts = verdicts.get_or_insert_with(HashMap::new);
    if let Some(last) = verdicts.get(db)
        && last.file == file
        && last.at.elapsed() < FRESH_FOR
    {
        return last.storage.clone();
    }
    let storage = probe(db);
    verdicts.insert(
        db.to_path_buf(),
        Verdict {
            at: Instant::now(),
            file,
            storage: storage.clone(),
        },
    );
    storage
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::Cell;

    #[test]
    fn one_probe_serves_the_polls_of_a_moment_and_a_replaced_file_is_probed_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        std::fs::write(&db, b"first").unwrap();
        let probes = Cell::new(0);
        let probe = |_: &Path| {
            probes.set(probes.get() + 1);
            json!({"status": format!("probe {}", probes.get())})
        };
        assert_eq!(remembered(&db, probe)["status"], "probe 1");
        for _ in 0..10 {
            assert_eq!(remembered(&db, probe)["status"], "probe 1");
        }
        assert_eq!(probes.get(), 1, "ten polls, no new probe");

        // A restore renames another file over it: probed again at once.
        let restored = dir.path().join("restored.db");
        std::fs::write(&restored, b"second").unwrap();
        std::fs::rename(&restored, &db).unwrap();
        assert_eq!(remembered(&db, probe)["status"], "probe 2");

        // Removed: probed again (the probe says it is missing).
        std::fs::remove_file(&db).unwrap();
        assert_eq!(remembered(&db, probe)["status"], "probe 3");
    }

    #[test]
    fn a_verdict_older_than_its_moment_is_probed_again() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        std::fs::write(&db, b"db").unwrap();
        let probes = Cell::new(0);
        let probe = |_: &Path| {
            probes.set(probes.get() + 1);
            json!({"status": "ok"})
        };
        remembered(&db, probe);
        std::thread::sleep(FRESH_FOR + Duration::from_millis(50));
        remembered(&db, probe);
        assert_eq!(probes.get(), 2);
    }
}
