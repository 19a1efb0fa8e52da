//! `--dry-run` through the real binary: the installer only resolves, and the output says what
//! would run, the installer's own plan and that nothing changed — never `ran:` or `installed`.

use std::path::Path;
use std::process::Command;

use hermes_test_support::wheel::{WheelIndex, write_wheel};

use crate::util::{TestContext, render};

#[test]
fn deps_install_dry_run_says_nothing_was_installed() {
    // The tests' `PATH` is `/usr/bin:/bin`: the venv needs a python3 there.
    let Some(python) = ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
    else {
        hermes_test_support::skip("no python3 in /usr/bin or /bin (the PATH `hermes` runs with)");
        return;
    };
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let venv = t.dir.path().join("venv");
    let made = Command::new(python)
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let wheels = t.dir.path().join("wheels");
    write_wheel(&wheels, "hermes_dryrun_pkg", "1.0", &[]);
    let index = WheelIndex::serve(&wheels);
    let url = index.url();

    let out = t
        .cmd(&["deps", "install", "--dry-run", "hermes-dryrun-pkg==1.0"])
        .env("HERMES_VENV", &venv)
        .env("PIP_INDEX_URL", &url)
        .env("UV_INDEX_URL", &url)
        .env("PIP_CONFIG_FILE", "/dev/null")
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
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
    let check = Command::new(venv.join("bin/python"))
        .args(["-c", "import hermes_dryrun_pkg"])
        .output()
        .unwrap();
    assert!(!check.status.success(), "the dry run installed the package");

    let json: serde_json::Value = serde_json::from_slice(
        &t.cmd(&[
            "deps",
            "install",
            "--dry-run",
            "--json",
            "hermes-dryrun-pkg==1.0",
        ])
        .env("HERMES_VENV", &venv)
        .env("PIP_INDEX_URL", &url)
        .env("UV_INDEX_URL", &url)
        .env("PIP_CONFIG_FILE", "/dev/null")
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
