//! Test helpers shared by the workspace's test suites (a dev-dependency only).
//!
//! **Skips.** A test that cannot run here (it needs root, a tool, the network) calls [`skip`]
//! and returns: it prints `skipping: <reason>` so a local run says what it did not prove. In
//! *strict* mode — CI, where every test must run — a skip is a failure instead, so a green CI
//! run proves every test ran. Strict mode is on when `HERMES_TEST_STRICT` is truthy (`.ci/run`
//! sets it) or `CI` is `true`/`1` (as CI services set it).
//!
//! **Opt-in suites.** Suites that download from PyPI or need Docker or a browser are slow, so
//! a local run skips them unless asked ([`opt_in`]); strict mode always runs them.
//!
//! **Browser.** [`browser::Browser`] drives a headless Chromium through WebDriver for tests of
//! web pages; it skips (as above) where Chromium and its driver are not installed.
//!
//! **Small disks.** [`disk::SmallDisk`] mounts a tmpfs of a chosen size (root only) and fills
//! it, for tests about a full volume.
//!
//! **Held files.** [`held::HeldOpen`] keeps a file open in another process, as a running
//! gateway keeps its database.
//!
//! **Polling.** [`poll`] waits for an effect with a deadline that names it.
//!
//! **Logs.** [`logs::Lines`] reads back what the code under test logged through `tracing`.
//!
//! **Tokens.** [`jwt::unsigned`] makes a JWT-shaped token with the claims a test needs.
//!
//! **Wheels.** [`wheel`] writes tiny pure-Python wheels and serves them from a loopback index,
//! so install tests never reach the network.

#![deny(missing_docs)]

pub mod agent;
pub mod browser;
pub mod disk;
pub mod held;
pub mod jwt;
pub mod logs;
pub mod poll;
pub mod shadow_venv;
pub mod wheel;

/// Whether skips are failures (see the crate doc).
pub fn strict() -> bool {
    let truthy =
        |name: &str| std::env::var(name).is_ok_and(|v| hermes_errors::switch::is_truthy(&v));
    truthy("HERMES_TEST_STRICT") || truthy("CI")
}

/// Says why the calling test does not run. Panics in strict mode.
///
/// # Panics
/// In strict mode, always: a test that cannot run in CI is a broken CI set-up.
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub fn skip(reason: &str) {
    if strict() {
        panic!("skipped in strict mode (CI), which must run every test: {reason}");
    }
    println!("skipping: {reason}");
}

/// True (after [`skip`]) when this process is not root; the test should return.
pub fn skip_unless_root(reason: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        skip(reason);
    }
    !root
}

/// True when the opt-in suite named by `var` should run: `var` is truthy, or strict mode.
/// Otherwise it [`skip`]s, naming the variable that turns it on, and returns false.
pub fn opt_in(var: &str, what: &str) -> bool {
    let asked = std::env::var(var).is_ok_and(|v| !v.is_empty() && v != "0");
    if asked || strict() {
        return true;
    }
    skip(&format!("{what}; set {var}=1 to run it"));
    false
}

/// True (after [`skip`]) when `program` is not on `PATH`; the test should return.
pub fn skip_unless_on_path(program: &str) -> bool {
    let missing = find_on_path(program).is_none();
    if missing {
        skip(&format!("`{program}` is not on PATH"));
    }
    missing
}

/// Where `program` is on `PATH`, if it is.
pub fn find_on_path(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// The original Python implementation (`hermes-agent` 0.19.0 from PyPI) in a cached venv,
/// for tests that check a volume both implementations share.
#[derive(Debug, Clone)]
pub struct OriginalAgent {
    /// The venv's interpreter (`import hermes_state`, `import hermes_cli` work with it).
    pub python: std::path::PathBuf,
    /// The original's own `hermes` console script (not ours).
    pub hermes: std::path::PathBuf,
}

/// The original agent, or `None` after [`skip`]ping with the reason. Opt-in, because its
/// first use downloads ~100 MB from PyPI: `HERMES_TEST_PYPI=1`, or strict mode (CI).
///
/// The venv is made (once, then reused) by `tests/docker/original/venv.sh`, the script the
/// Docker suite uses, in `HERMES_DOCKER_CACHE` (default `/var/cache/hermes-docker-test`).
pub fn original_agent() -> Option<OriginalAgent> {
    static AGENT: std::sync::OnceLock<Result<OriginalAgent, String>> = std::sync::OnceLock::new();
    if !opt_in(
        "HERMES_TEST_PYPI",
        "the original hermes-agent is installed from PyPI",
    ) {
        return None;
    }
    match AGENT.get_or_init(|| make_original_agent(None)) {
        Ok(agent) => Some(agent.clone()),
        Err(reason) => {
            skip(reason);
            None
        }
    }
}

/// The name of the source tree of hermes-agent 0.20.1 in `../shared/fixtures/`.
pub const FIXTURE_TARBALL: &str = "hermes-agent-0.20.1-src.tar.gz";

/// Where the fixture tarball is: `HERMES_TEST_FIXTURES` (a directory) when set, else the first
/// `shared/fixtures/` beside an ancestor of this crate (`../shared/` of the repository, also
/// from a worktree deeper down). Only ever read.
pub fn fixture_tarball() -> Option<std::path::PathBuf> {
    if let Some(dir) = std::env::var_os("HERMES_TEST_FIXTURES") {
        let path = std::path::Path::new(&dir).join(FIXTURE_TARBALL);
        return path.is_file().then_some(path);
    }
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("shared/fixtures").join(FIXTURE_TARBALL))
        .find(|path| path.is_file())
}

/// hermes-agent 0.20.1 from the fixture source tree, installed editable in a cached venv (as
/// upstream installs itself since it stopped publishing wheels), or `None` after [`skip`]ping.
/// Opt-in like [`original_agent`] (its dependencies come from PyPI: `HERMES_TEST_PYPI=1`).
pub fn fixture_agent() -> Option<OriginalAgent> {
    static AGENT: std::sync::OnceLock<Result<OriginalAgent, String>> = std::sync::OnceLock::new();
    if !opt_in(
        "HERMES_TEST_PYPI",
        "hermes-agent 0.20.1 is installed from the fixture with its dependencies from PyPI",
    ) {
        return None;
    }
    let made = AGENT.get_or_init(|| match fixture_tarball() {
        Some(tarball) => make_original_agent(Some(&tarball)),
        None => Err(format!(
            "the fixture {FIXTURE_TARBALL} is not in ../shared/fixtures/ (set HERMES_TEST_FIXTURES)"
        )),
    });
    match made {
        Ok(agent) => Some(agent.clone()),
        Err(reason) => {
            skip(reason);
            None
        }
    }
}

/// Runs `tests/docker/original/venv.sh`: hermes-agent from PyPI, or from `source` (a tarball
/// of a source tree, installed editable).
fn make_original_agent(source: Option<&std::path::Path>) -> Result<OriginalAgent, String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/docker/original/venv.sh");
    let mut command = std::process::Command::new("bash");
    if let Some(source) = source {
        command.env("HERMES_ORIGINAL_SOURCE", source);
    }
    let out = command
        .arg(&script)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "the original hermes-agent could not be installed by `{}`: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let hermes = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let python = hermes.with_file_name("python");
    if !python.is_file() {
        return Err(format!("no interpreter beside `{}`", hermes.display()));
    }
    Ok(OriginalAgent { python, hermes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_path_finds_sh() {
        assert!(!skip_unless_on_path("sh"));
    }
}
