//! Service logs: where they are ([`service_log_dir`], [`log_file`]), their last lines
//! ([`tail`]) and what is appended to them ([`Follower`]) — for `hermes service logs`, the
//! gateway following its own log, and the dashboard.
//!
//! Words:
//! * **log** — `current` in a service's log directory: a profile's gateway in
//!   `<home>/logs/gateways/<profile>/`, any other service in `<home>/logs/<service>/` (the
//!   supervisor's default). Each line is `<UTC timestamp> <what the service printed>`.
//! * **rotation** — the supervisor renames a full `current` to `current.1` (older archives
//!   shift up) and starts a new `current`; a follower notices (another inode, or a file shorter
//!   than what it read) and goes on with the new file.
//! * **lossy** — a service may print anything: bytes that are not UTF-8 are shown as U+FFFD,
//!   never an error that hides the rest of the log.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Error;
use crate::gateway::{GATEWAY_PREFIX, gateway_log_dir};

/// How often a blocking [`Follower`] looks for new lines.
pub const FOLLOW_INTERVAL: Duration = Duration::from_millis(200);

/// Where a supervised service of `home` logs (module doc). `None` for a name no service can
/// have.
pub fn service_log_dir(home: &Path, service: &str) -> Option<PathBuf> {
    if !hermes_supervisor::spec::is_valid_name(service) {
        return None;
    }
    Some(match service.strip_prefix(GATEWAY_PREFIX) {
        Some(profile) => gateway_log_dir(home, profile),
        None => home.join("logs").join(service),
    })
}

/// The current log file of `service` under `home`.
///
/// # Errors
/// [`Error::InvalidServiceName`] for a name no service can have.
pub fn log_file(home: &Path, service: &str) -> Result<PathBuf, Error> {
    service_log_dir(home, service)
        .map(|dir| dir.join("current"))
        .ok_or_else(|| Error::InvalidServiceName {
            name: service.to_owned(),
        })
}

/// The last `n` lines of `service`'s log, and a [`Follower`] that starts right after them (so
/// nothing is lost or shown twice between the two).
///
/// # Errors
/// [`Error::InvalidServiceName`]; [`Error::NoLog`] when the log cannot be opened (the service
/// never wrote one); [`Error::LogRead`] when it cannot be read.
pub fn open_service_log(
    home: &Path,
    service: &str,
    n: usize,
) -> Result<(Vec<String>, Follower), Error> {
    let path = log_file(home, service)?;
    let file = File::open(&path).map_err(|source| Error::NoLog {
        service: service.to_owned(),
        path: path.clone(),
        source,
    })?;
    Follower::after_tail(&path, file, n)
}

/// The last `n` lines of the file at `path`, decoded lossily (module doc), without line ends.
///
/// # Errors
/// [`Error::LogRead`] when the file cannot be opened or read.
pub fn tail(path: &Path, n: usize) -> Result<Vec<String>, Error> {
    let file = File::open(path).map_err(|e| Error::log_read(path, e))?;
    Follower::after_tail(path, file, n).map(|(lines, _)| lines)
}

/// The lines appended to a log file from some point on, across rotations.
///
/// [`Follower::poll`] returns what has been completed since the last call and never blocks
/// (for an event loop such as the dashboard's); as an [`Iterator`] it blocks, looking every
/// [`FOLLOW_INTERVAL`], and never ends by itself (for `hermes service logs -f`). A line is
/// given once it ends with a newline; what a rotated file held unfinished is given as a line
/// of its own.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    file: File,
    inode: u64,
    pos: u64,
    partial: Vec<u8>,
    ready: VecDeque<String>,
}

impl Follower {
    /// Follows `path` from its current end.
    ///
    /// # Errors
    /// [`Error::LogRead`] when the file cannot be opened.
    pub fn from_end(path: &Path) -> Result<Self, Error> {
        let mut file = File::open(path).map_err(|e| Error::log_read(path, e))?;
        let pos = file
            .seek(SeekFrom::End(0))
            .map_err(|e| Error::log_read(path, e))?;
        Self::at(path, file, pos)
    }

