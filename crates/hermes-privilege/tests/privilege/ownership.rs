//! Ownership repair on a temporary data volume: targeted re-owning, exact modes, and no
//! symlink ever followed (checked with `lstat` on the link targets). Re-owning to another
//! uid needs root; the tests that do print a skip reason otherwise.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

use hermes_privilege::{FileRule, RepairPlan, repair_ownership};

const UID: u32 = 10000;
const GID: u32 = 10000;

/// A data volume's plan with the names these tests use, as `hermes init` builds it from
/// `hermes_home::volume` (privilege repairs exactly the lists it is given).
fn data_volume(root: impl Into<std::path::PathBuf>) -> RepairPlan {
    RepairPlan::data_volume(
        root,
        [
            FileRule::with_mode(".env", 0o600),
            FileRule::with_mode("config.yaml", 0o640),
            FileRule::owned("SOUL.md"),
            FileRule::owned("auth.json"),
        ],
        [
            "profiles",
            "logs",
            "skills",
            "cron",
            "workspace",
            "platforms/pairing",
        ],
    )
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn owner(path: &Path) -> (u32, u32) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    (meta.uid(), meta.gid())
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

fn write(path: &Path, body: &str, mode: u32) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A volume with everything root-owned (we run as root) plus an `outside` directory whose
/// files symlinks point at.
struct Volume {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn volume() -> Volume {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    write(&root.join(".env"), "API_SERVER_KEY=x\n", 0o644);
    write(&root.join("config.yaml"), "model: x\n", 0o666);
    write(&root.join("SOUL.md"), "soul\n", 0o444);
    write(&root.join("host_secret.json"), "{}", 0o600);
    write(&root.join("profiles/coder/SOUL.md"), "coder\n", 0o644);
    write(&root.join("profiles/coder/sessions/s1.json"), "{}", 0o600);
    write(&root.join("cron/root_owned.json"), "{}", 0o644);
    write(&root.join("logs/gateways/default/current"), "line\n", 0o644);
    write(&outside.join("target.txt"), "not hermes's\n", 0o644);
    write(&outside.join("auth-target.json"), "{}", 0o600);
    std::fs::create_dir_all(outside.join("dir")).unwrap();
    write(&outside.join("dir/inner.txt"), "x", 0o644);
    // A symlink inside a subtree pointing outside the volume, a symlinked directory inside a
    // subtree, a symlinked allowlisted file, and a symlinked subtree.
    symlink(
        outside.join("target.txt"),
        root.join("profiles/coder/escape"),
    )
    .unwrap();
    symlink(outside.join("dir"), root.join("profiles/coder/escape-dir")).unwrap();
    symlink(outside.join("auth-target.json"), root.join("auth.json")).unwrap();
    symlink(&outside, root.join("skills")).unwrap();
    Volume {
        _dir: dir,
        root,
        outside,
    }
}

#[test]
fn repair_reowns_targets_and_never_follows_symlinks() {
    if hermes_test_support::skip_unless_root("re-owning files to another uid needs root") {
        return;
    }
    let v = volume();
    let report = repair_ownership(&data_volume(&v.root), UID, GID).unwrap();

    // Re-owned: the root itself, allowlisted files, everything under subtrees.
    for path in [
        "",
        ".env",
        "config.yaml",
        "SOUL.md",
        "profiles",
        "profiles/coder",
        "profiles/coder/SOUL.md",
        "profiles/coder/sessions/s1.json",
        "cron/root_owned.json",
        "logs/gateways/default/current",
    ] {
        assert_eq!(owner(&v.root.join(path)), (UID, GID), "{path}");
    }
    // Modes: exact for .env and config.yaml, u+rw for the rest.
    assert_eq!(mode(&v.root.join(".env")), 0o600);
    assert_eq!(mode(&v.root.join("config.yaml")), 0o640);
    assert_eq!(mode(&v.root.join("SOUL.md")), 0o644);

    // Not on the allowlist: untouched.
    assert_eq!(owner(&v.root.join("host_secret.json")), (0, 0));

    // Symlinks: still symlinks, and no target outside the volume was re-owned.
    for link in [
        "auth.json",
        "skills",
        "profiles/coder/escape",
        "profiles/coder/escape-dir",
    ] {
        let meta = std::fs::symlink_metadata(v.root.join(link)).unwrap();
        assert!(
            meta.file_type().is_symlink(),
            "{link} is no longer a symlink"
        );
    }
    for target in ["target.txt", "auth-target.json", "dir", "dir/inner.txt", ""] {
        assert_eq!(
            owner(&v.outside.join(target)),
            (0, 0),
            "outside/{target} was re-owned"
        );
    }
    assert_eq!(mode(&v.outside.join("auth-target.json")), 0o600);

    // Refusals are reported as data, by path.
    assert_eq!(report.refused, 2, "{report:?}");
    let refusals: Vec<_> = report
        .warnings
        .iter()
        .filter(|w| w.starts_with("refusing"))
        .collect();
    assert!(
        refusals
            .iter()
            .any(|w| w.contains("chown/chmod through symlinked path") && w.contains("auth.json")),
        "{refusals:?}"
    );
    assert!(
        refusals
            .iter()
            .any(|w| w.contains("recursive chown through symlinked path") && w.contains("skills")),
        "{refusals:?}"
    );
    assert_eq!(report.links_not_followed, 2, "{report:?}");
    assert_eq!(report.failed, 0, "{report:?}");
    assert!(report.changed >= 10, "{report:?}");
    assert_eq!(report.modes_set, 3, "{report:?}");

    // A second boot finds nothing to do.
    let again = repair_ownership(&data_volume(&v.root), UID, GID).unwrap();
    assert_eq!(
        (again.changed, again.modes_set, again.failed),
        (0, 0, 0),
        "{again:?}"
    );
    assert_eq!(again.refused, 2);
}

#[test]
fn symlinked_parent_of_a_nested_subtree_is_refused() {
    if hermes_test_support::skip_unless_root("re-owning files to another uid needs root") {
        return;
    }
    let v = volume();
    // `platforms` -> outside, so `platforms/pairing` would resolve outside the volume.
    std::fs::create_dir_all(v.outside.join("pairing")).unwrap();
    write(&v.outside.join("pairing/p.json"), "{}", 0o644);
    symlink(&v.outside, v.root.join("platforms")).unwrap();
    let plan = RepairPlan {
        root: v.root.clone(),
        chown_root: false,
        files: vec![],
        subtrees: vec!["platforms/pairing".into()],
        links: Vec::new(),
    };
    let report = repair_ownership(&plan, UID, GID).unwrap();
    assert_eq!(report.refused, 1, "{report:?}");
    assert!(report.warnings[0].contains("platforms"), "{report:?}");
    assert_eq!(owner(&v.outside.join("pairing/p.json")), (0, 0));
    assert_eq!(owner(&v.outside.join("pairing")), (0, 0));
    // chown_root: false leaves the root alone.
    assert_eq!(owner(&v.root), (0, 0));
}

#[test]
fn repair_to_the_current_owner_changes_nothing_and_needs_no_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("config.yaml"), "x", 0o640);
    write(&root.join("logs/a.log"), "x", 0o644);
    let (uid, gid) = owner(root);
    let plan = RepairPlan {
        root: root.to_owned(),
        chown_root: true,
        files: vec![
            FileRule::with_mode("config.yaml", 0o640),
            FileRule::owned("absent.json"),
        ],
        subtrees: vec!["logs".into(), "missing".into()],
        links: Vec::new(),
    };
    let report = repair_ownership(&plan, uid, gid).unwrap();
    assert_eq!(report.changed, 0, "{report:?}");
    assert_eq!(report.unchanged, 4, "{report:?}"); // root, config.yaml, logs, logs/a.log
    assert_eq!((report.failed, report.refused, report.modes_set), (0, 0, 0));
    assert!(report.warnings.is_empty(), "{report:?}");
}

