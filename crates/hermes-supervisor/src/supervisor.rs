//! The event loop: [`Supervisor`] owns the lock, the control socket, the notify sockets, the
//! child pipes and the log files, and executes what [`Machine`] decides.
//!
//! Shape (catatonit's, not a sleep tick): block signals, read them from a `signalfd`, and wait
//! in exactly one place — `poll` on the signalfd, the listener, every client, every notify
//! socket and every child pipe, with the timeout set to the next deadline. Each wake-up:
//! collect events, `machine.handle(event, now)`, execute the actions.
//!
//! Invariants:
//! * Nothing blocks: every fd is non-blocking; pipes are read at most [`READ_CHUNK`] per wake so
//!   one chatty service cannot starve the others; a client gets at most [`MAX_REQUEST`] bytes
//!   of requests and [`MAX_QUEUED_REPLIES`] of unread replies buffered (over that, it is not
//!   read from until it reads), and a deadline. Mirrored output goes through a bounded buffer
//!   written only when `poll` says the output is writable ([`crate::mirror`]): a reader that
//!   stops reading costs lines, never supervision. A failing `poll` slows the loop down
//!   (`PollFailures`), never spins it.
//! * Every child is reaped with `waitpid(-1, WNOHANG)` until none is left; pids that belong to
//!   no service (escaped descendants re-parented to us as PID 1 or sub-reaper) are reaped and
//!   ignored.
//! * Each service runs in its own process group (pgid = pid); stop and kill go to the group.
//!   When the main process exits the group is SIGKILLed, and the group is recorded in the
//!   runtime directory until it is empty, so a supervisor that was SIGKILLed has its
//!   left-overs stopped by the next one ([`crate::groups`]).
//!
//! Readiness: one datagram socket per service at `<runtime dir>/notify/<service>.sock`, passed
//! as `NOTIFY_SOCKET`. The socket identifies the service, so no credential lookup can race a
//! short-lived sender (such as `systemd-notify`).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hermes_privilege::{DropPlan, Owner, SafeDir};
use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, killpg};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{getsockopt, sockopt};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid};

use crate::client::SOCKET_NAME;
use crate::error::Error;
use crate::groups::Groups;
use crate::logs::{Chunk, LineBuffer, LogFile, Rotation, timestamp};
use crate::machine::{Action, Event, Machine, Op, Outcome, RequestId, Timing};
use crate::mirror::{Mirror, MirrorOut};
use crate::protocol::{
    Command as Cmd, ErrorCode, Frame, MAX_QUEUED_REPLIES, MAX_REQUEST, Response, parse_request,
    take_frame,
};
use crate::spec::{Desired, LogTarget, RunAs, ServiceSpec};

/// Bytes read from one pipe or client per wake-up.
pub const READ_CHUNK: usize = 64 * 1024;
/// Lock file name inside the runtime directory.
pub const LOCK_NAME: &str = "supervisor.lock";
/// Longest the supervisor waits, on its way out, for a slow reader of its mirrored output (and,
/// separately, for control clients to take their last replies).
pub const FINAL_FLUSH: Duration = Duration::from_millis(500);
/// How long after the loop starts [`Hooks::settled`] is called.
pub const SETTLE_AFTER: Duration = Duration::from_secs(1);

/// The signals the loop reads from its signalfd (blocked in every thread of the process):
/// child exits, the shutdown requests, and what PID 1 forwards to its main program.
pub const LOOP_SIGNALS: [Signal; 8] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// Called by the loop when something the caller may want to persist happens.
pub trait Hooks {
    /// An operator start/stop/restart arrived over the control socket. Gateways persist
    /// `desired_state` in their profile's `gateway_state.json` here.
    fn desired_state_changed(&mut self, service: &ServiceSpec, desired: Desired) {
        let _ = (service, desired);
    }

    /// Called once, at the first wake-up [`SETTLE_AFTER`] or more after the loop started
    /// (the loop sets a timeout for it): boot is over and the loop is in its steady state.
    /// PID 1 gives back memory only the boot needed here. A loop that ends sooner never
    /// calls it, so short-lived runs pay nothing.
    fn settled(&mut self) {}
}

/// Hooks that do nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;
impl Hooks for NoHooks {}

/// How the supervisor is set up. Build with [`Options::new`] and adjust fields.
#[derive(Debug, Clone)]
pub struct Options {
    /// Holds `supervisor.lock`, `supervisor.sock` and `notify/`.
    pub runtime_dir: PathBuf,
    /// `$HERMES_HOME/logs`: default service logs go to `<log_dir>/<service>/current`.
    pub log_dir: PathBuf,
    /// Uids allowed on the control socket besides root and the supervisor's own uid (the
    /// service user in a container).
    pub allowed_uids: Vec<u32>,
    /// Group to give the socket (mode 0660), e.g. the service user's group.
    pub socket_gid: Option<u32>,
    /// Timing of restarts and readiness.
    pub timing: Timing,
    /// Log rotation.
    pub rotation: Rotation,
    /// Longest line kept from a service (longer ones are truncated and counted).
    pub max_line: usize,
    /// Service whose exit ends the loop (PID 1's main program); SIGTERM/SIGINT/SIGHUP/
    /// SIGQUIT/SIGUSR1/SIGUSR2/SIGWINCH are forwarded to its process group while it runs.
    pub main: Option<String>,
    /// Give the main service's process group the foreground of the controlling terminal on
    /// stdin (`tcsetpgrp`), so Ctrl-C and job control reach it directly. Only meaningful
    /// when stdin is a terminal and the main service uses [`LogTarget::Inherit`].
    pub foreground_tty: bool,
    /// Most simultaneous control clients; more are answered `busy` and closed.
    pub max_clients: usize,
    /// The identity a service registered by a non-root client runs as when that client is
    /// this user (PID 1: the service user with its device groups). See [`confine_run_as`].
    pub default_run_as: Option<RunAs>,
    /// A client idle for this long is disconnected.
    pub client_deadline: Duration,
}

