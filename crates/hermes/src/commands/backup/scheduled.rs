//! `hermes backup scheduled` (hidden): the `backup` service's program
//! (`hermes_services::backup_schedule`), which the supervisor runs when `backup.schedule` is
//! set. It loops: sleep until the next slot, write a backup of the whole volume, verify it,
//! prune beyond `keep`, record the run in `.schedule.json` in the backup directory
//! (`hermes_backup::schedule`), and say it in one line on stderr (the service's log).
//!
//! * SIGTERM or SIGINT while it sleeps ends it at once with 0; during a run, once the run is
//!   over (the supervisor's grace for it is `backup_schedule::STOP_GRACE`).
//! * A run that fails is recorded and logged, and the next slot tries again: never a crash
//!   loop. Invalid settings are the one refusal: exit 78 (`failed`, not restarted), the error
//!   being the service's last error in `hermes service status`.
//! * The settings are read once, at start: after changing them, `hermes service restart
//!   backup`.
//! * It is ready (`READY=1`) once its settings are read and its signals set up.
//! * [`RUN_NOW_VAR`] (a test hook, truthy): the first run starts at once instead of at the
//!   first slot; the schedule goes on after it.

use std::os::fd::AsFd;
use std::path::Path;
use std::time::Duration;

use hermes_backup::schedule::{self, BackupSettings, LastRun, State};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use time::OffsetDateTime;

use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// Test hook: the first run starts at once (module doc).
pub const RUN_NOW_VAR: &str = "HERMES_BACKUP_RUN_NOW";

/// The longest single sleep: the time is looked at again at least this often, so a clock that
/// was set meanwhile delays a run by no more than this.
const LONGEST_SLEEP: Duration = Duration::from_secs(60);

/// The hint of a failure of the loop itself (not of a run): the supervisor starts it again.
const RESTARTED: &str = "the supervisor starts the `backup` service again after a failure; `hermes service logs backup` shows each attempt";

/// Runs the loop until a stop signal (module doc).
pub fn run(root: &Path) -> CommandResult {
    let settings = BackupSettings::load(root, &Context::var).map_err(refusal)?;
    let Some(schedule) = settings.schedule.clone() else {
        let mut failure = Failure::new(
            "no backup schedule is set",
            Some(format!(
                "set `{}` in the root's config.yaml (or `{}`) to `hourly`, `daily` or a cron expression",
                schedule::SCHEDULE_KEY,
                schedule::SCHEDULE_VAR
            )),
        );
        failure.code = hermes_errors::exit::CONFIG;
        return Err(failure);
    };
    let stop = StopSignals::block()?;
    let (build, _) = hermes_diag::report::identity_and_install();
    let identity =
        hermes_backup::supervised::identity(format!("hermes {}", build.label()), &Context::var);
    let mut state = match schedule::read_state(&settings.dir) {
        Ok(state) => state.unwrap_or_default(),
        Err(e) => {
            say(&format!(
                "the last runs are not known: {}",
                hermes_errors::one_line(&e)
            ));
            State::default()
        }
    };
    state.schedule = schedule.text().to_owned();
    notify_ready();
    say(&format!(
        "scheduled backups of `{}` at {schedule} UTC into `{}`, keeping the newest {}",
        root.display(),
        settings.dir.display(),
        settings.keep
    ));
    let mut run_now =
        Context::var(RUN_NOW_VAR).is_some_and(|v| hermes_errors::switch::is_truthy(&v));
    loop {
        let now = OffsetDateTime::now_utc();
        let next = if run_now {
            Some(now)
        } else {
            schedule.next_after(now)
        };
        state.next_run = next.map(schedule::rfc3339);
        record(&settings, &state);
        match next {
            _ if run_now => say("running the first backup now"),
            Some(at) => say(&format!("next backup at {}", schedule::rfc3339(at))),
            None => say("the schedule has no next run"),
        }
        run_now = false;
        if !stop.sleep_until(next)? {
            say("stopping");
            return Ok(ExitStatus::Success);
        }
        let run = schedule::run_once(root, &settings, &identity, OffsetDateTime::now_utc());
        say(&describe(&run));
        if run.ok {
            state.last_success = Some(run.started.clone());
        }
        state.last_run = Some(run);
        if stop.pending() {
            state.next_run = schedule
                .next_after(OffsetDateTime::now_utc())
                .map(schedule::rfc3339);
            record(&settings, &state);
            say("stopping");
            return Ok(ExitStatus::Success);
        }
    }
}

/// `READY=1` to the supervisor's readiness socket (`NOTIFY_SOCKET`, sd_notify's protocol): the
/// settings are read and the loop starts, so the service is `up` at once. Without a socket (run
/// by hand) or when it fails, the settle time says `up` instead.
fn notify_ready() {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let Some(socket) = Context::var("NOTIFY_SOCKET").filter(|s| !s.is_empty()) else {
        return;
    };
    let addr = match socket.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())
        }
        None => SocketAddr::from_pathname(&socket),
    };
    let sent = addr.and_then(|addr| UnixDatagram::unbound()?.send_to_addr(b"READY=1", &addr));
    if let Err(e) = sent {
        say(&format!("could not tell the supervisor it is ready: {e}"));
    }
}

