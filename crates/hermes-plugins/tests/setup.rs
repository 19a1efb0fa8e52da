//! Public-API test: `memory setup` for a user plugin whose SDK comes from a
//! wheelhouse the test writes, into a durable target next to a core venv.
//! The provider flips from "not available" to "available" in the same
//! process, and the plan says what to write without writing it.

#![allow(clippy::print_stdout)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::collections::BTreeMap;
use std::process::Command;

use hermes_test_support::wheel;

use hermes_deps::env::{DISABLE_VAR, TARGET_VAR, VENV_VAR};
use hermes_deps::{Environment, InstallOptions, InstallerChoice};
use hermes_plugins::{discover, list_plugins, memory_status, render_list, setup_provider};

#[test]
fn setup_installs_into_target_and_flips_availability() {
    let Some(py) = Environment::from_process().which("python3") else {
        println!("skipping: python3 not on PATH");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    wheel::write_wheel(&wh, "hermes_tinymem_sdk", "1.2", &[]);
    let venv = d.path().join("core");
    assert!(
        Command::new(py)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap()
            .success()
    );
    let home = d.path().join("home");
    let plugin_dir = home.join("plugins/tinymem");
    std::fs::create_dir_all(&plugin_dir).unwrap();
    std::fs::write(
        plugin_dir.join("plugin.yaml"),
        "name: tinymem\nversion: 0.1.0\ndescription: test memory\nkind: memory\n\
         pip_dependencies: ['hermes-tinymem-sdk>=1,<2']\nrequires_env: [TINYMEM_API_KEY]\n\
         settings:\n  - {key: api_key, secret: true, env_var: TINYMEM_API_KEY, required: true}\n  - {key: space, default: main}\n",
    )
    .unwrap();
    let target = d.path().join("data/lazy-packages");
    let env = Environment::from_process()
        .without("TINYMEM_API_KEY")
        .with(VENV_VAR, &venv.to_string_lossy())
        .with(DISABLE_VAR, "1")
        .with(TARGET_VAR, &target.to_string_lossy());
    let mut o = InstallOptions::new(&home, true, env);
    o.no_index = true;
    o.find_links = vec![wh.clone()];
    o.installer = InstallerChoice::Pip;

    let found = discover(Some(&home.join("plugins")));
    let before = memory_status(&found, Some("tinymem"), &o).unwrap();
    let p = before.provider.as_ref().unwrap();
    assert!(!p.available && !p.dependencies_installed);

    let mut values = BTreeMap::new();
    values.insert("api_key".to_string(), "tm-secret-9999".to_string());
    values.insert("space".to_string(), "work".to_string());
    let plan = setup_provider(&found, "tinymem", &values, &o).unwrap();
    assert!(plan.ok, "{:?}", plan.install);
    assert!(
        plan.install.command.contains("--target"),
        "{}",
        plan.install.command
    );
    assert!(target.join("hermes_tinymem_sdk/__init__.py").exists());
    assert!(
        plan.status.dependencies_installed && plan.status.available,
        "{:?}",
        plan.status
    );
    assert_eq!(plan.env_writes.len(), 1);
    assert_eq!(plan.env_writes[0].key, "TINYMEM_API_KEY");
    let last = plan.config_writes.last().unwrap();
    assert_eq!(
        (last.path.join("."), last.value.as_str()),
        ("memory.provider".to_string(), "tinymem")
    );
    assert!(
        plan.config_writes
            .iter()
            .any(|c| c.path.join(".") == "memory.tinymem.space" && c.value == "work")
    );
    let mut buf = Vec::new();
    plan.render(&mut buf).unwrap();
    let text = String::from_utf8(buf).unwrap();
    assert!(
        !text.contains("tm-secret-9999"),
        "secrets are masked: {text}"
    );

    // Same process, fresh interpreter: the dependency now shows as installed.
    let rows = list_plugins(&found, &o).unwrap();
    let row = rows.iter().find(|r| r.name == "tinymem").unwrap();
    assert!(row.dependencies_installed);
    assert!(
        !row.available,
        "the key is not in this env until the caller writes .env"
    );
    let mut buf = Vec::new();
    render_list(&rows, &mut buf).unwrap();
    assert!(String::from_utf8(buf).unwrap().contains("tinymem"));

    // Running setup again installs nothing.
    let again = setup_provider(&found, "tinymem", &values, &o).unwrap();
    assert!(again.ok && again.install.command.is_empty());
}
