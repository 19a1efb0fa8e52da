//! The last error of a service, in one line — what `systemctl status` shows under a failed
//! unit — for `hermes gateway status`, `hermes service status`, `hermes profile show`, the
//! start commands and the dashboard.
//!
//! Where the cause is:
//! * a profile's gateway records a failed start in its `gateway_state.json`
//!   (`gateway_state: startup_failed` with `exit_reason`), both engines alike;
//! * every service's log ([`crate::logs`]) holds what it printed: the hermes binary's
//!   `error: …` line with its `  Caused by: …` and `hint: …` lines, or a logged `ERROR …` /
//!   `CRITICAL …` line (the agent's stderr format, `LEVEL logger: message`, and the gateway's
//!   own log lines).
//!
//! Words:
//! * **failing** — parked after a failure (`failed`) or waiting to be restarted after one
//!   (`backoff`, except while a start only waits for its previous run's processes to go).
//! * **error entry** — one error as the log holds it: the message (causes joined with `: `),
//!   its hint if any, and the timestamp of its line.

use std::path::Path;

use hermes_home::gateway_state::{self, StateRead};
use hermes_supervisor::{ServiceStatus, StateName};

use crate::logs::{log_file, tail};

/// How many of a log's last lines are searched for an error entry.
pub const SEARCHED_LINES: usize = 200;

/// The start of the reason a `backoff` row gives while a start waits for the processes its
/// previous run left behind: a wait, not a failure (the supervisor's wording; a test below
/// holds it to the supervisor's state machine).
pub const LINGERING_WAIT: &str = "waiting for the processes left in its process group";

/// A service's last error (module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastError {
    /// The error in one line.
    pub message: String,
    /// What to do about it, when the service said so.
    pub hint: Option<String>,
    /// The log timestamp of the entry (`None` when it comes from the state file).
    pub at: Option<String>,
}

/// Whether `row` is failing (module doc).
pub fn is_failing(row: &ServiceStatus) -> bool {
    match row.state {
        StateName::Failed => true,
        StateName::Backoff => !row.reason.starts_with(LINGERING_WAIT),
        StateName::Disabled
        | StateName::Down
        | StateName::Starting
        | StateName::Up
        | StateName::Stopping => false,
    }
}

/// The last error of `row`'s service under `home` when it is failing, else `None`: what status
/// commands show under a failing service.
pub fn of_failing(home: &Path, row: &ServiceStatus) -> Option<LastError> {
    is_failing(row)
        .then(|| last_error(home, &row.name))
        .flatten()
}

/// The last error of `service` under `home` (module doc): for a profile's gateway, the reason
/// its state file gives for a failed start (with the log's hint when the log's newest entry
/// is the same error), else the newest error entry in its log. `None` when neither says
/// anything.
pub fn last_error(home: &Path, service: &str) -> Option<LastError> {
    find(home, service, None, &[])
}

/// A profile gateway's failed start as its `gateway_state.json` records it (with the log's hint
/// when the log's newest entry is the same error): what is known of a gateway that no
/// supervisor runs. `None` for other services, or when the record says no such thing.
pub fn recorded(home: &Path, service: &str) -> Option<LastError> {
    let (message, _) = recorded_failure(home, service)?;
    Some(with_logged_hint(home, service, message))
}

/// As [`last_error`], but only what the run(s) since a start wrote: a log entry stamped at
/// or after `since` (a log timestamp, `hermes_supervisor::logs::timestamp`), a state file
/// written by one of `pids`.
pub fn since(home: &Path, service: &str, since: &str, pids: &[i32]) -> Option<LastError> {
    find(home, service, Some(since), pids)
}

fn find(home: &Path, service: &str, since: Option<&str>, pids: &[i32]) -> Option<LastError> {
    let recorded = recorded_failure(home, service).filter(|(_, pid)| {
        since.is_none() || pid.is_some_and(|pid| pids.iter().any(|p| i64::from(*p) == pid))
    });
    match recorded {
        Some((message, _)) => Some(with_logged_hint(home, service, message)),
        None => logged(home, service)
            .filter(|entry| since.is_none_or(|t| entry.at.as_deref().is_some_and(|at| at >= t))),
    }
}

/// The newest error entry of `service`'s log.
fn logged(home: &Path, service: &str) -> Option<LastError> {
    let path = log_file(home, service).ok()?;
    newest_entry(&tail(&path, SEARCHED_LINES).ok()?)
}

