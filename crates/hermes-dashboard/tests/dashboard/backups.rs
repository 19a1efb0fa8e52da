//! The Backups API over real HTTP: authentication and CSRF on every endpoint, create → list →
//! download, names that are not archives (traversal, dots, symlinks), uploads (damaged ones
//! refused and nothing left behind, the size cap, a good one verified and named), and a
//! restore that only applies the plan whose token it carries.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::common::{
    self, Dashboard, get, get_json, local, post, request, send_bytes, token_header,
};

/// A small volume: the root profile's files and a named profile's.
fn volume() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let root = home.path();
    fs::write(root.join("config.yaml"), "_config_version: 35\nmodel: a\n").unwrap();
    fs::write(root.join("SOUL.md"), "the root's soul\n").unwrap();
    fs::write(root.join(".env"), "OPENAI_API_KEY=sk-test\n").unwrap();
    let work = root.join("profiles/work");
    fs::create_dir_all(work.join("memories")).unwrap();
    fs::write(work.join("config.yaml"), "_config_version: 35\nmodel: w\n").unwrap();
    fs::write(work.join("SOUL.md"), "work's soul\n").unwrap();
    fs::write(work.join("memories/MEMORY.md"), "remember this\n").unwrap();
    home
}

fn dashboard() -> Dashboard {
    common::start_in(volume(), "127.0.0.1", &common::TOKEN_ENV)
}

fn json_post(d: &Dashboard, path: &str, body: &Value) -> common::Answer {
    common::send(
        d,
        "POST",
        path,
        &local(d),
        &[token_header(), "Content-Type: application/json".into()],
        &body.to_string(),
    )
}

/// `POST /api/backups` that must succeed: its answer.
fn create(d: &Dashboard) -> Value {
    let a = post(d, "/api/backups");
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()
}

fn backups(d: &Dashboard) -> std::path::PathBuf {
    d.root().join("backups")
}

/// What is in the backups directory, names sorted.
fn listing(dir: &Path) -> Vec<String> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = read
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn every_endpoint_needs_authentication_and_posts_need_the_csrf_header() {
    let d = dashboard();
    for (method, path) in [
        ("GET", "/api/backups"),
        ("POST", "/api/backups"),
        ("GET", "/api/backups/a.zip"),
        ("POST", "/api/backups/upload"),
        ("POST", "/api/backups/a.zip/plan"),
        ("POST", "/api/backups/a.zip/restore"),
    ] {
        let a = request(&d, method, path, &local(&d), &[]);
        assert_eq!(a.status, 401, "{method} {path}: {}", a.body);
    }
    // Signed in by the bearer token, but without the CSRF header: refused before any work.
    let bearer = format!("Authorization: Bearer {}", common::TOKEN);
    for path in [
        "/api/backups",
        "/api/backups/upload",
        "/api/backups/a.zip/plan",
        "/api/backups/a.zip/restore",
    ] {
        let a = request(&d, "POST", path, &local(&d), std::slice::from_ref(&bearer));
        assert_eq!(a.status, 403, "{path}: {}", a.body);
    }
    assert!(!backups(&d).exists(), "nothing was created");
    // The page too is behind the guard.
    assert_eq!(request(&d, "GET", "/backups", &local(&d), &[]).status, 401);
}

