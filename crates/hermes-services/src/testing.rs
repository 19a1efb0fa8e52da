//! Helpers of this crate's unit tests.

use hermes_supervisor::{ServiceStatus, StateName};

/// A status row of service `x` with only what the tests vary: its state, pid and reason.
pub(crate) fn status_row(state: StateName, pid: Option<i32>, reason: &str) -> ServiceStatus {
    ServiceStatus {
        pid,
        reason: reason.into(),
        ..ServiceStatus::new("x", state)
    }
}
