//! After a restart by hand-over: following the replaced process until it has finished its
//! work, and the words the CLI says about it.
//!
//! The supervisor's status row says who replaced whom and how long the replaced process took
//! ([`hermes_supervisor::HandOverStatus`]); a native gateway also records how many requests it
//! finished and how many it had to cut (`gateway_drains.json`, [`hermes_home::drains`]).

use std::path::Path;
use std::time::{Duration, Instant};

use hermes_supervisor::{Client, ServiceStatus};

use crate::Error;
use crate::readiness::POLL_INTERVAL;

/// What a hand-over came to, once followed.
#[derive(Debug, Clone, PartialEq)]
pub struct HandOverReport {
    /// The replaced process.
    pub from_pid: i32,
    /// Its successor.
    pub to_pid: i32,
    /// Whether the supervisor held the service's port throughout (it refused nothing).
    pub port_held: bool,
    /// How long the replaced process took to finish after its successor was ready; `None`
    /// when it was still at it when the wait ended.
    pub drained_secs: Option<f64>,
    /// Requests the replaced gateway finished, and cut at its drain timeout (a gateway that
    /// records them).
    pub requests: Option<(u64, u64)>,
}

impl HandOverReport {
    /// One line: `handed over from pid 5 to pid 9, the port stayed open; pid 5 finished 3
    /// requests in 1.2 s`.
    pub fn describe(&self) -> String {
        let port = if self.port_held {
            ", the port stayed open"
        } else {
            ""
        };
        let from = self.from_pid;
        let rest = match (self.drained_secs, self.requests) {
            (None, _) => format!(
                "pid {from} is still finishing its work (`hermes service status` shows it as draining)"
            ),
            (Some(secs), Some((finished, 0))) => {
                format!("pid {from} finished {} in {secs:.1} s", requests(finished))
            }
            (Some(secs), Some((finished, cut))) => format!(
                "pid {from} finished {} in {secs:.1} s and cut {} still running at its drain timeout",
                requests(finished),
                requests(cut)
            ),
            (Some(secs), None) => format!("pid {from} exited {secs:.1} s later"),
        };
        format!(
            "handed over from pid {from} to pid {}{port}; {rest}",
            self.to_pid
        )
    }
}

fn requests(n: u64) -> String {
    if n == 1 {
        "1 request".into()
    } else {
        format!("{n} requests")
    }
}

/// Whether `row` (a service ready after a restart) got there by a hand-over from `from_pid`.
pub fn handed_over_from(row: &ServiceStatus, from_pid: i32) -> bool {
    row.handover
        .as_ref()
        .is_some_and(|h| h.from_pid == from_pid && h.failed.is_none() && h.to_pid == row.pid)
}

/// Follows the hand-over of `service` away from `from_pid` until that process has exited or
/// `wait` is over; `drains` reads what a gateway recorded of the drain of a pid (requests
/// finished, cut). `None` when the service was not handed over from `from_pid`.
///
/// # Errors
/// [`Error::Supervisor`] when the supervisor cannot be asked.
pub fn follow(
    client: &mut Client,
    service: &str,
    from_pid: i32,
    wait: Duration,
    drains: &dyn Fn(i32) -> Option<(u64, u64)>,
) -> Result<Option<HandOverReport>, Error> {
    let deadline = Instant::now() + wait;
    loop {
        let Some(row) = client.status(Some(service))?.into_iter().next() else {
            return Ok(None);
        };
        let Some(handover) = row.handover.clone().filter(|h| h.from_pid == from_pid) else {
            return Ok(None);
        };
        let (Some(to_pid), None) = (handover.to_pid, &handover.failed) else {
            return Ok(None);
        };
        let drained = handover.drained_secs;
        if drained.is_some() || Instant::now() >= deadline {
            return Ok(Some(HandOverReport {
                from_pid,
                to_pid,
                port_held: !row.listening.is_empty(),
                drained_secs: drained,
                requests: drained.and_then(|_| drains(from_pid)),
            }));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// What the native gateway of the profile in `dir` recorded of the drain of `pid`.
pub fn gateway_drain(dir: &Path, pid: i32) -> Option<(u64, u64)> {
    let last = hermes_home::drains::read(dir).ok()?.last?;
    (i64::from(pid) == i64::from(last.pid)).then_some((last.drained, last.cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(drained_secs: Option<f64>, requests: Option<(u64, u64)>) -> String {
        HandOverReport {
            from_pid: 5,
            to_pid: 9,
            port_held: true,
            drained_secs,
            requests,
        }
        .describe()
    }

    #[test]
    fn the_report_says_who_replaced_whom_and_what_was_finished_or_cut() {
        assert_eq!(
            report(Some(1.24), Some((3, 0))),
            "handed over from pid 5 to pid 9, the port stayed open; pid 5 finished 3 requests in 1.2 s"
        );
        assert!(report(Some(30.0), Some((1, 2))).ends_with(
            "pid 5 finished 1 request in 30.0 s and cut 2 requests still running at its drain timeout"
        ));
        assert!(report(None, None).contains("still finishing"));
        assert!(report(Some(0.5), None).ends_with("pid 5 exited 0.5 s later"));
    }
}
