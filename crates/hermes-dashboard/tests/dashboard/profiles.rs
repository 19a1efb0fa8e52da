//! The Profiles page's API over real HTTP on loopback, without a supervisor: names outside
//! the rule refused before any file is touched, the default profile undeletable, deletion to
//! the trash only with a confirmation, `.env` and `config.yaml` writes that keep what they
//! do not change, `SOUL.md` with its size limit, and a value revealed only by a POST that
//! carries the session token.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use common::{Answer, Dashboard, TOKEN, TOKEN_ENV, local, token_header};
use serde_json::{Value, json};

/// A dashboard for a fresh home (the default profile's files seeded), no supervisor.
fn start() -> Dashboard {
    let home = tempfile::tempdir().unwrap();
    hermes_home::layout::ensure_skeleton(home.path(), true, &hermes_home::seeds::KeySeed::Generate)
        .unwrap();
    common::start_in(home, "127.0.0.1", &TOKEN_ENV)
}

/// One request with a JSON body; `token` sends the session token header (authentication and
/// CSRF), otherwise only the session cookie.
fn send(d: &Dashboard, method: &str, path: &str, body: Option<&str>, token: bool) -> Answer {
    let mut headers = vec![if token {
        token_header()
    } else {
        format!("Cookie: hermes_dashboard_session={TOKEN}")
    }];
    let body = body.unwrap_or("");
    if !body.is_empty() || method != "GET" {
        headers.push("Content-Type: application/json".into());
    }
    common::send(d, method, path, &local(d), &headers, body)
}

fn api(d: &Dashboard, method: &str, path: &str, body: Option<Value>) -> Answer {
    let body = body.map(|b| b.to_string());
    send(d, method, path, body.as_deref(), true)
}

#[test]
fn names_outside_the_rule_are_refused_before_any_file_is_touched() {
    let d = start();
    fs::create_dir_all(d.root().join("secret")).unwrap();
    fs::write(d.root().join("secret/SOUL.md"), "x").unwrap();
    for name in [
        "..",
        "..%2Fsecret",
        "%2E%2E",
        "Work",
        "a%20b",
        "secret%2F..",
        "-x",
    ] {
        let a = api(&d, "GET", &format!("/api/profiles/{name}"), None);
        assert_eq!(a.status, 400, "{name}: {}", a.body);
        assert!(a.json()["hint"].as_str().is_some(), "{name}");
        let a = api(
            &d,
            "PUT",
            &format!("/api/profiles/{name}/soul"),
            Some(json!({"text": "owned"})),
        );
        assert!(matches!(a.status, 400 | 404), "{name}: {}", a.status);
        let a = api(
            &d,
            "DELETE",
            &format!("/api/profiles/{name}"),
            Some(json!({"confirm": name})),
        );
        assert!(matches!(a.status, 400 | 404), "{name}: {}", a.status);
    }
    for name in ["../secret", "Work", "", "default", "a/b"] {
        let a = api(&d, "POST", "/api/profiles", Some(json!({"name": name})));
        assert_eq!(a.status, 400, "{name}: {}", a.body);
    }
    assert_eq!(
        fs::read_to_string(d.root().join("secret/SOUL.md")).unwrap(),
        "x"
    );
    assert!(!d.root().join("profiles/secret").exists());
}