#[test]
fn create_lists_and_downloads_an_archive() {
    let d = dashboard();
    let empty = get_json(&d, "/api/backups", 200);
    assert_eq!(empty["archives"], json!([]));
    assert_eq!(empty["schedule"], Value::Null);

    let made = create(&d);
    let name = made["name"].as_str().unwrap().to_string();
    assert!(
        name.starts_with("hermes-dashboard-") && name.ends_with(".zip"),
        "{name}"
    );
    assert!(made["files"].as_u64().unwrap() >= 6, "{made}");
    let file = backups(&d).join(&name);
    assert_eq!(
        fs::metadata(&file).unwrap().len(),
        made["size"].as_u64().unwrap()
    );
    assert_eq!(
        fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        fs::metadata(backups(&d)).unwrap().permissions().mode() & 0o777,
        0o700
    );

    let list = get_json(&d, "/api/backups", 200);
    let archives = list["archives"].as_array().unwrap();
    assert_eq!(archives.len(), 1, "{list}");
    assert_eq!(archives[0]["name"], name.as_str());
    assert_eq!(archives[0]["size"], made["size"]);
    assert_eq!(archives[0]["scheduled"], false);
    assert!(archives[0]["modified"].as_str().unwrap().ends_with('Z'));
    assert_eq!(list["creating"], Value::Null);

    let a = send_bytes(
        &d,
        "GET",
        &format!("/api/backups/{name}"),
        &[token_header()],
        b"",
    );
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type").as_deref(), Some("application/zip"));
    assert_eq!(
        a.header("content-disposition"),
        Some(format!("attachment; filename=\"{name}\""))
    );
    assert_eq!(a.body, fs::read(&file).unwrap());
    // A second one in the same second gets a name of its own.
    let again = create(&d);
    assert_ne!(again["name"], made["name"]);
}

#[test]
fn scheduled_archives_and_the_schedule_state_are_listed() {
    let d = dashboard();
    let made = create(&d);
    let dir = backups(&d);
    let scheduled = "hermes-backup-20261202-030000.zip";
    fs::copy(
        dir.join(made["name"].as_str().unwrap()),
        dir.join(scheduled),
    )
    .unwrap();
    fs::write(
        dir.join(".schedule.json"),
        // As the scheduled backups write it.
        json!({
            "schedule": "daily",
            "next_run": "2026-12-03T03:00:00Z",
            "last_run": {
                "started": "2026-12-02T03:00:00Z", "ok": true, "result": "ok",
                "file": dir.join(scheduled), "size": 1234, "duration_ms": 80, "pruned": [],
            },
            "last_success": "2026-12-02T03:00:00Z",
        })
        .to_string(),
    )
    .unwrap();
    let list = get_json(&d, "/api/backups", 200);
    let kinds: Vec<(String, bool)> = list["archives"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["name"].as_str().unwrap().to_string(),
                a["scheduled"].as_bool().unwrap(),
            )
        })
        .collect();
    assert!(kinds.contains(&(scheduled.to_string(), true)), "{kinds:?}");
    assert!(kinds.contains(&(made["name"].as_str().unwrap().to_string(), false)));
    assert_eq!(
        kinds.len(),
        2,
        "the state file is not an archive: {kinds:?}"
    );
    assert_eq!(list["schedule"]["next_run"], "2026-12-03T03:00:00Z");
    assert_eq!(list["schedule"]["ok"], true);
    assert_eq!(list["schedule"]["last_run"], "2026-12-02T03:00:00Z");
    assert_eq!(list["schedule"]["file"], scheduled);
    assert_eq!(list["schedule"]["schedule"], "daily");
}

#[test]
fn the_directory_is_the_scheduled_backups_one() {
    // `backup.dir` of the root config.yaml, as the scheduled backups read it.
    let home = volume();
    fs::write(
        home.path().join("config.yaml"),
        "_config_version: 35\nmodel: a\nbackup:\n  dir: backups/nightly\n",
    )
    .unwrap();
    let d = common::start_in(home, "127.0.0.1", &common::TOKEN_ENV);
    let made = create(&d);
    let nightly = d.root().join("backups/nightly");
    assert!(nightly.join(made["name"].as_str().unwrap()).is_file());
    let list = get_json(&d, "/api/backups", 200);
    assert_eq!(list["dir"], nightly.to_str().unwrap());
    assert_eq!(list["archives"].as_array().unwrap().len(), 1);

    // HERMES_BACKUP_DIR over it, outside the volume.
    let elsewhere = tempfile::tempdir().unwrap();
    let env = [
        ("HERMES_DASHBOARD_SESSION_TOKEN", common::TOKEN),
        ("HERMES_BACKUP_DIR", elsewhere.path().to_str().unwrap()),
    ];
    let d = common::start_in(volume(), "127.0.0.1", &env);
    let made = create(&d);
    assert!(
        elsewhere
            .path()
            .join(made["name"].as_str().unwrap())
            .is_file()
    );
    assert!(!backups(&d).exists());
    let name = made["name"].as_str().unwrap();
    let a = send_bytes(
        &d,
        "GET",
        &format!("/api/backups/{name}"),
        &[token_header()],
        b"",
    );
    assert_eq!(a.status, 200);
}

