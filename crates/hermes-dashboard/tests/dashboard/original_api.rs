//! The original dashboard's API (`hermes_cli/web_server.py`, hermes-agent 0.20.1) where tools
//! written for it call ours, over real HTTP on loopback: the request and response checks of
//! its tests (`tests/hermes_cli/test_web_server*.py`) for those endpoints, behind our guard.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use common::{Answer, Dashboard, TOKEN, TOKEN_ENV, local, token_header};
use hermes_home::ProfileName;
use hermes_home::profile::{self, CreateOptions};
use serde_json::{Value, json};

/// A dashboard for a fresh home with a second profile, `worker_beta`, no supervisor.
fn start() -> Dashboard {
    let home = tempfile::tempdir().unwrap();
    hermes_home::layout::ensure_skeleton(home.path(), true, &hermes_home::seeds::KeySeed::Generate)
        .unwrap();
    let name = ProfileName::parse("worker_beta").unwrap();
    profile::create(home.path(), &name, &CreateOptions::default()).unwrap();
    common::start_in(home, "127.0.0.1", &TOKEN_ENV)
}

fn worker(d: &Dashboard) -> PathBuf {
    d.root().join("profiles/worker_beta")
}

/// A signed-in request with a JSON body (the session token header: authentication and CSRF).
fn api(d: &Dashboard, method: &str, path: &str, body: Option<Value>) -> Answer {
    let mut headers = vec![token_header()];
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    if method != "GET" {
        headers.push("Content-Type: application/json".into());
    }
    common::send(d, method, path, &local(d), &headers, &body)
}

/// `path`'s file text, empty when missing.
fn text(path: PathBuf) -> String {
    fs::read_to_string(path).unwrap_or_default()
}

/// The one-line error with a hint that every refusal is.
fn assert_problem(a: &Answer, status: u16) {
    assert_eq!(a.status, status, "{}", a.body);
    let body = a.json();
    let detail = body["detail"].as_str().unwrap();
    assert!(!detail.contains('\n'), "{detail}");
}

#[test]
fn a_config_put_merges_so_keys_the_form_does_not_send_survive() {
    let d = start();
    let path = d.root().join("config.yaml");
    fs::write(
        &path,
        "# mine\nagent:\n  max_turns: 50  # keep\n  x_dashboard_invisible_test_key:\n    nested: value\n",
    )
    .unwrap();
    let mut web = api(&d, "GET", "/api/config", None).json();
    web["agent"]["max_turns"] = json!(75);
    web["agent"]
        .as_object_mut()
        .unwrap()
        .remove("x_dashboard_invisible_test_key");
    let a = api(&d, "PUT", "/api/config", Some(json!({ "config": web })));
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json(), json!({ "ok": true }));
    let after = text(path);
    assert_eq!(
        after,
        "# mine\nagent:\n  max_turns: 75  # keep\n  x_dashboard_invisible_test_key:\n    nested: value\n"
    );
    let again = api(&d, "GET", "/api/config", None).json();
    assert_eq!(
        again["agent"]["x_dashboard_invisible_test_key"]["nested"],
        "value"
    );
}

#[test]
fn a_config_round_trip_keeps_sibling_settings() {
    let d = start();
    let path = d.root().join("config.yaml");
    fs::write(&path, "terminal:\n  backend: local\n  timeout: 180\n").unwrap();
    let mut web = api(&d, "GET", "/api/config", None).json();
    let before = web["terminal"].clone();
    web["terminal"]["font_family"] = json!("MesloLGS NF");
    let a = api(&d, "PUT", "/api/config", Some(json!({ "config": web })));
    assert_eq!(a.status, 200, "{}", a.body);
    let reloaded = api(&d, "GET", "/api/config", None).json();
    assert_eq!(reloaded["terminal"]["font_family"], "MesloLGS NF");
    for (k, v) in before.as_object().unwrap() {
        assert_eq!(&reloaded["terminal"][k], v, "{k}");
    }
}

