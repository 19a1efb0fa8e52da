//! What `hermes plugins generations` shows: the durable target's generations, which one is
//! active, what each holds and who asked for it.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::record::{GenerationRecord, Origin, Request};
use super::resolve::ResolutionReport;
use super::store::{Pointer, Store};
use super::tree;

/// One generation as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GenerationSummary {
    /// Its number.
    pub id: u64,
    /// The target names it.
    pub active: bool,
    /// It has a record (an install that did not finish has none).
    pub finished: bool,
    /// How it came to be.
    pub origin: Option<Origin>,
    /// When it was completed (Unix seconds).
    pub created_at: Option<u64>,
    /// The interpreter ABI it was built for.
    pub abi: Option<String>,
    /// What was asked for.
    pub requests: Vec<Request>,
    /// How many distributions it holds.
    pub distributions: usize,
    /// Its size on disk.
    pub size_bytes: u64,
    /// Its directory.
    pub path: PathBuf,
}

/// The durable target and its generations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Overview {
    /// The target (the pointer).
    pub target: PathBuf,
    /// The directory holding the generations.
    pub store: PathBuf,
    /// What the target is: `generation N`, `flat (not yet adopted)`, `missing`, or what else.
    pub pointer: String,
    /// Every generation, oldest first.
    pub generations: Vec<GenerationSummary>,
    /// The last re-resolution (boot or `hermes plugins repair`), if any.
    pub last_resolution: Option<ResolutionReport>,
}

/// Reads the store of `target`; changes nothing.
pub fn overview(target: &Path) -> Overview {
    let store = Store::for_target(target);
    let pointer = store.pointer();
    let active = match pointer {
        Pointer::Generation(id) => Some(id),
        _ => None,
    };
    let generations = store
        .list()
        .into_iter()
        .map(|g| {
            let rec: Option<&GenerationRecord> = g.record.as_ref();
            GenerationSummary {
                id: g.id,
                active: Some(g.id) == active,
                finished: rec.is_some(),
                origin: rec.map(|r| r.origin),
                created_at: rec.map(|r| r.created_at),
                abi: rec.map(|r| r.abi.clone()),
                requests: rec.map(|r| r.requests.clone()).unwrap_or_default(),
                distributions: rec.map_or(0, |r| r.resolved.len()),
                size_bytes: tree::size(&g.path),
                path: g.path,
            }
        })
        .collect();
    Overview {
        target: target.to_path_buf(),
        store: store.root().to_path_buf(),
        pointer: match pointer {
            Pointer::Missing => "missing (nothing installed yet)".into(),
            Pointer::Flat => {
                "a flat directory from before generations (adopted at the next install)".into()
            }
            Pointer::Generation(id) => format!("generation {id}"),
            Pointer::Foreign(what) => what,
        },
        generations,
        last_resolution: ResolutionReport::read(target),
    }
}

impl Overview {
    /// Plain text: the target, then one block per generation, newest first.
    pub fn render(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        writeln!(out, "target: {} → {}", self.target.display(), self.pointer)?;
        if self.generations.is_empty() {
            return writeln!(out, "no generations yet");
        }
        for g in self.generations.iter().rev() {
            let state = match (g.active, g.finished) {
                (true, _) => "active",
                (false, true) => "kept",
                (false, false) => "unfinished (removed by the next install)",
            };
            let origin = match g.origin {
                Some(Origin::Install) => ", installed",
                Some(Origin::Reresolved) => ", resolved again for a new image",
                Some(Origin::Adopted) => ", adopted",
                Some(Origin::Unresolved) => ", empty: its packages are unavailable with this image",
                None => "",
            };
            writeln!(
                out,
                "generation {} ({state}{origin}): {} distribution(s), {:.1} MB, ABI {}",
                g.id,
                g.distributions,
                g.size_bytes as f64 / 1_000_000.0,
                g.abi
                    .as_deref()
                    .filter(|a| !a.is_empty())
                    .unwrap_or("unknown"),
            )?;
            for r in &g.requests {
                writeln!(out, "  {} (asked by {})", r.spec, r.by)?;
            }
        }
        if let Some(report) = &self.last_resolution {
            writeln!(out, "last check against this image: {}", report.summary())?;
        }
        Ok(())
    }
}
