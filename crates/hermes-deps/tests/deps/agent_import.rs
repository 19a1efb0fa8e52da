//! What our installer puts in the durable target reaches the original agent's Python.
//!
//! The agent (`hermes-agent` 0.19.0, `hermes_test_support::original_agent`, opt-in with
//! `HERMES_TEST_PYPI=1`) is run the way the `full` image runs it: its venv with
//! `docker/agent-site.sh` applied, and the image's variables (`HERMES_VENV` naming the agent's
//! venv, `HERMES_DISABLE_LAZY_INSTALLS=1`, `HERMES_LAZY_INSTALL_TARGET`). The cached venv is a
//! shared, read-only reference, so each test works on a *shadow* of it: a venv of its own whose
//! `bin/python3` is the same interpreter and whose site-packages holds a symlink to every entry
//! of the agent's, plus whatever the script writes. Every interpreter runs with
//! `PYTHONDONTWRITEBYTECODE=1`, so nothing is written through those symlinks.
//!
//! Packages come from wheels the tests write (no network): ours are installed with
//! `--no-index --find-links`, the agent's installer gets the same through `PIP_*` variables.
//!
//! Covered: the agent's interpreter imports our install from the target, which is the LAST
//! `sys.path` entry, only once the script is applied, and the agent's own start-up activation
//! then changes nothing; the agent's venv wins a collision, even against a `.pth` in the target
//! that prepends; the agent's runtime installer finds our install already there (it cannot
//! reach any index), installs a package of its own into the same directory with the same
//! layout and ABI stamp (ours is not wiped), and our availability check sees that one; with
//! `HERMES_VENV` naming the agent's venv, our installer pins shared dependencies to the
//! agent's versions.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::wheel::write_wheel;
use hermes_deps::env::{DISABLE_VAR, TARGET_VAR, VENV_VAR};
use hermes_deps::process::{Captured, run_captured};
use hermes_deps::{Environment, InstallOptions, InstallerChoice, install_specs};
use hermes_test_support::original_agent;
use hermes_test_support::shadow_venv::ShadowVenv;

const TIMEOUT: Duration = Duration::from_secs(180);

/// A shadow of the agent's venv, a durable target, a home and a wheelhouse in one temp dir.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    shadow: ShadowVenv,
    venv: PathBuf,
    /// The shadow venv's site-packages.
    site: PathBuf,
    target: PathBuf,
    home: PathBuf,
    wheels: PathBuf,
}

/// `python -c code` with `env`, run in `cwd`.
fn python(python: &Path, env: &Environment, cwd: &Path, code: &str) -> Captured {
    let mut cmd = Command::new(python);
    cmd.env_clear()
        .envs(env.child_vars())
        .current_dir(cwd)
        .args(["-c", code]);
    run_captured(&mut cmd, TIMEOUT).unwrap()
}

