//! `hermes deps`, `hermes plugins` and `hermes memory` through the real binary: the paths
//! that must refuse cleanly (unsafe specs, sealed images, the kill switch, a broken config).
//! Real installs are covered hermetically in `crates/hermes-deps/tests`.

use std::fs;

use crate::util::{TestContext, render};

fn seeded(t: &TestContext) {
    t.ok(&["profile", "list"]);
}

#[test]
fn unsafe_spec_is_refused_before_anything_runs() {
    let t = TestContext::new();
    seeded(&t);
    for spec in [
        "x; rm -rf /",
        "--index-url=http://evil",
        "git+https://x/y",
        "pkg @ file:///tmp/x",
    ] {
        let out = t.run(&["deps", "install", "--", spec]);
        assert_eq!(out.status.code(), Some(1), "{spec}: {}", render(&out));
        let text = render(&out);
        assert!(text.contains("refusing to install unsafe spec"), "{text}");
    }
    assert!(
        !t.root().join("venv").exists(),
        "no environment was created"
    );
}

#[test]
fn sealed_image_without_target_blocks_setup_and_saves_nothing() {
    let t = TestContext::new();
    seeded(&t);
    let config_before = fs::read(t.root().join("config.yaml")).unwrap();
    let env_before = fs::read(t.root().join(".env")).unwrap();
    let out = t
        .cmd(&[
            "memory",
            "setup",
            "honcho",
            "--set",
            "api_key=abc",
            "--non-interactive",
        ])
        .env("HERMES_DISABLE_LAZY_INSTALLS", "1")
        .output()
        .unwrap();
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("HERMES_LAZY_INSTALL_TARGET"), "{text}");
    assert!(
        !text.contains("EROFS") && !text.contains("os error"),
        "no raw OS error: {text}"
    );
    assert_eq!(
        fs::read(t.root().join("config.yaml")).unwrap(),
        config_before
    );
    assert_eq!(fs::read(t.root().join(".env")).unwrap(), env_before);
}

#[test]
fn kill_switch_in_config_blocks_installs() {
    let t = TestContext::new();
    seeded(&t);
    fs::write(
        t.root().join("config.yaml"),
        "security:\n  allow_lazy_installs: false\n",
    )
    .unwrap();
    let out = t.run(&["deps", "install", "six"]);
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("allow_lazy_installs"), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&t.run(&["deps", "install", "six", "--json"]).stdout).unwrap();
    assert_eq!(json["blocked"], true);
    assert_eq!(json["ok"], false);
}

#[test]
fn broken_config_fails_setup_before_installing() {
    let t = TestContext::new();
    seeded(&t);
    fs::write(t.root().join("config.yaml"), "memory: [\n").unwrap();
    let out = t.run(&["memory", "setup", "honcho", "--non-interactive"]);
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("is not valid YAML"), "{text}");
    assert_eq!(
        fs::read_to_string(t.root().join("config.yaml")).unwrap(),
        "memory: [\n"
    );
}

#[test]
fn plugins_list_shows_the_bundled_memory_providers() {
    let t = TestContext::new();
    let rows: serde_json::Value =
        serde_json::from_str(&t.ok(&["plugins", "list", "--json"])).unwrap();
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for bundled in ["honcho", "mem0", "hindsight", "supermemory"] {
        assert!(names.contains(&bundled), "{names:?}");
    }
    // Each bundled plugin is also a `deps` feature, derived from its manifest.
    let features = t.ok(&["deps", "status"]);
    for name in &names {
        assert!(
            features.contains(&format!("memory.{name} ")),
            "memory.{name} missing:\n{features}"
        );
    }
    let status: serde_json::Value =
        serde_json::from_str(&t.ok(&["memory", "status", "--json"])).unwrap();
    assert_eq!(status["active"], serde_json::Value::Null);
}

#[test]
fn memory_setup_without_a_provider_lists_them_when_not_interactive() {
    let t = TestContext::new();
    let out = t.run(&["memory", "setup", "--non-interactive"]);
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("honcho") && text.contains("hint:"), "{text}");
}

