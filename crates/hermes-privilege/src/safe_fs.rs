//! Files under directories that a less privileged user can write, reached without following
//! that user's symlinks: [`SafeDir`].
//!
//! PID 1 runs as root and writes service logs onto the data volume, which belongs to the
//! service user. A plain `open("/opt/data/logs/x/current")` follows whatever symlinks that user
//! planted (`current -> /root/.bashrc`, `logs -> /etc`) and appends as root. Everything here is
//! resolved one component at a time from a directory file descriptor, so a path can only lead
//! where its directories really are.
//!
//! Words defined here:
//! * **trusted directory** — owned by root or by this process's effective user, and writable
//!   by nobody else (no group or other write bit). Only someone at least as privileged as we
//!   are can have put an entry there.
//! * **trusted symlink** — a symlink owned by root or by us, in a trusted directory. It is
//!   followed (`/var/run -> /run`, an operator's `/opt/data -> /srv/data`); any other symlink,
//!   at any component, is refused ([`is_untrusted_link`] tells that error apart).
//!
//! Resolution first tries `openat2(RESOLVE_NO_SYMLINKS)`, which walks the whole path in the
//! kernel and fails on any symlink; when it fails (a trusted symlink on the way, a missing
//! directory to create, or a kernel or seccomp filter without `openat2`), the path is walked
//! in user space with `openat(O_NOFOLLOW | O_DIRECTORY)` per component. Both give the same
//! answer; the walk is the reference and the fast path only ever refuses more. `..` is never
//! accepted: a component that climbs out of a directory someone else controls is exactly what
//! must not be followed.
//!
//! Files are opened with `O_NOFOLLOW | O_NONBLOCK` (a planted FIFO must not block PID 1) and
//! checked through the descriptor: only a regular file with a single link is written. A
//! planted symlink, FIFO or hard link in place of a log is removed (the name, never its
//! target) and a fresh file created. Entries we create are given to the owner the caller
//! names, so a service's log belongs to the service's user, not to root: as root they are
//! created *as* that owner (the filesystem uid and gid switched for the one call,
//! [`create_as`]), so they are the owner's without `chown` — which a container started with
//! `--cap-drop CHOWN` cannot do — and the kernel checks the owner's permissions; only where the
//! owner may not create (a root-owned parent) root creates and `chown`s.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AT_FDCWD, AtFlags, FcntlArg, OFlag, OpenHow, ResolveFlag, fcntl, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{Gid, Uid, UnlinkatFlags, fchown, setfsgid, setfsuid, unlinkat};

/// At most this many symlinks are followed while resolving one path (as the kernel's 40).
const MAX_LINKS: usize = 32;

/// Set once `openat2` is known not to work here, so every later call goes straight to the walk.
static OPENAT2_UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// Who should own entries that a [`SafeDir`] creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// An open directory, reached without following an untrusted symlink (module doc).
#[derive(Debug)]
pub struct SafeDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl SafeDir {
    /// Opens the directory at `path`.
    ///
    /// # Errors
    /// The errno of the failing step; an untrusted symlink on the way is an error for which
    /// [`is_untrusted_link`] is true; `..` in `path` is `InvalidInput`.
    pub fn open(path: &Path) -> io::Result<SafeDir> {
        Self::resolve(path, None)
    }

    /// Opens the directory at `path`, creating the missing ones with `mode` (before the
    /// umask). Each directory created is given to `owner` when one is named.
    ///
    /// # Errors
    /// As [`SafeDir::open`], plus the errno of a failed `mkdir` or `chown`.
    pub fn create_all(path: &Path, mode: u32, owner: Option<Owner>) -> io::Result<SafeDir> {
        Self::resolve(path, Some((mode, owner)))
    }

