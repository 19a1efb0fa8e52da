//! issue 16, items 5 and 8: invalid entries of `services:` are shown where operators look
//! (`service status`, `service start`, `dump`, `doctor`), and a service whose start fails
//! says the real cause (its missing `cwd`, not `/bin/sh`).

use std::fs;
use std::time::Duration;

use crate::util::{TestContext, render};
use hermes_test_support::poll;

/// A valid service, a typo (`comand:`, so also no command), a bad `restart:` and a name
/// reserved for gateways.
const CONFIG: &str = "services:\n  ticker:\n    command: 'exec sleep 60'\n  typo:\n    comand: 'sleep 60'\n  loose:\n    command: 'sleep 60'\n    restart: sometimes\n  gateway-extra:\n    command: 'sleep 60'\n";

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `service start NAME` of an invalid entry says it is invalid, why and how to fix it.
fn assert_start_says_invalid(t: &TestContext, config: &str) {
    let out = t.run(&["service", "start", "typo"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "error: service `typo` in `{config}` is invalid, so no supervisor runs it: unknown \
             key `comand`; the command is missing"
        )),
        "{}",
        render(&out)
    );
    assert!(
        err.contains("hint: `comand`: did you mean `command`?"),
        "{}",
        render(&out)
    );
    assert!(!err.contains("unknown service"), "{}", render(&out));
    let out = t.run(&["service", "restart", "loose"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(
        stderr(&out).contains("`restart`: use one of `always`, `on-failure`, `never`"),
        "{}",
        render(&out)
    );
}

#[test]
fn invalid_services_are_shown_by_status_start_dump_and_doctor() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let config = t.root().join("config.yaml");
    fs::write(&config, CONFIG).unwrap();
    let config = config.display().to_string();

    // Without a supervisor: doctor, dump and start already know.
    let doctor = t.run(&["doctor"]);
    assert_eq!(doctor.status.code(), Some(1), "{}", render(&doctor));
    let text = stdout(&doctor);
    assert!(
        text.contains(&format!(
            "✗ service `typo` in `{config}` is invalid and left out: unknown key `comand`; the \
             command is missing\n      fix: `comand`: did you mean `command`? valid keys are: \
             command, env, cwd, restart, stop_signal, stop_grace, enabled, listen, handover, memory_max, \
             pids_max; \
             `command`: \
             give a shell string or a non-empty list of arguments\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("✗ service `loose` in `{config}` is invalid")),
        "{text}"
    );
    assert!(text.contains("profiles' gateways"), "{text}");
    let doc: serde_json::Value =
        serde_json::from_slice(&t.run(&["doctor", "--json"]).stdout).unwrap();
    let rows = doc["checks"].as_array().unwrap();
    let typo = rows
        .iter()
        .find(|c| c["message"].as_str().unwrap_or("").contains("`typo`"))
        .expect("a row for typo");
    assert_eq!(typo["status"], "fail", "{typo}");

    let dump = t.ok(&["dump"]);
    assert!(
        dump.contains(
            "supervisor:       not running\nservices:\n  typo                invalid: unknown key \
             `comand`; the command is missing\n"
        ),
        "{dump}"
    );
    assert!(
        dump.contains(
            "  gateway-extra       invalid: names beginning with `gateway-` are the profiles' \
             gateways: the entry is left out\n"
        ),
        "{dump}"
    );
    assert_start_says_invalid(&t, &config);

    // Under a supervisor: a row per invalid entry, state `invalid`, aligned with the others.
    let _up = t.start_up();
    poll::until_true("ticker up", Duration::from_secs(15), || {
        t.service("ticker")["state"] == "up"
    });
    let table = t.ok(&["service", "status"]);
    let header = table.lines().next().unwrap();
    let column = |name: &str| header.find(name).unwrap();
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{table}"))
    };
    let typo = row("typo");
    assert_eq!(typo.find("invalid"), Some(column("STATE")), "{table}");
    assert_eq!(
        typo.find("unknown key `comand`; the command is missing"),
        Some(column("REASON")),
        "{table}"
    );
    assert!(row("loose").contains("invalid"), "{table}");
    assert!(row("ticker").contains(" up "), "{table}");

    let list = t.ok(&["service", "list"]);
    assert!(
        list.lines()
            .any(|l| l.starts_with("typo ") && l.ends_with("  invalid")),
        "{list}"
    );
    let rows: serde_json::Value =
        serde_json::from_slice(&t.run(&["service", "status", "--json"]).stdout).unwrap();
    let typo = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "typo")
        .expect("typo's row");
    assert_eq!(typo["state"], "invalid");
    assert_eq!(
        typo["reason"],
        "unknown key `comand`; the command is missing"
    );
    assert_eq!(typo["problems"][0]["key"], "comand");
    assert!(
        typo["fix"]
            .as_str()
            .unwrap()
            .starts_with("`comand`: did you mean `command`?"),
        "{typo}"
    );
    // By name too: the supervisor has no such service, the configuration says why.
    let one = t.run(&["service", "status", "loose"]);
    assert_eq!(one.status.code(), Some(0), "{}", render(&one));
    assert!(
        stdout(&one).contains("bad restart policy"),
        "{}",
        render(&one)
    );
    assert_start_says_invalid(&t, &config);

    let dump = t.ok(&["dump"]);
    assert!(
        dump.contains("supervisor:       running\nservices:\n") && dump.contains("  ticker "),
        "{dump}"
    );
    assert!(
        dump.contains("  loose               invalid: bad restart policy \"sometimes\"\n"),
        "{dump}"
    );
    assert_eq!(dump.matches("services:").count(), 1, "{dump}");
}

#[test]
fn a_valid_services_section_is_a_passing_doctor_row() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(
        t.root().join("config.yaml"),
        "services:\n  ticker:\n    command: 'exec sleep 60'\n",
    )
    .unwrap();
    let text = stdout(&t.run(&["doctor"]));
    assert!(
        text.contains(&format!(
            "✓ `services:` in `{}`: 1 declared, all valid\n",
            t.root().join("config.yaml").display()
        )),
        "{text}"
    );
    assert!(!t.ok(&["dump"]).contains("invalid"));
}

/// A missing `cwd` is named as the cause, in status and in the failed start, not blamed on
/// `/bin/sh`.
#[test]
fn a_missing_cwd_is_the_reason_a_service_did_not_start() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let missing = t.dir.path().join("no-such-dir").display().to_string();
    fs::write(
        t.root().join("config.yaml"),
        format!(
            "services:\n  nodir:\n    command: 'exec sleep 60'\n    cwd: {missing}\n    restart: never\n  nocmd:\n    command: [hermes-test-no-such-command]\n    restart: never\n"
        ),
    )
    .unwrap();
    let _up = t.start_up();
    let cause = format!(
        "cannot change to directory `{missing}` (service `nodir`): no such file or directory"
    );
    poll::until_true("nodir failed", Duration::from_secs(15), || {
        t.service("nodir")["state"] == "failed"
    });
    assert_eq!(t.service("nodir")["reason"], cause.as_str());
    let table = t.ok(&["service", "status"]);
    assert!(table.contains(&cause), "{table}");
    assert!(!table.contains("/bin/sh"), "{table}");
    assert_eq!(
        t.service("nocmd")["reason"],
        "cannot start: `hermes-test-no-such-command`: command not found"
    );

    let start = t.run(&["service", "start", "nodir"]);
    assert_eq!(start.status.code(), Some(1), "{}", render(&start));
    assert!(
        stderr(&start).contains(&format!("error: `nodir` did not start: {cause}")),
        "{}",
        render(&start)
    );
}