#[test]
fn a_config_read_flattens_model_and_hides_internal_keys() {
    let d = start();
    fs::write(
        d.root().join("config.yaml"),
        "_config_version: 23\nmodel:\n  default: gpt-5\n  provider: openrouter\n  context_length: 64000\napi_key: ${OPENAI_API_KEY}\n",
    )
    .unwrap();
    let web = api(&d, "GET", "/api/config", None).json();
    assert_eq!(web["model"], "gpt-5");
    assert_eq!(web["model_context_length"], 64000);
    assert!(web.get("_config_version").is_none(), "{web}");
    // As written: a reference is never expanded into the form (nor written back as a secret).
    assert_eq!(web["api_key"], "${OPENAI_API_KEY}");

    // The form's flat model goes back inside the mapping; the provider stays.
    let a = api(
        &d,
        "PUT",
        "/api/config",
        Some(
            json!({ "config": { "model": "claude-4", "model_context_length": 0, "_config_version": 1 } }),
        ),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let after = text(d.root().join("config.yaml"));
    assert!(after.contains("  default: claude-4\n"), "{after}");
    assert!(after.contains("  provider: openrouter\n"), "{after}");
    assert!(after.starts_with("_config_version: 23\n"), "{after}");
}

#[test]
fn config_is_scoped_by_the_query_and_the_body_profile() {
    let d = start();
    let a = api(
        &d,
        "PUT",
        "/api/config?profile=worker_beta",
        Some(json!({ "config": { "timezone": "Pluto/Far" } })),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(text(worker(&d).join("config.yaml")).contains("timezone: Pluto/Far"));
    assert!(!text(d.root().join("config.yaml")).contains("Pluto/Far"));

    let a = api(
        &d,
        "PUT",
        "/api/config",
        Some(json!({ "config": { "timezone": "Mars/Near" }, "profile": "worker_beta" })),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let web = api(&d, "GET", "/api/config?profile=worker_beta", None).json();
    assert_eq!(web["timezone"], "Mars/Near");
    assert!(!text(d.root().join("config.yaml")).contains("Mars/Near"));

    assert_problem(&api(&d, "GET", "/api/config?profile=ghost", None), 404);
    assert_problem(&api(&d, "GET", "/api/config?profile=..", None), 400);
}

#[test]
fn a_refused_config_put_writes_nothing() {
    let d = start();
    let path = d.root().join("config.yaml");
    fs::write(&path, "agent:\n  max_turns: 50\n").unwrap();
    let before = text(path.clone());
    // The first key is fine, the second is not: neither is written.
    let a = api(
        &d,
        "PUT",
        "/api/config",
        Some(json!({ "config": { "timezone": "UTC", "a.b": 1 } })),
    );
    assert_problem(&a, 400);
    assert!(a.json()["hint"].as_str().is_some());
    assert_eq!(text(path.clone()), before);
    for bad in [json!({}), json!({ "config": [1] }), json!("x")] {
        assert_problem(&api(&d, "PUT", "/api/config", Some(bad)), 422);
    }
    assert_eq!(text(path.clone()), before);

    // No session token header: the guard refuses before anything is read.
    let a = common::send(
        &d,
        "PUT",
        "/api/config",
        &local(&d),
        &[
            format!("Cookie: hermes_dashboard_session={TOKEN}"),
            "Content-Type: application/json".into(),
        ],
        &json!({ "config": { "timezone": "UTC" } }).to_string(),
    );
    assert_eq!(a.status, 403, "{}", a.body);
    let a = common::request(&d, "GET", "/api/config", &local(&d), &[]);
    assert_eq!(a.status, 401, "{}", a.body);
    assert_eq!(text(path), before);
}

#[test]
fn env_writes_land_in_the_target_profile_only_and_reads_are_masked() {
    let d = start();
    let a = api(
        &d,
        "PUT",
        "/api/env",
        Some(json!({ "key": "FAL_KEY", "value": "test-fal-123", "profile": "worker_beta" })),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["ok"], true);
    assert_eq!(a.json()["key"], "FAL_KEY");
    assert!(text(worker(&d).join(".env")).contains("test-fal-123"));
    assert!(!text(d.root().join(".env")).contains("test-fal-123"));

    let rows = api(&d, "GET", "/api/env?profile=worker_beta", None);
    assert_eq!(rows.status, 200, "{}", rows.body);
    assert!(!rows.body.contains("test-fal-123"), "{}", rows.body);
    let row = &rows.json()["FAL_KEY"];
    assert_eq!(row["is_set"], true);
    assert_eq!(row["custom"], true);
    assert_eq!(row["is_password"], true);
    assert!(row["redacted_value"].as_str().is_some(), "{row}");
    // The known providers' keys are listed, unset.
    let openrouter = &rows.json()["OPENROUTER_API_KEY"];
    assert_eq!(openrouter["is_set"], false);
    assert_eq!(openrouter["redacted_value"], Value::Null);
    assert_eq!(openrouter["provider"], "openrouter");
    let default_rows = api(&d, "GET", "/api/env", None).json();
    assert!(default_rows.get("FAL_KEY").is_none(), "{default_rows}");
}

#[test]
fn env_delete_is_scoped_and_a_missing_key_is_a_404() {
    let d = start();
    fs::write(worker(&d).join(".env"), "# note\nFAL_KEY=doomed\nOTHER=1\n").unwrap();
    let a = api(
        &d,
        "DELETE",
        "/api/env",
        Some(json!({ "key": "FAL_KEY", "profile": "worker_beta" })),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["found"], true);
    assert_eq!(text(worker(&d).join(".env")), "# note\nOTHER=1\n");
    let a = api(
        &d,
        "DELETE",
        "/api/env?profile=worker_beta",
        Some(json!({ "key": "FAL_KEY" })),
    );
    assert_problem(&a, 404);
    assert!(
        a.json()["detail"]
            .as_str()
            .unwrap()
            .contains("FAL_KEY not found in .env")
    );
}

#[test]
fn bad_env_names_are_refused_and_nothing_is_written() {
    let d = start();
    let path = d.root().join(".env");
    let before = text(path.clone());
    for key in ["", "1ABC", "A B", "PATH", "LD_PRELOAD"] {
        let a = api(
            &d,
            "PUT",
            "/api/env",
            Some(json!({ "key": key, "value": "x" })),
        );
        assert_problem(&a, 400);
        assert!(a.json()["hint"].as_str().is_some(), "{key}: {}", a.body);
    }
    assert_problem(
        &api(&d, "PUT", "/api/env", Some(json!({ "key": "A" }))),
        422,
    );
    assert_problem(
        &api(
            &d,
            "PUT",
            "/api/env",
            Some(json!({ "key": "A", "value": "x", "profile": "ghost" })),
        ),
        404,
    );
    assert_eq!(text(path), before);
}

/// A control socket that records every request line and answers each with success, where
/// the dashboard of `home` looks for the supervisor (`<home>/run`, as `common::start_in` sets).
fn recording_supervisor(home: &Path) -> Arc<Mutex<Vec<Value>>> {
    let run = home.join("run");
    fs::create_dir_all(&run).unwrap();
    let listener = UnixListener::bind(run.join(hermes_supervisor::client::SOCKET_NAME)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let shared = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let seen = shared.clone();
            std::thread::spawn(move || {
                let mut writer = stream.try_clone().unwrap();
                for line in BufReader::new(stream).lines() {
                    let Ok(line) = line else { return };
                    seen.lock()
                        .unwrap()
                        .push(serde_json::from_str(&line).unwrap());
                    let answer = hermes_supervisor::protocol::Response::services(Vec::new());
                    if writer.write_all(&answer.to_frame()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    seen
}

#[test]
fn gateway_actions_go_to_the_profiles_gateway_through_the_control_socket() {
    let d = start();
    let seen = recording_supervisor(d.root());
    for (verb, profile, service) in [
        ("start", "?profile=worker_beta", "gateway-worker_beta"),
        ("stop", "?profile=worker_beta", "gateway-worker_beta"),
        ("restart", "", "gateway-default"),
    ] {
        let a = api(&d, "POST", &format!("/api/gateway/{verb}{profile}"), None);
        assert_eq!(a.status, 200, "{verb}: {}", a.body);
        let body = a.json();
        assert_eq!(body["ok"], true, "{body}");
        assert_eq!(body["name"], format!("gateway-{verb}"));
        assert_eq!(body["pid"], Value::Null);
        assert_eq!(body["service"], service);
        let ops = seen.lock().unwrap().clone();
        assert!(
            ops.iter()
                .any(|op| op["op"] == verb && op["service"] == service),
            "{verb} of {service} not sent: {ops:?}"
        );
        seen.lock().unwrap().clear();
    }
}

#[test]
fn gateway_actions_refuse_clearly_and_need_the_csrf_header() {
    let d = start();
    // No supervisor: a 503 saying so, with a hint.
    let a = api(&d, "POST", "/api/gateway/start", None);
    assert_problem(&a, 503);
    assert!(a.json()["hint"].as_str().is_some(), "{}", a.body);
    assert_problem(&api(&d, "POST", "/api/gateway/explode", None), 404);
    assert_problem(
        &api(&d, "POST", "/api/gateway/start?profile=ghost", None),
        404,
    );
    assert_problem(&api(&d, "POST", "/api/gateway/start?profile=..", None), 400);

    let seen = recording_supervisor(d.root());
    let a = common::request(
        &d,
        "POST",
        "/api/gateway/stop",
        &local(&d),
        &[format!("Cookie: hermes_dashboard_session={TOKEN}")],
    );
    assert_eq!(a.status, 403, "{}", a.body);
    let a = api(&d, "GET", "/api/gateway/stop", None);
    assert_eq!(a.status, 405, "{}", a.body);
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
}

#[test]
fn sessions_page_by_offset_with_the_originals_total_limit_and_offset() {
    let d = start();
    let store = hermes_sessions::SessionStore::open(&d.root().join("state.db")).unwrap();
    for id in ["s1", "s2", "s3", "s4", "s5"] {
        store
            .append(id, "default", &[json!({ "role": "user", "content": id })])
            .unwrap();
    }
    drop(store);
    let all = common::get_json(&d, "/api/sessions", 200);
    let every = common::session_ids(&all);
    assert_eq!(every.len(), 5, "{all}");
    assert_eq!(all["total"], 5);
    assert_eq!(all["offset"], 0);
    // Ours stays as it was beside the original's fields.
    assert_eq!(all["profile"], "default");
    assert_eq!(all["sessions"][0]["profile"], "default");
    assert_eq!(all["sessions"][0]["is_default_profile"], true);

    let page = common::get_json(&d, "/api/sessions?limit=2&offset=1", 200);
    assert_eq!(common::session_ids(&page), every[1..3].to_vec());
    assert_eq!(
        (
            page["total"].clone(),
            page["limit"].clone(),
            page["offset"].clone()
        ),
        (json!(5), json!(2), json!(1))
    );
    let page = common::get_json(&d, "/api/sessions?limit=2&offset=4", 200);
    assert_eq!(common::session_ids(&page), every[4..].to_vec());
    let page = common::get_json(&d, "/api/sessions?offset=9", 200);
    assert!(common::session_ids(&page).is_empty(), "{page}");
    assert_eq!(page["total"], 5);
    for bad in ["-1", "x", "100001"] {
        assert_problem(
            &api(&d, "GET", &format!("/api/sessions?offset={bad}"), None),
            400,
        );
    }
    // Another profile's rows say whose they are.
    let other = common::get_json(&d, "/api/sessions?profile=worker_beta", 200);
    assert_eq!(other["total"], 0);
}

#[test]
fn logs_answer_the_originals_file_and_lines_beside_our_listing() {
    let d = start();
    let file = hermes_services::logs::log_file(d.root(), "gateway-worker_beta").unwrap();
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    let mut text = String::new();
    for i in 0..600 {
        text.push_str(&format!(
            "2026-12-02T10:00:00Z  INFO hermes_gateway: tick {i}\n"
        ));
    }
    text.push_str("2026-12-02T10:00:01Z  WARN hermes_gateway: slow Provider\n");
    text.push_str("2026-12-02 10:00:02,000 - ERROR - gateway.run: failed\n");
    text.push_str("a line without a level\n");
    fs::write(file, text).unwrap();

    let all = common::get_json(
        &d,
        "/api/logs?file=gateway&profile=worker_beta&lines=2",
        200,
    );
    assert_eq!(all["file"], "gateway");
    assert_eq!(
        all["lines"],
        json!([
            "2026-12-02 10:00:02,000 - ERROR - gateway.run: failed",
            "a line without a level"
        ])
    );
    // Ours is still there.
    assert!(
        all["services"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "gateway-worker_beta")
    );
    // The original's default is 100 lines, at most 500.
    let many = common::get_json(&d, "/api/logs?profile=worker_beta", 200);
    assert_eq!(many["file"], "agent");
    assert_eq!(many["lines"].as_array().unwrap().len(), 100);
    let capped = common::get_json(&d, "/api/logs?profile=worker_beta&lines=9999", 200);
    assert_eq!(capped["lines"].as_array().unwrap().len(), 500);

    let errors = common::get_json(&d, "/api/logs?file=errors&profile=worker_beta", 200);
    assert_eq!(
        errors["lines"],
        json!([
            "2026-12-02T10:00:01Z  WARN hermes_gateway: slow Provider",
            "2026-12-02 10:00:02,000 - ERROR - gateway.run: failed",
            "a line without a level",
        ])
    );
    let found = common::get_json(
        &d,
        "/api/logs?profile=worker_beta&level=ERROR&search=FAIL",
        200,
    );
    assert_eq!(
        found["lines"],
        json!(["2026-12-02 10:00:02,000 - ERROR - gateway.run: failed"])
    );
    let found = common::get_json(&d, "/api/logs?profile=worker_beta&search=tick%20599", 200);
    assert_eq!(found["lines"].as_array().unwrap().len(), 1, "{found}");

    // No log yet: no lines, as the original answers for a missing file.
    let none = common::get_json(&d, "/api/logs?file=agent", 200);
    assert_eq!(none["lines"], json!([]));
    for bad in [
        "file=desktop",
        "lines=x",
        "level=LOUD",
        "component=tools",
        "profile=ghost",
    ] {
        let a = api(&d, "GET", &format!("/api/logs?{bad}"), None);
        assert!(matches!(a.status, 400 | 404), "{bad}: {}", a.body);
        assert_problem(&a, a.status);
    }
}

#[test]
fn profiles_list_create_and_delete_answer_the_originals_fields() {
    let d = start();
    fs::write(
        worker(&d).join("config.yaml"),
        "model:\n  default: gpt-5\n  provider: openrouter\n",
    )
    .unwrap();
    fs::write(worker(&d).join(".env"), "OPENROUTER_API_KEY=x\n").unwrap();
    let list = common::get_json(&d, "/api/profiles", 200);
    let rows = list["profiles"].as_array().unwrap();
    let default = rows.iter().find(|r| r["name"] == "default").unwrap();
    assert_eq!(default["is_default"], true);
    assert_eq!(default["gateway_running"], false);
    let beta = rows.iter().find(|r| r["name"] == "worker_beta").unwrap();
    assert_eq!(beta["is_default"], false);
    assert_eq!(beta["path"], json!(worker(&d)));
    assert_eq!(beta["provider"], "openrouter");
    assert_eq!(beta["model"], "gpt-5");
    assert_eq!(beta["has_env"], true);
    // Ours is still there.
    assert_eq!(beta["default"], false);
    assert_eq!(beta["dir"], json!(worker(&d)));

    // The original's older clients ask for a copy of default with `clone_from_default`.
    fs::write(d.root().join("SOUL.md"), "the default soul").unwrap();
    let a = api(
        &d,
        "POST",
        "/api/profiles",
        Some(json!({ "name": "copied", "clone_from_default": true, "no_skills": true })),
    );
    assert_eq!(a.status, 201, "{}", a.body);
    let body = a.json();
    assert_eq!(body["ok"], true);
    assert_eq!(body["name"], "copied");
    let path = PathBuf::from(body["path"].as_str().unwrap());
    assert_eq!(body["cloned_from"], "default");
    assert_eq!(text(path.join("SOUL.md")), "the default soul");
    assert_eq!(body["hub_installs"], json!([]));

    // Deleting keeps our confirmation (the original sends none): refused without it.
    let a = api(&d, "DELETE", "/api/profiles/copied", None);
    assert_problem(&a, 422);
    assert!(path.is_dir());
    let a = api(
        &d,
        "DELETE",
        "/api/profiles/copied",
        Some(json!({ "confirm": "copied" })),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["ok"], true);
    assert_eq!(a.json()["path"], json!(path));
    assert!(!path.exists());
}

#[test]
fn status_adds_the_originals_gateway_fields_beside_ours() {
    let d = start();
    let plain = common::get_json(&d, "/api/status", 200);
    // Ours is still there.
    assert_eq!(plain["supervisor"]["reachable"], false);
    assert!(plain["components"].is_object(), "{plain}");
    assert_eq!(plain["gateway_running"], false);
    assert_eq!(plain["gateway_state"], "stopped");
    assert_eq!(plain["gateway_pid"], Value::Null);
    assert_eq!(plain["gateway_platforms"], json!({}));
    assert_eq!(plain["auth_required"], false);
    assert_eq!(plain["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        plain["latest_config_version"],
        hermes_home::config::ORIGINAL_CONFIG_VERSION
    );
    assert_eq!(plain["hermes_home"], json!(d.root()));

    fs::write(
        hermes_home::gateway_state::path(&worker(&d)),
        json!({
            "gateway_state": "running",
            "platforms": { "telegram": { "state": "connected" } },
            "updated_at": "2026-12-02T10:00:00Z",
        })
        .to_string(),
    )
    .unwrap();
    let _supervisor = crate::metrics::FakeSupervisor::serve(
        d.root(),
        vec![crate::metrics::row(
            "gateway-worker_beta",
            hermes_supervisor::StateName::Up,
            Some("worker_beta"),
        )],
    );
    let beta = common::get_json(&d, "/api/status?profile=worker_beta", 200);
    assert_eq!(beta["gateway_running"], true, "{beta}");
    assert_eq!(beta["gateway_pid"], 4242);
    assert_eq!(beta["gateway_state"], "running");
    assert_eq!(beta["gateway_platforms"]["telegram"]["state"], "connected");
    assert_eq!(beta["gateway_updated_at"], "2026-12-02T10:00:00Z");
    assert_eq!(beta["hermes_home"], json!(worker(&d)));
    // The default profile's gateway has no row: stopped.
    let plain = common::get_json(&d, "/api/status", 200);
    assert_eq!(plain["gateway_running"], false);

    assert_problem(&api(&d, "GET", "/api/status?profile=ghost", None), 404);
    assert_problem(&api(&d, "GET", "/api/status?profile=..", None), 400);
}

/// The original's `test_get_sessions_fresh_store_returns_empty_list` and
/// `test_get_sessions_zero_byte_store_returns_empty_list`: a volume without a store, or with an
/// empty file where it would be (a store created and never written), lists nothing.
#[test]
fn sessions_of_a_fresh_or_zero_byte_store_are_an_empty_list() {
    let d = start();
    let _ = fs::remove_file(d.root().join("state.db"));
    let fresh = common::get_json(&d, "/api/sessions?limit=50&offset=0", 200);
    assert_eq!(fresh["sessions"], json!([]), "{fresh}");
    assert_eq!(fresh["total"], 0);
    fs::write(d.root().join("state.db"), b"").unwrap();
    let empty = common::get_json(&d, "/api/sessions?limit=50&offset=0", 200);
    assert_eq!(empty["sessions"], json!([]), "{empty}");
    assert_eq!(empty["total"], 0);
    assert_eq!(
        fs::metadata(d.root().join("state.db")).unwrap().len(),
        0,
        "a read never writes the store"
    );
}

/// The original's `test_get_sessions_rejects_negative_limit` / `_offset` (its #74316: a
/// negative limit reached SQLite as "no limit"): refused before the store is read — a `400`
/// here, where the original's framework answers `422` (docs/dashboard.md) — and a positive
/// limit still pages.
#[test]
fn negative_session_limits_and_offsets_are_refused() {
    let d = start();
    for query in ["limit=-1", "offset=-1"] {
        assert_problem(
            &api(&d, "GET", &format!("/api/sessions?{query}"), None),
            400,
        );
    }
    let store = hermes_sessions::SessionStore::open(&d.root().join("state.db")).unwrap();
    for i in 0..5 {
        let id = format!("pos-limit-{i}");
        store
            .append(
                &id,
                "default",
                &[json!({ "role": "user", "content": "hi" })],
            )
            .unwrap();
    }
    drop(store);
    let page = common::get_json(&d, "/api/sessions?limit=3&offset=0", 200);
    assert_eq!(page["sessions"].as_array().unwrap().len(), 3, "{page}");
}

/// The original's `test_web_server_gateway_topology.py`: `profiles` every profile, `gateways`
/// only those with a live gateway, `gateway_mode` from how many there are and whether the
/// default one serves several profiles; `ports` the live port-binding platforms, each from
/// `config.yaml` (top-level `platforms:` over `gateway.platforms:`, then `extra`, then the
/// adapter's default), a dead one left out.
#[test]
fn status_carries_the_originals_gateway_topology() {
    let d = start();
    let none = common::get_json(&d, "/api/status", 200);
    assert_eq!(
        none["profiles"],
        json!(["default", "worker_beta"]),
        "{none}"
    );
    assert_eq!(none["gateway_mode"], "none");
    assert_eq!(none["gateways"], json!([]));
    // Ours is under its own name.
    assert!(none["gateway_routing"]["mode"].is_string(), "{none}");

    // One live gateway, a webhook platform live, a dead one left out.
    fs::write(
        d.root().join("config.yaml"),
        "_config_version: 33\ngateway:\n  platforms:\n    webhook:\n      port: 1111\nplatforms:\n  webhook:\n    port: 2222\n  msgraph_webhook:\n    extra:\n      port: '9999'\n",
    )
    .unwrap();
    fs::write(
        hermes_home::gateway_state::path(d.root()),
        json!({
            "gateway_state": "running",
            "platforms": {
                "webhook": { "state": "connected" },
                "msgraph_webhook": { "state": "fatal" },
                "api_server": { "state": "connected" },
                "telegram": { "state": "connected" },
            },
        })
        .to_string(),
    )
    .unwrap();
    let rows = vec![crate::metrics::row(
        "gateway-default",
        hermes_supervisor::StateName::Up,
        Some("default"),
    )];
    let supervisor = crate::metrics::FakeSupervisor::serve(d.root(), rows);
    let single = common::get_json(&d, "/api/status", 200);
    assert_eq!(single["gateway_mode"], "single", "{single}");
    assert_eq!(
        single["gateways"],
        json!([{ "profile": "default", "ports": { "webhook": 2222, "api_server": 8642 } }])
    );

    // The dead platform comes back: its port from `extra`, a string as the original's int().
    fs::write(
        hermes_home::gateway_state::path(d.root()),
        json!({
            "gateway_state": "running",
            "platforms": { "msgraph_webhook": { "state": "connected" } },
            "served_profiles": ["default", "worker_beta"],
        })
        .to_string(),
    )
    .unwrap();
    let multiplexed = common::get_json(&d, "/api/status", 200);
    assert_eq!(multiplexed["gateway_mode"], "multiplex", "{multiplexed}");
    assert_eq!(
        multiplexed["gateways"],
        json!([{
            "profile": "default",
            "ports": { "msgraph_webhook": 9999 },
            "served_profiles": ["default", "worker_beta"],
        }])
    );

    // Two gateways of their own.
    fs::write(
        hermes_home::gateway_state::path(d.root()),
        json!({ "gateway_state": "running" }).to_string(),
    )
    .unwrap();
    supervisor.rows.lock().unwrap().push(crate::metrics::row(
        "gateway-worker_beta",
        hermes_supervisor::StateName::Up,
        Some("worker_beta"),
    ));
    let multiple = common::get_json(&d, "/api/status", 200);
    assert_eq!(multiple["gateway_mode"], "multiple", "{multiple}");
    let profiles: Vec<&str> = multiple["gateways"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["profile"].as_str().unwrap())
        .collect();
    assert_eq!(profiles, ["default", "worker_beta"]);
    assert_eq!(multiple["gateways"][1]["ports"], json!({}));
}
