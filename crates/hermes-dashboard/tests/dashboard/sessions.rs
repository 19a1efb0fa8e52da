//! The Sessions API over real HTTP: conversations written by the gateway's own `SessionStore`
//! into a profile's `state.db`, read back through the dashboard; search, paging, hostile
//! input, and the file left exactly as it was.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::path::{Path, PathBuf};

use common::{Dashboard, get, get_json, token_mode};
use hermes_sessions::SessionStore;
use serde_json::{Value, json};

/// Writes `sessions` (id, [(role, content)]) into `dir/state.db` as the gateway does.
fn write(dir: &Path, sessions: &[(&str, &[(&str, &str)])]) -> PathBuf {
    let path = dir.join("state.db");
    let store = SessionStore::open(&path).unwrap();
    for (id, messages) in sessions {
        let messages: Vec<Value> = messages
            .iter()
            .map(|(role, content)| json!({ "role": role, "content": content }))
            .collect();
        store.append(id, "default", &messages).unwrap();
    }
    path
}

/// A named profile `name` (a directory with `SOUL.md`).
fn profile(d: &Dashboard, name: &str) -> PathBuf {
    let dir = d.home.path().join("profiles").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SOUL.md"), "soul").unwrap();
    dir
}

#[test]
fn sessions_written_by_the_gateway_are_listed_newest_first_and_read_back() {
    let d = token_mode();
    write(
        d.home.path(),
        &[
            ("first", &[("user", "hello"), ("assistant", "hi there")]),
            ("second", &[("user", "<script>alert(1)</script>")]),
        ],
    );
    let list = get_json(&d, "/api/sessions", 200);
    assert_eq!(list["profile"], "default");
    assert_eq!(common::session_ids(&list), ["second", "first"]);
    assert_eq!(list["sessions"][1]["message_count"], 2);
    assert_eq!(list["sessions"][1]["source"], "api_server");
    assert_eq!(list["next"], Value::Null);

    let one = get_json(&d, "/api/sessions/first?profile=default", 200);
    let messages: Vec<(&str, &str)> = one["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(messages, [("user", "hello"), ("assistant", "hi there")]);
    // Content is data, returned as stored.
    let hostile = get_json(&d, "/api/sessions/second", 200);
    assert_eq!(
        hostile["messages"][0]["content"],
        "<script>alert(1)</script>"
    );
}

#[test]
fn pages_continue_with_next_and_limits_are_checked() {
    let d = token_mode();
    write(
        d.home.path(),
        &[
            ("a", &[("user", "1")]),
            ("b", &[("user", "2")]),
            ("c", &[("user", "3")]),
        ],
    );
    let page1 = get_json(&d, "/api/sessions?limit=2", 200);
    assert_eq!(common::session_ids(&page1), ["c", "b"]);
    assert_eq!(page1["next"], "b");
    let page2 = get_json(&d, "/api/sessions?limit=2&before=b", 200);
    assert_eq!(common::session_ids(&page2), ["a"]);
    assert_eq!(page2["next"], Value::Null);
    for bad in ["0", "-1", "abc", "100000"] {
        let a = get_json(&d, &format!("/api/sessions?limit={bad}"), 400);
        assert!(a["detail"].as_str().unwrap().contains("limit"), "{a}");
    }
}

#[test]
fn a_named_profile_is_read_from_its_own_directory() {
    let d = token_mode();
    write(d.home.path(), &[("root-one", &[("user", "x")])]);
    let work = profile(&d, "work");
    write(&work, &[("work-one", &[("user", "y")])]);
    assert_eq!(
        common::session_ids(&get_json(&d, "/api/sessions?profile=work", 200)),
        ["work-one"]
    );
    assert_eq!(
        common::session_ids(&get_json(&d, "/api/sessions?profile=default", 200)),
        ["root-one"]
    );
    // The other profile's session is not found through this one.
    get_json(&d, "/api/sessions/root-one?profile=work", 404);
}

#[test]
fn bad_profiles_and_unknown_sessions_are_clear_4xx() {
    let d = token_mode();
    for (path, status) in [
        ("/api/sessions?profile=..%2F..%2Fetc", 400),
        ("/api/sessions?profile=%2Fetc", 400),
        ("/api/sessions?profile=nobody", 404),
        ("/api/sessions/search?profile=..&q=x", 400),
        ("/api/sessions/nope", 404),
        ("/api/sessions/..%2F..%2Fstate.db", 404),
    ] {
        let a = get_json(&d, path, status);
        assert!(a["detail"].as_str().is_some_and(|s| !s.is_empty()), "{a}");
    }
}

#[test]
fn a_missing_database_has_no_sessions_and_is_not_created() {
    let d = token_mode();
    let list = get_json(&d, "/api/sessions", 200);
    assert_eq!(common::session_ids(&list), Vec::<String>::new());
    let found = get_json(&d, "/api/sessions/search?q=hello", 200);
    assert_eq!(found["results"], json!([]));
    assert!(!d.home.path().join("state.db").exists());
}

#[test]
fn a_file_that_is_not_a_database_is_an_error_answer() {
    let d = token_mode();
    let path = d.home.path().join("state.db");
    std::fs::write(&path, vec![b'x'; 4096]).unwrap();
    let a = get_json(&d, "/api/sessions", 500);
    assert!(a["detail"].as_str().unwrap().contains("state.db"), "{a}");
    assert!(a["hint"].is_string(), "{a}");
    assert_eq!(std::fs::read(&path).unwrap(), vec![b'x'; 4096]);
}

#[test]
fn search_finds_a_word_with_its_session_and_a_marked_snippet() {
    let d = token_mode();
    write(
        d.home.path(),
        &[
            ("s1", &[("user", "where is the lighthouse keeper")]),
            ("s2", &[("user", "nothing to see")]),
        ],
    );
    let found = get_json(&d, "/api/sessions/search?q=lighthouse", 200);
    let results = found["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{found}");
    assert_eq!(results[0]["session_id"], "s1");
    assert_eq!(results[0]["role"], "user");
    assert!(
        results[0]["snippet"]
            .as_str()
            .unwrap()
            .contains(">>>lighthouse<<<"),
        "{found}"
    );
    // A word's beginning finds it too, as in the original's search.
    let prefix = get_json(&d, "/api/sessions/search?q=lightho", 200);
    assert_eq!(prefix["results"][0]["session_id"], "s1");
}

#[test]
fn hostile_search_text_never_fails_the_server() {
    let d = token_mode();
    write(
        d.home.path(),
        &[("s1", &[("user", "a \"quoted\" NEAR word")])],
    );
    for q in [
        "%22unterminated",
        "NEAR(",
        "NEAR(a%20b",
        "a%20*",
        "a%20OR",
        "%2Dx",
        "col%3Ax",
        "quoted%22",
        "%27%3B%20DROP%20TABLE%20sessions%3B%20--",
    ] {
        let a = get(&d, &format!("/api/sessions/search?q={q}"));
        assert_eq!(a.status, 200, "q={q}: {}", a.body);
    }
    // Text with no word at all is a 400 that says so, not an error of the index.
    for q in ["*", "(", "%20", "", "%22", "%5E"] {
        let a = get_json(&d, &format!("/api/sessions/search?q={q}"), 400);
        assert!(a["hint"].is_string(), "{a}");
    }
    let a = get_json(&d, "/api/sessions/search", 400);
    assert!(a["detail"].is_string(), "{a}");
    // A search of many words is bounded: at the limit it runs, past it a 400 says why.
    let words = |n: usize| vec!["word"; n].join("%20");
    let at_limit = words(200); // 200 words of 4 + 199 spaces = 999 characters
    let a = get(&d, &format!("/api/sessions/search?q={at_limit}"));
    assert_eq!(a.status, 200, "{}", a.body);
    let a = get_json(&d, &format!("/api/sessions/search?q={}", words(201)), 400);
    assert!(a["detail"].as_str().unwrap().contains("longer than"), "{a}");
    // Quotes are text: the quoted word is found.
    let found = get_json(&d, "/api/sessions/search?q=%22quoted%22", 200);
    assert_eq!(found["results"][0]["session_id"], "s1");
}

#[test]
fn browsing_leaves_the_database_file_unchanged() {
    let d = token_mode();
    let path = write(d.home.path(), &[("s1", &[("user", "keep me as I am")])]);
    let before = (
        std::fs::read(&path).unwrap(),
        path.metadata().unwrap().modified().unwrap(),
    );
    get_json(&d, "/api/sessions", 200);
    get_json(&d, "/api/sessions/s1", 200);
    get_json(&d, "/api/sessions/search?q=keep", 200);
    assert_eq!(get(&d, "/sessions").status, 200);
    let after = (
        std::fs::read(&path).unwrap(),
        path.metadata().unwrap().modified().unwrap(),
    );
    assert!(before == after, "state.db changed by browsing");
}

#[test]
fn the_page_offers_every_profile_escaped() {
    let d = token_mode();
    profile(&d, "work");
    let page = get(&d, "/sessions");
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("<option value=\"default\" selected>"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("<option value=\"work\">"),
        "{}",
        page.body
    );
    assert!(page.body.contains("assets/sessions.js"));
}

#[test]
fn the_endpoints_are_in_the_openapi_document() {
    let d = token_mode();
    let doc = get_json(&d, "/api/openapi.json", 200);
    for path in [
        "/api/sessions",
        "/api/sessions/search",
        "/api/sessions/{id}",
    ] {
        assert!(doc["paths"][path]["get"].is_object(), "{path}");
    }
}

/// A conversation the original agent wrote with its own `SessionDB` (title, tool call, tool
/// answer) is listed, read and found; and its search agrees with ours on the hit. Opt-in: the
/// original comes from PyPI (`HERMES_TEST_PYPI=1`).
#[test]
fn a_session_the_original_wrote_is_listed_read_and_found() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let d = token_mode();
    let script = r#"
import json, sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
sid = '20260101_120000_a1b2c3'
db.create_session(sid, source='cli', model='their-model')
db.set_session_title(sid, 'Boxes and cats')
db.append_message(sid, 'user', 'what is in the mysterybox?')
db.append_message(sid, 'assistant', None, tool_calls=[{'id': 'call_1', 'type': 'function', 'function': {'name': 'lookup', 'arguments': '{}'}}])
db.append_message(sid, 'tool', 'a cat', tool_call_id='call_1', tool_name='lookup')
db.append_message(sid, 'assistant', 'A cat.')
hits = db.search_messages(query='mysterybox')
db.close()
print(json.dumps([h['session_id'] for h in hits]))
"#;
    let out = std::process::Command::new(&agent.python)
        .arg("-c")
        .arg(script)
        .arg(d.home.path().join("state.db"))
        .env("HERMES_HOME", d.home.path())
        .env("HOME", d.home.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();

    let list = get_json(&d, "/api/sessions", 200);
    let s = &list["sessions"][0];
    assert_eq!(s["id"], "20260101_120000_a1b2c3");
    assert_eq!(s["title"], "Boxes and cats");
    assert_eq!(s["source"], "cli");
    assert_eq!(s["model"], "their-model");
    assert_eq!(s["message_count"], 4);

    let one = get_json(&d, "/api/sessions/20260101_120000_a1b2c3", 200);
    let roles: Vec<&str> = one["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    assert!(
        one["messages"][1]["tool_calls"]
            .as_str()
            .unwrap()
            .contains("lookup")
    );
    assert_eq!(one["messages"][2]["tool_name"], "lookup");

    let ours = get_json(&d, "/api/sessions/search?q=mysterybox", 200);
    let ours: Vec<&str> = ours["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ours, theirs);
}
