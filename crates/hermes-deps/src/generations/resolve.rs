//! Re-resolution: the active generation's requests installed again against the core and
//! interpreter of the image running now.
//!
//! A generation records the ABI and the core lock it was resolved against. When the image
//! changes either (a new Python, a core package upgraded), the packages in it may no longer
//! load, or may sit behind the core's newer copy of something they need. Boot (and `hermes
//! plugins repair`) then builds a new generation from the same requests:
//!
//! * it builds and imports: it becomes active ([`Resolution::Reresolved`]);
//! * it fails (offline, a conflict) but the old generation still imports with this core: the
//!   old one stays ([`Resolution::KeptCompatible`]);
//! * it fails and the old one does not import: an empty generation that keeps the requests
//!   becomes active, so nothing built for another interpreter is ever imported, and every
//!   request is listed with why ([`Resolution::Unavailable`]); the next boot tries again.
//!
//! The outcome is also written to `last-resolution.json` in the store, for `hermes doctor`,
//! `hermes service status`, the dashboard and `/metrics`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::record::{self, GenerationRecord, Origin, Unavailable};
use super::store::Store;
use super::{check, core_lock, now, prepare};
use crate::Error;
use crate::install::{InstallOptions, InstallOutcome, prepare_core};
use crate::route::Route;

/// File in the store holding the last [`ResolutionReport`].
pub const REPORT_FILE: &str = "last-resolution.json";

/// What a re-resolution found and did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Resolution {
    /// No durable target, or nothing installed in it.
    NothingInstalled,
    /// The active generation was resolved against this core and interpreter.
    UpToDate {
        /// The active generation.
        generation: u64,
    },
    /// A new generation was built from the same requests and is active.
    Reresolved {
        /// The generation before.
        from: u64,
        /// The new one.
        to: u64,
    },
    /// The new generation could not be built, but the old one imports with this image.
    KeptCompatible {
        /// The generation kept.
        generation: u64,
        /// Why the new one could not be built.
        why: String,
    },
    /// The active generation was built for another image, but installs are switched off
    /// (`security.allow_lazy_installs: false`): nothing was installed, nothing changed.
    Blocked {
        /// The active generation, left as it is.
        generation: u64,
        /// Why installs are off.
        why: String,
    },
    /// Neither a new generation nor the old one works with this image: the requests are kept
    /// in an empty generation and their packages are unavailable until resolved.
    Unavailable {
        /// The generation before (left on the volume, not imported).
        from: u64,
        /// The empty generation now active.
        to: u64,
        /// Each request, with why.
        packages: Vec<Unavailable>,
    },
}

/// A re-resolution, as written to [`REPORT_FILE`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolutionReport {
    /// When (Unix seconds).
    pub at: u64,
    /// What happened.
    pub resolution: Resolution,
    /// Why a re-resolution was needed (`the interpreter changed: …`), empty when it was not.
    pub reason: String,
    /// The command that tries again.
    pub fix: String,
}

/// The command that resolves the requests again.
pub const FIX_COMMAND: &str = "hermes plugins repair";

