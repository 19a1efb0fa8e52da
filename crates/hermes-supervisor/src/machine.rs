//! The pure supervision state machine: [`Machine::handle`] takes an [`Event`] and the time,
//! changes service states, and returns the [`Action`]s the event loop must carry out.
//!
//! Nothing here touches a process, a file or the clock; tests drive it with made-up pids and
//! instants. The loop in `supervisor.rs` is the only executor.
//!
//! Words defined here:
//! * **failure streak** — consecutive exits that asked for a backoff restart; it resets when a
//!   process stayed up for [`Timing::reset_after`] or an operator starts the service.
//! * **crash loop** — a failure streak of at least [`Timing::crash_loop_after`]; the reason
//!   says so.
//! * **settle time** — how long a process must survive in `starting` to count as `up` when it
//!   never sends `READY=1`.
//! * **lingering group** — the process group of a service's previous run, SIGKILLed when its
//!   main process exited (or found left over at start-up) and not yet empty. The service is
//!   not started again until the loop reports [`Event::GroupGone`], or
//!   [`Timing::group_exit_wait`] has passed: a helper still holding the service's port would
//!   make the new run fail.
//!
//! Exit classes (the restart-policy table):
//!
//! | exit            | always            | on-failure        | never     |
//! |-----------------|-------------------|-------------------|-----------|
//! | 78              | failed            | failed            | failed    |
//! | 75              | restart now*      | restart now*      | restart now* |
//! | 0               | restart (backoff) | down              | down      |
//! | other / signal  | restart (backoff) | restart (backoff) | failed    |
//!
//! "backoff" waits `backoff_first * 2^(streak-1)` capped at `backoff_cap`, except that a
//! service that had reached `up` (ready, or alive for the settle time) is replaced at once.
//!
//! \* A restart request (75) is honoured at once when it starts a streak; repeated ones within
//! the streak (no [`Timing::reset_after`] of uptime in between) count in it and back off like
//! failures, so a service that always exits 75 is a crash loop, not a hot loop.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

mod handover;
use handover::{HandOver, Replacing, Retiring};

use crate::protocol::ErrorCode;
use crate::spec::{Desired, RestartPolicy, ServiceSpec};
use crate::status::{ExitStatus, ServiceStatus, StateName};

/// Identifies a control request whose reply may come later (unregister waits for the exit).
pub type RequestId = u64;

/// Exit code meaning "bad configuration, do not restart" ([`hermes_errors::exit::CONFIG`]), as
/// an [`ExitStatus::Code`].
pub const EXIT_CONFIG: i32 = hermes_errors::exit::CONFIG as i32;
/// Exit code meaning "restart me now" ([`hermes_errors::exit::TEMPFAIL`]), as an
/// [`ExitStatus::Code`].
pub const EXIT_TEMPFAIL: i32 = hermes_errors::exit::TEMPFAIL as i32;
/// Exit status reported for a main service that could not be spawned: not found (as a
/// shell's "command not found", also a missing `#!` interpreter).
pub const EXIT_SPAWN_FAILED: i32 = 127;
/// Exit status reported for a main service that was found but cannot be executed (no
/// permission, not an executable format), as a shell reports it.
pub const EXIT_NOT_EXECUTABLE: i32 = 126;

/// The timing knobs of supervision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Survival time after which a `starting` service without readiness counts as `up`.
    pub settle: Duration,
    /// First backoff delay; doubles on each further failure.
    pub backoff_first: Duration,
    /// Backoff ceiling.
    pub backoff_cap: Duration,
    /// Uptime after which the failure streak is forgiven.
    pub reset_after: Duration,
    /// Failure streak length reported as a crash loop.
    pub crash_loop_after: u32,
    /// Longest a start waits for the lingering group of the previous run to be gone.
    pub group_exit_wait: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            settle: Duration::from_secs(1),
            backoff_first: Duration::from_millis(50),
            backoff_cap: Duration::from_secs(30),
            reset_after: Duration::from_secs(60),
            crash_loop_after: 5,
            group_exit_wait: Duration::from_secs(1),
        }
    }
}

impl Timing {
    /// The delay before retry number `streak` (1-based): `first * 2^(streak-1)`, capped.
    pub fn backoff(&self, streak: u32) -> Duration {
        let exp = streak.saturating_sub(1).min(31);
        self.backoff_first
            .saturating_mul(1u32 << exp)
            .min(self.backoff_cap)
    }
}

/// What happens once a stopping process has exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterStop {
    /// Park as `down` (operator stop).
    Down,
    /// Spawn again (operator restart).
    Restart,
    /// Remove the service and answer these pending unregister requests.
    Forget(Vec<RequestId>),
    /// Park as `down`; the supervisor is shutting down.
    Shutdown,
}

/// A service's state. Each variant carries exactly the data that exists in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceState {
    /// Switched off by configuration.
    Disabled {
        /// Since when.
        since: Instant,
    },
    /// Not running and not meant to be.
    Down {
        /// Since when.
        since: Instant,
        /// Why.
        reason: String,
    },
    /// Spawned, not yet ready or settled.
    Starting {
        /// Pid, which is also the process group id.
        pid: i32,
        /// Spawn time.
        since: Instant,
    },
    /// Running and ready.
    Up {
        /// Pid / process group id.
        pid: i32,
        /// Spawn time (for uptime).
        spawned: Instant,
        /// When it became up.
        since: Instant,
        /// Whether readiness came from `READY=1` (else from the settle time).
        notified: bool,
    },
    /// Waiting to be spawned again.
    Backoff {
        /// Since when.
        since: Instant,
        /// When the next spawn happens.
        until: Instant,
        /// Why (includes the crash-loop wording).
        reason: String,
    },
    /// Stop signal sent.
    Stopping {
        /// Pid / process group id.
        pid: i32,
        /// Spawn time.
        spawned: Instant,
        /// When the stop began.
        since: Instant,
        /// When `SIGKILL` goes to the group; `None` once it has been sent.
        kill_at: Option<Instant>,
        /// What to do after the exit.
        then: AfterStop,
    },
    /// Parked after a failure restarting will not fix.
    Failed {
        /// Since when.
        since: Instant,
        /// Why.
        reason: String,
    },
}

impl ServiceState {
    /// The state's name.
    pub fn name(&self) -> StateName {
        match self {
            ServiceState::Disabled { .. } => StateName::Disabled,
            ServiceState::Down { .. } => StateName::Down,
            ServiceState::Starting { .. } => StateName::Starting,
            ServiceState::Up { .. } => StateName::Up,
            ServiceState::Backoff { .. } => StateName::Backoff,
            ServiceState::Stopping { .. } => StateName::Stopping,
            ServiceState::Failed { .. } => StateName::Failed,
        }
    }

    /// The live process, if there is one.
    pub fn pid(&self) -> Option<i32> {
        match *self {
            ServiceState::Starting { pid, .. }
            | ServiceState::Up { pid, .. }
            | ServiceState::Stopping { pid, .. } => Some(pid),
            ServiceState::Disabled { .. }
            | ServiceState::Down { .. }
            | ServiceState::Backoff { .. }
            | ServiceState::Failed { .. } => None,
        }
    }

    fn since(&self) -> Instant {
        match *self {
            ServiceState::Disabled { since }
            | ServiceState::Down { since, .. }
            | ServiceState::Starting { since, .. }
            | ServiceState::Up { since, .. }
            | ServiceState::Backoff { since, .. }
            | ServiceState::Stopping { since, .. }
            | ServiceState::Failed { since, .. } => since,
        }
    }

    fn spawned(&self) -> Option<Instant> {
        match *self {
            ServiceState::Starting { since, .. } => Some(since),
            ServiceState::Up { spawned, .. } | ServiceState::Stopping { spawned, .. } => {
                Some(spawned)
            }
            ServiceState::Disabled { .. }
            | ServiceState::Down { .. }
            | ServiceState::Backoff { .. }
            | ServiceState::Failed { .. } => None,
        }
    }
}

/// An operator request that changes something.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Start (or keep running).
    Start(String),
    /// Stop and keep stopped.
    Stop(String),
    /// Stop if running, then start.
    Restart(String),
    /// Add a service at run time (boxed: a spec is much larger than any other request).
    Register(Box<ServiceSpec>),
    /// Stop, wait for the exit, forget. Idempotent.
    Unregister(String),
    /// Set a service's held sockets, hand-over, stop grace and memory limit (its next start
    /// uses them).
    Listen {
        /// Service name.
        service: String,
        /// The sockets to hold.
        listen: Vec<crate::spec::Listen>,
        /// Restart by hand-over.
        handover: bool,
        /// Grace between the stop signal and SIGKILL.
        stop_grace: Duration,
        /// Its memory limit (the running process is held to it from the next sample; a
        /// cgroup's limit from the next start).
        memory_max: Option<u64>,
    },
    /// Stop everything and end the loop.
    Shutdown,
}

/// Why an operator request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpError {
    /// No service by that name.
    #[error("unknown service `{0}`")]
    UnknownService(String),
    /// A different service with that name exists.
    #[error("service `{0}` is already registered with a different spec")]
    AlreadyRegistered(String),
    /// The supervisor is shutting down and starts nothing.
    #[error("the supervisor is shutting down")]
    ShuttingDown,
    /// The change would make the spec invalid (the reason says why).
    #[error("{0}")]
    InvalidSpec(String),
}

impl OpError {
    /// Machine-readable code for the protocol.
    pub fn code(&self) -> ErrorCode {
        match self {
            OpError::UnknownService(_) => ErrorCode::UnknownService,
            OpError::AlreadyRegistered(_) => ErrorCode::AlreadyRegistered,
            OpError::ShuttingDown => ErrorCode::ShuttingDown,
            OpError::InvalidSpec(_) => ErrorCode::InvalidRequest,
        }
    }
}

