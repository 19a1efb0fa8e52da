//! The mirrored output: every service line copied to the supervisor's stdout as
//! `[service] line`, so `docker logs` and `hermes up` show everything — without the loop ever
//! waiting for whoever reads it.
//!
//! Words defined here:
//! * **mirror buffer** — whole lines waiting for the reader, at most [`MIRROR_BUFFER`] bytes.
//!   The loop writes from it when `poll` says the output is writable and never waits.
//! * **dropped lines** — lines that did not fit in the buffer, or were in it when the output
//!   failed (the reader went away, the terminal hung up). They are counted and reported as
//!   `[hermes] dropped N line(s) of mirrored output` as soon as there is room again. The
//!   service's log file has every line regardless.
//!
//! # Why a private open file description
//!
//! A write to a pipe nobody reads (`hermes up | less`, paused), to a terminal stopped with
//! Ctrl-S, or to a stalled log driver blocks — so the descriptor must be non-blocking. But
//! `O_NONBLOCK` is a flag of the *open file description*, not of the descriptor: setting it on
//! our stdout (or on a `dup` of it, which shares the description) would also make the writes of
//! every other process on that description fail with `EAGAIN` — PID 1's main program inherits
//! the very same terminal. So [`Mirror::stdout`] takes, by what the output is:
//!
//! * a pipe, FIFO or terminal: it opens `/proc/self/fd/1` again, which creates a *new* open
//!   file description of the same pipe or terminal, and makes only that one non-blocking
//!   (`O_NOCTTY`, so that opening a terminal can never make it our controlling terminal);
//! * a socket: a `dup`, written with `send(MSG_DONTWAIT)`, which is non-blocking per call and
//!   changes no flag at all;
//! * a regular file or block device: a `dup` (sharing the offset keeps the writes of everyone
//!   appending to the same file in order); a file never waits for a reader;
//! * anything else, or when the reopen fails (no `/proc`, or the terminal belongs to another
//!   user): a `dup` written only when `poll` says it is writable, at most `PIPE_BUF` bytes at a
//!   time. For a pipe with no other writer that cannot block; otherwise it is best effort, the
//!   one case where a stalled reader can still delay the loop.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{ErrorKind, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{MsgFlags, send};

/// Most bytes of mirrored output waiting for a slow reader.
pub const MIRROR_BUFFER: usize = 256 * 1024;
/// After the output failed (the reader went away, the terminal hung up): lines are dropped and
/// counted for this long before writing is tried again, so a dead output costs no syscalls.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Writable-but-no-progress wake-ups tolerated before the output is treated as failed: a
/// descriptor that `poll` keeps calling writable while every write says `EAGAIN` would
/// otherwise spin the loop.
const MAX_IDLE_WAKES: u32 = 3;
/// The largest write a pipe performs atomically (and, once `poll` said writable, without
/// blocking when nobody else writes to it).
const PIPE_BUF: usize = 4096;

/// Where mirrored output goes; see the module doc. Pass it (or `&mut std::io::stdout()`, which
/// becomes [`Mirror::stdout`]) to [`crate::Supervisor::run`].
pub struct Mirror<'a> {
    sink: Sink<'a>,
}

impl std::fmt::Debug for Mirror<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.sink {
            Sink::Fd { how, .. } => match how {
                How::Write => "fd (write)",
                How::Send => "fd (send)",
                How::Guarded => "fd (guarded)",
            },
            Sink::Writer(_) => "writer",
            Sink::Discard => "discard",
        };
        f.debug_struct("Mirror").field("sink", &kind).finish()
    }
}

enum Sink<'a> {
    /// A descriptor of our own, written without waiting (see [`How`]).
    Fd { fd: OwnedFd, how: How },
    /// A caller's writer, written at each wake-up: it may block, which is the caller's choice.
    Writer(&'a mut dyn Write),
    /// Nowhere (the output could not be opened at all).
    Discard,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// `write(2)` on a private non-blocking description, or on a regular file.
    Write,
    /// `send(2)` with `MSG_DONTWAIT` on a socket.
    Send,
    /// `write(2)` of at most [`PIPE_BUF`] bytes, only when `poll` says writable.
    Guarded,
}

