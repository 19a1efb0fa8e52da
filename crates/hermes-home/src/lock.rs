//! Exclusive locks for read-modify-write cycles: the one way `hermes-home` changes a file that
//! another process may be changing at the same time.
//!
//! An atomic write ([`crate::atomic`]) makes each write whole, but two processes that both read
//! a file, change it and write it back still lose a change: the second rename replaces the
//! first. So every read-modify-write holds an exclusive `flock` on a sidecar lock file from the
//! read to the rename ([`with_locked`]), and N concurrent writers keep N changes.
//!
//! | data file            | lock file                 |
//! |----------------------|---------------------------|
//! | `.env`               | `.env.lock`               |
//! | `config.yaml`        | `config.yaml.lock`        |
//! | `gateway_state.json` | `gateway_state.json.lock` |
//! | `active_profile`     | `active_profile.lock`     |
//! | `auth.json`          | `auth.lock` (the original's name, so both implementations exclude each other) |
//!
//! Rules, and why:
//! * the lock is on a sidecar, not on the data file: the data file is replaced by a rename on
//!   every write, so a lock on it would guard an inode that is no longer the file;
//! * lock files are empty and never deleted: deleting one while another process waits on it
//!   would let two writers in at once;
//! * a lock file is opened with `O_NOFOLLOW` and must be a regular file, so a planted symlink
//!   cannot make a writer create or lock a file elsewhere (`O_NONBLOCK` keeps a planted FIFO
//!   from hanging the open); it is created with the data file's mode and, when root creates
//!   it, the directory's owner (as the data file keeps its owner), and a lock file this user
//!   may not write (left by root) is locked through a read-only descriptor, which `flock`
//!   allows;
//! * waiting is bounded: after [`LOCK_TIMEOUT`] the writer gives up with
//!   [`Error::LockTimeout`] instead of hanging behind a stuck process;
//! * readers take no lock: thanks to the atomic rename they see the old file or the new one;
//! * the lock is not reentrant (an `flock` belongs to one open file description, so a second
//!   acquisition in the same process waits for the first): code that holds a lock calls
//!   unlocked internals, never another locking function for the same file.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Error;

/// How long a writer waits for another writer's lock (the original's auth store waits 15 s).
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(15);

/// The sidecar lock file of `data`: `<name>.lock` in the same directory.
pub fn sidecar(data: &Path) -> PathBuf {
    let mut name = data.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    data.with_file_name(name)
}

/// The lock file the writers of `data` hold: `auth.lock` for `auth.json` (the original's name),
/// the [`sidecar`] for every other file. A reader that must see a file between two writers'
/// cycles (a backup) holds the same one.
pub fn writers_lock(data: &Path) -> PathBuf {
    if data
        .file_name()
        .is_some_and(|n| n == crate::layout::AUTH_FILE)
    {
        return data.with_file_name("auth.lock");
    }
    sidecar(data)
}

/// Runs `cycle` while holding the exclusive lock `lock_path` (created with `mode` if absent).
///
/// `cycle` is the whole read-modify-write: the read must happen inside it, or a change made
/// by another writer between the read and the lock is lost.
pub fn with_locked<T>(
    lock_path: &Path,
    mode: u32,
    cycle: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    let _held = acquire(lock_path, mode, timeout())?;
    cycle()
    // `_held` is dropped here: closing the descriptor releases the lock.
}

/// How long to wait: [`LOCK_TIMEOUT`], or a shorter time set by a test on its own thread so
/// that "a writer waits for the lock" is checked without waiting 15 s or guessing at sleeps.
fn timeout() -> Duration {
    #[cfg(test)]
    if let Some(short) = test_timeout::get() {
        return short;
    }
    LOCK_TIMEOUT
}

fn acquire(lock_path: &Path, mode: u32, timeout: Duration) -> Result<File, Error> {
    let file = open(lock_path, mode)?;
    let deadline = Instant::now() + timeout;
    // `flock` has no timed wait; poll instead of blocking so the wait is bounded. Writers hold
    // a lock for one small read and write, so a short sleep keeps the added latency low.
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(TryLockError::WouldBlock) => {
                return Err(Error::LockTimeout {
                    path: lock_path.to_path_buf(),
                    waited: timeout,
                });
            }
            Err(TryLockError::Error(e)) => return Err(Error::io("lock", lock_path, e)),
        }
    }
}