#[test]
fn invalid_backup_settings_are_said_not_guessed() {
    let env = [
        ("HERMES_DASHBOARD_SESSION_TOKEN", common::TOKEN),
        ("HERMES_BACKUP_KEEP", "none"),
    ];
    let d = common::start_in(volume(), "127.0.0.1", &env);
    for a in [get(&d, "/api/backups"), post(&d, "/api/backups")] {
        assert_eq!(a.status, 409, "{}", a.body);
        let v = a.json();
        assert!(
            v["detail"].as_str().unwrap().contains("HERMES_BACKUP_KEEP"),
            "{v}"
        );
        assert!(v["hint"].is_string(), "{v}");
    }
    assert!(!backups(&d).exists(), "nothing was written anywhere");
}

#[test]
fn names_that_are_not_archives_are_refused_before_any_file_is_touched() {
    let d = dashboard();
    let dir = backups(&d);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join(".schedule.json"), "{}").unwrap();
    std::os::unix::fs::symlink(d.root().join(".env"), dir.join("link.zip")).unwrap();
    fs::create_dir(dir.join("dir.zip")).unwrap();
    for (name, status) in [
        ("..%2F.env", 400),
        ("..%2F..%2Fetc%2Fpasswd", 400),
        ("%2Fetc%2Fpasswd", 400),
        ("..", 400),
        (".schedule.json", 400),
        ("notes.txt", 400),
        ("a%20b.zip", 400),
        ("a%0d%0aX-Evil%3a%201.zip", 400),
        ("link.zip", 400),
        ("dir.zip", 400),
        ("missing.zip", 404),
    ] {
        let got = get(&d, &format!("/api/backups/{name}"));
        assert_eq!(got.status, status, "GET {name}: {}", got.body);
        assert!(got.json()["detail"].is_string(), "{name}");
        assert!(!got.body.contains("sk-test"), "{name}");
        for action in ["plan", "restore"] {
            let a = json_post(
                &d,
                &format!("/api/backups/{name}/{action}"),
                &json!({"token": "x"}),
            );
            assert_eq!(a.status, status, "{action} {name}: {}", a.body);
        }
    }
    // A path that leaves the directory never reaches a handler that reads it.
    let up = get(&d, "/api/backups/../.env");
    assert_ne!(up.status, 200);
    assert!(!up.body.contains("sk-test"));
    // Neither the link's target nor anything else was read or changed.
    assert_eq!(
        fs::read_to_string(d.root().join(".env")).unwrap(),
        "OPENAI_API_KEY=sk-test\n"
    );
}

/// Where the data of the entry `name` starts in the zip `zip` (after its local header).
fn entry_data(zip: &[u8], name: &str) -> usize {
    let le16 = |at: usize| usize::from(u16::from_le_bytes([zip[at], zip[at + 1]]));
    let mut at = 0;
    loop {
        at += zip[at..]
            .windows(4)
            .position(|w| w == b"PK\x03\x04")
            .expect("a local header for the entry");
        let (name_len, extra_len) = (le16(at + 26), le16(at + 28));
        if &zip[at + 30..at + 30 + name_len] == name.as_bytes() {
            return at + 30 + name_len + extra_len;
        }
        at += 4;
    }
}