#[test]
fn create_with_clone_list_and_delete_to_the_trash_with_a_confirmation() {
    let d = start();
    fs::write(d.root().join("SOUL.md"), "I am the default.\n").unwrap();
    fs::write(
        d.root().join(".env"),
        "# keys\nOPENAI_API_KEY=sk-abcdefghijklmnop\n",
    )
    .unwrap();

    let a = api(
        &d,
        "POST",
        "/api/profiles",
        Some(json!({"name": "work", "clone_from": "default"})),
    );
    assert_eq!(a.status, 201, "{}", a.body);
    let created = a.json();
    assert_eq!(created["cloned_from"], "default");
    assert_eq!(created["service"], "gateway-work");
    assert!(
        created["supervisor"]
            .as_str()
            .unwrap()
            .contains("No supervisor is running"),
        "{created}"
    );
    let dir = d.root().join("profiles/work");
    assert_eq!(
        fs::read_to_string(dir.join("SOUL.md")).unwrap(),
        "I am the default.\n"
    );
    assert_eq!(
        api(&d, "POST", "/api/profiles", Some(json!({"name": "work"}))).status,
        409
    );

    let list = api(&d, "GET", "/api/profiles", None).json();
    let names: Vec<&str> = list["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "work"]);
    assert_eq!(list["profiles"][0]["default"], true);
    assert_eq!(list["profiles"][0]["active"], true);
    // No supervisor: the gateway's state is unknown, said as such, not guessed.
    assert_eq!(list["profiles"][1]["gateway"], Value::Null);
    assert_eq!(list["supervisor"]["reachable"], false);

    // The confirmation is required, and must be the name.
    let a = send(&d, "DELETE", "/api/profiles/work", Some(""), true);
    assert_eq!(a.status, 422, "{}", a.body);
    let a = api(
        &d,
        "DELETE",
        "/api/profiles/work",
        Some(json!({"confirm": "yes"})),
    );
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(dir.join("SOUL.md").is_file());

    let a = api(
        &d,
        "DELETE",
        "/api/profiles/work",
        Some(json!({"confirm": "work"})),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let trashed = PathBuf::from(a.json()["trashed_to"].as_str().unwrap());
    assert_eq!(trashed.parent().unwrap(), d.root().join("profiles/.trash"));
    assert_eq!(
        fs::read_to_string(trashed.join("SOUL.md")).unwrap(),
        "I am the default.\n"
    );
    assert!(!dir.exists());
    assert_eq!(api(&d, "GET", "/api/profiles/work", None).status, 404);
}

#[test]
fn the_default_profile_cannot_be_deleted() {
    let d = start();
    let a = api(
        &d,
        "DELETE",
        "/api/profiles/default",
        Some(json!({"confirm": "default"})),
    );
    assert_eq!(a.status, 409, "{}", a.body);
    assert_eq!(a.json()["detail"], "the default profile cannot be deleted");
    assert!(d.root().join("SOUL.md").is_file());
    assert!(!d.root().join("profiles/.trash").exists());
}

#[test]
fn env_keys_are_masked_and_writes_keep_comments_and_other_lines() {
    let d = start();
    let env = d.root().join(".env");
    let before = "# Provider keys\nOPENAI_API_KEY=sk-abcdefghijklmnop  # main\n\nnot an assignment\nSHORT=abc\nAPI_SERVER_PORT=8700\nMAIL_PASSWORD=hunter2\n";
    fs::write(&env, before).unwrap();

    let shown = api(&d, "GET", "/api/profiles/default", None);
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert!(
        !shown.body.contains("sk-abcdefghijklmnop"),
        "{}",
        shown.body
    );
    assert!(!shown.body.contains("hunter2"), "{}", shown.body);
    let keys = &shown.json()["env"]["keys"];
    assert_eq!(keys[0]["key"], "OPENAI_API_KEY");
    assert_eq!(
        keys[0]["masked"],
        hermes_home::auth::mask_secret("sk-abcdefghijklmnop")
    );
    assert_eq!(keys[0]["secret"], true);
    // A port or any name that is not a secret's is shown as it is: only secrets are masked.
    assert_eq!(
        (&keys[1]["masked"], &keys[1]["secret"]),
        (&json!("abc"), &json!(false))
    );
    assert_eq!(keys[2]["masked"], "8700");
    assert_eq!(
        (&keys[3]["masked"], &keys[3]["secret"]),
        (
            &json!(hermes_home::auth::mask_secret("hunter2")),
            &json!(true)
        )
    );
    assert_eq!(shown.json()["env"]["unparsed_lines"], json!([4]));

    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/env",
        Some(json!({"key": "NEW_KEY", "value": "v1\nEVIL=1"})),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        fs::read_to_string(&env).unwrap(),
        format!("{before}NEW_KEY=v1EVIL=1\n")
    );
    let a = api(&d, "DELETE", "/api/profiles/default/env/SHORT", None);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        fs::read_to_string(&env).unwrap(),
        format!("{}NEW_KEY=v1EVIL=1\n", before.replace("SHORT=abc\n", ""))
    );
    assert_eq!(
        api(&d, "DELETE", "/api/profiles/default/env/SHORT", None).status,
        404
    );
    for key in ["LD_PRELOAD", "1BAD", "A-B"] {
        let a = api(
            &d,
            "PUT",
            "/api/profiles/default/env",
            Some(json!({"key": key, "value": "x"})),
        );
        assert_eq!(a.status, 400, "{key}: {}", a.body);
    }
    assert_eq!(
        fs::metadata(&env).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

/// Root serving the dashboard (`hermes dashboard` from a root shell) leaves `.env` and
/// `config.yaml` the service user's when it edits them.
#[test]
fn as_root_edits_leave_the_files_their_owners() {
    use std::os::unix::fs::{MetadataExt, chown};
    if hermes_test_support::skip_unless_root("only root can give a file away") {
        return;
    }
    let d = start();
    let env = d.root().join(".env");
    chown(&env, Some(12345), Some(12345)).unwrap();
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/env",
        Some(json!({"key": "NEW_KEY", "value": "v1"})),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(fs::metadata(&env).unwrap().uid(), 12345, "set");
    let a = api(&d, "DELETE", "/api/profiles/default/env/NEW_KEY", None);
    assert_eq!(a.status, 200, "{}", a.body);
    let meta = fs::metadata(&env).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (12345, 12345), "unset");
}

#[test]
fn a_value_is_revealed_only_by_a_post_with_the_session_token() {
    let d = start();
    fs::write(
        d.root().join(".env"),
        "OPENAI_API_KEY=sk-abcdefghijklmnop\n",
    )
    .unwrap();
    let path = "/api/profiles/default/env/OPENAI_API_KEY/reveal";
    // Not by a GET (a link or an image cannot read it) …
    let a = send(&d, "GET", path, None, true);
    assert_eq!(a.status, 405, "{}", a.body);
    assert!(!a.body.contains("sk-abcdefghijklmnop"));
    // … nor by a POST with the cookie only (CSRF) …
    let a = send(&d, "POST", path, Some(""), false);
    assert_eq!(a.status, 403, "{}", a.body);
    assert!(!a.body.contains("sk-abcdefghijklmnop"));
    // … only with the header.
    let a = send(&d, "POST", path, Some(""), true);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["value"], "sk-abcdefghijklmnop");
    let a = send(
        &d,
        "POST",
        "/api/profiles/default/env/NOPE/reveal",
        Some(""),
        true,
    );
    assert_eq!(a.status, 404);
}

