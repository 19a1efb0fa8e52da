//! The mirrored output (`[service] line` on the supervisor's stdout) against a reader that does
//! not read: `hermes up | less` paused, a terminal stopped with Ctrl-S, a stalled log driver.
//! Supervision must go on — status answers, crashed services come back, SIGTERM is obeyed —
//! and the lines that did not fit are counted and reported once the reader is back.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use common::{Harness, WAIT, zombie_children};
use hermes_supervisor::{Client, StateName};

/// Bytes waiting in a pipe (`FIONREAD` on its read end).
fn queued(pipe: &File) -> usize {
    let mut n: libc::c_int = 0;
    #[allow(unsafe_code)]
    // SAFETY: FIONREAD writes one c_int through the pointer, which outlives the call; the fd
    // is open for the whole borrow of `pipe`.
    let rc = unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut n) };
    assert_eq!(rc, 0, "FIONREAD: {}", std::io::Error::last_os_error());
    usize::try_from(n).unwrap_or(0)
}

/// The capacity of a pipe (`F_GETPIPE_SZ`).
fn pipe_size(pipe: &File) -> usize {
    #[allow(unsafe_code)]
    // SAFETY: F_GETPIPE_SZ takes no argument and only reads the fd, open for the borrow.
    let n = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_GETPIPE_SZ) };
    assert!(n > 0, "F_GETPIPE_SZ: {}", std::io::Error::last_os_error());
    usize::try_from(n).unwrap_or(0)
}

/// Reads `pipe` until `needle` shows up (or [`WAIT`] passes); gives the pipe back with what
/// was read, so the caller can stop reading again.
fn read_until(mut pipe: File, needle: &'static str) -> (File, String) {
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let t0 = Instant::now();
        while t0.elapsed() < WAIT && !String::from_utf8_lossy(&text).contains(needle) {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
            }
            // Keep only the tail: the flood is large, the note is one line.
            if text.len() > 4 * 1024 * 1024 {
                text.drain(..text.len() - 64 * 1024);
            }
        }
        (pipe, String::from_utf8_lossy(&text).into_owned())
    });
    reader.join().expect("reader thread")
}

#[test]
fn an_unread_stdout_never_stalls_supervision() {
    let mut h = Harness::start_unread(
        r#"
services:
  flood:
    command: "exec yes 'flood ..................................................................................................................................................................................'"
  victim:
    command: "exec sleep 600"
"#,
        &["--settle-ms", "100"],
    );
    let pipe = h.stdout_pipe.take().expect("the unread pipe");
    // Positive signal that the reader is stalled: the pipe is full. A non-blocking write of at
    // most PIPE_BUF bytes goes in whole or not at all, so "full" is less than PIPE_BUF free,
    // not less than one line (a batch of lines that does not fit leaves up to PIPE_BUF - 1
    // bytes unused). Its size is asked, not assumed (64 KiB by default; one page when the
    // kernel's per-user pipe budget is spent by everything else running at the same time).
    let room = pipe_size(&pipe).saturating_sub(libc::PIPE_BUF);
    h.wait_for(&format!("the stdout pipe to fill to {room} bytes"), || {
        queued(&pipe) >= room
    });

    // Status still answers, at once, over and over.
    for _ in 0..10 {
        let t = Instant::now();
        let rows =
            Client::connect(&h.runtime, Duration::from_secs(5)).and_then(|mut c| c.status(None));
        let took = t.elapsed();
        assert!(rows.is_ok(), "status failed after {took:?}: {rows:?}");
        assert!(took < Duration::from_secs(1), "status took {took:?}");
    }

    // A killed service is reaped (no zombie) and replaced.
    let old = h.wait_state("victim", StateName::Up).pid.expect("a pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(old),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    h.wait_for("the victim to be replaced", || {
        h.status("victim")
            .is_ok_and(|s| s.pid.is_some_and(|p| p != old))
    });
    h.wait_for("no zombie under the supervisor", || {
        !zombie_children(h.pid()).contains(&old)
    });

    // The reader comes back: what did not fit was counted and is reported.
    let (pipe, text) = read_until(pipe, " line(s) of mirrored output");
    let note = text
        .lines()
        .find(|l| l.contains("[hermes] dropped ") && l.ends_with(" line(s) of mirrored output"));
    let dropped: u64 = note
        .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no drop report in the tail: {}",
                &text[text.len().saturating_sub(2000)..]
            )
        });
    assert!(dropped > 0, "{note:?}");
    assert!(text.contains("[flood] flood ...."), "mirroring resumed");

    // Stalled again: SIGTERM still ends the supervisor promptly.
    h.wait_for("the stdout pipe to fill again", || {
        queued(&pipe) >= 60 * 1024
    });
    let t = Instant::now();
    assert_eq!(h.terminate(), 0);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "SIGTERM took {:?}",
        t.elapsed()
    );
    drop(pipe);
}