    /// Opens (creating it with `mode` when missing) a directory that must be *private*: it
    /// and every directory above it are owned by root or by us, and writable by nobody else
    /// (a sticky directory such as `/tmp` is fine above it). Inside such a directory plain
    /// path operations are safe, because nobody else can change anything on the way: it is
    /// for a runtime directory holding sockets and locks.
    ///
    /// # Errors
    /// `PermissionDenied` naming the first directory that fails the rule and its owner.
    pub fn create_private(path: &Path, mode: u32) -> io::Result<SafeDir> {
        let dir = Self::create_all(path, mode, None)?;
        let own = fstat(&dir.fd).map_err(|e| with_path(path, e))?;
        if own.st_uid != Uid::effective().as_raw() || own.st_mode & 0o022 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "`{}` belongs to uid {} (mode {:o}); it must belong to uid {} and be \
                     writable by nobody else",
                    path.display(),
                    own.st_uid,
                    own.st_mode & 0o7777,
                    Uid::effective()
                ),
            ));
        }
        let real = std::fs::canonicalize(path)?;
        for above in real.ancestors().skip(1) {
            let st = nix::sys::stat::stat(above).map_err(|e| with_path(above, e))?;
            let sticky = st.st_mode & 0o1000 != 0;
            if !trusted_owner(st.st_uid) || (st.st_mode & 0o022 != 0 && !sticky) {
                return Err(not_private(above, &st));
            }
        }
        Ok(dir)
    }

    /// The path this directory was opened by (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens `name` in this directory for appending, creating it with `mode` (given to `owner`
    /// when we create it). Anything that is not a regular file with one link — a symlink, a
    /// FIFO, a hard link to some other file — is unlinked (the name only) and replaced by a new
    /// file. Returns the file and whether something was replaced.
    ///
    /// # Errors
    /// `InvalidInput` when `name` is not a plain file name; the errno of a failed step.
    pub fn open_append(
        &self,
        name: &str,
        mode: u32,
        owner: Option<Owner>,
    ) -> io::Result<(File, bool)> {
        let name = plain_name(name)?;
        let base = OFlag::O_WRONLY
            | OFlag::O_APPEND
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC;
        let mut replaced = false;
        // Two rounds: the second follows the removal of a planted entry. A third would mean
        // someone is racing us; give up rather than loop.
        for _ in 0..2 {
            let created = create_as(owner, || {
                openat(
                    &self.fd,
                    name,
                    base | OFlag::O_CREAT | OFlag::O_EXCL,
                    Mode::from_bits_truncate(mode),
                )
            });
            let (fd, is_new) = match created {
                Ok(fd) => (fd, true),
                Err(Errno::EEXIST) => match openat(&self.fd, name, base, Mode::empty()) {
                    Ok(fd) => (fd, false),
                    Err(Errno::ELOOP | Errno::ENXIO) => {
                        // A symlink (ELOOP under O_NOFOLLOW) or a FIFO nobody reads (ENXIO).
                        self.unlink_planted(name)?;
                        replaced = true;
                        continue;
                    }
                    Err(e) => return Err(self.error(name, e)),
                },
                Err(e) => return Err(self.error(name, e)),
            };
            let st = fstat(&fd).map_err(|e| self.error(name, e))?;
            if !is_kind(&st, SFlag::S_IFREG) || st.st_nlink != 1 {
                drop(fd);
                self.unlink_planted(name)?;
                replaced = true;
                continue;
            }
            // Back to blocking writes: O_NONBLOCK was only there to survive a FIFO at open.
            fcntl(&fd, FcntlArg::F_SETFL(OFlag::O_APPEND)).map_err(|e| self.error(name, e))?;
            if is_new && let Some(owner) = owner {
                give(&fd, owner).map_err(|e| self.error(name, e))?;
            }
            return Ok((File::from(fd), replaced));
        }
        Err(io::Error::other(format!(
            "`{}`: replaced twice while opening it; is something racing the supervisor?",
            self.path.join(name).display()
        )))
    }

    /// Renames `from` to `to`, both in this directory (neither is followed if a symlink).
    ///
    /// # Errors
    /// `InvalidInput` for a name that is not plain; the errno of `renameat`.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (plain_name(from)?, plain_name(to)?);
        nix::fcntl::renameat(&self.fd, from, &self.fd, to).map_err(|e| self.error(from, e))
    }

    /// Removes the file (or symlink) `name` from this directory; a missing one is fine.
    ///
    /// # Errors
    /// `InvalidInput` for a name that is not plain; the errno of `unlinkat`.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let name = plain_name(name)?;
        match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            Err(e) => Err(self.error(name, e)),
        }
    }

    /// Whether an entry called `name` exists (a symlink counts; it is not followed).
    pub fn contains(&self, name: &str) -> bool {
        plain_name(name).is_ok_and(|n| fstatat(&self.fd, n, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok())
    }

    fn unlink_planted(&self, name: &OsStr) -> io::Result<()> {
        match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => Ok(()),
            // A directory in place of the file: not ours to remove.
            Err(Errno::EISDIR | Errno::EPERM) => Err(io::Error::other(format!(
                "`{}` is not a regular file",
                self.path.join(name).display()
            ))),
            Err(e) => Err(self.error(name, e)),
        }
    }

    fn error(&self, name: &OsStr, errno: Errno) -> io::Error {
        with_path(&self.path.join(name), errno)
    }

    fn resolve(path: &Path, create: Option<(u32, Option<Owner>)>) -> io::Result<SafeDir> {
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}`: `..` is not allowed here", path.display()),
            ));
        }
        let fd = match open_without_links(path) {
            Some(fd) => fd,
            None => walk(path, create)?,
        };
        Ok(SafeDir {
            fd,
            path: path.to_path_buf(),
        })
    }
}

impl AsFd for SafeDir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Whether `e` is the refusal of an untrusted symlink (see the module doc).
pub fn is_untrusted_link(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<UntrustedLink>())
}

/// The error inside an [`io::Error`] that refuses an untrusted symlink.
#[derive(Debug)]
struct UntrustedLink(PathBuf);

impl std::fmt::Display for UntrustedLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refusing to follow `{}`: a symlink that another user could have placed",
            self.0.display()
        )
    }
}

impl std::error::Error for UntrustedLink {}

/// The fast path: the whole path in one `openat2(RESOLVE_NO_SYMLINKS)`. `None` means "walk
/// it" (a symlink on the way, something missing, or no `openat2` here).
fn open_without_links(path: &Path) -> Option<OwnedFd> {
    if OPENAT2_UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    match nix::fcntl::openat2(AT_FDCWD, path, how) {
        Ok(fd) => Some(fd),
        // ENOSYS: kernel before 5.6; EPERM: a seccomp filter that refuses unknown calls
        // (older Docker profiles); E2BIG: a kernel with a smaller `open_how`.
        Err(Errno::ENOSYS | Errno::EPERM | Errno::E2BIG) => {
            OPENAT2_UNAVAILABLE.store(true, Ordering::Relaxed);
            None
        }
        Err(_) => None,
    }
}

/// The reference resolution: one component at a time (module doc).
fn walk(path: &Path, create: Option<(u32, Option<Owner>)>) -> io::Result<OwnedFd> {
    let root = || open_dir(AT_FDCWD, OsStr::new("/"));
    let mut fd = if path.is_absolute() {
        root()
    } else {
        open_dir(AT_FDCWD, OsStr::new("."))
    }
    .map_err(|e| with_path(path, e))?;
    let mut queue: VecDeque<OsString> = components(path);
    let mut done = PathBuf::from(if path.is_absolute() { "/" } else { "" });
    let mut links = 0;
    while let Some(name) = queue.pop_front() {
        if name == "/" {
            fd = root().map_err(|e| with_path(path, e))?;
            done = PathBuf::from("/");
            continue;
        }
        let here = done.join(&name);
        let next = match open_dir(&fd, &name) {
            Ok(next) => next,
            Err(Errno::ENOENT) if create.is_some() => {
                let (mode, owner) = create.unwrap_or((0o755, None));
                let made = create_as(owner, || {
                    mkdirat(&fd, name.as_os_str(), Mode::from_bits_truncate(mode))
                });
                match made {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(with_path(&here, e)),
                }
                let next = open_dir(&fd, &name).map_err(|e| with_path(&here, e))?;
                if let Some(owner) = owner {
                    give(&next, owner).map_err(|e| with_path(&here, e))?;
                }
                next
            }
            Err(e @ (Errno::ELOOP | Errno::ENOTDIR)) => {
                let st = fstatat(&fd, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                    .map_err(|e| with_path(&here, e))?;
                if !is_kind(&st, SFlag::S_IFLNK) {
                    return Err(with_path(&here, e));
                }
                let dir = fstat(&fd).map_err(|e| with_path(&here, e))?;
                if !(trusted_dir(&dir) && trusted_owner(st.st_uid)) {
                    return Err(io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        UntrustedLink(here),
                    ));
                }
                links += 1;
                if links > MAX_LINKS {
                    return Err(with_path(path, Errno::ELOOP));
                }
                let target = nix::fcntl::readlinkat(&fd, name.as_os_str())
                    .map_err(|e| with_path(&here, e))?;
                let target = PathBuf::from(target);
                if target.components().any(|c| c == Component::ParentDir) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "`{}` points to `{}`: `..` is not allowed here",
                            here.display(),
                            target.display()
                        ),
                    ));
                }
                for (i, part) in components(&target).into_iter().enumerate() {
                    queue.insert(i, part);
                }
                continue;
            }
            Err(e) => return Err(with_path(&here, e)),
        };
        fd = next;
        done = here;
    }
    Ok(fd)
}

/// The components of `path` as names, `/` standing for "restart at the root".
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::RootDir => Some(OsString::from("/")),
            Component::Normal(n) => Some(n.to_os_string()),
            Component::CurDir | Component::ParentDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn open_dir<Fd: AsFd>(dir: Fd, name: &OsStr) -> nix::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

fn plain_name(name: &str) -> io::Result<&OsStr> {
    let ok = !name.is_empty() && name != "." && name != ".." && !name.contains('/');
    if ok {
        Ok(OsStr::from_bytes(name.as_bytes()))
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{name}` is not a plain file name"),
        ))
    }
}

