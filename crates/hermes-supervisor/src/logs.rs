//! Service output capture: [`LineBuffer`] turns pipe reads into lines, [`LogFile`] writes
//! timestamped lines to `<dir>/current` with size rotation.
//!
//! Words defined here:
//! * **current** — the live log file; **archives** are `current.1` (newest) .. `current.N`.
//! * **over-long line** — a line longer than the line limit: its head is kept, marked
//!   `[truncated]`, and the rest is dropped and counted until the next newline.
//! * **dropped lines** — lines a full disk (or any write error) refused; counted and reported
//!   in the file as soon as writing works again. Nothing here ever blocks or retries in a loop.
//!
//! The log directory usually belongs to a less privileged user than the supervisor (PID 1 is
//! root, the data volume is the service user's). So the directory is opened with
//! [`SafeDir`] (no symlink that user planted is followed, at any component), `current` is
//! opened through that directory's descriptor (a planted symlink, FIFO or hard link is
//! replaced, never written through), rotation renames within it, and what is created is given
//! to the service's own user ([`LogFile::owned_by`]).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hermes_privilege::{Owner, SafeDir};

/// Mode of new log directories (before the umask).
const DIR_MODE: u32 = 0o755;
/// Mode of new log files: service output can hold secrets, so not world-readable.
const FILE_MODE: u32 = 0o640;

/// Size rotation settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Rotate when `current` would grow past this many bytes.
    pub max_bytes: u64,
    /// Archives kept (`current.1` .. `current.N`); 0 keeps none.
    pub archives: u32,
}

impl Default for Rotation {
    fn default() -> Self {
        Self {
            max_bytes: 1024 * 1024,
            archives: 10,
        }
    }
}

/// A piece of output produced by [`LineBuffer::push`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Chunk {
    /// A complete line, without its newline.
    Line(Vec<u8>),
    /// The first `max_line` bytes of an over-long line.
    Truncated(Vec<u8>),
    /// The rest of an over-long line was dropped: this many bytes.
    Dropped(u64),
}

/// Splits a byte stream into lines with a hard per-line limit, so memory stays bounded
/// whatever the service writes.
#[derive(Debug)]
pub struct LineBuffer {
    buf: Vec<u8>,
    max_line: usize,
    discarding: Option<u64>,
}

impl LineBuffer {
    /// A buffer that keeps at most `max_line` bytes of any line.
    pub fn new(max_line: usize) -> Self {
        Self {
            buf: Vec::new(),
            max_line: max_line.max(1),
            discarding: None,
        }
    }

    /// Feeds bytes; returns the chunks completed by them.
    pub fn push(&mut self, mut data: &[u8]) -> Vec<Chunk> {
        let mut out = Vec::new();
        while !data.is_empty() {
            let nl = data.iter().position(|&b| b == b'\n');
            if let Some(n) = self.discarding.as_mut() {
                match nl {
                    Some(p) => {
                        *n += p as u64;
                        out.push(Chunk::Dropped(*n));
                        self.discarding = None;
                        data = &data[p + 1..];
                    }
                    None => {
                        *n += data.len() as u64;
                        data = &[];
                    }
                }
                continue;
            }
            let room = self.max_line - self.buf.len();
            match nl {
                Some(p) if p <= room => {
                    self.buf.extend_from_slice(&data[..p]);
                    out.push(Chunk::Line(std::mem::take(&mut self.buf)));
                    data = &data[p + 1..];
                }
                _ if data.len() <= room => {
                    self.buf.extend_from_slice(data);
                    data = &[];
                }
                _ => {
                    self.buf.extend_from_slice(&data[..room]);
                    out.push(Chunk::Truncated(std::mem::take(&mut self.buf)));
                    self.discarding = Some(0);
                    data = &data[room..];
                }
            }
        }
        out
    }

    /// End of stream: whatever is buffered becomes a last line.
    pub fn finish(&mut self) -> Vec<Chunk> {
        let mut out = Vec::new();
        if let Some(n) = self.discarding.take() {
            out.push(Chunk::Dropped(n));
        } else if !self.buf.is_empty() {
            out.push(Chunk::Line(std::mem::take(&mut self.buf)));
        }
        out
    }
}

/// A rotated log file for one service. Errors never escape: they are counted and reported in
/// the log once it works again (see the module doc).
#[derive(Debug)]
pub struct LogFile {
    dir: PathBuf,
    owner: Option<Owner>,
    /// The open directory and `current` in it; `None` until the first write and after an error.
    open: Option<(SafeDir, File)>,
    size: u64,
    rotation: Rotation,
    dropped: u64,
    last_error: Option<String>,
    retry_at: Option<Instant>,
}

