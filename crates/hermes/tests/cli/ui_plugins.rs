//! The dashboard's Plugins page in a real browser (see `ui`): a user memory provider whose
//! dependency is a wheel the test builds, served from a loopback index; Install shows it
//! running, then one result row per step, and the provider becomes available; Activate sets
//! `memory.provider`. On a sealed image without a durable target the row shows the blocked
//! reason instead of the button.

use std::path::Path;
use std::time::Duration;

use hermes_test_support::wheel::{WheelIndex, write_wheel};

use crate::ui::{Ui, WAIT};
use crate::util::{PyEnv, TestContext};

/// An install creates the Python environment first: allow for a slow machine.
const INSTALL_WAIT: Duration = Duration::from_secs(240);

/// The tests' `PATH` (see `TestContext::cmd`) has `python3` here, or the test skips.
fn python_on_the_tests_path() -> bool {
    let found = ["/usr/bin/python3", "/bin/python3"]
        .iter()
        .any(|p| Path::new(p).is_file());
    if !found {
        hermes_test_support::skip("no python3 in /usr/bin or /bin (the PATH `hermes` runs with)");
    }
    found
}

/// A user memory plugin `name` needing the pip package `dist`.
fn plugin(t: &TestContext, name: &str, dist: &str) {
    let dir = t.root().join("plugins").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        format!(
            "name: {name}\nversion: 0.1.0\ndescription: a memory provider for the page's test\n\
             kind: memory\npip_dependencies: ['{dist}>=1,<2']\n"
        ),
    )
    .unwrap();
}

