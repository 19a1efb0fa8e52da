//! Hand-over restarts ([`ServiceSpec::handover`](crate::spec::ServiceSpec::handover)): the new
//! process starts while the old one serves, and the old one is told to stop only once the new
//! one is ready.
//!
//! Words defined here:
//! * **replacing** — the old process, still serving, while its successor starts. It is the
//!   service's process again if the successor fails before it is ready.
//! * **retiring** — an old process sent the stop signal after its successor became ready: it
//!   stops accepting and finishes its work within the stop grace, then SIGKILL. It is no
//!   longer the service's process (status shows it as `draining`), but shutdown waits for it.
//!
//! Both processes share the sockets the supervisor holds for the service, so a client never
//! meets a closed port: until the old one stops accepting, either may take a connection; after,
//! the new one takes them all.

use std::time::Instant;

use nix::sys::signal::Signal;

use super::{Action, Machine, Service, ServiceState, ask_to_stop};
use crate::status::{ExitStatus, HandOverStatus};

/// The process a hand-over replaces, as it was when the restart was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Replacing {
    pub(super) pid: i32,
    spawned: Instant,
    up_since: Instant,
    notified: bool,
}

/// An old process finishing its work after handing over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Retiring {
    pub(super) pid: i32,
    since: Instant,
    /// When SIGKILL goes to its group; `None` once sent.
    kill_at: Option<Instant>,
}

/// The latest hand-over of a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HandOver {
    from: i32,
    to: Option<i32>,
    asked: Instant,
    ready: Option<Instant>,
    old_exited: Option<Instant>,
    failed: Option<String>,
}

impl HandOver {
    pub(super) fn status(&self) -> HandOverStatus {
        let secs = |a: Instant, b: Instant| b.saturating_duration_since(a).as_secs_f64();
        HandOverStatus {
            from_pid: self.from,
            to_pid: self.to,
            ready_secs: self.ready.map(|t| secs(self.asked, t)),
            drained_secs: self
                .ready
                .zip(self.old_exited)
                .map(|(ready, exited)| secs(ready, exited)),
            failed: self.failed.clone(),
        }
    }
}

impl Machine {
    /// A restart of service `i` by hand-over, when its spec asks for one and it is `up`:
    /// spawns the successor and keeps the old process serving. Returns whether it began (or one
    /// is already under way); `false` means restart the ordinary way.
    pub(super) fn begin_handover(&mut self, i: usize, now: Instant, out: &mut Vec<Action>) -> bool {
        if self.is_shutting_down() {
            return false;
        }
        let s = &mut self.services[i];
        if !s.spec.handover {
            return false;
        }
        if s.replacing.is_some() {
            return true;
        }
        let ServiceState::Up {
            pid,
            spawned,
            since,
            notified,
        } = s.state
        else {
            return false;
        };
        s.replacing = Some(Replacing {
            pid,
            spawned,
            up_since: since,
            notified,
        });
        s.handover = Some(HandOver {
            from: pid,
            to: None,
            asked: now,
            ready: None,
            old_exited: None,
            failed: None,
        });
        s.streak = 0;
        out.push(Action::Note {
            service: s.spec.name.clone(),
            text: format!(
                "restarting by hand-over: starting a new instance while pid {pid} serves"
            ),
        });
        // Not `spawn()`: a lingering group of an older run cannot hold a port the two share.
        out.push(Action::Spawn {
            service: s.spec.name.clone(),
        });
        true
    }

    /// The pid of the process a hand-over of `name` is replacing, for the successor's
    /// `HERMES_HANDOVER_FROM`.
    pub fn replacing_pid(&self, name: &str) -> Option<i32> {
        let i = self.find(name)?;
        self.services[i].replacing.map(|r| r.pid)
    }

    /// Service `i`'s new process became ready: the one it replaces is told to stop.
    pub(super) fn complete_handover(&mut self, i: usize, now: Instant, out: &mut Vec<Action>) {
        let s = &mut self.services[i];
        let Some(old) = s.replacing.take() else {
            return;
        };
        let new = s.state.pid();
        if let Some(h) = s.handover.as_mut() {
            h.to = new;
            h.ready = Some(now);
        }
        out.push(Action::Note {
            service: s.spec.name.clone(),
            text: format!(
                "handed over from pid {} to pid {}; pid {} stops accepting and finishes its work (up to {:.0}s)",
                old.pid,
                new.unwrap_or_default(),
                old.pid,
                s.spec.stop_grace.as_secs_f64()
            ),
        });
        Self::retire(s, old.pid, now, out);
    }

