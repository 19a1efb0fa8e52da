//! Install generations: every install into the durable target builds a new, immutable
//! directory beside the active one and switches to it only once it imports.
//!
//! The flat target the seeds describe (one directory that `pip --target` writes in place)
//! breaks on the day an image changes: a new interpreter empties it, a changed core leaves
//! copies resolved against the old one, and an install stopped half way leaves a mixed tree.
//! Here, an install into the durable target `T`:
//!
//! 1. takes the store's lock ([`store`]), removes generations an earlier install left
//!    unfinished, and adopts a flat `T` from before generations as the first one;
//! 2. creates the next generation directory and installs into it, with `--target`, every
//!    package asked for so far plus the new ones, pinned to the core's versions;
//! 3. imports what each request installed ([`check`]); a failure removes the new directory;
//! 4. writes the generation's record ([`record`]) last, seals the tree ([`tree::seal`]) and
//!    renames a new link over `T`.
//!
//! A failed or killed install therefore never touches the active generation: what it leaves
//! is a directory without a record, removed by the next one. [`collect`] removes generations
//! older than the previous one; [`resolve_again`] rebuilds the active generation's requests
//! against a new core (boot does, when the image changed).

pub mod check;
pub mod record;
pub mod resolve;
pub mod status;
pub mod store;
pub mod tree;
pub mod uv_shim;

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub use record::{GenerationRecord, Origin, Request, Requester, Resolved, Unavailable};
pub use resolve::{Resolution, ResolutionReport, resolve_again};
pub use status::{GenerationSummary, Overview, overview};
pub use store::{Generation, Pointer, Store, StoreLock};

use crate::Error;
use crate::install::{
    Core, InstallEvent, InstallOptions, InstallOutcome, StepError, run_installer,
};
use crate::target::{ABI_STAMP, constraint_lines, installed_distributions};

/// The core environment's lock: a digest of every distribution installed in it, name and
/// version. Two images whose core venvs hold the same versions have the same lock. (FNV-1a:
/// it tells sets of versions apart, it guards nothing, and PID 1's installer stays small.)
pub fn core_lock(site_packages: &[std::path::PathBuf]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for line in constraint_lines(&installed_distributions(site_packages)) {
        for byte in line
            .to_ascii_lowercase()
            .bytes()
            .chain(std::iter::once(b'\n'))
        {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn store_error<'a>(
    path: &'a Path,
    action: &'static str,
) -> impl FnOnce(std::io::Error) -> StepError + 'a {
    move |source| {
        (
            Error::Generations {
                path: path.to_path_buf(),
                action,
                source,
            },
            None,
        )
    }
}

/// Makes the store ready for a new generation (the lock held): unfinished ones removed, a
/// flat target adopted, a missing pointer repaired. Refuses a pointer it does not manage.
pub(crate) fn prepare(store: &Store, options: &InstallOptions) -> Result<(), StepError> {
    store
        .remove_unfinished()
        .map_err(store_error(store.root(), "remove an unfinished install in"))?;
    match store.pointer() {
        Pointer::Flat if holds_nothing(store.target()) => {
            // An empty directory (older boots made one) is not worth a generation.
            std::fs::remove_dir_all(store.target())
                .map_err(store_error(store.target(), "remove the empty"))?;
        }
        Pointer::Flat => {
            let id = adopt_flat(store).map_err(store_error(store.target(), "adopt"))?;
            options.emit(InstallEvent::Adopted {
                path: store.target().to_path_buf(),
                generation: id,
            });
        }
        Pointer::Foreign(what) => {
            return Err((
                Error::ForeignTarget {
                    path: store.target().to_path_buf(),
                    what,
                },
                None,
            ));
        }
        Pointer::Missing | Pointer::Generation(_) => {}
    }
    store
        .repair_pointer()
        .map_err(store_error(store.target(), "point"))?;
    Ok(())
}

/// Whether a flat target holds nothing but (at most) its ABI stamp.
fn holds_nothing(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .all(|e| e.file_name() == ABI_STAMP)
    })
}

