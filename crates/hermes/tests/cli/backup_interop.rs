//! Backups against the original, both ways, as operators move volumes between the two: the
//! original (hermes-agent 0.19.0 from PyPI; 0.20.1 from the fixture source tree) writes a
//! volume with its own commands and functions — a model in `config.yaml`, a named profile
//! `work` with a description, a conversation in each profile's `state.db` (its `SessionDB`),
//! a cron job (`cron create`) and memory (its `MemoryStore`). Then:
//!
//! * **ours → the original**: our `hermes backup create` of that volume, restored into a fresh
//!   volume by the original's `hermes import --force`;
//! * **the original → ours**: the original's `hermes backup -o`, passed by our `hermes backup
//!   verify` (no manifest: the original writes none), restored into a fresh volume by our
//!   `hermes backup restore --yes`.
//!
//! Each time the original's own `sessions list` (both profiles), `profile list` and `cron
//! list` say the same of the restored volume as of the one it came from (the relative "Last
//! Active" time normalised: it moves with the clock; `cron list`'s warning that no gateway runs
//! left out: it looks for gateway processes on the whole machine), every file but the
//! databases and logs has the same bytes, and the restored volume holds the same files, less
//! SQLite's side files and the lock files ours never restores (runtime files), and nothing
//! else: our manifest is in the zip's comments, which the original's import does not extract.
//!
//! All three volumes share one `HOME`, the operator's: the original keeps a profile's alias as
//! a wrapper script in `~/.local/bin`, outside the volume, and `profile list` shows it.
//!
//! A Rust test rather than a Docker scenario, as `migrate` and `engine` are: it needs the
//! original's venv and our binary, no image. Opt-in: `HERMES_TEST_PYPI=1` (CI runs it).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use hermes_test_support::OriginalAgent;

use crate::util::{TestContext, render};

