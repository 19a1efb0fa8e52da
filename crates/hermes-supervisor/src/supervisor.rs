//! The event loop: [`Supervisor`] owns the lock, the control socket, the notify sockets, the
//! child pipes and the log files, and executes what [`Machine`] decides.
//!
//! Shape (catatonit's, not a sleep tick): block signals, read them from a `signalfd`, and wait
//! in exactly one place — `poll` on the signalfd, the listener, every client, every notify
//! socket and every child pipe, with the timeout set to the next deadline. Each wake-up:
//! collect events, `machine.handle(event, now)`, execute the actions.
//!
//! This file is the loop itself: set-up ([`Supervisor::new`]: lock, socket, notify and group
//! directories), [`Supervisor::run`], the wait, signals and reaping, and executing actions.
//! The jobs the loop hands out live beside it, each an `impl Supervisor` block:
//! * `spawn` — starting a service (everything prepared before `fork`, only async-signal-safe
//!   calls after) and its readiness socket; `spawn_error` words why a start failed;
//! * `capture` — service output: pipes into lines, log files and the mirror;
//! * `control` — the control server: accepting clients, frames, replies, client limits, and
//!   what a non-root client may register ([`confine_run_as`], [`confine_log`]).
//!
//! Invariants:
//! * Nothing blocks: every fd is non-blocking; pipes are read at most [`READ_CHUNK`] per wake so
//!   one chatty service cannot starve the others; a client gets at most
//!   [`MAX_REQUEST`](crate::protocol::MAX_REQUEST) bytes of requests and
//!   [`MAX_QUEUED_REPLIES`](crate::protocol::MAX_QUEUED_REPLIES) of unread replies buffered
//!   (over that, it is not read from until it reads), and a deadline. Mirrored output goes
//!   through a bounded buffer written only when `poll` says the output is writable
//!   ([`crate::mirror`]): a reader that stops reading costs lines, never supervision. A failing
//!   `poll` slows the loop down (`PollFailures`), never spins it.
//! * Every child is reaped with `waitpid(-1, WNOHANG)` until none is left; pids that belong to
//!   no service (escaped descendants re-parented to us as PID 1 or sub-reaper) are reaped and
//!   ignored.
//! * Each service runs in its own process group (pgid = pid); stop and kill go to the group.
//!   When the main process exits the group is SIGKILLed, and the group is recorded in the
//!   runtime directory until it is empty, so a supervisor that was SIGKILLed has its
//!   left-overs stopped by the next one ([`crate::groups`]).

mod activation;
mod capture;
mod cgroups;
mod control;
mod memory;
mod resources;
mod sockets;
mod spawn;
mod spawn_error;

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hermes_privilege::SafeDir;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, killpg};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Gid, Pid, Uid};

