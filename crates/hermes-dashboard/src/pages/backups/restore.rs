//! Planning and applying a restore for the page: the dry run as JSON, with a token that
//! binds it, and the restore itself only for the plan whose token the request carries.
//!
//! The token is the SHA-256 of everything the page showed: the archive's name, each file's
//! path, change and checksum, the kept and skipped lists and the profiles that restart. A
//! restore plans again and refuses (409) when the token differs — the archive or the volume
//! changed since the plan was shown — so the page never restores what it did not show.
//!
//! The work itself is [`plan`] and [`apply`]: the backup library's plan and apply
//! (`hermes_backup::restore`); stopping and starting the affected gateways around it is the
//! service layer's.

use std::path::Path;

use hermes_backup::restore::{self, Change, Plan};
use hermes_backup::{Error, Scope};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// What the page shows of a plan and the token that binds it.
pub struct Shown {
    /// The plan.
    pub plan: Plan,
    /// Its token ([`token`]).
    pub token: String,
}

/// The dry run of restoring `archive` (named `name`) into the volume at `root`.
///
/// # Errors
/// The library's: a damaged archive, nothing to restore, an unsafe target.
pub fn plan(root: &Path, name: &str, archive: &Path) -> Result<Shown, Error> {
    let plan = restore::plan(root, archive, &Scope::default(), &mut |_, _, _| {})?;
    let token = token(name, &plan);
    Ok(Shown { plan, token })
}

/// Applies a plan that was shown.
///
/// # Errors
/// The library's; the volume is then as it was.
pub fn apply(shown: &Shown) -> Result<restore::Applied, Error> {
    restore::apply(&shown.plan)
}

/// The profiles whose gateways the restore stops and starts again: those whose files change.
pub fn restarts(plan: &Plan) -> Vec<String> {
    plan.profiles_changed()
}

/// The token of `plan` (module doc).
pub fn token(name: &str, plan: &Plan) -> String {
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
    hermes_backup::manifest::hex(&h.finalize())
}

fn change(c: Change) -> &'static str {
    match c {
        Change::Added => "added",
        Change::Replaced => "replaced",
        Change::Unchanged => "unchanged",
    }
}

/// The config schema check: the newest `_config_version` in the archive against the
/// volume's. An archive newer than the volume was written by a newer agent than the one that
/// last wrote here.
pub fn schema(root: &Path, plan: &Plan) -> Value {
    let archive = plan
        .archive
        .manifest
        .as_ref()
        .and_then(|m| m.newest_config_version())
        .map(|(v, p)| json!({ "version": v, "profile": p }));
    let volume_schema = hermes_home::schema::VolumeSchema::read(root);
    let volume = volume_schema.newest().map(|(v, _)| v);
    let newer = match (&archive, volume) {
        (Some(a), Some(v)) => a["version"].as_u64().is_some_and(|a| a > v),
        _ => false,
    };
    json!({
        "archive": archive,
        "volume": volume.map(|v| json!({ "version": v })),
        "newer_than_volume": newer,
    })
}

/// The plan as the page shows it: counts, each list, the restarts, the schema check, the
/// archive's manifest, the token.
pub fn describe(root: &Path, name: &str, shown: &Shown) -> Value {
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
        "schema": schema(root, plan),
        "manifest": manifest,
    })
}