fn open(lock_path: &Path, mode: u32) -> Result<File, Error> {
    let flags = nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK;
    let options = |write: bool, create: bool| {
        let mut o = OpenOptions::new();
        o.read(true).write(write).custom_flags(flags);
        if create {
            o.create_new(true).mode(mode);
        }
        o
    };
    let file = match options(true, true).open(lock_path) {
        Ok(file) => {
            // The umask may have removed bits from `mode`; the lock follows the data file.
            file.set_permissions(fs::Permissions::from_mode(mode))
                .map_err(|e| Error::io("set the mode of", lock_path, e))?;
            give_to_directory_owner(&file, lock_path)?;
            file
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            match options(true, false).open(lock_path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::PermissionDenied => options(false, false)
                    .open(lock_path)
                    .map_err(|e| open_error(lock_path, e))?,
                Err(e) => return Err(open_error(lock_path, e)),
            }
        }
        Err(e) => return Err(open_error(lock_path, e)),
    };
    let is_file = file
        .metadata()
        .map_err(|e| Error::io("inspect", lock_path, e))?
        .file_type();
    if !is_file.is_file() || is_file.is_fifo() {
        return Err(Error::LockNotAFile {
            path: lock_path.to_path_buf(),
        });
    }
    Ok(file)
}

/// A lock file root creates on the service user's volume (a root `docker exec … hermes config
/// set`) belongs to the directory's owner, as the data file it guards does: with the data
/// file's mode (0600 for `.env`) a root-owned lock could not even be opened read-only by the
/// gateway, and every later write of that user would fail until the next boot repaired it.
/// Through the descriptor just created (`O_CREAT|O_EXCL|O_NOFOLLOW`), so no planted link can
/// be given away instead.
fn give_to_directory_owner(file: &File, lock_path: &Path) -> Result<(), Error> {
    use std::os::unix::fs::MetadataExt;
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let Some(dir) = lock_path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    let owner = fs::metadata(dir).map_err(|e| Error::io("inspect", dir, e))?;
    if (owner.uid(), owner.gid()) == (0, 0) {
        return Ok(());
    }
    nix::unistd::fchown(
        file,
        Some(nix::unistd::Uid::from_raw(owner.uid())),
        Some(nix::unistd::Gid::from_raw(owner.gid())),
    )
    .map_err(|e| Error::io("chown", lock_path, io::Error::from(e)))
}

fn open_error(lock_path: &Path, e: io::Error) -> Error {
    // `O_NOFOLLOW` on a symlink fails with ELOOP.
    if e.raw_os_error() == Some(nix::libc::ELOOP) {
        Error::LockNotAFile {
            path: lock_path.to_path_buf(),
        }
    } else {
        Error::io("open", lock_path, e)
    }
}

#[cfg(test)]
pub(crate) mod test_timeout {
    use std::cell::Cell;
    use std::time::Duration;

    thread_local! {
        static SHORT: Cell<Option<Duration>> = const { Cell::new(None) };
    }

    /// Makes this thread's lock waits give up after `timeout`.
    pub(crate) fn set(timeout: Duration) {
        SHORT.with(|s| s.set(Some(timeout)));
    }

    pub(super) fn get() -> Option<Duration> {
        SHORT.with(Cell::get)
    }
}

