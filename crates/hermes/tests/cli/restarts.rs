//! Restarts nobody notices, as an operator sees them: `hermes up`, the native gateway in front
//! of a stub upstream, six clients (four plain, two long streams) for the whole run. Repeated
//! `gateway restart`s fail no request and break no stream (the supervisor holds the port, the
//! new gateway is ready before the old one stops accepting, the old one finishes its work);
//! repeated SIGKILLs of the gateway refuse no connection (they wait in the backlog for the
//! next one; only what the dead process had in flight breaks).

use std::fs;
use std::time::Duration;

use crate::load::{Load, StubUpstream, lines};
use crate::util::{TEST_API_KEY, TestContext, free_port};
use hermes_test_support::poll;

const RESTARTS: usize = 5;
const KILLS: usize = 3;

fn gateway_pid(t: &TestContext) -> Option<i64> {
    let row = t.service("gateway-default");
    (row["state"] == "up")
        .then(|| row["pid"].as_i64())
        .flatten()
}

#[test]
fn restarts_and_crashes_of_the_native_gateway_lose_nothing() {
    let t = TestContext::new();
    let upstream = StubUpstream::start();
    let port = free_port();
    fs::create_dir_all(t.root()).unwrap();
    fs::write(
        t.root().join("config.yaml"),
        format!(
            "model:\n  default: stub\n  base_url: http://127.0.0.1:{}/v1\n  api_key: upstream-key\n",
            upstream.port
        ),
    )
    .unwrap();
    fs::write(
        t.root().join(".env"),
        format!("API_SERVER_PORT={port}\nAPI_SERVER_KEY={TEST_API_KEY}\n"),
    )
    .unwrap();
    let _up = t.start_up();
    poll::until_true("gateway-default up", Duration::from_secs(30), || {
        gateway_pid(&t).is_some()
    });
    let row = t.service("gateway-default");
    assert_eq!(
        row["listening"],
        serde_json::json!([format!("127.0.0.1:{port}")]),
        "the supervisor holds the API port: {row}"
    );

    // Restarts under load.
    let load = Load::start(port, TEST_API_KEY, 4, 2);
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..RESTARTS {
        let before = gateway_pid(&t).unwrap();
        let said = t.ok(&["gateway", "restart"]);
        let after = gateway_pid(&t).unwrap();
        assert_ne!(before, after, "{said}");
        assert!(
            said.contains(&format!("handed over from pid {before} to pid {after}")),
            "{said}"
        );
        assert!(said.contains("the port stayed open"), "{said}");
        std::thread::sleep(Duration::from_millis(700));
    }
    let tally = load.finish();
    eprintln!(
        "{RESTARTS} restarts: {} plain and {} streams answered, {} failed",
        tally.plain_ok,
        tally.streams_ok,
        tally.failures.len()
    );
    assert!(
        tally.failures.is_empty(),
        "{} of {} requests failed across {RESTARTS} restarts:{}",
        tally.failures.len(),
        tally.plain_ok + tally.streams_ok + tally.failures.len(),
        lines(&tally.failures.iter().collect::<Vec<_>>())
    );
    assert!(tally.streams_ok >= 4 && tally.plain_ok >= 50, "{tally:?}");

    // Crashes under load: nothing refused.
    let load = Load::start(port, TEST_API_KEY, 4, 2);
    for _ in 0..KILLS {
        std::thread::sleep(Duration::from_millis(700));
        let pid = gateway_pid(&t).unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        poll::until_true("the next gateway", Duration::from_secs(30), || {
            gateway_pid(&t).is_some_and(|p| p != pid)
        });
    }
    std::thread::sleep(Duration::from_millis(500));
    let tally = load.finish();
    eprintln!(
        "{KILLS} SIGKILLs: {} plain and {} streams answered, {} failed ({} refused)",
        tally.plain_ok,
        tally.streams_ok,
        tally.failures.len(),
        tally.failures.iter().filter(|f| f.refused).count()
    );
    let refused: Vec<_> = tally.failures.iter().filter(|f| f.refused).collect();
    assert!(
        refused.is_empty(),
        "refused across {KILLS} SIGKILLs: {refused:#?}"
    );
    // Only what each dead process had in flight may break: at most the six clients' requests.
    assert!(
        tally.failures.len() <= 6 * KILLS,
        "more broke than was in flight:{}",
        lines(&tally.failures.iter().collect::<Vec<_>>())
    );
}
