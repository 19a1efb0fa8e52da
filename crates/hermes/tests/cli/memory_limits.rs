//! Memory limits under `hermes up`, with real processes: a declared service that allocates
//! without bound is killed at its `memory_max` and restarted with the reason in `service
//! status`, while its neighbours (the other services, the dashboard, the gateway) keep running;
//! a gateway's limit comes from its profile's `gateway.memory_max` or the environment default.

use std::fs;
use std::time::Duration;

use crate::util::TestContext;
use hermes_test_support::poll;

/// Allocates (and touches) 8 MiB every 50 ms, forever.
const LEAK: &str = "import time\nheld = []\nwhile True:\n    held.append(b'x' * (8 << 20))\n    time.sleep(0.05)\n";

#[test]
fn a_leaking_service_is_restarted_at_its_limit_and_its_neighbours_are_not() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let leak = t.root().join("leak.py");
    fs::write(&leak, LEAK).unwrap();
    fs::write(
        t.root().join("config.yaml"),
        format!(
            "services:\n  leaky:\n    command: [python3, '{}']\n    memory_max: 64MiB\n  \
             calm:\n    command: 'exec sleep 600'\n    memory_max: 16MiB\n",
            leak.display()
        ),
    )
    .unwrap();
    let _up = t.start_up();
    poll::until_true("calm up", Duration::from_secs(15), || {
        t.service("calm")["state"] == "up"
    });
    let neighbours: Vec<(String, serde_json::Value)> = ["calm", "dashboard"]
        .iter()
        .map(|n| (n.to_string(), t.service(n)["pid"].clone()))
        .collect();
    poll::until_true("leaky restarted twice", Duration::from_secs(30), || {
        t.service("leaky")["restarts"].as_u64() >= Some(2)
    });
    let leaky = t.service("leaky");
    let failure = leaky["last_failure"].as_str().unwrap_or_default();
    assert!(
        failure.starts_with("memory limit: ") && failure.ends_with("> 64 MiB"),
        "{leaky}"
    );
    assert_eq!(leaky["memory_max"]["bytes"], 64 << 20, "{leaky}");
    let table = t.ok(&["service", "status"]);
    let header = table.lines().next().unwrap();
    assert!(
        header.contains("MEMORY") && header.contains("CPU"),
        "{table}"
    );
    let row = table.lines().find(|l| l.starts_with("leaky ")).unwrap();
    assert!(
        row.contains("memory limit: "),
        "the reason is in the table:\n{table}"
    );
    let calm_row = table.lines().find(|l| l.starts_with("calm ")).unwrap();
    assert!(
        calm_row.contains("/16 MiB"),
        "its usage against its limit:\n{table}"
    );
    for (name, pid) in neighbours {
        let now = t.service(&name);
        assert_eq!(now["pid"], pid, "{name} kept its process: {now}");
        assert_eq!(now["restarts"], 0, "{name} never restarted: {now}");
    }
}

#[test]
fn a_gateways_limit_is_its_profiles_or_the_environments() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work"]);
    t.ok(&["profile", "create", "typo"]);
    fs::write(
        t.root().join("config.yaml"),
        "gateway:\n  memory_max: 512MiB\n",
    )
    .unwrap();
    let typo = t.root().join("profiles/typo/config.yaml");
    fs::write(&typo, "gateway:\n  memory_max: lots\n").unwrap();
    let mut up = t
        .cmd(&["up"])
        .env("HERMES_GATEWAY_MEMORY_MAX", "1G")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map(crate::util::Running)
        .unwrap();
    poll::until_true("the supervisor", Duration::from_secs(30), || {
        t.run(&["service", "list"]).status.success()
    });
    let limit = |service: &str| t.service(service)["memory_max"]["bytes"].clone();
    assert_eq!(limit("gateway-default"), 512u64 << 20, "the profile's own");
    assert_eq!(
        limit("gateway-work"),
        1u64 << 30,
        "the environment's default"
    );
    assert!(limit("gateway-typo").is_null(), "a bad value is no limit");
    let detailed: serde_json::Value =
        serde_json::from_str(&t.ok(&["gateway", "status", "--json"])).unwrap();
    let default = detailed
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["profile"] == "default"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(default["memory_max"]["bytes"], 512u64 << 20, "{detailed}");
    let doctor = t.run(&["-p", "typo", "doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("gateway memory limit: `gateway.memory_max`: `lots` is not a size"),
        "doctor flags it:\n{text}"
    );
    assert!(t.ok(&["doctor"]).contains("gateway memory limit: 512 MiB"));
    up.stop();
    let stderr = up.stderr();
    assert!(
        stderr.contains("profile `typo`: `gateway.memory_max`: `lots` is not a size"),
        "{stderr}"
    );
}