/// `POST /api/backups/upload?name=…` with `body`.
fn upload(d: &Dashboard, name: &str, body: &[u8]) -> common::RawAnswer {
    send_bytes(
        d,
        "POST",
        &format!("/api/backups/upload?name={name}"),
        &[token_header(), "Content-Type: application/zip".into()],
        body,
    )
}

#[test]
fn a_damaged_upload_is_a_400_with_the_error_and_leaves_nothing() {
    let d = dashboard();
    let made = create(&d);
    let good = fs::read(backups(&d).join(made["name"].as_str().unwrap())).unwrap();

    let junk = upload(&d, "junk.zip", b"this is not a zip at all");
    assert_eq!(junk.status, 400);
    let detail = junk.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("is not a readable zip"), "{detail}");
    assert!(junk.json()["hint"].is_string());

    let truncated = upload(&d, "cut.zip", &good[..good.len() / 2]);
    assert_eq!(
        truncated.status,
        400,
        "{}",
        String::from_utf8_lossy(&truncated.body)
    );

    // A byte changed inside an entry: still a zip, but its checks fail.
    let mut flipped = good.clone();
    let at = entry_data(&flipped, "SOUL.md");
    flipped[at] ^= 0xff;
    let bad = upload(&d, "flipped.zip", &flipped);
    assert_eq!(bad.status, 400, "{}", String::from_utf8_lossy(&bad.body));
    let detail = bad.json()["detail"].as_str().unwrap().to_string();
    assert!(!detail.contains('\n'), "one line: {detail}");

    assert_eq!(
        listing(&backups(&d)),
        [made["name"].as_str().unwrap().to_string()],
        "no partial file and no refused archive is left"
    );
}

