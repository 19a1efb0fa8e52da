//! The original agent's runtime installer (`tools/lazy_deps.py`, unchanged) lands its installs
//! into the durable target as install generations through the `uv` shim (`hermes` under the
//! name `uv`, first on `PATH` as in the images): hermes-agent 0.19.0 and the 0.20.1 fixture.
//! Its request is recorded as the agent's beside ours, the new generation holds both, and a
//! failed or killed install of ours leaves the previous generation active.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use hermes_test_support::shadow_venv::ShadowVenv;
use hermes_test_support::wheel::{WheelIndex, write_wheel};
use hermes_test_support::{OriginalAgent, fixture_agent, original_agent};

use crate::util::{PyEnv, TestContext, render};

/// A volume with a durable target, a shadow of the agent's venv with the image's site script,
/// a `uv` shim and a loopback index.
struct Volume {
    t: TestContext,
    shadow: ShadowVenv,
    shims: PathBuf,
    index: WheelIndex,
}

impl Volume {
    fn new(agent: &OriginalAgent) -> Self {
        let t = TestContext::new();
        t.ok(&["profile", "list"]);
        let dir = t.dir.path();
        let shadow = ShadowVenv::of(&agent.python, dir);
        shadow.apply_site_script();
        let shims = dir.join("shims");
        std::fs::create_dir_all(&shims).unwrap();
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_hermes"), shims.join("uv")).unwrap();
        let wheels = dir.join("wheels");
        write_wheel(&wheels, "hermes_ours_pkg", "1.0", &[]);
        write_wheel(&wheels, "hermes_agents_pkg", "2.0", &[]);
        let index = WheelIndex::serve(&wheels);
        Self {
            t,
            shadow,
            shims,
            index,
        }
    }

    fn target(&self) -> PathBuf {
        self.t.root().join("lazy-packages")
    }

    /// The image's environment, for the agent's processes and our CLI alike.
    fn env(&self) -> Vec<(&'static str, String)> {
        let url = self.index.url();
        vec![
            ("PATH", format!("{}:/usr/bin:/bin", self.shims.display())),
            ("HOME", self.t.home().display().to_string()),
            ("HERMES_HOME", self.t.root().display().to_string()),
            ("HERMES_VENV", self.shadow.venv.display().to_string()),
            ("HERMES_DISABLE_LAZY_INSTALLS", "1".into()),
            (
                "HERMES_LAZY_INSTALL_TARGET",
                self.target().display().to_string(),
            ),
            ("PYTHONDONTWRITEBYTECODE", "1".into()),
            ("PIP_INDEX_URL", url.clone()),
            ("UV_INDEX_URL", url),
            ("PIP_CONFIG_FILE", "/dev/null".into()),
            ("PIP_DISABLE_PIP_VERSION_CHECK", "1".into()),
        ]
    }

    fn hermes(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
        cmd.args(args).env_clear().envs(self.env());
        cmd
    }

    /// The agent's interpreter running its own installer for `spec`, then importing `module`.
    fn agent_installs(&self, spec: &str, module: &str) -> std::process::Output {
        let code = format!(
            "from tools import lazy_deps as L\n\
             L.LAZY_DEPS['test.agent'] = ({spec:?},)\n\
             L.ensure('test.agent', prompt=False)\n\
             import {module}\n\
             print({module}.__file__)\n"
        );
        Command::new(self.shadow.venv.join("bin/python3"))
            .args(["-c", &code])
            .env_clear()
            .envs(self.env())
            .current_dir(self.t.dir.path())
            .output()
            .unwrap()
    }

