//! Starting a service, and its readiness socket.
//!
//! [`Supervisor::spawn`] builds the command from the spec — arguments, environment, working
//! directory, its own process group — and prepares everything the child needs before `fork`:
//! between `fork` and `exec` the child only makes async-signal-safe calls (reset the signal
//! mask the loop blocked, take the terminal's foreground for PID 1's main program, apply the
//! verified privilege drop, ask for SIGTERM when the supervisor dies). A service's stdout and
//! stderr become non-blocking pipes handed to `capture`; its process group is recorded in the
//! runtime directory ([`crate::groups`]). A spawn that fails is an event with the shell's code
//! (126 not executable, 127 not found), never an error of the loop.
//!
//! Readiness: one datagram socket per service at `<runtime dir>/notify/<service>.sock`, passed
//! as `NOTIFY_SOCKET`. The socket identifies the service, so no credential lookup can race a
//! short-lived sender (such as `systemd-notify`); `READY=1` on it is [`Event::Ready`].

use std::fs::{self, File};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use hermes_privilege::DropPlan;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::unistd::{Pid, Uid};

use super::Supervisor;
use super::capture::Pipe;
use crate::logs::LineBuffer;
use crate::machine::Event;
use crate::mirror::MirrorOut;
use crate::spec::{LogTarget, ServiceSpec};

/// A service's readiness socket.
pub(super) struct Notify {
    pub(super) sock: UnixDatagram,
    pub(super) path: PathBuf,
}

impl Supervisor {
    /// Spawns a service; the returned event says how it went.
    pub(super) fn spawn(&mut self, name: &str, out: &mut MirrorOut<'_>) -> Event {
        let failed = |reason: String| Event::SpawnFailed {
            service: name.to_string(),
            reason,
            code: crate::machine::EXIT_SPAWN_FAILED,
        };
        let Some(spec) = self.machine.spec(name).cloned() else {
            return failed("unknown service".into());
        };
        let Some((prog, args)) = spec.argv.split_first() else {
            return failed("empty command".into());
        };
        let mut cmd = Command::new(prog);
        cmd.args(args).envs(&spec.env).process_group(0);
        if let Some(cwd) = &spec.cwd {
            cmd.current_dir(cwd);
        }
        // The main program (PID 1's CMD) gets the container environment unchanged: it has
        // no readiness protocol to speak, and an extra `NOTIFY_SOCKET` would leak into it.
        let is_main = self.opts.main.as_deref() == Some(name);
        let notify = (!is_main).then(|| self.notify_socket(&spec));
        match notify {
            Some(Ok(p)) => {
                cmd.env("NOTIFY_SOCKET", p);
            }
            Some(Err(e)) => {
                let dir = self.log_dir_for(&spec);
                let msg = format!("[hermes] readiness socket unavailable: {e}");
                self.emit(name, dir.as_deref(), msg.as_bytes(), out);
            }
            None => {}
        }
        #[allow(unsafe_code)]
        // SAFETY: runs between fork and exec and only calls sigprocmask on a stack value.
        unsafe {
            cmd.pre_exec(reset_signal_mask);
        }
        let capture = spec.log != LogTarget::Inherit;
        if capture {
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        }
        // Else (`LogTarget::Inherit`, PID 1's main program) all three are inherited: the TTY.
        if self.opts.foreground_tty && !capture && self.opts.main.as_deref() == Some(name) {
            #[allow(unsafe_code)]
            // SAFETY: runs between fork and exec (after `setpgid`), and only makes raw
            // syscalls (sigprocmask, getpid, tcsetpgrp) on stack data; no allocation, no
            // locks.
            unsafe {
                cmd.pre_exec(take_foreground);
            }
        }
        if let Some(ra) = spec.run_as.clone().filter(|_| Uid::effective().is_root()) {
            let plan = DropPlan::from_ids(ra.uid, ra.gid, ra.groups);
            #[allow(unsafe_code)]
            // SAFETY: runs between fork and exec; `DropPlan::apply` only makes
            // async-signal-safe syscalls on data prepared before the fork, without allocating.
            unsafe {
                cmd.pre_exec(move || plan.apply());
            }
        }
        // Last, after the drop: the kernel clears the parent-death signal when the uid or gid
        // changes, so set before the drop it would be lost for every service run as another
        // user. If the supervisor itself is then killed outright (SIGKILL, OOM), its services
        // get SIGTERM instead of living on as orphans that hold ports and locks.
        let supervisor = nix::unistd::getpid();
        #[allow(unsafe_code)]
        // SAFETY: runs between fork and exec; prctl and getppid are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || parent_death_signal(supervisor));
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                // As a shell: found but not runnable is 126, not found (the program or its
                // `#!` interpreter) is 127.
                let code = match e.raw_os_error() {
                    Some(libc::EACCES | libc::ENOEXEC | libc::EPERM | libc::EISDIR) => {
                        crate::machine::EXIT_NOT_EXECUTABLE
                    }
                    _ => crate::machine::EXIT_SPAWN_FAILED,
                };
                return Event::SpawnFailed {
                    service: name.to_string(),
                    reason: format!("`{prog}`: {e}"),
                    code,
                };
            }
        };
        let pid = child.id() as i32;
        let log = self.log_dir_for(&spec);
        let streams: [Option<OwnedFd>; 2] = [
            child.stdout.take().map(Into::into),
            child.stderr.take().map(Into::into),
        ];
        for fd in streams.into_iter().flatten() {
            let _ = fcntl(&fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK));
            self.pipes.push(Pipe {
                fd: File::from(fd),
                service: name.to_string(),
                log: log.clone(),
                lines: LineBuffer::new(self.opts.max_line),
            });
        }
        // `child` is dropped without waiting: the loop reaps every pid with waitpid(-1).
        drop(child);
        if let Err(e) = self.groups.record(name, pid) {
            let msg = format!(
                "[hermes] cannot record process group {pid} in the runtime directory ({e}); \
                 if this supervisor is killed, the next one will not find it"
            );
            self.emit(name, log.as_deref(), msg.as_bytes(), out);
        }
        Event::Spawned {
            service: name.to_string(),
            pid,
        }
    }

    /// The service's readiness socket, bound on first use (then kept until it is forgotten).
    fn notify_socket(&mut self, spec: &ServiceSpec) -> std::io::Result<PathBuf> {
        if let Some(n) = self.notify.get(&spec.name) {
            return Ok(n.path.clone());
        }
        let path = self
            .opts
            .runtime_dir
            .join("notify")
            .join(format!("{}.sock", spec.name));
        let _ = fs::remove_file(&path);
        let sock = UnixDatagram::bind(&path)?;
        sock.set_nonblocking(true)?;
        // The service (possibly another user) must be able to send; the socket name is the
        // only authority it carries, and all it can do is mark its own service ready.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o666))?;
        self.notify.insert(
            spec.name.clone(),
            Notify {
                sock,
                path: path.clone(),
            },
        );
        Ok(path)
    }

    /// Reads the datagrams waiting on a service's readiness socket: `READY=1` in any of them
    /// makes the service's current process ready.
    pub(super) fn read_notify(&mut self, name: &str, events: &mut Vec<Event>) {
        let Some(n) = self.notify.get(name) else {
            return;
        };
        let mut buf = [0u8; 4096];
        let mut ready = false;
        // Bounded: a flood of datagrams cannot keep us here.
        for _ in 0..64 {
            match n.sock.recv(&mut buf) {
                Ok(len) => {
                    ready |= buf[..len].split(|&b| b == b'\n').any(|l| l == b"READY=1");
                }
                Err(_) => break,
            }
        }
        if ready && let Some(pid) = self.machine.state(name).and_then(|s| s.pid()) {
            events.push(Event::Ready { pid });
        }
    }
}

