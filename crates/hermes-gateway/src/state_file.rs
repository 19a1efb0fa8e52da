//! The gateway's record in its profile's `gateway_state.json`: [`StateFileRecorder`].
//!
//! Each phase is merged into the file by its one writer, `hermes_home::gateway_state` (so
//! `desired_state`, written by the supervisor, and keys this version does not know survive),
//! restamped with the original's identity fields:
//! `pid`, `kind`, `argv`, `start_time` (clock ticks since boot, field 22 of
//! `/proc/self/stat`), `hermes_home`, `gateway_state`, `exit_reason`, `updated_at`,
//! `code_sha`, `code_version`.
//!
//! What a stop records: the supervisor writes an operator's `desired_state: stopped` *before*
//! it signals the gateway, so a gateway that stops while its desired state is `stopped`
//! records `stopped`. So does a stop planned by the original's tools (its `hermes gateway
//! stop` and `hermes update` write `.gateway-planned-stop.json` naming the gateway's pid and
//! start time before they SIGTERM it; the marker is consumed, as the original's gateway
//! does: `gateway/run.py` `shutdown_signal_handler`, `_stop_impl`). Any other shutdown (the
//! container or `hermes up` going down, Ctrl-C) records `running`, so the next boot brings
//! it back.
//!
//! A gateway records `stopped` only while the record is still its own: in a hand-over its
//! successor has recorded itself (`pid`) before the predecessor finishes draining, and that
//! record must stay. (The successor records `starting` before it serves, so the predecessor,
//! stopped only once the successor is ready, always finds it.)
//!
//! Beside it, the original's lifecycle ledger (`state/gateway.lifecycle.json`, through
//! `hermes_home::lifecycle_ledger`): claimed `running` when the gateway starts serving and
//! marked `exited` with the exit code on every exit path, so a gateway killed without one
//! (SIGKILL, OOM) reads `prior_exit=unclean` at the next boot.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hermes_home::gateway_state::{self, ProcessRecord};
use hermes_home::lifecycle_ledger;

use crate::lifecycle::{Phase, StateRecorder};

/// What this gateway calls itself in the record's `kind`.
const KIND: &str = "hermes-gateway";

/// Writes the gateway's phases into `gateway_state.json` (through
/// `hermes_home::gateway_state::record_process`, the file's one writer).
#[derive(Debug)]
pub struct StateFileRecorder {
    path: PathBuf,
    profile_dir: PathBuf,
    argv: Vec<String>,
    code_sha: Option<String>,
    code_version: String,
    warnings: Mutex<Vec<String>>,
}

impl StateFileRecorder {
    /// A recorder for the profile in `profile_dir`, naming the running build.
    pub fn new(
        profile_dir: &Path,
        argv: Vec<String>,
        code_sha: Option<String>,
        code_version: &str,
    ) -> Self {
        StateFileRecorder {
            path: gateway_state::path(profile_dir),
            profile_dir: profile_dir
                .canonicalize()
                .unwrap_or_else(|_| profile_dir.to_path_buf()),
            argv,
            code_sha,
            code_version: code_version.to_string(),
            warnings: Mutex::new(Vec::new()),
        }
    }

    /// Failures to write the file so far (a recorder must not fail the gateway), drained.
    pub fn take_warnings(&self) -> Vec<String> {
        self.warnings
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default()
    }

    /// The `gateway_state` a stop records (see the module doc).
    fn stopped_state(&self) -> &'static str {
        // Consumed whatever the desired state says, so a marker never outlives its stop.
        let planned = gateway_state::consume_planned_stop(
            &self.profile_dir,
            std::process::id(),
            process_start_time(),
        );
        if planned {
            return "stopped";
        }
        let desired = gateway_state::read(&self.path).ok().and_then(|r| {
            r.state()
                .and_then(|s| s.desired_state().map(str::to_string))
        });
        if desired.as_deref() == Some("stopped") {
            "stopped"
        } else {
            "running"
        }
    }
}

impl StateRecorder for StateFileRecorder {
    fn record(&self, phase: Phase, exit_reason: Option<&str>) {
        if phase == Phase::Stopped && !self.record_is_ours() {
            tracing::debug!(
                "gateway_state.json names another gateway (a successor): left as it is"
            );
            return;
        }
        let state = match phase {
            Phase::Stopped => self.stopped_state(),
            other => other.as_str(),
        };
        let record = ProcessRecord {
            pid: std::process::id(),
            kind: KIND,
            argv: &self.argv,
            start_time: process_start_time(),
            hermes_home: &self.profile_dir,
            gateway_state: state,
            exit_reason,
            code_sha: self.code_sha.as_deref(),
            code_version: &self.code_version,
        };
        if let Err(e) = gateway_state::record_process(&self.path, &record) {
            self.warn(&e);
        }
        if phase == Phase::Running
            && let Err(e) = lifecycle_ledger::record_running(&self.profile_dir, record.pid)
        {
            self.warn(&e);
        }
    }

    fn exited(&self, exit_code: u8, reason: &str) {
        let pid = std::process::id();
        if let Err(e) =
            lifecycle_ledger::mark_exited(&self.profile_dir, pid, i32::from(exit_code), reason)
        {
            self.warn(&e);
        }
    }

    fn api_server(&self, state: &str, message: Option<&str>) {
        if let Err(e) = gateway_state::record_platform(&self.path, "api_server", state, message) {
            self.warn(&e);
        }
    }
}

impl StateFileRecorder {
    /// Whether the record names this process, or no process (nothing to protect).
    fn record_is_ours(&self) -> bool {
        let pid = gateway_state::read(&self.path)
            .ok()
            .and_then(|r| r.state().and_then(|s| s.pid()));
        pid.is_none_or(|pid| pid == i64::from(std::process::id()))
    }

