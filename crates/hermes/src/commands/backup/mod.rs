//! `hermes backup create|verify|restore|check|recover`: the CLI of `hermes-backup` (the files) and
//! `hermes_services::backup` (the gateways around a restore). Progress goes to stderr, results
//! to stdout (to stderr when the archive itself goes to stdout). The hidden `hermes backup
//! scheduled` is the `backup` service's loop ([`scheduled`]).

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hermes_backup::restore::{Change, Interrupted, Plan};
use hermes_backup::{Scope, Summary};
use hermes_errors::text::printable;
use hermes_home::{Home, ProfileRef};
use serde_json::json;

use crate::cli::BackupCommand;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

pub mod check;
pub mod scheduled;

/// How long a restore waits for each answer of the supervisor (a stop waits for the gateway).
const SUPERVISOR_TIMEOUT: Duration = Duration::from_secs(60);

/// Dispatches `hermes backup <sub>`. `verify` reads only the archive (it runs anywhere, with
/// or without a volume); every other command opens the volume first, rolling back a restore a
/// kill interrupted.
pub fn run(ctx: &Context, command: BackupCommand) -> CommandResult {
    match command {
        BackupCommand::Verify { file, json } => verify(&file, json),
        BackupCommand::Create {
            output,
            profiles,
            quick,
            compress,
            keep,
            json,
        } => {
            let (root, _) = open_volume()?;
            let scope = scope(ctx, &root, &profiles, quick)?;
            create(
                &root,
                output.as_deref(),
                &scope,
                compress,
                keep.map(usize::from),
                json,
            )
        }
        BackupCommand::Restore {
            file,
            dry_run,
            profiles,
            yes,
            force,
            json,
        } => {
            let (root, _) = open_volume()?;
            let scope = scope(ctx, &root, &profiles, false)?;
            restore(&root, &file, &scope, dry_run, yes, force, json)
        }
        BackupCommand::Check {
            repair,
            at_start,
            json,
        } => {
            let asked = match (repair, at_start) {
                (true, _) => check::Asked::Repair,
                (false, true) => check::Asked::AtStart,
                (false, false) => check::Asked::Report,
            };
            check::run(&open_volume()?.0, asked, json)
        }
        BackupCommand::Scheduled => scheduled::run(&open_volume()?.0),
        BackupCommand::Recover => {
            if open_volume()?.1 == 0 {
                output::stdout("Nothing to recover: no restore was interrupted on this volume.\n")?;
            }
            Ok(ExitStatus::Success)
        }
    }
}

/// The volume's root, after any interrupted restore on it was rolled back (and how many were).
fn open_volume() -> Result<(PathBuf, usize), Failure> {
    let root = volume_root()?;
    let recovered = recover_interrupted(&root)?;
    Ok((root, recovered))
}

/// `HERMES_HOME`, which must exist: a backup command never creates a volume (nor its
/// skeleton), so it changes nothing it does not say it changes.
fn volume_root() -> Result<PathBuf, Failure> {
    let root = hermes_home::layout::resolve_root(Context::var)?;
    if !root.is_dir() {
        return Err(Failure::new(
            format!("`{}` is not a directory", root.display()),
            Some("set HERMES_HOME to the data volume (`/opt/data` in the container)".into()),
        ));
    }
    Ok(root)
}

/// Rolls back a restore that a kill interrupted, saying so; returns how many there were.
fn recover_interrupted(root: &Path) -> Result<usize, Failure> {
    let recovered = hermes_backup::restore::recover(root)?;
    for r in &recovered {
        let what = match r.state {
            Interrupted::Staging => "discarded an interrupted restore that had changed nothing yet",
            Interrupted::RolledBack => {
                "rolled back an interrupted restore: the volume is as it was before it"
            }
            Interrupted::Finished => "cleaned up after a restore that had finished",
        };
        output::stderr(&format!("backup: {what} (`{}`)\n", r.staging.display()));
    }
    Ok(recovered.len())
}

