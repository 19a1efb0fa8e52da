//! `hermes health`: whether the running supervisor and its services are healthy, as an exit
//! code — the image's `HEALTHCHECK` and a Kubernetes probe. It asks the supervisor (the only
//! source of truth about services), never guesses from a port, and needs no API key.
//!
//! Healthy means: the supervisor answers, and no service is failing — none is `failed` (parked
//! after a failure restarting will not fix), in `backoff` (waiting to be restarted after a
//! crash: a crash loop keeps it there) or still `starting`. `down` and `disabled` are
//! deliberate (an operator stopped it, it exited cleanly, it is switched off) and healthy.
//!
//! *Degraded* is reported beside it: the volume (the file system of `HERMES_HOME`) is at or
//! above `hermes_home::disk`'s threshold (90 % used, the original's readiness rule), in one
//! line with its usage. Degraded alone still exits 0, because this command is the liveness
//! probe (the image's `HEALTHCHECK`, Kubernetes' `livenessProbe`): a restarted container
//! finds the same full disk, so failing would only make Kubernetes kill the pod in a loop.
//! `--strict` asks for exit 1 when degraded too (a check that should page someone). A
//! database that failed its check at the last start and is still served
//! (`hermes_home::db_check`) is degraded too, one line each, for the same reason: a restart
//! finds it damaged again.

use std::path::Path;

use hermes_home::disk::DiskUsage;
use hermes_supervisor::{ServiceStatus, StateName};
use serde_json::{Value, json};

use crate::cli::HealthArgs;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus};
use crate::output;

/// One service that keeps the installation from being healthy, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The service.
    pub service: String,
    /// Its state.
    pub state: StateName,
    /// The supervisor's reason, if it gave one.
    pub reason: String,
}

/// The services that are not healthy (module doc); empty means healthy.
pub fn problems(rows: &[ServiceStatus]) -> Vec<Problem> {
    rows.iter()
        .filter(|row| match row.state {
            StateName::Failed | StateName::Backoff | StateName::Starting => true,
            StateName::Up | StateName::Down | StateName::Disabled | StateName::Stopping => false,
        })
        .map(|row| Problem {
            service: row.name.clone(),
            state: row.state,
            reason: row.reason.clone(),
        })
        .collect()
}

/// The volume's usage, or why it could not be read (then nothing is said to be degraded: the
/// services' health is what this command knows).
fn volume(root: &Path) -> Result<DiskUsage, String> {
    hermes_home::disk::usage(root).map_err(|e| hermes_errors::one_line(&e))
}

/// The one line saying the volume is degraded, `None` while it is not.
pub fn degraded_line(root: &Path, usage: &DiskUsage) -> Option<String> {
    usage.is_degraded().then(|| {
        format!(
            "degraded: the volume ({}) is {}; free some space or give it more",
            root.display(),
            usage.describe()
        )
    })
}

/// The volume's part of `--json`.
fn volume_json(root: &Path, usage: &Result<DiskUsage, String>) -> Value {
    match usage {
        Ok(u) => json!({
            "path": root,
            "degraded": u.is_degraded(),
            "used_percent": hermes_home::readiness::used_percent(u),
            "free_bytes": u.available_bytes,
            "total_bytes": u.total_bytes,
            "summary": u.describe(),
        }),
        Err(e) => json!({ "path": root, "degraded": false, "error": e }),
    }
}

/// Runs `hermes health`: exit 0 when healthy, 1 with one line per problem otherwise (a
/// supervisor that does not answer is the usual one-line failure, also exit 1); a degraded
/// volume is one more line, and exit 1 only with `--strict` (module doc).
pub fn run(ctx: &Context, args: &HealthArgs) -> CommandResult {
    let root = ctx.root()?;
    let rows = super::service::connect(&root)?.status(None)?;
    let found = problems(&rows);
    let usage = volume(&root);
    let damaged = damaged_databases(&root);
    let degraded = usage.as_ref().is_ok_and(DiskUsage::is_degraded) || !damaged.is_empty();
    if args.json {
        let list: Vec<_> = found
            .iter()
            .map(|p| json!({ "service": p.service, "state": p.state, "reason": p.reason }))
            .collect();
        output::json(&json!({
            "healthy": found.is_empty(),
            "degraded": degraded,
            "services": rows.len(),
            "problems": list,
            "volume": volume_json(&root, &usage),
            "damaged_databases": damaged,
        }))?;
    } else {
        let mut text = String::new();
        if found.is_empty() {
            text.push_str(&format!("healthy: {} service(s)\n", rows.len()));
        }
        for p in &found {
            let reason = if p.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", p.reason)
            };
            text.push_str(&format!(
                "unhealthy: `{}` is {}{reason}\n",
                p.service, p.state
            ));
        }
        if let Some(line) = usage.as_ref().ok().and_then(|u| degraded_line(&root, u)) {
            text.push_str(&line);
            text.push('\n');
        }
        for line in &damaged {
            text.push_str(&format!("degraded: {line}\n"));
        }
        output::stdout(&text)?;
    }
    Ok(if found.is_empty() && !(degraded && args.strict) {
        ExitStatus::Success
    } else {
        ExitStatus::External(1)
    })
}

/// Each database the last check found damaged and still served, in words, profile by profile.
fn damaged_databases(root: &Path) -> Vec<String> {
    hermes_home::profile::list(root)
        .unwrap_or_default()
        .into_iter()
        .flat_map(|entry| {
            let profile = entry.profile.name().to_owned();
            hermes_home::db_check::read(&entry.dir)
                .map(|r| r.damaged)
                .unwrap_or_default()
                .into_iter()
                .filter(hermes_home::db_check::Damaged::still_served)
                .map(move |d| format!("profile `{profile}`: {}", d.describe()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, state: StateName) -> ServiceStatus {
        ServiceStatus {
            reason: format!("{name} reason"),
            ..ServiceStatus::new(name, state)
        }
    }

    #[test]
    fn only_failing_services_are_problems() {
        use StateName::*;
        let rows: Vec<_> = [Up, Down, Disabled, Stopping, Failed, Backoff, Starting]
            .into_iter()
            .map(|s| row(s.as_str(), s))
            .collect();
        let names: Vec<_> = problems(&rows).into_iter().map(|p| p.service).collect();
        assert_eq!(names, ["failed", "backoff", "starting"]);
        assert!(problems(&rows[..4]).is_empty());
    }

    #[test]
    fn the_volume_is_degraded_from_ninety_percent_in_one_line() {
        let at = |used: u64, available: u64| DiskUsage {
            total_bytes: used + available,
            available_bytes: available,
            used_bytes: used,
        };
        let root = Path::new("/opt/data");
        assert_eq!(degraded_line(root, &at(89, 11)), None);
        assert_eq!(
            degraded_line(root, &at(95, 5)).as_deref(),
            Some(
                "degraded: the volume (/opt/data) is 95 % used, 5 B free of 100 B; free some \
                 space or give it more"
            )
        );
        let doc = volume_json(root, &Ok(at(95, 5)));
        assert_eq!(doc["degraded"], true);
        assert_eq!(doc["used_percent"], 95.0);
        assert_eq!(doc["free_bytes"], 5);
        let unknown = volume_json(root, &Err("no such file".into()));
        assert_eq!(unknown["degraded"], false);
        assert_eq!(unknown["error"], "no such file");
    }
}