/// The text of `css` in the page, or "" (read in one script: rows are re-rendered).
fn text(ui: &Ui, css: &str) -> String {
    let script =
        format!("var e = document.querySelector(\"{css}\"); return e ? e.textContent : '';");
    ui.browser
        .execute(&script)
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// `(step, result)` of every result row.
fn steps(ui: &Ui) -> Vec<(String, String)> {
    let v = ui.browser.execute(
        "return Array.prototype.map.call(document.querySelectorAll('#steps tr'), \
         function (r) { return [r.dataset.step, r.dataset.ok]; });",
    );
    serde_json::from_value(v).unwrap_or_default()
}

#[test]
fn install_a_memory_provider_from_a_local_wheel_and_activate_it() {
    if !python_on_the_tests_path() {
        return;
    }
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    plugin(&t, "uimem", "hermes-uimem-sdk");
    let wheels = t.dir.path().join("wheels");
    write_wheel(&wheels, "hermes_uimem_sdk", "1.0", &[]);
    let index = WheelIndex::serve(&wheels);
    let url = index.url();
    // Only the loopback index: pip's files ignored, uv (if any) pointed at it too.
    let env = [
        ("PIP_INDEX_URL", url.as_str()),
        ("UV_INDEX_URL", url.as_str()),
        ("PIP_CONFIG_FILE", "/dev/null"),
        ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
    ];
    let Some(ui) = Ui::open(&t, &env) else { return };
    ui.goto("plugins");

    let row = "tr[data-plugin='uimem']";
    ui.browser.wait_for(row, WAIT);
    assert_eq!(
        text(&ui, &format!("{row} td:nth-child(2)")),
        "dependencies missing"
    );
    assert_eq!(
        text(&ui, &format!("{row} td:nth-child(3)")),
        "hermes-uimem-sdk>=1,<2"
    );
    assert!(text(&ui, "#installs").contains("Installs go to the Python environment"));

    ui.browser
        .find(&format!("{row} button[data-action=install]"))
        .click();
    // Running: the buttons are disabled and the row says so until the answer.
    let running = ui.browser.execute(&format!(
        "var b = document.querySelector(\"{row} button[data-action=install]\"); \
         return [b ? b.disabled : null, !!document.querySelector(\"{row} .running\"), \
         !!document.querySelector('#steps tr')];"
    ));
    let running: (Option<bool>, bool, bool) = serde_json::from_value(running).unwrap();
    // Either still running (disabled, noted) or already answered (rows shown).
    assert!(
        running == (Some(true), true, false) || running.2,
        "{running:?}"
    );

    ui.browser
        .wait_for("#steps tr[data-step=available]", INSTALL_WAIT);
    let rows = steps(&ui);
    let names: Vec<&str> = rows.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(
        names,
        ["dependencies", "install", "re-check", "available"],
        "{rows:?}"
    );
    assert!(rows.iter().skip(1).all(|(_, ok)| ok == "true"), "{rows:?}");
    assert!(text(&ui, "#result-title").ends_with("done"));
    assert!(
        text(&ui, "#steps tr[data-step=install]").contains("ran: "),
        "{}",
        text(&ui, "#steps tr[data-step=install]")
    );
    assert!(t.root().join("venv").is_dir(), "the managed venv was made");

    // The list was asked afresh: the provider is available, nothing is missing.
    ui.browser
        .wait_until("the row to show available", WAIT, |_| {
            text(&ui, &format!("{row} td:nth-child(2)")).starts_with("available")
        });
    assert_eq!(text(&ui, &format!("{row} td:nth-child(3)")), "-");
    assert_eq!(text(&ui, &format!("{row} td:nth-child(4)")), "installed");
    ui.screenshot("plugins");

    ui.browser
        .find(&format!("{row} button[data-action=activate]"))
        .click();
    ui.browser.wait_until("the row to show active", WAIT, |_| {
        text(&ui, &format!("{row} td:nth-child(5)")) == "active"
    });
    assert!(text(&ui, "#steps tr[data-step=activate]").contains("memory.provider = uimem"));
    let config = std::fs::read_to_string(t.root().join("config.yaml")).unwrap();
    // Written into the seed's `provider: ""`, its quotes kept.
    assert!(config.contains("provider: \"uimem\""), "{config}");
    // The CLI sees the same state.
    let status = t.ok(&["memory", "status"]);
    assert!(status.contains("provider: uimem"), "{status}");
    assert!(status.contains("status:   available"), "{status}");
}

#[test]
fn a_sealed_image_without_target_shows_why_installs_are_blocked() {
    let t = TestContext::new();
    std::fs::create_dir_all(t.root()).unwrap();
    plugin(&t, "uimem", "hermes-uimem-sdk");
    let Some(ui) = Ui::open(&t, &[("HERMES_DISABLE_LAZY_INSTALLS", "1")]) else {
        return;
    };
    ui.goto("plugins");
    let row = "tr[data-plugin='uimem']";
    ui.browser.wait_for(row, WAIT);
    let blocked = text(&ui, &format!("{row} td[data-blocked=true]"));
    assert!(
        blocked.starts_with("blocked: runtime installs are disabled on this deployment")
            && blocked.contains("HERMES_LAZY_INSTALL_TARGET"),
        "{blocked}"
    );
    assert!(
        ui.browser
            .find_all(&format!("{row} button[data-action=install]"))
            .is_empty(),
        "no Install button when installs are blocked"
    );
    let note = text(&ui, "#installs");
    assert!(note.starts_with("Installs are blocked: "), "{note}");
    assert!(
        note.contains("— set `HERMES_LAZY_INSTALL_TARGET`"),
        "{note}"
    );
    ui.screenshot("plugins-blocked");

    // Activating installs first, so it is refused the same way and saves nothing.
    ui.browser
        .find(&format!("{row} button[data-action=activate]"))
        .click();
    ui.browser.wait_for("#steps tr[data-step=activate]", WAIT);
    assert!(text(&ui, "#result-title").ends_with("blocked"));
    assert_eq!(
        ui.browser
            .find("#steps tr[data-step=install]")
            .attribute("data-ok")
            .as_deref(),
        Some("false")
    );
    assert!(
        !t.root().join("config.yaml").exists() || {
            let c = std::fs::read_to_string(t.root().join("config.yaml")).unwrap();
            !c.contains("uimem")
        }
    );
    assert!(!t.root().join("venv").exists(), "nothing ran");
}

/// After a boot (here `hermes plugins repair`) found the plugin packages unusable with this
/// image and no index to resolve them again, the page says so where it says where installs
/// go, with the command that fixes it.
#[test]
fn unavailable_plugin_packages_are_said_with_their_fix() {
    if !python_on_the_tests_path() {
        return;
    }
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    // The core venv and an index serving hermes_uicore, which the plugin's package imports.
    let Some(py) = PyEnv::new(&t, "hermes_uicore") else {
        return;
    };
    let wheels = t.dir.path().join("wheels");
    hermes_test_support::wheel::write_wheel_with_init(
        &wheels,
        "hermes_uiplug",
        "1.0",
        &[],
        "import hermes_uicore\n",
    );
    let pip = |args: &[&str]| {
        let out = std::process::Command::new(py.venv.join("bin/python"))
            .args(["-m", "pip", "-q", "--disable-pip-version-check"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    pip(&[
        "install",
        "--no-index",
        "--find-links",
        wheels.to_str().unwrap(),
        "hermes-uicore",
    ]);
    let target = t.root().join("lazy-packages");
    let target_text = target.to_string_lossy().into_owned();
    let venv_text = py.venv.to_string_lossy().into_owned();
    let image = [
        ("HERMES_VENV", venv_text.as_str()),
        ("HERMES_DISABLE_LAZY_INSTALLS", "1"),
        ("HERMES_LAZY_INSTALL_TARGET", target_text.as_str()),
        ("PIP_CONFIG_FILE", "/dev/null"),
    ];
    let installed = t
        .cmd(&["deps", "install", "hermes-uiplug==1.0"])
        .envs(image)
        .env("PIP_INDEX_URL", py.index.url())
        .output()
        .unwrap();
    assert!(
        installed.status.success(),
        "{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    // The new image's core lost what the package imports, and no index answers.
    pip(&["uninstall", "-y", "hermes-uicore"]);
    let repair = t
        .cmd(&["plugins", "repair"])
        .envs(image)
        .env("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
        .env("PIP_RETRIES", "0")
        .output()
        .unwrap();
    assert_eq!(
        repair.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&repair.stdout)
    );

    let Some(ui) = Ui::open(&t, &image) else {
        return;
    };
    ui.goto("plugins");
    ui.browser.wait_until("the installs note", WAIT, |_| {
        text(&ui, "#installs").contains("generation 2 is active")
    });
    let note = text(&ui, "#installs");
    assert!(
        note.contains("plugin packages unavailable with this image")
            && note.contains("hermes-uiplug==1.0")
            && note.contains("hermes plugins repair"),
        "{note}"
    );
    let class = ui
        .browser
        .find("#installs")
        .attribute("class")
        .unwrap_or_default();
    assert!(class.contains("blocked"), "shown as a problem: {class}");
    ui.screenshot("plugins-unavailable");
}
