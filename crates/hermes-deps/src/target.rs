//! The durable install target's building blocks: the ABI stamp, distribution metadata and
//! core-version constraints.
//!
//! The *durable target* (image: `/opt/data/lazy-packages`) lives on the data volume, so it
//! survives container re-creation; it names the active install generation
//! ([`crate::generations`]). Each generation carries the `.python-abi` *stamp* the agent's
//! installer also reads: `<major>.<minor>:<EXT_SUFFIX>` of the interpreter it was built for.
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

fn not_writable(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::TargetNotWritable {
        path: path.to_path_buf(),
        source,
    }
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

/// The normalized names every distribution in `dir` requires (`Requires-Dist`, optional
/// extras left out): what is not in this set was asked for, not pulled in.
pub fn required_names(dir: &Path) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.filter_map(Result::ok) {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "dist-info") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(path.join("METADATA")) else {
            continue;
        };
        for line in text.lines().take_while(|l| !l.trim().is_empty()) {
            let Some(req) = line.strip_prefix("Requires-Dist:") else {
                continue;
            };
            if req.contains("extra ==") || req.contains("extra==") {
                continue;
            }
            let name: String = req
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                .collect();
            if !name.is_empty() {
                out.insert(crate::spec::normalize_name(&name));
            }
        }
    }
    out
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
