//! Multiplexing from the command line: the switch is read as the original reads it, a named
//! profile's gateway refuses to run beside the multiplexing one, and `gateway status` says who
//! serves whom. (The boot's side — only `gateway-default` starts — is in the init tests.)

use std::fs;

use crate::util::{TestContext, render};

#[test]
fn a_named_gateway_never_runs_beside_the_multiplexing_one() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let out = t
        .cmd(&["-p", "work", "gateway", "run", "--no-supervise"])
        .env("GATEWAY_MULTIPLEX_PROFILES", "yes")
        .output()
        .unwrap();
    let text = render(&out);
    assert_eq!(out.status.code(), Some(78), "{text}");
    assert!(
        text.contains(
            "error: profile `work` is served by the default profile's gateway (multiplexing is \
             on, from environment): not starting a second gateway for it"
        ),
        "{text}"
    );
    assert!(text.contains("/p/work/v1/"), "{text}");

    // From config.yaml, and the environment's `0` wins over it.
    fs::write(
        t.root().join("config.yaml"),
        "gateway:\n  multiplex_profiles: true\n",
    )
    .unwrap();
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&t.ok(&["gateway", "status", "--json"])).unwrap();
    assert_eq!(rows[0]["served_by"], serde_json::Value::Null, "{rows:?}");
    assert_eq!(rows[1]["served_by"], "gateway-default", "{rows:?}");
    assert_eq!(rows[0]["multiplex"]["mode"], "multiplexed");
    assert_eq!(rows[0]["multiplex"]["source"], "config.yaml");
    assert_eq!(
        rows[0]["multiplex"]["serves"],
        serde_json::json!(["default", "work"])
    );
    let human = t.ok(&["gateway", "status"]);
    assert!(human.contains("served by gateway-default"), "{human}");
    assert!(
        human.contains(
            "multiplexed (from config.yaml, native engine): gateway-default serves default, work"
        ),
        "{human}"
    );

    let off = t
        .cmd(&["gateway", "status", "--json"])
        .env("GATEWAY_MULTIPLEX_PROFILES", "0")
        .output()
        .unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&off.stdout).unwrap();
    assert_eq!(rows[1]["served_by"], serde_json::Value::Null, "{rows:?}");
    assert_eq!(rows[1]["multiplex"]["mode"], "standalone");

    // A sticky `active_profile` does not make `gateway run` a second owner: it runs the
    // default profile's gateway (here the agent engine without an agent: refused for that
    // reason instead, which shows which profile it chose).
    t.ok(&["profile", "use", "work"]);
    fs::write(
        t.root().join("config.yaml"),
        "gateway:\n  multiplex_profiles: true\n  engine: agent\n",
    )
    .unwrap();
    let out = t.run(&["gateway", "run", "--no-supervise"]);
    let text = render(&out);
    assert!(
        text.contains("`active_profile` selects `work`, but multiplexing is on: running the default profile's gateway"),
        "{text}"
    );
    assert!(!text.contains("is served by the default"), "{text}");
}
