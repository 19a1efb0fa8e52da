//! A file held open by another process, as a running gateway holds its database: for tests of
//! code that must not replace a file under a process that still has it ([`HeldOpen`]).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test support: a failed unwrap is a failed test"
)]

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A `sh` holding a file open for reading until dropped.
#[derive(Debug)]
pub struct HeldOpen(Child);

impl HeldOpen {
    /// Opens `path` in a new `sh` and returns once it is open.
    ///
    /// # Panics
    /// When `sh` cannot run or cannot open the file.
    pub fn new(path: &Path) -> HeldOpen {
        let mut child = Command::new("sh")
            .args(["-c", "exec 3<\"$1\" && echo ready && read _", "sh"])
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(
            ready.trim(),
            "ready",
            "`{}` could not be opened",
            path.display()
        );
        HeldOpen(child)
    }

    /// The holding process's pid.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for HeldOpen {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}
