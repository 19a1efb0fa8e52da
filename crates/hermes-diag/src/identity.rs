//! Build identity: which commit this binary was built from.
//!
//! Resolution order: the commit embedded at compile time (`build.rs`: the git checkout, else
//! `HERMES_GIT_SHA`), then the file `<install dir>/.hermes_build_sha` that an image may bake
//! next to the binary, else unknown. A value counts only if, once trimmed, it is 7–64 hex
//! digits; it is always shown as its first 8 characters (`[(unknown)]` when unknown), so
//! support can match a bug report to a commit whether the build had `.git` or not.

use std::fs;
use std::path::Path;

use serde::Serialize;

/// The commit embedded by `build.rs` (empty when the build knew none).
pub const EMBEDDED_SHA: &str = env!("HERMES_BUILD_SHA");

/// The version of this build.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Name of the baked fallback file, next to the binary.
pub const BAKED_SHA_FILE: &str = ".hermes_build_sha";

/// Where the commit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShaSource {
    /// Embedded at compile time.
    Embedded,
    /// Read from the baked file.
    BakedFile,
    /// Not known.
    Unknown,
}

/// The identity of the running build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildIdentity {
    /// Package version.
    pub version: String,
    /// Full commit id, lowercase, when known.
    pub sha: Option<String>,
    /// Where `sha` came from.
    pub source: ShaSource,
}

impl BuildIdentity {
    /// Resolves the identity from the embedded value and the install directory.
    pub fn resolve(embedded: &str, install_dir: Option<&Path>) -> Self {
        let (sha, source) = if let Some(sha) = normalize(embedded) {
            (Some(sha), ShaSource::Embedded)
        } else if let Some(sha) = install_dir.and_then(read_baked) {
            (Some(sha), ShaSource::BakedFile)
        } else {
            (None, ShaSource::Unknown)
        };
        BuildIdentity {
            version: VERSION.to_string(),
            sha,
            source,
        }
    }

    /// The identity of this binary.
    pub fn current(install_dir: Option<&Path>) -> Self {
        Self::resolve(EMBEDDED_SHA, install_dir)
    }

    /// The first 8 characters of the commit, or `(unknown)`.
    pub fn short_sha(&self) -> &str {
        match &self.sha {
            Some(sha) => &sha[..8.min(sha.len())],
            None => "(unknown)",
        }
    }

    /// `0.1.0 [abcdef12]` / `0.1.0 [(unknown)]`.
    pub fn label(&self) -> String {
        format!("{} [{}]", self.version, self.short_sha())
    }
}

fn read_baked(dir: &Path) -> Option<String> {
    // Any read error (missing, unreadable, a directory) means "not baked".
    normalize(&fs::read_to_string(dir.join(BAKED_SHA_FILE)).ok()?)
}

fn normalize(raw: &str) -> Option<String> {
    let sha = raw.trim();
    ((7..=64).contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| sha.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = "0123456789abcdef0123456789abcdef01234567";

    fn baked(contents: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(BAKED_SHA_FILE), contents).unwrap();
        dir
    }

    #[test]
    fn embedded_wins_over_baked() {
        let dir = baked("ffffffffffffffffffffffffffffffffffffffff\n");
        let id = BuildIdentity::resolve(FULL, Some(dir.path()));
        assert_eq!(
            (id.short_sha(), id.source),
            ("01234567", ShaSource::Embedded)
        );
    }

    #[test]
    fn baked_file_present() {
        let dir = baked(&format!("  {}\n", FULL.to_uppercase()));
        let id = BuildIdentity::resolve("", Some(dir.path()));
        assert_eq!(
            (id.short_sha(), id.source),
            ("01234567", ShaSource::BakedFile)
        );
        assert_eq!(id.label(), format!("{VERSION} [01234567]"));
    }

    #[test]
    fn baked_file_absent_empty_or_whitespace_is_unknown() {
        let absent = tempfile::tempdir().unwrap();
        for dir in [absent, baked(""), baked("   \n\t")] {
            let id = BuildIdentity::resolve("", Some(dir.path()));
            assert_eq!(
                (id.short_sha(), id.source),
                ("(unknown)", ShaSource::Unknown)
            );
        }
        assert_eq!(
            BuildIdentity::resolve("", None).label(),
            format!("{VERSION} [(unknown)]")
        );
    }

    #[test]
    fn baked_file_unreadable_is_unknown() {
        // A directory in place of the file gives EISDIR whatever our uid (root ignores modes).
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(BAKED_SHA_FILE)).unwrap();
        assert_eq!(
            BuildIdentity::resolve("", Some(dir.path())).source,
            ShaSource::Unknown
        );
    }

    #[test]
    fn long_values_are_shown_as_eight_characters() {
        let sha256 = "a".repeat(64);
        assert_eq!(
            BuildIdentity::resolve(&sha256, None).short_sha(),
            "aaaaaaaa"
        );
        // Longer than any object id, or not hex: not an identity at all.
        assert_eq!(
            BuildIdentity::resolve(&"a".repeat(65), None).source,
            ShaSource::Unknown
        );
        assert_eq!(
            BuildIdentity::resolve("not-a-sha", None).source,
            ShaSource::Unknown
        );
    }

    #[test]
    fn this_build_embedded_its_commit_when_built_from_git() {
        // Built from a checkout (CI clones the repository): the commit must be embedded.
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        if crate::git::find_repo(manifest)
            .and_then(|r| r.head_commit())
            .is_some()
        {
            assert!(
                normalize(EMBEDDED_SHA).is_some(),
                "build.rs did not embed HEAD"
            );
        }
    }
}
