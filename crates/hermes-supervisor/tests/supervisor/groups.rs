//! What a service leaves behind: helpers in its process group must not outlive it — not when
//! it crashes (they would hold its port, and its output pipes), and not when the supervisor
//! itself is SIGKILLed (the next supervisor on the same runtime directory stops them).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt;

use common::{Harness, alive, fd_count};
use hermes_supervisor::StateName;

fn pids(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

#[test]
fn a_crashed_services_helpers_are_killed_before_it_restarts() {
    // Each run first records which helpers of earlier runs are still alive (they must all be
    // gone by now), then leaves a helper in its process group — holding the service's
    // stdout and stderr pipes, as a real helper holds a port — and crashes.
    let h = Harness::start(
        r#"
services:
  crasher:
    command: "for p in $(cat $DIR/helpers 2>/dev/null); do [ -e /proc/$p ] && echo $p >> $DIR/survivors; done; sleep 600 & echo $! >> $DIR/helpers; exit 1"
"#,
        &["--backoff-ms", "20"],
    );
    let runs = || pids(&h.read("helpers")).len();
    h.wait_for("two runs", || runs() >= 2);
    let fds = fd_count(h.pid());
    h.wait_for("six runs", || runs() >= 6);
    let survivors = h.read("survivors");
    assert!(
        survivors.is_empty(),
        "helpers of earlier runs were alive when the service restarted: {survivors}"
    );
    // Every helper but the newest is dead (a helper's death does not wait for a reaper).
    let helpers = pids(&h.read("helpers"));
    for p in &helpers[..helpers.len() - 1] {
        h.wait_for(&format!("helper {p} to die"), || !alive(*p));
    }
    // The helpers held the output pipes: with them gone, nothing accumulates. (A count taken
    // while the supervisor reads `/proc` after an exit holds that pass's descriptors for a
    // moment: a leak is a count that never comes back down.)
    h.wait_for(
        &format!("the supervisor's descriptors back to at most {fds} + 2 after four restarts"),
        || fd_count(h.pid()) <= fds + 2,
    );
}

#[test]
fn a_new_supervisor_stops_what_a_killed_one_left_behind() {
    let mut h = Harness::start(
        r#"
services:
  server:
    command: "sleep 600 & echo $! >> $DIR/helpers; exec sleep 600"
"#,
        &["--settle-ms", "100"],
    );
    let leader = h.wait_state("server", StateName::Up).pid.expect("a pid");
    h.wait_for("the helper", || !pids(&h.read("helpers")).is_empty());
    let helper = pids(&h.read("helpers"))[0];

    // SIGKILL: no chance to clean up. The service's leader gets SIGTERM from the kernel
    // (parent-death signal), but its helper does not.
    let mut old = h.child.take().unwrap();
    old.kill().unwrap();
    old.wait().unwrap();
    h.wait_for("the leader to get its parent-death signal", || {
        !alive(leader)
    });
    assert!(
        alive(helper),
        "precondition: the helper outlives a killed supervisor"
    );

    h.restart();
    h.wait_for(
        &format!("the left-over helper {helper} to be killed"),
        || !alive(helper),
    );
    h.wait_for("the report", || {
        h.stdout().contains("left behind by a previous supervisor")
    });
    // The service itself runs again, with a new helper.
    h.wait_state("server", StateName::Up);
    h.wait_for("a second helper", || pids(&h.read("helpers")).len() == 2);
    let second = pids(&h.read("helpers"))[1];
    assert!(alive(second));
    // The old group's record is gone with it; the new group is recorded.
    let pid = h.status("server").unwrap().pid.expect("a pid");
    let records: Vec<String> = fs::read_dir(h.runtime.join("pgroups"))
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_str()?.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(records, vec![pid.to_string()]);
}

/// A record whose process group id was recycled (its leader's start time does not match) is
/// never acted on: the process now owning that pid lives on.
#[test]
fn a_stale_record_never_kills_a_recycled_pid() {
    let mut h = Harness::start("services: {}\n", &[]);
    let mut bystander = std::process::Command::new("sleep")
        .arg("600")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = bystander.id() as i32;
    let mut sup = h.child.take().unwrap();
    sup.kill().unwrap();
    sup.wait().unwrap();
    let dir = h.runtime.join("pgroups");
    fs::create_dir_all(&dir).unwrap();
    // A record claiming the bystander's group, with a start time that is not its own.
    fs::write(dir.join(pid.to_string()), "start=1 sid=1 service=old\n").unwrap();
    h.restart();
    h.wait_for("the stale record to be removed", || {
        !dir.join(pid.to_string()).exists()
    });
    assert!(
        alive(pid),
        "a process that merely reuses the pid was killed"
    );
    bystander.kill().unwrap();
    bystander.wait().unwrap();
}
