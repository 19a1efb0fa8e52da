//! The durable install target: ABI stamp and core-version constraints.
//!
//! The *durable target* is a plain directory (image: `/opt/data/lazy-packages`)
//! that pip/uv fill with `--target`. It lives on the data volume, so it
//! survives container re-creation, and that is exactly why it needs the
//! `.python-abi` *stamp*: when a new image ships a different interpreter, the
//! compiled extensions in the target no longer load, so [`prepare_target`]
//! wipes the directory before the next install.
//!
//! The *core constraints* pin every distribution installed in the core venv
//! to its installed version (read straight from each `*.dist-info/METADATA`,
//! no Python needed). Installing into the target with them means shared
//! dependencies resolve to the versions core already uses, and a package that
//! needs a conflicting version fails at resolve time instead of shadowing core.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::Error;

/// Name of the ABI stamp file inside the durable target.
pub const ABI_STAMP: &str = ".python-abi";

/// What [`prepare_target`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetPrep {
    /// The target was created or its stamp matched.
    Ready,
    /// The stamp named another interpreter; the old contents were deleted.
    Wiped,
}

fn not_writable(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::TargetNotWritable {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates the target if needed, wipes it when its ABI stamp differs from
/// `abi`, and (re)writes the stamp.
pub fn prepare_target(dir: &Path, abi: &str) -> Result<TargetPrep, Error> {
    std::fs::create_dir_all(dir).map_err(not_writable(dir))?;
    let stamp = dir.join(ABI_STAMP);
    let mut prep = TargetPrep::Ready;
    match std::fs::read_to_string(&stamp) {
        Ok(old) if old.trim() == abi => return Ok(TargetPrep::Ready),
        Ok(_) => {
            for entry in std::fs::read_dir(dir).map_err(not_writable(dir))? {
                let entry = entry.map_err(not_writable(dir))?;
                let path = entry.path();
                // file_type() does not follow symlinks: a link is unlinked, never traversed.
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                let r = if is_dir {
                    std::fs::remove_dir_all(&path)
                } else {
                    std::fs::remove_file(&path)
                };
                r.map_err(not_writable(dir))?;
            }
            prep = TargetPrep::Wiped;
        }
        Err(_) => {}
    }
    std::fs::write(&stamp, format!("{abi}\n")).map_err(not_writable(dir))?;
    Ok(prep)
}

/// Reads `Name` and `Version` from a METADATA/PKG-INFO header block.
pub fn parse_metadata(text: &str) -> Option<(String, String)> {
    let mut name = None;
    let mut version = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Name:") {
            name.get_or_insert_with(|| v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("Version:") {
            version.get_or_insert_with(|| v.trim().to_string());
        }
    }
    Some((
        name.filter(|n| !n.is_empty())?,
        version.filter(|v| !v.is_empty())?,
    ))
}

/// Every distribution in the given site-packages directories as
/// `(name, version)`, deduplicated case-insensitively (first wins), sorted.
pub fn installed_distributions(site_packages: &[PathBuf]) -> Vec<(String, String)> {
    let mut seen: BTreeMap<String, (String, String)> = BTreeMap::new();
    for dir in site_packages {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "dist-info"))
            .collect();
        names.sort();
        for d in names {
            let Ok(text) = std::fs::read_to_string(d.join("METADATA")) else {
                continue;
            };
            if let Some((name, version)) = parse_metadata(&text) {
                seen.entry(name.to_ascii_lowercase())
                    .or_insert((name, version));
            }
        }
    }
    seen.into_values().collect()
}

/// One `Name==version` line per distribution.
pub fn constraint_lines(dists: &[(String, String)]) -> Vec<String> {
    dists.iter().map(|(n, v)| format!("{n}=={v}")).collect()
}

/// Writes constraint lines to a temp file `hermes-*-constraints-*.txt`,
/// deleted when the handle drops.
pub fn write_constraints(kind: &str, lines: &[String]) -> std::io::Result<tempfile::NamedTempFile> {
    let mut f = tempfile::Builder::new()
        .prefix(&format!("hermes-{kind}-constraints-"))
        .suffix(".txt")
        .tempfile()?;
    for l in lines {
        writeln!(f, "{l}")?;
    }
    f.flush()?;
    Ok(f)
}

/// Can the current user create a file in `dir` (or create `dir`)? Probes by
/// actually creating and removing a file, because mode bits lie for root and
/// on read-only mounts.
pub fn probe_writable(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(not_writable(dir))?;
    tempfile::Builder::new()
        .prefix(".hermes-probe-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(not_writable(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_wipes_on_abi_change_only() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("lazy");
        assert_eq!(prepare_target(&t, "3.11:.so").unwrap(), TargetPrep::Ready);
        std::fs::create_dir_all(t.join("pkg")).unwrap();
        std::fs::write(t.join("pkg/__init__.py"), "").unwrap();
        std::os::unix::fs::symlink("/etc", t.join("link")).unwrap();
        assert_eq!(prepare_target(&t, "3.11:.so").unwrap(), TargetPrep::Ready);
        assert!(t.join("pkg/__init__.py").exists());
        assert_eq!(prepare_target(&t, "3.12:.so").unwrap(), TargetPrep::Wiped);
        assert!(!t.join("pkg").exists());
        assert!(!t.join("link").exists());
        assert!(
            std::path::Path::new("/etc/passwd").exists(),
            "symlink target untouched"
        );
        assert_eq!(
            std::fs::read_to_string(t.join(ABI_STAMP)).unwrap(),
            "3.12:.so\n"
        );
    }

    #[test]
    fn reads_dist_info_metadata() {
        let d = tempfile::tempdir().unwrap();
        let sp = d.path();
        for (dir, meta) in [
            (
                "Foo-1.0.dist-info",
                "Metadata-Version: 2.1\nName: Foo\nVersion: 1.0\n\nName: body\n",
            ),
            ("foo-2.0.dist-info", "Name: foo\nVersion: 2.0\n"),
            ("bar-0.1.dist-info", "Name: bar\nVersion: 0.1\n"),
            ("broken.dist-info", "nothing\n"),
        ] {
            std::fs::create_dir_all(sp.join(dir)).unwrap();
            std::fs::write(sp.join(dir).join("METADATA"), meta).unwrap();
        }
        let dists = installed_distributions(&[sp.to_path_buf()]);
        assert_eq!(constraint_lines(&dists), vec!["bar==0.1", "Foo==1.0"]);
        let f = write_constraints("core", &constraint_lines(&dists)).unwrap();
        let name = f.path().file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("hermes-core-constraints-") && name.ends_with(".txt"));
        assert_eq!(
            std::fs::read_to_string(f.path()).unwrap(),
            "bar==0.1\nFoo==1.0\n"
        );
    }

    #[test]
    fn probe_reports_unwritable_as_typed_error() {
        let e = probe_writable(Path::new("/proc/hermes-not-here")).unwrap_err();
        assert!(matches!(e, Error::TargetNotWritable { .. }));
        assert!(e.hint().unwrap().contains("HERMES_LAZY_INSTALL_TARGET"));
    }
}
