//! `hermes backup check`: every profile's databases through `quick_check`, a damaged one
//! restored from the newest sound archive when asked (`hermes_backup::check`). `--at-start` is
//! what the container's boot and `hermes up` run before any gateway starts.

use std::path::Path;

use hermes_backup::check::{Checked, Mode, VolumeCheck};
use hermes_backup::schedule::{BackupSettings, RESTORE_CORRUPT_KEY};
use hermes_errors::text::printable;
use hermes_sessions::integrity::Verdict;
use serde_json::json;

use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// What the operator asked of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// Say what is damaged (exit 1 when anything is).
    Report,
    /// Restore what is damaged.
    Repair,
    /// What a start does: restore when `backup.restore_corrupt` is on; say it, exit 0.
    AtStart,
}

/// Runs the check on the volume at `root`.
pub fn run(root: &Path, asked: Asked, json: bool) -> CommandResult {
    let found = check(root, asked)?;
    if json {
        output::json(&json!({
            "databases": found.databases.iter().map(checked_json).collect::<Vec<_>>(),
            "warnings": found.warnings,
        }))?;
    } else {
        let mut text = String::new();
        for line in lines(&found, asked == Asked::AtStart) {
            text.push_str(&format!("{}\n", printable(&line)));
        }
        output::stdout(&text)?;
    }
    match found.still_damaged().next() {
        Some(_) if asked != Asked::AtStart => Ok(ExitStatus::Failure),
        _ => Ok(ExitStatus::Success),
    }
}

/// The check as `asked`, with the volume's backup settings (where archives are, whether a start
/// restores).
pub fn check(root: &Path, asked: Asked) -> Result<VolumeCheck, Failure> {
    let settings = BackupSettings::load(root, &Context::var)?;
    let mode = match asked {
        Asked::Report => Mode::Report,
        Asked::Repair => Mode::Repair,
        Asked::AtStart if settings.restore_corrupt => Mode::Repair,
        Asked::AtStart => Mode::Keep(format!(
            "`{RESTORE_CORRUPT_KEY}` is off; `hermes backup check --repair` restores it from the \
             newest archive that holds a sound copy"
        )),
    };
    // Where scheduled archives go, and where `hermes backup create` writes by default.
    let mut archives = vec![settings.dir.clone()];
    let default_dir = root.join(hermes_backup::schedule::DEFAULT_DIR);
    if !archives.contains(&default_dir) {
        archives.push(default_dir);
    }
    Ok(hermes_backup::check::check_volume(
        root,
        &archives,
        &mode,
        &mut |_| {},
    )?)
}

/// The lines to print: at a start only what is not sound, and one line for the rest.
pub fn lines(found: &VolumeCheck, at_start: bool) -> Vec<String> {
    let mut lines: Vec<String> = found
        .databases
        .iter()
        .filter(|c| !at_start || c.verdict != Verdict::Sound)
        .map(|c| format!("database check: {}", c.describe()))
        .collect();
    let sound = found
        .databases
        .iter()
        .filter(|c| c.verdict == Verdict::Sound)
        .count();
    if at_start || found.databases.is_empty() {
        lines.push(format!(
            "database check: {sound} of {} databases sound",
            found.databases.len()
        ));
    }
    lines.extend(found.warnings.iter().map(|w| format!("warning: {w}")));
    lines
}

fn checked_json(c: &Checked) -> serde_json::Value {
    let (verdict, said) = match &c.verdict {
        Verdict::Sound => ("sound", None),
        Verdict::Damaged(why) => ("damaged", Some(why)),
        Verdict::Unchecked(why) => ("unchecked", Some(why)),
    };
    json!({
        "profile": c.profile,
        "file": c.file,
        "verdict": verdict,
        "said": said,
        "repair": c.damaged.as_ref().map(|d| &d.repair),
    })
}
