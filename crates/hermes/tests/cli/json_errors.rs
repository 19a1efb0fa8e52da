//! `--json` means JSON, failures included: a command run with `--json` that fails prints one
//! JSON object on stdout (`error`, `hint`, `exit_code`, and `causes` when there are any),
//! nothing else there, with the exit code it has without `--json`.

use serde_json::Value;

use crate::util::TestContext;

/// Runs `args`, asserts stdout is exactly one JSON object describing the failure, and returns
/// it with the exit code.
fn json_failure(t: &TestContext, args: &[&str]) -> (Value, i32) {
    let out = t.run(args);
    let code = out.status.code().expect("exit code");
    assert_ne!(code, 0, "hermes {args:?} succeeded");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let value: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("hermes {args:?}: stdout is not one JSON value ({e}):\n{stdout}")
    });
    let object = value.as_object().expect("an object");
    assert!(
        object["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{value}"
    );
    assert!(object.contains_key("hint"), "{value}");
    assert_eq!(
        object["exit_code"], code,
        "the exit code in the object is the real one"
    );
    for key in object.keys() {
        assert!(
            ["error", "hint", "exit_code", "causes"].contains(&key.as_str()),
            "unexpected key `{key}` in {value}"
        );
    }
    (value, code)
}

#[test]
fn every_json_command_reports_its_failure_as_json_on_stdout() {
    let t = TestContext::new();
    // Each fails for want of a profile or a supervisor, as a user meets it.
    let failing: &[&[&str]] = &[
        &["-p", "ghost", "dump", "--json"],
        &["-p", "ghost", "doctor", "--json"],
        &["-p", "ghost", "auth", "list", "--json"],
        &["-p", "ghost", "deps", "status", "--json"],
        &["-p", "ghost", "plugins", "list", "--json"],
        &["-p", "ghost", "memory", "status", "--json"],
        &["deps", "ensure", "no-such-feature", "--json"],
        &["profile", "show", "ghost", "--json"],
        &["service", "list", "--json"],
        &["service", "status", "--json"],
        &["health", "--json"],
    ];
    for args in failing {
        let (value, code) = json_failure(&t, args);
        // The same failure without `--json`: the same exit code, stdout empty, the message
        // on stderr.
        let text: Vec<&str> = args.iter().copied().filter(|a| *a != "--json").collect();
        let plain = t.run(&text);
        assert_eq!(plain.status.code(), Some(code), "{args:?}");
        assert!(plain.stdout.is_empty(), "{args:?}");
        let stderr = String::from_utf8_lossy(&plain.stderr);
        assert!(
            stderr.contains(value["error"].as_str().unwrap()),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn a_failure_with_causes_lists_them() {
    let t = TestContext::new();
    t.ok(&["version"]);
    // A directory where auth.json belongs: the read fails with an OS error as its cause.
    std::fs::create_dir_all(t.root().join("auth.json")).unwrap();
    let (value, code) = json_failure(&t, &["auth", "list", "--json"]);
    assert_eq!(code, 1);
    let causes = value["causes"].as_array().expect("causes");
    assert!(
        !causes.is_empty() && causes.iter().all(Value::is_string),
        "{value}"
    );
}

#[test]
fn a_usage_error_under_json_is_json_with_exit_2() {
    let t = TestContext::new();
    let (value, code) = json_failure(&t, &["gateway", "status", "--json", "--bogus"]);
    assert_eq!(code, 2);
    assert!(
        value["error"].as_str().unwrap().contains("--bogus"),
        "{value}"
    );
    // Without `--json`, clap's own text and nothing on stdout.
    let plain = t.run(&["gateway", "status", "--bogus"]);
    assert_eq!(plain.status.code(), Some(2));
    assert!(plain.stdout.is_empty());
}

#[test]
fn gateway_list_is_the_profiles_addresses_and_status_the_live_state() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let list: Value = serde_json::from_str(&t.ok(&["gateway", "list", "--json"])).unwrap();
    let status: Value = serde_json::from_str(&t.ok(&["gateway", "status", "--json"])).unwrap();
    let (list, status) = (list.as_array().unwrap(), status.as_array().unwrap());
    assert_eq!(list.len(), 2, "{list:?}");
    for row in list {
        let keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            ["profile", "service", "address", "api_server", "served_by"],
            "{row}"
        );
    }
    for row in status {
        for live in ["state", "pid", "reason", "recorded"] {
            assert!(
                row.as_object().unwrap().contains_key(live),
                "{live} in {row}"
            );
        }
    }
    // The same gateways and addresses in both.
    let pairs = |rows: &[Value]| -> Vec<(Value, Value)> {
        rows.iter()
            .map(|r| (r["service"].clone(), r["address"].clone()))
            .collect()
    };
    assert_eq!(pairs(list), pairs(status));
}
