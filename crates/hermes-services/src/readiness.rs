//! Starting a service and waiting until it is ready, or until it is clear that it is not:
//! what `hermes gateway start|restart` and `hermes service start|restart` report.
//!
//! Words:
//! * **ready** — the supervisor's state `up` (a service reaches it on `READY=1`, or by
//!   surviving the settle time). A profile's gateway is ready only once it also says so
//!   itself: its `gateway_state.json` records `running` (or `degraded`) with the pid of the
//!   supervised process — both engines write that when they serve; the agent engine never
//!   sends `READY=1` under our supervisor, and the settle time alone would call a gateway
//!   that dies a moment later "up".
//! * **watched run** — the process the start launched. Any sign that it ended (another pid,
//!   `backoff`, `failed`, `down`) is a failed start, even when the supervisor already retries.

use std::path::Path;
use std::time::{Duration, Instant};

use hermes_home::gateway_state::{self, StateRead};
use hermes_home::{Home, ProfileRef};
use hermes_supervisor::{Client, ServiceStatus, StateName};

use crate::Error;
use crate::gateway::GATEWAY_PREFIX;
use crate::last_error::{self, LINGERING_WAIT, LastError};

/// How often the supervisor is asked while waiting.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// How long a failed start waits for the cause to reach the service's log (its last output is
/// read by the supervisor just after its exit).
const CAUSE_GRACE: Duration = Duration::from_millis(500);

/// What was asked of the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// `start`: a running service is left as it is.
    Start,
    /// `restart`: a running service is stopped, then started.
    Restart,
}

/// What a start came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Ready; `already` when a `start` found it running.
    Ready {
        /// Its row when it was found ready.
        row: ServiceStatus,
        /// It was already running before the request.
        already: bool,
    },
    /// It exited, could not be spawned, or was stopped meanwhile.
    Failed {
        /// Its row when that was clear.
        row: ServiceStatus,
        /// What the service said, from what its run(s) wrote ([`last_error::since`]).
        cause: Option<LastError>,
    },
    /// Still not ready when the time was up.
    TimedOut {
        /// Its last row.
        row: ServiceStatus,
    },
    /// Not waited for (`--no-wait`): the supervisor has the request.
    Requested,
}

/// What one observation of the service says (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep waiting.
    Waiting,
    /// Ready.
    Ready,
    /// The start failed.
    Failed,
}

/// Follows the rows of one service after a start or restart request (module doc).
#[derive(Debug, Default, Clone)]
pub struct Watch {
    /// The process being stopped by a restart: the run before the one to watch.
    stopping: Option<i32>,
    /// The watched run.
    watched: Option<i32>,
    /// Every pid seen running for the service since the request.
    seen: Vec<i32>,
}

impl Watch {
    /// Judges `row`; `confirmed` is whether a ready-looking row is confirmed by the service
    /// itself (always true but for gateways: module doc).
    pub fn observe(&mut self, row: &ServiceStatus, confirmed: bool) -> Verdict {
        if let Some(pid) = row.pid
            && !self.seen.contains(&pid)
            && row.state != StateName::Stopping
        {
            self.seen.push(pid);
        }
        match (row.state, row.pid) {
            (StateName::Stopping, pid) => {
                if self.watched.is_none() && self.stopping.is_none_or(|s| Some(s) == pid) {
                    // A restart stopping the previous run: not ours yet.
                    self.stopping = pid;
                    Verdict::Waiting
                } else {
                    Verdict::Failed
                }
            }
            (StateName::Starting | StateName::Up, Some(pid)) => {
                if *self.watched.get_or_insert(pid) != pid {
                    return Verdict::Failed;
                }
                if row.state == StateName::Up && confirmed {
                    Verdict::Ready
                } else {
                    Verdict::Waiting
                }
            }
            (StateName::Backoff, _)
                if self.watched.is_none() && row.reason.starts_with(LINGERING_WAIT) =>
            {
                Verdict::Waiting
            }
            _ => Verdict::Failed,
        }
    }

    /// The pids seen running since the request.
    pub fn pids(&self) -> &[i32] {
        &self.seen
    }
}

/// Whether `row`'s service, `up`, is ready as it says itself: a profile's gateway when its
/// state file records it serving with this pid; any other service at once.
pub fn confirmed(home: &Path, row: &ServiceStatus) -> bool {
    let Some(profile) = row.name.strip_prefix(GATEWAY_PREFIX) else {
        return true;
    };
    let Some(dir) = ProfileRef::parse(profile)
        .ok()
        .and_then(|p| Home::for_profile(home.to_path_buf(), p).ok())
    else {
        return true;
    };
    match gateway_state::read(&gateway_state::path(dir.dir())) {
        Ok(StateRead::Valid(state)) => {
            state.pid().is_some()
                && state.pid() == row.pid.map(i64::from)
                && matches!(state.gateway_state(), Some("running" | "degraded"))
        }
        _ => false,
    }
}

