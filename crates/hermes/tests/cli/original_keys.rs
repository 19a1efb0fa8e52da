//! The API server's key and port on a volume the original configured with its own commands
//! (`hermes config set API_SERVER_KEY …` writes them at the top level of `config.yaml`):
//! hermes-agent 0.19.0 (PyPI) and 0.20.1 (the fixture). Our first command seeds no key that
//! would shadow the operator's, the native gateway takes it — alone and multiplexed —,
//! `gateway status` shows the bound address and where the key is set, and `doctor` names a
//! key another place shadows. Opt-in: `HERMES_TEST_PYPI=1` (CI runs them).

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use hermes_test_support::{OriginalAgent, poll};
use serde_json::Value;

use crate::migrate::original;
use crate::util::{TestContext, free_port};

const KEY: &str = "operators-own-key-0123456789abcdef";
const WORK_KEY: &str = "works-own-key-0123456789abcdef";

/// `GET path` with `key`; the whole response (empty while nothing answers).
fn get(port: u16, path: &str, key: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {key}\r\n\
         Connection: close\r\n\r\n"
    );
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

fn keys_carry_over(agent: &OriginalAgent) {
    let t = TestContext::new();
    fs::create_dir_all(t.home()).unwrap();
    let (port, work_port) = (free_port(), free_port());
    original(&t, agent, &["config", "set", "API_SERVER_KEY", KEY]);
    original(
        &t,
        agent,
        &["config", "set", "API_SERVER_PORT", &port.to_string()],
    );
    original(&t, agent, &["profile", "create", "work"]);
    for (k, v) in [
        ("API_SERVER_KEY", WORK_KEY.to_string()),
        ("API_SERVER_PORT", work_port.to_string()),
    ] {
        original(&t, agent, &["-p", "work", "config", "set", k, &v]);
    }

    let mut up = t.start_up();
    t.ok(&["-p", "work", "gateway", "start"]);
    for (port, key, profile) in [(port, KEY, "default"), (work_port, WORK_KEY, "work")] {
        poll::until_true(
            &format!("{profile}'s gateway on {port}"),
            Duration::from_secs(60),
            || get(port, "/health", key).starts_with("HTTP/1.1 200"),
        );
        let models = get(port, "/v1/models", key);
        assert!(models.starts_with("HTTP/1.1 200"), "{profile}: {models}");
        let wrong = get(port, "/v1/models", "someone-elses-key-0123456789");
        assert!(wrong.starts_with("HTTP/1.1 401"), "{profile}: {wrong}");
    }
    for env in [t.root().join(".env"), t.root().join("profiles/work/.env")] {
        let text = fs::read_to_string(&env).unwrap_or_default();
        assert!(
            !text.lines().any(|l| l.starts_with("API_SERVER_KEY=")),
            "nothing seeded to shadow the operator's key in {}: {text}",
            env.display()
        );
    }
    let rows: Value = serde_json::from_str(&t.ok(&["gateway", "status", "--json"])).unwrap();
    for (row, port) in rows.as_array().unwrap().iter().zip([port, work_port]) {
        assert_eq!(
            row["address"],
            format!("http://127.0.0.1:{port}"),
            "{row:#}"
        );
        assert_eq!(
            row["key_source"], "the top level of `config.yaml`",
            "{row:#}"
        );
    }
    // The status view (`service status --json`, the dashboard's `/api/status`) says the same.
    let rows: Value = serde_json::from_str(&t.ok(&["service", "status", "--json"])).unwrap();
    for (service, port) in [("gateway-default", port), ("gateway-work", work_port)] {
        let row = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == service)
            .unwrap();
        assert_eq!(
            (&row["port"], &row["engine"]),
            (&Value::from(port), &Value::from("native")),
            "{row:#}"
        );
        assert_eq!(
            row["key_source"], "the top level of `config.yaml`",
            "{row:#}"
        );
    }
    assert_eq!(up.stop(), Some(0));

    // Multiplexed: the default profile's gateway serves `work` with work's own key.
    t.ok(&["config", "set", "gateway.multiplex_profiles", "true"]);
    let mut up = t.start_up();
    poll::until_true("the multiplexing gateway", Duration::from_secs(60), || {
        get(port, "/health", KEY).starts_with("HTTP/1.1 200")
    });
    let work = get(port, "/p/work/v1/models", WORK_KEY);
    assert!(work.starts_with("HTTP/1.1 200"), "{work}");
    let crossed = get(port, "/p/work/v1/models", KEY);
    assert!(crossed.starts_with("HTTP/1.1 401"), "{crossed}");
    assert_eq!(up.stop(), Some(0));

    // A different key added to `.env` wins, and doctor names both places, never the keys.
    fs::write(
        t.root().join(".env"),
        "API_SERVER_KEY=added-later-0123456789abcdef\n",
    )
    .unwrap();
    let out = t.run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("the API server's key in `.env` is in force; the different one in the top level of `config.yaml` is not used"),
        "{text}"
    );
    assert!(
        !text.contains(KEY) && !text.contains("added-later"),
        "{text}"
    );
}

#[test]
fn keys_the_0_19_original_set_keep_working() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    keys_carry_over(&agent);
}

#[test]
fn keys_the_0_20_original_set_keep_working() {
    let Some(agent) = hermes_test_support::fixture_agent() else {
        return;
    };
    keys_carry_over(&agent);
}