impl<'a> Mirror<'a> {
    /// The process's stdout, written without blocking (see the module doc for how).
    /// Whatever `std::io::stdout()` still buffers is flushed first, to keep the order.
    pub fn stdout() -> Self {
        let stdout = std::io::stdout();
        let _ = stdout.lock().flush();
        Self::fd(stdout.as_fd())
    }

    /// Any output descriptor (a pipe, terminal, socket or file), written without blocking
    /// and without changing the flags other holders of `fd` see. `fd` itself stays the
    /// caller's.
    pub fn fd(fd: BorrowedFd<'_>) -> Self {
        let sink = match private_nonblocking(fd) {
            Ok((fd, how)) => Sink::Fd { fd, how },
            Err(_) => Sink::Discard,
        };
        Self { sink }
    }

    /// Mirrored output is thrown away.
    pub fn discard() -> Self {
        Self {
            sink: Sink::Discard,
        }
    }

    /// A caller's writer. It is written once per wake-up of the loop, from the bounded
    /// buffer; a writer that blocks blocks the loop, so prefer [`Mirror::stdout`] or
    /// [`Mirror::fd`] for anything a person or a log driver reads.
    pub fn writer(w: &'a mut dyn Write) -> Self {
        Self {
            sink: Sink::Writer(w),
        }
    }
}

/// `&mut std::io::stdout()` means "the process's stdout": it is written through
/// [`Mirror::stdout`], never blocking.
impl<'a> From<&'a mut std::io::Stdout> for Mirror<'a> {
    fn from(_: &'a mut std::io::Stdout) -> Self {
        Mirror::stdout()
    }
}

impl<'a, 'b: 'a> From<&'a mut (dyn Write + 'b)> for Mirror<'a> {
    fn from(w: &'a mut (dyn Write + 'b)) -> Self {
        Mirror::writer(w)
    }
}

/// A description of what `fd` refers to that we may write without blocking, and how.
fn private_nonblocking(fd: BorrowedFd<'_>) -> std::io::Result<(OwnedFd, How)> {
    let dup = fd.try_clone_to_owned()?; // F_DUPFD_CLOEXEC
    let meta = File::from(dup.try_clone()?).metadata()?;
    let kind = meta.mode() & libc::S_IFMT;
    if kind == libc::S_IFREG || kind == libc::S_IFBLK {
        return Ok((dup, How::Write));
    }
    if kind == libc::S_IFSOCK {
        return Ok((dup, How::Send));
    }
    let reopened = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    match reopened {
        // The same pipe or terminal (not whatever a path might name by now).
        Ok(f)
            if f.metadata().is_ok_and(|m| {
                m.dev() == meta.dev() && m.ino() == meta.ino() && m.rdev() == meta.rdev()
            }) =>
        {
            Ok((f.into(), How::Write))
        }
        _ => Ok((dup, How::Guarded)),
    }
}

/// The mirror buffer and its accounting, over a [`Mirror`]; the loop's only way to print.
pub(crate) struct MirrorOut<'a> {
    sink: Sink<'a>,
    buf: VecDeque<u8>,
    cap: usize,
    /// Lines lost and not yet reported.
    dropped: u64,
    /// Set after a write error: lines are dropped until then.
    retry_at: Option<Instant>,
    /// Consecutive flushes after a writable `poll` that wrote nothing.
    idle_wakes: u32,
}

impl<'a> MirrorOut<'a> {
    pub(crate) fn new(mirror: Mirror<'a>) -> Self {
        Self::with_capacity(mirror, MIRROR_BUFFER)
    }

    fn with_capacity(mirror: Mirror<'a>, cap: usize) -> Self {
        Self {
            sink: mirror.sink,
            buf: VecDeque::new(),
            cap,
            dropped: 0,
            retry_at: None,
            idle_wakes: 0,
        }
    }

    /// Queues `[prefix] line\n`, or counts it as dropped when it does not fit. Never writes.
    pub(crate) fn line(&mut self, prefix: &str, line: &[u8], now: Instant) {
        if matches!(self.sink, Sink::Discard) {
            return;
        }
        if self.retry_at.is_some_and(|t| now < t) {
            self.dropped += 1;
            return;
        }
        self.retry_at = None;
        self.note_dropped();
        let len = prefix.len() + line.len() + 4;
        if self.dropped > 0 || self.buf.len() + len > self.cap {
            // Lines stay in order: none may overtake the report of those before it.
            self.dropped += 1;
            return;
        }
        self.buf.push_back(b'[');
        self.buf.extend(prefix.as_bytes());
        self.buf.extend(b"] ");
        self.buf.extend(line);
        self.buf.push_back(b'\n');
    }

