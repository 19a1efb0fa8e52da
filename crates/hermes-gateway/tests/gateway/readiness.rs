//! `/health/detailed`'s `readiness` document, the original's since 0.20: each check's status
//! as a real gateway on 127.0.0.1:0 reports it — healthy, no model, an upstream that failed, a
//! refused config edit, a store removed under it, chats in flight, and a volume over 90 %
//! (a tmpfs filled up, as root) — and the key it needs.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use crate::support::{Running, Step, Upstream, client, settings, start};
use hermes_gateway::ShutdownRequest;
use hermes_gateway::source::SettingsSource;
use hermes_home::Home;
use serde_json::{Value, json};

const AUTH: &str = "Bearer gw-key";
/// The key of the gateway read from its files (a key there must be strong enough).
const FILE_KEY: &str = "readiness-test-key-0123456789";

/// `/health/detailed` with the key: (status, body).
async fn detailed(gw: &Running, auth: Option<&str>) -> (u16, Value) {
    let mut req = client().get(gw.url("/health/detailed"));
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn readiness(gw: &Running) -> Value {
    readiness_as(gw, AUTH).await
}

/// [`readiness`] with this `Authorization`.
async fn readiness_as(gw: &Running, auth: &str) -> Value {
    let (status, body) = detailed(gw, Some(auth)).await;
    assert_eq!(status, 200, "{body}");
    // The top-level status is the document's rollup, as the original's.
    assert_eq!(body["status"], body["readiness"]["status"], "{body}");
    body["readiness"].clone()
}

/// Each check's status, by name.
fn statuses(r: &Value) -> Vec<(String, String)> {
    r["checks"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v["status"].as_str().unwrap().to_string()))
        .collect()
}

/// The checks not `ok`, by name.
fn degraded(r: &Value) -> Vec<String> {
    statuses(r)
        .into_iter()
        .filter(|(_, s)| s != "ok")
        .map(|(k, _)| k)
        .collect()
}