/// Input to [`Machine::handle`].
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The loop starts: spawn every enabled service.
    Boot,
    /// A [`Action::Spawn`] succeeded.
    Spawned {
        /// Service name.
        service: String,
        /// New pid (= pgid).
        pid: i32,
    },
    /// A [`Action::Spawn`] failed before `exec`.
    SpawnFailed {
        /// Service name.
        service: String,
        /// The error in one line naming what failed (`cannot start: …`, `cannot change to
        /// directory …`): the state's reason as it is.
        reason: String,
        /// The shell's code for it: [`EXIT_SPAWN_FAILED`] or [`EXIT_NOT_EXECUTABLE`].
        code: i32,
    },
    /// A child was reaped. Unknown pids (orphans) are ignored.
    Exited {
        /// The reaped pid.
        pid: i32,
        /// How it ended.
        status: ExitStatus,
    },
    /// `READY=1` arrived for the service whose leader has this pid.
    Ready {
        /// Leader pid.
        pid: i32,
    },
    /// Time passed; fire due deadlines.
    Tick,
    /// The process group with this id has no member left (a lingering group is gone).
    GroupGone {
        /// The group id.
        pgid: i32,
    },
    /// At start-up, before [`Event::Boot`]: a group a previous supervisor recorded for this
    /// service was still running and has been killed; it lingers until gone.
    Leftover {
        /// Service name.
        service: String,
        /// The group id.
        pgid: i32,
    },
    /// An operator request.
    Control {
        /// Reply token.
        id: RequestId,
        /// The request.
        op: Op,
    },
    /// SIGTERM/SIGINT: stop everything; a second one kills what is left.
    Terminate,
    /// The service whose process has this pid went over its memory limit (the loop sampled
    /// its group over `memory_max`, or its cgroup was OOM-killed): its group is SIGKILLed and
    /// the exit that follows is a failure whose reason is `reason`
    /// ([`crate::status::over_limit_reason`]), restarted through the normal backoff.
    OverLimit {
        /// The service's current pid.
        pid: i32,
        /// What the state's reason says.
        reason: String,
    },
}

/// How the loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Shutdown was requested (signal or control socket); everything is stopped.
    Stopped,
    /// The main service exited with this status; everything else is stopped.
    MainExited(ExitStatus),
}

impl Outcome {
    /// Process exit code for this outcome (0, or the main program's code / 128+signal).
    pub fn exit_code(self) -> i32 {
        match self {
            Outcome::Stopped => 0,
            Outcome::MainExited(s) => s.exit_code(),
        }
    }
}

/// Output of [`Machine::handle`]: what the loop must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Spawn the service now and report [`Event::Spawned`] or [`Event::SpawnFailed`].
    Spawn {
        /// Service name.
        service: String,
    },
    /// Send a signal to a process group (errors such as `ESRCH` are ignored).
    Kill {
        /// Process group id.
        pgid: i32,
        /// Signal.
        signal: Signal,
    },
    /// Answer a control request.
    Reply {
        /// Token from [`Event::Control`].
        id: RequestId,
        /// Outcome.
        result: Result<(), OpError>,
    },
    /// An operator changed what the service should be; call the hook.
    DesiredChanged {
        /// The service.
        spec: Box<ServiceSpec>,
        /// New desired state.
        desired: Desired,
    },
    /// The service was removed; drop its resources.
    Forgotten {
        /// Service name.
        service: String,
    },
    /// A supervisor message about a service, for the mirrored output.
    Note {
        /// Service name.
        service: String,
        /// The message.
        text: String,
    },
    /// PID 1's main program could not be started: said on the supervisor's stderr in one
    /// line, as tini says it (not as the main program's output: it printed nothing).
    MainCannotStart {
        /// The error in one line (`cannot start: …`).
        text: String,
    },
    /// Everything is stopped; end the loop.
    Finished(Outcome),
}

#[derive(Debug, Clone)]
struct Service {
    spec: ServiceSpec,
    state: ServiceState,
    restarts: u32,
    streak: u32,
    last_exit: Option<ExitStatus>,
    /// `last_exit` came after the supervisor's own stop signal.
    last_exit_planned: bool,
    started: bool,
    seq: u64,
    lingering: Option<Lingering>,
    /// A hand-over's old process while its successor starts (`handover`).
    replacing: Option<Replacing>,
    /// Old processes finishing their work after a hand-over.
    retiring: Vec<Retiring>,
    /// The latest hand-over, for status.
    handover: Option<HandOver>,
    /// Why the supervisor killed the current process (its memory limit): the reason of the
    /// exit that follows, instead of the signal.
    killed_for: Option<String>,
    /// Why the latest failure restart happened, for status.
    last_failure: Option<String>,
}

/// A killed process group that still has members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Lingering {
    pgid: i32,
    since: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shutdown {
    Running,
    Stopping(Outcome),
    Finished,
}

/// All services and their states; see the module doc.
#[derive(Debug, Clone)]
pub struct Machine {
    services: Vec<Service>,
    timing: Timing,
    main: Option<String>,
    shutdown: Shutdown,
    seq: u64,
}

impl Machine {
    /// A machine for these services (not started until [`Event::Boot`]). `main` names the
    /// service whose exit ends the loop (PID 1's main program).
    pub fn new(
        specs: Vec<ServiceSpec>,
        timing: Timing,
        main: Option<String>,
        now: Instant,
    ) -> Self {
        let mut m = Self {
            services: Vec::new(),
            timing,
            main,
            shutdown: Shutdown::Running,
            seq: 0,
        };
        for spec in specs {
            if m.find(&spec.name).is_none() {
                m.services.push(Self::fresh(spec, now));
            }
        }
        m
    }

    fn fresh(spec: ServiceSpec, now: Instant) -> Service {
        let state = if spec.enabled {
            let reason = if spec.autostart {
                "not started yet"
            } else {
                "registered; waiting for `start`"
            };
            ServiceState::Down {
                since: now,
                reason: reason.into(),
            }
        } else {
            ServiceState::Disabled { since: now }
        };
        Service {
            spec,
            state,
            restarts: 0,
            streak: 0,
            last_exit: None,
            last_exit_planned: false,
            started: false,
            seq: 0,
            lingering: None,
            replacing: None,
            retiring: Vec::new(),
            handover: None,
            killed_for: None,
            last_failure: None,
        }
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.services.iter().position(|s| s.spec.name == name)
    }

    fn find_pid(&self, pid: i32) -> Option<usize> {
        self.services
            .iter()
            .position(|s| s.state.pid() == Some(pid))
    }

    /// Whether any service but the main program has a process now.
    pub fn any_service_running(&self) -> bool {
        self.services
            .iter()
            .any(|s| s.state.pid().is_some() && self.main.as_deref() != Some(s.spec.name.as_str()))
    }

    /// The spec of the service whose current process has this pid.
    pub fn spec_of_pid(&self, pid: i32) -> Option<&ServiceSpec> {
        self.find_pid(pid).map(|i| &self.services[i].spec)
    }

    /// The spec of a service.
    pub fn spec(&self, name: &str) -> Option<&ServiceSpec> {
        self.find(name).map(|i| &self.services[i].spec)
    }

    /// The state of a service.
    pub fn state(&self, name: &str) -> Option<&ServiceState> {
        self.find(name).map(|i| &self.services[i].state)
    }

    /// The service whose current process has this pid.
    pub fn owner_of(&self, pid: i32) -> Option<&str> {
        self.find_pid(pid)
            .map(|i| self.services[i].spec.name.as_str())
    }

    /// Pids of all live service processes (leaders = process groups), the old processes of
    /// hand-overs included.
    pub fn live_pids(&self) -> Vec<i32> {
        self.services
            .iter()
            .flat_map(|s| {
                let old = s.replacing.iter().map(|r| r.pid);
                s.state
                    .pid()
                    .into_iter()
                    .chain(old)
                    .chain(s.retiring.iter().map(|r| r.pid))
            })
            .collect()
    }

    /// Pids of a service's live processes: its current one and the old ones of hand-overs.
    pub fn pids_of(&self, name: &str) -> Vec<i32> {
        self.find(name).map_or_else(Vec::new, |i| {
            let s = &self.services[i];
            s.state
                .pid()
                .into_iter()
                .chain(s.replacing.iter().map(|r| r.pid))
                .chain(s.retiring.iter().map(|r| r.pid))
                .collect()
        })
    }

    /// The main service's live process group, for signal forwarding.
    pub fn main_pgid(&self) -> Option<i32> {
        let main = self.main.as_deref()?;
        self.state(main).and_then(ServiceState::pid)
    }

    /// Whether `name` waits in `backoff` after a crash loop (a failure streak of at least
    /// [`Timing::crash_loop_after`]): its next process is likely to fail too.
    pub fn is_crash_looping(&self, name: &str) -> bool {
        self.find(name).is_some_and(|i| {
            let s = &self.services[i];
            s.state.name() == crate::StateName::Backoff && s.streak >= self.timing.crash_loop_after
        })
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown != Shutdown::Running
    }

    /// The services being stopped right now, in the order their stop signals went out (newest
    /// start first, as shutdown stops them): what a supervisor in the foreground says it stops.
    pub fn stopping(&self) -> Vec<String> {
        let mut stopping: Vec<&Service> = self
            .services
            .iter()
            .filter(|s| matches!(s.state, ServiceState::Stopping { .. }))
            .collect();
        stopping.sort_by_key(|s| std::cmp::Reverse(s.seq));
        stopping.iter().map(|s| s.spec.name.clone()).collect()
    }