impl Options {
    /// Defaults: settle 1 s, backoff 50 ms doubling to 30 s, logs 1 MB × 10, 64 KiB lines,
    /// 64 clients, 5 s client deadline.
    pub fn new(runtime_dir: impl Into<PathBuf>, log_dir: impl Into<PathBuf>) -> Self {
        Self {
            runtime_dir: runtime_dir.into(),
            log_dir: log_dir.into(),
            allowed_uids: Vec::new(),
            socket_gid: None,
            timing: Timing::default(),
            rotation: Rotation::default(),
            max_line: 64 * 1024,
            main: None,
            foreground_tty: false,
            max_clients: 64,
            default_run_as: None,
            client_deadline: Duration::from_secs(5),
        }
    }
}

struct Conn {
    stream: UnixStream,
    /// The peer's uid and gid (SO_PEERCRED), when the kernel told us.
    peer: Option<(u32, u32)>,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    deadline: Instant,
    pending: Option<RequestId>,
    closing: bool,
    eof: bool,
}

impl Conn {
    /// Whether to read more from this client. Not while a request waits for its reply (replies
    /// go out in order), nor while its replies pile up unread or a complete request is still
    /// buffered: what a client can make us hold stays bounded by [`MAX_QUEUED_REPLIES`] plus
    /// one read.
    fn wants_input(&self) -> bool {
        self.pending.is_none()
            && !self.closing
            && !self.eof
            && self.wbuf.len() < MAX_QUEUED_REPLIES
            && !self.rbuf.contains(&b'\n')
    }

    /// Whether a buffered request can be processed now (the loop then does not sleep).
    fn can_process(&self) -> bool {
        self.pending.is_none()
            && !self.closing
            && self.wbuf.len() < MAX_QUEUED_REPLIES
            && (self.rbuf.contains(&b'\n') || (self.eof && !self.rbuf.is_empty()))
    }
}

struct Pipe {
    fd: File,
    service: String,
    log: Option<PathBuf>,
    lines: LineBuffer,
}

struct Notify {
    sock: UnixDatagram,
    path: PathBuf,
}

/// A supervisor that holds its lock and socket; call [`Supervisor::run`].
pub struct Supervisor {
    opts: Options,
    machine: Machine,
    _lock: File,
    listener: UnixListener,
    socket: PathBuf,
    conns: Vec<Conn>,
    pipes: Vec<Pipe>,
    notify: HashMap<String, Notify>,
    logs: HashMap<PathBuf, LogFile>,
    allowed: Vec<u32>,
    next_id: RequestId,
    groups: Groups,
    poll_failures: PollFailures,
    /// What set-up had to do differently (see [`Supervisor::notes`]).
    notes: Vec<String>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    /// Takes the single-instance lock and binds the control socket. Nothing is started yet.
    ///
    /// # Errors
    /// [`Error::AlreadyRunning`] when another instance holds the lock; [`Error::Io`] for
    /// directory, lock or socket problems; [`Error::InvalidSpec`] for a spec that fails
    /// [`ServiceSpec::validate`] or a duplicate name (a caller bug: specs from
    /// [`crate::parse_services`] are already valid).
    pub fn new(opts: Options, specs: Vec<ServiceSpec>) -> Result<Self, Error> {
        let mut seen = std::collections::HashSet::new();
        for s in &specs {
            s.validate().map_err(|reason| Error::InvalidSpec {
                service: s.name.clone(),
                reason,
            })?;
            if !seen.insert(s.name.as_str()) {
                let reason = format!("service `{}` is defined twice", s.name);
                return Err(Error::InvalidSpec {
                    service: s.name.clone(),
                    reason,
                });
            }
        }
        let dir = &opts.runtime_dir;
        // Sockets, the lock and notify sockets are then made by path: only safe because
        // nobody else can change anything on the way to this directory.
        SafeDir::create_private(dir, 0o755).map_err(|e| Error::io("create", dir, e))?;
        let lock_path = dir.join(LOCK_NAME);
        let mut lock = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| Error::io("open", &lock_path, e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                let mut s = String::new();
                let _ = lock.read_to_string(&mut s);
                return Err(Error::AlreadyRunning {
                    pid: s.trim().parse().unwrap_or(0),
                    runtime_dir: dir.clone(),
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("lock", &lock_path, e)),
        }
        lock.set_len(0)
            .map_err(|e| Error::io("write", &lock_path, e))?;
        writeln!(lock, "{}", std::process::id()).map_err(|e| Error::io("write", &lock_path, e))?;

        let socket = dir.join(SOCKET_NAME);
        // We hold the lock, so any socket file here is stale.
        let _ = fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).map_err(|e| Error::io("bind", &socket, e))?;
        fs::set_permissions(&socket, fs::Permissions::from_mode(0o660))
            .map_err(|e| Error::io("chmod", &socket, e))?;
        let mut notes = Vec::new();
        if let Some(gid) = opts.socket_gid
            && let Err(e) = nix::unistd::chown(&socket, None, Some(Gid::from_raw(gid)))
        {
            // No CAP_CHOWN (`--cap-drop CHOWN`): the group cannot be given, so the file mode
            // opens the socket to everyone and the peer-credential check on accept remains
            // the gate (only root, our uid and the allowed uids get past it).
            fs::set_permissions(&socket, fs::Permissions::from_mode(0o666))
                .map_err(|e| Error::io("chmod", &socket, e))?;
            notes.push(format!(
                "cannot give the control socket to group {gid} ({e}); it is mode 0666 and \
                 only root and the allowed users may use it"
            ));
        }
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("configure", &socket, e))?;
        let notify_dir = dir.join("notify");
        fs::create_dir_all(&notify_dir).map_err(|e| Error::io("create", &notify_dir, e))?;
        let _ = fs::set_permissions(&notify_dir, fs::Permissions::from_mode(0o755));
        let groups = Groups::open(dir, opts.timing.group_exit_wait)
            .map_err(|e| Error::io("create", dir.join(crate::groups::RECORD_DIR), e))?;

