//! Loops that must not run hot: a service that always asks for a restart (exit 75).

mod common;

use std::time::Duration;

use common::Harness;
use hermes_supervisor::StateName;

#[test]
fn a_service_that_always_asks_for_a_restart_backs_off_into_a_crash_loop() {
    let h = Harness::start(
        r#"
services:
  again:
    command: "echo x >> $DIR/starts; exit 75"
"#,
        &[],
    );
    h.wait_for("the first start", || !h.read("starts").is_empty());
    // A fixed observation window: what is measured is how many starts fit in it.
    std::thread::sleep(Duration::from_secs(3));
    let starts = h.read("starts").lines().count();
    assert!(starts < 20, "{starts} starts in 3 s");
    h.wait_for("the crash-loop reason", || {
        h.status("again")
            .is_ok_and(|s| s.state == StateName::Backoff && s.reason.contains("crash loop"))
    });
    let s = h.status("again").unwrap();
    assert!(s.reason.contains("exit 75"), "{}", s.reason);
}

#[test]
fn an_immediate_retry_reads_retrying_now() {
    let h = Harness::start(
        r#"
services:
  settled:
    command: "sleep 0.3; exit 1"
"#,
        &["--settle-ms", "100"],
    );
    h.wait_for("the retry note", || {
        h.stdout()
            .contains("[settled] [hermes] exited with code 1; retrying")
    });
    let out = h.stdout();
    assert!(out.contains("exited with code 1; retrying now"), "{out}");
    assert!(!out.contains("retrying in now"), "{out}");
}