/// `PATH` without the directories holding `program`, so the agent's installer takes its pip
/// tier whatever the host has (its uv tier is tried first when uv is on `PATH`).
fn path_without(env: &Environment, program: &str) -> String {
    let dirs: Vec<PathBuf> = std::env::split_paths(env.get("PATH").unwrap_or("/usr/bin:/bin"))
        .filter(|d| !d.join(program).exists())
        .collect();
    std::env::join_paths(dirs)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

impl Fixture {
    /// The shadow venv, or `None` (after a skip message) without the original agent.
    fn new() -> Option<Self> {
        let agent = original_agent()?;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let shadow = ShadowVenv::of(&agent.python, &root);
        let fixture = Self {
            target: root.join("data/lazy-packages"),
            home: root.join("data"),
            wheels: root.join("wheels"),
            venv: shadow.venv.clone(),
            site: shadow.site.clone(),
            shadow,
            root,
            _dir: dir,
        };
        std::fs::create_dir_all(&fixture.home).unwrap();
        Some(fixture)
    }

    /// Runs `docker/agent-site.sh` on the shadow venv, as the image build does.
    fn apply_site_script(&self) {
        self.shadow.apply_site_script();
    }

    /// The environment the `full` image gives the agent's processes and our CLI.
    fn image_env(&self) -> Environment {
        let host = Environment::from_process();
        Environment::default()
            .with("PATH", &path_without(&host, "uv"))
            .with("HOME", &self.home.to_string_lossy())
            .with("HERMES_HOME", &self.home.to_string_lossy())
            .with(VENV_VAR, &self.venv.to_string_lossy())
            .with(DISABLE_VAR, "1")
            .with(TARGET_VAR, &self.target.to_string_lossy())
            .with("PYTHONDONTWRITEBYTECODE", "1")
            .with("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            // Whatever the agent's installer tries, it never reaches a real index.
            .with("PIP_NO_INDEX", "1")
    }

    /// Our installer, the way `hermes deps install` calls it, from the local wheelhouse.
    fn ours(&self) -> InstallOptions {
        let mut o = InstallOptions::new(&self.home, true, self.image_env());
        o.no_index = true;
        o.find_links = vec![self.wheels.clone()];
        o.installer = InstallerChoice::Pip;
        o
    }

    /// The agent's interpreter (the shadow venv) running `code` with the image's environment.
    fn agent(&self, env: &Environment, code: &str) -> Captured {
        let out = python(&self.venv.join("bin/python3"), env, &self.root, code);
        assert!(
            !out.stderr.contains("Error processing line"),
            "a .pth line failed at start-up: {}",
            out.stderr
        );
        out
    }

    /// [`Fixture::agent`] with the file permissions of the images' service user, never
    /// root's: as root (CI) it runs through `setpriv` without the capabilities that let root
    /// write anywhere (`CAP_DAC_OVERRIDE`, `CAP_FOWNER`), so a sealed generation stops it as it
    /// stops the service user. (A real uid switch cannot run this interpreter, which may live
    /// under `/root`.)
    fn agent_as_service_user(&self, env: &Environment, code: &str) -> Captured {
        let python = self.venv.join("bin/python3");
        let mut cmd = if effective_uid() == Some(0) {
            let mut c = Command::new("setpriv");
            c.args(["--bounding-set", "-dac_override,-fowner", "--"])
                .arg(&python);
            c
        } else {
            Command::new(&python)
        };
        cmd.env_clear()
            .envs(env.child_vars())
            .current_dir(&self.root)
            .args(["-c", code]);
        run_captured(&mut cmd, TIMEOUT).unwrap()
    }

    /// The version of `dist` the agent's interpreter sees.
    fn agent_version(&self, dist: &str) -> String {
        let out = self.agent(
            &self.image_env(),
            &format!("import importlib.metadata as md; print(md.version({dist:?}))"),
        );
        assert!(out.success, "{}", out.stderr);
        out.stdout.trim().to_string()
    }

    /// Installs `spec` with our installer and checks it reports success.
    fn install_ours(&self, spec: &str) {
        let out = install_specs(&[spec], &self.ours());
        assert!(out.ok, "{out:?}");
        assert!(out.generation.is_some(), "a new generation: {out:?}");
        assert!(out.still_missing.is_empty(), "{:?}", out.still_missing);
    }
}

/// Prints, as lines: the module's file, the last `sys.path` entry, how many times the target
/// is on `sys.path` (also after the agent's own start-up activation), and the version.
const IMPORT_PROBE: &str = r#"import os, sys, importlib.metadata as md
import hermes_probe_plugin as m
t = os.environ["HERMES_LAZY_INSTALL_TARGET"]
print(m.__file__)
print(sys.path[-1])
print(sys.path.count(t))
import hermes_bootstrap
print(sys.path.count(t), sys.path[-1] == t)
print(md.version("hermes-probe-plugin"))
"#;

#[test]
fn agent_imports_our_install_from_the_end_of_sys_path() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "hermes_probe_plugin", "1.0", &[]);
    f.install_ours("hermes-probe-plugin==1.0");
    assert!(f.target.join("hermes_probe_plugin/__init__.py").is_file());

    let before = f.agent(&f.image_env(), "import hermes_probe_plugin");
    assert!(
        !before.success && before.stderr.contains("ModuleNotFoundError"),
        "without the image's site file the target is not on sys.path: {before:?}"
    );

    f.apply_site_script();
    let out = f.agent(&f.image_env(), IMPORT_PROBE);
    assert!(out.success, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let target = f.target.to_string_lossy();
    assert!(
        lines[0].starts_with(&*target),
        "imported from: {}",
        lines[0]
    );
    assert_eq!(lines[1], target, "the target is the last sys.path entry");
    assert_eq!(lines[2], "1");
    assert_eq!(
        lines[3], "1 True",
        "the agent's own activation finds it already there"
    );
    assert_eq!(lines[4], "1.0");

    let unset = f.agent(
        &f.image_env().without(TARGET_VAR),
        "import hermes_probe_plugin",
    );
    assert!(
        !unset.success,
        "without HERMES_LAZY_INSTALL_TARGET the site file adds nothing"
    );
}

#[test]
fn agent_venv_wins_a_collision_with_the_target() {
    let Some(f) = Fixture::new() else { return };
    f.apply_site_script();
    let env = f.image_env();
    let core_version = f.agent_version("idna");

    // A copy of a package the agent ships, as a stale or hostile install could leave it:
    // our installer would refuse it (core constraints), so it is put there directly.
    write_wheel(&f.wheels, "idna", "0.0.1", &[]);
    let pip = Command::new(f.venv.join("bin/python3"))
        .args(["-m", "pip", "install", "-q", "--no-index", "--find-links"])
        .arg(&f.wheels)
        .arg("--target")
        .arg(&f.target)
        .arg("idna==0.0.1")
        .env_clear()
        .envs(env.clone().without(TARGET_VAR).child_vars())
        .current_dir(&f.root)
        .output()
        .unwrap();
    assert!(
        pip.status.success(),
        "{}",
        String::from_utf8_lossy(&pip.stderr)
    );
    assert!(f.target.join("idna/__init__.py").is_file());
    // And a `.pth` in the target that tries to put a directory holding `idna` first.
    let front = f.root.join("front");
    std::fs::create_dir_all(front.join("idna")).unwrap();
    std::fs::write(
        front.join("idna/__init__.py"),
        "raise SystemExit('front idna')\n",
    )
    .unwrap();
    std::fs::write(
        f.target.join("hermes-front.pth"),
        format!(
            "import sys; sys.path.insert(0, {:?})\n",
            front.to_string_lossy()
        ),
    )
    .unwrap();

    let out = f.agent(
        &env,
        "import sys, json, idna, importlib.metadata as md\n\
         print(idna.__file__)\nprint(md.version('idna'))\nprint(json.dumps(sys.path))",
    );
    assert!(out.success, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines[0].starts_with(&*f.site.to_string_lossy()),
        "the agent's venv wins: {}",
        lines[0]
    );
    assert_eq!(lines[1], core_version);
    let path: Vec<PathBuf> = serde_json::from_str(lines[2]).unwrap();
    let at = |p: &Path| path.iter().position(|e| e == p);
    let site = at(&f.site).expect("the venv's site-packages is on sys.path");
    assert!(at(&f.target) > Some(site), "{path:?}");
    assert!(
        at(&front) > Some(site),
        "the target's .pth cannot get ahead: {path:?}"
    );
}

/// Registers `spec` as lazy feature `feature` of the agent's installer, prints what it finds
/// missing, runs its `ensure`, and imports `module`.
fn agent_ensure(feature: &str, spec: &str, module: &str) -> String {
    format!(
        "from tools import lazy_deps as L\n\
         L.LAZY_DEPS[{feature:?}] = ({spec:?},)\n\
         print(list(L.feature_missing({feature:?})))\n\
         L.ensure({feature:?}, prompt=False)\n\
         import {module}\n\
         print({module}.__file__)\n"
    )
}

#[test]
fn agent_installer_finds_our_install_and_cannot_write_into_a_generation() {
    let Some(f) = Fixture::new() else { return };
    f.apply_site_script();
    write_wheel(&f.wheels, "hermes_probe_plugin", "1.0", &[]);
    write_wheel(&f.wheels, "hermes_probe_two", "2.0", &[]);
    f.install_ours("hermes-probe-plugin==1.0");
    let store = hermes_deps::generations::Store::for_target(&f.target);
    let generation = store.active().expect("an active generation").path;
    let before = std::fs::read_dir(&generation).unwrap().count();

    // The agent's installer, asked for what we installed, finds it: with no index reachable,
    // an install attempt would fail.
    let found = f.agent(
        &f.image_env(),
        &agent_ensure(
            "test.ours",
            "hermes-probe-plugin==1.0",
            "hermes_probe_plugin",
        ),
    );
    assert!(found.success, "{}", found.stderr);
    let lines: Vec<&str> = found.stdout.lines().collect();
    assert_eq!(lines[0], "[]", "already installed for the agent");
    assert!(
        lines[1].starts_with(&*f.target.to_string_lossy()),
        "{}",
        lines[1]
    );

    // Without the `uv` shim on PATH its installer falls to `pip install --target`, which
    // cannot write into the sealed generation: the install fails and nothing is mixed in.
    // (With the shim, as in the images, it lands in a new generation: the CLI suite's
    // `agent_installs` tests.)
    let env = f
        .image_env()
        .with("PIP_FIND_LINKS", &f.wheels.to_string_lossy());
    let theirs = f.agent_as_service_user(
        &env,
        &format!(
            "try:\n    exec({:?})\nexcept Exception as e:\n    print('refused', type(e).__name__)\n",
            agent_ensure("test.theirs", "hermes-probe-two==2.0", "hermes_probe_two")
        ),
    );
    assert!(theirs.stdout.contains("refused"), "{theirs:?}");
    assert_eq!(std::fs::read_dir(&generation).unwrap().count(), before);
    assert_eq!(store.active().map(|g| g.path), Some(generation));
}

/// The effective uid, from /proc (this test binary links no libc binding).
fn effective_uid() -> Option<u32> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
        })
}