#[test]
fn missing_root_is_an_error_with_a_hint() {
    let plan = data_volume("/nonexistent/hermes-data");
    let err = repair_ownership(&plan, UID, GID).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/hermes-data"),
        "{err}"
    );
    assert!(err.hint().unwrap().contains("mounted"));
}

#[test]
fn not_root_means_failures_are_reported_not_fatal() {
    if is_root() {
        // Root can chown anything: the unprivileged path is proved by this same test, run by
        // this same binary as `nobody`.
        use std::os::unix::process::CommandExt;
        // A scratch directory nobody may write in (this machine's /tmp may be root-only).
        let scratch = tempfile::tempdir().unwrap();
        std::os::unix::fs::chown(scratch.path(), Some(65534), Some(65534)).unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env("TMPDIR", scratch.path())
            .args([
                "--exact",
                "ownership::not_root_means_failures_are_reported_not_fatal",
                "--nocapture",
            ])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("1 passed"),
            "as nobody: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("logs/a.log"), "x", 0o644);
    let plan = RepairPlan {
        root: dir.path().to_owned(),
        chown_root: false,
        files: vec![],
        subtrees: vec!["logs".into()],
        links: Vec::new(),
    };
    let report = repair_ownership(&plan, 0, 0).unwrap();
    assert!(report.failed >= 1, "{report:?}");
    assert!(report.warnings[0].starts_with("cannot chown"), "{report:?}");
}

/// Unmounts on drop, so a failing assertion does not leave a mount behind.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_subtree_that_is_a_separate_mount_is_not_reowned() {
    if hermes_test_support::skip_unless_root("mounting a tmpfs for the test needs root") {
        return;
    }
    let v = volume();
    let workspace = v.root.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "hermes-test", workspace.to_str().unwrap()])
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        return hermes_test_support::skip("cannot mount a tmpfs here (no CAP_SYS_ADMIN?)");
    }
    let _mount = Mount(workspace.clone());
    write(
        &workspace.join("host-project/main.rs"),
        "fn main() {}",
        0o644,
    );

    let report = repair_ownership(&data_volume(&v.root), UID, GID).unwrap();
    assert_eq!(owner(&workspace), (0, 0));
    assert_eq!(owner(&workspace.join("host-project/main.rs")), (0, 0));
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("workspace") && w.contains("separate mount")),
        "{report:?}"
    );
    // The rest of the volume was still repaired.
    assert_eq!(owner(&v.root.join("profiles/coder/SOUL.md")), (UID, GID));
}

