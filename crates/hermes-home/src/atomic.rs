//! Atomic file replacement: the only way `hermes-home` writes a file.
//!
//! A write goes to a uniquely named temporary file in the destination's own directory (created
//! with `O_EXCL` and the final mode, so a secret is never briefly world-readable), is flushed
//! with `fsync`, renamed over the destination, and the directory is fsynced so the rename itself
//! survives a power cut. A reader therefore sees either the old file or the new one, never a torn
//! mix, and a crash mid-write leaves at worst a stray `.<name>.tmp.*` file.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Error;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` with `contents` atomically. A new file gets `mode` (e.g. `0o600`); a file
/// that exists keeps the mode it has (an operator's, or the original implementation's, choice
/// — often stricter than ours).
///
/// The mode is applied whatever the process umask is, so `.env` and `auth.json` are `0600`
/// even when written by a process with a permissive umask.
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), Error> {
    write_atomic_io(path, contents, mode).map_err(|source| Error::io("write", path, source))
}

fn write_atomic_io(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let mode = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => {
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777
        }
        _ => mode,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // The umask may have removed bits from `mode`; set it explicitly.
        file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        file.write_all(contents)?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Whether `file_name` is one of [`write_atomic`]'s temporary files (`.<name>.tmp.<pid>.<n>`):
/// never data, gone once its write is renamed into place (a backup leaves them out).
pub fn is_temporary(file_name: &str) -> bool {
    let Some(rest) = file_name.strip_prefix('.') else {
        return false;
    };
    let mut parts = rest.rsplitn(3, '.');
    let numeric =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    numeric(parts.next())
        && numeric(parts.next())
        && parts
            .next()
            .is_some_and(|name| name.ends_with(".tmp") && name.len() > 4)
}

/// Fsyncs a directory so that a rename or a creation inside it is durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    #[test]
    fn its_temporary_files_are_recognised_by_name() {
        assert!(super::is_temporary(".config.yaml.tmp.4242.7"));
        assert!(super::is_temporary(".env.tmp.1.0"));
        for name in [
            "config.yaml",
            ".env",
            ".config.yaml.tmp",
            ".x.tmp.a.1",
            "config.yaml.tmp.1.2",
            ".tmp.1.2",
        ] {
            assert!(!super::is_temporary(name), "{name}");
        }
    }

    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn replaces_contents_and_sets_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        write_atomic(&path, b"new", 0o600).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "a new file gets the mode");
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn an_existing_file_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        for existing in [0o600, 0o640, 0o644] {
            let path = dir.path().join(format!("f{existing:o}"));
            fs::write(&path, "old").unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(existing)).unwrap();
            write_atomic(&path, b"new", 0o644).unwrap();
            let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, existing);
            assert_eq!(fs::read_to_string(&path).unwrap(), "new");
        }
    }

    #[test]
    fn missing_directory_is_an_error_that_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope").join("file");
        let err = write_atomic(&path, b"x", 0o644).unwrap_err();
        assert!(err.to_string().contains("nope/file"), "{err}");
    }
}
