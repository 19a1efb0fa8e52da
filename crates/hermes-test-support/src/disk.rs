//! A small disk for tests about a full volume: a tmpfs of a chosen size mounted for the test
//! ([`SmallDisk`], root only: callers skip first with [`crate::skip_unless_root`]), and
//! [`SmallDisk::fill`] to take its space up to a few bytes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed unwrap is a failed test"
)]

use std::io::Write;
use std::path::{Path, PathBuf};

/// A tmpfs mounted at a directory for the test, lazily unmounted when dropped.
#[derive(Debug)]
pub struct SmallDisk(PathBuf);

impl SmallDisk {
    /// Mounts a tmpfs of `size` (`mount`'s words: `8m`) at `dir`, created if missing.
    ///
    /// # Panics
    /// When the mount fails (not root, no `mount`).
    pub fn mount(dir: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(dir).unwrap();
        let status = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success(), "mount a tmpfs at {}", dir.display());
        SmallDisk(dir.to_path_buf())
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Writes the file `name` on it until `leave` bytes are left free (or the disk is full).
    pub fn fill(&self, name: &str, leave: u64) {
        let mut f = std::fs::File::create(self.0.join(name)).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut left = available_bytes(&self.0).saturating_sub(leave);
        while left > 0 {
            let n = chunk.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            if f.write_all(&chunk[..n]).is_err() {
                break;
            }
            left -= n as u64;
        }
        let _ = f.sync_all();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// The bytes free for an unprivileged writer on the file system of `dir`, as `df` reads them.
///
/// # Panics
/// When `df` fails or prints something else.
pub fn available_bytes(dir: &Path) -> u64 {
    let out = std::process::Command::new("df")
        .args(["-B1", "--output=avail"])
        .arg(dir)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}