    /// The earliest instant at which [`Event::Tick`] has work to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.services
            .iter()
            .filter_map(|s| match s.state {
                ServiceState::Starting { since, .. } => Some(since + self.timing.settle),
                ServiceState::Backoff { until, .. } if !self.is_shutting_down() => {
                    Some(match s.lingering {
                        // Sooner if the loop reports the group gone.
                        Some(l) => until.max(l.since + self.timing.group_exit_wait),
                        None => until,
                    })
                }
                ServiceState::Stopping { kill_at, .. } => kill_at,
                // Shutting down: nothing is started again.
                ServiceState::Backoff { .. } => None,
                ServiceState::Disabled { .. }
                | ServiceState::Down { .. }
                | ServiceState::Up { .. }
                | ServiceState::Failed { .. } => None,
            })
            .chain(self.retiring_deadline())
            .min()
    }

    /// Status of every service, in registration order.
    pub fn status(&self, now: Instant) -> Vec<ServiceStatus> {
        self.services.iter().map(|s| Self::row(s, now)).collect()
    }

    /// Status of one service.
    pub fn status_of(&self, name: &str, now: Instant) -> Option<ServiceStatus> {
        self.find(name).map(|i| Self::row(&self.services[i], now))
    }

    fn row(s: &Service, now: Instant) -> ServiceStatus {
        let secs = |t: Instant| now.saturating_duration_since(t).as_secs_f64();
        let reason = match &s.state {
            ServiceState::Down { reason, .. }
            | ServiceState::Backoff { reason, .. }
            | ServiceState::Failed { reason, .. } => reason.clone(),
            ServiceState::Disabled { .. } => "disabled in configuration".into(),
            ServiceState::Starting { .. } => "waiting for readiness".into(),
            ServiceState::Up { notified: true, .. } => "ready (notified)".into(),
            ServiceState::Up { .. } => String::new(),
            ServiceState::Stopping { kill_at: None, .. } => "killed (SIGKILL), waiting".into(),
            ServiceState::Stopping { .. } => format!("sent {}", s.spec.stop_signal.as_str()),
        };
        // A hand-over's old processes, still finishing their work, are said beside the state.
        let reason = match s.retiring.as_slice() {
            [] => reason,
            old => {
                let pids: Vec<String> = old.iter().map(|r| r.pid.to_string()).collect();
                let draining = format!("replaced pid {} finishing its work", pids.join(", "));
                if reason.is_empty() {
                    draining
                } else {
                    format!("{reason}; {draining}")
                }
            }
        };
        ServiceStatus {
            name: s.spec.name.clone(),
            state: s.state.name(),
            pid: s.state.pid(),
            uptime_secs: s.state.spawned().map(secs),
            since_secs: secs(s.state.since()),
            restarts: s.restarts,
            last_exit: s.last_exit,
            last_exit_planned: s.last_exit_planned,
            reason,
            profile: s.spec.profile.clone(),
            draining: s.retiring.iter().map(|r| r.pid).collect(),
            handover: s.handover.as_ref().map(HandOver::status),
            listening: Vec::new(),
            resources: None,
            memory_max: None,
            pids_max: s.spec.pids_max,
            pids_enforced_by: None,
            last_failure: s.last_failure.clone(),
        }
    }

    /// Applies one event. See the module doc for the transition table.
    pub fn handle(&mut self, event: Event, now: Instant) -> Vec<Action> {
        let mut out = Vec::new();
        match event {
            Event::Boot => {
                for i in 0..self.services.len() {
                    let down = matches!(self.services[i].state, ServiceState::Down { .. });
                    if down && self.services[i].spec.autostart {
                        self.spawn(i, now, &mut out);
                    }
                }
            }
            Event::Spawned { service, pid } => {
                if let Some(i) = self.find(&service) {
                    self.seq += 1;
                    let s = &mut self.services[i];
                    if s.started {
                        s.restarts = s.restarts.saturating_add(1);
                    }
                    s.started = true;
                    s.seq = self.seq;
                    s.state = ServiceState::Starting { pid, since: now };
                }
            }
            Event::SpawnFailed {
                service,
                reason,
                code,
            } => {
                if let Some(i) = self.find(&service) {
                    // The reason is a whole line already (`cannot start: …`, `cannot change
                    // to directory …`): the spawn knows which step failed.
                    let why = reason;
                    if self.handover_failed(i, &why, &mut out) {
                        return out;
                    }
                    // The main program never started: nothing will ever end the loop
                    // otherwise. Said in one line on stderr, with the shell's code (127 not
                    // found, 126 not executable), as tini and a shell would.
                    if self.main.as_deref() == Some(service.as_str()) {
                        out.push(Action::MainCannotStart { text: why.clone() });
                    }
                    self.failure(i, why, false, now, &mut out);
                    if self.main.as_deref() == Some(service.as_str()) {
                        let status = ExitStatus::Code(code);
                        self.begin_shutdown(Outcome::MainExited(status), now, &mut out);
                    }
                }
            }
            Event::Exited { pid, status } => self.exited(pid, status, now, &mut out),
            Event::Ready { pid } => {
                if let Some(i) = self.find_pid(pid) {
                    let s = &mut self.services[i];
                    if let ServiceState::Starting { pid, since } = s.state {
                        s.state = ServiceState::Up {
                            pid,
                            spawned: since,
                            since: now,
                            notified: true,
                        };
                        self.complete_handover(i, now, &mut out);
                    }
                }
            }
            Event::Tick => self.tick(now, &mut out),
            Event::GroupGone { pgid } => {
                for s in &mut self.services {
                    if s.lingering.is_some_and(|l| l.pgid == pgid) {
                        s.lingering = None;
                    }
                }
                // A start that waited for it is due now.
                self.tick(now, &mut out);
            }
            Event::Leftover { service, pgid } => {
                if let Some(i) = self.find(&service) {
                    self.services[i].lingering = Some(Lingering { pgid, since: now });
                }
            }
            Event::Control { id, op } => self.control(id, op, now, &mut out),
            Event::OverLimit { pid, reason } => self.over_memory(pid, reason, &mut out),
            Event::Terminate => {
                if self.is_shutting_down() {
                    // Second request: the operator is out of patience.
                    self.kill_retiring(&mut out);
                    for s in &mut self.services {
                        if let ServiceState::Stopping { pid, kill_at, .. } = &mut s.state {
                            *kill_at = None;
                            out.push(Action::Kill {
                                pgid: *pid,
                                signal: Signal::SIGKILL,
                            });
                        }
                    }
                } else {
                    self.begin_shutdown(Outcome::Stopped, now, &mut out);
                }
            }
        }
        self.check_finished(&mut out);
        out
    }

    /// Starts service `i` — unless its previous run's group still lingers: then it waits in
    /// `backoff` (the tick starts it once the group is gone, or after
    /// [`Timing::group_exit_wait`] regardless, saying so).
    fn spawn(&mut self, i: usize, now: Instant, out: &mut Vec<Action>) {
        if self.is_shutting_down() {
            return;
        }
        let wait = self.timing.group_exit_wait;
        let s = &mut self.services[i];
        if let Some(l) = s.lingering {
            if now < l.since + wait {
                if !matches!(s.state, ServiceState::Backoff { .. }) {
                    s.state = ServiceState::Backoff {
                        since: now,
                        until: now,
                        reason: format!(
                            "waiting for the processes left in its process group {} to exit",
                            l.pgid
                        ),
                    };
                }
                return;
            }
            s.lingering = None;
            out.push(Action::Note {
                service: s.spec.name.clone(),
                text: format!(
                    "processes of its previous run (process group {}) are still there {:.1}s \
                     after SIGKILL; starting anyway",
                    l.pgid,
                    wait.as_secs_f64()
                ),
            });
        }
        out.push(Action::Spawn {
            service: s.spec.name.clone(),
        });
    }

    fn tick(&mut self, now: Instant, out: &mut Vec<Action>) {
        let settle = self.timing.settle;
        let shutting = self.is_shutting_down();
        for i in 0..self.services.len() {
            let s = &mut self.services[i];
            match s.state {
                ServiceState::Starting { pid, since } if now >= since + settle => {
                    s.state = ServiceState::Up {
                        pid,
                        spawned: since,
                        since: now,
                        notified: false,
                    };
                    self.complete_handover(i, now, out);
                }
                ServiceState::Backoff { until, .. } if now >= until && !shutting => {
                    self.spawn(i, now, out);
                }
                ServiceState::Stopping {
                    pid,
                    kill_at: Some(t),
                    ..
                } if now >= t => {
                    if let ServiceState::Stopping { kill_at, .. } = &mut s.state {
                        *kill_at = None;
                    }
                    out.push(Action::Kill {
                        pgid: pid,
                        signal: Signal::SIGKILL,
                    });
                    out.push(Action::Note {
                        service: s.spec.name.clone(),
                        text: format!(
                            "did not stop within {:.1}s of {}; sent SIGKILL to its process group",
                            s.spec.stop_grace.as_secs_f64(),
                            s.spec.stop_signal.as_str()
                        ),
                    });
                }
                // Not due yet (the guards above), or nothing is ever due in these states.
                ServiceState::Starting { .. }
                | ServiceState::Backoff { .. }
                | ServiceState::Stopping { .. }
                | ServiceState::Disabled { .. }
                | ServiceState::Down { .. }
                | ServiceState::Up { .. }
                | ServiceState::Failed { .. } => {}
            }
        }
        self.tick_retiring(now, out);
    }

    fn stop_process(&mut self, i: usize, then: AfterStop, now: Instant, out: &mut Vec<Action>) {
        let s = &mut self.services[i];
        match &mut s.state {
            ServiceState::Starting { pid, since } => {
                let (pid, spawned) = (*pid, *since);
                Self::send_stop(s, pid, spawned, then, now, out);
            }
            ServiceState::Up { pid, spawned, .. } => {
                let (pid, spawned) = (*pid, *spawned);
                Self::send_stop(s, pid, spawned, then, now, out);
            }
            ServiceState::Stopping { then: t, .. } => {
                // Merge: pending unregister replies are never dropped.
                *t = match (std::mem::replace(t, AfterStop::Down), then) {
                    (AfterStop::Forget(mut a), AfterStop::Forget(b)) => {
                        a.extend(b);
                        AfterStop::Forget(a)
                    }
                    (AfterStop::Forget(a), _) => AfterStop::Forget(a),
                    (_, new) => new,
                };
            }
            // No process to stop.
            ServiceState::Disabled { .. }
            | ServiceState::Down { .. }
            | ServiceState::Backoff { .. }
            | ServiceState::Failed { .. } => {}
        }
    }

    fn send_stop(
        s: &mut Service,
        pid: i32,
        spawned: Instant,
        then: AfterStop,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        ask_to_stop(&s.spec, pid, out);
        s.state = ServiceState::Stopping {
            pid,
            spawned,
            since: now,
            kill_at: Some(now + s.spec.stop_grace),
            then,
        };
    }

    fn exited(&mut self, pid: i32, status: ExitStatus, now: Instant, out: &mut Vec<Action>) {
        if self.old_instance_exited(pid, status, now, out) {
            return;
        }
        let Some(i) = self.find_pid(pid) else {
            return; // an orphan or an escaped descendant: reaped, nothing to do
        };
        self.services[i].last_exit = Some(status);
        self.services[i].last_exit_planned =
            matches!(self.services[i].state, ServiceState::Stopping { .. });
        let killed_for = self.services[i].killed_for.take();
        // The main process is gone, however it ended: whatever it started in its group (a
        // helper holding its port, its output pipes) goes too, before any new run starts.
        out.push(Action::Kill {
            pgid: pid,
            signal: Signal::SIGKILL,
        });
        self.services[i].lingering = Some(Lingering {
            pgid: pid,
            since: now,
        });
        let state = self.services[i].state.clone();
        match state {
            ServiceState::Stopping { then, .. } => {
                let s = &mut self.services[i];
                match then {
                    AfterStop::Down => {
                        s.state = ServiceState::Down {
                            since: now,
                            reason: "stopped by operator".into(),
                        };
                        // Recorded again now that it has exited: a gateway that wrote its own
                        // state while it stopped (the agent's keeps the desired state it read
                        // when it started) must not leave the operator's stop unrecorded.
                        self.desired(i, Desired::Stopped, out);
                    }
                    AfterStop::Shutdown => {
                        s.state = ServiceState::Down {
                            since: now,
                            reason: "stopped for shutdown".into(),
                        };
                    }
                    AfterStop::Restart => {
                        s.streak = 0;
                        s.state = ServiceState::Down {
                            since: now,
                            reason: "restarting".into(),
                        };
                        self.spawn(i, now, out);
                    }
                    AfterStop::Forget(ids) => {
                        let name = self.forget(i, out);
                        out.push(Action::Forgotten { service: name });
                        for id in ids {
                            out.push(Action::Reply { id, result: Ok(()) });
                        }
                        return;
                    }
                }
            }
            ServiceState::Starting { since: spawned, .. } => {
                let why = killed_for
                    .clone()
                    .unwrap_or_else(|| format!("exited with {status} before it was ready"));
                if !self.handover_failed(i, &why, out) {
                    let uptime = now.saturating_duration_since(spawned);
                    let exit = Exit { status, killed_for };
                    self.classify(i, exit, uptime, false, now, out);
                }
            }
            ServiceState::Up { spawned, .. } => {
                let uptime = now.saturating_duration_since(spawned);
                let exit = Exit { status, killed_for };
                self.classify(i, exit, uptime, true, now, out);
            }
            // Unreachable: these states have no process, so `find_pid` never picks them.
            ServiceState::Disabled { .. }
            | ServiceState::Down { .. }
            | ServiceState::Backoff { .. }
            | ServiceState::Failed { .. } => {}
        }
        if self.main.as_deref() == Some(self.services[i].spec.name.as_str()) {
            self.begin_shutdown(Outcome::MainExited(status), now, out);
        }
    }

    /// Kills a running service over its memory limit; its exit then says why. A service already
    /// stopping is killed at once too (it would only grow during the grace).
    fn over_memory(&mut self, pid: i32, reason: String, out: &mut Vec<Action>) {
        let Some(i) = self.find_pid(pid) else {
            return; // exited since the sample
        };
        let s = &mut self.services[i];
        if s.killed_for.is_some() {
            return; // already killed, its exit not reaped yet
        }
        match &mut s.state {
            ServiceState::Starting { .. } | ServiceState::Up { .. } => {}
            ServiceState::Stopping { kill_at, .. } => *kill_at = None,
            ServiceState::Disabled { .. }
            | ServiceState::Down { .. }
            | ServiceState::Backoff { .. }
            | ServiceState::Failed { .. } => return,
        }
        out.push(Action::Note {
            service: s.spec.name.clone(),
            text: format!("{reason}; killing its process group {pid}"),
        });
        out.push(Action::Kill {
            pgid: pid,
            signal: Signal::SIGKILL,
        });
        s.killed_for = Some(reason);
    }

    /// The restart-policy table from the module doc.
    fn classify(
        &mut self,
        i: usize,
        exit: Exit,
        uptime: Duration,
        was_up: bool,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        let s = &mut self.services[i];
        if uptime >= self.timing.reset_after {
            s.streak = 0;
        }
        let park = |reason: String| ServiceState::Down { since: now, reason };
        let status = exit.status;
        // Killed at its memory limit: a failure whatever the signal says, under every policy.
        if let Some(reason) = exit.killed_for
            && self.shutdown == Shutdown::Running
            && self.main.as_deref() != Some(s.spec.name.as_str())
        {
            self.failure(i, reason, was_up, now, out);
            return;
        }
        let exited = exited_with(&s.spec, status);
        if self.shutdown != Shutdown::Running || self.main.as_deref() == Some(s.spec.name.as_str())
        {
            s.state = park(exited);
            return;
        }
        match (status, s.spec.restart) {
            (ExitStatus::Code(EXIT_CONFIG), _) => {
                s.state = ServiceState::Failed {
                    since: now,
                    reason: format!(
                        "configuration error (exit {EXIT_CONFIG}); fix it, then start it again"
                    ),
                };
                out.push(Action::Note {
                    service: s.spec.name.clone(),
                    text: format!("exited {EXIT_CONFIG} (configuration error); not restarting"),
                });
            }
            (ExitStatus::Code(EXIT_TEMPFAIL), _) => {
                // Whatever the policy: restarting is what was asked for.
                let first = s.streak == 0;
                let why = format!("asked for a restart (exit {EXIT_TEMPFAIL})");
                self.schedule_restart(i, why, was_up || first, now, out);
            }
            (ExitStatus::Code(0), RestartPolicy::OnFailure | RestartPolicy::Never) => {
                s.state = park("exited cleanly (code 0)".into());
            }
            (_, RestartPolicy::Never) => {
                s.state = ServiceState::Failed {
                    since: now,
                    reason: format!("{exited} (restart: never)"),
                };
            }
            (ExitStatus::Code(_) | ExitStatus::Signal(_), RestartPolicy::Always)
            | (ExitStatus::Code(_) | ExitStatus::Signal(_), RestartPolicy::OnFailure) => {
                let why = if status == ExitStatus::Code(0) {
                    "exited cleanly".to_string()
                } else {
                    exited
                };
                self.failure(i, why, was_up, now, out);
            }
        }
    }

    /// A failure: `failed` under `restart: never`, else a backoff restart.
    ///
    /// A service that had reached `up` is replaced at once (runit-fast; the settle time already
    /// bounds that loop to one spawn per settle period); one that fails before reaching `up`
    /// waits `backoff(streak)`. Both count in the streak, so either way a loop is reported.
    fn failure(
        &mut self,
        i: usize,
        why: String,
        was_up: bool,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        let s = &mut self.services[i];
        if s.spec.restart == RestartPolicy::Never {
            s.state = ServiceState::Failed {
                since: now,
                reason: why,
            };
            return;
        }
        self.schedule_restart(i, why, was_up, now, out);
    }

    /// Counts the exit in the streak, schedules the restart (at once when `immediate`, else
    /// after `backoff(streak)`) and words the reason, crash loop included.
    fn schedule_restart(
        &mut self,
        i: usize,
        why: String,
        immediate: bool,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        let timing = self.timing;
        let s = &mut self.services[i];
        s.last_failure = Some(why.clone());
        s.streak = s.streak.saturating_add(1);
        let delay = if immediate {
            Duration::ZERO
        } else {
            timing.backoff(s.streak)
        };
        let reason = if s.streak >= timing.crash_loop_after {
            format!(
                "crash loop: {} failures in a row, last {why}; {}",
                s.streak,
                retrying(delay)
            )
        } else {
            format!("{why}; {}", retrying(delay))
        };
        out.push(Action::Note {
            service: s.spec.name.clone(),
            text: reason.clone(),
        });
        s.state = ServiceState::Backoff {
            since: now,
            until: now + delay,
            reason,
        };
    }

    fn control(&mut self, id: RequestId, op: Op, now: Instant, out: &mut Vec<Action>) {
        let result = self.apply(id, op, now, out);
        match result {
            Ok(true) => out.push(Action::Reply { id, result: Ok(()) }),
            Ok(false) => {} // reply comes later (unregister waiting for an exit)
            Err(e) => out.push(Action::Reply { id, result: Err(e) }),
        }
    }

    /// One `apply` per operation; `Ok(false)` means the reply is deferred.
    fn apply(
        &mut self,
        id: RequestId,
        op: Op,
        now: Instant,
        out: &mut Vec<Action>,
    ) -> Result<bool, OpError> {
        let lookup = |m: &Self, name: &str| {
            m.find(name)
                .ok_or_else(|| OpError::UnknownService(name.to_string()))
        };
        match op {
            Op::Start(name) => {
                let i = lookup(self, &name)?;
                if self.is_shutting_down() {
                    return Err(OpError::ShuttingDown);
                }
                self.desired(i, Desired::Running, out);
                match self.services[i].state {
                    ServiceState::Starting { .. } | ServiceState::Up { .. } => {}
                    ServiceState::Stopping { .. } => {
                        self.stop_process(i, AfterStop::Restart, now, out)
                    }
                    // An operator's start also starts a service disabled in configuration.
                    ServiceState::Disabled { .. }
                    | ServiceState::Down { .. }
                    | ServiceState::Backoff { .. }
                    | ServiceState::Failed { .. } => {
                        self.services[i].streak = 0;
                        self.spawn(i, now, out);
                    }
                }
            }
            Op::Stop(name) => {
                let i = lookup(self, &name)?;
                self.desired(i, Desired::Stopped, out);
                self.retire_replacing(i, now, out);
                let s = &mut self.services[i];
                match s.state {
                    ServiceState::Backoff { .. } => {
                        s.state = ServiceState::Down {
                            since: now,
                            reason: "stopped by operator".into(),
                        };
                    }
                    ServiceState::Starting { .. }
                    | ServiceState::Up { .. }
                    | ServiceState::Stopping { .. } => {
                        self.stop_process(i, AfterStop::Down, now, out);
                    }
                    // Already not running, and not restarted by anything.
                    ServiceState::Disabled { .. }
                    | ServiceState::Down { .. }
                    | ServiceState::Failed { .. } => {}
                }
            }
            Op::Restart(name) => {
                let i = lookup(self, &name)?;
                if self.is_shutting_down() {
                    return Err(OpError::ShuttingDown);
                }
                self.desired(i, Desired::Running, out);
                // A hand-over under way goes on; an `up` service that asks for one gets it.
                if self.begin_handover(i, now, out) {
                    return Ok(true);
                }
                match self.services[i].state {
                    ServiceState::Starting { .. }
                    | ServiceState::Up { .. }
                    | ServiceState::Stopping { .. } => {
                        self.stop_process(i, AfterStop::Restart, now, out);
                    }
                    ServiceState::Disabled { .. }
                    | ServiceState::Down { .. }
                    | ServiceState::Backoff { .. }
                    | ServiceState::Failed { .. } => {
                        self.services[i].streak = 0;
                        self.spawn(i, now, out);
                    }
                }
            }
            Op::Register(spec) => {
                if let Some(i) = self.find(&spec.name) {
                    return if self.services[i].spec == *spec {
                        Ok(true)
                    } else {
                        Err(OpError::AlreadyRegistered(spec.name))
                    };
                }
                if self.is_shutting_down() {
                    return Err(OpError::ShuttingDown);
                }
                let start_now = spec.enabled && spec.autostart;
                self.services.push(Self::fresh(*spec, now));
                if start_now {
                    self.spawn(self.services.len() - 1, now, out);
                }
            }
            Op::Unregister(name) => {
                let Some(i) = self.find(&name) else {
                    return Ok(true); // idempotent: already gone
                };
                self.retire_replacing(i, now, out);
                if self.services[i].state.pid().is_some() {
                    self.stop_process(i, AfterStop::Forget(vec![id]), now, out);
                    return Ok(false);
                }
                // No process: nothing can race us, forget now.
                let name = self.forget(i, out);
                out.push(Action::Forgotten { service: name });
            }
            Op::Shutdown => self.begin_shutdown(Outcome::Stopped, now, out),
            Op::Listen {
                service,
                listen,
                handover,
                stop_grace,
                memory_max,
            } => {
                let i = lookup(self, &service)?;
                let mut spec = self.services[i].spec.clone();
                spec.listen = listen;
                spec.handover = handover;
                spec.stop_grace = stop_grace;
                spec.memory_max = memory_max;
                spec.validate().map_err(OpError::InvalidSpec)?;
                self.services[i].spec = spec;
            }
        }
        Ok(true)
    }

    /// Removes service `i`, SIGKILLing what is left of its hand-overs (nothing would reap
    /// their deadlines once it is gone), and returns its name.
    fn forget(&mut self, i: usize, out: &mut Vec<Action>) -> String {
        let s = self.services.remove(i);
        for pid in s
            .retiring
            .iter()
            .map(|r| r.pid)
            .chain(s.replacing.map(|r| r.pid))
        {
            out.push(Action::Kill {
                pgid: pid,
                signal: Signal::SIGKILL,
            });
        }
        s.spec.name
    }

    fn desired(&self, i: usize, desired: Desired, out: &mut Vec<Action>) {
        out.push(Action::DesiredChanged {
            spec: Box::new(self.services[i].spec.clone()),
            desired,
        });
    }

    /// Stops every service, newest start first. All stop signals go out at once (each with
    /// its own grace) so shutdown fits in a container runtime's stop timeout.
    fn begin_shutdown(&mut self, outcome: Outcome, now: Instant, out: &mut Vec<Action>) {
        if self.is_shutting_down() {
            return;
        }
        self.shutdown = Shutdown::Stopping(outcome);
        let mut order: Vec<usize> = (0..self.services.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.services[i].seq));
        for i in order {
            self.retire_replacing(i, now, out);
            match self.services[i].state {
                ServiceState::Backoff { .. } => {
                    self.services[i].state = ServiceState::Down {
                        since: now,
                        reason: "stopped for shutdown".into(),
                    };
                }
                ServiceState::Starting { .. } | ServiceState::Up { .. } => {
                    self.stop_process(i, AfterStop::Shutdown, now, out);
                }
                ServiceState::Stopping { .. } => {
                    if let ServiceState::Stopping { then, .. } = &mut self.services[i].state
                        && matches!(then, AfterStop::Restart)
                    {
                        *then = AfterStop::Shutdown;
                    }
                }
                // Nothing running, nothing to start.
                ServiceState::Disabled { .. }
                | ServiceState::Down { .. }
                | ServiceState::Failed { .. } => {}
            }
        }
    }

    fn check_finished(&mut self, out: &mut Vec<Action>) {
        if let Shutdown::Stopping(outcome) = self.shutdown
            && self.services.iter().all(|s| s.state.pid().is_none())
            && !self.any_old_instance()
        {
            self.shutdown = Shutdown::Finished;
            out.push(Action::Finished(outcome));
        }
    }
}