/// What `--profile` (or the top level's `-p`, which would otherwise be ignored: a restore of
/// the whole volume when one profile was meant) and `--quick` ask for.
fn scope(ctx: &Context, root: &Path, profiles: &[String], quick: bool) -> Result<Scope, Failure> {
    let top_level: Vec<String> = ctx.profile_flag.iter().cloned().collect();
    let profiles = if profiles.is_empty() {
        &top_level[..]
    } else {
        profiles
    };
    let profiles = if profiles.is_empty() {
        None
    } else {
        let mut refs = Vec::new();
        for name in profiles {
            let profile = ProfileRef::parse(name)?;
            // A restore may bring a profile back: only its name must be valid then.
            let _ = Home::for_profile(root.to_path_buf(), profile.clone());
            if !refs.contains(&profile) {
                refs.push(profile);
            }
        }
        Some(refs)
    };
    Ok(Scope { profiles, quick })
}

fn create(
    root: &Path,
    output: Option<&str>,
    scope: &Scope,
    compress: bool,
    keep: Option<usize>,
    json: bool,
) -> CommandResult {
    let compression = if compress {
        hermes_backup::Compression::Small
    } else {
        hermes_backup::Compression::Fast
    };
    let (identity, _) = hermes_diag::report::identity_and_install();
    let identity =
        hermes_backup::supervised::identity(format!("hermes {}", identity.label()), &Context::var);
    let mut progress = ProgressLine::new("backup");
    let mut report = |p: &hermes_backup::Progress<'_>| {
        progress.show(|| {
            format!(
                "{}/{} files, {} of {} ({})",
                p.files_done,
                p.files_total,
                bytes(p.bytes_done),
                bytes(p.bytes_total),
                p.current
            )
        });
    };
    let summary = match output {
        Some("-") => {
            let stdout = std::io::stdout();
            if stdout.is_terminal() {
                return Err(Failure::new(
                    "refusing to write a zip archive to a terminal",
                    Some("redirect it to a file: `hermes backup create -o - > backup.zip`".into()),
                ));
            }
            let summary = hermes_backup::create_to(
                root,
                scope,
                &identity,
                compression,
                stdout.lock(),
                &mut report,
            )?;
            progress.done();
            summary
        }
        _ => {
            let (path, made_dir) = match output {
                Some(path) => (PathBuf::from(path), None),
                None => default_output(root)?,
            };
            let summary =
                hermes_backup::create_file(root, scope, &identity, compression, &path, &mut report);
            progress.done();
            if summary.is_err()
                && let Some(dir) = made_dir
            {
                // A failed backup leaves the volume as it found it.
                let _ = std::fs::remove_dir(dir);
            }
            summary?
        }
    };
    // Into the backup directory by default: keep the newest `keep` of its default-named
    // archives, once this one is verified.
    let pruned = match (&summary.path, output) {
        (Some(path), None) => keep_newest(root, path, keep)?,
        _ => Vec::new(),
    };
    let to_stdout = output != Some("-");
    if json {
        let mut value = summary_json(&summary);
        value["pruned"] = json!(pruned);
        if to_stdout {
            output::json(&value)?;
        } else {
            output::stderr(&format!("{value}\n"));
        }
    } else {
        let text = format!(
            "Backed up {}: {} files ({} databases), {} -> {} ({})\n",
            scope.describe(),
            summary.files,
            summary.databases,
            bytes(summary.bytes),
            summary.path.as_ref().map_or_else(
                || "standard output".to_owned(),
                |p| format!("`{}`", p.display())
            ),
            bytes(summary.archive_bytes)
        );
        let text = if pruned.is_empty() {
            text
        } else {
            format!(
                "{text}Verified it, then removed the oldest: {}\n",
                pruned.join(", ")
            )
        };
        if to_stdout {
            output::stdout(&text)?;
        } else {
            output::stderr(&text);
        }
    }
    Ok(ExitStatus::Success)
}