#[test]
fn a_good_upload_is_verified_named_and_never_replaces_one() {
    let d = dashboard();
    let made = create(&d);
    let good = fs::read(backups(&d).join(made["name"].as_str().unwrap())).unwrap();
    let a = upload(&d, "my%20old%20backup.zip", &good);
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    assert_eq!(v["name"], "my-old-backup.zip");
    assert_eq!(v["size"], good.len());
    assert_eq!(v["files"], made["files"]);
    assert!(v["manifest"]["created"].is_string());
    let stored = backups(&d).join("my-old-backup.zip");
    assert_eq!(fs::read(&stored).unwrap(), good);
    assert_eq!(
        fs::metadata(&stored).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let again = upload(&d, "my-old-backup.zip", &good);
    assert_eq!(again.status, 409);
    // A traversal in the name is only a name.
    let sneaky = upload(&d, "..%2F..%2Fconfig.yaml", &good);
    assert_eq!(
        sneaky.status,
        200,
        "{}",
        String::from_utf8_lossy(&sneaky.body)
    );
    assert_eq!(sneaky.json()["name"], "config.yaml.zip");
    assert_eq!(
        fs::read_to_string(d.root().join("config.yaml")).unwrap(),
        "_config_version: 35\nmodel: a\n"
    );
    assert_eq!(listing(&backups(&d)).len(), 3);
}

#[test]
fn an_upload_over_the_cap_is_refused() {
    let env = [
        ("HERMES_DASHBOARD_SESSION_TOKEN", common::TOKEN),
        ("HERMES_DASHBOARD_UPLOAD_MAX_MB", "1"),
    ];
    let d = common::start_in(volume(), "127.0.0.1", &env);
    // The declared length is refused before the body is read (the test sends a few bytes of
    // it only, so no unread megabyte makes the connection's close a reset).
    let mut s = std::net::TcpStream::connect(d.addr).unwrap();
    write!(
        s,
        "POST /api/backups/upload?name=big.zip HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
         {}\r\nContent-Type: application/zip\r\nContent-Length: {}\r\n\r\nPK\x03\x04",
        local(&d),
        token_header(),
        1024 * 1024 + 1
    )
    .unwrap();
    let a = common::read_raw(s);
    assert_eq!(a.status, 413);
    assert!(
        a.json()["hint"]
            .as_str()
            .unwrap()
            .contains("HERMES_DASHBOARD_UPLOAD_MAX_MB")
    );
    assert!(listing(&backups(&d)).is_empty(), "nothing left behind");
}

#[test]
fn a_plan_then_its_restore_changes_the_files_and_nothing_else() {
    let d = dashboard();
    let made = create(&d);
    let name = made["name"].as_str().unwrap().to_string();
    let root = d.root().to_path_buf();
    // After the backup: one file changed, one removed, one new.
    fs::write(
        root.join("config.yaml"),
        "_config_version: 35\nmodel: changed\n",
    )
    .unwrap();
    fs::remove_file(root.join("profiles/work/SOUL.md")).unwrap();
    fs::write(root.join("profiles/work/memories/NEW.md"), "made later\n").unwrap();

    let plan = json_post(&d, &format!("/api/backups/{name}/plan"), &json!({}));
    assert_eq!(plan.status, 200, "{}", plan.body);
    let p = plan.json();
    assert_eq!(p["replaced"], json!(["config.yaml"]), "{p}");
    assert_eq!(p["added"], json!(["profiles/work/SOUL.md"]), "{p}");
    assert_eq!(p["kept"], json!(["profiles/work/memories/NEW.md"]), "{p}");
    assert_eq!(p["counts"]["replaced"], 1);
    assert_eq!(p["counts"]["added"], 1);
    assert!(p["counts"]["unchanged"].as_u64().unwrap() >= 4, "{p}");
    assert_eq!(p["restarts"], json!(["default", "work"]));
    assert_eq!(p["schema"]["archive"]["version"], 35);
    // No agent is installed: nothing refuses the archive's schema.
    assert_eq!(p["schema"]["refused"], Value::Null);
    let token = p["token"].as_str().unwrap().to_string();
    assert_eq!(token.len(), 64);
    // A plan changes nothing.
    assert!(!root.join("profiles/work/SOUL.md").exists());

    let restore = format!("/api/backups/{name}/restore");
    // Without the plan's token there is no restore.
    let bare = common::send(&d, "POST", &restore, &local(&d), &[token_header()], "");
    assert!(bare.status == 400 || bare.status == 422, "{}", bare.body);
    let wrong = json_post(&d, &restore, &json!({ "token": "0".repeat(64) }));
    assert_eq!(wrong.status, 409, "{}", wrong.body);
    assert!(
        !root.join("profiles/work/SOUL.md").exists(),
        "nothing was restored"
    );

    // The volume changes after the plan was shown: its token is stale.
    fs::write(root.join("SOUL.md"), "changed after the plan\n").unwrap();
    let stale = json_post(&d, &restore, &json!({ "token": token }));
    assert_eq!(stale.status, 409, "{}", stale.body);
    assert_eq!(
        fs::read_to_string(root.join("SOUL.md")).unwrap(),
        "changed after the plan\n"
    );

    let p = json_post(&d, &format!("/api/backups/{name}/plan"), &json!({})).json();
    assert_eq!(p["replaced"], json!(["SOUL.md", "config.yaml"]));
    let done = json_post(&d, &restore, &json!({ "token": p["token"] }));
    assert_eq!(done.status, 200, "{}", done.body);
    let v = done.json();
    assert_eq!(v["applied"]["replaced"], 2);
    assert_eq!(v["applied"]["added"], 1);
    assert_eq!(v["applied"]["kept"], 1);
    // No supervisor runs: no gateway was stopped, none to start again.
    assert_eq!(v["restarted"], json!([]));
    assert_eq!(v["start_failures"], json!([]));
    assert_eq!(
        fs::read_to_string(root.join("config.yaml")).unwrap(),
        "_config_version: 35\nmodel: a\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("SOUL.md")).unwrap(),
        "the root's soul\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("profiles/work/SOUL.md")).unwrap(),
        "work's soul\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("profiles/work/memories/NEW.md")).unwrap(),
        "made later\n",
        "a file the archive does not hold is kept"
    );
    // Nothing left to do: the same plan again is all unchanged.
    let after = json_post(&d, &format!("/api/backups/{name}/plan"), &json!({})).json();
    assert_eq!(after["counts"]["added"], 0);
    assert_eq!(after["counts"]["replaced"], 0);
    assert_eq!(after["restarts"], json!([]));
}

#[test]
fn a_gateway_running_outside_a_supervisor_stops_the_restore() {
    let d = dashboard();
    let made = create(&d);
    let name = made["name"].as_str().unwrap();
    let work = d.root().join("profiles/work");
    fs::write(work.join("SOUL.md"), "changed\n").unwrap();
    // The lock a gateway run by hand holds, with its record naming a live process (this one).
    let pid = std::process::id() as i32;
    let start_time = hermes_home::gateway_lock::process_start_time(pid).unwrap();
    let lock_path = hermes_home::gateway_lock::path(&work);
    fs::write(
        &lock_path,
        json!({ "pid": pid, "kind": "hermes-gateway", "start_time": start_time }).to_string(),
    )
    .unwrap();
    let lock = fs::File::open(&lock_path).unwrap();
    lock.lock().unwrap();
    let p = json_post(&d, &format!("/api/backups/{name}/plan"), &json!({})).json();
    assert_eq!(p["restarts"], json!(["work"]));
    let a = json_post(
        &d,
        &format!("/api/backups/{name}/restore"),
        &json!({ "token": p["token"] }),
    );
    assert_eq!(a.status, 409, "{}", a.body);
    let v = a.json();
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("runs outside the supervisor"),
        "{v}"
    );
    assert!(v["hint"].as_str().unwrap().contains(&format!("kill {pid}")));
    assert_eq!(
        fs::read_to_string(work.join("SOUL.md")).unwrap(),
        "changed\n"
    );
    drop(lock);
}