/// The original's CLI on `volume`, as an operator runs it (no terminal, nothing of this
/// machine's environment).
fn original(t: &TestContext, agent: &OriginalAgent, volume: &Path, args: &[&str]) -> String {
    let out = Command::new(&agent.hermes)
        .args(args)
        .env_clear()
        .env("HOME", t.home())
        .env("HERMES_HOME", volume)
        .env("PATH", "/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "original hermes {args:?} on {}:\n{}",
        volume.display(),
        render(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One of the original's helper scripts in `tests/docker/` with its interpreter.
fn original_script(t: &TestContext, agent: &OriginalAgent, script: &str, args: &[&Path]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/docker")
        .join(script);
    let out = Command::new(&agent.python)
        .arg(path)
        .args(args)
        .env_clear()
        .env("HOME", t.home())
        .env("PATH", "/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}:\n{}", render(&out));
}

/// Ours on `volume`, with `agent` as the installed agent (as in the full image).
fn ours(t: &TestContext, agent: &OriginalAgent, volume: &Path, args: &[&str]) -> Output {
    t.cmd(args)
        .env("HERMES_HOME", volume)
        .env("HERMES_AGENT_CLI", &agent.hermes)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ours_ok(t: &TestContext, agent: &OriginalAgent, volume: &Path, args: &[&str]) -> String {
    let out = ours(t, agent, volume, args);
    assert!(
        out.status.success(),
        "hermes {args:?} on {}:\n{}",
        volume.display(),
        render(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The volume module doc describes, written by the original.
fn write_volume(t: &TestContext, agent: &OriginalAgent, volume: &Path) {
    fs::create_dir_all(t.home()).unwrap();
    fs::create_dir_all(volume).unwrap();
    let o = |args: &[&str]| {
        original(t, agent, volume, args);
    };
    o(&["config", "set", "model.default", "openai/gpt-4o-mini"]);
    o(&["profile", "create", "work", "--description", "Work agent"]);
    o(&[
        "-p",
        "work",
        "config",
        "set",
        "model.default",
        "gpt-4.1-mini",
    ]);
    o(&[
        "cron",
        "create",
        "--name",
        "nightly-digest",
        "0 9 * * *",
        "Summarise the day",
    ]);
    let work = volume.join("profiles/work");
    for (home, id) in [(volume, "orig-default-1"), (work.as_path(), "orig-work-1")] {
        original_script(t, agent, "original/session.py", &[home, Path::new(id)]);
    }
    original_script(
        t,
        agent,
        "full/memory.py",
        &[
            &work,
            Path::new("The build server is named zephyr-42"),
            Path::new("The user signs as Ada"),
        ],
    );
}

/// What the original says of `volume`: its sessions (both profiles), profiles and cron jobs.
fn original_view(t: &TestContext, agent: &OriginalAgent, volume: &Path) -> String {
    let mut view = String::new();
    for args in [
        &["sessions", "list"][..],
        &["-p", "work", "sessions", "list"],
        &["profile", "list"],
        &["cron", "list"],
    ] {
        view.push_str(&format!("$ hermes {}\n", args.join(" ")));
        let said = original(t, agent, volume, args);
        // `cron list` ends with a warning when no gateway process runs on the machine (it
        // looks for any, not for the volume's): about this machine, not the volume.
        view.push_str(
            said.split("  ⚠  Gateway is not running")
                .next()
                .unwrap_or(&said),
        );
    }
    normalise_ages(&view)
}

/// The relative times of `sessions list` (`just now`, `3m ago`, padded to their column) as
/// `[age]`: they move with the clock, not with the data.
fn normalise_ages(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let mut line = line.to_owned();
        for unit in ["m ago", "h ago"] {
            if let Some(end) = line.find(unit) {
                let start = line[..end]
                    .rfind(|c: char| !c.is_ascii_digit())
                    .map_or(0, |i| i + 1);
                if start < end {
                    line.replace_range(start..end + unit.len(), "[age]");
                }
            }
        }
        line = line.replace("just now", "[age]");
        // The padding after the column follows its width.
        if let Some(at) = line.find("[age]") {
            let rest = line[at + 5..].trim_start().to_owned();
            line = format!("{}[age] {rest}", &line[..at]);
        }
        out.push_str(&line);
    }
    out
}

/// Every regular file under `root` (symlinks not followed), by path relative to it.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let rel = path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// What neither implementation backs up: SQLite's side files (a snapshot of the database
/// replaces them) and, for ours, lock files (runtime files).
fn left_out(rel: &str) -> bool {
    [".lock", ".db-wal", ".db-shm", ".db-journal"]
        .iter()
        .any(|end| rel.ends_with(end))
}

/// `restored` holds `source`'s files (less what is [`left_out`], plus `extra`), each with the same
/// bytes but the databases (copied page by page, compared through the original's view) and
/// the logs (every command of the original appends to them).
fn assert_same_files(
    source: &BTreeMap<String, Vec<u8>>,
    restored: &BTreeMap<String, Vec<u8>>,
    extra: &[&str],
    what: &str,
) {
    let mut expected: Vec<&str> = source
        .keys()
        .map(String::as_str)
        .filter(|rel| !left_out(rel))
        .chain(extra.iter().copied())
        .collect();
    expected.sort_unstable();
    let got: Vec<&str> = restored.keys().map(String::as_str).collect();
    assert_eq!(got, expected, "{what}: the files of the restored volume");
    for (rel, bytes) in source {
        let log = rel.starts_with("logs/") || rel.contains("/logs/");
        if left_out(rel) || rel.ends_with(".db") || log {
            continue;
        }
        assert!(
            restored.get(rel) == Some(bytes),
            "{what}: {rel} does not have the bytes the original wrote"
        );
    }
}

/// Both directions (module doc) with `agent`, whose version is `version`.
fn round_trip(agent: &OriginalAgent, version: &str) {
    let t = TestContext::new();
    let source = t.dir.path().join("source");
    write_volume(&t, agent, &source);
    let view = original_view(&t, agent, &source);
    for needle in [
        "orig-default-1",
        "orig-work-1",
        "hello from the original",
        "gpt-4.1-mini",
        "nightly-digest",
    ] {
        assert!(
            view.contains(needle),
            "the original's view lacks {needle}:\n{view}"
        );
    }

    // --- ours -> the original's `hermes import` -------------------------------------------
    let before = files(&source);
    let ours_zip = t.dir.path().join("ours.zip");
    let said = ours_ok(
        &t,
        agent,
        &source,
        &["backup", "create", "-o", ours_zip.to_str().unwrap()],
    );
    let databases = before
        .values()
        .filter(|b| b.starts_with(b"SQLite format 3\0"))
        .count();
    assert!(
        databases >= 2,
        "a state.db in each profile: {:?}",
        before.keys()
    );
    assert!(said.contains(&format!("({databases} databases)")), "{said}");
    let verified: serde_json::Value = serde_json::from_str(&ours_ok(
        &t,
        agent,
        &source,
        &["backup", "verify", ours_zip.to_str().unwrap(), "--json"],
    ))
    .unwrap();
    assert_eq!(verified["ok"], true, "{verified:#}");
    assert_eq!(
        verified["manifest"]["agent_version"], version,
        "our archive names the installed agent: {verified:#}"
    );
    let imported = t.dir.path().join("imported");
    fs::create_dir_all(&imported).unwrap();
    let said = original(
        &t,
        agent,
        &imported,
        &["import", "--force", ours_zip.to_str().unwrap()],
    );
    assert!(said.contains("Import complete"), "{said}");
    assert!(
        !said.contains("Warnings"),
        "the original's import warned:\n{said}"
    );
    assert_same_files(&before, &files(&imported), &[], "ours -> import");
    assert_eq!(
        original_view(&t, agent, &imported),
        view,
        "the original's view of its import of our archive"
    );

    // --- the original's `hermes backup` -> ours --------------------------------------------
    let theirs_zip = t.dir.path().join("theirs.zip");
    let said = original(
        &t,
        agent,
        &source,
        &["backup", "-o", theirs_zip.to_str().unwrap()],
    );
    assert!(said.contains("Backup complete"), "{said}");
    let before = files(&source);
    let said = ours_ok(
        &t,
        agent,
        &source,
        &["backup", "verify", theirs_zip.to_str().unwrap()],
    );
    assert!(
        said.contains("no manifest (made by the original's `hermes backup`)")
            && said.contains(&format!("{databases} databases passed integrity_check")),
        "{said}"
    );
    let restored = t.dir.path().join("restored");
    fs::create_dir_all(&restored).unwrap();
    let out = ours(
        &t,
        agent,
        &restored,
        &["backup", "restore", theirs_zip.to_str().unwrap(), "--yes"],
    );
    assert!(out.status.success(), "{}", render(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("Restored:"), "{said}");
    assert_same_files(&before, &files(&restored), &[], "original backup -> ours");
    assert_eq!(
        original_view(&t, agent, &restored),
        view,
        "the original's view of our restore of its archive"
    );
    // Ours reads it too.
    let list = ours_ok(&t, agent, &restored, &["profile", "list", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let work = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "work")
        .unwrap_or_else(|| panic!("no work profile: {list:#}"));
    assert_eq!(work["description"], "Work agent");
}

#[test]
fn ours_and_the_original_0_19_restore_each_others_archives() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    round_trip(&agent, "0.19.0");
}

#[test]
fn ours_and_the_original_0_20_restore_each_others_archives() {
    let Some(agent) = hermes_test_support::fixture_agent() else {
        return;
    };
    round_trip(&agent, "0.20.1");
}

#[test]
fn ages_are_normalised_whatever_their_width() {
    let a = "hello   just now      cli    id-1\n";
    let b = "hello   12m ago       cli    id-1\n";
    assert_eq!(normalise_ages(a), normalise_ages(b));
    assert_eq!(normalise_ages(a), "hello   [age] cli    id-1\n");
    assert_ne!(
        normalise_ages(a),
        normalise_ages("hello   yesterday     cli    id-1\n")
    );
}