/// Keeps the newest `keep` (default `backup.keep`, 3) of `hermes backup create`'s archives in
/// the directory of `archive`, the one just written: only once it passed verification, so an
/// older sound archive is never removed for a broken new one. Returns the names removed.
fn keep_newest(root: &Path, archive: &Path, keep: Option<usize>) -> Result<Vec<String>, Failure> {
    use hermes_backup::schedule;
    let keep = keep.unwrap_or_else(|| {
        schedule::BackupSettings::load(root, &Context::var)
            .map(|s| s.keep)
            .unwrap_or(schedule::DEFAULT_KEEP)
    });
    let dir = archive.parent().unwrap_or(Path::new("."));
    let existing = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| schedule::is_created_name(&e.file_name().to_string_lossy()))
                .count()
        })
        .unwrap_or(0);
    if existing <= keep {
        return Ok(Vec::new());
    }
    let mut progress = ProgressLine::new("verify");
    let verified = hermes_backup::verify::verify(archive, &mut |done, total, rel| {
        progress.show(|| format!("{done}/{total} entries ({})", printable(rel)));
    });
    progress.done();
    verified?.ok().map_err(|e| {
        let mut failure = Failure::from(e);
        failure.hint = Some(format!(
            "nothing older was removed; check `{}` and the volume's databases (`hermes backup check`)",
            archive.display()
        ));
        failure
    })?;
    Ok(schedule::prune_created(dir, keep)?)
}

/// `$HERMES_HOME/backups/hermes-backup-<UTC time>.zip` (`-2`, `-3`, … when taken), the directory made if needed (owned by
/// the volume's owner, as the rest of the volume) and then returned too.
fn default_output(root: &Path) -> Result<(PathBuf, Option<PathBuf>), Failure> {
    let dir = root.join(hermes_backup::schedule::DEFAULT_DIR);
    let mut made = None;
    // A link planted in its place (the volume is the service user's; this may run as root)
    // would put the archive wherever it points.
    if std::fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(Failure::new(
            format!("`{}` is a symlink", dir.display()),
            Some("remove the link (or give `-o` a path of your own)".into()),
        ));
    }
    if !dir.is_dir() {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| {
                Failure::new(
                    format!("could not create `{}`: {e}", dir.display()),
                    Some("check that this user may write the volume, or write the archive elsewhere with `-o`".into()),
                )
            })?;
        if nix::unistd::geteuid().is_root()
            && let Ok(meta) = std::fs::metadata(root)
        {
            let _ = std::os::unix::fs::chown(&dir, Some(meta.uid()), Some(meta.gid()));
        }
        made = Some(dir.clone());
    }
    // Two backups within a second get `-2`, `-3`, … rather than a refusal.
    let stamp = hermes_home::time::compact_utc_now();
    let path = (1..100)
        .map(|n| match n {
            1 => dir.join(format!("hermes-backup-{stamp}.zip")),
            n => dir.join(format!("hermes-backup-{stamp}-{n}.zip")),
        })
        .find(|p| std::fs::symlink_metadata(p).is_err())
        .unwrap_or_else(|| dir.join(format!("hermes-backup-{stamp}.zip")));
    Ok((path, made))
}

fn summary_json(summary: &Summary) -> serde_json::Value {
    json!({
        "path": summary.path,
        "files": summary.files,
        "databases": summary.databases,
        "bytes": summary.bytes,
        "archive_bytes": summary.archive_bytes,
        "created": summary.manifest.created,
        "build": summary.manifest.build,
        "agent_version": summary.manifest.agent_version,
        "scope": summary.manifest.scope,
    })
}

fn verify(file: &Path, json: bool) -> CommandResult {
    let mut progress = ProgressLine::new("verify");
    let verified = hermes_backup::verify::verify(file, &mut |done, total, rel| {
        progress.show(|| format!("{done}/{total} entries ({})", printable(rel)));
    })?;
    progress.done();
    let databases = verified.files.iter().filter(|f| f.database).count();
    if json {
        output::json(&json!({
            "ok": verified.problems.is_empty(),
            "files": verified.files.len(),
            "databases": databases,
            "manifest": verified.manifest,
            "config_versions": verified.config_versions,
            "problems": verified.problems,
        }))?;
    } else {
        let mut text = String::new();
        text.push_str(&made_by(&verified));
        for problem in &verified.problems {
            text.push_str(&format!("  problem: {}\n", printable(problem)));
        }
        if verified.problems.is_empty() {
            text.push_str(&format!(
                "OK: {} files, {} databases passed integrity_check{}\n",
                verified.files.len(),
                databases,
                if verified.manifest.is_some() {
                    ", every checksum matches the manifest"
                } else {
                    ""
                }
            ));
        }
        output::stdout(&text)?;
    }
    if verified.problems.is_empty() {
        Ok(ExitStatus::Success)
    } else {
        Err(hermes_backup::Error::Verification {
            path: verified.path,
            problems: vec![format!(
                "{} problems (listed above)",
                verified.problems.len()
            )],
        }
        .into())
    }
}

