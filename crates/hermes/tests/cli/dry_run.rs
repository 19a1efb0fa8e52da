//! `--dry-run` through the real binary: the installer only resolves, and the output says what
//! would run, the installer's own plan and that nothing changed — never `ran:` or `installed`.

use crate::util::{PyEnv, TestContext, render};

#[test]
fn deps_install_dry_run_says_nothing_was_installed() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let Some(py) = PyEnv::new(&t, "hermes_dryrun_pkg") else {
        return;
    };

    let out = py
        .hermes(
            &t,
            &["deps", "install", "--dry-run", "hermes-dryrun-pkg==1.0"],
        )
        .output()
        .unwrap();
    let text = render(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("would run: ") && stdout.contains("pip install"),
        "{text}"
    );
    // The installer's own plan (pip: `Would install hermes-dryrun-pkg-1.0`; uv: `Would
    // install 1 package`), then the verdict.
    assert!(stdout.contains("  Would install "), "{text}");
    assert!(
        stdout.ends_with("dry run: nothing was installed or changed\n"),
        "{text}"
    );
    assert!(
        !stdout
            .lines()
            .any(|l| l.starts_with("ran:") || l.starts_with("installed")),
        "{text}"
    );
    // And truly nothing was installed.
    let check = py.import("hermes_dryrun_pkg");
    assert!(!check.status.success(), "the dry run installed the package");

    let json: serde_json::Value = serde_json::from_slice(
        &py.hermes(
            &t,
            &[
                "deps",
                "install",
                "--dry-run",
                "--json",
                "hermes-dryrun-pkg==1.0",
            ],
        )
        .output()
        .unwrap()
        .stdout,
    )
    .unwrap();
    assert_eq!(json["dry_run"], true, "{json}");
    assert!(
        json["would"][0]
            .as_str()
            .is_some_and(|l| l.starts_with("Would install")),
        "{json}"
    );
}
