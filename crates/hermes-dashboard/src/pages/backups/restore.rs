//! Planning and applying a restore for the page: the dry run as JSON, with a token that
//! binds it, and the restore itself only for the plan whose token the request carries.
//!
//! The token is the SHA-256 of everything the page showed: the archive's name, each file's
//! path, change and checksum, the kept and skipped lists, the profiles whose gateways restart
//! and the schema check's refusal. A restore plans again and refuses (409) when the token
//! differs — the archive or the volume changed since the plan was shown — so the page never
//! restores what it did not show.
//!
//! The plan is the backup library's (`hermes_backup::restore::plan`, as `hermes backup restore`
//! makes it), and so is the restore among running services, the one the CLI calls
//! (`hermes_backup::supervised::restore`: the schema check, the affected gateways stopped
//! through the supervisor and started again, the files swapped).

use std::path::Path;
use std::time::Duration;

use hermes_backup::Scope;
use hermes_backup::restore::{self, Change, Plan};
use hermes_backup::supervised::{RestoreOptions, Restored};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How long each exchange with the supervisor may take during a restore (a gateway's stop
/// waits for its drain), as the CLI's.
pub const SUPERVISOR_TIMEOUT: Duration = Duration::from_secs(60);

/// What the page shows of a plan and the token that binds it.
pub struct Shown {
    /// The plan.
    pub plan: Plan,
    /// Why the restore would be refused unless forced (an archive from a newer config
    /// schema than the installed agent's), one line, with its hint.
    pub refusal: Option<(String, Option<String>)>,
    /// Its token ([`token`]).
    pub token: String,
}

/// The dry run of restoring `archive` (named `name`) into the volume at `root`.
///
/// # Errors
/// The library's: a damaged archive, nothing to restore, an unsafe target.
pub fn plan(
    root: &Path,
    name: &str,
    archive: &Path,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Shown, hermes_backup::Error> {
    let plan = restore::plan(root, archive, &Scope::default(), &mut |_, _, _| {})?;
    let refusal = hermes_backup::supervised::schema_refusal(&plan, var)
        .map(|e| (hermes_errors::one_line(&e), e.hint()));
    let token = token(name, &plan, refusal.as_ref().map(|(r, _)| r.as_str()));
    Ok(Shown {
        plan,
        refusal,
        token,
    })
}

/// Applies a plan that was shown among the running services (module doc).
///
/// # Errors
/// The schema refusal (not forced), a gateway running outside the supervisor, a supervisor
/// that cannot be asked, or the restore's own failure (the volume rolled back, the gateways
/// started again).
pub fn apply(
    shown: &Shown,
    force: bool,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Restored, hermes_backup::Error> {
    let options = RestoreOptions {
        force,
        timeout: SUPERVISOR_TIMEOUT,
    };
    hermes_backup::supervised::restore(&shown.plan, options, var)
}

/// The profiles whose files change: the service layer stops and starts again the gateways
/// that serve them (their own, or the multiplexing one) when they run.
pub fn restarts(plan: &Plan) -> Vec<String> {
    plan.profiles_changed()
}

/// The token of `plan` with its schema `refusal` (module doc).
pub fn token(name: &str, plan: &Plan, refusal: Option<&str>) -> String {
    let mut h = Sha256::new();
    let mut field = |s: &str| {
        h.update((s.len() as u64).to_le_bytes());
        h.update(s.as_bytes());
    };
    field(name);
    for p in &plan.files {
        field(&p.file.rel);
        field(change(p.change));
        field(&p.file.sha256);
    }
    field("kept");
    for k in &plan.kept {
        field(k);
    }
    field("skipped");
    for (rel, why) in &plan.skipped {
        field(rel);
        field(why);
    }
    field("restarts");
    for p in restarts(plan) {
        field(&p);
    }
    field("refusal");
    field(refusal.unwrap_or(""));
    hermes_backup::manifest::hex(&h.finalize())
}

fn change(c: Change) -> &'static str {
    match c {
        Change::Added => "added",
        Change::Replaced => "replaced",
        Change::Unchanged => "unchanged",
    }
}

/// The config schema check: the newest `_config_version` in the archive, and the service
/// layer's refusal when it is newer than the installed agent's.
pub fn schema(shown: &Shown) -> Value {
    let archive = shown
        .plan
        .archive
        .newest_config_version()
        .map(|(v, p)| json!({ "version": v, "profile": p }));
    json!({
        "archive": archive,
        "refused": shown.refusal.as_ref().map(|(r, _)| r),
        "hint": shown.refusal.as_ref().and_then(|(_, h)| h.as_ref()),
    })
}

/// The plan as the page shows it: counts, each list, the restarts, the schema check, the
/// archive's manifest, the token.
pub fn describe(name: &str, shown: &Shown) -> Value {
    let plan = &shown.plan;
    let of = |c: Change| -> Vec<&str> {
        plan.files
            .iter()
            .filter(|p| p.change == c)
            .map(|p| p.file.rel.as_str())
            .collect()
    };
    let manifest = plan.archive.manifest.as_ref().map(|m| {
        json!({
            "created": m.created, "build": m.build, "agent_version": m.agent_version,
            "scope": m.scope, "files": m.files.len(),
        })
    });
    json!({
        "name": name,
        "token": shown.token,
        "counts": {
            "added": plan.count(Change::Added),
            "replaced": plan.count(Change::Replaced),
            "unchanged": plan.count(Change::Unchanged),
            "kept": plan.kept.len(),
            "skipped": plan.skipped.len(),
        },
        "added": of(Change::Added),
        "replaced": of(Change::Replaced),
        "unchanged": of(Change::Unchanged),
        "kept": plan.kept,
        "skipped": plan.skipped.iter().map(|(path, why)| json!({ "path": path, "why": why })).collect::<Vec<_>>(),
        "restarts": restarts(plan),
        "schema": schema(shown),
        "manifest": manifest,
    })
}