/// `Archive `x.zip`: made by … at … (agent …)` or the original's. The manifest's words are
/// the archive's, not ours: shown escaped.
fn made_by(verified: &hermes_backup::verify::Verified) -> String {
    let path = verified.path.display().to_string();
    match &verified.manifest {
        Some(m) => format!(
            "Archive `{}`: made by {} at {}{}, {}\n",
            printable(&path),
            printable(&m.build),
            printable(&m.created),
            m.agent_version
                .as_ref()
                .map(|v| format!(" (hermes-agent {})", printable(v)))
                .unwrap_or_default(),
            printable(&m.scope)
        ),
        None => format!(
            "Archive `{}`: no manifest (made by the original's `hermes backup`)\n",
            printable(&path)
        ),
    }
}

#[allow(clippy::too_many_arguments, reason = "one per flag of the command")]
fn restore(
    root: &Path,
    file: &Path,
    scope: &Scope,
    dry_run: bool,
    yes: bool,
    force: bool,
    json: bool,
) -> CommandResult {
    let mut progress = ProgressLine::new("verify");
    let plan = hermes_backup::restore::plan(root, file, scope, &mut |done, total, rel| {
        progress.show(|| format!("{done}/{total} entries ({})", printable(rel)));
    })?;
    progress.done();
    let refusal = hermes_backup::supervised::schema_refusal(&plan, &Context::var);
    if json && dry_run {
        output::json(&plan_json(&plan, refusal.as_ref()))?;
        return Ok(ExitStatus::Success);
    }
    if !json {
        output::stdout(&render_plan(&plan, refusal.as_ref()))?;
    }
    if dry_run {
        return Ok(ExitStatus::Success);
    }
    if let Some(refusal) = refusal
        && !force
    {
        return Err(refusal.into());
    }
    if plan.count(Change::Added) + plan.count(Change::Replaced) == 0 {
        output::stdout("Nothing to change: the volume already holds every file of the archive.\n")?;
        return Ok(ExitStatus::Success);
    }
    if !yes {
        confirm()?;
    }
    let options = hermes_backup::supervised::RestoreOptions {
        force,
        timeout: SUPERVISOR_TIMEOUT,
    };
    let restored = hermes_backup::supervised::restore(&plan, options, &Context::var)?;
    for (service, why) in &restored.start_failures {
        output::stderr(&format!(
            "warning: `{service}` did not start again: {why}\n"
        ));
    }
    if json {
        output::json(&json!({
            "plan": plan_json(&plan, None),
            "applied": restored.applied,
            "restarted": restored.restarted,
            "start_failures": restored.start_failures,
        }))?;
    } else {
        let a = restored.applied;
        let mut text = format!(
            "Restored: {} added, {} replaced, {} unchanged, {} kept.\n",
            a.added, a.replaced, a.unchanged, a.kept
        );
        if !restored.restarted.is_empty() {
            text.push_str(&format!("Restarted: {}\n", restored.restarted.join(", ")));
        }
        output::stdout(&text)?;
    }
    Ok(if restored.start_failures.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

fn confirm() -> Result<(), Failure> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(Failure::new(
            "refusing to restore without confirmation",
            Some(
                "check the plan with `--dry-run`, then pass `--yes` to restore without a prompt"
                    .into(),
            ),
        ));
    }
    output::stderr("Restore these files? [y/N] ");
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    if !matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        return Err(Failure::new(
            "cancelled: nothing was restored",
            Some("answer `y` to restore, or pass `--yes`".into()),
        ));
    }
    Ok(())
}