use self::capture::Pipe;
use self::control::Conn;
pub use self::control::{confine_log, confine_run_as};
use self::spawn::Notify;
use crate::client::SOCKET_NAME;
use crate::error::Error;
use crate::groups::Groups;
use crate::logs::{LogFile, Rotation};
use crate::machine::{Action, Event, Machine, Outcome, RequestId, Timing};
use crate::mirror::{Mirror, MirrorOut};
use crate::spec::{Desired, RunAs, ServiceSpec};

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

    /// Shutdown has begun: `stopping` are the services whose stop signal just went out, in that
    /// order (empty when none was running). Called once; [`Supervisor::run`] returns when they
    /// have all exited. `hermes up` says so on its stderr.
    fn shutting_down(&mut self, stopping: &[String]) {
        let _ = stopping;
    }
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
    /// when stdin is a terminal and the main service uses [`LogTarget::Inherit`](crate::spec::LogTarget::Inherit).
    pub foreground_tty: bool,
    /// Most simultaneous control clients; more are answered `busy` and closed.
    pub max_clients: usize,
    /// The identity a service registered by a non-root client runs as when that client is
    /// this user (PID 1: the service user with its device groups). See [`confine_run_as`].
    pub default_run_as: Option<RunAs>,
    /// A client idle for this long is disconnected.
    pub client_deadline: Duration,
    /// How often what services use is sampled (their memory limits enforced, where their
    /// cgroup does not).
    pub sample_interval: Duration,
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
            sample_interval: Duration::from_secs(1),
        }
    }
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
    /// The listening sockets held for services.
    sockets: sockets::Sockets,
    /// What set-up had to do differently (see [`Supervisor::notes`]).
    notes: Vec<String>,
    /// What services use, sampled.
    sampler: resources::Sampler,
    /// Whether services get cgroups of their own.
    cgroups: memory::CgroupState,
    /// The services whose current process runs in its cgroup.
    in_cgroup: memory::InCgroups,
    /// The services with a limit told why there are no cgroups (once each).
    told_no_cgroups: std::collections::HashSet<String>,
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
        // Overwrite, then cut to length: truncating to zero first would make ext4 flush the
        // previous record to disk (its `auto_da_alloc` rule), half a millisecond of every boot.
        let record = format!("{}\n", std::process::id());
        lock.write_all_at(record.as_bytes(), 0)
            .and_then(|()| lock.set_len(record.len() as u64))
            .map_err(|e| Error::io("write", &lock_path, e))?;

        let socket = dir.join(SOCKET_NAME);
        // We hold the lock, so any socket file here is stale.
        let _ = fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).map_err(|e| Error::io("bind", &socket, e))?;
        fs::set_permissions(&socket, fs::Permissions::from_mode(0o660))
            .map_err(|e| Error::io("chmod", &socket, e))?;
        let mut notes = Vec::new();
        // Under systemd with a socket unit: its sockets, for the services that listen there.
        let from_systemd = hermes_listen::Inherited::from_env().unwrap_or_else(|e| {
            notes.push(format!(
                "ignoring the sockets systemd passed: {}",
                hermes_errors::one_line(&e)
            ));
            hermes_listen::Inherited::none()
        });
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
        let sampler = resources::Sampler::new(opts.sample_interval, Instant::now());
        Ok(Self {
            sampler,
            cgroups: memory::CgroupState::default(),
            in_cgroup: memory::InCgroups::new(),
            told_no_cgroups: std::collections::HashSet::new(),
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
            sockets: sockets::Sockets::new(from_systemd),
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
        let mut announced = false;
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
                // Before the machine sees the exit (and perhaps starts the service again): what
                // the process left outside its group goes with it.
                if let Event::Exited { pid, .. } = ev
                    && let Some(service) = self.machine.owner_of(pid).map(str::to_owned)
                {
                    self.stop_escaped(&service, pid, out);
                }
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
            for ev in self.sample_resources(now) {
                let acts = self.machine.handle(ev, now);
                self.execute(acts, hooks, out, &mut outcome);
            }
            self.service_clients(&ready.conns, now, hooks, out, &mut outcome);
            // In the turn shutdown began, before any stopped service's exit is handled: every
            // service signalled is still `stopping`.
            if !announced && self.machine.is_shutting_down() {
                announced = true;
                hooks.shutting_down(&self.machine.stopping());
            }
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
        // Sampling wakes the loop only while a service runs: PID 1 with nothing but its main
        // program (the tini use) stays asleep until something happens, as tini does.
        let sample_at = self
            .machine
            .any_service_running()
            .then(|| self.sampler.due());
        for t in [settle_at, self.groups.recheck_at(now), sample_at]
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
            // Before its exit: the kernel's OOM kill in its cgroup is the reason, not SIGKILL.
            events.extend(self.oom_killed(pid.as_raw()));
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
                Action::Reply { id, result } => self.reply(id, result),
                Action::DesiredChanged { spec, desired } => {
                    hooks.desired_state_changed(&spec, desired)
                }
                Action::Forgotten { service } => {
                    if let Some(n) = self.notify.remove(&service) {
                        let _ = fs::remove_file(&n.path);
                    }
                    self.forget_resources(&service);
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
                Action::MainCannotStart { text } => say_fatal(&text),
                Action::Finished(o) => *outcome = Some(o),
            }
        }
        self.release_parked_sockets(out);
    }

    /// Closes the held sockets of services that are parked or gone, and of a service waiting
    /// out a crash loop: a client is refused at once rather than left waiting for nobody (a
    /// crash-looping service's next process binds them again, `Sockets::prepare`). A service
    /// restarting otherwise (`backoff` after a few failures, `stopping` for a restart,
    /// `starting`) keeps them, so its clients wait in the backlog instead of being refused.
    fn release_parked_sockets(&mut self, out: &mut MirrorOut<'_>) {
        for service in self.sockets.services() {
            let parked = self.machine.state(&service).is_none_or(|state| {
                matches!(
                    state.name(),
                    crate::StateName::Down | crate::StateName::Failed | crate::StateName::Disabled
                )
            });
            let crash_looping = self.machine.is_crash_looping(&service);
            if !parked && !crash_looping {
                continue;
            }
            let closed = self.sockets.release(&service);
            // At shutdown everything closes; only a service parked while the rest runs says so.
            if self.machine.is_shutting_down() {
                continue;
            }
            if let Some(spec) = self.machine.spec(&service) {
                let dir = self.log_dir_for(spec);
                let msg = if crash_looping {
                    format!(
                        "[hermes] closed its socket(s) {} while it crash-loops (clients are refused, \
                         not kept waiting); its next start binds them again",
                        closed.join(", ")
                    )
                } else {
                    format!("[hermes] closed its socket(s) {}", closed.join(", "))
                };
                self.emit(&service, dir.as_deref(), msg.as_bytes(), out);
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

/// Signals a process group. Refuses pgids 0 and 1, which would hit ourselves or everyone.
fn kill_group(pgid: i32, signal: Signal) -> nix::Result<()> {
    if pgid <= 1 {
        return Err(Errno::EINVAL);
    }
    killpg(Pid::from_raw(pgid), signal)
}

/// How long [`say_fatal`] waits for stderr to take its line: the loop is shutting down, and a
/// stalled reader must not keep the container from exiting.
const FATAL_WRITE_WAIT: Duration = Duration::from_millis(200);

/// One line on stderr in tini's shape (`[FATAL tini (7)] exec /x failed: No such file or
/// directory`): `[FATAL hermes (<pid>)] <text>`. Written only when `poll` says stderr takes it,
/// in one write shorter than `PIPE_BUF`, so it cannot block the loop.
fn say_fatal(text: &str) {
    let mut line = format!("[FATAL hermes ({})] {text}", std::process::id());
    // One atomic pipe write: cut a (pathologically) long program name, on a char boundary.
    let mut end = line.len().min(4000);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line.truncate(end);
    line.push('\n');
    let stderr = std::io::stderr();
    let mut fds = [PollFd::new(stderr.as_fd(), PollFlags::POLLOUT)];
    let wait = PollTimeout::try_from(FATAL_WRITE_WAIT).unwrap_or(PollTimeout::ZERO);
    if matches!(poll(&mut fds, wait), Ok(n) if n > 0) {
        let _ = stderr.lock().write_all(line.as_bytes());
    }
}

#[cfg(test)]
mod tests {
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
