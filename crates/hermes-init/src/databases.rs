//! Boot stage 6c: every profile's databases checked before any gateway starts, a damaged one
//! restored from the newest sound archive when `backup.restore_corrupt` is on (the default).
//!
//! PID 1 links no SQLite (see `tests/footprint.rs`): it runs `hermes backup check --at-start`,
//! which acts on the volume as its owner, and passes on what it says — to the container's
//! output as `[init] database check: …` now, and to `logs/container-boot.log` with stage 7's
//! lines, written as the service user — so a damaged `state.db` is never served silently. A
//! check that cannot run is a warning: the gateways still start.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::Settings;
use crate::boot::say;
use crate::route::first_word;

/// Runs the check (module doc) and returns its lines for the boot log. Nothing in a dashboard
/// container, which reads no volume.
pub fn stage_check_databases(settings: &Settings, out: &mut dyn Write) -> Vec<String> {
    if first_word(&settings.cmd) == Some("dashboard") {
        return Vec::new();
    }
    let ran = Command::new(&settings.hermes_exe)
        .args(["backup", "check", "--at-start"])
        .env("HERMES_HOME", &settings.home)
        .stdin(Stdio::null())
        .output();
    let lines: Vec<String> = match ran {
        Ok(done) => {
            let mut lines: Vec<String> = String::from_utf8_lossy(&done.stdout)
                .lines()
                .chain(String::from_utf8_lossy(&done.stderr).lines())
                .filter(|l| !l.trim().is_empty())
                .map(str::to_owned)
                .collect();
            if !done.status.success() {
                lines.push(format!(
                    "warning: the database check failed ({}); the gateways start without it \
                     (run `hermes backup check`)",
                    done.status
                ));
            }
            lines
        }
        Err(e) => vec![format!(
            "warning: cannot run `{} backup check` ({e}); the databases were not checked",
            settings.hermes_exe.display()
        )],
    };
    for line in &lines {
        say(out, line);
    }
    lines
}