    /// Reads all of `file` (opened from `path`): its last `n` lines, and a follower from its
    /// end.
    fn after_tail(path: &Path, mut file: File, n: usize) -> Result<(Vec<String>, Self), Error> {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| Error::log_read(path, e))?;
        let text = String::from_utf8_lossy(&bytes);
        let all: Vec<&str> = text.lines().collect();
        let lines = all[all.len().saturating_sub(n)..]
            .iter()
            .map(|line| (*line).to_owned())
            .collect();
        let follower = Self::at(path, file, bytes.len() as u64)?;
        Ok((lines, follower))
    }

    fn at(path: &Path, file: File, pos: u64) -> Result<Self, Error> {
        let inode = file.metadata().map_err(|e| Error::log_read(path, e))?.ino();
        Ok(Follower {
            path: path.to_path_buf(),
            file,
            inode,
            pos,
            partial: Vec::new(),
            ready: VecDeque::new(),
        })
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lines completed since the last call, oldest first; empty when there are none.
    /// A rotated file is read to its end before the new one is opened; a missing file (in the
    /// middle of a rotation) is waited for.
    ///
    /// # Errors
    /// [`Error::LogRead`] when the file cannot be read or the new one opened.
    pub fn poll(&mut self) -> Result<Vec<String>, Error> {
        let mut lines: Vec<String> = self.ready.drain(..).collect();
        if let Ok(meta) = std::fs::metadata(&self.path) {
            let replaced = meta.ino() != self.inode;
            if replaced || meta.len() < self.pos {
                if replaced {
                    // What was written before the rename is still in the old file.
                    self.read_appended(&mut lines)?;
                }
                self.flush_partial(&mut lines);
                let file = File::open(&self.path).map_err(|e| self.error(e))?;
                self.inode = file.metadata().map_err(|e| self.error(e))?.ino();
                self.file = file;
                self.pos = 0;
            }
        }
        self.read_appended(&mut lines)?;
        Ok(lines)
    }

    /// Reads what was appended to the current file since `pos`; complete lines go to `lines`.
    fn read_appended(&mut self, lines: &mut Vec<String>) -> Result<(), Error> {
        self.file
            .seek(SeekFrom::Start(self.pos))
            .map_err(|e| self.error(e))?;
        let mut chunk = Vec::new();
        self.file
            .read_to_end(&mut chunk)
            .map_err(|e| self.error(e))?;
        self.pos += chunk.len() as u64;
        self.partial.extend_from_slice(&chunk);
        if let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') {
            let rest = self.partial.split_off(end + 1);
            let complete = std::mem::replace(&mut self.partial, rest);
            lines.extend(
                String::from_utf8_lossy(&complete)
                    .lines()
                    .map(str::to_owned),
            );
        }
        Ok(())
    }

    /// An unfinished line of a file that is no longer followed becomes a line of its own.
    fn flush_partial(&mut self, lines: &mut Vec<String>) {
        if !self.partial.is_empty() {
            let text = String::from_utf8_lossy(&self.partial);
            lines.push(text.trim_end_matches('\r').to_owned());
            self.partial.clear();
        }
    }

    fn error(&self, source: io::Error) -> Error {
        Error::log_read(&self.path, source)
    }
}

impl Iterator for Follower {
    type Item = Result<String, Error>;

    /// Blocks until the next line (module doc); `None` never comes.
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(line) = self.ready.pop_front() {
                return Some(Ok(line));
            }
            match self.poll() {
                Ok(lines) if lines.is_empty() => std::thread::sleep(FOLLOW_INTERVAL),
                Ok(lines) => self.ready.extend(lines),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::Write;

    #[test]
    fn service_logs_live_where_the_supervisor_writes_them() {
        let home = Path::new("/data");
        assert_eq!(
            service_log_dir(home, "gateway-work"),
            Some(PathBuf::from("/data/logs/gateways/work"))
        );
        assert_eq!(
            service_log_dir(home, "llama"),
            Some(PathBuf::from("/data/logs/llama"))
        );
        for bad in ["", "../etc", "a/b", ".hidden"] {
            assert_eq!(service_log_dir(home, bad), None, "{bad}");
            assert!(matches!(
                log_file(home, bad),
                Err(Error::InvalidServiceName { .. })
            ));
        }
        assert_eq!(
            log_file(home, "llama").unwrap(),
            PathBuf::from("/data/logs/llama/current")
        );
    }

    #[test]
    fn the_tail_is_the_last_lines_decoded_lossily() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("current");
        fs::write(&path, b"one\ntwo \xff\xfe bytes\r\nthree\nfour").unwrap();
        assert_eq!(
            tail(&path, 3).unwrap(),
            ["two \u{fffd}\u{fffd} bytes", "three", "four"]
        );
        assert_eq!(tail(&path, 10).unwrap().len(), 4);
        assert!(tail(&path, 0).unwrap().is_empty());
        assert!(matches!(
            tail(&dir.path().join("missing"), 1),
            Err(Error::LogRead { .. })
        ));
    }

    #[test]
    fn a_service_without_a_log_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let err = open_service_log(dir.path(), "ticker", 5).unwrap_err();
        assert!(
            matches!(&err, Error::NoLog { service, .. } if service == "ticker"),
            "{err:?}"
        );
    }

    #[test]
    fn the_follower_starts_after_the_tail_and_gives_complete_lines() {
        let dir = tempfile::tempdir().unwrap();
        let logs = dir.path().join("logs/ticker");
        fs::create_dir_all(&logs).unwrap();
        let path = logs.join("current");
        fs::write(&path, "a\nb\n").unwrap();
        let (lines, mut follower) = open_service_log(dir.path(), "ticker", 1).unwrap();
        assert_eq!(lines, ["b"]);
        assert!(follower.poll().unwrap().is_empty());
        let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"c\nhalf").unwrap();
        assert_eq!(follower.poll().unwrap(), ["c"]);
        f.write_all(b" done \xff\n").unwrap();
        assert_eq!(follower.poll().unwrap(), ["half done \u{fffd}"]);
        assert!(follower.poll().unwrap().is_empty());
    }

    #[test]
    fn the_follower_survives_rotation_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("current");
        fs::write(&path, "old\n").unwrap();
        let mut follower = Follower::from_end(&path).unwrap();
        // Written just before the rotation: still read from the renamed file.
        let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"last of old\nunfinished").unwrap();
        fs::rename(&path, dir.path().join("current.1")).unwrap();
        assert!(follower.poll().unwrap().contains(&"last of old".to_owned()));
        fs::write(&path, "first of new\n").unwrap();
        assert_eq!(follower.poll().unwrap(), ["unfinished", "first of new"]);
        // Truncated in place (a copy-truncate rotation): read again from the start.
        fs::write(&path, "x\n").unwrap();
        assert_eq!(follower.poll().unwrap(), ["x"]);
        // The blocking iterator gives the same lines.
        fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"y\nz\n")
            .unwrap();
        let next: Vec<String> = follower.by_ref().take(2).map(Result::unwrap).collect();
        assert_eq!(next, ["y", "z"]);
    }
}
