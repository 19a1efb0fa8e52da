//! Malformed and hostile on-disk files: reported clearly, never rewritten, never lost.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;

use crate::util::{TestContext, open_up, render};

#[test]
fn malformed_config_is_reported_with_line_and_column_and_left_untouched() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let config = t.root().join("config.yaml");
    let broken = "model:\n  default: gpt\n  bad: [unclosed\nmemory: {}\n";
    fs::write(&config, broken).unwrap();

    let dump = t.ok(&["dump"]);
    assert!(dump.contains("warning:") && dump.contains("line"), "{dump}");

    let out = t.run(&["doctor"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("✗") && stdout.contains("is not valid YAML (line"),
        "{stdout}"
    );
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        broken,
        "never rewritten"
    );
}

#[test]
fn corrupt_auth_json_is_copied_aside_and_reported() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let auth = t.root().join("auth.json");
    fs::write(&auth, "{\"providers\": ").unwrap();
    let out = t.run(&["auth", "list"]);
    assert!(out.status.success(), "{}", render(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("auth.json.corrupt."), "{stderr}");
    let copies: Vec<_> = fs::read_dir(t.root())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("auth.json.corrupt.")
        })
        .collect();
    assert_eq!(copies.len(), 1);
    assert_eq!(
        fs::read_to_string(copies[0].path()).unwrap(),
        "{\"providers\": "
    );
    assert_eq!(
        fs::read_to_string(&auth).unwrap(),
        "{\"providers\": ",
        "original left in place"
    );
}

/// The seed bug: a root-owned 0600 `auth.json` must produce a clear error for the service
/// user, and the file must be left exactly as it is (no `.corrupt` rename, no empty store).
#[test]
fn unreadable_auth_json_is_a_clear_error_and_left_intact() {
    if hermes_test_support::skip_unless_root(
        "needs root to create a root-owned auth.json and run as another user",
    ) {
        return;
    }
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    open_up(&t.root());
    let auth = t.root().join("auth.json");
    let contents = "{\"providers\": {\"nous\": {\"access_token\": \"secret\"}}}";
    fs::write(&auth, contents).unwrap();
    fs::set_permissions(&auth, fs::Permissions::from_mode(0o600)).unwrap();
    let before = fs::metadata(&auth).unwrap();

    let out = t
        .cmd(&["auth", "list"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let snapshot = t.snapshot(&out);
    insta::assert_snapshot!("auth_unreadable", snapshot);

    let after = fs::metadata(&auth).unwrap();
    assert_eq!(fs::read_to_string(&auth).unwrap(), contents);
    assert_eq!(
        (after.uid(), after.mode(), after.mtime()),
        (before.uid(), before.mode(), before.mtime())
    );
    let strays: Vec<_> = fs::read_dir(t.root())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("corrupt"))
        .collect();
    assert!(strays.is_empty(), "no corrupt copy for a permission error");
}

#[test]
fn doctor_catches_a_root_owned_auth_json() {
    if hermes_test_support::skip_unless_root("needs root to chown files to another user") {
        return;
    }
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let auth = t.root().join("auth.json");
    fs::write(&auth, "{}").unwrap();
    fs::set_permissions(&auth, fs::Permissions::from_mode(0o600)).unwrap();
    // The home belongs to the service user (uid 65534); auth.json stays root's.
    open_up(&t.root());
    let nobody = Some(nix::unistd::Uid::from_raw(65534));
    for entry in fs::read_dir(t.root()).unwrap().flatten() {
        if entry.file_name() != "auth.json" {
            nix::unistd::chown(&entry.path(), nobody, None).unwrap();
        }
    }
    nix::unistd::chown(&t.root(), nobody, None).unwrap();

    // As root (a `docker exec` without the drop) and as the service user itself.
    for as_service_user in [false, true] {
        let mut cmd = t.cmd(&["doctor"]);
        if as_service_user {
            cmd.uid(65534).gid(65534);
        }
        let out = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{}", render(&out));
        assert!(
            stdout.contains("✗ `") && stdout.contains("auth.json` is not readable"),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("chown nobody: {}", auth.display()))
                || stdout.contains("chown 65534: "),
            "{stdout}"
        );
    }
    assert_eq!(fs::read_to_string(&auth).unwrap(), "{}");
}

#[test]
fn corrupt_gateway_state_reads_as_unknown() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let state = t.root().join("profiles/work/gateway_state.json");
    fs::write(&state, "\u{feff}{not json").unwrap();
    let listed: serde_json::Value =
        serde_json::from_str(&t.ok(&["profile", "list", "--json"])).unwrap();
    assert_eq!(listed[1]["gateway"], "unknown");
    fs::write(
        &state,
        "\u{feff}{\"gateway_state\": \"running\", \"desired_state\": \"stopped\"}",
    )
    .unwrap();
    let listed: serde_json::Value =
        serde_json::from_str(&t.ok(&["profile", "list", "--json"])).unwrap();
    assert_eq!(
        listed[1]["gateway"], "stopped",
        "BOM tolerated, desired state wins"
    );
}