/// A recorded `message`, with the hint of the log's newest entry when that is the same error.
fn with_logged_hint(home: &Path, service: &str, message: String) -> LastError {
    let hint = logged(home, service)
        .filter(|entry| entry.message == message)
        .and_then(|entry| entry.hint);
    LastError {
        message,
        hint,
        at: None,
    }
}

/// The `exit_reason` of a gateway's failed start and the pid that recorded it, from the
/// profile's `gateway_state.json`; `None` for other services or another recorded state.
fn recorded_failure(home: &Path, service: &str) -> Option<(String, Option<i64>)> {
    let dir = crate::gateway::home_of_service(home, service)?;
    let StateRead::Valid(state) = gateway_state::read(&gateway_state::path(dir.dir())).ok()? else {
        return None;
    };
    if state.gateway_state() != Some("startup_failed") {
        return None;
    }
    let reason = state
        .exit_reason()
        .map(str::trim)
        .filter(|r| !r.is_empty())?;
    Some((reason.to_owned(), state.pid()))
}

/// The newest error entry among log `lines` (`<timestamp> <text>` each; a line without a
/// timestamp is taken as text).
pub fn newest_entry(lines: &[String]) -> Option<LastError> {
    let mut newest = None;
    let mut open: Option<LastError> = None;
    for line in lines {
        let (at, text) = split_timestamp(line);
        if let Some(entry) = open.as_mut() {
            if let Some(cause) = text.trim_start().strip_prefix("Caused by: ") {
                if entry.hint.is_none() {
                    entry.message.push_str(": ");
                    entry.message.push_str(cause.trim());
                }
                continue;
            }
            if let Some(hint) = text.strip_prefix("hint: ") {
                entry.hint = Some(hint.trim().to_owned());
                continue;
            }
            if text.trim().is_empty() {
                continue;
            }
            newest = open.take().or(newest);
        }
        if let Some(message) = text.strip_prefix("error: ") {
            open = Some(LastError {
                message: message.trim().to_owned(),
                hint: None,
                at: at.map(str::to_owned),
            });
        } else if let Some(message) = logged_error(text) {
            newest = Some(LastError {
                message: message.to_owned(),
                hint: None,
                at: at.map(str::to_owned),
            });
        }
    }
    open.or(newest)
}

/// `<timestamp> <text>` (the supervisor's log line) into its parts.
fn split_timestamp(line: &str) -> (Option<&str>, &str) {
    match line.split_once(' ') {
        Some((first, rest))
            if first.len() >= 20
                && first.starts_with(|c: char| c.is_ascii_digit())
                && first.as_bytes().get(10) == Some(&b'T') =>
        {
            (Some(first), rest)
        }
        _ => (None, line),
    }
}