    fn generations(&self) -> serde_json::Value {
        let out = self
            .hermes(&["plugins", "generations", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", render(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn requests_of(overview: &serde_json::Value, id: u64) -> Vec<(String, String)> {
    overview["generations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["id"] == id)
        .unwrap_or_else(|| panic!("no generation {id}: {overview}"))["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["spec"].as_str().unwrap().to_string(),
                r["by"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn the_agents_installer_lands_in_a_new_generation(agent: &OriginalAgent) {
    let v = Volume::new(agent);
    let ours = v
        .hermes(&["deps", "install", "hermes-ours-pkg==1.0"])
        .output()
        .unwrap();
    assert!(ours.status.success(), "{}", render(&ours));

    let theirs = v.agent_installs("hermes-agents-pkg==2.0", "hermes_agents_pkg");
    let text = render(&theirs);
    assert!(theirs.status.success(), "{text}");
    assert!(
        Path::new(String::from_utf8_lossy(&theirs.stdout).trim()).starts_with(v.target()),
        "imported from the durable target: {text}"
    );
    let overview = v.generations();
    assert_eq!(overview["pointer"], "generation 2", "{overview}");
    assert_eq!(
        requests_of(&overview, 2),
        [
            ("hermes-ours-pkg==1.0".to_string(), "cli".to_string()),
            ("hermes-agents-pkg==2.0".to_string(), "agent".to_string())
        ]
    );
    // Both in the active generation; the first one untouched.
    assert!(v.target().join("hermes_ours_pkg/__init__.py").is_file());
    let first = v.t.root().join("lazy-packages.generations/0001");
    assert!(first.join("hermes_ours_pkg").is_dir() && !first.join("hermes_agents_pkg").exists());

    // What the shim is not for goes to a real uv, and there is none here.
    let other = Command::new(v.shims.join("uv"))
        .arg("--version")
        .env_clear()
        .env("PATH", format!("{}:/nonexistent", v.shims.display()))
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(127), "{}", render(&other));
    assert!(
        render(&other).contains("not installed here"),
        "{}",
        render(&other)
    );
}

#[test]
fn the_agents_installer_lands_in_a_new_generation_0_19() {
    if let Some(agent) = original_agent() {
        the_agents_installer_lands_in_a_new_generation(&agent);
    }
}

#[test]
fn the_agents_installer_lands_in_a_new_generation_0_20() {
    if let Some(agent) = fixture_agent() {
        the_agents_installer_lands_in_a_new_generation(&agent);
    }
}

/// `hermes deps install` SIGKILLed while its installer is writing: the previous generation
/// stays active, the half-written one is listed as unfinished and the next install removes it.
#[test]
fn a_killed_install_leaves_the_previous_generation_active() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let Some(py) = PyEnv::new(&t, "hermes_killed_pkg") else {
        return;
    };
    let target = t.root().join("lazy-packages");
    let sealed = |cmd: &mut Command| {
        cmd.env("HERMES_DISABLE_LAZY_INSTALLS", "1")
            .env("HERMES_LAZY_INSTALL_TARGET", &target);
    };
    let mut first = py.hermes(&t, &["deps", "install", "hermes-killed-pkg==1.0"]);
    sealed(&mut first);
    let out = first.output().unwrap();
    assert!(out.status.success(), "{}", render(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("switched to generation 1"),
        "{}",
        render(&out)
    );

    // An installer that writes part of a package, then hangs until killed.
    let slow = t.dir.path().join("slow-bin");
    std::fs::create_dir_all(&slow).unwrap();
    std::fs::write(
        slow.join("uv"),
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --target ] && t=$2; shift; done\n\
         mkdir -p \"$t/partial_pkg\" && echo 'x =' > \"$t/partial_pkg/__init__.py\"\nexec sleep 60\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(slow.join("uv"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut killed = py.hermes(&t, &["deps", "install", "hermes-killed-pkg==1.0", "other"]);
    sealed(&mut killed);
    killed
        .env("PATH", format!("{}:/usr/bin:/bin", slow.display()))
        .process_group(0);
    let mut child = killed.spawn().unwrap();
    let partial = t
        .root()
        .join("lazy-packages.generations/0002/partial_pkg/__init__.py");
    hermes_test_support::poll::until_true(
        "the half-written package",
        std::time::Duration::from_secs(60),
        || partial.exists(),
    );
    let pgid = i32::try_from(child.id()).unwrap();
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let _ = child.wait();

    let mut listed = t.cmd(&["plugins", "generations", "--json"]);
    sealed(&mut listed);
    let overview: serde_json::Value =
        serde_json::from_slice(&listed.output().unwrap().stdout).unwrap();
    assert_eq!(overview["pointer"], "generation 1", "{overview}");
    let unfinished: Vec<&serde_json::Value> = overview["generations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["finished"] == false)
        .collect();
    assert_eq!(unfinished.len(), 1, "{overview}");
    assert_eq!(
        std::fs::read_link(&target).unwrap(),
        Path::new("lazy-packages.generations/0001")
    );
    assert!(
        py.import_from(&target, "hermes_killed_pkg")
            .status
            .success()
    );

    let mut again = py.hermes(&t, &["deps", "install", "hermes-killed-pkg==1.0"]);
    sealed(&mut again);
    let out = again.output().unwrap();
    assert!(out.status.success(), "{}", render(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("switched from generation 1 to 2"),
        "{}",
        render(&out)
    );
    assert!(
        !target.join("partial_pkg").exists(),
        "the half-written install is gone"
    );
}

#[test]
fn repair_gc_and_generations_say_what_there_is() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let out = t
        .cmd(&["plugins", "gc"])
        .env_remove("HERMES_LAZY_INSTALL_TARGET")
        .output()
        .unwrap();
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("no durable install target") && text.contains("HERMES_LAZY_INSTALL_TARGET"),
        "{text}"
    );
    let target = t.root().join("lazy-packages");
    let repair = t
        .cmd(&["plugins", "repair"])
        .env("HERMES_DISABLE_LAZY_INSTALLS", "1")
        .env("HERMES_LAZY_INSTALL_TARGET", &target)
        .output()
        .unwrap();
    let text = render(&repair);
    assert_eq!(repair.status.code(), Some(0), "{text}");
    assert!(text.contains("no plugin packages installed"), "{text}");
    let listed = t
        .cmd(&["plugins", "generations"])
        .env("HERMES_LAZY_INSTALL_TARGET", &target)
        .output()
        .unwrap();
    let text = render(&listed);
    assert!(listed.status.success(), "{text}");
    assert!(
        text.contains("missing (nothing installed yet)") && text.contains("no generations yet"),
        "{text}"
    );
}

/// What a boot leaves when none of the plugin packages could be resolved for a new image is
/// said by `hermes service status` and failed by `hermes doctor`, each with the fix.
#[test]
fn status_and_doctor_name_unavailable_plugin_packages() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    t.free_ports(&[]);
    let target = t.root().join("lazy-packages");
    let store = t.root().join("lazy-packages.generations");
    std::fs::create_dir_all(&store).unwrap();
    std::fs::write(
        store.join("last-resolution.json"),
        r#"{"at": 0, "resolution": {"result": "unavailable", "from": 1, "to": 2,
            "packages": [{"spec": "honcho-ai==2.2.0", "why": "no package index reachable"}]},
            "reason": "the interpreter changed: 3.13 → 3.11", "fix": "hermes plugins repair"}"#,
    )
    .unwrap();
    let env = [
        ("HERMES_DISABLE_LAZY_INSTALLS", "1"),
        ("HERMES_LAZY_INSTALL_TARGET", target.to_str().unwrap()),
    ];
    // The supervisor without the target (its own check would find no generation and say so):
    // the surfaces below read the report with the target their environment names.
    let (_up, _) = t.up_detached(&[]);
    let mut status = t.cmd(&["service", "status"]);
    status.envs(env);
    let out = status.output().unwrap();
    let text = render(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("plugins: plugin packages unavailable with this image")
            && text.contains("honcho-ai==2.2.0 (no package index reachable)")
            && text.contains("run `hermes plugins repair`"),
        "{text}"
    );
    let mut doctor = t.cmd(&["doctor"]);
    doctor.envs(env);
    let out = doctor.output().unwrap();
    let text = render(&out);
    let row = text
        .lines()
        .find(|l| l.contains("plugin packages:"))
        .unwrap_or_else(|| panic!("no plugin packages row: {text}"));
    assert!(
        row.contains("honcho-ai==2.2.0") && row.contains("hermes plugins repair"),
        "{row}"
    );
    assert_ne!(
        out.status.code(),
        Some(0),
        "a failed check fails doctor: {text}"
    );
}

/// `hermes up` does what PID 1's boot does before its gateways start: packages installed for
/// another core are resolved again, and it says so.
#[test]
fn hermes_up_resolves_the_packages_again_for_a_changed_core() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    t.free_ports(&[]);
    let Some(py) = PyEnv::new(&t, "hermes_up_pkg") else {
        return;
    };
    let target = t.root().join("lazy-packages");
    let image = |cmd: &mut Command| {
        cmd.env("HERMES_DISABLE_LAZY_INSTALLS", "1")
            .env("HERMES_LAZY_INSTALL_TARGET", &target);
    };
    let mut install = py.hermes(&t, &["deps", "install", "hermes-up-pkg==1.0"]);
    image(&mut install);
    let out = install.output().unwrap();
    assert!(out.status.success(), "{}", render(&out));

    // The core gains a package: its lock changes.
    let wheels = t.dir.path().join("core-wheels");
    write_wheel(&wheels, "hermes_core_extra", "1.0", &[]);
    let pip = Command::new(py.venv.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--no-index", "--find-links"])
        .arg(&wheels)
        .arg("hermes-core-extra")
        .output()
        .unwrap();
    assert!(pip.status.success(), "{}", render(&pip));

    let mut up = py.hermes(&t, &["up", "-d"]);
    image(&mut up);
    let out = up.output().unwrap();
    let said = render(&out);
    assert!(out.status.success(), "{said}");
    let _stop = crate::util::Detached::from_said(&said);
    // Detached, it says it in its log.
    let log = t.root().join("logs/up.log");
    let line = "hermes up: plugins: plugin packages resolved again for this image (the core \
                packages changed): generation 1 → 2";
    hermes_test_support::poll::until_true(
        "the line in up.log",
        std::time::Duration::from_secs(60),
        || std::fs::read_to_string(&log).is_ok_and(|text| text.contains(line)),
    );
    assert_eq!(
        std::fs::read_link(&target).unwrap(),
        Path::new("lazy-packages.generations/0002")
    );
}

/// Root (a `docker exec` as root with the shim's drop switched off, a root shell on a host)
/// installing on the service user's volume acts as that user: every file of the new generation,
/// the lock, the link and the store are theirs, and root followed none of their paths.
#[test]
fn as_root_an_install_acts_as_the_volume_owner() {
    if hermes_test_support::skip_unless_root("only root acts as another user") {
        return;
    }
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let Some(py) = PyEnv::new(&t, "hermes_rooted_pkg") else {
        return;
    };
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // The venv must be reachable by the volume's owner, as the image's is.
    std::fs::set_permissions(t.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A temporary directory of theirs too (this machine's /tmp need not be 1777).
    let tmp = t.dir.path().join("owner-tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let chown = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(t.root())
        .arg(&tmp)
        .status()
        .unwrap();
    assert!(chown.success());
    let target = t.root().join("lazy-packages");
    let out = py
        .hermes(&t, &["deps", "install", "hermes-rooted-pkg==1.0"])
        .env("TMPDIR", &tmp)
        .env("HERMES_DISABLE_LAZY_INSTALLS", "1")
        .env("HERMES_LAZY_INSTALL_TARGET", &target)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", render(&out));
    let mut not_theirs = Vec::new();
    let mut stack = vec![t.root().join("lazy-packages.generations"), target.clone()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if (meta.uid(), meta.gid()) != (65534, 65534) {
            not_theirs.push(path.clone());
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(not_theirs.is_empty(), "left to root: {not_theirs:?}");
    assert!(target.join("hermes_rooted_pkg/__init__.py").is_file());
}