/// Owned by root or by us, and writable by nobody else.
fn trusted_dir(st: &FileStat) -> bool {
    trusted_owner(st.st_uid) && st.st_mode & 0o022 == 0
}

fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == Uid::effective().as_raw()
}

fn is_kind(st: &FileStat, kind: SFlag) -> bool {
    (st.st_mode & SFlag::S_IFMT.bits()) == kind.bits()
}

/// Gives the entry behind `fd` to `owner`, unless it is ours already.
/// Runs `create` (one `mkdirat` or `openat(O_CREAT)`) so that what it creates belongs to
/// `owner`: as root, with the filesystem uid and gid switched to the owner's for the call —
/// no `chown` needed afterwards (none is possible with `--cap-drop CHOWN`), and the kernel
/// checks the owner's permissions, as if the owner created it. Where the owner may not create
/// (`EACCES`/`EPERM`: a root-owned parent), `create` runs again as root, and the caller's
/// `chown` ([`give`]) does the rest. Not root, or no owner: `create` as it is.
///
/// The filesystem ids are per thread (glibc does not broadcast `setfsuid`), so other threads
/// are never affected, and they are restored before returning.
fn create_as<T>(owner: Option<Owner>, create: impl Fn() -> nix::Result<T>) -> nix::Result<T> {
    let Some(owner) = owner.filter(|o| o.uid != 0 && Uid::effective().is_root()) else {
        return create();
    };
    let gid = setfsgid(Gid::from_raw(owner.gid));
    let uid = setfsuid(Uid::from_raw(owner.uid));
    let result = create();
    setfsuid(uid);
    setfsgid(gid);
    match result {
        Err(Errno::EACCES | Errno::EPERM) => create(),
        other => other,
    }
}

