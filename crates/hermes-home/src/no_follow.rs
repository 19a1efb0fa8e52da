//! Reading a file below a directory without following a symlink on the way: every component
//! under `base` is opened with `O_NOFOLLOW` relative to the one before (`openat`), so a link
//! planted anywhere below `base` (`state -> /root`, `jobs.json -> /etc/shadow`) reads nothing,
//! even when a process running as root reads a directory the service user can write. The file
//! is opened non-blocking (a FIFO planted in its place never hangs the reader), must be a
//! regular file, and is read up to a size bound (a huge file never grows the reader's memory).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

/// `base/<components…>`, at most `max` bytes; a larger file is an error (a record read whole
/// or not at all). A missing component is `NotFound`; a symlink, a FIFO or a directory in the
/// file's place is an error saying so.
///
/// # Errors
/// As above, and whatever reading fails with.
pub fn read(base: &Path, components: &[&str], max: u64) -> io::Result<Vec<u8>> {
    let file = open(base, components)?;
    if file.metadata()?.len() > max {
        return Err(io::Error::other(format!("larger than {max} bytes")));
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(bytes)
}

/// The first `max` bytes of `base/<components…>` (an excerpt: a longer file is not an error).
///
/// # Errors
/// As [`read`], but for the size.
pub fn read_start(base: &Path, components: &[&str], max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open(base, components)?.take(max).read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn open(base: &Path, components: &[&str]) -> io::Result<File> {
    let no_follow = OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let Some((name, dirs)) = components.split_last() else {
        return Err(io::Error::other("no file named"));
    };
    let mut dir: OwnedFd = File::open(base)?.into();
    for part in dirs {
        dir = openat(
            dir.as_fd(),
            *part,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | no_follow,
            Mode::empty(),
        )
        .map_err(|e| why(e, part))?;
    }
    let file = File::from(
        openat(
            dir.as_fd(),
            *name,
            OFlag::O_RDONLY | OFlag::O_NONBLOCK | no_follow,
            Mode::empty(),
        )
        .map_err(|e| why(e, name))?,
    );
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(format!("`{name}` is not a regular file")));
    }
    Ok(file)
}

/// `ELOOP` (and `ENOTDIR` for a directory that is a link) in words.
fn why(e: Errno, part: &str) -> io::Error {
    match e {
        Errno::ELOOP | Errno::ENOTDIR => {
            io::Error::other(format!("`{part}` is a symlink or not a directory"))
        }
        e => io::Error::from(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_file_below_reads_within_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("a/b")).unwrap();
        fs::write(dir.path().join("a/b/f"), "hello").unwrap();
        assert_eq!(read(dir.path(), &["a", "b", "f"], 5).unwrap(), b"hello");
        assert!(read(dir.path(), &["a", "b", "f"], 4).is_err());
        assert_eq!(
            read_start(dir.path(), &["a", "b", "f"], 4).unwrap(),
            b"hell"
        );
        let e = read(dir.path(), &["a", "missing"], 5).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_planted_link_anywhere_reads_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let secret = tempfile::tempdir().unwrap();
        fs::write(secret.path().join("f"), "secret").unwrap();
        // The directory is a link.
        symlink(secret.path(), dir.path().join("d")).unwrap();
        let e = read(dir.path(), &["d", "f"], 100).unwrap_err();
        assert!(e.to_string().contains("`d` is a symlink"), "{e}");
        // The file is a link.
        fs::create_dir(dir.path().join("real")).unwrap();
        symlink(secret.path().join("f"), dir.path().join("real/f")).unwrap();
        let e = read_start(dir.path(), &["real", "f"], 100).unwrap_err();
        assert!(e.to_string().contains("`f` is a symlink"), "{e}");
    }

    #[test]
    fn a_fifo_or_a_directory_in_the_files_place_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&dir.path().join("p"), Mode::from_bits_truncate(0o600)).unwrap();
        assert!(read(dir.path(), &["p"], 100).is_err());
        fs::create_dir(dir.path().join("sub")).unwrap();
        let e = read(dir.path(), &["sub"], 100).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
