//! Shared helpers for the public-API tests.

pub use hermes_test_support::wheel;

use std::path::{Path, PathBuf};
use std::process::Command;

use hermes_deps::{Environment, InstallOptions, InstallerChoice};

/// `python3` on `PATH`.
pub fn python3() -> Option<PathBuf> {
    Environment::from_process().which("python3")
}

/// `python3 -m venv path`.
pub fn make_venv(path: &Path) {
    let py = python3().expect("python3");
    let st = Command::new(py)
        .args(["-m", "venv"])
        .arg(path)
        .status()
        .expect("venv");
    assert!(st.success(), "python3 -m venv failed");
}

/// `pip install` into `venv` from the wheelhouse only.
pub fn pip_into_venv(venv: &Path, wheelhouse: &Path, args: &[&str]) {
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-index",
            "--find-links",
        ])
        .arg(wheelhouse)
        .args(args)
        .output()
        .expect("pip");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Installer options for a hermetic install: pip, no index, the wheelhouse.
pub fn options(home: &Path, env: Environment, wheelhouse: &Path) -> InstallOptions {
    let mut o = InstallOptions::new(home, true, env);
    o.no_index = true;
    o.find_links = vec![wheelhouse.to_path_buf()];
    o.installer = InstallerChoice::Pip;
    o
}