#[test]
fn soul_md_is_saved_with_its_mode_and_a_size_limit() {
    let d = start();
    let soul = d.root().join("SOUL.md");
    fs::set_permissions(&soul, fs::Permissions::from_mode(0o600)).unwrap();
    let shown = api(&d, "GET", "/api/profiles/default", None).json();
    assert_eq!(shown["soul"]["gateway_chars"], 61_440);
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/soul",
        Some(json!({"text": "You are terse.\n"})),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(fs::read_to_string(&soul).unwrap(), "You are terse.\n");
    assert_eq!(
        fs::metadata(&soul).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let big = "x".repeat(hermes_dashboard::pages::profiles::SOUL_MAX_BYTES + 1);
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/soul",
        Some(json!({ "text": big })),
    );
    assert_eq!(a.status, 413, "{}", &a.body[..a.body.len().min(300)]);
    assert!(a.json()["detail"].as_str().unwrap().contains("at most"));
    assert_eq!(fs::read_to_string(&soul).unwrap(), "You are terse.\n");
    // Wrong types and bodies far beyond any limit are refused as such.
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/soul",
        Some(json!({"text": 5})),
    );
    assert_eq!(a.status, 422);
    let huge = format!("{{\"text\": \"{}\"}}", "y".repeat(4 << 20));
    let a = send(&d, "PUT", "/api/profiles/default/soul", Some(&huge), true);
    assert_eq!(a.status, 413);
    assert!(a.json()["detail"].is_string());
}

