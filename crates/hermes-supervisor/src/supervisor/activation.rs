//! Handing held sockets to a child the way systemd's socket activation does: the sockets at
//! fds `3, 4, ...`, and `LISTEN_FDS=<n>`, `LISTEN_FDNAMES=<a>:<b>`, `LISTEN_PID=<the child's
//! own pid>` in its environment.
//!
//! `LISTEN_PID` is the hard part: the pid is known only after `fork`, and std builds the
//! child's environment before it. So for a service with sockets the last step in the child is
//! our own `execve`, with an environment prepared before the fork in which only the digits of
//! `LISTEN_PID` are written in the child — no allocation after `fork`. The program is looked
//! up in the child's `PATH` before the fork; one that cannot be found is left to std's own
//! exec, which reports it as for any service.
//!
//! The target fds `3..3+n` must not be std's own error pipe (the child writes a failed
//! `exec`'s errno to it), so while spawning, every free fd in that range is taken by a
//! placeholder in the parent: std's pipes then get higher numbers.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use nix::fcntl::OFlag;

use hermes_listen::{LISTEN_FDNAMES, LISTEN_FDS, LISTEN_FDS_START as FIRST_FD, LISTEN_PID};

/// The variables of the protocol; the supervisor's own (from systemd) never reach a child.
pub(super) const VARS: [&str; 3] = [LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES];

/// Room for `LISTEN_PID=` and any pid.
const PID_ENTRY: usize = "LISTEN_PID=".len() + 20 + 1;

/// Everything the child's last step needs, prepared before the fork.
pub(super) struct ExecImage {
    program: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    _env: Vec<CString>,
    /// `LISTEN_PID=` followed by room for the digits, NUL-terminated.
    pid_entry: Box<[u8; PID_ENTRY]>,
    env_ptrs: Vec<*const libc::c_char>,
    /// The held sockets, in order (the supervisor's close-on-exec copies).
    sources: Vec<RawFd>,
}

// SAFETY: the raw pointers point into buffers this value owns (`_argv`, `_env`,
// `pid_entry`), which never move or change after construction except through `&mut self` in
// the child; std requires `Send + Sync` of a `pre_exec` closure only because it may be called
// from another thread's fork.
#[allow(unsafe_code)]
unsafe impl Send for ExecImage {}
#[allow(unsafe_code)]
unsafe impl Sync for ExecImage {}

impl ExecImage {
    /// The image for `cmd` (its program, arguments and environment changes as std would use
    /// them) handing over `sources` named `names`; `None` when the program cannot be found in
    /// `path` (std's exec then fails and reports it as for any service), or for more sockets
    /// than [`hermes_listen::MAX_PASSED`] or a name the protocol cannot carry (the spec's
    /// validation refuses both).
    pub(super) fn new(
        cmd: &Command,
        path: Option<&str>,
        sources: &[RawFd],
        names: &[String],
    ) -> Option<Self> {
        let program = resolve(cmd.get_program(), path)?;
        let argv: Vec<CString> = std::iter::once(cmd.get_program())
            .chain(cmd.get_args())
            .map(c_string)
            .collect::<Option<_>>()?;
        let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| !VARS.iter().any(|v| OsStr::new(v) == k))
            .collect();
        for (key, value) in cmd.get_envs() {
            env.retain(|(k, _)| k != key);
            if let Some(value) = value {
                env.push((key.to_owned(), value.to_owned()));
            }
        }
        env.retain(|(k, _)| !VARS.iter().any(|v| OsStr::new(v) == k));
        if sources.len() > hermes_listen::MAX_PASSED {
            return None;
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        for (key, value) in hermes_listen::passing_env(&names).ok()? {
            env.push((key.into(), value.into()));
        }
        let env: Vec<CString> = env
            .into_iter()
            .map(|(k, v)| {
                let mut entry = k.into_vec();
                entry.push(b'=');
                entry.extend(v.into_vec());
                CString::new(entry).ok()
            })
            .collect::<Option<_>>()?;
        let mut pid_entry = Box::new([0u8; PID_ENTRY]);
        pid_entry[.."LISTEN_PID=".len()].copy_from_slice(b"LISTEN_PID=");
        let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
        env_ptrs.push(pid_entry.as_ptr().cast());
        env_ptrs.push(std::ptr::null());
        let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        Some(Self {
            program,
            _argv: argv,
            argv_ptrs,
            _env: env,
            pid_entry,
            env_ptrs,
            sources: sources.to_vec(),
        })
    }