    /// Queues the report of dropped lines once it fits.
    fn note_dropped(&mut self) {
        if self.dropped == 0 {
            return;
        }
        let note = format!(
            "[hermes] dropped {} line(s) of mirrored output\n",
            self.dropped
        );
        if self.buf.len() + note.len() <= self.cap {
            self.buf.extend(note.as_bytes());
            self.dropped = 0;
        }
    }

    /// The descriptor to watch for `POLLOUT`: only while something waits to be written.
    pub(crate) fn poll_fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.sink {
            Sink::Fd { fd, .. } if !self.buf.is_empty() && self.retry_at.is_none() => {
                Some(fd.as_fd())
            }
            _ => None,
        }
    }

    /// Writes what the output takes right now. `woken` says `poll` reported the descriptor.
    pub(crate) fn flush(&mut self, now: Instant, woken: bool) {
        if self.retry_at.is_some_and(|t| now < t) {
            return;
        }
        self.retry_at = None;
        let before = self.buf.len();
        // Twice: the room a write makes may let the drop report in, which is written too.
        for _ in 0..2 {
            self.note_dropped();
            if self.write_some().is_err() {
                self.fail(now);
                return;
            }
        }
        if let Sink::Writer(w) = &mut self.sink
            && w.flush()
                .is_err_and(|e| !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted))
        {
            self.fail(now);
            return;
        }
        if woken && before > 0 && self.buf.len() == before {
            self.idle_wakes += 1;
            if self.idle_wakes >= MAX_IDLE_WAKES {
                self.fail(now);
            }
        } else {
            self.idle_wakes = 0;
        }
    }

    /// Writes until done or the output would block; `Err` for a failed output.
    fn write_some(&mut self) -> std::io::Result<()> {
        while !self.buf.is_empty() {
            let chunk = self.buf.as_slices().0;
            let written = match &mut self.sink {
                Sink::Discard => chunk.len(),
                Sink::Writer(w) => match w.write(chunk) {
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                    Err(e) => return Err(e),
                },
                Sink::Fd { fd, how } => {
                    let r = match how {
                        How::Write => nix::unistd::write(&*fd, chunk),
                        How::Send => send(
                            fd.as_raw_fd(),
                            chunk,
                            MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
                        ),
                        How::Guarded => {
                            let mut pfd = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
                            match poll(&mut pfd, PollTimeout::ZERO) {
                                Ok(0) => return Ok(()),
                                Ok(_) => {
                                    nix::unistd::write(&*fd, &chunk[..chunk.len().min(PIPE_BUF)])
                                }
                                Err(e) => Err(e),
                            }
                        }
                    };
                    match r {
                        Ok(n) => n,
                        Err(Errno::EINTR) => continue,
                        Err(Errno::EAGAIN) => return Ok(()),
                        Err(e) => return Err(e.into()),
                    }
                }
            };
            if written == 0 {
                return Err(std::io::Error::new(ErrorKind::WriteZero, "wrote nothing"));
            }
            self.buf.drain(..written);
        }
        Ok(())
    }

    /// The output failed: what is buffered is lost (and counted); writing resumes after
    /// [`RETRY_AFTER`].
    fn fail(&mut self, now: Instant) {
        // Every queued line ends with a newline (a partly written one included).
        self.dropped += self.buf.iter().filter(|&&b| b == b'\n').count() as u64;
        self.buf.clear();
        self.buf.shrink_to(0);
        self.retry_at = Some(now + RETRY_AFTER);
        self.idle_wakes = 0;
    }

    /// Bounded last flush when the loop ends: waits at most until `deadline` for the reader.
    pub(crate) fn finish(&mut self, deadline: Instant) {
        // One more try even if the output failed less than a second ago.
        self.retry_at = None;
        let mut woken = false;
        loop {
            let now = Instant::now();
            self.flush(now, woken);
            if self.buf.is_empty() && self.dropped == 0 {
                return;
            }
            let Some(fd) = self.poll_fd() else {
                return; // failed, or a writer: nothing to wait for
            };
            let left = deadline.saturating_duration_since(now);
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            if ms == 0 {
                return;
            }
            let mut pfd = [PollFd::new(fd, PollFlags::POLLOUT)];
            match poll(&mut pfd, PollTimeout::from(ms)) {
                Ok(0) => return, // the reader did not come back in time
                Ok(_) => woken = true,
                Err(Errno::EINTR) => {}
                Err(_) => return,
            }
        }
    }

    /// Lines lost and not yet reported (for tests).
    #[cfg(test)]
    fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn pipe() -> (File, OwnedFd) {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        (File::from(r), w)
    }

    fn drain(r: &mut File) -> String {
        nix::fcntl::fcntl(
            &*r,
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn a_full_pipe_drops_and_counts_lines_then_reports_them() {
        let (mut r, w) = pipe();
        let mut out = MirrorOut::with_capacity(Mirror::fd(w.as_fd()), 1024);
        let t = Instant::now();
        let line = [b'x'; 100];
        // Far more than the pipe (64 KiB) and the buffer (1 KiB) hold; nothing blocks.
        for _ in 0..2000 {
            out.line("svc", &line, t);
            out.flush(t, false);
        }
        assert!(out.dropped() > 0);
        assert!(out.buf.len() <= 1024);
        // The reader comes back.
        let mut text = drain(&mut r);
        out.flush(t, true);
        out.line("svc", b"after", t);
        out.flush(t, false);
        text.push_str(&drain(&mut r));
        assert_eq!(out.dropped(), 0, "everything dropped was reported");
        // Every line was either delivered or counted in a report, and nothing came after
        // `after`.
        let delivered = text.lines().filter(|l| l.starts_with("[svc] x")).count() as u64;
        let reported: u64 = text
            .lines()
            .filter_map(|l| l.strip_prefix("[hermes] dropped "))
            .map(|l| {
                l.strip_suffix(" line(s) of mirrored output")
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or_else(|| panic!("bad report: {l}"))
            })
            .sum();
        assert!(reported > 0);
        assert_eq!(delivered + reported, 2000);
        assert_eq!(text.lines().last(), Some("[svc] after"));
        // The original descriptor was never made non-blocking.
        let flags = nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        assert_eq!(
            flags & libc::O_NONBLOCK,
            0,
            "the shared description changed"
        );
    }

    #[test]
    fn a_terminal_gets_a_private_non_blocking_description() {
        let pty = nix::pty::openpty(None, None).unwrap();
        let mut out = MirrorOut::new(Mirror::fd(pty.slave.as_fd()));
        assert!(
            matches!(
                out.sink,
                Sink::Fd {
                    how: How::Write,
                    ..
                }
            ),
            "reopened"
        );
        let flags = nix::fcntl::fcntl(&pty.slave, nix::fcntl::FcntlArg::F_GETFL).unwrap();
        assert_eq!(
            flags & libc::O_NONBLOCK,
            0,
            "the shared description changed"
        );
        let t = Instant::now();
        out.line("svc", b"hello", t);
        out.flush(t, false);
        let mut master = File::from(pty.master);
        let mut buf = [0u8; 64];
        let n = master.read(&mut buf).unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).contains("[svc] hello"));
    }

    #[test]
    fn a_vanished_reader_costs_lines_not_a_spin() {
        let (r, w) = pipe();
        let mut out = MirrorOut::new(Mirror::fd(w.as_fd()));
        drop(r);
        let t = Instant::now();
        out.line("svc", b"one", t);
        out.flush(t, true);
        assert_eq!(out.dropped(), 1, "EPIPE loses the queued line");
        assert!(out.poll_fd().is_none(), "a failed output is not polled");
        out.line("svc", b"two", t + Duration::from_millis(10));
        assert_eq!(out.dropped(), 2);
    }

    #[test]
    fn a_writer_receives_lines_in_order() {
        let mut v: Vec<u8> = Vec::new();
        {
            let mut out = MirrorOut::new(Mirror::writer(&mut v));
            let t = Instant::now();
            out.line("a", b"1", t);
            out.line("b", b"2", t);
            out.flush(t, false);
            out.finish(t);
        }
        assert_eq!(v, b"[a] 1\n[b] 2\n");
    }
}
