//! The manifest: what an archive of ours holds and what made it, checked by `verify` and read by
//! `restore` (entry [`MANIFEST_PATH`](crate::select::MANIFEST_PATH), written last).
//!
//! ```json
//! {
//!   "format": "hermes-backup/1",
//!   "created": "2026-12-02T10:15:00Z",
//!   "build": "hermes 0.1.0 (abc1234)",
//!   "agent_version": "0.20.1",
//!   "scope": "the whole volume",
//!   "config_versions": {"default": 35, "work": 33},
//!   "files": [{"path": "state.db", "size": 4096, "sha256": "…", "database": true}]
//! }
//! ```
//!
//! An archive without one was made by the original's `hermes backup`: it is still verified
//! (every entry's CRC, every database's integrity) and restored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `format` this build writes and reads.
pub const FORMAT: &str = "hermes-backup/1";

/// What made the archive and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// When the backup started (UTC, ISO 8601).
    pub created: String,
    /// The build of Hermes that made it (as `hermes --version` names it).
    pub build: String,
    /// The agent installed when it was made, if any.
    #[serde(default)]
    pub agent_version: Option<String>,
    /// What it covers, in words.
    #[serde(default)]
    pub scope: String,
    /// Each profile's config schema version (`_config_version`) in the archive.
    #[serde(default)]
    pub config_versions: BTreeMap<String, u64>,
    /// Every file, in archive order.
    pub files: Vec<FileEntry>,
}

/// One file of the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Archive path, relative to `HERMES_HOME`.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// SHA-256 of the contents, lowercase hex.
    pub sha256: String,
    /// Whether it is an SQLite database (copied through the online backup API).
    #[serde(default)]
    pub database: bool,
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
