//! What a generation records about itself: `.hermes-generation.json` inside its directory.
//!
//! The record is written last, once the generation's packages are installed and pass the
//! import check: a generation directory without one is an install that was stopped half way
//! and is removed by the next install. It holds what boot needs to re-resolve the generation
//! against a new image (the requests and who made them) and to know when it must (the core's
//! lock and the interpreter's ABI it was built against).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::spec::normalize_name;

/// File name of the record inside a generation.
pub const RECORD_FILE: &str = ".hermes-generation.json";
/// The record's format version.
pub const FORMAT: u32 = 1;

/// Who asked for a package.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Requester {
    /// `hermes deps install` or `hermes deps ensure`.
    #[default]
    Cli,
    /// `hermes memory setup`.
    MemorySetup,
    /// The dashboard's Plugins page.
    Dashboard,
    /// The original agent's runtime installer (`tools/lazy_deps.py`), through the `uv` shim.
    Agent,
    /// Found in a flat target that predates generations.
    Adopted,
}

impl std::fmt::Display for Requester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Cli => "hermes deps",
            Self::MemorySetup => "hermes memory setup",
            Self::Dashboard => "the dashboard",
            Self::Agent => "the agent's installer",
            Self::Adopted => "an earlier flat install",
        })
    }
}

/// One package asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The spec as asked (`honcho-ai==2.2.0`).
    pub spec: String,
    /// Who asked.
    pub by: Requester,
    /// When (Unix seconds).
    pub at: u64,
}

/// A distribution installed in the generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// Its name as in its metadata.
    pub name: String,
    /// Its version.
    pub version: String,
}

/// How the generation came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// An install added requests to the previous generation's.
    Install,
    /// The previous generation's requests, resolved again against a new core or interpreter.
    Reresolved,
    /// A flat target from before generations, moved in as it was.
    Adopted,
    /// The previous generation's requests could not be resolved for this image and the
    /// previous generation does not import with it: an empty generation that keeps the
    /// requests (resolved again at the next boot or `hermes plugins repair`).
    Unresolved,
}

/// A request that could not be satisfied, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unavailable {
    /// The spec.
    pub spec: String,
    /// Why, in one line.
    pub why: String,
}

/// The record of one generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GenerationRecord {
    /// [`FORMAT`].
    pub format: u32,
    /// The generation's number (its directory's name).
    pub id: u64,
    /// The generation it was built after, if any.
    pub parent: Option<u64>,
    /// How it came to be.
    pub origin: Origin,
    /// When it was completed (Unix seconds).
    pub created_at: u64,
    /// `<major>.<minor>:<EXT_SUFFIX>` of the interpreter it was built for (empty: unknown).
    pub abi: String,
    /// The core environment's lock ([`crate::generations::core_lock`]) it was resolved
    /// against (empty: unknown, as for an adopted target).
    pub core_lock: String,
    /// Every package asked for, the previous generation's included, one per name.
    pub requests: Vec<Request>,
    /// Every distribution installed in it.
    pub resolved: Vec<Resolved>,
    /// Requests it could not satisfy ([`Origin::Unresolved`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<Unavailable>,
}

impl GenerationRecord {
    /// Reads a generation's record; `None` when it has none or it does not parse (an
    /// install that did not finish).
    pub fn read(generation: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(generation.join(RECORD_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes the record into `generation` atomically (a temporary file renamed over it,
    /// synced), so a reader sees the whole record or none.
    pub fn write(&self, generation: &Path) -> std::io::Result<()> {
        let tmp = generation.join(format!("{RECORD_FILE}.tmp"));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(serde_json::to_string_pretty(self)?.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, generation.join(RECORD_FILE))?;
        std::fs::File::open(generation)?.sync_all()
    }

    /// The requested specs, in order.
    pub fn specs(&self) -> Vec<String> {
        self.requests.iter().map(|r| r.spec.clone()).collect()
    }
}

/// `previous` with `new` added: a new request for a package already asked for replaces the
/// old one (the newest spec wins), order kept otherwise.
pub fn merge_requests(previous: &[Request], new: &[Request]) -> Vec<Request> {
    let key = |r: &Request| {
        crate::spec::package_name(&r.spec)
            .map(normalize_name)
            .unwrap_or_else(|| r.spec.clone())
    };
    let mut out: Vec<Request> = previous
        .iter()
        .filter(|old| !new.iter().any(|n| key(n) == key(old)))
        .cloned()
        .collect();
    for n in new {
        if !out.iter().any(|o| key(o) == key(n)) {
            out.push(n.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(spec: &str, by: Requester) -> Request {
        Request {
            spec: spec.into(),
            by,
            at: 1,
        }
    }

    #[test]
    fn a_newer_request_for_a_package_replaces_the_older_one() {
        let old = vec![
            req("honcho-ai==2.1.0", Requester::Cli),
            req("six", Requester::Agent),
        ];
        let new = vec![
            req("Honcho_AI==2.2.0", Requester::Dashboard),
            req("mem0ai>=2,<3", Requester::Cli),
        ];
        let merged = merge_requests(&old, &new);
        let specs: Vec<&str> = merged.iter().map(|r| r.spec.as_str()).collect();
        assert_eq!(specs, ["six", "Honcho_AI==2.2.0", "mem0ai>=2,<3"]);
        assert_eq!(merged[1].by, Requester::Dashboard);
    }

    #[test]
    fn the_record_round_trips_and_a_partial_one_reads_as_none() {
        let d = tempfile::tempdir().unwrap();
        let rec = GenerationRecord {
            format: FORMAT,
            id: 3,
            parent: Some(2),
            origin: Origin::Install,
            created_at: 5,
            abi: "3.13:.cpython-313-x86_64-linux-gnu.so".into(),
            core_lock: "abc".into(),
            requests: vec![req("six", Requester::Agent)],
            resolved: vec![Resolved {
                name: "six".into(),
                version: "1.17.0".into(),
            }],
            unavailable: vec![],
        };
        assert_eq!(GenerationRecord::read(d.path()), None);
        rec.write(d.path()).unwrap();
        assert_eq!(GenerationRecord::read(d.path()), Some(rec));
        std::fs::write(d.path().join(RECORD_FILE), "{\"format\": 1, \"id\"").unwrap();
        assert_eq!(GenerationRecord::read(d.path()), None);
        let text = serde_json::to_string(&req("x", Requester::MemorySetup)).unwrap();
        assert!(text.contains("\"memory-setup\""), "{text}");
    }
}
