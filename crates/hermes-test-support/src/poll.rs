//! Waiting for something to happen, with a deadline that names what was awaited.
//!
//! Tests of processes and servers cannot know when an effect lands (a log line written after
//! the response, a state file rewritten by a child): they poll. These helpers are the one way
//! the suites poll, so every wait has a deadline and says what it waited for when it expires.
//! Deadlines are generous (seconds, not milliseconds): a loaded 2-core runner is slow, and a
//! wait that passes returns as soon as its condition holds.

use std::time::{Duration, Instant};

/// How often the condition is tried again.
pub const INTERVAL: Duration = Duration::from_millis(20);

/// Tries `check` every [`INTERVAL`] until it yields a value (`Some`) or `limit` passes (`None`).
pub fn try_until<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(INTERVAL);
    }
}

/// Tries `check` every [`INTERVAL`] until it yields a value, and returns that value.
///
/// # Panics
/// After `limit`, naming `what`.
pub fn until<T>(what: &str, limit: Duration, check: impl FnMut() -> Option<T>) -> T {
    try_until(limit, check)
        .unwrap_or_else(|| panic!("timed out after {limit:?} waiting for {what}"))
}

/// Whether `check` held within `limit` (tried every [`INTERVAL`]): for a wait whose expiry is a
/// finding to count, not a failure.
pub fn within(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    try_until(limit, || check().then_some(())).is_some()
}

/// [`until`] for a condition that holds or does not.
///
/// # Panics
/// After `limit`, naming `what`.
pub fn until_true(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    until(what, limit, || check().then_some(()));
}

/// [`until`] inside an async test: the condition may await, and the wait yields to the
/// runtime (a current-thread runtime keeps serving while the test waits).
///
/// # Panics
/// After `limit`, naming `what`.
pub async fn until_async<T>(
    what: &str,
    limit: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_first_value_the_check_yields() {
        let mut calls = 0;
        let got = until("the third call", Duration::from_secs(5), || {
            calls += 1;
            (calls == 3).then_some(calls * 10)
        });
        assert_eq!(got, 30);
    }

    #[test]
    #[should_panic(expected = "waiting for something that never happens")]
    fn names_what_it_waited_for_when_the_deadline_passes() {
        until_true(
            "something that never happens",
            Duration::from_millis(50),
            || false,
        );
    }

    #[test]
    fn within_says_whether_the_condition_held_in_time() {
        let mut calls = 0;
        assert!(within(Duration::from_secs(5), || {
            calls += 1;
            calls == 2
        }));
        assert!(!within(Duration::from_millis(50), || false));
    }

    #[tokio::test]
    async fn async_checks_may_await() {
        let mut calls = 0;
        let got = until_async("the second call", Duration::from_secs(5), async || {
            tokio::task::yield_now().await;
            calls += 1;
            (calls == 2).then_some("done")
        })
        .await;
        assert_eq!(got, "done");
    }
}
