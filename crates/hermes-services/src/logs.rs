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
//! * **position** — a file (by inode) and a byte offset in it after a complete line: where a
//!   reader stopped, so it can resume exactly ([`Follower::resume`]), even after a rotation
//!   renamed that file to `current.1`.
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
        // `gateway-..` or `gateway-` would name `logs/` or `logs/gateways/` itself.
        Some(profile) if profile.is_empty() || profile.starts_with('.') => return None,
        Some(profile) => gateway_log_dir(home, profile),
        None => hermes_home::layout::logs_dir(home).join(service),
    })
}

/// The services of `home` that have a log file now (module doc: where each kind logs), by
/// name, sorted — what is on disk, whether or not a supervisor runs them.
pub fn services_with_logs(home: &Path) -> Vec<String> {
    let logs = hermes_home::layout::logs_dir(home);
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| entry.file_name().into_string().ok())
            .collect()
    };
    let mut found: Vec<String> = names(&logs)
        .into_iter()
        .chain(
            names(&logs.join("gateways"))
                .into_iter()
                .map(|profile| format!("{GATEWAY_PREFIX}{profile}")),
        )
        // Only names that map back to the file found (no stray directory, no odd name).
        .filter(|name| log_file(home, name).is_ok_and(|file| file.is_file()))
        .collect();
    found.sort();
    found.dedup();
    found
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
    let (path, file) = open_log(home, service)?;
    Follower::after_tail(&path, file, n)
}

/// The current log file of `service` under `home`, opened for reading, and its path.
///
/// # Errors
/// [`Error::InvalidServiceName`]; [`Error::NoLog`] when it cannot be opened.
pub fn open_log(home: &Path, service: &str) -> Result<(PathBuf, File), Error> {
    let path = log_file(home, service)?;
    match File::open(&path) {
        Ok(file) => Ok((path, file)),
        Err(source) => Err(Error::NoLog {
            service: service.to_owned(),
            path,
            source,
        }),
    }
}

/// Follows `service`'s log from `at` ([`Follower::resume`]).
///
/// # Errors
/// As [`open_log`]; [`Error::LogRead`] when a file cannot be read.
pub fn resume_service_log(
    home: &Path,
    service: &str,
    at: Resume,
) -> Result<(Follower, Resumed), Error> {
    let (path, file) = open_log(home, service)?;
    Follower::resume(&path, file, at)
}

/// Where a [`Follower`] stands: the file it reads (by inode, so a rotated file is still
/// recognised under its archive name) and the byte offset right after the last complete line
/// it gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The inode of the file read.
    pub inode: u64,
    /// Bytes of that file already given as lines.
    pub offset: u64,
}

/// Where to resume following a log: a [`Position`] given earlier, or a bare offset in the
/// current file (`inode: None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// The file's inode; `None` for the current file.
    pub inode: Option<u64>,
    /// The byte offset to go on from.
    pub offset: u64,
}

/// How [`Follower::resume`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resumed {
    /// From exactly the position asked for: in the current file, or in the archive it was
    /// rotated to (read to its end before the current file).
    Exact,
    /// That position is in no file still there (rotated away, or the file is now shorter):
    /// from the beginning of the current file.
    Restarted,
}

/// What [`Follower::poll_changes`] found, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Lines completed, and the position right after them.
    Lines {
        /// The lines, oldest first.
        lines: Vec<String>,
        /// Where they end.
        end: Position,
    },
    /// The file was replaced (rotated: `truncated` false) or cut shorter in place
    /// (`truncated` true); what follows comes from the beginning of the new content.
    Reopened {
        /// Cut shorter in place rather than replaced.
        truncated: bool,
        /// The beginning of the new content.
        at: Position,
    },
}

/// The last `n` lines of the file at `path`, decoded lossily (module doc), without line ends.
///
/// # Errors
/// [`Error::LogRead`] when the file cannot be opened or read.
pub fn tail(path: &Path, n: usize) -> Result<Vec<String>, Error> {
    let file = File::open(path).map_err(|e| Error::log_read(path, e))?;
    Follower::after_tail(path, file, n).map(|(lines, _)| lines)
}

/// How much of a log's end [`tail`] reads at most (its last lines are in there: the
/// supervisor cuts lines far shorter).
const TAIL_WINDOW: u64 = 4 * 1024 * 1024;

/// The most [`Follower`] reads in one go: a reader far behind (a resume from the start of a
/// large file, a burst of output) catches up over several polls instead of holding it all.
const READ_CHUNK: u64 = 1024 * 1024;