impl LogFile {
    /// A log in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>, rotation: Rotation) -> Self {
        Self {
            dir: dir.into(),
            owner: None,
            open: None,
            size: 0,
            rotation,
            dropped: 0,
            last_error: None,
            retry_at: None,
        }
    }

    /// Gives what this log creates (directories, `current`, archives) to `owner`; used when
    /// the supervisor is root and the service runs as someone else.
    pub fn owned_by(mut self, owner: Option<Owner>) -> Self {
        self.owner = owner;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Lines lost to write errors and not yet reported.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    fn open(&mut self) -> std::io::Result<()> {
        let dir = SafeDir::create_all(&self.dir, DIR_MODE, self.owner)?;
        let (file, replaced) = dir.open_append("current", FILE_MODE, self.owner)?;
        self.size = file.metadata()?.len();
        self.open = Some((dir, file));
        if replaced {
            // Said in the log itself, where whoever planted it (or an operator) will look.
            let note = format!(
                "{} [hermes] replaced `current`: it was not a regular file of its own \
                 (a symlink, FIFO or hard link is never written through)\n",
                timestamp()
            );
            self.raw_write(note.as_bytes())?;
        }
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let Some((dir, file)) = self.open.take() else {
            return self.open();
        };
        drop(file);
        let n = self.rotation.archives;
        let archive = |i: u32| format!("current.{i}");
        if n == 0 {
            dir.remove("current")?;
        } else {
            dir.remove(&archive(n))?;
            for i in (1..n).rev() {
                if dir.contains(&archive(i)) {
                    dir.rename(&archive(i), &archive(i + 1))?;
                }
            }
            dir.rename("current", &archive(1))?;
        }
        self.open()
    }

    /// Writes one already-formatted line (it must end with `\n`).
    pub fn write_line(&mut self, line: &[u8]) {
        if self.open.is_none() {
            // An unwritable directory must not cost a syscall storm: retry once a second.
            if self.retry_at.is_some_and(|t| Instant::now() < t) {
                self.dropped += 1;
                return;
            }
            if let Err(e) = self.open() {
                self.fail(e);
                return;
            }
        }
        if self.size > 0
            && self.size + line.len() as u64 > self.rotation.max_bytes
            && let Err(e) = self.rotate()
        {
            self.fail(e);
            return;
        }
        if self.dropped > 0 {
            let note = format!(
                "{} [hermes] dropped {} line(s) of output: {}\n",
                timestamp(),
                self.dropped,
                self.last_error.as_deref().unwrap_or("write error")
            );
            if self.raw_write(note.as_bytes()).is_ok() {
                self.dropped = 0;
                self.last_error = None;
            }
        }
        if let Err(e) = self.raw_write(line) {
            self.fail(e);
        }
    }

    fn raw_write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let Some((_, f)) = self.open.as_mut() else {
            return Err(std::io::Error::other("log file not open"));
        };
        f.write_all(bytes)?;
        self.size += bytes.len() as u64;
        Ok(())
    }

    fn fail(&mut self, e: std::io::Error) {
        self.dropped += 1;
        self.last_error = Some(e.to_string());
        self.open = None;
        self.retry_at = Some(Instant::now() + Duration::from_secs(1));
    }
}

/// UTC RFC 3339 timestamp with milliseconds, as written before each log line.
pub fn timestamp() -> String {
    let now = time::OffsetDateTime::now_utc();
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    now.format(&fmt).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn lines_split_across_reads() {
        let mut b = LineBuffer::new(100);
        assert_eq!(b.push(b"hel"), vec![]);
        assert_eq!(b.push(b"lo\nwor"), vec![Chunk::Line(b"hello".to_vec())]);
        assert_eq!(
            b.push(b"ld\n\n"),
            vec![Chunk::Line(b"world".to_vec()), Chunk::Line(vec![])]
        );
        assert_eq!(b.push(b"tail"), vec![]);
        assert_eq!(b.finish(), vec![Chunk::Line(b"tail".to_vec())]);
    }

    #[test]
    fn over_long_line_is_truncated_and_counted() {
        let mut b = LineBuffer::new(4);
        let mut got = b.push(b"abcdefgh");
        got.extend(b.push(b"ij\nok\n"));
        assert_eq!(
            got,
            vec![
                Chunk::Truncated(b"abcd".to_vec()),
                Chunk::Dropped(6),
                Chunk::Line(b"ok".to_vec())
            ]
        );
        // A line of exactly the limit is fine.
        assert_eq!(b.push(b"wxyz\n"), vec![Chunk::Line(b"wxyz".to_vec())]);
    }

    #[test]
    fn rotation_keeps_n_archives() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = LogFile::new(
            dir.path().join("svc"),
            Rotation {
                max_bytes: 100,
                archives: 3,
            },
        );
        for i in 0..50 {
            log.write_line(format!("line {i:03} .........\n").as_bytes());
        }
        let d = dir.path().join("svc");
        assert!(d.join("current").metadata().unwrap().len() <= 100);
        for i in 1..=3 {
            assert!(d.join(format!("current.{i}")).exists());
        }
        assert!(!d.join("current.4").exists());
        let cur = fs::read_to_string(d.join("current")).unwrap();
        assert!(cur.ends_with("line 049 .........\n"));
    }

    #[test]
    fn write_errors_are_counted_then_reported() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("svc");
        fs::write(&blocker, "a file where the directory should be").unwrap();
        let mut log = LogFile::new(&blocker, Rotation::default());
        log.write_line(b"lost\n");
        assert_eq!(log.dropped(), 1);
        fs::remove_file(&blocker).unwrap();
        log.retry_at = None;
        log.write_line(b"kept\n");
        let cur = fs::read_to_string(blocker.join("current")).unwrap();
        assert!(cur.contains("dropped 1 line(s)"), "{cur}");
        assert!(cur.ends_with("kept\n"));
        assert_eq!(log.dropped(), 0);
    }

    #[test]
    fn timestamp_shape() {
        let t = timestamp();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.ends_with('Z'));
    }
}
