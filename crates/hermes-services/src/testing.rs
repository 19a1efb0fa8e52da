//! Helpers of this crate's unit tests.

use hermes_supervisor::{ServiceStatus, StateName};

/// A status row of service `x` with only what the tests vary: its state, pid and reason.
pub(crate) fn status_row(state: StateName, pid: Option<i32>, reason: &str) -> ServiceStatus {
    ServiceStatus {
        name: "x".into(),
        state,
        pid,
        uptime_secs: None,
        since_secs: 0.0,
        restarts: 0,
        last_exit: None,
        reason: reason.into(),
        profile: None,
        draining: Vec::new(),
        handover: None,
        listening: Vec::new(),
        resources: None,
        memory_max: None,
        last_failure: None,
    }
}
