//! Boot stage 7 end to end: profile gateways become services (started iff their state says
//! `running`), operators' start/stop land in `gateway_state.json` as `desired_state`, and the
//! main program's exit stops them.

use std::fs;
use std::process::Stdio;
use std::time::{Duration, Instant};

use hermes_supervisor::{Client, StateName};

use crate::util::*;

#[test]
fn gateways_are_reconciled_controlled_and_stopped_with_the_main_program() {
    let sb = Sandbox::new();
    let home = sb.home();
    let work = home.join("profiles/work");
    fs::create_dir_all(&work).unwrap();
    let gateway = "gateway:\n  command: \"echo gw-up; exec sleep 60\"\n";
    fs::write(home.join("SOUL.md"), "soul").unwrap();
    fs::write(home.join("config.yaml"), gateway).unwrap();
    fs::write(
        home.join("gateway_state.json"),
        r#"{"gateway_state":"running","kept":true}"#,
    )
    .unwrap();
    fs::write(home.join("gateway.pid"), "4242").unwrap();
    fs::write(work.join("SOUL.md"), "soul").unwrap();
    fs::write(
        work.join("config.yaml"),
        "gateway:\n  command: [\"sleep\", \"60\"]\n",
    )
    .unwrap();
    fs::write(
        work.join("gateway_state.json"),
        r#"{"gateway_state":"stopped"}"#,
    )
    .unwrap();

    let mut child = sb
        .init(&[
            "sh",
            "-c",
            "while [ ! -e stop-now ]; do sleep 0.05; done; exit 5",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut client = connect_supervisor(&sb.runtime());
    let state = |client: &mut Client, name: &str| {
        client
            .status(Some(name))
            .unwrap()
            .into_iter()
            .next()
            .map(|r| r.state)
    };
    // Registered, switched on, waiting for an operator's start: `down`, not `disabled`.
    assert_eq!(state(&mut client, "gateway-work"), Some(StateName::Down));
    assert!(
        !home.join("gateway.pid").exists(),
        "the stale pid file is removed"
    );
    let log = home.join("logs/gateways/default/current");
    wait_for("the default gateway's output", || {
        fs::read_to_string(&log).is_ok_and(|t| t.contains("gw-up"))
    });
    assert!(matches!(
        state(&mut client, "gateway-default"),
        Some(StateName::Up | StateName::Starting)
    ));

    client.start("gateway-work").unwrap();
    client.stop("gateway-default").unwrap();
    let read = |p: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&fs::read_to_string(p).unwrap()).unwrap()
    };
    let root_state = read(&home.join("gateway_state.json"));
    assert_eq!(root_state["desired_state"], "stopped");
    assert_eq!(root_state["kept"], true, "other keys survive");
    assert_eq!(
        read(&work.join("gateway_state.json"))["desired_state"],
        "running"
    );
    wait_for("gateway-work up", || {
        matches!(
            state(&mut client, "gateway-work"),
            Some(StateName::Up | StateName::Starting)
        )
    });
    let pid = client.status(Some("gateway-work")).unwrap()[0].pid.unwrap();
    drop(client);

    fs::write(sb.path().join("stop-now"), "").unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < TIMEOUT, "init did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(5), "the main program's code");
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the gateway was stopped before init exited"
    );
    let boot = fs::read_to_string(home.join("logs/container-boot.log")).unwrap();
    assert!(
        boot.contains(" profile=default prior_state=running action=started"),
        "{boot}"
    );
    assert!(
        boot.contains(" profile=work prior_state=stopped action=registered"),
        "{boot}"
    );
}

/// `gateway run` as the container's CMD: the main program hands the gateway to the
/// supervisor, whose console already shows the gateway's lines, so it does not follow the log
/// as well — each line appears once in `docker logs`.
#[test]
fn gateway_run_as_the_main_program_shows_each_line_once() {
    let sb = Sandbox::new();
    let home = sb.home();
    fs::create_dir_all(&home).unwrap();
    fs::write(home.join("SOUL.md"), "soul").unwrap();
    fs::write(
        home.join("config.yaml"),
        "gateway:\n  command: \"echo gw-line-once; exec sleep 60\"\n",
    )
    .unwrap();
    let out_path = sb.path().join("console");
    let err_path = sb.path().join("console-err");
    let mut child = sb
        .init(&["gateway", "run"])
        .stdout(fs::File::create(&out_path).unwrap())
        .stderr(fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    wait_for("the hand-over and the gateway's line", || {
        fs::read_to_string(&err_path).is_ok_and(|t| t.contains("whose output shows its log"))
            && fs::read_to_string(&out_path).is_ok_and(|t| t.contains("gw-line-once"))
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < TIMEOUT, "init did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let console = fs::read_to_string(&out_path).unwrap();
    assert_eq!(console.matches("gw-line-once").count(), 1, "{console}");
}