#[test]
fn model_settings_are_validated_and_written_keeping_every_other_byte() {
    let d = start();
    let config = d.root().join("config.yaml");
    let before = fs::read_to_string(&config).unwrap();
    assert!(
        before.contains("# The model the gateway"),
        "the seed has comments"
    );

    // A custom endpoint needs its address; nothing is written.
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/model",
        Some(json!({"default": "llama3", "provider": "custom", "base_url": ""})),
    );
    assert_eq!(a.status, 422, "{}", a.body);
    assert!(
        a.json()["detail"]
            .as_str()
            .unwrap()
            .contains("model.base_url")
    );
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/model",
        Some(json!({"provider": "custom", "base_url": "ftp://x"})),
    );
    assert_eq!(a.status, 422, "{}", a.body);
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/model",
        Some(json!({"provider": "no such/provider"})),
    );
    assert_eq!(a.status, 422, "{}", a.body);
    assert_eq!(fs::read_to_string(&config).unwrap(), before);

    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/model",
        Some(json!({
            "default": "llama3",
            "provider": "custom",
            "base_url": "http://127.0.0.1:11434/v1",
        })),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let answer = a.json();
    assert_eq!(answer["written"], true);
    assert_eq!(answer["gateway_check"]["ok"], true, "{answer}");
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        before
            .replace("  default: \"\"\n", "  default: \"llama3\"\n")
            .replace("  provider: auto\n", "  provider: custom\n")
            .replace(
                "  base_url: \"\"\n",
                "  base_url: \"http://127.0.0.1:11434/v1\"\n"
            )
    );
    // `openai` is written under the name the original also accepts.
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/model",
        Some(json!({"provider": "openai", "base_url": ""})),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(
        fs::read_to_string(&config)
            .unwrap()
            .contains("  provider: openai-api\n")
    );

    // A layout the editor does not change exactly is refused, the file untouched.
    fs::write(&config, "model: {default: x}  # flow\n").unwrap();
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/model",
        Some(json!({"default": "y"})),
    );
    assert_eq!(a.status, 409, "{}", a.body);
    assert!(a.json()["hint"].as_str().unwrap().contains("by hand"));
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        "model: {default: x}  # flow\n"
    );
}

#[test]
fn the_page_and_its_openapi_part_are_served() {
    let d = start();
    let page = api(&d, "GET", "/profiles", None);
    assert_eq!(page.status, 200);
    assert!(page.body.contains("id=\"create-form\""));
    assert!(page.body.contains("assets/profiles.js"));
    let doc = api(&d, "GET", "/api/openapi.json", None).json();
    for p in [
        "/api/profiles",
        "/api/profiles/{name}",
        "/api/profiles/{name}/soul",
        "/api/profiles/{name}/model",
        "/api/profiles/{name}/env",
        "/api/profiles/{name}/env/{key}/reveal",
    ] {
        assert!(doc["paths"][p].is_object(), "{p}");
    }
}

#[test]
fn reveals_are_rate_limited_per_home() {
    let d = start();
    fs::write(d.root().join(".env"), "K=value-of-k\n").unwrap();
    let path = "/api/profiles/default/env/K/reveal";
    for _ in 0..hermes_dashboard::pages::profiles::REVEALS_PER_WINDOW {
        assert_eq!(send(&d, "POST", path, Some(""), true).status, 200);
    }
    let a = send(&d, "POST", path, Some(""), true);
    assert_eq!(a.status, 429, "{}", a.body);
    assert!(!a.body.contains("value-of-k"));
    // Another home has its own allowance.
    let other = start();
    fs::write(other.root().join(".env"), "K=v\n").unwrap();
    assert_eq!(send(&other, "POST", path, Some(""), true).status, 200);
}

#[test]
fn a_soul_md_that_is_not_utf8_is_shown_as_such_and_not_replaced() {
    let d = start();
    let soul = d.root().join("SOUL.md");
    fs::write(&soul, b"caf\xe9\n").unwrap();
    let shown = api(&d, "GET", "/api/profiles/default", None);
    assert_eq!(shown.status, 200, "{}", shown.body);
    let shown = shown.json();
    assert_eq!(shown["soul"]["text"], Value::Null);
    assert!(shown["soul"]["error"].as_str().unwrap().contains("UTF-8"));
    assert!(
        shown["env"]["keys"].is_array(),
        "the rest of the panel is there"
    );
    let a = api(
        &d,
        "PUT",
        "/api/profiles/default/soul",
        Some(json!({"text": "new"})),
    );
    assert_eq!(a.status, 409, "{}", a.body);
    assert_eq!(fs::read(&soul).unwrap(), b"caf\xe9\n");
}