/// A file hard-linked into the volume may have its other name anywhere on the filesystem
/// (`/etc/shadow` linked into `logs/` by the service user): re-owning the inode would give
/// that file away, so it is skipped, in a subtree and on the allowlist alike.
#[test]
fn repair_skips_files_with_more_than_one_hard_link() {
    if hermes_test_support::skip_unless_root("re-owning files to another uid needs root") {
        return;
    }
    let v = volume();
    let secret = v.outside.join("shadow");
    write(&secret, "root:$6$...\n", 0o600);
    std::fs::hard_link(&secret, v.root.join("logs/shadow-link")).unwrap();
    std::fs::remove_file(v.root.join("auth.json")).unwrap();
    std::fs::hard_link(&secret, v.root.join("auth.json")).unwrap();

    let report = repair_ownership(&data_volume(&v.root), UID, GID).unwrap();

    assert_eq!(owner(&secret), (0, 0), "the linked file was given away");
    assert_eq!(mode(&secret), 0o600);
    assert_eq!(report.hardlinks_skipped, 2, "{report:?}");
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.contains("shadow-link") && w.contains("3 hard links")),
        "{:?}",
        report.warnings
    );
    // Everything else in the subtree is still repaired.
    assert_eq!(
        owner(&v.root.join("logs/gateways/default/current")),
        (UID, GID)
    );
}

/// A rule's mode is the most a file may have: a stricter file (the original implementation
/// writes `config.yaml` 0600) stays as strict, a looser one is tightened.
#[test]
fn repair_tightens_modes_and_never_loosens_them() {
    if hermes_test_support::skip_unless_root("re-owning files to another uid needs root") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("config.yaml"), "model: x\n", 0o600);
    write(&dir.path().join("loose.yaml"), "x\n", 0o666);
    let plan = RepairPlan {
        root: dir.path().to_owned(),
        chown_root: false,
        files: vec![
            FileRule::with_mode("config.yaml", 0o640),
            FileRule::with_mode("loose.yaml", 0o640),
        ],
        subtrees: vec![],
        links: Vec::new(),
    };
    repair_ownership(&plan, UID, GID).unwrap();
    assert_eq!(mode(&dir.path().join("config.yaml")), 0o600);
    assert_eq!(mode(&dir.path().join("loose.yaml")), 0o640);
}

/// The durable install target is a link the volume holds itself (to its active generation):
/// the link is re-owned, never followed, and no warning is raised; a link planted to point
/// outside is re-owned the same way and what it points at is left alone; a directory there
/// (a volume from before generations) is repaired as a subtree.
#[test]
fn the_volumes_own_links_are_reowned_themselves_without_a_warning() {
    if hermes_test_support::skip_unless_root("re-owning files to another uid needs root") {
        return;
    }
    let v = volume();
    let store = v.root.join("lazy-packages.generations");
    write(&store.join("0001/pkg/__init__.py"), "", 0o444);
    symlink(
        "lazy-packages.generations/0001",
        v.root.join("lazy-packages"),
    )
    .unwrap();
    let plan = data_volume(&v.root)
        .with_links(["lazy-packages"])
        .with_subtrees_added(["lazy-packages.generations"]);
    let report = repair_ownership(&plan, UID, GID).unwrap();
    assert!(
        !report.warnings.iter().any(|w| w.contains("lazy-packages")),
        "{report:?}"
    );
    assert_eq!(
        owner(&v.root.join("lazy-packages")),
        (UID, GID),
        "the link itself"
    );
    assert_eq!(
        owner(&store.join("0001/pkg/__init__.py")),
        (UID, GID),
        "through the store"
    );

    // Pointed outside: only the link changes hands.
    std::fs::remove_file(v.root.join("lazy-packages")).unwrap();
    symlink(&v.outside, v.root.join("lazy-packages")).unwrap();
    let report = repair_ownership(&plan, UID, GID).unwrap();
    assert_eq!(owner(&v.root.join("lazy-packages")), (UID, GID));
    assert_eq!(
        owner(&v.outside.join("target.txt")),
        (0, 0),
        "never followed"
    );
    assert_eq!(
        report.refused, 2,
        "only the volume's planted links, `auth.json` and `skills`: {report:?}"
    );
    assert!(
        !report.warnings.iter().any(|w| w.contains("lazy-packages")),
        "{report:?}"
    );

    // A flat directory from before generations: a subtree.
    std::fs::remove_file(v.root.join("lazy-packages")).unwrap();
    write(&v.root.join("lazy-packages/six.py"), "", 0o644);
    repair_ownership(&plan, UID, GID).unwrap();
    assert_eq!(owner(&v.root.join("lazy-packages/six.py")), (UID, GID));
}