    fn warn(&self, e: &hermes_home::Error) {
        if let Ok(mut warnings) = self.warnings.lock() {
            warnings.push(format!("could not record the gateway state: {e}"));
        }
    }
}

/// This process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22, read as
/// every reader of a lock record or a planned-stop marker reads it).
fn process_start_time() -> Option<u64> {
    hermes_home::gateway_lock::process_start_time(i32::try_from(std::process::id()).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(dir: &Path) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join("gateway_state.json")).unwrap())
            .unwrap()
    }

    #[test]
    fn phases_are_merged_with_the_identity_fields() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("gateway_state.json"),
            r#"{"desired_state":"running","future":1}"#,
        )
        .unwrap();
        let recorder = StateFileRecorder::new(
            dir.path(),
            vec!["hermes".into()],
            Some("abc".into()),
            "0.1.0",
        );
        recorder.record(Phase::Running, None);
        let state = read(dir.path());
        assert_eq!(state["gateway_state"], "running");
        assert_eq!(state["pid"], std::process::id());
        assert_eq!(state["kind"], "hermes-gateway");
        assert!(state["start_time"].is_u64(), "{state}");
        assert_eq!(
            (state["code_sha"].as_str(), state["future"].as_i64()),
            (Some("abc"), Some(1))
        );
        assert!(recorder.take_warnings().is_empty());
    }

    #[test]
    fn a_stop_leaves_a_successors_record_alone() {
        let dir = tempfile::tempdir().unwrap();
        let successor = r#"{"pid":1,"gateway_state":"running","kind":"hermes-gateway"}"#;
        std::fs::write(dir.path().join("gateway_state.json"), successor).unwrap();
        let recorder = StateFileRecorder::new(dir.path(), Vec::new(), None, "0.1.0");
        recorder.record(Phase::Stopped, Some("stopped"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("gateway_state.json")).unwrap(),
            successor
        );
        // Its own record, or none, is written as ever.
        recorder.record(Phase::Running, None);
        recorder.record(Phase::Stopped, Some("stopped"));
        let state = read(dir.path());
        assert_eq!(state["pid"], std::process::id());
        assert_eq!(state["exit_reason"], "stopped");
    }

    #[test]
    fn a_stop_is_stopped_only_when_the_operator_asked_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = StateFileRecorder::new(dir.path(), Vec::new(), None, "0.1.0");
        recorder.record(Phase::Stopped, Some("stopped"));
        assert_eq!(
            read(dir.path())["gateway_state"],
            "running",
            "a shutdown comes back at boot"
        );
        gateway_state::set_desired(
            &gateway_state::path(dir.path()),
            gateway_state::DesiredState::Stopped,
        )
        .unwrap();
        recorder.record(Phase::Stopped, Some("stopped"));
        assert_eq!(read(dir.path())["gateway_state"], "stopped");
        assert_eq!(read(dir.path())["exit_reason"], "stopped");
    }

    #[test]
    fn a_stop_planned_by_the_originals_tools_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let recorder = StateFileRecorder::new(dir.path(), Vec::new(), None, "0.1.0");
        let marker = dir.path().join(gateway_state::PLANNED_STOP_FILE);
        // As `gateway/status.py` `write_planned_stop_marker` writes it (compact JSON).
        let write = |pid: u32| {
            let text = serde_json::json!({
                "target_pid": pid,
                "target_start_time": process_start_time(),
                "stopper_pid": 1,
                "written_at": hermes_home::time::iso_utc_now(),
            });
            std::fs::write(&marker, text.to_string()).unwrap();
        };
        write(std::process::id() + 1);
        recorder.record(Phase::Stopped, Some("stopped"));
        assert_eq!(read(dir.path())["gateway_state"], "running", "not ours");
        assert!(!marker.exists());

        write(std::process::id());
        recorder.record(Phase::Stopped, Some("stopped"));
        assert_eq!(read(dir.path())["gateway_state"], "stopped");
        assert!(!marker.exists(), "consumed");
        recorder.record(Phase::Stopped, Some("stopped"));
        assert_eq!(read(dir.path())["gateway_state"], "running", "once");
    }

    #[test]
    fn serving_claims_the_ledger_and_an_exit_path_marks_it_exited() {
        use hermes_home::lifecycle_ledger::{PriorExit, prior_exit};
        let dir = tempfile::tempdir().unwrap();
        let recorder = StateFileRecorder::new(dir.path(), Vec::new(), None, "0.1.0");
        recorder.record(Phase::Starting, None);
        assert_eq!(
            prior_exit(dir.path()),
            PriorExit::Unknown,
            "not serving yet"
        );
        recorder.record(Phase::Running, None);
        assert_eq!(
            prior_exit(dir.path()),
            PriorExit::Unclean,
            "a kill now is unclean"
        );
        recorder.record(Phase::Stopped, Some("restart requested"));
        recorder.exited(75, "restart requested");
        let ledger: serde_json::Value = serde_json::from_slice(
            &std::fs::read(hermes_home::lifecycle_ledger::path(dir.path())).unwrap(),
        )
        .unwrap();
        assert_eq!(
            (ledger["phase"].as_str(), ledger["exit_code"].as_i64()),
            (Some("exited"), Some(75))
        );
        assert_eq!(ledger["pid"], std::process::id());
        assert_eq!(prior_exit(dir.path()), PriorExit::Clean);
        assert!(recorder.take_warnings().is_empty());
    }

    #[test]
    fn a_write_failure_is_kept_as_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone");
        let recorder = StateFileRecorder::new(&missing, Vec::new(), None, "0.1.0");
        recorder.record(Phase::Starting, None);
        assert_eq!(recorder.take_warnings().len(), 1);
    }
}
