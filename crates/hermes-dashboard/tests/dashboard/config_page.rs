//! The Config API (`config.yaml` text and form) over real HTTP: the original's
//! `/api/config/raw` shapes (`{yaml, path}`, `{yaml_text}` → `{ok}`, a list refused with 400),
//! a text that does not parse refused at its line and column, a write based on an older text
//! a 409 — the file byte-identical after every refusal — and the form's fields, each checked
//! as the gateway reads it, written with every other byte kept, with the restart they need.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;

use serde_json::{Value, json};

use crate::common::{self, Answer, Dashboard, TOKEN_ENV, local, token_header};

/// The hand-written file the tests edit: comments, order and quoting to keep.
const CONFIG: &str = "# Hermes configuration\n_config_version: 33\n\nmodel:\n  # which one\n  default: \"old-model\"   # quoted\n  provider: 'openrouter'\n\nmemory:\n  provider: \"\"\n\n# the gateway\ngateway:\n  engine: native\nzzz: last  # order kept\n";

fn start() -> Dashboard {
    let home = tempfile::tempdir().unwrap();
    fs::write(home.path().join("config.yaml"), CONFIG).unwrap();
    fs::create_dir_all(home.path().join("profiles/work")).unwrap();
    fs::write(home.path().join("profiles/work/SOUL.md"), "work\n").unwrap();
    fs::write(home.path().join("profiles/work/config.yaml"), "model: w\n").unwrap();
    common::start_in(home, "127.0.0.1", &TOKEN_ENV)
}

fn api(d: &Dashboard, method: &str, path: &str, body: Option<Value>) -> Answer {
    let mut headers = vec![token_header()];
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    if !body.is_empty() {
        headers.push("Content-Type: application/json".into());
    }
    common::send(d, method, path, &local(d), &headers, &body)
}

fn file(d: &Dashboard) -> String {
    fs::read_to_string(d.root().join("config.yaml")).unwrap()
}

fn field<'a>(view: &'a Value, name: &str) -> &'a Value {
    view["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no field {name}: {view}"))
}