/// In the child before `exec`, after any privilege drop: asks for SIGTERM when the supervisor
/// dies, then checks that it has not died already (in which case the request came too late
/// and the child must not start at all).
fn parent_death_signal(supervisor: Pid) -> std::io::Result<()> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM)?;
    if nix::unistd::getppid() != supervisor {
        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// In the child before `exec`: unblocks every signal.
///
/// The loop blocks the signals it reads from its `signalfd`, and a signal mask survives
/// `fork` and `exec`. std's spawn does not reset it, so without this every service would
/// start with `SIGTERM`, `SIGINT`, `SIGHUP`... blocked: `kill -TERM` of a service would do
/// nothing until its grace ran out and `SIGKILL` came.
fn reset_signal_mask() -> std::io::Result<()> {
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None)?;
    Ok(())
}

/// In the child before `exec`: makes our new process group the terminal's foreground group.
///
/// A background process calling `tcsetpgrp` gets `SIGTTOU` unless it blocks it, so it is
/// blocked around the call. Doing it in the child (not the parent after spawn) means the
/// program never runs a single instruction in the background, so it cannot be stopped by
/// `SIGTTIN` on its first read. Not a terminal (`ENOTTY`) is fine: nothing to take.
fn take_foreground() -> std::io::Result<()> {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old))?;
    #[allow(unsafe_code)]
    // SAFETY: fd 0 stays open for the duration of the borrow (nothing closes it before exec);
    // `std::io::stdin()` is avoided because its first use allocates.
    let stdin = unsafe { std::os::fd::BorrowedFd::borrow_raw(libc::STDIN_FILENO) };
    let _ = nix::unistd::tcsetpgrp(stdin, nix::unistd::getpid());
    nix::sys::signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&old), None)?;
    Ok(())
}