/// Invalid settings: exit 78, the supervisor does not restart it.
fn refusal(error: schedule::Error) -> Failure {
    let mut failure = Failure::from(error);
    failure.code = hermes_errors::exit::CONFIG;
    failure
}

/// One line on stderr, the service's log.
fn say(line: &str) {
    output::stderr(&format!("backup: {line}\n"));
}

/// Writes the state, or says why it could not (the next run tries again).
fn record(settings: &BackupSettings, state: &State) {
    let written = schedule::ensure_dir(&settings.dir)
        .and_then(|()| schedule::write_state(&settings.dir, state));
    if let Err(e) = written {
        say(&format!(
            "could not record the schedule's state: {}",
            hermes_errors::one_line(&e)
        ));
    }
}

/// A run in one line: the archive, its size and time, what was pruned; or the error.
pub fn describe(run: &LastRun) -> String {
    let took = format!("{:.1} s", run.duration_ms as f64 / 1000.0);
    if !run.ok {
        return format!("the backup failed after {took}: {}", run.result);
    }
    let file = run
        .file
        .as_ref()
        .map_or_else(String::new, |f| format!("`{}` ", f.display()));
    let size = run
        .size
        .map_or_else(String::new, |s| format!("{}, ", super::bytes(s)));
    let mut line = format!("wrote {file}({size}{took}), verified");
    match run.pruned.len() {
        0 => {}
        1 => line.push_str(&format!("; pruned {}", run.pruned[0])),
        n => line.push_str(&format!("; pruned {n}: {}", run.pruned.join(", "))),
    }
    if run.result != "ok" {
        line.push_str(&format!("; {}", run.result));
    }
    line
}

/// SIGTERM and SIGINT, blocked and read from a signalfd, so a sleep wakes for them and a run
/// is never cut short by one.
struct StopSignals {
    fd: SignalFd,
}

impl StopSignals {
    fn block() -> Result<StopSignals, Failure> {
        let mut mask = SigSet::empty();
        mask.add(Signal::SIGTERM);
        mask.add(Signal::SIGINT);
        let failed = |e: nix::Error| {
            Failure::new(
                format!("could not set up the stop signals: {e}"),
                Some(RESTARTED.into()),
            )
        };
        mask.thread_block().map_err(failed)?;
        let fd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
            .map_err(failed)?;
        Ok(StopSignals { fd })
    }

    /// Sleeps until `at` (forever when `None`); `false` when a stop signal came first.
    fn sleep_until(&self, at: Option<OffsetDateTime>) -> Result<bool, Failure> {
        loop {
            let left = match at {
                Some(at) => {
                    let left = at - OffsetDateTime::now_utc();
                    if left <= time::Duration::ZERO {
                        return Ok(!self.pending());
                    }
                    Duration::try_from(left)
                        .unwrap_or(LONGEST_SLEEP)
                        .min(LONGEST_SLEEP)
                }
                None => LONGEST_SLEEP,
            };
            // Whole milliseconds, rounded up, so a wake-up is never just before the slot.
            let ms = u16::try_from(left.as_millis().saturating_add(1)).unwrap_or(u16::MAX);
            let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => {}
                Ok(_) => {
                    if self.pending() {
                        return Ok(false);
                    }
                }
                Err(e) => {
                    return Err(Failure::new(
                        format!("could not wait for the next backup: {e}"),
                        Some(RESTARTED.into()),
                    ));
                }
            }
        }
    }

    /// Whether a stop signal has come (it is consumed).
    fn pending(&self) -> bool {
        matches!(self.fd.read_signal(), Ok(Some(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_one_line() {
        let mut run = LastRun {
            started: "2026-12-02T00:00:00Z".into(),
            ok: true,
            result: "ok".into(),
            file: Some("/opt/data/backups/hermes-backup-20261202-000000.zip".into()),
            size: Some(3 * 1024 * 1024 + 400 * 1024),
            duration_ms: 1250,
            pruned: vec!["hermes-backup-20261125-000000.zip".into()],
        };
        assert_eq!(
            describe(&run),
            "wrote `/opt/data/backups/hermes-backup-20261202-000000.zip` (3.4 MiB, 1.2 s), \
             verified; pruned hermes-backup-20261125-000000.zip"
        );
        run.pruned.push("hermes-backup-20261126-000000.zip".into());
        run.result = "ok, but could not prune: could not remove `x`".into();
        assert!(describe(&run).ends_with(
            "; pruned 2: hermes-backup-20261125-000000.zip, hermes-backup-20261126-000000.zip; \
             ok, but could not prune: could not remove `x`"
        ));
        let failed = LastRun {
            ok: false,
            result: "another backup or restore is running on this volume".into(),
            file: None,
            size: None,
            pruned: Vec::new(),
            ..run
        };
        assert_eq!(
            describe(&failed),
            "the backup failed after 1.2 s: another backup or restore is running on this volume"
        );
    }
}
