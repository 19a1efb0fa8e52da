//! Stage 6d: the plugin packages on the volume are resolved again for the image that boots,
//! before the main program and the gateways start — a changed core gets a new generation; a
//! boot with no package index reachable keeps a generation that still imports and says what
//! fixes it; an unchanged image spawns nothing and says nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use hermes_test_support::wheel::{WheelIndex, write_wheel};

use crate::util::{Sandbox, hermes, render, stdout};

struct Plugins {
    sb: Sandbox,
    venv: PathBuf,
    wheels: PathBuf,
    index: WheelIndex,
}

impl Plugins {
    fn new() -> Option<Self> {
        let Some(python) = ["/usr/bin/python3", "/bin/python3"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
        else {
            hermes_test_support::skip("no python3 in /usr/bin or /bin");
            return None;
        };
        let sb = Sandbox::new();
        let venv = sb.path().join("core");
        let made = Command::new(python)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(made.success());
        let wheels = sb.path().join("wheels");
        write_wheel(&wheels, "boot_plug", "1.0", &[]);
        write_wheel(&wheels, "boot_corepkg", "1.0", &[]);
        write_wheel(&wheels, "boot_corepkg2", "1.0", &[]);
        let index = WheelIndex::serve(&wheels);
        Some(Self {
            sb,
            venv,
            wheels,
            index,
        })
    }

    fn target(&self) -> PathBuf {
        self.sb.home().join("lazy-packages")
    }

    /// The image's environment, with the package index at `index`.
    fn env(&self, index: &str) -> Vec<(String, String)> {
        let mut env = self.sb.env();
        for (k, v) in [
            ("HERMES_VENV", self.venv.display().to_string()),
            ("HERMES_DISABLE_LAZY_INSTALLS", "1".into()),
            (
                "HERMES_LAZY_INSTALL_TARGET",
                self.target().display().to_string(),
            ),
            ("PIP_INDEX_URL", index.into()),
            ("PIP_CONFIG_FILE", "/dev/null".into()),
            ("PIP_DISABLE_PIP_VERSION_CHECK", "1".into()),
        ] {
            env.push((k.into(), v));
        }
        env
    }

    fn hermes(&self, args: &[&str]) -> std::process::Output {
        let out = Command::new(hermes())
            .args(args)
            .env_clear()
            .envs(self.env(&self.index.url()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", render(&out));
        out
    }

    /// What a new image's core venv changes: one more package in it.
    fn change_core(&self, package: &str) {
        let out = Command::new(self.venv.join("bin/python"))
            .args(["-m", "pip", "install", "-q", "--no-index", "--find-links"])
            .arg(&self.wheels)
            .arg(package)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", render(&out));
    }

    /// Boots with the main program printing which generation the target names.
    fn boot(&self, index: &str) -> std::process::Output {
        let mut cmd = self.sb.init(&[
            "sh",
            "-c",
            "echo \"main sees $(readlink \"$HERMES_LAZY_INSTALL_TARGET\")\"",
        ]);
        cmd.env_clear().envs(self.env(index));
        cmd.output().unwrap()
    }

    fn boot_log(&self) -> String {
        fs::read_to_string(self.sb.home().join("logs/container-boot.log")).unwrap_or_default()
    }
}

#[test]
fn a_changed_core_is_resolved_again_before_the_main_program_starts() {
    let Some(p) = Plugins::new() else { return };
    p.hermes(&["deps", "install", "boot-plug==1.0"]);

    // The same image again: nothing to do, nothing said.
    let out = p.boot(&p.index.url());
    let text = render(&out);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("plugins:"), "{text}");
    assert!(
        stdout(&out).contains("main sees lazy-packages.generations/0001"),
        "{text}"
    );

    p.change_core("boot-corepkg");
    let out = p.boot(&p.index.url());
    let text = render(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("[init] plugins: plugin packages resolved again for this image")
            && text.contains("generation 1 → 2"),
        "{text}"
    );
    assert!(
        stdout(&out).contains("main sees lazy-packages.generations/0002"),
        "resolved before the main program started: {text}"
    );
    let log = p.boot_log();
    assert!(
        log.contains("plugins: building generation 2") && log.contains("generation 1 → 2"),
        "the progress and the result are in the boot log: {log}"
    );
}

#[test]
fn offline_a_generation_that_still_imports_is_kept_and_the_fix_named() {
    let Some(p) = Plugins::new() else { return };
    p.hermes(&["deps", "install", "boot-plug==1.0"]);
    p.change_core("boot-corepkg2");
    // Nothing listens on port 9 (discard): the index is unreachable.
    let started = std::time::Instant::now();
    let out = p.boot("http://127.0.0.1:9/simple");
    let text = render(&out);
    assert!(out.status.success(), "the boot goes on: {text}");
    assert!(
        text.contains("plugin packages kept (generation 1 still imports")
            && text.contains("hermes plugins repair"),
        "{text}"
    );
    assert!(
        stdout(&out).contains("main sees lazy-packages.generations/0001"),
        "{text}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(120),
        "an unreachable index fails fast: {:?}",
        started.elapsed()
    );
    let status = Command::new(hermes())
        .args(["plugins", "generations"])
        .env_clear()
        .envs(p.env("http://127.0.0.1:9/simple"))
        .output()
        .unwrap();
    let said = render(&status);
    assert!(
        said.contains("generation 1 (active") && said.contains("last check against this image"),
        "{said}"
    );
}