#[test]
fn the_raw_text_reads_and_writes_in_the_originals_shape() {
    let d = start();
    // GET: {yaml, path} as the original, with our version.
    let got = common::get_json(&d, "/api/config/raw", 200);
    assert_eq!(got["yaml"], CONFIG);
    assert!(
        got["path"].as_str().unwrap().ends_with("/config.yaml"),
        "{got}"
    );
    assert_eq!(got["version"].as_str().unwrap().len(), 64);
    // The original's client sends only yaml_text: it replaces the file.
    let put = api(
        &d,
        "PUT",
        "/api/config/raw",
        Some(json!({ "yaml_text": "model: test\n" })),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(put.json()["ok"], true);
    assert_eq!(file(&d), "model: test\n");
    // Not a mapping: 400, as the original; the file untouched.
    for text in ["- this is a list\n", "# only a comment\n", "just text\n"] {
        let put = api(
            &d,
            "PUT",
            "/api/config/raw",
            Some(json!({ "yaml_text": text })),
        );
        assert_eq!(put.status, 400, "{text}: {}", put.body);
        assert_eq!(put.json()["detail"], "YAML must be a mapping");
        assert_eq!(file(&d), "model: test\n");
    }
    // A missing yaml_text is refused, the file untouched.
    let put = api(&d, "PUT", "/api/config/raw", Some(json!({})));
    assert_eq!(put.status, 422, "{}", put.body);
    assert_eq!(file(&d), "model: test\n");
}

#[test]
fn a_syntax_error_is_refused_at_its_line_and_column_and_the_file_stays_byte_identical() {
    let d = start();
    let version = common::get_json(&d, "/api/config/raw", 200)["version"].clone();
    let bad = "model:\n  default: x\n  provider: [a, b\nzzz: 1\n";
    let put = api(
        &d,
        "PUT",
        "/api/config/raw",
        Some(json!({ "yaml_text": bad, "version": version })),
    );
    assert_eq!(put.status, 400, "{}", put.body);
    let body = put.json();
    assert!(body["line"].as_u64().unwrap() >= 3, "{body}");
    assert!(body["column"].as_u64().unwrap() >= 1, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("line"), "{body}");
    assert!(body["hint"].is_string(), "{body}");
    assert_eq!(file(&d), CONFIG);
}

#[test]
fn a_write_based_on_an_older_text_is_a_conflict_and_writes_nothing() {
    let d = start();
    let version = common::get_json(&d, "/api/config/raw", 200)["version"].clone();
    // Someone else edits the file after the page loaded it.
    let theirs = format!("{CONFIG}added: by hand\n");
    fs::write(d.root().join("config.yaml"), &theirs).unwrap();
    let put = api(
        &d,
        "PUT",
        "/api/config/raw",
        Some(json!({ "yaml_text": "model: mine\n", "version": version })),
    );
    assert_eq!(put.status, 409, "{}", put.body);
    let body = put.json();
    assert!(
        body["detail"].as_str().unwrap().contains("changed"),
        "{body}"
    );
    assert_eq!(file(&d), theirs);
    // Based on the current version, it is written, and the answer is the new version.
    let now = common::get_json(&d, "/api/config/raw", 200)["version"].clone();
    assert_eq!(body["version"], now);
    let put = api(
        &d,
        "PUT",
        "/api/config/raw",
        Some(json!({ "yaml_text": "model: mine\n", "version": now })),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(file(&d), "model: mine\n");
    let after = common::get_json(&d, "/api/config/raw", 200)["version"].clone();
    assert_eq!(put.json()["version"], after);
}

#[test]
fn a_form_save_keeps_comments_order_and_quoting() {
    let d = start();
    let view = common::get_json(&d, "/api/config/settings", 200);
    assert_eq!(field(&view, "model")["value"], "old-model");
    assert_eq!(field(&view, "model")["source"], "config.yaml");
    assert_eq!(field(&view, "provider")["value"], "openrouter");
    assert_eq!(field(&view, "engine")["effective"], "native");
    assert_eq!(field(&view, "api_port")["effective"], "8642");
    assert_eq!(field(&view, "api_port")["source"], "default");
    assert_eq!(field(&view, "fallbacks")["editable"], false);
    // The native gateway reads the model live; its port only at start.
    assert_eq!(field(&view, "model")["restart"], false);
    assert_eq!(field(&view, "api_port")["restart"], true);

    let put = api(
        &d,
        "PUT",
        "/api/config/settings",
        Some(json!({ "settings": { "model": "new-model", "memory_max": "1GiB" } })),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    let body = put.json();
    assert_eq!(body["written"], true);
    let expected = CONFIG
        .replace("default: \"old-model\"", "default: \"new-model\"")
        .replace(
            "  engine: native\n",
            "  engine: native\n  memory_max: \"1GiB\"\n",
        );
    assert_eq!(file(&d), expected);
    assert_eq!(field(&body["settings"], "memory_max")["effective"], "1 GiB");
    // The memory limit is the service's: a restart, a native hand-over.
    let restart = &body["restart"];
    assert_eq!(restart["needed"], true, "{restart}");
    assert_eq!(restart["uninterrupted"], true, "{restart}");
    assert_eq!(restart["service"], "gateway-default");
    assert_eq!(restart["changed"], json!(["model", "memory_max"]));

    // The model alone applies live: no restart.
    let put = api(
        &d,
        "PUT",
        "/api/config/settings",
        Some(json!({ "settings": { "model": "third" } })),
    );
    assert_eq!(put.json()["restart"]["needed"], false, "{}", put.body);

    // A port moves the listener: a restart, not uninterrupted.
    let put = api(
        &d,
        "PUT",
        "/api/config/settings",
        Some(json!({ "settings": { "api_server": "true", "api_port": "8700" } })),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    let restart = &put.json()["restart"];
    assert_eq!(restart["needed"], true, "{restart}");
    assert_eq!(restart["uninterrupted"], false, "{restart}");
    assert!(file(&d).ends_with(
        "zzz: last  # order kept\nplatforms:\n  api_server:\n    enabled: true\n    extra:\n      port: 8700\n"
    ), "{}", file(&d));
    // Cleared: the keys go, the rest stays.
    let put = api(
        &d,
        "PUT",
        "/api/config/settings",
        Some(json!({ "settings": { "api_port": "", "memory_max": "" } })),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    assert!(!file(&d).contains("memory_max"), "{}", file(&d));
    assert!(!file(&d).contains("port:"), "{}", file(&d));
    assert!(file(&d).contains("# which one\n"), "{}", file(&d));
}

#[test]
fn each_fields_bad_value_is_refused_with_a_hint_and_nothing_written() {
    let d = start();
    for (name, value, says) in [
        ("provider", json!("not a name!"), "provider name"),
        ("provider", json!("my-own-server"), "base_url"),
        ("base_url", json!("ftp://x"), "http"),
        ("model", json!("two\nlines"), "one line"),
        ("memory_provider", json!("../x"), "memory provider"),
        ("engine", json!("turbo"), "native"),
        ("multiplex", json!("sometimes"), "on or off"),
        ("api_server", json!("maybe"), "on or off"),
        ("api_port", json!("70000"), "port"),
        ("api_port", json!("http"), "port"),
        ("memory_max", json!("1MiB"), "less than"),
        ("memory_max", json!("lots"), "memory_max"),
        ("fallbacks", json!("x"), "not a field"),
        ("colour", json!("blue"), "not a field"),
        ("model", json!(["a"]), "string"),
    ] {
        let put = api(
            &d,
            "PUT",
            "/api/config/settings",
            Some(
                json!({ "settings": serde_json::Map::from_iter([(name.to_string(), value.clone())]) }),
            ),
        );
        assert_eq!(put.status, 422, "{name}={value}: {}", put.body);
        let body = put.json();
        let error = &body["errors"][0];
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{name}={value}: {body}"
        );
        assert!(!error["hint"].as_str().unwrap().is_empty(), "{body}");
        assert!(body["hint"].is_string(), "{body}");
        assert_eq!(file(&d), CONFIG, "{name}={value}");
    }
    // One bad field among good ones writes nothing at all.
    let put = api(
        &d,
        "PUT",
        "/api/config/settings",
        Some(json!({ "settings": { "model": "fine", "api_port": "x" } })),
    );
    assert_eq!(put.status, 422, "{}", put.body);
    assert_eq!(file(&d), CONFIG);
    // Multiplexing is the volume's: a named profile cannot set it.
    let put = api(
        &d,
        "PUT",
        "/api/config/settings?profile=work",
        Some(json!({ "settings": { "multiplex": "true" } })),
    );
    assert_eq!(put.status, 422, "{}", put.body);
    assert!(put.body.contains("default profile"), "{}", put.body);
}

#[test]
fn profiles_are_selected_as_everywhere_and_a_bad_one_touches_nothing() {
    let d = start();
    let work = common::get_json(&d, "/api/config/raw?profile=work", 200);
    assert_eq!(work["yaml"], "model: w\n");
    assert_eq!(work["profile"], "work");
    let view = common::get_json(&d, "/api/config/settings?profile=work", 200);
    assert_eq!(field(&view, "model")["value"], "w");
    assert_eq!(field(&view, "multiplex")["editable"], false);
    // The body's profile, as the original's client sends it.
    let put = api(
        &d,
        "PUT",
        "/api/config/raw",
        Some(json!({ "yaml_text": "model: w2\n", "profile": "work" })),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(
        fs::read_to_string(d.root().join("profiles/work/config.yaml")).unwrap(),
        "model: w2\n"
    );
    // `model: NAME` stays the shorthand it is.
    let put = api(
        &d,
        "PUT",
        "/api/config/settings?profile=work",
        Some(json!({ "settings": { "model": "w3" } })),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    assert_eq!(
        fs::read_to_string(d.root().join("profiles/work/config.yaml")).unwrap(),
        "model: w3\n"
    );
    assert_eq!(file(&d), CONFIG);
    for path in ["/api/config/raw", "/api/config/settings"] {
        assert_eq!(
            common::get(&d, &format!("{path}?profile=nobody")).status,
            404
        );
        assert_eq!(common::get(&d, &format!("{path}?profile=..")).status, 400);
        assert_eq!(
            common::get(&d, &format!("{path}?profile=..%2F..%2Fetc")).status,
            400
        );
    }
    let put = api(
        &d,
        "PUT",
        "/api/config/raw?profile=..",
        Some(json!({ "yaml_text": "a: 1\n" })),
    );
    assert_eq!(put.status, 400, "{}", put.body);
    let put = api(
        &d,
        "PUT",
        "/api/config/settings?profile=nobody",
        Some(json!({ "settings": { "model": "x" } })),
    );
    assert_eq!(put.status, 404, "{}", put.body);
    assert!(!d.root().join("profiles/nobody").exists());
    assert_eq!(file(&d), CONFIG);
}

#[test]
fn authentication_and_the_session_token_are_required() {
    let d = start();
    for path in ["/api/config/raw", "/api/config/settings", "/config"] {
        let a = common::request(&d, "GET", path, &local(&d), &[]);
        assert_eq!(a.status, 401, "{path}: {}", a.body);
    }
    // Signed in by cookie, but without the token header: a write is refused (CSRF).
    let cookie = format!("Cookie: hermes_dashboard_session={}", common::TOKEN);
    for (path, body) in [
        ("/api/config/raw", json!({ "yaml_text": "a: 1\n" })),
        (
            "/api/config/settings",
            json!({ "settings": { "model": "x" } }),
        ),
    ] {
        let a = common::send(
            &d,
            "PUT",
            path,
            &local(&d),
            &[cookie.clone(), "Content-Type: application/json".into()],
            &body.to_string(),
        );
        assert!(a.status == 401 || a.status == 403, "{path}: {}", a.status);
    }
    assert_eq!(file(&d), CONFIG);
    // The page is served to a signed-in request, with its script.
    let page = common::get(&d, "/config");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("assets/config.js"), "{}", page.body);
    assert!(
        page.body.contains("<option value=\"work\">work</option>"),
        "{}",
        page.body
    );
}

#[test]
fn the_endpoints_are_in_the_openapi_document() {
    let d = start();
    let doc = common::get_json(&d, "/api/openapi.json", 200);
    for path in ["/api/config/raw", "/api/config/settings"] {
        assert!(doc["paths"][path]["get"].is_object(), "{path}");
        assert!(doc["paths"][path]["put"].is_object(), "{path}");
    }
    assert!(doc["paths"]["/api/config/raw"]["put"]["responses"]["409"].is_object());
}

#[test]
fn a_text_save_says_which_settings_changed_and_the_restart_they_need() {
    let d = start();
    let version = common::get_json(&d, "/api/config/raw", 200)["version"].clone();
    // Only the model: the gateway applies it at its next request.
    let text = CONFIG.replace("old-model", "other-model");
    let put = api(
        &d,
        "PUT",
        "/api/config/raw",
        Some(json!({ "yaml_text": text, "version": version })),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    let body = put.json();
    assert_eq!(body["written"], true);
    assert_eq!(body["restart"]["needed"], false, "{body}");
    assert_eq!(body["restart"]["changed"], json!(["model"]));
    // The engine's section: the memory limit needs a restart.
    let text = text.replace(
        "  engine: native\n",
        "  engine: native\n  memory_max: 2GiB\n",
    );
    let put = api(
        &d,
        "PUT",
        "/api/config/raw",
        Some(json!({ "yaml_text": text, "version": body["version"] })),
    );
    assert_eq!(put.status, 200, "{}", put.body);
    let restart = &put.json()["restart"];
    assert_eq!(restart["needed"], true, "{restart}");
    assert_eq!(restart["changed"], json!(["memory_max"]));
    assert_eq!(restart["service"], "gateway-default");
    // The same text again: nothing written, nothing to restart.
    let version = common::get_json(&d, "/api/config/raw", 200)["version"].clone();
    let put = api(
        &d,
        "PUT",
        "/api/config/raw",
        Some(json!({ "yaml_text": text, "version": version })),
    );
    let body = put.json();
    assert_eq!(body["written"], false, "{body}");
    assert_eq!(body["restart"]["needed"], false, "{body}");
}
