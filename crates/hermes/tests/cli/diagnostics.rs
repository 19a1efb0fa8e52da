//! `hermes version`, `hermes dump` and `hermes doctor` through the real binary.

use std::fs;

use crate::util::TestContext;

fn filter_install(t: &TestContext, text: String) -> String {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_hermes"));
    let dir = exe
        .canonicalize()
        .unwrap()
        .parent()
        .unwrap()
        .to_string_lossy()
        .to_string();
    let text = text.replace(&dir, "[BIN_DIR]");
    let _ = t;
    text.lines()
        .map(|l| {
            if l.starts_with("os:") {
                "os:               [OS]".to_string()
            } else if l.starts_with("build:") {
                "build:           [SHA]".to_string()
            } else if l.starts_with("install method:")
                || l.starts_with("upgrade:")
                || l.starts_with("install:")
            {
                let key = &l[..l.find(':').unwrap() + 1];
                format!("{key:<17}[INSTALL]")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn version_names_build_install_method_and_directory() {
    let t = TestContext::new();
    let a = t.ok(&["--version"]);
    let b = t.ok(&["version"]);
    assert_eq!(a, b, "`--version` and `version` agree");
    insta::assert_snapshot!(
        "version",
        filter_install(&t, t.snapshot(&t.run(&["version"])))
    );
    let json: serde_json::Value = serde_json::from_str(&t.ok(&["version", "--json"])).unwrap();
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        json["build"]["short"].as_str().unwrap().len() == 8
            || json["build"]["short"] == "(unknown)"
    );
}

#[test]
fn dump_format_is_pinned() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    fs::write(t.root().join(".env"), "OPENAI_API_KEY=sk-do-not-print\n").unwrap();
    fs::write(t.root().join("config.yaml"), "model:\n  default: gpt-4o-mini\n  provider: openai\n  base_url: http://127.0.0.1:9/v1\nmemory:\n  provider: honcho\n").unwrap();
    let out = t
        .cmd(&["dump"])
        .env("ANTHROPIC_API_KEY", "from-shell")
        .output()
        .unwrap();
    let text = filter_install(&t, t.snapshot(&out));
    assert!(
        !text.contains("sk-do-not-print") && !text.contains("from-shell"),
        "values are never printed"
    );
    insta::assert_snapshot!("dump", text);
    let json: serde_json::Value = serde_json::from_str(&t.ok(&["dump", "--json"])).unwrap();
    assert_eq!(json["profiles"], serde_json::json!(["default", "work"]));
    assert_eq!(json["supervisor"]["status"], "not-running");
}

#[test]
fn doctor_on_a_fresh_home_passes_with_a_model_warning() {
    let t = TestContext::new();
    let out = t.run(&["doctor"]);
    assert_eq!(out.status.code(), Some(0), "{}", crate::util::render(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("⚠ no model configured"), "{stdout}");
    assert!(!stdout.contains('✗'), "{stdout}");
    let json: serde_json::Value = serde_json::from_str(&t.ok(&["doctor", "--json"])).unwrap();
    assert!(
        json["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] != "fail")
    );
}

#[test]
fn doctor_flags_a_world_readable_env() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::set_permissions(t.root().join(".env"), fs::Permissions::from_mode(0o644)).unwrap();
    let stdout = t.ok(&["doctor"]);
    assert!(stdout.contains("⚠ `.env` mode is 0644"), "{stdout}");
    assert!(stdout.contains("chmod 600"), "{stdout}");
}

#[test]
fn no_arguments_prints_help() {
    let t = TestContext::new();
    let out = t.ok(&[]);
    assert!(out.contains("Usage: hermes"), "{out}");
}

/// `doctor` decodes and parses the files it reports on: a `.env` that is not UTF-8 and an
/// `auth.json` that is not a credential store are failures (exit 1), not "readable".
#[test]
fn doctor_fails_on_an_env_that_does_not_decode_and_a_corrupt_auth_json() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(t.root().join(".env"), b"OPENAI_API_KEY=sk-\xff\n").unwrap();
    fs::write(t.root().join("auth.json"), "{\"providers\": ").unwrap();
    let out = t.run(&["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", crate::util::render(&out));
    assert!(
        stdout.contains("✗ `") && stdout.contains(".env` is not valid UTF-8 (line 1"),
        "{stdout}"
    );
    assert!(
        stdout.contains("✗ `") && stdout.contains("auth.json` is damaged"),
        "{stdout}"
    );
    assert_eq!(
        fs::read(t.root().join("auth.json")).unwrap(),
        b"{\"providers\": ",
        "doctor only looks"
    );
}

/// A reader that has had enough (`hermes version | head -0`) is not an error: the write to a
/// closed stdout fails with EPIPE, and `hermes` exits 0 without a word.
#[test]
fn a_closed_stdout_is_a_quiet_success() {
    let t = TestContext::new();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = t
        .cmd(&["version", "--json"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}
