//! This crate is the one reader of a profile's settings: outside it (and hermes-home, which
//! owns the file formats), no crate's code parses a `config.yaml` or builds a profile's
//! environment from its `.env` for itself — so no two parts of Hermes can disagree about a
//! setting. Test code (`tests/`, `tests.rs`, what follows `#[cfg(test)]`) may build fixtures
//! as it likes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::fs;
use std::path::{Path, PathBuf};

/// Calls that read settings for themselves, and why each belongs here instead.
const FORBIDDEN: &[(&str, &str)] = &[
    (
        "Config::load(",
        "read `config.yaml` through `hermes_settings` (`config_of`, `ProfileFiles`)",
    ),
    (
        "Config::parse(",
        "parse a `config.yaml` text through `hermes_settings::parse_config`",
    ),
    (
        ".over(",
        "a profile's environment is `ProfileFiles::environment`/`lookup`, the original's order",
    ),
    (
        ".overlay(",
        "a profile's environment is `ProfileFiles::environment`/`lookup`, the original's order",
    ),
    (
        ".value_over(",
        "a profile's environment is `ProfileFiles::var`, the original's order",
    ),
];

/// The crates that may: the file formats and the settings themselves.
const OWNERS: &[&str] = &["hermes-home", "hermes-settings"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// The lines of `text` before its first `#[cfg(test)]`, numbered from 1, comments left out.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .take_while(|(_, line)| !line.trim_start().starts_with("#[cfg(test)]"))
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
}

#[test]
fn no_crate_but_the_settings_reads_a_profiles_settings_for_itself() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    let mut scanned = 0;
    for entry in fs::read_dir(&crates).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if OWNERS.contains(&name.as_str()) || name == "hermes-test-support" {
            continue;
        }
        let mut files = Vec::new();
        if entry.path().join("src").is_dir() {
            rust_files(&entry.path().join("src"), &mut files);
        }
        for file in files {
            scanned += 1;
            let text = fs::read_to_string(&file).unwrap();
            for (number, line) in code_lines(&text) {
                for (call, instead) in FORBIDDEN {
                    if line.contains(call) {
                        found.push(format!("{}:{number}: `{call}`: {instead}", file.display()));
                    }
                }
            }
        }
    }
    assert!(
        scanned > 100,
        "the workspace's sources were found ({scanned} files)"
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
}
