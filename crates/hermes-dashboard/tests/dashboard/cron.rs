//! The Cron API over real HTTP: a profile's `cron/jobs.json` listed in the original's shape
//! (`?profile=all` included, each job annotated with its profile), one job with its last
//! output, the scheduler's ticker read, bad input refused without touching the file — and
//! pause, resume and trigger made by the real agents (hermes-agent 0.19.0 from PyPI and the
//! 0.20.1 fixture, opt-in with `HERMES_TEST_PYPI=1`, always in CI), checked with the agent's own
//! code afterwards.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::common::{self, Answer, Dashboard, TOKEN_ENV, agent_python, local, token_header};

/// A job record with the fields the agent's `create_job` writes.
fn record(id: &str, name: Option<&str>, enabled: bool, state: &str) -> Value {
    json!({
        "id": id, "name": name, "prompt": "Summarise the overnight alerts",
        "skills": [], "skill": null, "model": null, "provider": null, "base_url": null,
        "script": null,
        "schedule": { "kind": "interval", "minutes": 30, "display": "every 30m" },
        "schedule_display": "every 30m",
        "repeat": { "times": null, "completed": 3 },
        "enabled": enabled, "state": state, "paused_at": null, "paused_reason": null,
        "created_at": "2026-12-01T08:00:00+00:00",
        "next_run_at": "2026-12-03T09:30:00+00:00",
        "last_run_at": "2026-12-03T09:00:00+00:00",
        "last_status": "error", "last_error": "provider timed out",
        "deliver": "local", "origin": null,
        "future_field": { "kept": true },
    })
}

fn jobs_file(profile_dir: &Path, jobs: &[Value]) -> String {
    fs::create_dir_all(profile_dir.join("cron")).unwrap();
    let text = serde_json::to_string_pretty(
        &json!({ "jobs": jobs, "updated_at": "2026-12-03T09:00:01+00:00" }),
    )
    .unwrap();
    fs::write(profile_dir.join("cron/jobs.json"), &text).unwrap();
    text
}

fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let root = home.path();
    fs::create_dir_all(root.join("profiles/work")).unwrap();
    fs::write(root.join("profiles/work/SOUL.md"), "work\n").unwrap();
    jobs_file(
        root,
        &[
            record("a1b2c3d4e5f6", Some("alerts"), true, "scheduled"),
            record("0f0f0f0f0f0f", None, false, "paused"),
        ],
    );
    jobs_file(
        &root.join("profiles/work"),
        &[record("777777777777", Some("standup"), true, "scheduled")],
    );
    let out = root.join("cron/output/a1b2c3d4e5f6");
    fs::create_dir_all(&out).unwrap();
    fs::write(
        out.join("2026-12-03_09-00-00.md"),
        "# alerts\n\nAll quiet.\n",
    )
    .unwrap();
    home
}