        let mut allowed = vec![0, Uid::effective().as_raw()];
        allowed.extend(&opts.allowed_uids);
        let machine = Machine::new(specs, opts.timing, opts.main.clone(), Instant::now());
        Ok(Self {
            opts,
            machine,
            _lock: lock,
            listener,
            socket,
            conns: Vec::new(),
            pipes: Vec::new(),
            notify: HashMap::new(),
            logs: HashMap::new(),
            allowed,
            next_id: 1,
            notes,
            groups,
            poll_failures: PollFailures::default(),
        })
    }

    /// Warnings from set-up, for the caller to show: what could not be done as usual and
    /// what was done instead (a control socket whose group could not be set).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The control socket path.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Runs until shutdown (SIGTERM/SIGINT, the `shutdown` request, or the main service's
    /// exit), then stops every service and returns how it ended. Service output is mirrored to
    /// `out` as `[service] line` through a bounded buffer that is written only when the output
    /// can take it: a reader that stops reading costs dropped (counted, then reported) lines,
    /// never a stalled loop. `&mut std::io::stdout()` and [`Mirror::stdout`] write the
    /// process's stdout that way without changing it for anyone else; a plain
    /// `&mut dyn Write` ([`Mirror::writer`]) is written in place and may block.
    ///
    /// Blocks the handled signals in the calling thread (restored on return). In PID 1 the
    /// caller should block them before spawning any thread; in a multi-threaded host program
    /// other threads must block them too, or SIGCHLD may be consumed elsewhere.
    ///
    /// # Errors
    /// Only set-up failures (signalfd, signal mask); once the loop runs it never bails.
    pub fn run<'o>(
        mut self,
        hooks: &mut dyn Hooks,
        out: impl Into<Mirror<'o>>,
    ) -> Result<Outcome, Error> {
        let mut out = MirrorOut::new(out.into());
        let mut mask = SigSet::empty();
        for s in LOOP_SIGNALS {
            mask.add(s);
        }
        let old = mask
            .thread_swap_mask(SigmaskHow::SIG_BLOCK)
            .map_err(|e| Error::Sys {
                what: "the signal mask",
                source: e,
            })?;
        let result = self.run_blocked(&mask, hooks, &mut out);
        let _ = old.thread_set_mask();
        result
    }

    fn run_blocked(
        &mut self,
        mask: &SigSet,
        hooks: &mut dyn Hooks,
        out: &mut MirrorOut<'_>,
    ) -> Result<Outcome, Error> {
        let sfd = SignalFd::with_flags(mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
            .map_err(|e| Error::Sys {
                what: "signalfd",
                source: e,
            })?;
        if nix::unistd::getpid().as_raw() != 1 {
            // Orphaned descendants of services come to us, so we can reap them.
            let _ = nix::sys::prctl::set_child_subreaper(true);
        }
        // From here on, nothing may bail: every failure becomes a state or a dropped line.
        let mut outcome = None;
        self.stop_leftovers(out);
        let boot = self.machine.handle(Event::Boot, Instant::now());
        self.execute(boot, hooks, out, &mut outcome);
        let mut settle_at = Some(Instant::now() + SETTLE_AFTER);
        while outcome.is_none() {
            let ready = self.wait(&sfd, settle_at, out);
            let now = Instant::now();
            if let Some((e, pause)) = ready.poll_failed {
                let text = format!(
                    "poll failed: {e}; checking every descriptor every {}ms or so until it works \
                     again",
                    pause.as_millis()
                );
                out.line("hermes", text.as_bytes(), now);
            }
            if ready.poll_recovered {
                out.line("hermes", b"poll works again", now);
            }
            if settle_at.is_some_and(|t| now >= t) {
                settle_at = None;
                hooks.settled();
            }
            let mut events = Vec::new();
            if ready.signals {
                self.read_signals(&sfd, &mut events);
            }
            if ready.listener {
                self.accept(now);
            }
            for name in ready.notify {
                self.read_notify(&name, &mut events);
            }
            for i in ready.pipes.into_iter().rev() {
                self.read_pipe(i, out);
            }
            for ev in events {
                let acts = self.machine.handle(ev, now);
                self.execute(acts, hooks, out, &mut outcome);
            }
            // After the exits (and the SIGKILLs they caused): which groups are empty now.
            for pgid in self.groups.gone(now) {
                let acts = self.machine.handle(Event::GroupGone { pgid }, now);
                self.execute(acts, hooks, out, &mut outcome);
            }
            let acts = self.machine.handle(Event::Tick, now);
            self.execute(acts, hooks, out, &mut outcome);
            self.service_clients(&ready.conns, now, hooks, out, &mut outcome);
            out.flush(Instant::now(), ready.mirror);
        }
        self.drain_pipes(out);
        self.flush_clients();
        // Records of groups already empty go now; the others are checked by the next start.
        self.groups.gone(Instant::now());
        // Bounded: a reader that is not reading must not hold up the exit.
        out.finish(Instant::now() + FINAL_FLUSH);
        let _ = fs::remove_file(&self.socket);
        for n in self.notify.values() {
            let _ = fs::remove_file(&n.path);
        }
        Ok(outcome.unwrap_or(Outcome::Stopped))
    }

    fn wait(&mut self, sfd: &SignalFd, settle_at: Option<Instant>, out: &MirrorOut<'_>) -> Ready {
        let now = Instant::now();
        let mut deadline = self.machine.next_deadline();
        for t in [settle_at, self.groups.recheck_at(now)]
            .into_iter()
            .flatten()
        {
            deadline = Some(deadline.map_or(t, |d| d.min(t)));
        }
        for c in &self.conns {
            if c.can_process() {
                // Replies made room for requests already buffered: no event will say so.
                deadline = Some(now);
            } else if c.pending.is_none() {
                deadline = Some(deadline.map_or(c.deadline, |d| d.min(c.deadline)));
            }
        }
        let timeout = poll_timeout(deadline.map(|d| d.saturating_duration_since(now)));
        let notify_names: Vec<String> = self.notify.keys().cloned().collect();
        let mut fds =
            Vec::with_capacity(2 + notify_names.len() + self.conns.len() + self.pipes.len());
        fds.push(PollFd::new(sfd.as_fd(), PollFlags::POLLIN));
        fds.push(PollFd::new(self.listener.as_fd(), PollFlags::POLLIN));
        for n in &notify_names {
            if let Some(s) = self.notify.get(n) {
                fds.push(PollFd::new(s.sock.as_fd(), PollFlags::POLLIN));
            }
        }
        let conn_base = fds.len();
        for c in &self.conns {
            let mut f = PollFlags::empty();
            if c.wants_input() {
                f |= PollFlags::POLLIN;
            }
            if !c.wbuf.is_empty() {
                f |= PollFlags::POLLOUT;
            }
            fds.push(PollFd::new(c.stream.as_fd(), f));
        }
        let pipe_base = fds.len();
        for p in &self.pipes {
            fds.push(PollFd::new(p.fd.as_fd(), PollFlags::POLLIN));
        }
        // Only while something waits to be written: an idle output is never watched.
        let mirror_at = out.poll_fd().map(|fd| {
            fds.push(PollFd::new(fd, PollFlags::POLLOUT));
            fds.len() - 1
        });
        let mut r = Ready::default();
        match poll(&mut fds, timeout) {
            Ok(n) => {
                r.poll_recovered = self.poll_failures.succeeded();
                if n == 0 {
                    return r; // timeout: the tick handles deadlines
                }
            }
            Err(Errno::EINTR) => return r,
            Err(e) => {
                let (pause, first) = self.poll_failures.failed();
                drop(fds);
                // Pause on the signalfd alone (one descriptor: that poll still works when the
                // big one fails for having too many), so signals and exits are still handled
                // at once; never past the next deadline.
                let pause = deadline.map_or(pause, |d| pause.min(d.saturating_duration_since(now)));
                let mut one = [PollFd::new(sfd.as_fd(), PollFlags::POLLIN)];
                if poll(&mut one, poll_timeout(Some(pause))).is_err() {
                    std::thread::sleep(pause);
                }
                // Then every descriptor counts as ready: all are non-blocking, so one that is
                // not costs an EAGAIN.
                r.signals = true;
                r.listener = true;
                r.notify = notify_names;
                r.conns = (0..self.conns.len()).collect();
                r.pipes = (0..self.pipes.len()).collect();
                r.poll_failed = first.then_some((e, pause));
                return r;
            }
        }
        let hit = |f: &PollFd| f.revents().is_some_and(|e| !e.is_empty());
        r.signals = hit(&fds[0]);
        r.listener = hit(&fds[1]);
        for (k, n) in notify_names.into_iter().enumerate() {
            if hit(&fds[2 + k]) {
                r.notify.push(n);
            }
        }
        r.conns = (0..self.conns.len())
            .filter(|&k| hit(&fds[conn_base + k]))
            .collect();
        r.pipes = (0..self.pipes.len())
            .filter(|&k| hit(&fds[pipe_base + k]))
            .collect();
        r.mirror = mirror_at.is_some_and(|k| hit(&fds[k]));
        r
    }

    fn read_signals(&mut self, sfd: &SignalFd, events: &mut Vec<Event>) {
        let mut reap = false;
        while let Ok(Some(info)) = sfd.read_signal() {
            let Ok(sig) = Signal::try_from(info.ssi_signo as i32) else {
                continue;
            };
            match sig {
                Signal::SIGCHLD => reap = true,
                _ => match self.machine.main_pgid() {
                    // PID 1 semantics: the main program decides what a signal means.
                    Some(pgid) if !self.machine.is_shutting_down() => {
                        let _ = kill_group(pgid, sig);
                    }
                    _ if matches!(sig, Signal::SIGTERM | Signal::SIGINT) => {
                        events.push(Event::Terminate)
                    }
                    _ => {}
                },
            }
        }
        // SIGCHLD coalesces, and a spawn failure can leave zombies: always reap fully.
        let _ = reap;
        let now = Instant::now();
        loop {
            let (pid, status) = match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) => (pid, crate::ExitStatus::Code(code)),
                Ok(WaitStatus::Signaled(pid, sig, _)) => {
                    (pid, crate::ExitStatus::Signal(sig as i32))
                }
                Ok(WaitStatus::StillAlive) | Err(_) => break,
                Ok(_) => continue,
            };
            self.groups.reaped(pid.as_raw(), now);
            events.push(Event::Exited {
                pid: pid.as_raw(),
                status,
            });
        }
    }

    fn execute(
        &mut self,
        actions: Vec<Action>,
        hooks: &mut dyn Hooks,
        out: &mut MirrorOut<'_>,
        outcome: &mut Option<Outcome>,
    ) {
        let mut queue: std::collections::VecDeque<Action> = actions.into();
        while let Some(a) = queue.pop_front() {
            match a {
                Action::Spawn { service } => {
                    let ev = self.spawn(&service, out);
                    queue.extend(self.machine.handle(ev, Instant::now()));
                }
                Action::Kill { pgid, signal } => {
                    let _ = kill_group(pgid, signal);
                }
                Action::Reply { id, result } => {
                    let resp = match result {
                        Ok(()) => Response::ok(),
                        Err(e) => Response::error(e.code(), e.to_string()),
                    };
                    if let Some(c) = self.conns.iter_mut().find(|c| c.pending == Some(id)) {
                        c.pending = None;
                        c.wbuf.extend(resp.to_frame());
                        c.deadline = Instant::now() + self.opts.client_deadline;
                    }
                }
                Action::DesiredChanged { spec, desired } => {
                    hooks.desired_state_changed(&spec, desired)
                }
                Action::Forgotten { service } => {
                    if let Some(n) = self.notify.remove(&service) {
                        let _ = fs::remove_file(&n.path);
                    }
                }
                Action::Note { service, text } => {
                    let dir = self
                        .machine
                        .spec(&service)
                        .and_then(|s| self.log_dir_for(s));
                    self.emit(
                        &service,
                        dir.as_deref(),
                        format!("[hermes] {text}").as_bytes(),
                        out,
                    );
                }
                Action::Finished(o) => *outcome = Some(o),
            }
        }
    }

    /// Before the first start: kills what a previous, killed supervisor on this runtime
    /// directory left running, and has each such service wait for its old group to be gone.
    fn stop_leftovers(&mut self, out: &mut MirrorOut<'_>) {
        let now = Instant::now();
        for left in self.groups.stop_leftovers(now) {
            let dir = self
                .machine
                .spec(&left.service)
                .and_then(|s| self.log_dir_for(s));
            let msg = format!(
                "[hermes] killed {} process(es) in process group {} left behind by a previous \
                 supervisor",
                left.processes, left.pgid
            );
            self.emit(&left.service, dir.as_deref(), msg.as_bytes(), out);
            let ev = Event::Leftover {
                service: left.service,
                pgid: left.pgid,
            };
            // Only sets the service's lingering group: no action comes of it.
            let _ = self.machine.handle(ev, now);
        }
    }

    fn log_dir_for(&self, spec: &ServiceSpec) -> Option<PathBuf> {
        match &spec.log {
            LogTarget::Default => Some(self.opts.log_dir.join(&spec.name)),
            LogTarget::Dir(d) => Some(d.clone()),
            LogTarget::MirrorOnly | LogTarget::Inherit => None,
        }
    }

    /// Spawns a service; the returned event says how it went.
    fn spawn(&mut self, name: &str, out: &mut MirrorOut<'_>) -> Event {
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

    fn read_notify(&mut self, name: &str, events: &mut Vec<Event>) {
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

    fn read_pipe(&mut self, i: usize, out: &mut MirrorOut<'_>) {
        let mut buf = vec![0u8; READ_CHUNK];
        let (chunks, eof) = {
            let p = &mut self.pipes[i];
            match p.fd.read(&mut buf) {
                Ok(0) => (p.lines.finish(), true),
                Ok(n) => (p.lines.push(&buf[..n]), false),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    (Vec::new(), false)
                }
                Err(_) => (p.lines.finish(), true),
            }
        };
        let (service, log) = (self.pipes[i].service.clone(), self.pipes[i].log.clone());
        for c in chunks {
            match c {
                Chunk::Line(l) => self.emit(&service, log.as_deref(), &l, out),
                Chunk::Truncated(mut l) => {
                    l.extend_from_slice(b" [truncated]");
                    self.emit(&service, log.as_deref(), &l, out);
                }
                Chunk::Dropped(n) => {
                    let msg = format!("[hermes] dropped {n} bytes of an over-long line");
                    self.emit(&service, log.as_deref(), msg.as_bytes(), out);
                }
            }
        }
        if eof {
            self.pipes.swap_remove(i);
        }
    }

    fn drain_pipes(&mut self, out: &mut MirrorOut<'_>) {
        // Bounded final drain: whatever is already in the pipes, at most a few chunks each.
        for _ in 0..16 {
            if self.pipes.is_empty() {
                break;
            }
            for i in (0..self.pipes.len()).rev() {
                self.read_pipe(i, out);
            }
        }
    }

    /// Who owns what a service's log creates: the user the service runs as, when a root
    /// supervisor runs it as someone else (a log the service user cannot rotate or read back
    /// through `hermes service logs` is no use, and root-owned files on the volume are what
    /// the boot would otherwise have to repair).
    fn log_owner(&self, service: &str) -> Option<Owner> {
        if !Uid::effective().is_root() {
            return None;
        }
        let ra = self.machine.spec(service)?.run_as.as_ref()?;
        Some(Owner {
            uid: ra.uid,
            gid: ra.gid,
        })
    }

    /// Writes a line to the service's log file and mirrors it as `[service] line`.
    fn emit(&mut self, service: &str, log: Option<&Path>, line: &[u8], out: &mut MirrorOut<'_>) {
        if let Some(dir) = log {
            let rotation = self.opts.rotation;
            let owner = self.log_owner(service);
            let file = self
                .logs
                .entry(dir.to_path_buf())
                .or_insert_with(|| LogFile::new(dir, rotation).owned_by(owner));
            let mut rec = Vec::with_capacity(line.len() + 32);
            rec.extend_from_slice(timestamp().as_bytes());
            rec.push(b' ');
            rec.extend_from_slice(line);
            rec.push(b'\n');
            file.write_line(&rec);
        }
        out.line(service, line, Instant::now());
    }

    fn accept(&mut self, now: Instant) {
        // Bounded so a connect storm cannot hold the loop.
        for _ in 0..64 {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(_) => return,
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let peer = getsockopt(&stream, sockopt::PeerCredentials)
                .map(|c| (c.uid(), c.gid()))
                .ok();
            let uid = peer.map(|(uid, _)| uid);
            let mut conn = Conn {
                stream,
                peer,
                rbuf: Vec::new(),
                wbuf: Vec::new(),
                deadline: now + self.opts.client_deadline,
                pending: None,
                closing: false,
                eof: false,
            };
            if self.conns.len() >= self.opts.max_clients {
                let _ = conn.stream.write(
                    &Response::error(ErrorCode::Busy, "too many control clients; try again")
                        .to_frame(),
                );
                continue;
            }
            if !uid.is_some_and(|u| self.allowed.contains(&u)) {
                let who = uid.map_or("unknown".into(), |u| u.to_string());
                conn.wbuf = Response::error(
                    ErrorCode::Forbidden,
                    format!("uid {who} may not use the control socket"),
                )
                .to_frame();
                conn.closing = true;
            }
            self.conns.push(conn);
        }
    }

    fn service_clients(
        &mut self,
        ready: &[usize],
        now: Instant,
        hooks: &mut dyn Hooks,
        out: &mut MirrorOut<'_>,
        outcome: &mut Option<Outcome>,
    ) {
        for &k in ready {
            let Some(c) = self.conns.get_mut(k) else {
                continue;
            };
            if !c.wants_input() {
                continue;
            }
            let mut buf = [0u8; 16 * 1024];
            let mut budget = MAX_REQUEST + 1;
            while budget > 0 {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        c.eof = true;
                        break;
                    }
                    Ok(n) => {
                        c.rbuf.extend_from_slice(&buf[..n]);
                        budget = budget.saturating_sub(n);
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        for k in 0..self.conns.len() {
            self.process_frames(k, now, hooks, out, outcome);
        }
        // Write what is queued; drop finished, idle, broken connections.
        let mut keep = Vec::with_capacity(self.conns.len());
        for mut c in std::mem::take(&mut self.conns) {
            let mut broken = false;
            while !c.wbuf.is_empty() {
                match c.stream.write(&c.wbuf) {
                    Ok(0) => {
                        broken = true;
                        break;
                    }
                    Ok(n) => {
                        c.wbuf.drain(..n);
                        // Reading its replies is progress: only a client that neither sends
                        // nor reads for the deadline is idle.
                        c.deadline = now + self.opts.client_deadline;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        broken = true;
                        break;
                    }
                }
            }
            let done = (c.closing || c.eof) && c.wbuf.is_empty() && c.pending.is_none();
            let expired = c.pending.is_none() && now >= c.deadline;
            if !(broken || done || expired) {
                keep.push(c);
            }
        }
        self.conns = keep;
    }

    fn process_frames(
        &mut self,
        k: usize,
        now: Instant,
        hooks: &mut dyn Hooks,
        out: &mut MirrorOut<'_>,
        outcome: &mut Option<Outcome>,
    ) {
        loop {
            let c = &mut self.conns[k];
            if c.pending.is_some() || c.closing || c.wbuf.len() >= MAX_QUEUED_REPLIES {
                return;
            }
            let line = match take_frame(&mut c.rbuf, MAX_REQUEST) {
                Frame::Complete(l) => l,
                Frame::Incomplete => {
                    if c.eof && !c.rbuf.is_empty() {
                        c.rbuf.clear();
                        c.wbuf.extend(
                            Response::error(
                                ErrorCode::InvalidRequest,
                                "connection closed in the middle of a request",
                            )
                            .to_frame(),
                        );
                    }
                    return;
                }
                Frame::TooLarge => {
                    c.rbuf = Vec::new();
                    c.wbuf.extend(
                        Response::error(
                            ErrorCode::TooLarge,
                            format!("request larger than {MAX_REQUEST} bytes"),
                        )
                        .to_frame(),
                    );
                    c.closing = true;
                    return;
                }
            };
            c.deadline = now + self.opts.client_deadline;
            let req = match parse_request(&line) {
                Ok(r) => r,
                Err(resp) => {
                    c.wbuf.extend(resp.to_frame());
                    continue;
                }
            };
            let op = match req.command {
                Cmd::Status { service } => {
                    let resp = match service {
                        None => Response::services(self.machine.status(now)),
                        Some(s) => match self.machine.status_of(&s, now) {
                            Some(row) => Response::services(vec![row]),
                            None => Response::error(
                                ErrorCode::UnknownService,
                                format!("unknown service `{s}`"),
                            ),
                        },
                    };
                    self.conns[k].wbuf.extend(resp.to_frame());
                    continue;
                }
                Cmd::Start { service } => Op::Start(service),
                Cmd::Stop { service } => Op::Stop(service),
                Cmd::Restart { service } => Op::Restart(service),
                Cmd::Unregister { service } => Op::Unregister(service),
                Cmd::Shutdown => Op::Shutdown,
                Cmd::Register { mut spec } => {
                    if let Err(why) = spec.validate() {
                        self.conns[k]
                            .wbuf
                            .extend(Response::error(ErrorCode::InvalidRequest, why).to_frame());
                        continue;
                    }
                    let peer = self.conns[k].peer;
                    match confine_log(spec.log.clone(), peer, &self.opts.log_dir) {
                        Ok(log) => spec.log = log,
                        Err(why) => {
                            self.conns[k]
                                .wbuf
                                .extend(Response::error(ErrorCode::Forbidden, why).to_frame());
                            continue;
                        }
                    }
                    spec.run_as =
                        confine_run_as(spec.run_as.take(), peer, self.opts.default_run_as.as_ref());
                    Op::Register(*spec)
                }
            };
            let id = self.next_id;
            self.next_id += 1;
            self.conns[k].pending = Some(id);
            let acts = self.machine.handle(Event::Control { id, op }, now);
            self.execute(acts, hooks, out, outcome);
        }
    }

    /// Last replies on the way out, within [`FINAL_FLUSH`] for all clients together: a
    /// client that does not read must not hold up the exit.
    fn flush_clients(&mut self) {
        let deadline = Instant::now() + FINAL_FLUSH;
        for c in &mut self.conns {
            let left = deadline.saturating_duration_since(Instant::now());
            if !c.wbuf.is_empty() && !left.is_zero() {
                let _ = c.stream.set_nonblocking(false);
                let _ = c.stream.set_write_timeout(Some(left));
                let _ = c.stream.write_all(&c.wbuf);
            }
        }
        self.conns.clear();
    }
}

#[derive(Default)]
struct Ready {
    signals: bool,
    listener: bool,
    notify: Vec<String>,
    conns: Vec<usize>,
    pipes: Vec<usize>,
    mirror: bool,
    /// `poll` just started failing with this error; the loop now pauses this long per turn.
    poll_failed: Option<(Errno, Duration)>,
    /// `poll` works again after failing.
    poll_recovered: bool,
}

/// `poll`'s timeout for a wait of `d` (`None`: no deadline), rounded up so the loop never
/// wakes a hair early and spins.
fn poll_timeout(d: Option<Duration>) -> PollTimeout {
    match d {
        None => PollTimeout::NONE,
        Some(d) => {
            let ms = d.as_micros().div_ceil(1000);
            PollTimeout::try_from(ms.min(i32::MAX as u128) as u64).unwrap_or(PollTimeout::MAX)
        }
    }
}

/// How the loop reacts when `poll` fails with anything but `EINTR` (`EINVAL` when it watches
/// more descriptors than `RLIMIT_NOFILE` allows, `ENOMEM`): such an error comes back at once,
/// so retrying at once would spin a core and never read a signal.
///
/// The loop degrades instead of ending: each turn it pauses (10 ms, doubling to 1 s while the
/// error persists) waiting on the signalfd alone, then treats every descriptor as ready. It
/// does not end with an error because in PID 1 that would take the container down with every
/// service in it; a supervisor that supervises slowly beats none.
#[derive(Debug, Default)]
struct PollFailures {
    streak: u32,
}

impl PollFailures {
    const FIRST_PAUSE: Duration = Duration::from_millis(10);
    const MAX_PAUSE: Duration = Duration::from_secs(1);

    /// One more failure: how long to pause, and whether it is the first of a streak.
    fn failed(&mut self) -> (Duration, bool) {
        self.streak = self.streak.saturating_add(1);
        let pause = Self::FIRST_PAUSE
            .saturating_mul(1u32 << self.streak.saturating_sub(1).min(16))
            .min(Self::MAX_PAUSE);
        (pause, self.streak == 1)
    }

    /// `poll` worked: whether it had been failing.
    fn succeeded(&mut self) -> bool {
        std::mem::take(&mut self.streak) > 0
    }
}

/// The identity a service registered over the control socket may run as.
///
/// A supervisor running as root applies `run_as` before `exec`, so a non-root client must
/// never be able to register a service that runs with more privilege than itself: whatever it
/// asked for, its service runs as its own uid and gid — with the configured service identity's
/// supplementary groups when the client *is* that user. Root may ask for anything.
pub fn confine_run_as(
    requested: Option<RunAs>,
    peer: Option<(u32, u32)>,
    default: Option<&RunAs>,
) -> Option<RunAs> {
    match peer {
        Some((0, _)) => requested,
        Some((uid, gid)) => Some(match default {
            Some(service_user) if service_user.uid == uid => service_user.clone(),
            _ => RunAs {
                uid,
                gid,
                groups: vec![gid],
            },
        }),
        // Unknown peer: such a connection is refused before it can send anything; stay safe.
        None => Some(RunAs {
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
        }),
    }
}

/// Where a service registered over the control socket may keep its log.
///
/// The supervisor writes the log itself, so a root supervisor would write wherever the request
/// says. A client that is neither root nor the supervisor's own user may therefore only name a
/// directory below the supervisor's log directory (`$HERMES_HOME/logs`, which the service user
/// owns anyway), without `..`, and may not take over the supervisor's terminal
/// ([`LogTarget::Inherit`] becomes the default log). Everything else is refused with a reason.
pub fn confine_log(
    requested: LogTarget,
    peer: Option<(u32, u32)>,
    log_root: &Path,
) -> Result<LogTarget, String> {
    let trusted = peer.is_some_and(|(uid, _)| uid == 0 || uid == Uid::effective().as_raw());
    if trusted {
        return Ok(requested);
    }
    match requested {
        LogTarget::Dir(dir) => {
            let below = dir.strip_prefix(log_root).is_ok_and(|rel| {
                rel.components().next().is_some()
                    && rel.components().all(|c| matches!(c, Component::Normal(_)))
            });
            if below {
                Ok(LogTarget::Dir(dir))
            } else {
                Err(format!(
                    "log directory `{}` is not below `{}`: a client that is not root may only \
                     keep logs there",
                    dir.display(),
                    log_root.display()
                ))
            }
        }
        LogTarget::Inherit => Ok(LogTarget::Default),
        other => Ok(other),
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

/// Signals a process group. Refuses pgids 0 and 1, which would hit ourselves or everyone.
fn kill_group(pgid: i32, signal: Signal) -> nix::Result<()> {
    if pgid <= 1 {
        return Err(Errno::EINVAL);
    }
    killpg(Pid::from_raw(pgid), signal)
}

#[cfg(test)]
mod confine_tests {
    use super::*;

    fn ra(uid: u32, gid: u32, groups: &[u32]) -> RunAs {
        RunAs {
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn a_non_root_client_logs_only_below_the_log_root() {
        let root = Path::new("/opt/data/logs");
        let client = Some((10000, 10000));
        let dir = |p: &str| LogTarget::Dir(PathBuf::from(p));
        assert_eq!(
            confine_log(dir("/opt/data/logs/gateways/work"), client, root),
            Ok(dir("/opt/data/logs/gateways/work"))
        );
        for outside in [
            "/etc",
            "/opt/data/logs/../../../root",
            "/opt/data/logsx",
            "/opt/data/logs",
            "relative/logs",
        ] {
            assert!(
                confine_log(dir(outside), client, root).is_err(),
                "{outside} was accepted"
            );
        }
        assert_eq!(
            confine_log(LogTarget::Inherit, client, root),
            Ok(LogTarget::Default)
        );
        assert_eq!(
            confine_log(dir("/etc"), Some((0, 0)), root),
            Ok(dir("/etc"))
        );
        assert!(confine_log(dir("/etc"), None, root).is_err());
    }

    #[test]
    fn a_non_root_client_cannot_register_a_more_privileged_service() {
        let service_user = ra(10000, 10000, &[10000, 44]);
        // Asked for root, or for nothing (which would mean "as the supervisor": root).
        for asked in [Some(ra(0, 0, &[0])), None, Some(ra(10000, 0, &[0]))] {
            assert_eq!(
                confine_run_as(asked, Some((10000, 10000)), Some(&service_user)),
                Some(service_user.clone())
            );
            assert_eq!(
                confine_run_as(None, Some((1234, 1234)), Some(&service_user)),
                Some(ra(1234, 1234, &[1234]))
            );
        }
        assert_eq!(
            confine_run_as(Some(ra(0, 0, &[0])), Some((0, 0)), None),
            Some(ra(0, 0, &[0])),
            "root may"
        );
        assert_eq!(
            confine_run_as(None, None, None),
            Some(ra(65534, 65534, &[65534]))
        );
    }
}

#[cfg(test)]
mod poll_tests {
    use super::*;

    #[test]
    fn a_persistent_poll_error_backs_off_and_a_success_resets_it() {
        let mut f = PollFailures::default();
        let pauses: Vec<(Duration, bool)> = (0..10).map(|_| f.failed()).collect();
        assert_eq!(
            pauses[0],
            (Duration::from_millis(10), true),
            "first: short, reported"
        );
        assert_eq!(
            pauses[1],
            (Duration::from_millis(20), false),
            "reported once"
        );
        assert!(pauses.windows(2).all(|w| w[1].0 >= w[0].0), "{pauses:?}");
        assert_eq!(pauses[9].0, Duration::from_secs(1), "capped");
        // Ten failures in a row cost seconds, not a spinning core.
        let total: Duration = pauses.iter().map(|p| p.0).sum();
        assert!(total >= Duration::from_secs(3), "{total:?}");
        assert!(f.succeeded(), "recovery is reported");
        assert!(!f.succeeded(), "once");
        assert_eq!(
            f.failed(),
            (Duration::from_millis(10), true),
            "a new streak"
        );
    }

    #[test]
    fn poll_timeouts_round_up() {
        assert_eq!(poll_timeout(None), PollTimeout::NONE);
        assert_eq!(poll_timeout(Some(Duration::ZERO)), PollTimeout::ZERO);
        assert_eq!(
            poll_timeout(Some(Duration::from_micros(1))),
            PollTimeout::from(1u16)
        );
    }
}
