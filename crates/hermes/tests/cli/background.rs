//! `hermes up -d` and `hermes down`: the supervisor in the background, as a new user on a
//! machine runs it (README), and `hermes up --unit` for the machine's own init.

use std::time::Duration;

use crate::util::TestContext;
use hermes_test_support::poll;

/// Whether `pid` runs (a zombie no longer does: whoever adopted it reaps it later).
pub(crate) fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

#[test]
fn up_d_returns_with_the_supervisor_running_and_down_stops_everything() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    t.free_ports(&[]);

    // Nothing runs yet: `down` has nothing to do, and says so.
    let out = t.run(&["down"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to stop"));

    let (mut guard, _) = t.up_detached(&[]);
    let pid = guard.pid();
    // It returned, and the supervisor answers: its gateway comes up.
    assert!(alive(pid));
    poll::until_true("the default gateway up", Duration::from_secs(30), || {
        t.service("gateway-default")["state"] == "up"
    });
    // In a session of its own: a closed terminal does not stop it.
    assert_eq!(
        nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid))).unwrap(),
        nix::unistd::Pid::from_raw(pid)
    );
    let log = std::fs::read_to_string(t.root().join("logs/up.log")).unwrap();
    assert!(log.contains("hermes up: supervising"), "{log}");

    // A second one is refused, naming the first.
    let again = t.run(&["up", "-d"]);
    assert_eq!(again.status.code(), Some(1));
    let refused = String::from_utf8_lossy(&again.stderr);
    assert!(refused.contains("already runs for"), "{refused}");
    assert!(refused.contains(&format!("(pid {pid})")), "{refused}");

    let out = t.run(&["down"]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    assert!(said.contains("every service has stopped"), "{said}");
    assert!(!alive(pid), "down returns once the supervisor is gone");
    guard.stopped();
    assert!(
        !t.run(&["service", "list"]).status.success(),
        "nothing answers"
    );
    let log = std::fs::read_to_string(t.root().join("logs/up.log")).unwrap();
    assert!(log.contains("every service has stopped; done"), "{log}");
}

#[test]
fn up_d_that_cannot_start_says_why_from_its_log() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    std::fs::write(t.root().join("config.yaml"), "model: [unclosed\n").unwrap();
    let out = t.run(&["up", "-d"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("exited") && said.contains("before it was running"),
        "{said}"
    );
    assert!(
        said.contains("config.yaml"),
        "the log's reason is shown: {said}"
    );
}

#[test]
fn up_unit_runs_hermes_up_for_this_volume() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    let unit = t.ok(&["up", "--unit"]);
    let exe = env!("CARGO_BIN_EXE_hermes");
    assert!(unit.contains(&format!("ExecStart={exe} up\n")), "{unit}");
    assert!(
        unit.contains(&format!("Environment=HERMES_HOME={}\n", t.root().display())),
        "{unit}"
    );
    assert!(unit.contains("KillMode=mixed\n") && unit.contains("RestartPreventExitStatus=78\n"));
    let without = t.ok(&["up", "--unit", "--no-dashboard"]);
    assert!(without.contains(" up --no-dashboard\n"), "{without}");
}
