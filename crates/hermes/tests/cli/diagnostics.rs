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

/// The text between `start` and the next backtick after it in `line` (a fix's command).
fn command_in<'a>(text: &'a str, start: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("no {start:?} in {text}"))
        + start.len();
    let len = text[from..].find("`\n").expect("command ends the fix line");
    &text[from..from + len]
}

fn sh(command: &str) {
    let status = std::process::Command::new("sh")
        .args(["-c", command])
        .status()
        .unwrap();
    assert!(status.success(), "{command}");
}

/// What breaks chat is a ✗ (or a ⚠ where chat still works) with a fix that, followed as
/// printed, makes the row pass.
#[test]
fn doctor_finds_what_breaks_chat_and_its_fixes_work() {
    use std::os::unix::fs::PermissionsExt;
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let work = t.root().join("profiles/work");

    // A named profile without `.env`: the printed command creates it, private, with a key.
    fs::remove_file(work.join(".env")).unwrap();
    let stdout = t.ok(&["doctor", "-p", "work"]);
    assert!(
        stdout.contains("⚠ `.env` is missing: profile `work` has no keys of its own"),
        "{stdout}"
    );
    let create = command_in(&stdout, "create it with your key: `");
    sh(&create.replace("<your key>", "sk-test-0123456789"));
    let stdout = t.ok(&["doctor", "-p", "work"]);
    assert!(
        stdout.contains("✓ `.env` mode is 0600") && !stdout.contains("`.env` is missing"),
        "{stdout}"
    );
    assert_eq!(
        fs::read_to_string(work.join(".env")).unwrap(),
        "OPENAI_API_KEY=sk-test-0123456789\n"
    );

    // `auth.json` others can read (⚠), then one that is damaged (✗): `chmod`, then `mv`.
    let auth = work.join("auth.json");
    fs::write(&auth, "{\"providers\": {}}").unwrap();
    fs::set_permissions(&auth, fs::Permissions::from_mode(0o644)).unwrap();
    let stdout = t.ok(&["doctor", "-p", "work"]);
    assert!(stdout.contains("⚠ `auth.json` mode is 0644"), "{stdout}");
    sh(command_in(&stdout, "fix: run `"));
    let stdout = t.ok(&["doctor", "-p", "work"]);
    assert!(stdout.contains("✓ `auth.json` mode is 0600"), "{stdout}");
    fs::write(&auth, "{\"providers\": ").unwrap();
    let out = t.run(&["doctor", "-p", "work"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("auth.json` is damaged"), "{stdout}");
    let aside = command_in(&stdout, "move it aside (`");
    sh(aside.split('`').next().unwrap());
    t.ok(&["doctor", "-p", "work"]);

    // A provider the gateway cannot reach by name, without `model.base_url`.
    let config = work.join("config.yaml");
    fs::write(&config, "model:\n  default: m\n  provider: custom\n").unwrap();
    let out = t.run(&["doctor", "-p", "work"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("✗ the gateway refuses the settings: invalid `model.base_url`"),
        "{stdout}"
    );
    // A key naming a variable that is not set.
    fs::write(
        &config,
        "model:\n  default: m\n  provider: custom\n  base_url: http://127.0.0.1:1/v1\n  api_key: ${LOCAL_LLM_KEY}\n",
    )
    .unwrap();
    let out = t.run(&["doctor", "-p", "work"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("the variable `LOCAL_LLM_KEY` is not set")
            && stdout.contains("set `LOCAL_LLM_KEY` in the profile's `.env`"),
        "{stdout}"
    );
    fs::write(
        work.join(".env"),
        "OPENAI_API_KEY=sk-test-0123456789\nLOCAL_LLM_KEY=local-secret\n",
    )
    .unwrap();
    let stdout = t.ok(&["doctor", "-p", "work"]);
    assert!(
        stdout.contains(
            "✓ the gateway accepts the model settings: custom m at http://127.0.0.1:1/v1"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("local-secret"), "{stdout}");
}

/// A local model server that is down is named by doctor (every chat would fail with 502),
/// and one that listens is not.
#[test]
fn doctor_says_when_a_local_model_server_does_not_answer() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let up = listener.local_addr().unwrap().port();
    let down = crate::util::free_port();
    let doctor = |port: u16| {
        fs::write(
            t.root().join("config.yaml"),
            format!(
                "model:\n  default: m\n  provider: custom\n  base_url: http://127.0.0.1:{port}/v1\n"
            ),
        )
        .unwrap();
        String::from_utf8_lossy(&t.run(&["doctor"]).stdout).into_owned()
    };
    let text = doctor(down);
    assert!(
        text.contains(&format!(
            "the model server at 127.0.0.1:{down} does not answer"
        )),
        "{text}"
    );
    assert!(
        text.contains("start the model server, or fix `model.base_url`"),
        "{text}"
    );
    let text = doctor(up);
    assert!(
        text.contains(&format!(
            "the model server at 127.0.0.1:{up} takes connections"
        )),
        "{text}"
    );
    drop(listener);
}
