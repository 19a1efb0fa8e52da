//! The dashboard's own health, as the original's `DashboardHealth` keeps it: the answers of
//! `500` and above it gave in the last five minutes ([`observe`], the outermost layer, counts
//! them), for `/api/status`'s `components.dashboard` ([`snapshot`]).
//!
//! One per process (as the original's module-level holder): the dashboard is one router per
//! process. Counts and a time only — never the path or the error, since the component is shown
//! to anyone who may read the status. The original also runs a periodic self-test of an
//! authenticated route; ours does not, so `selftest` stays `unknown` (the original's word
//! before its first run).

use std::collections::VecDeque;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::{Value, json};

/// How far back errors count.
const WINDOW: Duration = Duration::from_secs(300);
/// The most errors remembered (the original's bound): a flood costs no more memory.
const KEPT: usize = 256;

/// Errors seen, and when the last one was.
#[derive(Debug, Default)]
pub struct ErrorsSeen {
    inner: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    times: VecDeque<Instant>,
    last_at_unix: Option<f64>,
}

impl ErrorsSeen {
    /// One error answer now.
    pub fn record(&self) {
        let mut seen = self.lock();
        if seen.times.len() == KEPT {
            seen.times.pop_front();
        }
        seen.times.push_back(Instant::now());
        seen.last_at_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .ok()
            .map(|d| d.as_secs_f64());
    }

    /// The component: `{status, recent_unhandled_errors, last_error_at, selftest}`, degraded
    /// while an error is within the window.
    pub fn snapshot(&self) -> Value {
        self.snapshot_at(Instant::now())
    }

    fn snapshot_at(&self, now: Instant) -> Value {
        let mut seen = self.lock();
        while seen
            .times
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > WINDOW)
        {
            seen.times.pop_front();
        }
        let recent = seen.times.len();
        json!({
            "status": if recent == 0 { "ok" } else { "degraded" },
            "recent_unhandled_errors": recent,
            "last_error_at": seen.last_at_unix,
            "selftest": "unknown",
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        // Every critical section leaves the counts consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// This process's errors.
static SEEN: LazyLock<ErrorsSeen> = LazyLock::new(ErrorsSeen::default);

/// [`ErrorsSeen::snapshot`] of this process.
pub fn snapshot() -> Value {
    SEEN.snapshot()
}

/// Middleware: counts every answer of `500` and above.
pub async fn observe(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status().is_server_error() {
        SEEN.record();
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_degrade_for_five_minutes() {
        let seen = ErrorsSeen::default();
        let quiet = seen.snapshot();
        assert_eq!(
            quiet,
            json!({"status": "ok", "recent_unhandled_errors": 0, "last_error_at": null, "selftest": "unknown"})
        );
        seen.record();
        seen.record();
        let now = seen.snapshot();
        assert_eq!(now["status"], "degraded");
        assert_eq!(now["recent_unhandled_errors"], 2);
        assert!(now["last_error_at"].as_f64().unwrap() > 1.0e9);
        let later = seen.snapshot_at(Instant::now() + WINDOW + Duration::from_secs(1));
        assert_eq!(later["status"], "ok");
        assert_eq!(later["recent_unhandled_errors"], 0);
        assert!(later["last_error_at"].is_f64(), "the last time stays known");
    }

    #[test]
    fn a_flood_is_bounded() {
        let seen = ErrorsSeen::default();
        for _ in 0..KEPT + 10 {
            seen.record();
        }
        assert_eq!(seen.snapshot()["recent_unhandled_errors"], KEPT);
    }
}