fn give(fd: &OwnedFd, owner: Owner) -> nix::Result<()> {
    let st = fstat(fd)?;
    if st.st_uid == owner.uid && st.st_gid == owner.gid {
        return Ok(());
    }
    fchown(
        fd,
        Some(Uid::from_raw(owner.uid)),
        Some(Gid::from_raw(owner.gid)),
    )
}

fn not_private(path: &Path, st: &FileStat) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "`{}` (owner uid {}, mode {:o}) could be changed by another user; directories above \
             a private one must belong to root or uid {} and be writable by nobody else (or be \
             sticky, like /tmp)",
            path.display(),
            st.st_uid,
            st.st_mode & 0o7777,
            Uid::effective()
        ),
    )
}

fn with_path(path: &Path, errno: Errno) -> io::Error {
    let e = io::Error::from_raw_os_error(errno as i32);
    io::Error::new(e.kind(), format!("`{}`: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

    /// Both resolutions must agree; this runs the reference walk on its own.
    fn walk_only(path: &Path) -> io::Result<OwnedFd> {
        walk(path, None)
    }

    fn private_tempdir() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        fs::set_permissions(d.path(), fs::Permissions::from_mode(0o700)).unwrap();
        d
    }

    #[test]
    fn plain_directories_open_both_ways() {
        let d = private_tempdir();
        let deep = d.path().join("a/b/c");
        fs::create_dir_all(&deep).unwrap();
        let dir = SafeDir::open(&deep).unwrap();
        assert_eq!(dir.path(), deep);
        let via_walk = walk_only(&deep).unwrap();
        let (a, b) = (fstat(&dir.fd).unwrap(), fstat(&via_walk).unwrap());
        assert_eq!((a.st_dev, a.st_ino), (b.st_dev, b.st_ino));
    }

    #[test]
    fn a_symlink_in_a_directory_others_can_write_is_refused_at_any_component() {
        let d = private_tempdir();
        let shared = d.path().join("shared");
        let target = d.path().join("target");
        fs::create_dir_all(&shared).unwrap();
        fs::create_dir_all(target.join("inner")).unwrap();
        // Group- and world-writable: anyone could have planted the link.
        fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
        symlink(&target, shared.join("logs")).unwrap();
        for path in [shared.join("logs"), shared.join("logs/inner")] {
            for result in [
                SafeDir::open(&path).map(|_| ()),
                walk_only(&path).map(|_| ()),
            ] {
                let err = result.unwrap_err();
                assert!(is_untrusted_link(&err), "{}: {err}", path.display());
            }
        }
        let err = SafeDir::create_all(&shared.join("logs/new"), 0o755, None).unwrap_err();
        assert!(is_untrusted_link(&err), "{err}");
        assert!(!target.join("new").exists());
    }

    #[test]
    fn a_symlink_in_our_own_private_directory_is_followed() {
        let d = private_tempdir();
        fs::create_dir_all(d.path().join("real/x")).unwrap();
        symlink("real", d.path().join("alias")).unwrap();
        symlink(d.path().join("real"), d.path().join("absolute")).unwrap();
        for p in ["alias/x", "absolute/x"] {
            let dir = walk_only(&d.path().join(p)).unwrap();
            let want = fs::metadata(d.path().join("real/x")).unwrap();
            assert_eq!(fstat(&dir).unwrap().st_ino, want.ino(), "{p}");
            assert!(SafeDir::open(&d.path().join(p)).is_ok(), "{p}");
        }
    }

    #[test]
    fn symlink_loops_end() {
        let d = private_tempdir();
        symlink("b", d.path().join("a")).unwrap();
        symlink("a", d.path().join("b")).unwrap();
        let err = walk_only(&d.path().join("a")).unwrap_err();
        assert_eq!(err.raw_os_error(), None, "wrapped with the path: {err}");
        assert!(err.to_string().contains("symbolic links"), "{err}");
    }

    #[test]
    fn parent_components_are_refused() {
        let d = private_tempdir();
        let err = SafeDir::open(&d.path().join("x/../..")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        symlink("../..", d.path().join("up")).unwrap();
        let err = walk_only(&d.path().join("up")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
    }

    #[test]
    fn create_all_makes_missing_directories() {
        let d = private_tempdir();
        let deep = d.path().join("logs/gateways/work");
        let dir = SafeDir::create_all(&deep, 0o750, None).unwrap();
        assert!(deep.is_dir());
        assert_eq!(fs::metadata(&deep).unwrap().mode() & 0o7777 & !0o022, 0o750);
        drop(dir);
        // Again: nothing to create, same answer.
        SafeDir::create_all(&deep, 0o750, None).unwrap();
    }

    #[test]
    fn planted_entries_are_replaced_never_followed() {
        let d = private_tempdir();
        let victim = d.path().join("victim");
        fs::write(&victim, "secret\n").unwrap();
        let logs = d.path().join("logs");
        fs::create_dir(&logs).unwrap();
        let dir = SafeDir::open(&logs).unwrap();

        // A symlink to the victim.
        symlink(&victim, logs.join("current")).unwrap();
        let (mut f, replaced) = dir.open_append("current", 0o640, None).unwrap();
        assert!(replaced);
        f.write_all(b"line\n").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "secret\n");
        assert_eq!(fs::read_to_string(logs.join("current")).unwrap(), "line\n");
        assert!(
            !fs::symlink_metadata(logs.join("current"))
                .unwrap()
                .is_symlink()
        );

        // A hard link to the victim.
        fs::remove_file(logs.join("current")).unwrap();
        fs::hard_link(&victim, logs.join("current")).unwrap();
        let (mut f, replaced) = dir.open_append("current", 0o640, None).unwrap();
        assert!(replaced);
        f.write_all(b"again\n").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "secret\n");
        assert_eq!(fs::metadata(&victim).unwrap().nlink(), 1);

        // A FIFO nobody reads: must not block.
        fs::remove_file(logs.join("current")).unwrap();
        nix::unistd::mkfifo(&logs.join("current"), Mode::from_bits_truncate(0o600)).unwrap();
        let (_, replaced) = dir.open_append("current", 0o640, None).unwrap();
        assert!(replaced);
        assert!(fs::metadata(logs.join("current")).unwrap().is_file());

        // A plain file is appended to, not replaced.
        let (mut f, replaced) = dir.open_append("current", 0o640, None).unwrap();
        assert!(!replaced);
        f.write_all(b"more\n").unwrap();
        assert!(
            fs::read_to_string(logs.join("current"))
                .unwrap()
                .ends_with("more\n")
        );
    }

    #[test]
    fn a_private_directory_must_be_ours_all_the_way_up() {
        let d = private_tempdir();
        let run = d.path().join("run");
        SafeDir::create_private(&run, 0o755).unwrap();
        // Writable by others: refused, and so is anything below it.
        fs::set_permissions(&run, fs::Permissions::from_mode(0o777)).unwrap();
        let err = SafeDir::create_private(&run, 0o755).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
        let err = SafeDir::create_private(&run.join("inner"), 0o755).unwrap_err();
        assert!(
            err.to_string().contains("could be changed by another user"),
            "{err}"
        );
        // A sticky world-writable directory above (like /tmp) is fine.
        fs::set_permissions(&run, fs::Permissions::from_mode(0o1777)).unwrap();
        SafeDir::create_private(&run.join("inner"), 0o755).unwrap();
    }

    #[test]
    fn names_must_be_plain() {
        let d = private_tempdir();
        let dir = SafeDir::open(d.path()).unwrap();
        for bad in ["", ".", "..", "a/b", "../x"] {
            let err = dir.open_append(bad, 0o600, None).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
        assert!(dir.rename("a/b", "c").is_err());
    }

    #[test]
    fn rename_and_remove_stay_in_the_directory() {
        let d = private_tempdir();
        let outside = d.path().join("outside");
        fs::write(&outside, "keep").unwrap();
        let logs = d.path().join("logs");
        fs::create_dir(&logs).unwrap();
        symlink(&outside, logs.join("current")).unwrap();
        let dir = SafeDir::open(&logs).unwrap();
        dir.rename("current", "current.1").unwrap();
        assert!(
            fs::symlink_metadata(logs.join("current.1"))
                .unwrap()
                .is_symlink()
        );
        dir.remove("current.1").unwrap();
        dir.remove("current.1").unwrap();
        assert_eq!(fs::read_to_string(&outside).unwrap(), "keep");
        assert!(!dir.contains("current.1"));
    }

    #[test]
    fn created_entries_go_to_the_owner() {
        if crate::test_support::skip_unless_root("giving files to another user needs root") {
            return;
        }
        let d = private_tempdir();
        let owner = Owner {
            uid: 10000,
            gid: 10001,
        };
        let dir = SafeDir::create_all(&d.path().join("logs/svc"), 0o755, Some(owner)).unwrap();
        let (f, _) = dir.open_append("current", 0o640, Some(owner)).unwrap();
        drop(f);
        for p in ["logs", "logs/svc", "logs/svc/current"] {
            let m = fs::metadata(d.path().join(p)).unwrap();
            assert_eq!((m.uid(), m.gid()), (10000, 10001), "{p}");
        }
    }

    /// Drops `CAP_CHOWN` from the calling thread's effective set (capabilities are per
    /// thread: the rest of the test process keeps it), as `--cap-drop CHOWN` does.
    fn drop_cap_chown_in_this_thread() {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const VERSION_3: u32 = 0x2008_0522;
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [Data::default(); 2];
        #[allow(unsafe_code)]
        // SAFETY: capget/capset with a v3 header and two data words, as the kernel documents.
        unsafe {
            assert_eq!(
                libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()),
                0
            );
            data[0].effective &= !1; // CAP_CHOWN is bit 0
            assert_eq!(libc::syscall(libc::SYS_capset, &header, data.as_ptr()), 0);
        }
        assert!(
            fchown(tempfile::tempfile().unwrap(), Some(Uid::from_raw(1)), None).is_err(),
            "CAP_CHOWN is gone in this thread"
        );
    }

    #[test]
    fn without_cap_chown_created_entries_still_go_to_the_owner() {
        if crate::test_support::skip_unless_root("acting as another user needs root") {
            return;
        }
        let d = private_tempdir();
        // The volume belongs to the service user, as a named volume of the image does.
        std::os::unix::fs::chown(d.path(), Some(10000), Some(10001)).unwrap();
        let root = d.path().to_path_buf();
        let owner = Owner {
            uid: 10000,
            gid: 10001,
        };
        std::thread::spawn(move || {
            drop_cap_chown_in_this_thread();
            let dir = SafeDir::create_all(&root.join("logs/gateways/default"), 0o755, Some(owner))
                .unwrap();
            let (f, _) = dir.open_append("current", 0o640, Some(owner)).unwrap();
            drop(f);
            // The thread is root again for what is not created for an owner.
            assert_eq!(nix::unistd::getuid().as_raw(), 0);
        })
        .join()
        .unwrap();
        for p in [
            "logs",
            "logs/gateways",
            "logs/gateways/default",
            "logs/gateways/default/current",
        ] {
            let m = fs::metadata(d.path().join(p)).unwrap();
            assert_eq!((m.uid(), m.gid()), (10000, 10001), "{p}");
        }
    }

    #[test]
    fn where_the_owner_may_not_create_root_creates_and_gives() {
        if crate::test_support::skip_unless_root("giving files to another user needs root") {
            return;
        }
        let d = private_tempdir();
        // A root-owned parent (0755) that the owner cannot write into.
        let owner = Owner {
            uid: 10000,
            gid: 10001,
        };
        let dir = SafeDir::create_all(&d.path().join("svc"), 0o755, Some(owner)).unwrap();
        drop(dir);
        let m = fs::metadata(d.path().join("svc")).unwrap();
        assert_eq!((m.uid(), m.gid()), (10000, 10001));
        assert_eq!(
            fs::metadata(d.path()).unwrap().uid(),
            0,
            "the parent stays root's"
        );
    }
}
