//! Starting a service, and its readiness socket.
//!
//! [`Supervisor::spawn`] builds the command from the spec — arguments, environment, working
//! directory, its own process group — and prepares everything the child needs before `fork`:
//! between `fork` and `exec` the child only makes async-signal-safe calls (reset the signal
//! mask the loop blocked, take the terminal's foreground for PID 1's main program, apply the
//! verified privilege drop, ask for SIGTERM when the supervisor dies). A service's stdout and
//! stderr become non-blocking pipes handed to `capture`; its process group is recorded in the
//! runtime directory ([`crate::groups`]). A spawn that fails is an event with its real cause
//! (the working directory, the program, its interpreter: [`SpawnError`]) and the shell's code
//! (126 not executable, 127 not found), never an error of the loop.
//!
//! Readiness: one datagram socket per service at `<runtime dir>/notify/<service>.sock`, passed
//! as `NOTIFY_SOCKET`. The socket identifies the service, so no credential lookup can race a
//! short-lived sender (such as `systemd-notify`); `READY=1` on it is [`Event::Ready`].

use std::ffi::CString;
use std::fs::{self, File};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use hermes_privilege::DropPlan;
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::unistd::{Pid, Uid};

use super::capture::Pipe;
use super::spawn_error::{SpawnError, program_exists};
use super::{Supervisor, activation};
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
        let failed = |error: SpawnError| Event::SpawnFailed {
            service: name.to_string(),
            reason: error.to_string(),
            code: error.exit_code(),
        };
        let Some(spec) = self.machine.spec(name).cloned() else {
            return failed(SpawnError::Nothing("unknown service"));
        };
        let Some((prog, args)) = spec.argv.split_first() else {
            return failed(SpawnError::Nothing("empty command"));
        };
        let mut cmd = Command::new(prog);
        cmd.args(args).envs(&spec.env).process_group(0);
        // Before the privilege drop below, as std's own `current_dir` would be: the directory
        // is entered with the supervisor's rights.
        let change_dir = match spec
            .cwd
            .as_deref()
            .map(|dir| ChangeDir::new(name, dir, prog))
        {
            Some(Err(error)) => return failed(error),
            Some(Ok(change_dir)) => Some(change_dir),
            None => None,
        };
        if let Some(change_dir) = &change_dir {
            change_dir.install(&mut cmd);
        }
        // The main program (PID 1's CMD) gets the container environment unchanged: it has
        // no readiness protocol to speak, and an extra `NOTIFY_SOCKET` would leak into it.
        let is_main = self.opts.main.as_deref() == Some(name);
        if !is_main {
            // What it forks inherits it: an orphan is still known as this service's.
            cmd.env(crate::tree::SERVICE_VAR, name);
        }
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
        // Before the privilege drop: only root may move a process into a cgroup.
        let cgroup = self.join_cgroup(&spec, &mut cmd, out);
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
        // The successor of a hand-over is told whom it replaces (the old one still holds
        // what a single process may hold, such as the gateway's lock).
        cmd.env_remove(hermes_listen::HANDOVER_FROM);
        if let Some(old) = self.machine.replacing_pid(name) {
            cmd.env(hermes_listen::HANDOVER_FROM, old.to_string());
        }
        for var in activation::VARS {
            cmd.env_remove(var);
        }
        // Held sockets, last of all: the child's own exec (see `activation`).
        let _reserved = self.hand_sockets(&spec, &mut cmd, out);
        let spawned = cmd.spawn();
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let errno = e
                    .raw_os_error()
                    .map_or(Errno::UnknownErrno, Errno::from_raw);
                let error = match (&change_dir, &spec.cwd) {
                    (Some(change_dir), Some(dir)) if change_dir.failed() => SpawnError::Cwd {
                        service: name.to_string(),
                        dir: dir.clone(),
                        errno,
                    },
                    _ => SpawnError::Exec {
                        program: prog.clone(),
                        errno,
                        exists: program_exists(
                            prog,
                            spec.cwd.as_deref(),
                            child_path(&spec).as_deref(),
                        ),
                    },
                };
                return failed(error);
            }
        };
        if let Some(joining) = &cgroup {
            self.joined_cgroup(&spec, joining, out);
        }
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

    /// Prepares `spec`'s held sockets for its next process: bound (or re-bound) as needed,
    /// and the child's last step made the exec that hands them over. The returned placeholders
    /// must live until the spawn has returned.
    fn hand_sockets(
        &mut self,
        spec: &ServiceSpec,
        cmd: &mut Command,
        out: &mut MirrorOut<'_>,
    ) -> Option<activation::Reserved> {
        if spec.listen.is_empty() {
            return None;
        }
        let mut notes = Vec::new();
        let handed = self.sockets.prepare(spec, &mut notes);
        let dir = self.log_dir_for(spec);
        for note in notes {
            let msg = format!("[hermes] {note}");
            self.emit(&spec.name, dir.as_deref(), msg.as_bytes(), out);
        }
        if handed.fds.is_empty() {
            return None;
        }
        let path = child_path(spec);
        let mut image =
            activation::ExecImage::new(cmd, path.as_deref(), &handed.fds, &handed.names)?;
        #[allow(unsafe_code)]
        // SAFETY: runs between fork and exec, last; `ExecImage::exec` only makes
        // async-signal-safe syscalls on buffers prepared before the fork.
        unsafe {
            cmd.pre_exec(move || image.exec());
        }
        Some(activation::Reserved::range(handed.fds.len()))
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

/// The service's working directory, entered by the child before `exec`, and the pipe on which
/// the child says that this step failed: std reports a failed spawn as a bare errno, the same
/// `ENOENT` for a missing directory as for a missing program.
struct ChangeDir {
    /// The directory, NUL-terminated before the fork (the child must not allocate).
    dir: CString,
    /// Readable (non-blocking) in the parent: one byte when the child's `chdir` failed.
    failed_read: OwnedFd,
    /// The child's end; close-on-exec, so a successful `exec` leaves the pipe empty.
    failed_write: OwnedFd,
}

impl ChangeDir {
    /// Prepares `service`'s entering `dir` before it runs `program`: a path with a NUL byte
    /// cannot be entered, and without a pipe (no file descriptor left) nothing can start.
    fn new(service: &str, dir: &Path, program: &str) -> Result<Self, SpawnError> {
        let c_dir = CString::new(dir.as_os_str().as_bytes()).map_err(|_| SpawnError::Cwd {
            service: service.to_string(),
            dir: dir.to_path_buf(),
            errno: Errno::EINVAL,
        })?;
        let (failed_read, failed_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
            .map_err(|errno| SpawnError::Exec {
                program: program.to_string(),
                errno,
                exists: true,
            })?;
        Ok(Self {
            dir: c_dir,
            failed_read,
            failed_write,
        })
    }

    /// Adds the step to `cmd`'s child (in the order of the `pre_exec` calls).
    fn install(&self, cmd: &mut Command) {
        let dir = self.dir.clone();
        let failed = self.failed_write.as_raw_fd();
        #[allow(unsafe_code)]
        // SAFETY: runs between fork and exec; `enter_dir` only calls chdir and write on data
        // prepared before the fork, without allocating. The write end stays open in the
        // parent until `cmd.spawn()` has returned.
        unsafe {
            cmd.pre_exec(move || enter_dir(&dir, failed));
        }
    }

    /// After a failed spawn: whether it was the child's `chdir` that failed (std's spawn returns
    /// only once the child has reported its error, so the byte is there by then).
    fn failed(&self) -> bool {
        let mut byte = [0u8; 1];
        matches!(nix::unistd::read(&self.failed_read, &mut byte), Ok(1))
    }
}

/// In the child before `exec`: enters the service's directory or, failing that, says so on
/// `failed` and returns `chdir`'s error (which std reports as the spawn's).
fn enter_dir(dir: &std::ffi::CStr, failed: RawFd) -> std::io::Result<()> {
    if let Err(errno) = nix::unistd::chdir(dir) {
        #[allow(unsafe_code)]
        // SAFETY: `failed` is the open write end of a pipe; one byte from a static buffer.
        unsafe {
            libc::write(failed, b"d".as_ptr().cast(), 1);
        }
        return Err(errno.into());
    }
    Ok(())
}

/// The `PATH` the child's `exec` searches: the spec's own, else the supervisor's.
fn child_path(spec: &ServiceSpec) -> Option<String> {
    spec.env
        .get("PATH")
        .cloned()
        .or_else(|| std::env::var("PATH").ok())
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
