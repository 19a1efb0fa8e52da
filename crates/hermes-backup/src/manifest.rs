//! The manifest: what an archive of ours holds and what made it, checked by `verify` and read by
//! `restore`.
//!
//! It lives in the zip's own comments, never in an entry, so every file the original's `hermes
//! import` extracts is a file of the volume (an entry would be extracted into the home as a
//! stray file). The archive's comment (`unzip -z`) is the [`Header`]:
//!
//! ```json
//! {"format":"hermes-backup/2","created":"2026-12-02T10:15:00Z","build":"hermes 0.1.0 (abc1234)",
//!  "agent_version":"0.20.1","scope":"the whole volume","config_versions":{"default":35},"files":12}
//! ```
//!
//! and each entry's comment (`zipinfo -v`) its checksum: `sha256:<hex>`, followed by ` sqlite`
//! for a database ([`entry_comment`]). The header's count makes a removed entry a problem too.
//!
//! Archives of `hermes-backup/1` kept the whole manifest, files listed, in the entry
//! [`LEGACY_PATH`]; they are still read. An archive without either was made by the original's
//! `hermes backup`: it is still verified (every entry's CRC, every database's integrity) and
//! restored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `format` this build writes.
pub const FORMAT: &str = "hermes-backup/2";
/// The format of archives whose manifest is the entry [`LEGACY_PATH`], which this build reads.
pub const LEGACY_FORMAT: &str = "hermes-backup/1";
/// Where a `hermes-backup/1` archive keeps its manifest. Under `backups/`, which the walk never
/// enters, so it never clashes with a file of the volume, and a restore never writes it.
pub const LEGACY_PATH: &str = "backups/hermes-backup-manifest.json";
/// What every format's name starts with: a comment that says it is ours.
const FORMAT_FAMILY: &str = "hermes-backup/";

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

/// The archive's comment: the manifest without its list of files, which the entries' comments
/// hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// As [`Manifest::created`].
    pub created: String,
    /// As [`Manifest::build`].
    pub build: String,
    /// As [`Manifest::agent_version`].
    #[serde(default)]
    pub agent_version: Option<String>,
    /// As [`Manifest::scope`].
    #[serde(default)]
    pub scope: String,
    /// As [`Manifest::config_versions`].
    #[serde(default)]
    pub config_versions: BTreeMap<String, u64>,
    /// How many entries carry a checksum.
    pub files: usize,
}

impl Manifest {
    /// The archive comment that says what this manifest says but the files.
    pub fn header(&self) -> Header {
        Header {
            format: self.format.clone(),
            created: self.created.clone(),
            build: self.build.clone(),
            agent_version: self.agent_version.clone(),
            scope: self.scope.clone(),
            config_versions: self.config_versions.clone(),
            files: self.files.len(),
        }
    }

    /// The manifest an archive's `header` and its entries' checksums make.
    pub fn from_header(header: Header, files: Vec<FileEntry>) -> Manifest {
        Manifest {
            format: header.format,
            created: header.created,
            build: header.build,
            agent_version: header.agent_version,
            scope: header.scope,
            config_versions: header.config_versions,
            files,
        }
    }
}

/// What an archive's comment says: `Ok(None)` for a comment that is not ours (none, or someone
/// else's words), an error for one of ours that cannot be read.
///
/// # Errors
/// A comment naming a `hermes-backup/` format that is not a readable [`Header`].
pub fn parse_header(comment: &[u8]) -> Result<Option<Header>, String> {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(comment) else {
        return Ok(None);
    };
    let ours = value
        .get("format")
        .and_then(|f| f.as_str())
        .is_some_and(|f| f.starts_with(FORMAT_FAMILY));
    if !ours {
        return Ok(None);
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| format!("the archive's header cannot be read: {e}"))
}

/// The comment of an entry whose contents hash to `sha256`.
pub fn entry_comment(sha256: &str, database: bool) -> String {
    if database {
        format!("sha256:{sha256} sqlite")
    } else {
        format!("sha256:{sha256}")
    }
}

/// The checksum and database flag an entry's comment records, `None` for any other comment.
pub fn parse_entry_comment(comment: &str) -> Option<(String, bool)> {
    let rest = comment.strip_prefix("sha256:")?;
    let (hex, database) = match rest.split_once(' ') {
        Some((hex, "sqlite")) => (hex, true),
        Some(_) => return None,
        None => (rest, false),
    };
    let valid = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    valid.then(|| (hex.to_owned(), database))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_comment_reads_back_and_nothing_else_passes_for_one() {
        let sha = "ab".repeat(32);
        assert_eq!(
            parse_entry_comment(&entry_comment(&sha, true)),
            Some((sha.clone(), true))
        );
        assert_eq!(
            parse_entry_comment(&entry_comment(&sha, false)),
            Some((sha.clone(), false))
        );
        for other in [
            "",
            "made by hand",
            "sha256:abc",
            &format!("sha256:{} mystery", sha),
            &format!("sha256:{}", sha.to_uppercase()),
        ] {
            assert_eq!(parse_entry_comment(other), None, "{other:?}");
        }
    }

    #[test]
    fn only_a_comment_naming_our_format_is_a_header() {
        assert_eq!(parse_header(b""), Ok(None));
        assert_eq!(parse_header(b"zipped on my laptop"), Ok(None));
        assert_eq!(parse_header(br#"{"format":"someone-else/1"}"#), Ok(None));
        assert!(parse_header(br#"{"format":"hermes-backup/2"}"#).is_err());
        let header = Header {
            format: FORMAT.into(),
            created: "2026-12-07T00:00:00Z".into(),
            build: "hermes 1".into(),
            agent_version: None,
            scope: "the whole volume".into(),
            config_versions: BTreeMap::from([("default".into(), 35)]),
            files: 3,
        };
        let text = serde_json::to_vec(&header).unwrap();
        assert_eq!(parse_header(&text), Ok(Some(header)));
    }
}
