//! Writes that keep a file's owner: root writing a file of the service user's volume (a root
//! `docker exec … hermes config set`, `hermes memory setup`, the boot) leaves it the service
//! user's, so the gateway, which runs as that user, can still read and rewrite it.
//!
//! [`write_atomic_keeping_owner`] is the write of every file a root command may edit in place:
//! `config.yaml` ([`crate::config_file`], under [`Config::edit`](crate::config::Config::edit))
//! and `.env` ([`DotEnv::edit`](crate::dotenv::DotEnv::edit)). Being inside those two, no
//! caller can forget it. Run as anyone but root it is [`write_atomic`]: only root can give a
//! file away.

use std::fs;
use std::io;
use std::path::Path;

use crate::Error;
use crate::atomic::write_atomic;

/// Replaces `path` with `contents` as [`write_atomic`] does (a new file gets `mode`), and gives
/// the file back to the owner it had (a new file: its directory's owner) when root wrote it.
///
/// # Errors
///
/// [`write_atomic`]'s error, or the failed `chown` as an I/O error.
pub fn write_atomic_keeping_owner(path: &Path, contents: &[u8], mode: u32) -> Result<(), Error> {
    let owner = owner_to_keep(path, path.exists());
    write_atomic(path, contents, mode)?;
    if let Some((uid, gid)) = owner {
        keep_owner(path, uid, gid)?;
    }
    Ok(())
}

/// Who must own the file after a write: its owner before (or, for a new file, its
/// directory's), when that is not who writes it — only root can give a file away, and root
/// writing a file of the service user's volume must leave it the service user's.
fn owner_to_keep(path: &Path, existed: bool) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let from = if existed {
        fs::metadata(path).ok()?
    } else {
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty())?;
        fs::metadata(dir).ok()?
    };
    ((from.uid(), from.gid()) != (0, 0)).then_some((from.uid(), from.gid()))
}

/// Gives the file root just wrote at `path` to `uid:gid`, through a descriptor: the directory
/// is the other user's, who could put a symlink (or a hard link to a file of root's) at `path`
/// between the write and the `chown`, and a path-based `chown` would then give that file away.
/// The file opened must not be a symlink (`O_NOFOLLOW`), must be a regular file root owns with
/// one link — the one just written; anything else is refused and left as it is.
fn keep_owner(path: &Path, uid: u32, gid: u32) -> Result<(), Error> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| Error::io("open to chown", path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io("stat to chown", path, e))?;
    if !meta.is_file() || meta.uid() != 0 || meta.nlink() != 1 {
        return Err(Error::io(
            "chown",
            path,
            io::Error::other(
                "not the file just written (replaced meanwhile); its owner was left as it is",
            ),
        ));
    }
    nix::unistd::fchown(
        &file,
        Some(nix::unistd::Uid::from_raw(uid)),
        Some(nix::unistd::Gid::from_raw(gid)),
    )
    .map_err(|e| Error::io("chown", path, io::Error::from(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_gives_back_only_the_file_it_wrote_never_a_planted_link() {
        use std::os::unix::fs::{MetadataExt, chown, symlink};
        if hermes_test_support::skip_unless_root("only root can give a file away") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // A file of root's elsewhere, which a planted link must not give away.
        let victim = dir.path().join("victim");
        fs::write(&victim, "root's\n").unwrap();
        let path = dir.path().join("config.yaml");
        symlink(&victim, &path).unwrap();
        assert!(keep_owner(&path, 12345, 12345).is_err());
        fs::remove_file(&path).unwrap();
        fs::hard_link(&victim, &path).unwrap();
        assert!(keep_owner(&path, 12345, 12345).is_err());
        let meta = fs::metadata(&victim).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (0, 0),
            "the victim is still root's"
        );
        // The file just written (root's, one link) is given back.
        fs::remove_file(&path).unwrap();
        fs::write(&path, "a: 1\n").unwrap();
        keep_owner(&path, 12345, 12346).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (12345, 12346));
        // A file someone else already owns is not the one root wrote either.
        chown(&victim, Some(1), Some(1)).unwrap();
        let other = dir.path().join("other.yaml");
        fs::hard_link(&victim, &other).unwrap();
        fs::remove_file(&victim).unwrap();
        assert!(keep_owner(&other, 12345, 12345).is_err());
        assert_eq!(fs::metadata(&other).unwrap().uid(), 1);
    }

    #[test]
    fn root_writing_leaves_the_file_its_owners_and_a_new_one_its_directorys() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt, chown};
        if hermes_test_support::skip_unless_root("only root can give a file away") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        fs::write(&path, "A=1\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        chown(&path, Some(12345), Some(12346)).unwrap();
        write_atomic_keeping_owner(&path, b"A=2\n", 0o600).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (12345, 12346));
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::read_to_string(&path).unwrap(), "A=2\n");

        chown(dir.path(), Some(12347), Some(12348)).unwrap();
        let created = dir.path().join("new");
        write_atomic_keeping_owner(&created, b"x", 0o640).unwrap();
        let meta = fs::metadata(&created).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (12347, 12348));

        // Root's own file stays root's.
        let roots = dir.path().join("roots");
        fs::write(&roots, "r").unwrap();
        write_atomic_keeping_owner(&roots, b"s", 0o600).unwrap();
        assert_eq!(fs::metadata(&roots).unwrap().uid(), 0);
    }
}