#[test]
fn an_archive_newer_than_the_agents_schema_is_restored_only_when_forced() {
    let agent_dir = tempfile::tempdir().unwrap();
    let agent = hermes_test_support::agent::with_schema(agent_dir.path(), 33);
    let env = [
        ("HERMES_DASHBOARD_SESSION_TOKEN", common::TOKEN),
        ("HERMES_AGENT_CLI", agent.to_str().unwrap()),
    ];
    let d = common::start_in(volume(), "127.0.0.1", &env);
    let made = create(&d);
    let name = made["name"].as_str().unwrap();
    let root = d.root().to_path_buf();
    fs::write(root.join("SOUL.md"), "changed\n").unwrap();

    let p = json_post(&d, &format!("/api/backups/{name}/plan"), &json!({})).json();
    assert_eq!(p["schema"]["archive"]["version"], 35, "{p}");
    let refused = p["schema"]["refused"]
        .as_str()
        .unwrap_or_else(|| panic!("{p}"));
    assert!(
        refused.contains("config schema 35, newer than this image's hermes-agent"),
        "{refused}"
    );
    assert!(p["schema"]["hint"].as_str().unwrap().contains("--force"));

    let restore = format!("/api/backups/{name}/restore");
    let a = json_post(&d, &restore, &json!({ "token": p["token"] }));
    assert_eq!(a.status, 409, "{}", a.body);
    assert!(a.json()["detail"].as_str().unwrap().contains("newer than"));
    assert_eq!(
        fs::read_to_string(root.join("SOUL.md")).unwrap(),
        "changed\n"
    );

    let forced = json_post(&d, &restore, &json!({ "token": p["token"], "force": true }));
    assert_eq!(forced.status, 200, "{}", forced.body);
    assert_eq!(
        fs::read_to_string(root.join("SOUL.md")).unwrap(),
        "the root's soul\n"
    );
}