/// Moves a flat target from before generations into the store as it is, recording what it
/// holds: each distribution no other one requires is a request (of [`Requester::Adopted`]),
/// so it is resolved again when the image changes. The record is written into the flat
/// directory before the move, so a crash leaves either the flat target or a finished
/// generation (and a missing pointer, which the next install repairs).
fn adopt_flat(store: &Store) -> std::io::Result<u64> {
    let target = store.target();
    let dists = installed_distributions(&[target.to_path_buf()]);
    let required = crate::target::required_names(target);
    let at = now();
    let requests = dists
        .iter()
        .filter(|(name, _)| !required.contains(&crate::spec::normalize_name(name)))
        .map(|(name, _)| Request {
            spec: name.clone(),
            by: Requester::Adopted,
            at,
        })
        .collect();
    let id = store.next_id();
    let abi = std::fs::read_to_string(target.join(ABI_STAMP))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    GenerationRecord {
        format: record::FORMAT,
        id,
        parent: None,
        origin: Origin::Adopted,
        created_at: at,
        abi,
        core_lock: String::new(),
        requests,
        resolved: dists
            .into_iter()
            .map(|(name, version)| Resolved { name, version })
            .collect(),
        unavailable: Vec::new(),
    }
    .write(target)?;
    let path = store.path_of(id);
    std::fs::rename(target, &path)?;
    tree::seal(&path)?;
    store.point_to(id)?;
    Ok(id)
}