/// Concurrent writers keep every change: 20 `hermes memory setup` processes at once, each
/// setting one value of a dependency-free plugin (so nothing is installed and no network is
/// needed). Each value goes to `.env` (its `env_var`) and to `config.yaml`
/// (`memory.tinymem.<key>`); every one of the 20 must be in both files.
#[test]
fn parallel_memory_setups_keep_every_key() {
    let t = TestContext::new();
    seeded(&t);
    let n = 20;
    let plugin = t.root().join("plugins/tinymem");
    fs::create_dir_all(&plugin).unwrap();
    let mut manifest = String::from("name: tinymem\nkind: memory\nsettings:\n");
    for i in 0..n {
        manifest.push_str(&format!("  - {{key: key_{i}, env_var: TINYMEM_KEY_{i}}}\n"));
    }
    fs::write(plugin.join("plugin.yaml"), manifest).unwrap();

    let children: Vec<_> = (0..n)
        .map(|i| {
            let set = format!("key_{i}=value-{i}");
            t.cmd(&[
                "memory",
                "setup",
                "tinymem",
                "--set",
                &set,
                "--non-interactive",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", render(&out));
    }

    let env = fs::read_to_string(t.root().join(".env")).unwrap();
    let config: yaml_serde::Value =
        yaml_serde::from_str(&fs::read_to_string(t.root().join("config.yaml")).unwrap()).unwrap();
    let lost_env: Vec<usize> = (0..n)
        .filter(|i| {
            !env.lines()
                .any(|l| l == format!("TINYMEM_KEY_{i}=value-{i}"))
        })
        .collect();
    let lost_config: Vec<usize> = (0..n)
        .filter(|i| {
            config["memory"]["tinymem"][format!("key_{i}").as_str()].as_str()
                != Some(format!("value-{i}").as_str())
        })
        .collect();
    assert!(
        lost_env.is_empty() && lost_config.is_empty(),
        "`.env` lost {} of {n} keys {lost_env:?}; `config.yaml` lost {} of {n} values {lost_config:?}",
        lost_env.len(),
        lost_config.len()
    );
    assert_eq!(config["memory"]["provider"].as_str(), Some("tinymem"));
}

/// What `hermes memory setup` leaves in `config.yaml` is what the original (hermes-agent
/// 0.19.0) accepts without a migration prompt: `_config_version: 33` (its
/// `DEFAULT_CONFIG`, hermes_cli/config.py: a file without it is "outdated"), and a
/// `model.provider` its `resolve_provider` knows (`auto`, not `openai`). Built-in memory is
/// `memory.provider: ""` there, never `built-in`.
#[test]
fn memory_setup_writes_a_config_the_original_accepts() {
    for seed_first in [true, false] {
        let t = TestContext::new();
        if seed_first {
            seeded(&t);
            let fresh: yaml_serde::Value =
                yaml_serde::from_str(&fs::read_to_string(t.root().join("config.yaml")).unwrap())
                    .unwrap();
            assert_eq!(fresh["memory"]["provider"].as_str(), Some(""));
        }
        let plugin = t.root().join("plugins/tinymem");
        fs::create_dir_all(&plugin).unwrap();
        fs::write(
            plugin.join("plugin.yaml"),
            "name: tinymem\nkind: memory\nsettings:\n  - {key: region}\n",
        )
        .unwrap();
        let out = t.run(&[
            "memory",
            "setup",
            "tinymem",
            "--set",
            "region=eu",
            "--non-interactive",
        ]);
        assert!(out.status.success(), "{}", render(&out));
        let config: yaml_serde::Value =
            yaml_serde::from_str(&fs::read_to_string(t.root().join("config.yaml")).unwrap())
                .unwrap();
        assert_eq!(config["_config_version"].as_u64(), Some(33), "{config:?}");
        assert_eq!(config["memory"]["provider"].as_str(), Some("tinymem"));
        assert_eq!(config["memory"]["tinymem"]["region"].as_str(), Some("eu"));
        let provider = config["model"]["provider"].as_str().unwrap_or("auto");
        assert_ne!(
            provider, "openai",
            "the original refuses `provider: openai`"
        );
    }
}