/// With `HERMES_VENV` naming the agent's venv (as the `full` image sets it), our installer
/// pins shared dependencies to the agent's versions: a plugin needing another version of a
/// package the agent ships fails at resolve time instead of leaving a copy in the target
/// that the agent's own would shadow.
#[test]
fn our_installer_resolves_against_the_agents_packages() {
    let Some(f) = Fixture::new() else { return };
    f.apply_site_script();
    write_wheel(&f.wheels, "idna", "99.0", &[]);
    write_wheel(&f.wheels, "hermes_needs_idna", "1.0", &["idna>=99"]);
    let out = install_specs(&["hermes-needs-idna==1.0"], &f.ours());
    assert!(!out.ok, "{out:?}");
    let pinned = format!("(constraint) idna=={}", f.agent_version("idna"));
    assert!(
        out.stdout.contains(&pinned) && out.stderr.contains("conflicting dependencies"),
        "{}\n{}",
        out.stdout,
        out.stderr
    );
    assert!(!f.target.join("idna").exists());
    assert!(!f.target.join("hermes_needs_idna").exists());
}

/// As root, the site file adds the target only when root owns it and no one else can write
/// it: the target is on the volume, which the service user writes, so what is planted there
/// must never run as root. Runs as root (CI); elsewhere it skips.
#[test]
fn as_root_a_target_another_user_can_write_is_not_imported() {
    if hermes_test_support::skip_unless_root("needs root to run the agent's interpreter as root") {
        return;
    }
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "hermes_probe_plugin", "1.0", &[]);
    f.install_ours("hermes-probe-plugin==1.0");
    f.apply_site_script();
    let imported = |f: &Fixture| {
        f.agent(&f.image_env(), "import hermes_probe_plugin")
            .success
    };
    use std::os::unix::fs::PermissionsExt;
    let set_mode = |mode: u32| {
        std::fs::set_permissions(&f.target, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    set_mode(0o755);
    assert!(imported(&f), "root's own, not writable by others: used");
    set_mode(0o775);
    assert!(!imported(&f), "group-writable: not imported as root");
    set_mode(0o755);
    std::os::unix::fs::chown(&f.target, Some(65534), None).unwrap();
    assert!(!imported(&f), "another user's: not imported as root");
}