/// The longest unfinished line a [`Follower`] holds: longer, it is given as a line of its
/// own (the supervisor cuts lines at 64 KiB; a file written by something else may not).
const MAX_PARTIAL: usize = 256 * 1024;

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
        // Only the end of the file is read: the supervisor rotates its logs at 1 MiB by
        // default, but a larger setting (or a file put there by hand) must not make every
        // `tail` read it all.
        let len = file.metadata().map_err(|e| Error::log_read(path, e))?.len();
        let start = len.saturating_sub(TAIL_WINDOW);
        file.seek(SeekFrom::Start(start))
            .map_err(|e| Error::log_read(path, e))?;
        let mut bytes = Vec::new();
        (&mut file)
            .take(len - start)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::log_read(path, e))?;
        let end = start + bytes.len() as u64;
        let text = String::from_utf8_lossy(&bytes);
        // Started inside the file: its first line is a piece of one.
        let text = match (start > 0, text.split_once('\n')) {
            (true, Some((_, rest))) => rest,
            (true, None) => "",
            (false, _) => &text,
        };
        let all: Vec<&str> = text.lines().collect();
        let lines = all[all.len().saturating_sub(n)..]
            .iter()
            .map(|line| (*line).to_owned())
            .collect();
        let follower = Self::at(path, file, end)?;
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

    /// Follows `path` (whose current file is `current`, already open) from `at`: in the
    /// current file, or in its newest archive (`<path>.1`, the supervisor's rotation) when
    /// `at.inode` is that one's — its rest comes first, then the current file, so a reader that
    /// stopped before a rotation loses nothing. A position in no file still there, or past a
    /// file's end, restarts from the beginning of the current file ([`Resumed::Restarted`]).
    ///
    /// # Errors
    /// [`Error::LogRead`] when a file cannot be inspected.
    pub fn resume(path: &Path, current: File, at: Resume) -> Result<(Self, Resumed), Error> {
        let size_of = |file: &File| {
            file.metadata()
                .map(|m| (m.ino(), m.len()))
                .map_err(|e| Error::log_read(path, e))
        };
        let (current_inode, current_len) = size_of(&current)?;
        let (file, len) = match at.inode {
            None => (current, current_len),
            Some(inode) if inode == current_inode => (current, current_len),
            Some(inode) => match Self::archive(path, inode) {
                Some(found) => found,
                // Rotated more than once (or never this log's): only the current file is left.
                None => return Self::at(path, current, 0).map(|f| (f, Resumed::Restarted)),
            },
        };
        if at.offset > len {
            // Cut shorter since (or an offset it never had): what is there now is new.
            let current = File::open(path).map_err(|e| Error::log_read(path, e))?;
            return Self::at(path, current, 0).map(|f| (f, Resumed::Restarted));
        }
        Self::at(path, file, at.offset).map(|f| (f, Resumed::Exact))
    }

    /// The newest archive of `path` (`<path>.1`) if it is the file with `inode`, and its size.
    fn archive(path: &Path, inode: u64) -> Option<(File, u64)> {
        let mut name = path.as_os_str().to_owned();
        name.push(".1");
        let file = File::open(PathBuf::from(name)).ok()?;
        let meta = file.metadata().ok()?;
        (meta.ino() == inode).then_some((file, meta.len()))
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where this follower stands: after the last complete line it gave. (Not `position`:
    /// that is [`Iterator::position`].)
    pub fn reached(&self) -> Position {
        Position {
            inode: self.inode,
            offset: self.pos - self.partial.len() as u64,
        }
    }

    /// The lines completed since the last call, oldest first; empty when there are none.
    /// A rotated file is read to its end before the new one is opened; a missing file (in the
    /// middle of a rotation) is waited for.
    ///
    /// # Errors
    /// [`Error::LogRead`] when the file cannot be read or the new one opened.
    pub fn poll(&mut self) -> Result<Vec<String>, Error> {
        let mut lines: Vec<String> = self.ready.drain(..).collect();
        for change in self.poll_changes()? {
            if let Change::Lines { lines: more, .. } = change {
                lines.extend(more);
            }
        }
        Ok(lines)
    }

    /// As [`Follower::poll`], with where each batch of lines ends and where the file was
    /// rotated or truncated (for a reader that must resume exactly, such as an event stream).
    /// Empty when nothing changed.
    ///
    /// # Errors
    /// [`Error::LogRead`] when the file cannot be read or the new one opened.
    pub fn poll_changes(&mut self) -> Result<Vec<Change>, Error> {
        let mut changes = Vec::new();
        if let Ok(meta) = std::fs::metadata(&self.path) {
            let replaced = meta.ino() != self.inode;
            if replaced || meta.len() < self.pos {
                let mut lines = Vec::new();
                if replaced {
                    // What was written before the rename is still in the old file: all of it
                    // is given before the new file is opened, a chunk per poll.
                    if !self.read_appended(&mut lines)? {
                        changes.extend(self.lines_change(lines));
                        return Ok(changes);
                    }
                }
                self.flush_partial(&mut lines);
                changes.extend(self.lines_change(lines));
                let file = File::open(&self.path).map_err(|e| self.error(e))?;
                self.inode = file.metadata().map_err(|e| self.error(e))?.ino();
                self.file = file;
                self.pos = 0;
                changes.push(Change::Reopened {
                    truncated: !replaced,
                    at: self.reached(),
                });
            }
        }
        let mut lines = Vec::new();
        self.read_appended(&mut lines)?;
        changes.extend(self.lines_change(lines));
        Ok(changes)
    }

    /// `lines` as a change ending where this follower now stands; `None` when there are none.
    fn lines_change(&self, lines: Vec<String>) -> Option<Change> {
        (!lines.is_empty()).then(|| Change::Lines {
            lines,
            end: self.reached(),
        })
    }

    /// Reads what was appended to the current file since `pos`, at most [`READ_CHUNK`];
    /// complete lines go to `lines`. Whether it read to the file's end.
    fn read_appended(&mut self, lines: &mut Vec<String>) -> Result<bool, Error> {
        self.file
            .seek(SeekFrom::Start(self.pos))
            .map_err(|e| self.error(e))?;
        let mut chunk = Vec::new();
        (&mut self.file)
            .take(READ_CHUNK)
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
        if self.partial.len() > MAX_PARTIAL {
            self.flush_partial(lines);
        }
        Ok((chunk.len() as u64) < READ_CHUNK)
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
    fn tail_reads_only_the_end_of_a_big_log_and_follows_from_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("current");
        // Larger than the window: 6 MiB of numbered lines.
        let mut text = String::new();
        let mut i = 0;
        while text.len() < 6 * 1024 * 1024 {
            text.push_str(&format!("line {i:08} {}\n", "x".repeat(100)));
            i += 1;
        }
        std::fs::write(&path, &text).unwrap();
        let all: Vec<&str> = text.lines().collect();
        let last: Vec<String> = all[all.len() - 3..]
            .iter()
            .map(|l| (*l).to_owned())
            .collect();
        assert_eq!(tail(&path, 3).unwrap(), last);
        // More lines than the window holds: only whole lines from inside it, the last ones.
        let many = tail(&path, 1_000_000).unwrap();
        assert!(many.len() < i, "not the whole file");
        assert!(
            many.iter().all(|l| l.starts_with("line ")),
            "no piece of a line"
        );
        assert_eq!(many.last(), last.last());
        // A follower started there gives what is appended next, nothing before.
        let file = std::fs::File::open(&path).unwrap();
        let (_, mut follower) = Follower::after_tail(&path, file, 3).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"appended\n")
            .unwrap();
        assert_eq!(follower.poll().unwrap(), ["appended"]);
    }

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
        for bad in [
            "",
            "../etc",
            "a/b",
            ".hidden",
            "a\0b",
            "gateway-",
            "gateway-..",
            "gateway-.x",
        ] {
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

    #[test]
    fn a_follower_far_behind_catches_up_a_chunk_at_a_time_losing_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("current");
        fs::write(&path, "").unwrap();
        let mut follower = Follower::from_end(&path).unwrap();
        // 3.5 MiB of numbered lines, then a rotation with 1.5 MiB of them still unread.
        let line = |i: usize| format!("{i:08} {}\n", "x".repeat(1015));
        let total = 3584;
        let text: String = (0..total).map(line).collect();
        append(&path, text.as_bytes());
        let mut seen = Vec::new();
        for _ in 0..2 {
            let got = follower.poll().unwrap();
            let bytes: usize = got.iter().map(|l| l.len() + 1).sum();
            assert!(bytes as u64 <= READ_CHUNK, "one poll read {bytes} bytes");
            seen.extend(got);
        }
        fs::rename(&path, dir.path().join("current.1")).unwrap();
        fs::write(&path, "first of new\n").unwrap();
        let mut polls = 0;
        while seen.last().map(String::as_str) != Some("first of new") {
            seen.extend(follower.poll().unwrap());
            polls += 1;
            assert!(polls < 10, "never reached the new file");
        }
        assert_eq!(seen.len(), total + 1);
        for (i, l) in seen[..total].iter().enumerate() {
            assert_eq!(format!("{l}\n"), line(i), "line {i}");
        }
        // A line that never ends is given in pieces, not held whole.
        append(&path, &vec![b'y'; 3 * MAX_PARTIAL]);
        let pieces: Vec<String> = (0..3).flat_map(|_| follower.poll().unwrap()).collect();
        assert!(
            !pieces.is_empty(),
            "an unfinished line over the limit is given"
        );
        assert!(
            pieces
                .iter()
                .all(|p| p.len() <= READ_CHUNK as usize + MAX_PARTIAL)
        );
    }

    fn append(path: &Path, bytes: &[u8]) {
        fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(bytes)
            .unwrap();
    }

    #[test]
    fn services_with_logs_are_found_on_disk_by_their_service_names() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        assert!(services_with_logs(home).is_empty());
        for d in [
            "logs/ticker",
            "logs/gateways/work",
            "logs/empty",
            "logs/.hidden",
        ] {
            fs::create_dir_all(home.join(d)).unwrap();
        }
        for f in [
            "logs/ticker/current",
            "logs/gateways/work/current",
            "logs/.hidden/current",
        ] {
            fs::write(home.join(f), "x\n").unwrap();
        }
        assert_eq!(services_with_logs(home), ["gateway-work", "ticker"]);
    }

    #[test]
    fn resuming_at_a_position_gives_exactly_what_follows_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("current");
        fs::write(&path, "a\nb\n").unwrap();
        let (_, mut first) = Follower::after_tail(&path, File::open(&path).unwrap(), 5).unwrap();
        append(&path, b"c\nunfin");
        assert_eq!(first.poll().unwrap(), ["c"]);
        let at = first.reached();
        assert_eq!(at.offset, 6, "after `c`, not after the unfinished line");
        append(&path, b"ished\nd\n");
        for inode in [Some(at.inode), None] {
            let resume = Resume {
                inode,
                offset: at.offset,
            };
            let (mut again, how) =
                Follower::resume(&path, File::open(&path).unwrap(), resume).unwrap();
            assert_eq!(how, Resumed::Exact);
            assert_eq!(again.poll().unwrap(), ["unfinished", "d"]);
        }
    }

    #[test]
    fn resuming_across_a_rotation_reads_the_archive_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("current");
        fs::write(&path, "a\nb\n").unwrap();
        let inode = fs::metadata(&path).unwrap().ino();
        append(&path, b"c\n");
        fs::rename(&path, dir.path().join("current.1")).unwrap();
        fs::write(&path, "d\n").unwrap();
        let resume = Resume {
            inode: Some(inode),
            offset: 4,
        };
        let (mut f, how) = Follower::resume(&path, File::open(&path).unwrap(), resume).unwrap();
        assert_eq!(how, Resumed::Exact);
        let changes = f.poll_changes().unwrap();
        let new_inode = fs::metadata(&path).unwrap().ino();
        assert_eq!(
            changes,
            [
                Change::Lines {
                    lines: vec!["c".into()],
                    end: Position { inode, offset: 6 }
                },
                Change::Reopened {
                    truncated: false,
                    at: Position {
                        inode: new_inode,
                        offset: 0
                    }
                },
                Change::Lines {
                    lines: vec!["d".into()],
                    end: Position {
                        inode: new_inode,
                        offset: 2
                    }
                },
            ]
        );
        assert!(f.poll_changes().unwrap().is_empty());
    }

    #[test]
    fn a_position_in_no_file_left_restarts_from_the_beginning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("current");
        fs::write(&path, "new\n").unwrap();
        let inode = fs::metadata(&path).unwrap().ino();
        let cases = [
            Resume {
                inode: Some(inode),
                offset: 99,
            },
            Resume {
                inode: None,
                offset: 99,
            },
            Resume {
                inode: Some(inode + 12345),
                offset: 1,
            },
        ];
        for resume in cases {
            let (mut f, how) = Follower::resume(&path, File::open(&path).unwrap(), resume).unwrap();
            assert_eq!(how, Resumed::Restarted, "{resume:?}");
            assert_eq!(f.poll().unwrap(), ["new"], "{resume:?}");
        }
    }

    #[test]
    fn truncation_is_a_change_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("current");
        fs::write(&path, "long line one\n").unwrap();
        let mut f = Follower::from_end(&path).unwrap();
        fs::write(&path, "x\n").unwrap();
        let inode = fs::metadata(&path).unwrap().ino();
        assert_eq!(
            f.poll_changes().unwrap(),
            [
                Change::Reopened {
                    truncated: true,
                    at: Position { inode, offset: 0 }
                },
                Change::Lines {
                    lines: vec!["x".into()],
                    end: Position { inode, offset: 2 }
                },
            ]
        );
    }
}
