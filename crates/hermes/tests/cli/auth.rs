//! `hermes auth list` and `hermes dump` on credentials stored the original's way: every key
//! masked (first and last 4 characters), with label, source and status, the next key marked;
//! with the original's own `hermes auth add` when it is installed.

use std::fs;

use serde_json::{Value, json};

use crate::util::TestContext;

/// An `auth.json` as the original 0.19.0 writes it after `hermes auth add openrouter --type
/// api-key --api-key sk-or-v1-abcdefghijklmnop1234 --label work` and an `OPENAI_API_KEY`
/// seen by its pool (an `env:` entry: a fingerprint, never the key).
const ORIGINAL_AUTH: &str = r#"{
  "version": 1,
  "providers": {},
  "credential_pool": {
    "openrouter": [
      {"id": "9ccdaa", "label": "work", "auth_type": "api_key", "priority": 0, "source": "manual",
       "access_token": "sk-or-v1-abcdefghijklmnop1234", "last_status": null, "last_status_at": null,
       "last_error_code": null, "last_error_reason": null, "last_error_message": null,
       "last_error_reset_at": null, "base_url": "https://openrouter.ai/api/v1", "request_count": 0}
    ],
    "openai-api": [
      {"id": "57e37d", "label": "OPENAI_API_KEY", "auth_type": "api_key", "priority": 0,
       "source": "env:OPENAI_API_KEY", "last_status": "exhausted", "last_status_at": 1000.0,
       "last_error_code": 401, "last_error_reason": null, "last_error_message": null,
       "last_error_reset_at": null, "base_url": "https://api.openai.com/v1", "request_count": 0,
       "secret_fingerprint": "sha256:5ed35c0186dc7648"}
    ]
  },
  "updated_at": "2026-11-30T13:05:18.909180+00:00"
}"#;

#[test]
fn auth_list_shows_each_stored_key_masked() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(t.root().join("auth.json"), ORIGINAL_AUTH).unwrap();
    fs::write(
        t.root().join(".env"),
        "OPENAI_API_KEY=sk-env-value-0000009999\n",
    )
    .unwrap();
    let out = t.ok(&["auth", "list"]);
    assert_eq!(
        out,
        "openai-api (1 credentials):\n\
         \x20 #1  OPENAI_API_KEY       api_key env:OPENAI_API_KEY  sk-e...9999 auth failed (401) (re-auth may be required) ←\n\
         \n\
         openrouter (1 credentials):\n\
         \x20 #1  work                 api_key manual  sk-o...1234 ←\n\
         \n"
    );
    let json: Value = serde_json::from_str(&t.ok(&["auth", "list", "--json"])).unwrap();
    let work = &json["credential_pool"]["openrouter"][0];
    assert_eq!(
        (
            &work["label"],
            &work["key"],
            &work["source"],
            &work["current"]
        ),
        (
            &json!("work"),
            &json!("sk-o...1234"),
            &json!("manual"),
            &json!(true)
        )
    );
    let dump = t.ok(&["dump"]);
    assert!(
        dump.contains("  openrouter\n    #1 work api_key manual sk-o...1234 ok ←\n"),
        "{dump}"
    );
    for text in [&out, &json.to_string(), &dump] {
        assert!(!text.contains("abcdefghijklmnop"), "{text}");
        assert!(!text.contains("value-000000"), "{text}");
    }
}

/// The original's own CLI stores the key; ours lists it masked.
#[test]
fn a_key_added_by_the_originals_cli_is_listed_masked() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let key = "sk-or-v1-original-cli-key-5678";
    let out = std::process::Command::new(&agent.hermes)
        .args([
            "auth",
            "add",
            "openrouter",
            "--type",
            "api-key",
            "--api-key",
            key,
            "--label",
            "from-original",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", t.home())
        .env("HERMES_HOME", t.root())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed = t.ok(&["auth", "list"]);
    let line = listed
        .lines()
        .find(|l| l.contains("from-original"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.contains("api_key manual  sk-o...5678 ←"), "{listed}");
    assert!(!listed.contains(key), "{listed}");
}
