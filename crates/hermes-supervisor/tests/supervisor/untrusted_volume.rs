//! A root supervisor against the user who owns the log volume: the attacks of a service user
//! (uid 65534 here) on the files root writes for it, each of which once made root write
//! where that user chose. Every test needs root and skips (saying so) otherwise.
//!
//! * planted `current` symlink — the next line must not reach the root-owned target
//! * symlinked log directory — nothing is created in the root-only directory it points to
//! * `register` from the service user naming a log directory — confined below the log root
//! * ownership — what the supervisor creates for a service belongs to the service's user
//! * parent-death signal — a service run as another user dies with a killed supervisor

#![allow(clippy::print_stderr)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Harness, is_root, supervise_bin};
use hermes_supervisor::StateName;

const USER: u32 = 65534;

/// A root supervisor whose log root belongs to [`USER`], as `/opt/data/logs` belongs to the
/// service user; its socket is open to that user.
fn volume_owned_by_user() -> Option<Harness> {
    if !is_root() {
        eprintln!("skipping: needs root (a root supervisor and a client switched to uid {USER})");
        return None;
    }
    let h = Harness::start("services: {}\n", &["--allow-uid", &USER.to_string()]);
    fs::set_permissions(h.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir_all(&h.logs).unwrap();
    std::os::unix::fs::chown(&h.logs, Some(USER), Some(USER)).unwrap();
    fs::set_permissions(&h.runtime, fs::Permissions::from_mode(0o755)).unwrap();
    let sock = h.runtime.join("supervisor.sock");
    fs::set_permissions(&sock, fs::Permissions::from_mode(0o666)).unwrap();
    Some(h)
}

/// Sends one request with the `supervise` example's client, as `uid`; returns its stdout.
fn request(h: &Harness, uid: u32, json: &str) -> String {
    let out = Command::new(supervise_bin())
        .args(["client", h.runtime.to_str().unwrap(), json])
        .uid(uid)
        .gid(uid)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// Registers `name` running `script` under /bin/sh as [`USER`], with an optional log dir.
fn register(h: &Harness, client_uid: u32, name: &str, script: &str, log: Option<&str>) -> String {
    let log = log.map_or(String::new(), |d| format!(r#","log":{{"dir":"{d}"}}"#));
    let json = format!(
        r#"{{"v":1,"op":"register","spec":{{"name":"{name}","argv":["/bin/sh","-c","{script}"],"restart":"never","run_as":{{"uid":{USER},"gid":{USER},"groups":[{USER}]}}{log}}}}}"#
    );
    request(h, client_uid, &json)
}

/// A root-owned 0600 file: what the attacker wants root to write to.
fn victim(h: &Harness) -> std::path::PathBuf {
    let p = h.path("victim");
    fs::write(&p, "root's own\n").unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// As [`USER`]: runs a shell command (the attacker's move).
fn as_user(script: &str) {
    let st = Command::new("/bin/sh")
        .args(["-c", script])
        .uid(USER)
        .gid(USER)
        .status()
        .unwrap();
    assert!(st.success(), "attacker step failed: {script}");
}

#[test]
fn a_planted_current_symlink_is_replaced_not_followed() {
    let Some(h) = volume_owned_by_user() else {
        return;
    };
    let victim = victim(&h);
    let dir = h.logs.join("svc");
    as_user(&format!(
        "mkdir {d} && ln -s {v} {d}/current",
        d = dir.display(),
        v = victim.display()
    ));
    let reply = register(&h, 0, "svc", "echo pwned-line; exec sleep 60", None);
    assert!(reply.contains("\"ok\":true"), "{reply}");
    h.wait_for("the line in the log", || {
        h.log("svc").contains("pwned-line")
    });
    assert_eq!(fs::read_to_string(&victim).unwrap(), "root's own\n");
    let meta = fs::symlink_metadata(dir.join("current")).unwrap();
    assert!(meta.is_file(), "current is a fresh regular file");
    assert_eq!((meta.uid(), meta.nlink()), (USER, 1));
    assert!(
        h.log("svc").contains("replaced `current`"),
        "{}",
        h.log("svc")
    );
}

#[test]
fn a_symlinked_log_directory_is_refused() {
    let Some(h) = volume_owned_by_user() else {
        return;
    };
    let secret = h.path("root-only");
    fs::create_dir(&secret).unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o700)).unwrap();
    as_user(&format!(
        "ln -s {} {}",
        secret.display(),
        h.logs.join("svc").display()
    ));
    let reply = register(&h, 0, "svc", "echo into-the-void; exec sleep 60", None);
    assert!(reply.contains("\"ok\":true"), "{reply}");
    h.wait_for("the mirrored line", || h.stdout().contains("into-the-void"));
    assert_eq!(
        fs::read_dir(&secret).unwrap().count(),
        0,
        "root created files through the symlink"
    );
}

#[test]
fn a_non_root_client_cannot_choose_where_root_writes() {
    let Some(h) = volume_owned_by_user() else {
        return;
    };
    let secret = h.path("root-only");
    fs::create_dir(&secret).unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o700)).unwrap();
    let reply = register(
        &h,
        USER,
        "outside",
        "echo x; exec sleep 60",
        Some(secret.to_str().unwrap()),
    );
    assert!(reply.contains("forbidden"), "{reply}");
    assert!(reply.contains("not below"), "{reply}");
    // Below the log root, but through a symlink the user planted there.
    as_user(&format!(
        "ln -s {} {}",
        secret.display(),
        h.logs.join("sneaky").display()
    ));
    let through = h.logs.join("sneaky/svc");
    let reply = register(
        &h,
        USER,
        "sneaky",
        "echo sneaky-line; exec sleep 60",
        Some(through.to_str().unwrap()),
    );
    assert!(reply.contains("\"ok\":true"), "{reply}");
    h.wait_for("the mirrored line", || h.stdout().contains("sneaky-line"));
    assert_eq!(fs::read_dir(&secret).unwrap().count(), 0);
    // A plain directory below the log root is fine, and belongs to the user.
    let mine = h.logs.join("mine/svc");
    let reply = register(
        &h,
        USER,
        "mine",
        "echo my-line; exec sleep 60",
        Some(mine.to_str().unwrap()),
    );
    assert!(reply.contains("\"ok\":true"), "{reply}");
    h.wait_for("the log line", || {
        fs::read_to_string(mine.join("current")).is_ok_and(|t| t.contains("my-line"))
    });
    for p in [h.logs.join("mine"), mine.clone(), mine.join("current")] {
        assert_eq!(fs::metadata(&p).unwrap().uid(), USER, "{}", p.display());
    }
}

#[test]
fn logs_created_for_a_service_belong_to_its_user() {
    let Some(h) = volume_owned_by_user() else {
        return;
    };
    let reply = register(&h, 0, "owned", "echo hello; exec sleep 60", None);
    assert!(reply.contains("\"ok\":true"), "{reply}");
    h.wait_for("the log line", || h.log("owned").contains("hello"));
    for p in [h.logs.join("owned"), h.logs.join("owned/current")] {
        let m = fs::metadata(&p).unwrap();
        assert_eq!((m.uid(), m.gid()), (USER, USER), "{}", p.display());
    }
}

#[test]
fn a_service_run_as_another_user_dies_with_a_killed_supervisor() {
    let Some(mut h) = volume_owned_by_user() else {
        return;
    };
    let reply = register(&h, 0, "orphan", "exec sleep 600", None);
    assert!(reply.contains("\"ok\":true"), "{reply}");
    let pid = h.wait_state("orphan", StateName::Up).pid.expect("a pid");
    let service = nix::unistd::Pid::from_raw(pid);
    let mut child = h.child.take().expect("supervisor process");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while nix::sys::signal::kill(service, None).is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let alive = nix::sys::signal::kill(service, None).is_ok();
    if alive {
        let _ = nix::sys::signal::kill(service, nix::sys::signal::Signal::SIGKILL);
    }
    assert!(!alive, "service {pid} (uid {USER}) outlived its supervisor");
}