/// Test helper: holds `lock_path` the way another process would (its own open file
/// description), until dropped.
#[cfg(test)]
pub(crate) fn hold(lock_path: &Path) -> File {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path)
        .unwrap();
    file.lock().unwrap();
    file
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn sidecar_names() {
        assert_eq!(sidecar(Path::new("/h/.env")), Path::new("/h/.env.lock"));
        assert_eq!(
            sidecar(Path::new("/h/config.yaml")),
            Path::new("/h/config.yaml.lock")
        );
        assert_eq!(
            writers_lock(Path::new("/h/auth.json")),
            Path::new("/h/auth.lock")
        );
        assert_eq!(
            writers_lock(Path::new("/h/.env")),
            Path::new("/h/.env.lock")
        );
    }

    #[test]
    fn a_held_lock_times_out_with_a_typed_error_and_the_cycle_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("x.lock");
        let _other = hold(&lock);
        test_timeout::set(Duration::from_millis(100));
        let mut ran = false;
        let err = with_locked(&lock, 0o600, || {
            ran = true;
            Ok(())
        })
        .unwrap_err();
        assert!(!ran, "the cycle must not run without the lock");
        let Error::LockTimeout { path, waited } = &err else {
            panic!("{err:?}")
        };
        assert_eq!((path, *waited), (&lock, Duration::from_millis(100)));
        assert!(err.hint().unwrap().contains("x.lock"), "{:?}", err.hint());
    }

    #[test]
    fn the_lock_is_released_after_the_cycle_even_when_it_fails() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("x.lock");
        let failed: Result<(), Error> = with_locked(&lock, 0o600, || Err(Error::NoHome));
        assert!(matches!(failed, Err(Error::NoHome)));
        test_timeout::set(Duration::from_millis(100));
        with_locked(&lock, 0o600, || Ok(())).unwrap();
    }

    #[test]
    fn a_lock_file_root_creates_belongs_to_the_directorys_owner() {
        use std::os::unix::fs::chown;
        if hermes_test_support::skip_unless_root("only root can give a file away") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        chown(dir.path(), Some(12345), Some(12346)).unwrap();
        let lock = dir.path().join(".env.lock");
        with_locked(&lock, 0o600, || Ok(())).unwrap();
        let meta = fs::metadata(&lock).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (12345, 12346));
        assert_eq!(meta.mode() & 0o777, 0o600);
        // One root already owns (left by an older build) stays as it is: it is not the one
        // just created, and ownership repair at boot is what fixes it.
        let old = dir.path().join("config.yaml.lock");
        fs::write(&old, "").unwrap();
        with_locked(&old, 0o644, || Ok(())).unwrap();
        assert_eq!(fs::metadata(&old).unwrap().uid(), 0);
    }

    #[test]
    fn lock_file_gets_the_data_files_mode_whatever_the_umask() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(".env.lock");
        with_locked(&lock, 0o600, || Ok(())).unwrap();
        assert_eq!(fs::metadata(&lock).unwrap().mode() & 0o777, 0o600);
        let lock = dir.path().join("config.yaml.lock");
        with_locked(&lock, 0o640, || Ok(())).unwrap();
        assert_eq!(fs::metadata(&lock).unwrap().mode() & 0o777, 0o640);
    }

    #[test]
    fn a_symlinked_lock_file_is_refused_and_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        let lock = dir.path().join(".env.lock");
        std::os::unix::fs::symlink(&target, &lock).unwrap();
        let err = with_locked(&lock, 0o600, || Ok(())).unwrap_err();
        assert!(matches!(err, Error::LockNotAFile { .. }), "{err:?}");
        assert!(!target.exists(), "nothing was created through the link");
        assert!(err.hint().unwrap().contains("rm "), "{:?}", err.hint());
    }

    #[test]
    fn a_fifo_lock_file_is_refused_without_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(".env.lock");
        nix::unistd::mkfifo(&lock, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let err = with_locked(&lock, 0o600, || Ok(())).unwrap_err();
        assert!(matches!(err, Error::LockNotAFile { .. }), "{err:?}");
    }

    /// A lock file this user may not write (root's, mode 0444) is opened read-only, which is
    /// enough: a read-only descriptor's `flock` excludes writers like any other. (As root the
    /// write open succeeds anyway; the exclusion half holds for every user.)
    #[test]
    fn a_lock_file_opened_read_only_still_excludes_writers() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("config.yaml.lock");
        fs::write(&lock, "").unwrap();
        fs::set_permissions(&lock, fs::Permissions::from_mode(0o444)).unwrap();
        assert_eq!(with_locked(&lock, 0o640, || Ok(7)).unwrap(), 7);
        let _other = hold_read_only(&lock);
        test_timeout::set(Duration::from_millis(100));
        assert!(matches!(
            with_locked(&lock, 0o640, || Ok(())),
            Err(Error::LockTimeout { .. })
        ));
    }

    fn hold_read_only(lock_path: &Path) -> File {
        let file = File::open(lock_path).unwrap();
        file.lock().unwrap();
        file
    }
}