async fn chat(gw: &Running, text: &str) -> u16 {
    client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", AUTH)
        .json(&json!({"messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_healthy_gateway_reports_every_check_ok_with_the_originals_keys() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "ready", Some(&up))).await;

    let (status, body) = detailed(&gw, None).await;
    assert_eq!(status, 401, "the readiness document needs the key: {body}");
    let (status, _) = detailed(&gw, Some("Bearer wrong")).await;
    assert_eq!(status, 401);

    let r = readiness(&gw).await;
    let names: Vec<String> = statuses(&r).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        names,
        [
            "state_db",
            "config",
            "model",
            "disk",
            "gateway",
            "background_queues"
        ]
    );
    // The disk of a test machine may be full; everything else must be ok.
    let disk_full = r["checks"]["disk"]["status"] == "degraded";
    let expected: Vec<String> = if disk_full {
        vec!["disk".into()]
    } else {
        vec![]
    };
    assert_eq!(degraded(&r), expected, "{r}");
    assert_eq!(r["status"], if disk_full { "degraded" } else { "ok" });
    let checks = &r["checks"];
    assert_eq!(checks["config"]["detail"], "using defaults", "{r}");
    assert_eq!(
        checks["gateway"],
        json!({"status": "ok", "state": "running", "connected_platforms": 1, "platforms": 1})
    );
    let used = checks["disk"]["used_percent"].as_f64().unwrap();
    assert!((0.0..=100.0).contains(&used), "{r}");
    assert!(checks["disk"]["free_bytes"].as_u64().is_some(), "{r}");
    assert_eq!(
        checks["background_queues"],
        json!({"status": "ok", "active_api_runs": 0, "process_completions": 0, "active_delegations": 0})
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn the_model_check_follows_the_model_and_the_last_upstream_call() {
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "ready", None)).await;
    let r = readiness(&gw).await;
    assert_eq!(r["checks"]["model"]["status"], "degraded", "{r}");
    assert_eq!(r["checks"]["model"]["detail"], "model_not_configured");
    assert_eq!(r["status"], "degraded");
    gw.stop(ShutdownRequest::Stop).await.unwrap();

    let up = Upstream::start().await;
    let gw = start(settings(home.path(), "ready", Some(&up))).await;
    up.script(&[Step::Status(401)]);
    assert_eq!(chat(&gw, "refused").await, 502);
    let r = readiness(&gw).await;
    assert_eq!(r["checks"]["model"]["status"], "degraded", "{r}");
    assert_eq!(r["checks"]["model"]["detail"], "last_upstream_call_failed");
    assert_eq!(chat(&gw, "back").await, 200);
    assert_eq!(readiness(&gw).await["checks"]["model"]["status"], "ok");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn chats_in_flight_are_the_active_api_runs() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let gw = start(settings(home.path(), "ready", Some(&up))).await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    up.script(&[Step::Gate(Arc::clone(&gate)), Step::Gate(Arc::clone(&gate))]);
    let url = gw.url("/v1/chat/completions");
    let held: Vec<_> = (0..2)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move {
                client()
                    .post(url)
                    .header("authorization", AUTH)
                    .json(&json!({"messages": [{"role": "user", "content": format!("held {i}")}]}))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let runs = hermes_test_support::poll::until_async(
        "two chats in flight",
        std::time::Duration::from_secs(10),
        async || {
            let r = readiness(&gw).await;
            let n = r["checks"]["background_queues"]["active_api_runs"].clone();
            (n == 2).then_some(r)
        },
    )
    .await;
    assert_eq!(runs["checks"]["background_queues"]["status"], "ok");
    gate.add_permits(2);
    for h in held {
        assert_eq!(h.await.unwrap(), 200);
    }
    assert_eq!(
        readiness(&gw).await["checks"]["background_queues"]["active_api_runs"],
        0
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn a_refused_edit_and_a_store_removed_under_the_gateway_are_degraded() {
    let up = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    hermes_home::layout::ensure_skeleton(dir.path(), true, &hermes_home::seeds::KeySeed::Generate)
        .unwrap();
    fs::write(
        dir.path().join(".env"),
        format!("API_SERVER_PORT=0\nAPI_SERVER_KEY={FILE_KEY}\n"),
    )
    .unwrap();
    let config = format!(
        "model:\n  default: m\n  provider: custom\n  base_url: {}\n  api_key: k\n",
        up.base_url()
    );
    fs::write(dir.path().join("config.yaml"), &config).unwrap();
    fs::write(dir.path().join("SOUL.md"), "soul").unwrap();
    let home = Home::select(dir.path().to_path_buf(), None).unwrap();
    let profile = SettingsSource::new(home, Vec::new()).read().1.unwrap();
    let gw = start(profile).await;
    let file_auth = format!("Bearer {FILE_KEY}");

    let r = readiness_as(&gw, &file_auth).await;
    assert_eq!(degraded(&r), Vec::<String>::new(), "{r}");
    assert!(r["checks"]["config"].get("detail").is_none(), "{r}");

    fs::write(dir.path().join("config.yaml"), "model: [unclosed\n").unwrap();
    let r = readiness_as(&gw, &file_auth).await;
    assert_eq!(degraded(&r), ["config"], "{r}");
    assert_eq!(r["status"], "degraded");
    let detail = r["checks"]["config"]["detail"].as_str().unwrap();
    assert!(detail.starts_with("invalid config"), "{detail}");
    // Status words only: the YAML error (which names the file) stays in `config_error`.
    assert!(!r.to_string().contains("config.yaml"), "{r}");
    fs::write(dir.path().join("config.yaml"), &config).unwrap();
    assert_eq!(
        degraded(&readiness_as(&gw, &file_auth).await),
        Vec::<String>::new()
    );

    remove_store(dir.path());
    let (_, body) = detailed(&gw, Some(&file_auth)).await;
    assert_eq!(
        body["readiness"]["checks"]["state_db"]["status"],
        "degraded"
    );
    assert_eq!(body["readiness"]["checks"]["state_db"]["detail"], "missing");
    assert_eq!(body["session_store"]["reachable"], false, "{body}");
    assert_eq!(body["status"], "degraded");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

/// Removes `state.db` and its side files (the gateway keeps its open connection).
fn remove_store(dir: &Path) {
    for name in ["state.db", "state.db-wal", "state.db-shm"] {
        let _ = fs::remove_file(dir.join(name));
    }
}

#[tokio::test]
async fn a_volume_over_ninety_percent_degrades_the_disk_check() {
    if hermes_test_support::skip_unless_root("mounting a small tmpfs as the profile needs root") {
        return;
    }
    let up = Upstream::start().await;
    let outer = tempfile::tempdir().unwrap();
    let disk = hermes_test_support::disk::SmallDisk::mount(&outer.path().join("disk"), "4m");
    let home = disk.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let gw = start(settings(&home, "ready", Some(&up))).await;

    let r = readiness(&gw).await;
    assert_eq!(r["checks"]["disk"]["status"], "ok", "{r}");
    assert_eq!(r["status"], "ok", "{r}");

    // 4 MiB with 200 KiB left: about 95 % used.
    disk.fill("ballast", 200 * 1024);
    let r = readiness(&gw).await;
    let d = &r["checks"]["disk"];
    assert_eq!(d["status"], "degraded", "{r}");
    assert!(d["used_percent"].as_f64().unwrap() >= 90.0, "{r}");
    assert!(d["free_bytes"].as_u64().unwrap() <= 200 * 1024, "{r}");
    assert_eq!(degraded(&r), ["disk"], "{r}");
    assert_eq!(r["status"], "degraded");

    fs::remove_file(disk.path().join("ballast")).unwrap();
    assert_eq!(readiness(&gw).await["checks"]["disk"]["status"], "ok");
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}
