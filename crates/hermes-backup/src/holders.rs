//! Which processes hold a file open, from `/proc/<pid>/fd` (what `fuser` reads): a database is
//! never replaced under a process that still has it, or its `-wal`/`-shm`, open — that process
//! would go on writing into the replaced file, and its next checkpoint into the new one.
//!
//! Only the processes this one may look at are seen (all of them as root, its own user's
//! otherwise: the gateways run as the volume's owner, as this code does on the volume).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A process holding a file open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its pid.
    pub pid: u32,
    /// Its name (`/proc/<pid>/comm`).
    pub name: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (pid {})", self.name, self.pid)
    }
}

/// The processes other than this one holding `db` or its `-wal`, `-shm` or `-journal` open.
pub fn of_database(db: &Path) -> Vec<Holder> {
    // Files are matched by device and inode: a path seen through another mount or a link
    // names the same file.
    let ids: Vec<(u64, u64)> = ["", "-wal", "-shm", "-journal"]
        .iter()
        .filter_map(|side| {
            let mut path = db.as_os_str().to_owned();
            path.push(side);
            let meta = fs::metadata(Path::new(&path)).ok()?;
            Some((meta.dev(), meta.ino()))
        })
        .collect();
    if ids.is_empty() {
        return Vec::new();
    }
    let me = std::process::id();
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut holders = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds
            .flatten()
            .any(|fd| fs::metadata(fd.path()).is_ok_and(|m| ids.contains(&(m.dev(), m.ino()))));
        if holds {
            let name = fs::read_to_string(entry.path().join("comm"))
                .map(|n| n.trim().to_owned())
                .unwrap_or_else(|_| "?".into());
            holders.push(Holder { pid, name });
        }
    }
    holders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_holding_the_wal_is_found_and_this_process_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("state.db");
        fs::write(&db, "db").unwrap();
        let wal = dir.path().join("state.db-wal");
        fs::write(&wal, "wal").unwrap();
        let _mine = fs::File::open(&db).unwrap();
        assert_eq!(of_database(&db), Vec::new(), "this process is not counted");
        let holder = hermes_test_support::held::HeldOpen::new(&wal);
        let held = of_database(&db);
        let pid = holder.pid();
        drop(holder);
        assert_eq!(held.len(), 1, "{held:?}");
        assert_eq!(held[0].pid, pid);
        assert!(held[0].to_string().contains("(pid "));
    }
}
