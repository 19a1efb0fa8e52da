//! The Diagnostics API over real HTTP: the dump as text and JSON (never a key's value), the
//! doctor's checks with their fixes, refusals for bad parameters, and nothing seeded. (That
//! both equal the commands' output is tested against the binary, in the CLI's
//! `ui_diagnostics` tests.)

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use common::{get, get_json, token_mode};

#[test]
fn the_dump_is_text_and_json_and_never_shows_a_keys_value() {
    let d = token_mode();
    std::fs::write(
        d.home.path().join(".env"),
        "OPENAI_API_KEY=sk-never-shown-123\n",
    )
    .unwrap();
    let both = get_json(&d, "/api/diagnostics/dump", 200);
    let text = both["text"].as_str().unwrap();
    assert!(text.starts_with("--- hermes dump ---\n"), "{text}");
    assert!(!both.to_string().contains("sk-never-shown-123"));
    assert_eq!(both["report"]["profile"], "default");
    // The in-process dashboard has no supervisor: said as such, not guessed.
    assert_eq!(both["report"]["supervisor"]["status"], "not-running");
    let key = both["report"]["api_keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["env"] == "OPENAI_API_KEY")
        .unwrap()
        .clone();
    assert_eq!(key["set"], true);

    let plain = get(&d, "/api/diagnostics/dump?format=text");
    assert_eq!(plain.status, 200);
    assert!(
        plain
            .header("content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    assert_eq!(plain.body, text);
}

#[test]
fn doctor_gives_each_check_with_its_fix_and_a_failure_is_one_of_them() {
    let d = token_mode();
    std::fs::write(d.home.path().join("auth.json"), "{ this is not json").unwrap();
    let report = get_json(&d, "/api/diagnostics/doctor", 200);
    assert_eq!(report["profile"], "default");
    let checks = report["checks"].as_array().unwrap();
    assert!(
        checks.iter().all(|c| c["status"].is_string()
            && c["message"].is_string()
            && (c["status"] == "ok" || c["fix"].is_string())),
        "{report}"
    );
    let failed = checks
        .iter()
        .find(|c| c["status"] == "fail")
        .unwrap_or_else(|| panic!("no failing check: {report}"));
    assert!(
        failed["message"].as_str().unwrap().contains("auth.json"),
        "{failed}"
    );

    let plain = get(&d, "/api/diagnostics/doctor?format=text");
    assert_eq!(plain.status, 200);
    assert!(plain.body.starts_with("hermes doctor — profile `default`"));
    assert!(
        plain
            .body
            .contains(&format!("  ✗ {}\n", failed["message"].as_str().unwrap())),
        "{}",
        plain.body
    );
    assert!(
        plain
            .body
            .contains(&format!("      fix: {}\n", failed["fix"].as_str().unwrap()))
    );
}

#[test]
fn bad_parameters_are_clear_4xx() {
    let d = token_mode();
    for (path, status) in [
        ("/api/diagnostics/dump?profile=..%2F..", 400),
        ("/api/diagnostics/doctor?profile=%2Fetc", 400),
        ("/api/diagnostics/doctor?profile=nobody", 404),
        ("/api/diagnostics/dump?format=html", 400),
    ] {
        let a = get_json(&d, path, status);
        assert!(a["detail"].as_str().is_some_and(|s| !s.is_empty()), "{a}");
    }
}

#[test]
fn asking_never_seeds_the_home() {
    let d = token_mode();
    get_json(&d, "/api/diagnostics/doctor", 200);
    get_json(&d, "/api/diagnostics/dump", 200);
    let left: Vec<_> = std::fs::read_dir(d.home.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.is_empty(), "the dashboard created {left:?}");
}

#[test]
fn the_page_has_the_dump_and_the_checks_and_the_api_is_documented() {
    let d = token_mode();
    let page = get(&d, "/diagnostics");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<pre id=\"dump\""));
    assert!(page.body.contains("id=\"checks\""));
    let doc = get_json(&d, "/api/openapi.json", 200);
    for path in ["/api/diagnostics/dump", "/api/diagnostics/doctor"] {
        assert!(doc["paths"][path]["get"].is_object(), "{path}");
    }
}