/// At most this many names per list of the plan; the rest are counted.
const LISTED: usize = 8;

fn render_plan(plan: &Plan, refusal: Option<&hermes_backup::Error>) -> String {
    let names = |change| -> Vec<String> {
        names(plan, change)
            .iter()
            .map(|rel| printable(rel).into_owned())
            .collect()
    };
    let mut text = made_by(&plan.archive);
    text.push_str(&format!(
        "Restoring into `{}` would change:\n",
        plan.root.display()
    ));
    let rows = [
        ("added", names(Change::Added)),
        ("replaced", names(Change::Replaced)),
        ("unchanged", names(Change::Unchanged)),
        (
            "kept",
            plan.kept
                .iter()
                .map(|rel| printable(rel).into_owned())
                .collect(),
        ),
        (
            "skipped",
            plan.skipped
                .iter()
                .map(|(rel, why)| format!("{} ({why})", printable(rel)))
                .collect(),
        ),
    ];
    for (label, list) in rows {
        let shown = if label == "unchanged" {
            Vec::new()
        } else {
            list.iter().take(LISTED).cloned().collect()
        };
        let more = list.len().saturating_sub(shown.len());
        let mut line = format!("  {label:<10}{:>6}", list.len());
        if !shown.is_empty() {
            line.push_str(&format!("  {}", shown.join(", ")));
            if more > 0 {
                line.push_str(&format!(", and {more} more"));
            }
        }
        if label == "kept" && !list.is_empty() {
            line.push_str("  (not in the archive: left as they are)");
        }
        text.push_str(&line);
        text.push('\n');
    }
    let profiles = plan.profiles_changed();
    if !profiles.is_empty() {
        text.push_str(&format!(
            "The gateways of {} are stopped for the restore and started after.\n",
            profiles.join(", ")
        ));
    }
    if let Some(refusal) = refusal {
        text.push_str(&format!("Refused without --force: {refusal}\n"));
    }
    text
}

fn names(plan: &Plan, change: Change) -> Vec<String> {
    plan.files
        .iter()
        .filter(|p| p.change == change)
        .map(|p| p.file.rel.clone())
        .collect()
}

fn plan_json(plan: &Plan, refusal: Option<&hermes_backup::Error>) -> serde_json::Value {
    json!({
        "archive": plan.archive.path,
        "manifest": plan.archive.manifest,
        "added": names(plan, Change::Added),
        "replaced": names(plan, Change::Replaced),
        "unchanged": names(plan, Change::Unchanged),
        "kept": plan.kept,
        "skipped": plan.skipped.iter().map(|(rel, why)| json!({"path": rel, "why": why})).collect::<Vec<_>>(),
        "profiles_changed": plan.profiles_changed(),
        "refused": refusal.map(|r| r.to_string()),
    })
}

/// Bytes as people read them: `512 B`, `3.4 MiB`, `1.2 GiB`.
fn bytes(n: u64) -> String {
    hermes_errors::bytes::human(n)
}

/// Progress on stderr: a line rewritten in place on a terminal, else a line every 5 s, so a
/// long backup under `docker exec` still says it is alive.
struct ProgressLine {
    label: &'static str,
    tty: bool,
    last: Option<Instant>,
    shown: bool,
}

impl ProgressLine {
    fn new(label: &'static str) -> Self {
        ProgressLine {
            label,
            tty: std::io::stderr().is_terminal(),
            last: None,
            shown: false,
        }
    }

    fn show(&mut self, line: impl FnOnce() -> String) {
        let every = if self.tty {
            Duration::from_millis(200)
        } else {
            Duration::from_secs(5)
        };
        let now = Instant::now();
        let Some(last) = self.last else {
            self.last = Some(now);
            return;
        };
        if now.duration_since(last) < every {
            return;
        }
        self.last = Some(now);
        let mut err = std::io::stderr().lock();
        let _ = if self.tty {
            write!(err, "\r\x1b[2K{}: {}", self.label, line())
        } else {
            writeln!(err, "{}: {}", self.label, line())
        };
        self.shown = true;
    }

    fn done(&mut self) {
        if self.tty && self.shown {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}
