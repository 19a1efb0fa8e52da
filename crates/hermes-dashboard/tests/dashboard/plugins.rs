//! The Plugins page's API over real HTTP on loopback: the blocked case on a sealed image
//! without target (the reason and hint, nothing run, nothing saved), unknown providers and
//! hostile names, one install at a time (409), and activation writing `memory.provider` into
//! the profile asked for while keeping every other key.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Answer, TOKEN, get, local, post, request, start};
use serde_json::Value;

/// A problem answer: `status`, a `detail` and a `hint`.
fn assert_problem(a: &Answer, status: u16) -> Value {
    assert_eq!(a.status, status, "{}", a.body);
    let v = a.json();
    assert!(v["detail"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
    assert!(v["hint"].as_str().is_some_and(|s| !s.is_empty()), "{v}");
    v
}

/// A user memory plugin `name` in the root's `plugins/` with `deps` as pip dependencies.
fn plugin(root: &Path, name: &str, deps: &[&str]) {
    let dir = root.join("plugins").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let deps: Vec<String> = deps.iter().map(|d| format!("'{d}'")).collect();
    std::fs::write(
        dir.join("plugin.yaml"),
        format!(
            "name: {name}\nversion: 0.1.0\ndescription: test memory\nkind: memory\npip_dependencies: [{}]\n",
            deps.join(", ")
        ),
    )
    .unwrap();
}

fn script(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn step<'a>(answer: &'a Value, name: &str) -> &'a Value {
    answer["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == name)
        .unwrap_or_else(|| panic!("no `{name}` step in {answer}"))
}

#[test]
fn sealed_without_target_shows_the_reason_runs_nothing_and_saves_nothing() {
    let d = start(
        "127.0.0.1",
        &[
            ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
            ("HERMES_DISABLE_LAZY_INSTALLS", "1"),
        ],
    );
    let root = d.home.path();
    plugin(root, "tinymem", &["hermes-tinymem-sdk>=1"]);
    // An installer that would leave a mark if anything ran it.
    let mark = root.join("installer-ran");
    script(&root.join("bin/uv"), &format!("touch '{}'", mark.display()));

    let list = get(&d, "/api/plugins");
    assert_eq!(list.status, 200, "{}", list.body);
    let list = list.json();
    assert_eq!(list["installs"]["possible"], false, "{list}");
    let reason = list["installs"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("immutable") && reason.contains("HERMES_LAZY_INSTALL_TARGET"),
        "{reason}"
    );
    assert!(
        list["installs"]["hint"]
            .as_str()
            .unwrap()
            .contains("HERMES_LAZY_INSTALL_TARGET")
    );
    let row = list["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "tinymem")
        .unwrap();
    assert_eq!(row["missing"][0], "hermes-tinymem-sdk>=1");
    assert_eq!(
        (row["available"].clone(), row["active"].clone()),
        (false.into(), false.into())
    );

    let a = post(&d, "/api/plugins/tinymem/install");
    assert_eq!(a.status, 200, "{}", a.body);
    let a = a.json();
    assert_eq!(
        (a["ok"].clone(), a["blocked"].clone()),
        (false.into(), true.into()),
        "{a}"
    );
    assert_eq!(a["reason"].as_str(), Some(reason));
    let install = step(&a, "install");
    assert_eq!(install["ok"], false);
    assert!(
        install["detail"].as_str().unwrap().starts_with("blocked: "),
        "{install}"
    );
    assert!(
        install["hint"]
            .as_str()
            .unwrap()
            .contains("HERMES_LAZY_INSTALL_TARGET")
    );
    assert_eq!(step(&a, "available")["ok"], false);
    assert_eq!(a["status"]["available"], false);

    // Activation installs first, as `hermes memory setup` does: refused the same way, and a
    // failed setup saves nothing.
    let b = post(&d, "/api/plugins/tinymem/activate");
    assert_eq!(b.status, 200, "{}", b.body);
    let b = b.json();
    assert_eq!(
        (b["ok"].clone(), b["blocked"].clone()),
        (false.into(), true.into()),
        "{b}"
    );
    assert_eq!(step(&b, "activate")["ok"], false);

    assert!(!mark.exists(), "the installer ran");
    assert!(!root.join("venv").exists(), "a venv was created");
    assert!(
        !root.join("config.yaml").exists(),
        "configuration was written"
    );
}

#[test]
fn unknown_providers_hostile_names_and_bad_profiles_are_refused() {
    let d = common::token_mode();
    plugin(d.home.path(), "tinymem", &[]);
    for name in [
        "nope",
        "..%2F..%2Fetc%2Fpasswd",
        "tinymem%00",
        &"x".repeat(300),
    ] {
        for verb in ["install", "activate"] {
            let a = post(&d, &format!("/api/plugins/{name}/{verb}"));
            assert_problem(&a, 404);
        }
    }
    // A plugin of another kind is not a memory provider.
    let dir = d.home.path().join("plugins/searcher");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        "name: searcher\nversion: 0.1.0\ndescription: a tool\nkind: tool\n",
    )
    .unwrap();
    let v = assert_problem(&post(&d, "/api/plugins/searcher/install"), 400);
    assert!(
        v["detail"]
            .as_str()
            .unwrap()
            .contains("not a memory provider"),
        "{v}"
    );

    assert_problem(&get(&d, "/api/plugins?profile=..%2Fx"), 400);
    assert_problem(&get(&d, "/api/plugins?profile=ghost"), 404);
    assert_problem(&post(&d, "/api/plugins/tinymem/install?profile=ghost"), 404);
    assert_problem(
        &post(&d, "/api/plugins/tinymem/activate?profile=..%2F..%2Fetc"),
        400,
    );
    assert!(!d.home.path().join("config.yaml").exists());

    // Without the session token header a POST is refused before the handler (CSRF).
    let a = request(&d, "POST", "/api/plugins/tinymem/activate", &local(&d), &[]);
    assert!(a.status == 401 || a.status == 403, "{}", a.status);
    assert!(!d.home.path().join("config.yaml").exists());
}

#[test]
fn activation_writes_the_profile_asked_for_and_keeps_other_keys() {
    let d = common::token_mode();
    let root = d.home.path();
    plugin(root, "bare", &[]);
    let work = root.join("profiles/work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("SOUL.md"), "You work.\n").unwrap();
    std::fs::write(
        work.join("config.yaml"),
        "# the operator's note\nmodel:\n  default: some/model\n",
    )
    .unwrap();

    let a = post(&d, "/api/plugins/bare/activate?profile=work");
    assert_eq!(a.status, 200, "{}", a.body);
    let a = a.json();
    assert_eq!(a["ok"], true, "{a}");
    assert_eq!(a["profile"], "work");
    assert_eq!(step(&a, "activate")["detail"], "memory.provider = bare");
    assert!(
        a["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["step"] != "install"),
        "nothing to install: {a}"
    );

    let text = std::fs::read_to_string(work.join("config.yaml")).unwrap();
    assert!(text.contains("default: some/model"), "{text}");
    assert!(text.contains("provider: bare"), "{text}");
    assert!(
        !root.join("config.yaml").exists(),
        "the default profile was written"
    );

    let list = get(&d, "/api/plugins?profile=work").json();
    assert_eq!(list["active"], "bare", "{list}");
    assert_eq!(list["profiles"], serde_json::json!(["default", "work"]));
    let row = list["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "bare")
        .unwrap();
    assert_eq!(
        (row["active"].clone(), row["available"].clone()),
        (true.into(), true.into())
    );
    let default = get(&d, "/api/plugins").json();
    assert_eq!(default["profile"], "default");
    assert_eq!(default["active"], Value::Null);
}

/// The real interpreter behind `python3` (pyenv shims and the like resolved), or `None`
/// after a skip.
fn real_python() -> Option<PathBuf> {
    let Some(python) = hermes_test_support::find_on_path("python3") else {
        hermes_test_support::skip("`python3` is not on PATH");
        return None;
    };
    let out = std::process::Command::new(python)
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn wait_for(what: &str, done: impl FnMut() -> bool) {
    hermes_test_support::poll::until_true(what, Duration::from_secs(30), done);
}

#[test]
fn a_second_install_while_one_runs_is_refused_with_409() {
    let Some(python) = real_python() else { return };
    let scratch = tempfile::tempdir().unwrap();
    // A core venv whose interpreter is the real one (availability checks run it), and an
    // installer (the managed uv) that says it started, then waits for the test's release.
    let venv = scratch.path().join("core");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::os::unix::fs::symlink(&python, venv.join("bin/python3")).unwrap();
    let venv_s = venv.to_string_lossy().into_owned();
    let d = start(
        "127.0.0.1",
        &[
            ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
            ("HERMES_VENV", &venv_s),
        ],
    );
    let root = d.home.path().to_path_buf();
    plugin(&root, "slowmem", &["hermes-slowmem-sdk"]);
    let started = scratch.path().join("started");
    let release = scratch.path().join("release");
    script(
        &root.join("bin/uv"),
        &format!(
            "echo run >> '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\nexit 0",
            started.display(),
            release.display()
        ),
    );

    std::thread::scope(|threads| {
        let first = threads.spawn(|| post(&d, "/api/plugins/slowmem/install"));
        wait_for("the installer to start", || started.exists());

        let second = post(&d, "/api/plugins/slowmem/install");
        let v = assert_problem(&second, 409);
        assert!(
            v["detail"].as_str().unwrap().contains("already running"),
            "{v}"
        );
        assert_problem(&post(&d, "/api/plugins/slowmem/activate"), 409);
        // Reading is never blocked by an install.
        assert_eq!(get(&d, "/api/plugins").status, 200);

        std::fs::write(&release, "").unwrap();
        let first = first.join().unwrap();
        assert_eq!(first.status, 200, "{}", first.body);
        let a = first.json();
        let install = step(&a, "install");
        assert_eq!(install["ok"], true, "{a}");
        // The command that ran, with its real flags (the fake uv's full path first).
        let detail = install["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("ran: ") && detail.contains("uv pip install --python "),
            "{install}"
        );
        // The fake installer installed nothing: the fresh re-check says so, and the answer is
        // not a success.
        assert_eq!(step(&a, "re-check")["ok"], false, "{a}");
        assert_eq!(a["ok"], false, "{a}");
        assert_eq!(a["status"]["missing"][0], "hermes-slowmem-sdk");
    });

    // The lock is free again once the install has ended.
    let again = post(&d, "/api/plugins/slowmem/install");
    assert_eq!(again.status, 200, "{}", again.body);
    let runs = std::fs::read_to_string(&started).unwrap();
    assert_eq!(
        runs.lines().count(),
        2,
        "one run per accepted install: {runs}"
    );
}

#[test]
fn the_active_generation_and_unavailable_packages_are_shown() {
    let volume = tempfile::tempdir().unwrap();
    let target = volume.path().join("lazy-packages");
    common::plant_unavailable_plugins(&target);
    let target_text = target.to_string_lossy().into_owned();
    let d = start(
        "127.0.0.1",
        &[
            ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
            ("HERMES_DISABLE_LAZY_INSTALLS", "1"),
            ("HERMES_LAZY_INSTALL_TARGET", &target_text),
        ],
    );
    let list = get(&d, "/api/plugins");
    assert_eq!(list.status, 200, "{}", list.body);
    let generation = &list.json()["installs"]["generation"];
    assert_eq!(generation["active"], 2, "{generation}");
    assert_eq!(generation["degraded"], true, "{generation}");
    assert_eq!(
        generation["packages"][0], "honcho-ai==2.2.0",
        "{generation}"
    );
    let said = generation["last_check"].as_str().unwrap_or_default();
    assert!(
        said.contains("honcho-ai==2.2.0") && said.contains("hermes plugins repair"),
        "{generation}"
    );
}
