//! The passing side: what a supervisor does to hand its sockets to a child.
//!
//! Before the spawn, [`passing_env`] gives the variables that go with the sockets; between
//! fork and exec, [`install`] moves the sockets to fds `3..`. `LISTEN_PID` is the child's own
//! pid, which only the child knows before it execs: the spawner writes it there.

use std::io;
use std::os::fd::RawFd;

use crate::{Error, LISTEN_FDNAMES, LISTEN_FDS, LISTEN_FDS_START, vars};

/// The most sockets [`install`] moves at once: it runs where nothing may allocate, so it
/// keeps its work on the stack.
pub const MAX_PASSED: usize = 16;

/// `LISTEN_FDS` and `LISTEN_FDNAMES` for sockets passed under `names`, in fd order.
pub fn passing_env(names: &[&str]) -> Result<[(&'static str, String); 2], Error> {
    for name in names {
        vars::check_name(name)?;
    }
    Ok([
        (LISTEN_FDS, names.len().to_string()),
        (LISTEN_FDNAMES, names.join(":")),
    ])
}

/// Puts `fds` at `3, 4, …` in that order, without `FD_CLOEXEC`, so they survive the exec.
///
/// For the child between fork and exec (`CommandExt::pre_exec`): it only calls `fcntl`,
/// `dup2` and `close`, which are async-signal-safe, and allocates nothing. A source may
/// already sit in the target range (it is copied out of the way first). What else the child
/// holds at `3..` is replaced: keep those numbers for long-lived fds in the spawner.
pub fn install(fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > MAX_PASSED {
        return Err(io::Error::from_raw_os_error(libc::EMFILE));
    }
    let n = fds.len() as RawFd;
    let above = LISTEN_FDS_START + n;
    let mut copies: [RawFd; MAX_PASSED] = [-1; MAX_PASSED];
    for (copy, &fd) in copies.iter_mut().zip(fds) {
        #[allow(unsafe_code)]
        // SAFETY: F_DUPFD_CLOEXEC only allocates a new number above the target range.
        let moved = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, above) };
        if moved < 0 {
            return Err(io::Error::last_os_error());
        }
        *copy = moved;
    }
    for (target, &copy) in (LISTEN_FDS_START..).zip(&copies[..fds.len()]) {
        #[allow(unsafe_code)]
        // SAFETY: the copy is open (made above) and the target is the protocol's number;
        // `dup2` leaves the target without FD_CLOEXEC.
        let placed = unsafe { libc::dup2(copy, target) };
        #[allow(unsafe_code)]
        // SAFETY: the copy is this function's own fd.
        unsafe {
            libc::close(copy);
        }
        if placed < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    fn inode(fd: RawFd) -> u64 {
        std::fs::metadata(format!("/proc/self/fd/{fd}"))
            .unwrap()
            .ino()
    }

    #[test]
    fn the_variables_name_the_sockets_in_order() {
        let [fds, names] = passing_env(&["api", "metrics"]).unwrap();
        assert_eq!(fds, (LISTEN_FDS, "2".to_string()));
        assert_eq!(names, (LISTEN_FDNAMES, "api:metrics".to_string()));
        assert!(matches!(
            passing_env(&["a:b"]).unwrap_err(),
            Error::BadName { .. }
        ));
    }

    #[test]
    fn the_child_finds_the_sockets_at_3_in_order_even_when_one_sat_there() {
        let api = TcpListener::bind("127.0.0.1:0").unwrap();
        let metrics = TcpListener::bind("127.0.0.1:0").unwrap();
        let api_fd = api.as_raw_fd();
        // `metrics` away from 3 and 4 (in a fresh test process it may sit at 4, where the
        // child puts `api` first): a copy at 100 or above, closed on exec like the original.
        #[allow(unsafe_code)]
        // SAFETY: F_DUPFD_CLOEXEC only allocates a new number for an open fd.
        let metrics_fd = unsafe { libc::fcntl(metrics.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 100) };
        assert!(metrics_fd >= 100, "{}", io::Error::last_os_error());
        #[allow(unsafe_code)]
        // SAFETY: the copy is this test's own fd, owned from here on.
        let _metrics_copy =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(metrics_fd) };
        let (api_ino, metrics_ino) = (inode(api_fd), inode(metrics_fd));
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "stat -L -c %i /proc/self/fd/3 /proc/self/fd/4; \
             [ -e /proc/self/fd/5 ] && echo leaked; true",
        ]);
        #[allow(unsafe_code)]
        // SAFETY: the closure calls only async-signal-safe functions (`dup2`, then `install`).
        unsafe {
            cmd.pre_exec(move || {
                // In the child only: `api` sits at 4, inside the target range, where the
                // second socket goes; it must still end at 3.
                if libc::dup2(api_fd, 4) < 0 {
                    return Err(io::Error::last_os_error());
                }
                install(&[4, metrics_fd])
            });
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(stdout, format!("{api_ino}\n{metrics_ino}\n"));
    }
}