#[test]
fn a_damaged_archive_in_the_directory_has_no_plan() {
    let d = dashboard();
    let dir = backups(&d);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("broken.zip"), "PK not really").unwrap();
    let a = json_post(&d, "/api/backups/broken.zip/plan", &json!({}));
    assert_eq!(a.status, 422, "{}", a.body);
    assert!(a.json()["detail"].as_str().unwrap().contains("broken.zip"));
}

#[test]
fn the_page_is_in_the_nav_and_the_api_is_documented() {
    let d = dashboard();
    let page = get(&d, "/backups");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("id=\"archives\""));
    assert!(
        page.body
            .contains("<a href=\"backups\" aria-current=\"page\">Backups</a>")
    );
    let overview = get(&d, "/");
    assert!(overview.body.contains("<a href=\"backups\">Backups</a>"));
    let doc = get_json(&d, "/api/openapi.json", 200);
    for (path, method) in [
        ("/api/backups", "get"),
        ("/api/backups", "post"),
        ("/api/backups/upload", "post"),
        ("/api/backups/{name}", "get"),
        ("/api/backups/{name}/plan", "post"),
        ("/api/backups/{name}/restore", "post"),
    ] {
        assert!(doc["paths"][path][method].is_object(), "{method} {path}");
    }
}

#[test]
fn the_originals_archives_in_its_home_are_listed_and_copied_in() {
    // The original's `hermes backup` writes `~/hermes-backup-YYYY-MM-DD-HHMMSS.zip`: in its
    // image `~` is the volume's root; on a machine, the user's home.
    let home = volume();
    let user_home = tempfile::tempdir().unwrap();
    let at_root = "hermes-backup-2026-08-01-120000.zip";
    let in_home = "hermes-backup-2026-08-02-090000.zip";
    fs::write(home.path().join(at_root), b"the original's archive").unwrap();
    fs::write(home.path().join("notes.zip"), b"not one").unwrap();
    fs::write(user_home.path().join(in_home), b"another").unwrap();
    let env = [
        ("HERMES_DASHBOARD_SESSION_TOKEN", common::TOKEN),
        ("HOME", user_home.path().to_str().unwrap()),
    ];
    let d = common::start_in(home, "127.0.0.1", &env);
    let list = get_json(&d, "/api/backups", 200);
    let original = list["original"].as_array().unwrap();
    let names: Vec<(&str, &str)> = original
        .iter()
        .flat_map(|place| {
            let dir = place["dir"].as_str().unwrap();
            place["archives"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |a| (dir, a["name"].as_str().unwrap()))
        })
        .collect();
    let root = d.root().to_str().unwrap().to_string();
    let user = user_home.path().to_str().unwrap();
    assert_eq!(
        names,
        [(root.as_str(), at_root), (user, in_home)],
        "{list:#}"
    );
    assert!(list["archives"].as_array().unwrap().is_empty());

    // Copied in, it is one of the directory's archives; never twice, never from elsewhere.
    let a = json_post(
        &d,
        "/api/backups/adopt",
        &json!({ "dir": root, "name": at_root }),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        fs::read(backups(&d).join(at_root)).unwrap(),
        b"the original's archive"
    );
    let list = get_json(&d, "/api/backups", 200);
    assert_eq!(list["archives"][0]["name"], at_root);
    let again = json_post(
        &d,
        "/api/backups/adopt",
        &json!({ "dir": root, "name": at_root }),
    );
    assert_eq!(again.status, 409, "{}", again.body);
    let elsewhere = json_post(
        &d,
        "/api/backups/adopt",
        &json!({ "dir": "/etc", "name": at_root }),
    );
    assert_eq!(elsewhere.status, 400, "{}", elsewhere.body);
    let not_one = json_post(
        &d,
        "/api/backups/adopt",
        &json!({ "dir": root, "name": "notes.zip" }),
    );
    assert_eq!(not_one.status, 409, "{}", not_one.body);
    assert_eq!(listing(&backups(&d)), [at_root]);
}