/// The stop signal to the process group `pgid`, then SIGCONT: a stopped (SIGSTOP) process
/// cannot act on the stop signal until continued.
fn ask_to_stop(spec: &ServiceSpec, pgid: i32, out: &mut Vec<Action>) {
    out.push(Action::Kill {
        pgid,
        signal: spec.stop_signal,
    });
    out.push(Action::Kill {
        pgid,
        signal: Signal::SIGCONT,
    });
}

/// `retrying now`, `retrying in 50ms`, `retrying in 1.6s`.
fn retrying(d: Duration) -> String {
    if d.is_zero() {
        "retrying now".into()
    } else if d < Duration::from_secs(1) {
        format!("retrying in {}ms", d.as_millis())
    } else {
        format!("retrying in {:.1}s", d.as_secs_f64())
    }
}

/// How a service's process ended, for the restart-policy table.
struct Exit {
    /// As `waitpid` said.
    status: ExitStatus,
    /// Why the supervisor killed it, if it did (its memory limit).
    killed_for: Option<String>,
}

/// How a run ended, in words: `exited with code 3`. A service run through `/bin/sh -c` (a
/// `command:` string) that ends with the shell's own 127 or 126 also says what the shell meant,
/// since the spawn itself succeeded and only the shell's line in the log names the command.
fn exited_with(spec: &ServiceSpec, status: ExitStatus) -> String {
    let shell = matches!(spec.argv.as_slice(), [sh, c, _] if sh == "/bin/sh" && c == "-c");
    match status {
        ExitStatus::Code(EXIT_SPAWN_FAILED) if shell => format!(
            "exited with {status} (command not found, as the shell says it; its log names the \
             command)"
        ),
        ExitStatus::Code(EXIT_NOT_EXECUTABLE) if shell => format!(
            "exited with {status} (permission denied or not executable, as the shell says it; \
             its log names the command)"
        ),
        _ => format!("exited with {status}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn machine(specs: Vec<ServiceSpec>) -> (Machine, Instant) {
        let t0 = Instant::now();
        (Machine::new(specs, Timing::default(), None, t0), t0)
    }

    fn svc(name: &str, restart: RestartPolicy) -> ServiceSpec {
        let mut s = ServiceSpec::shell(name, "true");
        s.restart = restart;
        s
    }

    /// Boots, spawns `name` as `pid`, lets it settle to `up`.
    fn boot(m: &mut Machine, t: Instant, name: &str, pid: i32) {
        let a = m.handle(Event::Boot, t);
        assert!(a.contains(&Action::Spawn {
            service: name.into()
        }));
        m.handle(
            Event::Spawned {
                service: name.into(),
                pid,
            },
            t,
        );
    }

    /// The process `pid` exits and its group is gone at once (the loop reports that after the
    /// SIGKILL the exit causes).
    fn exit(m: &mut Machine, pid: i32, status: ExitStatus, t: Instant) -> Vec<Action> {
        let mut a = m.handle(Event::Exited { pid, status }, t);
        a.extend(m.handle(Event::GroupGone { pgid: pid }, t));
        a
    }

    #[test]
    fn a_service_over_its_memory_limit_is_killed_and_restarted_with_the_reason() {
        for restart in [RestartPolicy::Always, RestartPolicy::OnFailure] {
            let (mut m, t0) = machine(vec![svc("leaky", restart), svc("calm", restart)]);
            boot(&mut m, t0, "leaky", 10);
            m.handle(
                Event::Spawned {
                    service: "calm".into(),
                    pid: 20,
                },
                t0,
            );
            let reason = crate::status::over_limit_reason((13 << 30) / 10, 1 << 30);
            let a = m.handle(
                Event::OverLimit {
                    pid: 10,
                    reason: reason.clone(),
                },
                t0 + ms(5),
            );
            assert!(a.contains(&Action::Kill {
                pgid: 10,
                signal: Signal::SIGKILL
            }));
            // A second sample before the exit is reaped kills nothing twice.
            let again = m.handle(
                Event::OverLimit {
                    pid: 10,
                    reason: reason.clone(),
                },
                t0 + ms(6),
            );
            assert!(again.is_empty(), "{again:?}");
            exit(&mut m, 10, ExitStatus::Signal(9), t0 + ms(10));
            let st = m.status_of("leaky", t0 + ms(10)).unwrap();
            assert_eq!(st.state, StateName::Backoff, "{restart:?}");
            assert!(
                st.reason
                    .starts_with("memory limit: 1.3 GiB > 1 GiB; retrying in"),
                "{}",
                st.reason
            );
            // Its neighbour is left alone.
            assert_eq!(m.status_of("calm", t0).unwrap().pid, Some(20));
            // The next run's own exit is said as usual.
            let a = m.handle(Event::Tick, t0 + Duration::from_secs(1));
            assert!(a.contains(&Action::Spawn {
                service: "leaky".into()
            }));
            m.handle(
                Event::Spawned {
                    service: "leaky".into(),
                    pid: 11,
                },
                t0 + Duration::from_secs(1),
            );
            exit(&mut m, 11, ExitStatus::Code(3), t0 + Duration::from_secs(2));
            let st = m.status_of("leaky", t0 + Duration::from_secs(2)).unwrap();
            assert!(st.reason.starts_with("exited with code 3"), "{}", st.reason);
        }
    }

    #[test]
    fn an_over_memory_report_for_a_gone_process_does_nothing() {
        let (mut m, t0) = machine(vec![svc("leaky", RestartPolicy::Always)]);
        boot(&mut m, t0, "leaky", 10);
        let reason = "memory limit: 2 GiB > 1 GiB".to_string();
        assert!(
            m.handle(Event::OverLimit { pid: 99, reason }, t0)
                .is_empty()
        );
        assert_eq!(m.status_of("leaky", t0).unwrap().state, StateName::Starting);
    }

    #[test]
    fn restart_policy_table() {
        use ExitStatus::{Code, Signal as Sig};
        use RestartPolicy::*;
        // (policy, exit, expected state after the exit)
        let table = [
            (Always, Code(78), StateName::Failed),
            (OnFailure, Code(78), StateName::Failed),
            (Never, Code(78), StateName::Failed),
            (Always, Code(75), StateName::Backoff),
            (OnFailure, Code(75), StateName::Backoff),
            (Never, Code(75), StateName::Backoff),
            (Always, Code(0), StateName::Backoff),
            (OnFailure, Code(0), StateName::Down),
            (Never, Code(0), StateName::Down),
            (Always, Code(1), StateName::Backoff),
            (OnFailure, Sig(9), StateName::Backoff),
            (Never, Code(1), StateName::Failed),
        ];
        for (policy, status, want) in table {
            let (mut m, t0) = machine(vec![svc("a", policy)]);
            boot(&mut m, t0, "a", 10);
            let t1 = t0 + ms(10);
            let acts = exit(&mut m, 10, status, t1);
            let st = m.status_of("a", t1).unwrap();
            assert!(!st.last_exit_planned, "nobody asked it to stop: {st:?}");
            assert_eq!(st.state, want, "{policy:?} {status:?}: {st:?}");
            assert_eq!(st.last_exit, Some(status));
            let immediate = acts.contains(&Action::Spawn {
                service: "a".into(),
            });
            assert_eq!(
                immediate,
                status == Code(75),
                "{policy:?} {status:?}: {acts:?}"
            );
        }
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_reports_a_crash_loop() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        boot(&mut m, t0, "a", 1);
        let mut t = t0;
        let mut delays = Vec::new();
        for n in 0..12 {
            let pid = 1 + n;
            t += ms(5);
            exit(&mut m, pid, ExitStatus::Code(1), t);
            let due = m.next_deadline().unwrap();
            delays.push(due - t);
            // Nothing before the deadline, a spawn at it.
            assert!(m.handle(Event::Tick, due - ms(1)).is_empty());
            let a = m.handle(Event::Tick, due);
            assert_eq!(
                a,
                vec![Action::Spawn {
                    service: "a".into()
                }]
            );
            t = due;
            m.handle(
                Event::Spawned {
                    service: "a".into(),
                    pid: pid + 1,
                },
                t,
            );
        }
        assert!(delays[0] <= ms(100), "first retry must be fast: {delays:?}");
        assert_eq!(delays[1], delays[0] * 2);
        assert_eq!(*delays.last().unwrap(), Duration::from_secs(30));
        assert!(m.status_of("a", t).unwrap().restarts == 12);
        exit(&mut m, 13, ExitStatus::Code(1), t);
        assert!(
            m.status_of("a", t)
                .unwrap()
                .reason
                .starts_with("crash loop")
        );
    }

    #[test]
    fn a_healthy_service_is_replaced_at_once_then_backs_off() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        boot(&mut m, t0, "a", 1);
        let t1 = t0 + Duration::from_secs(2);
        m.handle(Event::Tick, t1);
        assert_eq!(m.status_of("a", t1).unwrap().state, StateName::Up);
        exit(&mut m, 1, ExitStatus::Signal(9), t1);
        assert_eq!(m.next_deadline(), Some(t1));
        assert_eq!(
            m.handle(Event::Tick, t1),
            vec![Action::Spawn {
                service: "a".into()
            }]
        );
        m.handle(
            Event::Spawned {
                service: "a".into(),
                pid: 2,
            },
            t1,
        );
        // Dies again before settling: now it waits.
        exit(&mut m, 2, ExitStatus::Code(1), t1);
        assert_eq!(m.next_deadline(), Some(t1 + Timing::default().backoff(2)));
    }

    #[test]
    fn repeated_restart_requests_back_off_into_a_crash_loop() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Never)]);
        boot(&mut m, t0, "a", 1);
        let mut t = t0;
        let mut delays = Vec::new();
        for pid in 1..=7 {
            t += ms(5);
            exit(&mut m, pid, ExitStatus::Code(EXIT_TEMPFAIL), t);
            let due = m.next_deadline().expect("a restart is due");
            delays.push(due - t);
            t = due;
            let a = m.handle(Event::Tick, t);
            assert!(
                a.contains(&Action::Spawn {
                    service: "a".into()
                }),
                "{a:?}"
            );
            m.handle(
                Event::Spawned {
                    service: "a".into(),
                    pid: pid + 1,
                },
                t,
            );
        }
        // The first request at once, the next ones backing off like failures.
        assert_eq!(delays[0], Duration::ZERO);
        assert_eq!(delays[1], Timing::default().backoff(2));
        assert!(
            delays.windows(2).skip(1).all(|w| w[1] == w[0] * 2),
            "{delays:?}"
        );
        exit(&mut m, 8, ExitStatus::Code(EXIT_TEMPFAIL), t);
        let st = m.status_of("a", t).unwrap();
        assert_eq!(
            st.state,
            StateName::Backoff,
            "restart: never still restarts on 75"
        );
        assert!(
            st.reason.starts_with(
                "crash loop: 8 failures in a row, last asked for a restart (exit 75); retrying in "
            ),
            "{}",
            st.reason
        );
        // A request after a long healthy run starts a new streak: honoured at once.
        let late = t + Duration::from_secs(120);
        m.handle(Event::Tick, late);
        m.handle(
            Event::Spawned {
                service: "a".into(),
                pid: 9,
            },
            late,
        );
        let later = late + Duration::from_secs(61);
        let a = exit(&mut m, 9, ExitStatus::Code(EXIT_TEMPFAIL), later);
        assert!(
            a.contains(&Action::Spawn {
                service: "a".into()
            }),
            "{a:?}"
        );
        assert_eq!(
            m.status_of("a", later).unwrap().reason,
            "asked for a restart (exit 75); retrying now"
        );
    }

    #[test]
    fn long_uptime_resets_the_streak() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        boot(&mut m, t0, "a", 1);
        for pid in 1..5 {
            exit(&mut m, pid, ExitStatus::Code(1), t0);
            m.handle(
                Event::Spawned {
                    service: "a".into(),
                    pid: pid + 1,
                },
                t0,
            );
        }
        let late = t0 + Duration::from_secs(61);
        exit(&mut m, 5, ExitStatus::Code(1), late);
        assert_eq!(
            m.next_deadline().unwrap() - late,
            Timing::default().backoff_first
        );
    }

    #[test]
    fn an_exit_kills_the_group_and_the_restart_waits_for_it() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        boot(&mut m, t0, "a", 7);
        let t1 = t0 + Duration::from_secs(2);
        m.handle(Event::Tick, t1);
        // Up, then crashes: replaced at once — but not before its group is gone.
        let a = m.handle(
            Event::Exited {
                pid: 7,
                status: ExitStatus::Code(1),
            },
            t1,
        );
        assert_eq!(
            a.first(),
            Some(&Action::Kill {
                pgid: 7,
                signal: Signal::SIGKILL
            })
        );
        assert!(m.handle(Event::Tick, t1).is_empty(), "waits for group 7");
        assert!(
            m.handle(Event::GroupGone { pgid: 99 }, t1).is_empty(),
            "another group"
        );
        assert_eq!(
            m.handle(Event::GroupGone { pgid: 7 }, t1),
            vec![Action::Spawn {
                service: "a".into()
            }]
        );
        m.handle(
            Event::Spawned {
                service: "a".into(),
                pid: 8,
            },
            t1,
        );
        // An operator stop kills the group too, and a start right after waits for it, in
        // `backoff`, saying why.
        m.handle(
            Event::Control {
                id: 1,
                op: Op::Stop("a".into()),
            },
            t1,
        );
        let a = m.handle(
            Event::Exited {
                pid: 8,
                status: ExitStatus::Signal(15),
            },
            t1,
        );
        assert!(a.contains(&Action::Kill {
            pgid: 8,
            signal: Signal::SIGKILL
        }));
        let a = m.handle(
            Event::Control {
                id: 2,
                op: Op::Start("a".into()),
            },
            t1,
        );
        assert!(!a.contains(&Action::Spawn {
            service: "a".into()
        }));
        let st = m.status_of("a", t1).unwrap();
        assert_eq!(st.state, StateName::Backoff);
        assert!(st.reason.contains("process group 8"), "{}", st.reason);
        // A group that never empties holds the start back only for `group_exit_wait`.
        let wait = Timing::default().group_exit_wait;
        assert_eq!(m.next_deadline(), Some(t1 + wait));
        assert!(m.handle(Event::Tick, t1 + wait - ms(1)).is_empty());
        let a = m.handle(Event::Tick, t1 + wait);
        assert!(a.contains(&Action::Spawn {
            service: "a".into()
        }));
        assert!(
            a.iter().any(
                |x| matches!(x, Action::Note { text, .. } if text.contains("starting anyway"))
            )
        );
    }

    #[test]
    fn a_leftover_group_holds_back_the_first_start() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        m.handle(
            Event::Leftover {
                service: "a".into(),
                pgid: 4000,
            },
            t0,
        );
        assert!(m.handle(Event::Boot, t0).is_empty());
        assert_eq!(
            m.handle(Event::GroupGone { pgid: 4000 }, t0 + ms(5)),
            vec![Action::Spawn {
                service: "a".into()
            }]
        );
    }

    #[test]
    fn starting_becomes_up_on_ready_or_after_settle() {
        let (mut m, t0) = machine(vec![
            svc("a", RestartPolicy::Always),
            svc("b", RestartPolicy::Always),
        ]);
        m.handle(Event::Boot, t0);
        m.handle(
            Event::Spawned {
                service: "a".into(),
                pid: 1,
            },
            t0,
        );
        m.handle(
            Event::Spawned {
                service: "b".into(),
                pid: 2,
            },
            t0,
        );
        m.handle(Event::Ready { pid: 1 }, t0 + ms(10));
        assert_eq!(m.status_of("a", t0).unwrap().state, StateName::Up);
        assert_eq!(m.status_of("b", t0).unwrap().state, StateName::Starting);
        m.handle(Event::Tick, t0 + ms(999));
        assert_eq!(m.status_of("b", t0).unwrap().state, StateName::Starting);
        m.handle(Event::Tick, t0 + Duration::from_secs(1));
        assert_eq!(m.status_of("b", t0).unwrap().state, StateName::Up);
    }

    #[test]
    fn stop_escalates_to_sigkill_after_grace() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        boot(&mut m, t0, "a", 7);
        let a = m.handle(
            Event::Control {
                id: 1,
                op: Op::Stop("a".into()),
            },
            t0,
        );
        assert!(a.contains(&Action::Kill {
            pgid: 7,
            signal: Signal::SIGTERM
        }));
        assert!(a.contains(&Action::Reply {
            id: 1,
            result: Ok(())
        }));
        assert!(matches!(
            a[0],
            Action::DesiredChanged {
                desired: Desired::Stopped,
                ..
            }
        ));
        let due = m.next_deadline().unwrap();
        assert_eq!(due - t0, Duration::from_secs(10));
        let a = m.handle(Event::Tick, due);
        assert!(a.contains(&Action::Kill {
            pgid: 7,
            signal: Signal::SIGKILL
        }));
        assert_eq!(m.next_deadline(), None);
        exit(&mut m, 7, ExitStatus::Signal(9), due);
        let st = m.status_of("a", due).unwrap();
        assert_eq!(st.state, StateName::Down);
        assert_eq!(st.reason, "stopped by operator");
    }

    #[test]
    fn an_operator_stop_is_recorded_again_once_the_service_has_exited() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        boot(&mut m, t0, "a", 7);
        m.handle(
            Event::Control {
                id: 1,
                op: Op::Stop("a".into()),
            },
            t0,
        );
        let a = m.handle(
            Event::Exited {
                pid: 7,
                status: ExitStatus::Code(0),
            },
            t0,
        );
        assert!(
            a.iter().any(|a| matches!(
                a,
                Action::DesiredChanged {
                    desired: Desired::Stopped,
                    ..
                }
            )),
            "{a:?}"
        );
    }

    /// The schedule the end-to-end backoff test sees (`--backoff-ms 50`), exactly: 50, 100,
    /// 200, 400, 800, 1600 ms between a crash and the next start. With injected time, so a
    /// loaded runner cannot stretch a gap; the end-to-end test only checks that it backs off.
    #[test]
    fn crash_retries_wait_50_ms_then_double() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        assert_eq!(Timing::default().backoff_first, ms(50));
        boot(&mut m, t0, "a", 1);
        let mut t = t0;
        let mut gaps = Vec::new();
        for pid in 1..=6 {
            t += ms(3);
            exit(&mut m, pid, ExitStatus::Code(1), t);
            let due = m.next_deadline().unwrap();
            gaps.push(due - t);
            assert_eq!(
                m.status_of("a", due - ms(1)).unwrap().state,
                StateName::Backoff
            );
            assert!(m.handle(Event::Tick, due - ms(1)).is_empty());
            assert!(m.handle(Event::Tick, due).contains(&Action::Spawn {
                service: "a".into()
            }));
            t = due;
            m.handle(
                Event::Spawned {
                    service: "a".into(),
                    pid: pid + 1,
                },
                t,
            );
        }
        assert_eq!(gaps, [50, 100, 200, 400, 800, 1600].map(ms));
    }

    /// A service that asks for a restart (exit 75) as soon as it starts gets few starts in 3 s:
    /// the first request is honoured at once, the next ones back off like failures (the
    /// end-to-end test counted starts in a fixed 3 s window of wall time).
    #[test]
    fn a_service_always_asking_for_a_restart_starts_six_times_in_three_seconds() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::OnFailure)]);
        boot(&mut m, t0, "a", 1);
        let (mut t, mut pid, mut starts) = (t0, 1, 1);
        let end = t0 + Duration::from_secs(3);
        loop {
            t += ms(5);
            let mut a = exit(&mut m, pid, ExitStatus::Code(EXIT_TEMPFAIL), t);
            if !a.contains(&Action::Spawn {
                service: "a".into(),
            }) {
                t = m.next_deadline().unwrap();
                if t > end {
                    break;
                }
                a = m.handle(Event::Tick, t);
            }
            assert!(a.contains(&Action::Spawn {
                service: "a".into()
            }));
            pid += 1;
            starts += 1;
            m.handle(
                Event::Spawned {
                    service: "a".into(),
                    pid,
                },
                t,
            );
        }
        // Starts at 0 and 5 ms (the first request at once), then 100, 200, 400 and 800 ms
        // after each exit (as failures from the second on); the next, 1.6 s later, falls
        // after the window.
        assert_eq!(starts, 6);
        let st = m.status_of("a", t).unwrap();
        assert_eq!(st.state, StateName::Backoff);
        assert!(st.reason.starts_with("crash loop"), "{}", st.reason);
    }

    /// `stop` of a service that ignores SIGTERM, with a 1 s grace: answered at once, `stopping`
    /// for the whole grace, SIGKILL exactly at its end, then `down` — with injected time (the
    /// end-to-end test checks only that the grace was honoured).
    #[test]
    fn stop_answers_at_once_and_kills_exactly_when_a_1s_grace_ends() {
        let mut spec = svc("a", RestartPolicy::Always);
        spec.stop_grace = Duration::from_secs(1);
        let (mut m, t0) = machine(vec![spec]);
        boot(&mut m, t0, "a", 7);
        let a = m.handle(
            Event::Control {
                id: 1,
                op: Op::Stop("a".into()),
            },
            t0,
        );
        assert!(a.contains(&Action::Reply {
            id: 1,
            result: Ok(())
        }));
        assert!(a.contains(&Action::Kill {
            pgid: 7,
            signal: Signal::SIGTERM
        }));
        let grace_end = t0 + Duration::from_secs(1);
        assert_eq!(m.next_deadline(), Some(grace_end));
        let before = grace_end - ms(1);
        assert!(m.handle(Event::Tick, before).is_empty());
        assert_eq!(m.status_of("a", before).unwrap().state, StateName::Stopping);
        assert!(m.handle(Event::Tick, grace_end).contains(&Action::Kill {
            pgid: 7,
            signal: Signal::SIGKILL
        }));
        exit(&mut m, 7, ExitStatus::Signal(9), grace_end);
        let st = m.status_of("a", grace_end).unwrap();
        assert_eq!(st.state, StateName::Down);
        assert_eq!(st.last_exit, Some(ExitStatus::Signal(9)));
        assert!(st.last_exit_planned, "our own stop: {st:?}");
        assert_eq!(
            st.last_exit_text().as_deref(),
            Some("stopped (signal SIGKILL)")
        );
        assert_eq!(st.reason, "stopped by operator");
    }

    #[test]
    fn unregister_waits_for_exit_and_is_idempotent() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        boot(&mut m, t0, "a", 7);
        let a = m.handle(
            Event::Control {
                id: 1,
                op: Op::Unregister("a".into()),
            },
            t0,
        );
        assert!(
            !a.iter().any(|x| matches!(x, Action::Reply { .. })),
            "must wait: {a:?}"
        );
        let a = m.handle(
            Event::Control {
                id: 2,
                op: Op::Unregister("a".into()),
            },
            t0,
        );
        assert!(!a.iter().any(|x| matches!(x, Action::Reply { .. })));
        let a = exit(&mut m, 7, ExitStatus::Signal(15), t0);
        assert!(a.contains(&Action::Reply {
            id: 1,
            result: Ok(())
        }));
        assert!(a.contains(&Action::Reply {
            id: 2,
            result: Ok(())
        }));
        assert!(m.spec("a").is_none());
        let a = m.handle(
            Event::Control {
                id: 3,
                op: Op::Unregister("a".into()),
            },
            t0,
        );
        assert_eq!(
            a,
            vec![Action::Reply {
                id: 3,
                result: Ok(())
            }]
        );
    }

    #[test]
    fn unregister_in_backoff_forgets_without_spawning() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        boot(&mut m, t0, "a", 7);
        exit(&mut m, 7, ExitStatus::Code(1), t0);
        let a = m.handle(
            Event::Control {
                id: 1,
                op: Op::Unregister("a".into()),
            },
            t0,
        );
        assert!(a.contains(&Action::Reply {
            id: 1,
            result: Ok(())
        }));
        assert!(
            m.handle(Event::Tick, t0 + Duration::from_secs(60))
                .is_empty()
        );
    }

    #[test]
    fn unknown_services_and_orphans() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        boot(&mut m, t0, "a", 7);
        let a = m.handle(
            Event::Control {
                id: 1,
                op: Op::Start("zz".into()),
            },
            t0,
        );
        assert_eq!(
            a,
            vec![Action::Reply {
                id: 1,
                result: Err(OpError::UnknownService("zz".into()))
            }]
        );
        assert!(exit(&mut m, 999, ExitStatus::Code(0), t0).is_empty());
        assert_eq!(m.status_of("a", t0).unwrap().state, StateName::Starting);
    }

    #[test]
    fn shutdown_stops_in_reverse_order_and_finishes() {
        let (mut m, t0) = machine(vec![
            svc("a", RestartPolicy::Always),
            svc("b", RestartPolicy::Always),
        ]);
        m.handle(Event::Boot, t0);
        m.handle(
            Event::Spawned {
                service: "a".into(),
                pid: 1,
            },
            t0,
        );
        m.handle(
            Event::Spawned {
                service: "b".into(),
                pid: 2,
            },
            t0,
        );
        let a = m.handle(Event::Terminate, t0);
        let kills: Vec<i32> = a
            .iter()
            .filter_map(|x| match x {
                Action::Kill {
                    pgid,
                    signal: Signal::SIGTERM,
                } => Some(*pgid),
                _ => None,
            })
            .collect();
        assert_eq!(kills, vec![2, 1]);
        assert!(
            exit(&mut m, 2, ExitStatus::Signal(15), t0)
                .iter()
                .all(|x| !matches!(x, Action::Finished(_)))
        );
        let a = exit(&mut m, 1, ExitStatus::Signal(15), t0);
        assert!(a.contains(&Action::Finished(Outcome::Stopped)));
        // No restarts during shutdown.
        assert!(!a.iter().any(|x| matches!(x, Action::Spawn { .. })));
    }

    #[test]
    fn main_spawn_failure_ends_the_loop_with_127() {
        let t0 = Instant::now();
        let mut m = Machine::new(
            vec![
                svc("main", RestartPolicy::Never),
                svc("b", RestartPolicy::Always),
            ],
            Timing::default(),
            Some("main".into()),
            t0,
        );
        m.handle(Event::Boot, t0);
        let a = m.handle(
            Event::SpawnFailed {
                service: "main".into(),
                reason: "no such file".into(),
                code: EXIT_NOT_EXECUTABLE,
            },
            t0,
        );
        assert!(m.is_shutting_down(), "{a:?}");
        assert!(
            a.iter()
                .any(|x| matches!(x, Action::MainCannotStart { text }
                if text.contains("no such file"))),
            "the failure is said: {a:?}"
        );
        assert!(
            !a.iter().any(|x| matches!(x, Action::Note { .. })),
            "not as the main program's output: {a:?}"
        );
        assert!(
            !a.iter()
                .any(|x| matches!(x, Action::Spawn { service } if service == "main"))
        );
    }

    #[test]
    fn main_exit_ends_the_loop_with_its_status() {
        let t0 = Instant::now();
        let mut m = Machine::new(
            vec![
                svc("main", RestartPolicy::Never),
                svc("b", RestartPolicy::Always),
            ],
            Timing::default(),
            Some("main".into()),
            t0,
        );
        m.handle(Event::Boot, t0);
        m.handle(
            Event::Spawned {
                service: "main".into(),
                pid: 1,
            },
            t0,
        );
        m.handle(
            Event::Spawned {
                service: "b".into(),
                pid: 2,
            },
            t0,
        );
        assert_eq!(m.main_pgid(), Some(1));
        let a = exit(&mut m, 1, ExitStatus::Signal(2), t0);
        assert!(a.contains(&Action::Kill {
            pgid: 2,
            signal: Signal::SIGTERM
        }));
        let a = exit(&mut m, 2, ExitStatus::Code(0), t0);
        assert_eq!(
            a.last(),
            Some(&Action::Finished(Outcome::MainExited(ExitStatus::Signal(
                2
            ))))
        );
        assert_eq!(Outcome::MainExited(ExitStatus::Signal(2)).exit_code(), 130);
    }

    #[test]
    fn register_then_disabled_and_duplicate() {
        let (mut m, t0) = machine(vec![]);
        m.handle(Event::Boot, t0);
        let a = m.handle(
            Event::Control {
                id: 1,
                op: Op::Register(Box::new(svc("x", RestartPolicy::Always))),
            },
            t0,
        );
        assert!(a.contains(&Action::Spawn {
            service: "x".into()
        }));
        let a = m.handle(
            Event::Control {
                id: 2,
                op: Op::Register(Box::new(svc("x", RestartPolicy::Always))),
            },
            t0,
        );
        assert_eq!(
            a,
            vec![Action::Reply {
                id: 2,
                result: Ok(())
            }]
        );
        let a = m.handle(
            Event::Control {
                id: 3,
                op: Op::Register(Box::new(svc("x", RestartPolicy::Never))),
            },
            t0,
        );
        assert_eq!(
            a,
            vec![Action::Reply {
                id: 3,
                result: Err(OpError::AlreadyRegistered("x".into()))
            }]
        );
        let mut off = svc("y", RestartPolicy::Always);
        off.enabled = false;
        m.handle(
            Event::Control {
                id: 4,
                op: Op::Register(Box::new(off)),
            },
            t0,
        );
        assert_eq!(m.status_of("y", t0).unwrap().state, StateName::Disabled);
    }

    #[test]
    fn without_autostart_a_service_waits_down_for_start() {
        let mut lazy = svc("g", RestartPolicy::OnFailure);
        lazy.autostart = false;
        let (mut m, t0) = machine(vec![lazy.clone()]);
        let actions = m.handle(Event::Boot, t0);
        assert!(
            !actions.iter().any(|a| matches!(a, Action::Spawn { .. })),
            "{actions:?}"
        );
        assert_eq!(m.status_of("g", t0).unwrap().state, StateName::Down);
        let mut later = lazy;
        later.name = "h".into();
        let actions = m.handle(
            Event::Control {
                id: 1,
                op: Op::Register(Box::new(later)),
            },
            t0,
        );
        assert!(
            !actions.iter().any(|a| matches!(a, Action::Spawn { .. })),
            "{actions:?}"
        );
        let actions = m.handle(
            Event::Control {
                id: 2,
                op: Op::Start("h".into()),
            },
            t0,
        );
        assert!(
            actions.contains(&Action::Spawn {
                service: "h".into()
            }),
            "{actions:?}"
        );
    }

    #[test]
    fn restart_stops_then_spawns() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::OnFailure)]);
        boot(&mut m, t0, "a", 7);
        m.handle(
            Event::Control {
                id: 1,
                op: Op::Restart("a".into()),
            },
            t0,
        );
        assert_eq!(m.status_of("a", t0).unwrap().state, StateName::Stopping);
        let a = exit(&mut m, 7, ExitStatus::Signal(15), t0);
        assert!(a.contains(&Action::Spawn {
            service: "a".into()
        }));
    }

    #[test]
    fn spawn_failure_backs_off() {
        let (mut m, t0) = machine(vec![svc("a", RestartPolicy::Always)]);
        m.handle(Event::Boot, t0);
        m.handle(
            Event::SpawnFailed {
                service: "a".into(),
                reason: "cannot start: `x`: command not found".into(),
                code: EXIT_SPAWN_FAILED,
            },
            t0,
        );
        let st = m.status_of("a", t0).unwrap();
        assert_eq!(st.state, StateName::Backoff);
        assert!(
            st.reason
                .starts_with("cannot start: `x`: command not found; retrying"),
            "the spawn's words, then the schedule: {}",
            st.reason
        );
    }

    #[test]
    fn a_shells_127_and_126_are_said_as_the_shell_means_them() {
        let mut argv = svc("argv", RestartPolicy::Never);
        argv.argv = vec!["prog".into()];
        let (mut m, t0) = machine(vec![
            svc("missing", RestartPolicy::Never),
            svc("denied", RestartPolicy::Always),
            argv,
        ]);
        m.handle(Event::Boot, t0);
        for (name, pid) in [("missing", 1), ("denied", 2), ("argv", 3)] {
            m.handle(
                Event::Spawned {
                    service: name.into(),
                    pid,
                },
                t0,
            );
        }
        exit(&mut m, 1, ExitStatus::Code(127), t0);
        exit(&mut m, 2, ExitStatus::Code(126), t0);
        exit(&mut m, 3, ExitStatus::Code(127), t0);
        let reason = |name: &str| m.status_of(name, t0).unwrap().reason;
        assert_eq!(
            reason("missing"),
            "exited with code 127 (command not found, as the shell says it; its log names the \
             command) (restart: never)"
        );
        assert!(
            reason("denied").starts_with(
                "exited with code 126 (permission denied or not executable, as the shell says it"
            ),
            "{}",
            reason("denied")
        );
        // A program run directly says its own code: 127 is no shell's verdict there.
        assert_eq!(reason("argv"), "exited with code 127 (restart: never)");
    }
}