impl ResolutionReport {
    /// Reads the last report for the durable target `target`, if any.
    pub fn read(target: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(report_path(target)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Worth saying where people look (status, dashboard): anything but "up to date" and
    /// "nothing installed".
    pub fn notable(&self) -> bool {
        !matches!(
            self.resolution,
            Resolution::UpToDate { .. } | Resolution::NothingInstalled
        )
    }

    /// True when a package asked for is not importable now.
    pub fn degraded(&self) -> bool {
        matches!(self.resolution, Resolution::Unavailable { .. })
    }

    /// One line for a log or a status row.
    pub fn summary(&self) -> String {
        match &self.resolution {
            Resolution::NothingInstalled => "no plugin packages installed".into(),
            Resolution::UpToDate { generation } => {
                format!("plugin packages up to date (generation {generation})")
            }
            Resolution::Reresolved { from, to } => format!(
                "plugin packages resolved again for this image ({}): generation {from} → {to}",
                self.reason
            ),
            Resolution::KeptCompatible { generation, why } => format!(
                "plugin packages kept (generation {generation} still imports with this image; \
                 resolving them again failed: {why}); run `{FIX_COMMAND}` to try again"
            ),
            Resolution::Blocked { generation, why } => format!(
                "plugin packages not resolved again for this image ({}): {why}; generation \
                 {generation} is left as it is",
                self.reason
            ),
            Resolution::Unavailable { packages, .. } => {
                let list: Vec<String> = packages
                    .iter()
                    .map(|p| format!("{} ({})", p.spec, p.why))
                    .collect();
                format!(
                    "plugin packages unavailable with this image ({}): {}; run `{FIX_COMMAND}` \
                     once the package index is reachable",
                    self.reason,
                    list.join("; ")
                )
            }
        }
    }
}

fn report_path(target: &Path) -> PathBuf {
    Store::for_target(target).root().join(REPORT_FILE)
}

/// Why the active generation must be resolved again for this core, if it must.
fn stale_because(rec: &GenerationRecord, abi: &str, lock: &str) -> Option<String> {
    if rec.abi != abi {
        let was = if rec.abi.is_empty() {
            "unknown"
        } else {
            &rec.abi
        };
        return Some(format!("the interpreter changed: {was} → {abi}"));
    }
    if rec.core_lock != lock {
        return Some(if rec.core_lock.is_empty() {
            "the core packages it was resolved against are not recorded".into()
        } else {
            "the core packages changed".into()
        });
    }
    if !rec.unavailable.is_empty() {
        return Some("its packages were unavailable at the last attempt".into());
    }
    None
}

fn failed(err: &Error) -> String {
    hermes_errors::one_line(err)
}

/// Resolves the active generation's requests again when the image's interpreter or core
/// changed since it was built (or always, with `force`), as the module doc says, and writes
/// the report. Takes the store's lock: never races an install.
pub fn resolve_again(options: &InstallOptions, force: bool) -> Result<ResolutionReport, Error> {
    let (venv, managed, target) = match options.route() {
        Route::Target {
            venv,
            managed,
            target,
        } => (venv, managed, target),
        Route::Blocked(reason) => return blocked(options, &reason.to_string()),
        Route::Venv { .. } => {
            return Ok(report(Resolution::NothingInstalled, String::new(), None));
        }
    };
    let store = Store::for_target(&target);
    if !store.root().exists() && !target.exists() {
        return Ok(report(Resolution::NothingInstalled, String::new(), None));
    }
    let _lock = store.lock().map_err(|source| Error::TargetNotWritable {
        path: target.clone(),
        source,
    })?;
    prepare(&store, options).map_err(|(e, _)| e)?;
    // `active()` names only a finished generation, which has its record.
    let Some((active, rec)) = store
        .active()
        .and_then(|g| g.record.clone().map(|r| (g, r)))
    else {
        return Ok(report(
            Resolution::NothingInstalled,
            String::new(),
            Some(&target),
        ));
    };
    let core = prepare_core(options, &venv, managed).map_err(|(e, _)| e)?;
    let lock = core_lock(&core.info.site_packages);
    let reason = match (stale_because(&rec, &core.info.abi, &lock), force) {
        (Some(why), _) => why,
        (None, true) => "asked to (`--force`)".into(),
        (None, false) => {
            return Ok(report(
                Resolution::UpToDate {
                    generation: active.id,
                },
                String::new(),
                Some(&target),
            ));
        }
    };
    if rec.requests.is_empty() {
        return Ok(report(Resolution::NothingInstalled, reason, Some(&target)));
    }
    let built = super::build(
        &store,
        options,
        &core,
        rec.requests.clone(),
        Origin::Reresolved,
    );
    let why = match built {
        Ok(InstallOutcome {
            ok: true,
            generation: Some(to),
            ..
        }) => {
            return Ok(report(
                Resolution::Reresolved {
                    from: active.id,
                    to,
                },
                reason,
                Some(&target),
            ));
        }
        Ok(outcome) => outcome.reason,
        Err((e, _)) => failed(&e),
    };
    // The new generation could not be built: may the old one stay?
    let specs = rec.specs();
    let broken = check::failed_imports(&core.python, &active.path, &specs, &options.env);
    if matches!(&broken, Ok(b) if b.is_empty()) && rec.origin != Origin::Unresolved {
        return Ok(report(
            Resolution::KeptCompatible {
                generation: active.id,
                why,
            },
            reason,
            Some(&target),
        ));
    }
    let broken = broken.unwrap_or_default();
    let packages: Vec<Unavailable> = specs
        .iter()
        .map(|spec| Unavailable {
            spec: spec.clone(),
            why: broken
                .get(crate::spec::package_name(spec).unwrap_or(spec))
                .map_or_else(|| why.clone(), |imp| format!("{imp}; {why}")),
        })
        .collect();
    let to = store.next_id();
    let dir = store.path_of(to);
    let placeholder = GenerationRecord {
        format: record::FORMAT,
        id: to,
        parent: Some(active.id),
        origin: Origin::Unresolved,
        created_at: now(),
        abi: core.info.abi.clone(),
        core_lock: lock,
        requests: rec.requests.clone(),
        resolved: Vec::new(),
        unavailable: packages.clone(),
    };
    let io = |action| {
        let dir = dir.clone();
        move |source| Error::Generations {
            path: dir,
            action,
            source,
        }
    };
    std::fs::create_dir(&dir).map_err(io("create"))?;
    std::fs::write(
        dir.join(crate::target::ABI_STAMP),
        format!("{}\n", core.info.abi),
    )
    .map_err(io("write the ABI stamp of"))?;
    placeholder.write(&dir).map_err(io("write the record of"))?;
    super::tree::seal(&dir).map_err(io("seal"))?;
    store.point_to(to).map_err(io("switch to"))?;
    Ok(report(
        Resolution::Unavailable {
            from: active.id,
            to,
            packages,
        },
        reason,
        Some(&target),
    ))
}

/// Installs are switched off: say whether the active generation was built for another image
/// (without installing or changing anything). Nothing is said without a durable target.
fn blocked(options: &InstallOptions, why: &str) -> Result<ResolutionReport, Error> {
    let Some(target) = options.env.durable_target() else {
        return Ok(report(Resolution::NothingInstalled, String::new(), None));
    };
    let store = Store::for_target(&target);
    let Some((active, rec)) = store
        .active()
        .and_then(|g| g.record.clone().map(|r| (g, r)))
    else {
        return Ok(report(Resolution::NothingInstalled, String::new(), None));
    };
    let (venv, _) = crate::route::core_venv(&options.env, &options.hermes_home);
    let Some(python) = crate::python::venv_python(&venv) else {
        return Ok(report(Resolution::NothingInstalled, String::new(), None));
    };
    let info = crate::python::Interpreter::new(python, None, options.env.clone()).info()?;
    let resolution = match stale_because(&rec, &info.abi, &core_lock(&info.site_packages)) {
        Some(reason) => {
            return Ok(report(
                Resolution::Blocked {
                    generation: active.id,
                    why: why.to_string(),
                },
                reason,
                Some(&target),
            ));
        }
        None => Resolution::UpToDate {
            generation: active.id,
        },
    };
    Ok(report(resolution, String::new(), Some(&target)))
}

/// The report, written into the store when there is one (best effort: the boot log has it).
fn report(resolution: Resolution, reason: String, target: Option<&Path>) -> ResolutionReport {
    let report = ResolutionReport {
        at: now(),
        resolution,
        reason,
        fix: FIX_COMMAND.into(),
    };
    if let Some(target) = target
        && let Ok(text) = serde_json::to_string_pretty(&report)
    {
        let path = report_path(target);
        let tmp = path.with_extension("json.tmp");
        if std::fs::write(&tmp, text + "\n").is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
    }
    report
}