/// Sends `request` for `service` of the supervisor of `home` and, with `wait`, follows the
/// service until it is ready, the start failed, or `wait` has passed (module doc).
///
/// # Errors
/// [`Error::Supervisor`] when the supervisor refuses or cannot be reached.
pub fn start_and_wait(
    client: &mut Client,
    home: &Path,
    service: &str,
    request: Request,
    wait: Option<Duration>,
) -> Result<Outcome, Error> {
    let before = client.status(Some(service))?.into_iter().next();
    let mark = hermes_supervisor::logs::timestamp();
    match request {
        Request::Start => client.start(service)?,
        Request::Restart => client.restart(service)?,
    }
    let Some(wait) = wait else {
        return Ok(Outcome::Requested);
    };
    let was_up = request == Request::Start
        && before.is_some_and(|row| row.state == StateName::Up && confirmed(home, &row));
    let deadline = Instant::now() + wait;
    let mut watch = Watch::default();
    loop {
        let Some(row) = client.status(Some(service))?.into_iter().next() else {
            // Unregistered meanwhile (its profile deleted): the supervisor says so.
            return Err(Error::Supervisor(hermes_supervisor::Error::Refused {
                code: hermes_supervisor::ErrorCode::UnknownService,
                message: format!("unknown service `{service}`"),
            }));
        };
        match watch.observe(&row, confirmed(home, &row)) {
            Verdict::Ready => {
                return Ok(Outcome::Ready {
                    row,
                    already: was_up,
                });
            }
            Verdict::Failed => {
                let cause = cause_since(home, service, &mark, watch.pids());
                return Ok(Outcome::Failed { row, cause });
            }
            Verdict::Waiting if Instant::now() >= deadline => {
                return Ok(Outcome::TimedOut { row });
            }
            Verdict::Waiting => std::thread::sleep(POLL_INTERVAL),
        }
    }
}

/// The cause of a failed start, waiting a moment for the service's last lines to be logged.
fn cause_since(home: &Path, service: &str, mark: &str, pids: &[i32]) -> Option<LastError> {
    let until = Instant::now() + CAUSE_GRACE;
    loop {
        let cause = last_error::since(home, service, mark, pids);
        if cause.is_some() || Instant::now() >= until {
            return cause;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testing::status_row as row;

    fn verdicts(rows: &[(ServiceStatus, bool)]) -> Vec<Verdict> {
        let mut watch = Watch::default();
        rows.iter().map(|(r, c)| watch.observe(r, *c)).collect()
    }

    use StateName::{Backoff, Down, Failed, Starting, Stopping, Up};
    use Verdict as V;

    #[test]
    fn a_start_is_ready_when_its_run_is_up_and_confirmed() {
        assert_eq!(
            verdicts(&[
                (row(Starting, Some(5), ""), false),
                (row(Up, Some(5), ""), false),
                (row(Up, Some(5), ""), true),
            ]),
            [V::Waiting, V::Waiting, V::Ready]
        );
    }

    #[test]
    fn any_sign_that_the_run_ended_is_a_failed_start() {
        for end in [
            row(Backoff, None, "exited with code 1; retrying in 50ms"),
            row(Failed, None, "configuration error (exit 78)"),
            row(Down, None, "stopped by operator"),
            row(Starting, Some(6), ""),
            row(Up, Some(6), ""),
            row(Stopping, Some(5), "sent SIGTERM"),
        ] {
            assert_eq!(
                verdicts(&[(row(Starting, Some(5), ""), false), (end.clone(), true)]),
                [V::Waiting, V::Failed],
                "{end:?}"
            );
        }
        // A spawn that failed before any run was seen.
        assert_eq!(
            verdicts(&[(row(Backoff, None, "cannot start: no such file"), true)]),
            [V::Failed]
        );
    }

    #[test]
    fn a_restart_waits_for_the_old_run_to_stop_and_the_new_one_to_be_ready() {
        let mut watch = Watch::default();
        let steps = [
            (row(Stopping, Some(5), "sent SIGTERM"), true),
            (row(Stopping, Some(5), "sent SIGTERM"), true),
            (row(Starting, Some(9), ""), false),
            (row(Up, Some(9), ""), true),
        ];
        let got: Vec<Verdict> = steps.iter().map(|(r, c)| watch.observe(r, *c)).collect();
        assert_eq!(got, [V::Waiting, V::Waiting, V::Waiting, V::Ready]);
        assert_eq!(watch.pids(), [9], "the stopped run is not one of ours");
    }

    #[test]
    fn waiting_for_a_lingering_group_is_not_a_failure() {
        assert_eq!(
            verdicts(&[
                (
                    row(Backoff, None, &format!("{LINGERING_WAIT} 4 to exit")),
                    true
                ),
                (row(Starting, Some(7), ""), true),
                (row(Up, Some(7), ""), true),
            ]),
            [V::Waiting, V::Waiting, V::Ready]
        );
    }

    #[test]
    fn a_gateway_is_confirmed_by_its_state_file_naming_its_pid() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let mut up = row(Up, Some(42), "");
        assert!(confirmed(home, &up), "not a gateway: `up` is enough");
        up.name = "gateway-default".into();
        assert!(!confirmed(home, &up), "no state file yet");
        let write = |json: &str| std::fs::write(home.join("gateway_state.json"), json).unwrap();
        write(r#"{"pid": 41, "gateway_state": "running"}"#);
        assert!(!confirmed(home, &up), "another process's record");
        write(r#"{"pid": 42, "gateway_state": "starting"}"#);
        assert!(!confirmed(home, &up));
        write(r#"{"pid": 42, "gateway_state": "running"}"#);
        assert!(confirmed(home, &up));
    }
}