/// Builds generation `store.next_id()` holding `requests`, checks it and makes it active.
/// On any failure the new directory is removed and the active generation stays.
pub(crate) fn build(
    store: &Store,
    options: &InstallOptions,
    core: &Core,
    requests: Vec<Request>,
    origin: Origin,
) -> Result<InstallOutcome, StepError> {
    let parent = store.active().map(|g| g.id);
    let id = store.next_id();
    let dir = store.path_of(id);
    std::fs::create_dir(&dir).map_err(store_error(&dir, "create"))?;
    options.emit(InstallEvent::BuildingGeneration {
        generation: id,
        path: dir.clone(),
    });
    let result = fill(store, options, core, &dir, id, parent, requests, origin);
    if !matches!(&result, Ok(o) if o.ok) {
        // Best effort: what stays behind has no record and goes with the next install.
        let _ = tree::remove(&dir);
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn fill(
    store: &Store,
    options: &InstallOptions,
    core: &Core,
    dir: &Path,
    id: u64,
    parent: Option<u64>,
    requests: Vec<Request>,
    origin: Origin,
) -> Result<InstallOutcome, StepError> {
    std::fs::write(dir.join(ABI_STAMP), format!("{}\n", core.info.abi))
        .map_err(store_error(dir, "write the ABI stamp of"))?;
    let specs: Vec<String> = requests.iter().map(|r| r.spec.clone()).collect();
    let mut outcome = run_installer(&specs, options, core, Some(dir))?;
    if !outcome.ok {
        return Ok(outcome);
    }
    options.emit(InstallEvent::CheckingImports { generation: id });
    let failures = check::failed_imports(&core.python, dir, &specs, &options.env)
        .map_err(|e| (e, Some(outcome.command.clone())))?;
    if !failures.is_empty() {
        let list: Vec<String> = failures
            .iter()
            .map(|(n, why)| format!("{n} ({why})"))
            .collect();
        outcome.ok = false;
        outcome.reason = format!(
            "the new install does not import, so it was not switched to: {}",
            list.join("; ")
        );
        outcome.hint = Some(
            "the previous packages are still active; a package that needs a newer version of \
             something the core ships cannot be installed beside it"
                .into(),
        );
        return Ok(outcome);
    }
    GenerationRecord {
        format: record::FORMAT,
        id,
        parent,
        origin,
        created_at: now(),
        abi: core.info.abi.clone(),
        core_lock: core_lock(&core.info.site_packages),
        requests,
        resolved: installed_distributions(&[dir.to_path_buf()])
            .into_iter()
            .map(|(name, version)| Resolved { name, version })
            .collect(),
        unavailable: Vec::new(),
    }
    .write(dir)
    .map_err(store_error(dir, "write the record of"))?;
    tree::seal(dir).map_err(store_error(dir, "seal"))?;
    store
        .point_to(id)
        .map_err(store_error(store.target(), "switch"))?;
    options.emit(InstallEvent::Switched {
        from: parent,
        to: id,
    });
    outcome.generation = Some(id);
    Ok(outcome)
}

/// An install of `specs` into the durable target, as a new generation (see the module doc).
pub(crate) fn install(
    specs: &[String],
    options: &InstallOptions,
    core: &Core,
    target: &Path,
) -> Result<InstallOutcome, StepError> {
    let store = Store::for_target(target);
    // The store sits beside the target: not being able to make it is the target not writable.
    let _lock = store.lock().map_err(|source| {
        (
            Error::TargetNotWritable {
                path: target.to_path_buf(),
                source,
            },
            None,
        )
    })?;
    prepare(&store, options)?;
    let previous = store
        .active()
        .and_then(|g| g.record)
        .map(|r| r.requests)
        .unwrap_or_default();
    let at = now();
    let new: Vec<Request> = specs
        .iter()
        .map(|spec| Request {
            spec: spec.clone(),
            by: options.requested_by,
            at,
        })
        .collect();
    build(
        &store,
        options,
        core,
        record::merge_requests(&previous, &new),
        Origin::Install,
    )
}

/// What [`collect`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Collected {
    /// The generations removed.
    pub removed: Vec<u64>,
    /// Bytes freed.
    pub freed_bytes: u64,
    /// The active generation, kept.
    pub active: Option<u64>,
    /// The previous generation, kept to switch back to.
    pub previous: Option<u64>,
}

/// Removes every generation but the active one and the newest finished one before it, and
/// any an install left unfinished. Waits for the lock, so never races an install.
pub fn collect(target: &Path) -> Result<Collected, Error> {
    let store = Store::for_target(target);
    let io = |action| {
        move |source| Error::Generations {
            path: store_root(target),
            action,
            source,
        }
    };
    if !store.root().exists() {
        return Ok(Collected::default());
    }
    let _lock = store.lock().map_err(io("lock"))?;
    let mut out = Collected {
        removed: store.remove_unfinished().map_err(io("clean"))?,
        ..Collected::default()
    };
    let Some(active) = store.active() else {
        // Without an active generation nothing is known to be unused: keep the rest.
        return Ok(out);
    };
    out.active = Some(active.id);
    out.previous = store
        .list()
        .into_iter()
        .rev()
        .find(|g| g.id < active.id && g.record.is_some())
        .map(|g| g.id);
    for g in store.list() {
        if Some(g.id) == out.active || Some(g.id) == out.previous {
            continue;
        }
        let size = tree::size(&g.path);
        tree::remove(&g.path).map_err(io("remove"))?;
        out.removed.push(g.id);
        out.freed_bytes += size;
    }
    out.removed.sort_unstable();
    Ok(out)
}

fn store_root(target: &Path) -> std::path::PathBuf {
    Store::for_target(target).root().to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_lock_changes_with_any_version_and_only_then() {
        let d = tempfile::tempdir().unwrap();
        let dist = |name: &str, version: &str| {
            let info = d.path().join(format!("{name}-{version}.dist-info"));
            std::fs::create_dir_all(&info).unwrap();
            std::fs::write(
                info.join("METADATA"),
                format!("Name: {name}\nVersion: {version}\n"),
            )
            .unwrap();
            info
        };
        let sites = [d.path().to_path_buf()];
        dist("six", "1.17.0");
        let first = core_lock(&sites);
        assert_eq!(first.len(), 16);
        assert_eq!(core_lock(&sites), first, "stable");
        let idna = dist("idna", "3.10");
        let second = core_lock(&sites);
        assert_ne!(second, first);
        std::fs::remove_dir_all(idna).unwrap();
        dist("idna", "3.11");
        assert_ne!(core_lock(&sites), second, "a version bump is a new lock");
    }
}