    /// Sends `pid` the stop signal and keeps it as retiring.
    fn retire(s: &mut Service, pid: i32, now: Instant, out: &mut Vec<Action>) {
        ask_to_stop(&s.spec, pid, out);
        s.retiring.push(Retiring {
            pid,
            since: now,
            kill_at: Some(now + s.spec.stop_grace),
        });
    }

    /// Stop, shutdown or unregister during a hand-over: the process being replaced is retired
    /// too (the successor is stopped by the caller).
    pub(super) fn retire_replacing(&mut self, i: usize, now: Instant, out: &mut Vec<Action>) {
        let s = &mut self.services[i];
        if let Some(old) = s.replacing.take() {
            Self::retire(s, old.pid, now, out);
        }
    }

    /// The successor of a hand-over failed before it was ready (`why`): the old process is the
    /// service's again. Returns whether there was a hand-over to fall back on.
    pub(super) fn handover_failed(&mut self, i: usize, why: &str, out: &mut Vec<Action>) -> bool {
        let s = &mut self.services[i];
        let Some(old) = s.replacing.take() else {
            return false;
        };
        s.state = ServiceState::Up {
            pid: old.pid,
            spawned: old.spawned,
            since: old.up_since,
            notified: old.notified,
        };
        if let Some(h) = s.handover.as_mut() {
            h.failed = Some(why.to_string());
        }
        out.push(Action::Note {
            service: s.spec.name.clone(),
            text: format!(
                "hand-over failed: the new instance {why}; pid {} goes on serving",
                old.pid
            ),
        });
        true
    }

    /// A reaped pid that is an old process of a hand-over (replacing or retiring). Returns
    /// whether it was one.
    pub(super) fn old_instance_exited(
        &mut self,
        pid: i32,
        status: ExitStatus,
        now: Instant,
        out: &mut Vec<Action>,
    ) -> bool {
        for s in &mut self.services {
            if let Some(k) = s.retiring.iter().position(|r| r.pid == pid) {
                let retired = s.retiring.remove(k);
                if let Some(h) = s.handover.as_mut().filter(|h| h.from == pid) {
                    h.old_exited = Some(now);
                }
                out.push(Action::Kill {
                    pgid: pid,
                    signal: Signal::SIGKILL,
                });
                out.push(Action::Note {
                    service: s.spec.name.clone(),
                    text: format!(
                        "pid {pid}, replaced, exited with {status} after {:.1}s",
                        now.saturating_duration_since(retired.since).as_secs_f64()
                    ),
                });
                return true;
            }
            if s.replacing.is_some_and(|r| r.pid == pid) {
                s.replacing = None;
                s.last_exit = Some(status);
                out.push(Action::Kill {
                    pgid: pid,
                    signal: Signal::SIGKILL,
                });
                out.push(Action::Note {
                    service: s.spec.name.clone(),
                    text: format!(
                        "pid {pid}, being replaced, exited with {status} before the new instance was ready"
                    ),
                });
                return true;
            }
        }
        false
    }

    /// SIGKILL for retiring processes past their grace.
    pub(super) fn tick_retiring(&mut self, now: Instant, out: &mut Vec<Action>) {
        for s in &mut self.services {
            for r in &mut s.retiring {
                if r.kill_at.is_some_and(|t| now >= t) {
                    r.kill_at = None;
                    out.push(Action::Kill {
                        pgid: r.pid,
                        signal: Signal::SIGKILL,
                    });
                    out.push(Action::Note {
                        service: s.spec.name.clone(),
                        text: format!(
                            "replaced pid {} did not finish within {:.1}s of {}; sent SIGKILL to its process group",
                            r.pid,
                            s.spec.stop_grace.as_secs_f64(),
                            s.spec.stop_signal.as_str()
                        ),
                    });
                }
            }
        }
    }

    /// A second shutdown request: retiring processes are killed too.
    pub(super) fn kill_retiring(&mut self, out: &mut Vec<Action>) {
        for s in &mut self.services {
            for r in &mut s.retiring {
                r.kill_at = None;
                out.push(Action::Kill {
                    pgid: r.pid,
                    signal: Signal::SIGKILL,
                });
            }
        }
    }

    /// The earliest retiring kill deadline.
    pub(super) fn retiring_deadline(&self) -> Option<Instant> {
        self.services
            .iter()
            .flat_map(|s| s.retiring.iter().filter_map(|r| r.kill_at))
            .min()
    }

    /// Whether any old process of a hand-over is still alive.
    pub(super) fn any_old_instance(&self) -> bool {
        self.services
            .iter()
            .any(|s| s.replacing.is_some() || !s.retiring.is_empty())
    }
}

#[cfg(test)]
mod tests;