fn post(d: &Dashboard, path: &str) -> Answer {
    common::send(d, "POST", path, &local(d), &[token_header()], "")
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_jobs_are_listed_in_the_originals_shape() {
    let d = common::start_in(home(), "127.0.0.1", &TOKEN_ENV);
    let list = common::get_json(&d, "/api/cron/jobs", 200);
    assert_eq!(ids(&list), ["a1b2c3d4e5f6", "0f0f0f0f0f0f"]);
    let first = &list[0];
    assert_eq!(first["profile"], "default");
    assert_eq!(first["profile_name"], "default");
    assert_eq!(first["is_default_profile"], true);
    assert_eq!(first["hermes_home"], json!(d.root()));
    assert_eq!(first["schedule_display"], "every 30m");
    assert_eq!(first["last_error"], "provider timed out");
    assert_eq!(
        first["future_field"],
        json!({ "kept": true }),
        "unknown fields pass through"
    );
    // A job without a name shows the start of its prompt; a disabled one is paused.
    assert_eq!(list[1]["name"], "Summarise the overnight alerts");
    assert_eq!(list[1]["state"], "paused");

    let work = common::get_json(&d, "/api/cron/jobs?profile=work", 200);
    assert_eq!(ids(&work), ["777777777777"]);
    assert_eq!(work[0]["is_default_profile"], false);
    let all = common::get_json(&d, "/api/cron/jobs?profile=all", 200);
    assert_eq!(ids(&all).len(), 3);

    // One job, found in whichever profile has it, with its last output.
    let job = common::get_json(&d, "/api/cron/jobs/777777777777", 200);
    assert_eq!(
        (job["profile"].clone(), job["name"].clone()),
        (json!("work"), json!("standup"))
    );
    assert_eq!(job["last_output"], Value::Null);
    let job = common::get_json(&d, "/api/cron/jobs/alerts?profile=default", 200);
    assert_eq!(job["id"], "a1b2c3d4e5f6", "a name finds the job too");
    assert_eq!(job["last_output"]["file"], "2026-12-03_09-00-00.md");
    assert_eq!(job["last_output"]["excerpt"], "# alerts\n\nAll quiet.");
    common::get_json(&d, "/api/cron/jobs/nope", 404);
    common::get_json(&d, "/api/cron/jobs/777777777777?profile=default", 404);
}

#[test]
fn bad_input_is_refused_and_a_broken_file_says_where() {
    let home = home();
    let work = home.path().join("profiles/work");
    fs::write(work.join("cron/jobs.json"), "{\"jobs\": [\n  {\"id\": \n").unwrap();
    let d = common::start_in(home, "127.0.0.1", &TOKEN_ENV);
    for path in [
        "/api/cron/jobs?profile=..",
        "/api/cron/jobs?profile=a%2Fb",
        "/api/cron/jobs/x?profile=..",
    ] {
        let got = common::get_json(&d, path, 400);
        assert!(got["hint"].is_string(), "{path}: {got}");
    }
    common::get_json(&d, "/api/cron/jobs?profile=ghost", 404);
    let got = common::get_json(&d, "/api/cron/jobs?profile=work", 409);
    let detail = got["detail"].as_str().unwrap();
    assert!(
        detail.contains("jobs.json") && detail.contains("line 3"),
        "{got}"
    );
    // A planted link in place of jobs.json is not followed: refused with why, nothing shown.
    let secret = tempfile::tempdir().unwrap();
    fs::write(
        secret.path().join("jobs.json"),
        r#"{"jobs": [{"id": "secret-job"}]}"#,
    )
    .unwrap();
    fs::create_dir_all(d.root().join("profiles/linked/cron")).unwrap();
    fs::write(d.root().join("profiles/linked/SOUL.md"), "linked\n").unwrap();
    std::os::unix::fs::symlink(
        secret.path().join("jobs.json"),
        d.root().join("profiles/linked/cron/jobs.json"),
    )
    .unwrap();
    let got = common::get_json(&d, "/api/cron/jobs?profile=linked", 500);
    assert!(got["detail"].as_str().unwrap().contains("symlink"), "{got}");
    assert!(!got.to_string().contains("secret-job"), "{got}");
    // `all` leaves the broken profile out, as the original does.
    assert_eq!(
        ids(&common::get_json(&d, "/api/cron/jobs?profile=all", 200)).len(),
        2
    );
}

#[test]
fn without_an_agent_nothing_changes_and_the_page_says_why() {
    let home = home();
    let before = fs::read(home.path().join("cron/jobs.json")).unwrap();
    let mut env = TOKEN_ENV.to_vec();
    env.push(("HERMES_AGENT_CLI", ""));
    let d = common::start_in(home, "127.0.0.1", &env);
    let got = post(&d, "/api/cron/jobs/a1b2c3d4e5f6/pause");
    assert_eq!(got.status, 409, "{}", got.body);
    assert!(
        got.json()["hint"]
            .as_str()
            .unwrap()
            .contains("HERMES_AGENT_CLI"),
        "{}",
        got.body
    );
    // Without the session token: not signed in, refused before anything else.
    let got = common::send(
        &d,
        "POST",
        "/api/cron/jobs/a1b2c3d4e5f6/pause",
        &local(&d),
        &[],
        "",
    );
    assert_eq!(got.status, 401, "{}", got.body);
    assert_eq!(post(&d, "/api/cron/jobs/a1b2c3d4e5f6/delete").status, 404);
    assert_eq!(post(&d, "/api/cron/jobs/nope/pause").status, 404);
    assert_eq!(post(&d, "/api/cron/jobs/%01bad/pause").status, 400);
    assert_eq!(fs::read(d.root().join("cron/jobs.json")).unwrap(), before);
    let status = common::get_json(&d, "/api/cron/status", 200);
    assert_eq!(status["actions"], false);
    // How to get the agent where the dashboard runs (pip on a host, the full image in ours).
    assert!(
        status["actions_note"]
            .as_str()
            .unwrap()
            .contains(&hermes_services::agent::Place::current().get_the_agent()),
        "{status}"
    );
}

#[test]
fn the_status_says_whether_the_scheduler_ticks() {
    let home = home();
    let cron = home.path().join("cron");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    fs::write(cron.join("ticker_heartbeat"), format!("{}", now - 15.0)).unwrap();
    fs::write(cron.join("ticker_last_success"), format!("{}", now - 15.0)).unwrap();
    let stale = home.path().join("profiles/work/cron");
    fs::write(stale.join("ticker_heartbeat"), format!("{}", now - 7200.0)).unwrap();
    fs::write(
        stale.join("ticker_last_error"),
        format!("{now}\nPermissionError: [Errno 13] jobs.json\n"),
    )
    .unwrap();
    let d = common::start_in(home, "127.0.0.1", &TOKEN_ENV);
    let s = common::get_json(&d, "/api/cron/status", 200);
    assert_eq!(s["ticking"], true, "{s}");
    assert!(
        s["summary"].as_str().unwrap().contains("ticked 15 s ago"),
        "{s}"
    );
    assert!(
        s["jobs_file"].as_str().unwrap().ends_with("cron/jobs.json"),
        "{s}"
    );
    let s = common::get_json(&d, "/api/cron/status?profile=work", 200);
    assert_eq!(s["ticking"], false, "{s}");
    let summary = s["summary"].as_str().unwrap();
    assert!(
        summary.contains("2 h ago") && summary.contains("not running"),
        "{s}"
    );
    assert!(
        summary.ends_with("PermissionError: [Errno 13] jobs.json"),
        "{s}"
    );
}

/// A job made by the agent itself, then paused, resumed and triggered through the API; the
/// agent's own `get_job` reads each change. (Who the agent runs as — the profile's owner when
/// this process is root — is `agent_probe::owner_identity`'s test: the test venvs' interpreter
/// may live where only root can run it.)
fn the_agent_changes_its_jobs(agent: &hermes_test_support::OriginalAgent) {
    let home = tempfile::tempdir().unwrap();
    let root = home.path().to_path_buf();
    let created = agent_python(
        agent,
        &root,
        "from cron.jobs import create_job; print(create_job(prompt='Say hello', schedule='every 30m', name='hello')['id'])",
    );
    let id = created.lines().last().unwrap().to_string();
    let mut env = TOKEN_ENV.to_vec();
    let cli = agent.hermes.to_str().unwrap().to_string();
    env.push(("HERMES_AGENT_CLI", &cli));
    let d = common::start_in(home, "127.0.0.1", &env);
    let stored = |field: &str| {
        agent_python(
            agent,
            &root,
            &format!(
                "import json; from cron.jobs import get_job; print(json.dumps(get_job('{id}')['{field}']))"
            ),
        )
    };

    let got = post(&d, &format!("/api/cron/jobs/{id}/pause"));
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["state"], "paused");
    assert_eq!(got.json()["enabled"], false);
    assert_eq!(stored("enabled"), "false", "the agent reads the pause");
    assert!(
        stored("paused_at").starts_with("\"20"),
        "{}",
        stored("paused_at")
    );

    let got = post(&d, &format!("/api/cron/jobs/{id}/resume"));
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json()["state"], "scheduled");
    assert_eq!(stored("enabled"), "true");
    assert_eq!(stored("paused_at"), "null");

    let before = got.json()["next_run_at"].as_str().unwrap().to_string();
    let got = post(&d, &format!("/api/cron/jobs/{id}/trigger"));
    assert_eq!(got.status, 200, "{}", got.body);
    let next = got.json()["next_run_at"].as_str().unwrap().to_string();
    assert!(
        next < before,
        "due now ({next}) rather than in 30 min ({before})"
    );
    assert_eq!(stored("next_run_at"), format!("\"{next}\""));
    // The agent's own format: still `{"jobs": [...], "updated_at"}`, read by its loader.
    let file: Value =
        serde_json::from_slice(&fs::read(root.join("cron/jobs.json")).unwrap()).unwrap();
    assert!(file["updated_at"].is_string(), "{file}");
    assert_eq!(stored("name"), "\"hello\"");
}

#[test]
fn the_agent_0_19_pauses_resumes_and_triggers_its_jobs() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    the_agent_changes_its_jobs(&agent);
}

#[test]
fn the_agent_0_20_pauses_resumes_and_triggers_its_jobs() {
    let Some(agent) = hermes_test_support::fixture_agent() else {
        return;
    };
    the_agent_changes_its_jobs(&agent);
}