/// The message of a logged error line (`ERROR …`, `CRITICAL …`), level word removed.
fn logged_error(text: &str) -> Option<&str> {
    let text = text.trim_start();
    ["ERROR ", "CRITICAL "]
        .iter()
        .find_map(|level| text.strip_prefix(level))
        .map(str::trim)
        .filter(|m| !m.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::time::{Duration, Instant};

    use hermes_supervisor::machine::Event;
    use hermes_supervisor::{Machine, ServiceSpec, Timing};

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn the_hermes_binarys_error_is_one_line_with_its_causes_and_hint() {
        let log = lines(
            "2026-11-30T15:58:43.837Z [hermes] exited with code 1; retrying in 800ms\n\
             2026-11-30T15:58:44.844Z error: port 9293 on `127.0.0.1` is already in use\n\
             2026-11-30T15:58:44.844Z   Caused by: Address in use (os error 98)\n\
             2026-11-30T15:58:44.844Z \n\
             2026-11-30T15:58:44.844Z hint: set a free `API_SERVER_PORT`\n\
             2026-11-30T15:58:44.845Z [hermes] crash loop: 6 failures in a row",
        );
        assert_eq!(
            newest_entry(&log),
            Some(LastError {
                message: "port 9293 on `127.0.0.1` is already in use: Address in use (os error \
                          98)"
                .into(),
                hint: Some("set a free `API_SERVER_PORT`".into()),
                at: Some("2026-11-30T15:58:44.844Z".into()),
            })
        );
    }

    #[test]
    fn the_newest_entry_wins_and_logged_errors_count() {
        let log = lines(
            "2026-11-30T10:00:00.000Z error: old\n\
             2026-11-30T10:00:01.000Z INFO gateway.run: fine\n\
             2026-11-30T10:00:02.000Z ERROR gateway.run: could not bind 127.0.0.1:9293\n\
             2026-11-30T10:00:03.000Z WARNING gateway.run: not an error",
        );
        let entry = newest_entry(&log).unwrap();
        assert_eq!(entry.message, "gateway.run: could not bind 127.0.0.1:9293");
        assert_eq!(entry.at.as_deref(), Some("2026-11-30T10:00:02.000Z"));
        assert_eq!(newest_entry(&lines("a\nb\nINFO x")), None);
        // Without timestamps (a line as printed) too.
        assert_eq!(newest_entry(&lines("error: bare")).unwrap().message, "bare");
    }

    #[test]
    fn a_gateways_recorded_failed_start_comes_first_with_the_logs_hint() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let logs = home.join("logs/gateways/default");
        fs::create_dir_all(&logs).unwrap();
        fs::write(
            logs.join("current"),
            "2026-11-30T10:00:00.000Z error: the settings are wrong\n\
             2026-11-30T10:00:00.000Z hint: fix them\n",
        )
        .unwrap();
        assert_eq!(
            last_error(home, "gateway-default").unwrap().message,
            "the settings are wrong",
            "no state file: the log"
        );
        fs::write(
            home.join("gateway_state.json"),
            r#"{"pid": 42, "gateway_state": "startup_failed", "exit_reason": "the settings are wrong"}"#,
        )
        .unwrap();
        let found = last_error(home, "gateway-default").unwrap();
        assert_eq!(
            (
                found.message.as_str(),
                found.hint.as_deref(),
                found.at.as_deref()
            ),
            ("the settings are wrong", Some("fix them"), None)
        );
        assert_eq!(recorded(home, "gateway-default").unwrap(), found);
        // Since a start: only what its runs wrote.
        assert!(since(home, "gateway-default", "2026-11-30T11:00:00.000Z", &[7]).is_none());
        assert!(since(home, "gateway-default", "2026-11-30T11:00:00.000Z", &[42]).is_some());
        assert!(since(home, "gateway-default", "2026-11-30T09:00:00.000Z", &[7]).is_some());
        // A running gateway's record is no error.
        fs::write(
            home.join("gateway_state.json"),
            r#"{"pid": 42, "gateway_state": "running", "exit_reason": null}"#,
        )
        .unwrap();
        assert_eq!(
            last_error(home, "gateway-default").unwrap().at.as_deref(),
            Some("2026-11-30T10:00:00.000Z")
        );
        assert_eq!(recorded(home, "gateway-default"), None);
        assert_eq!(last_error(home, "ticker"), None, "no log");
    }

    fn row(state: StateName, reason: &str) -> ServiceStatus {
        crate::testing::status_row(state, None, reason)
    }

    #[test]
    fn failing_means_failed_or_backing_off_after_a_failure() {
        assert!(is_failing(&row(StateName::Failed, "configuration error")));
        assert!(is_failing(&row(StateName::Backoff, "exited with code 1")));
        assert!(!is_failing(&row(
            StateName::Backoff,
            &format!("{LINGERING_WAIT} 8 to exit")
        )));
        for state in [StateName::Up, StateName::Down, StateName::Starting] {
            assert!(!is_failing(&row(state, "")));
        }
    }

    /// [`LINGERING_WAIT`] is what the supervisor says while a start waits for a lingering group.
    #[test]
    fn the_lingering_wait_is_the_supervisors_wording() {
        let t0 = Instant::now();
        let mut m = Machine::new(
            vec![ServiceSpec::shell("a", "true")],
            Timing::default(),
            None,
            t0,
        );
        // Left over by a previous supervisor, found before the first start.
        m.handle(
            Event::Leftover {
                service: "a".into(),
                pgid: 8,
            },
            t0,
        );
        let later = t0 + Duration::from_millis(1);
        m.handle(Event::Boot, later);
        let st = m.status_of("a", later).unwrap();
        assert_eq!(st.state, StateName::Backoff, "{st:?}");
        assert!(st.reason.starts_with(LINGERING_WAIT), "{}", st.reason);
        assert!(!is_failing(&st));
    }
}