    /// In the child, as its last step before `exec`: the sockets to fds `3..`, `LISTEN_PID`,
    /// then `execve`. Returns only with `execve`'s error.
    ///
    /// Async-signal-safe: fcntl, dup2, close, getpid, execve, and writes into buffers made
    /// before the fork.
    pub(super) fn exec(&mut self) -> std::io::Result<()> {
        hermes_listen::install(&self.sources)?;
        write_pid(&mut self.pid_entry[..], std::process::id());
        #[allow(unsafe_code)]
        // SAFETY: every pointer is into a NUL-terminated buffer this value owns, and both
        // arrays end with a null pointer.
        unsafe {
            libc::execve(
                self.program.as_ptr(),
                self.argv_ptrs.as_ptr(),
                self.env_ptrs.as_ptr(),
            );
        }
        Err(std::io::Error::last_os_error())
    }
}

/// Writes `pid` in decimal after the `LISTEN_PID=` prefix of `entry`, then a NUL.
fn write_pid(entry: &mut [u8], pid: u32) {
    let start = "LISTEN_PID=".len();
    let mut digits = [0u8; 10];
    let mut len = 0;
    let mut rest = pid;
    loop {
        digits[len] = b'0' + (rest % 10) as u8;
        len += 1;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for k in 0..len {
        entry[start + k] = digits[len - 1 - k];
    }
    entry[start + len] = 0;
}

fn c_string(s: &OsStr) -> Option<CString> {
    CString::new(s.as_bytes()).ok()
}

/// The program as `execve` needs it: a path as given when it has a `/` (relative to the
/// child's directory, which the child has entered by then), else the first executable file of
/// that name in `path`.
fn resolve(program: &OsStr, path: Option<&str>) -> Option<CString> {
    if program.as_bytes().contains(&b'/') {
        return c_string(program);
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .and_then(|found: PathBuf| c_string(found.as_os_str()))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Placeholders on the free fds of `3..3+n` in the parent while a child is spawned (see the
/// module doc); dropped after the spawn.
pub(super) struct Reserved {
    _placeholders: Vec<OwnedFd>,
}

impl Reserved {
    pub(super) fn range(n: usize) -> Self {
        let mut taken = Vec::new();
        let Ok(null) = nix::fcntl::open(
            "/dev/null",
            OFlag::O_RDONLY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        ) else {
            return Self {
                _placeholders: taken,
            };
        };
        for k in 0..n {
            let target = FIRST_FD + RawFd::try_from(k).unwrap_or(0);
            #[allow(unsafe_code)]
            // SAFETY: F_GETFD only asks whether `target` is open.
            let free = unsafe { libc::fcntl(target, libc::F_GETFD) } < 0;
            if !free {
                continue;
            }
            #[allow(unsafe_code)]
            // SAFETY: `target` is free, so dup3 opens it and the OwnedFd is its only owner.
            unsafe {
                if libc::dup3(null.as_raw_fd(), target, libc::O_CLOEXEC) == target {
                    taken.push(<OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(target));
                }
            }
        }
        Self {
            _placeholders: taken,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_is_written_without_padding() {
        let mut entry = [b'x'; PID_ENTRY];
        entry[..11].copy_from_slice(b"LISTEN_PID=");
        write_pid(&mut entry, 4_194_304);
        assert_eq!(&entry[..19], b"LISTEN_PID=4194304\0");
        write_pid(&mut entry, 7);
        assert_eq!(&entry[..13], b"LISTEN_PID=7\0");
    }

    #[test]
    fn programs_are_found_in_the_childs_path() {
        assert!(resolve(OsStr::new("sh"), Some("/nonexistent:/bin:/usr/bin")).is_some());
        assert!(resolve(OsStr::new("no-such-program-x"), Some("/bin")).is_none());
        assert_eq!(
            resolve(OsStr::new("./run"), None).unwrap().as_bytes(),
            b"./run"
        );
    }
}
