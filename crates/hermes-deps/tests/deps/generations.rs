//! Installs into the durable target as generations, through the public API with real pip and
//! wheels the tests write (no network): each install is a new directory beside the active
//! one holding every request so far; it becomes active only when it imports; a failed,
//! timed-out or unfinished install never changes what is active; a flat target from before
//! generations is adopted with what it holds; collection keeps the active and previous ones.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::wheel::{write_wheel, write_wheel_with_init};
use common::{make_venv, options, pip_into_venv, python3};
use hermes_deps::env::{DISABLE_VAR, TARGET_VAR, VENV_VAR};
use hermes_deps::generations::{self, GenerationRecord, Requester, Store};
use hermes_deps::{Environment, InstallOptions, install_specs};

struct Fixture {
    dir: tempfile::TempDir,
    wheels: PathBuf,
    venv: PathBuf,
    target: PathBuf,
}

impl Fixture {
    fn new() -> Option<Self> {
        if python3().is_none() {
            hermes_test_support::skip("python3 not on PATH");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let wheels = dir.path().join("wheels");
        let venv = dir.path().join("core");
        make_venv(&venv);
        let target = dir.path().join("data/lazy-packages");
        Some(Self {
            wheels,
            venv,
            target,
            dir,
        })
    }

    fn env(&self) -> Environment {
        Environment::from_process()
            .with(VENV_VAR, &self.venv.to_string_lossy())
            .with(DISABLE_VAR, "1")
            .with(TARGET_VAR, &self.target.to_string_lossy())
    }

    fn options(&self) -> InstallOptions {
        options(self.dir.path(), self.env(), &self.wheels)
    }

    fn store(&self) -> Store {
        Store::for_target(&self.target)
    }

    fn active(&self) -> Option<u64> {
        self.store().active().map(|g| g.id)
    }

    fn record(&self, id: u64) -> GenerationRecord {
        GenerationRecord::read(&self.store().path_of(id)).expect("a finished generation")
    }

    fn import(&self, module: &str) -> String {
        let interp = self.options().interpreter().unwrap();
        let r = interp
            .run(
                &format!("import {module}; print({module}.__version__)"),
                &[],
                hermes_deps::python::QUERY_TIMEOUT,
            )
            .unwrap();
        assert!(r.success, "import {module}: {}", r.stderr);
        r.stdout.trim().to_string()
    }
}

fn specs_of(record: &GenerationRecord) -> Vec<(String, Requester)> {
    record
        .requests
        .iter()
        .map(|r| (r.spec.clone(), r.by))
        .collect()
}

#[test]
fn each_install_is_a_new_generation_holding_every_request_so_far() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "gen_a", "1.0", &[]);
    write_wheel(&f.wheels, "gen_b", "2.0", &[]);
    write_wheel(&f.wheels, "gen_c", "3.0", &[]);

    let out = install_specs(&["gen-a==1.0"], &f.options());
    assert!(out.ok, "{out:?}");
    assert_eq!((out.generation, f.active()), (Some(1), Some(1)));

    let mut o = f.options();
    o.requested_by = Requester::Dashboard;
    let out = install_specs(&["gen-b"], &o);
    assert!(out.ok, "{out:?}");
    assert_eq!(f.active(), Some(2));
    assert!(
        out.command.contains("gen-a==1.0") && out.command.contains("gen-b"),
        "the new generation is resolved whole: {}",
        out.command
    );
    assert_eq!(f.import("gen_a"), "1.0");
    assert_eq!(f.import("gen_b"), "2.0");
    let rec = f.record(2);
    assert_eq!(
        specs_of(&rec),
        [
            ("gen-a==1.0".to_string(), Requester::Cli),
            ("gen-b".to_string(), Requester::Dashboard)
        ]
    );
    assert_eq!(rec.parent, Some(1));
    assert!(!rec.abi.is_empty() && !rec.core_lock.is_empty(), "{rec:?}");
    let names: Vec<&str> = rec.resolved.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["gen_a", "gen_b"]);

    // The previous generation is untouched and sealed: nothing writes into it in place.
    let first = f.store().path_of(1);
    assert!(first.join("gen_a/__init__.py").exists() && !first.join("gen_b").exists());
    let mode = std::fs::metadata(&first).unwrap().permissions().mode();
    assert_eq!(mode & 0o222, 0, "sealed: {mode:o}");

    let out = install_specs(&["gen-c==3.0"], &f.options());
    assert!(out.ok, "{out:?}");
    assert_eq!(f.active(), Some(3));
    let collected = generations::collect(&f.target).unwrap();
    assert_eq!(collected.removed, [1]);
    assert_eq!((collected.active, collected.previous), (Some(3), Some(2)));
    assert!(collected.freed_bytes > 0);
    assert!(!first.exists());
    assert_eq!(f.import("gen_c"), "3.0");
    let again = generations::collect(&f.target).unwrap();
    assert!(again.removed.is_empty(), "{again:?}");
}

#[test]
fn a_package_that_does_not_import_is_never_switched_to() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "gen_good", "1.0", &[]);
    write_wheel_with_init(
        &f.wheels,
        "gen_broken",
        "1.0",
        &[],
        "raise ImportError('built for another interpreter')\n",
    );
    assert!(install_specs(&["gen-good"], &f.options()).ok);
    let out = install_specs(&["gen-broken"], &f.options());
    assert!(!out.ok && !out.blocked, "{out:?}");
    assert!(
        out.reason.contains("does not import")
            && out.reason.contains("gen-broken")
            && out.reason.contains("built for another interpreter"),
        "{}",
        out.reason
    );
    assert!(
        out.hint.as_deref().unwrap_or("").contains("previous"),
        "{:?}",
        out.hint
    );
    assert_eq!(f.active(), Some(1), "the active generation stays");
    assert!(!f.store().path_of(2).exists(), "the failed one is removed");
    assert_eq!(f.import("gen_good"), "1.0");
}

#[test]
fn an_unfinished_or_timed_out_install_never_changes_what_is_active() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "gen_keep", "1.0", &[]);
    assert!(install_specs(&["gen-keep"], &f.options()).ok);

    // What a killed install leaves: a generation directory without a record.
    let killed = f.store().path_of(2);
    std::fs::create_dir_all(killed.join("half_written")).unwrap();
    assert_eq!(f.active(), Some(1));

    // An installer that writes part of a package and hangs, stopped by the time limit.
    let bin = f.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let uv = bin.join("uv");
    std::fs::write(
        &uv,
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --target ] && t=$2; shift; done\n\
         mkdir -p \"$t/partial_pkg\" && echo 'x =' > \"$t/partial_pkg/__init__.py\"\nexec sleep 30\n",
    )
    .unwrap();
    std::fs::set_permissions(&uv, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut o = options(f.dir.path(), f.env().with("PATH", &path), &f.wheels);
    o.installer = hermes_deps::InstallerChoice::Auto;
    o.timeout = std::time::Duration::from_secs(2);
    let out = install_specs(&["gen-keep", "gen-more"], &o);
    assert!(!out.ok, "{out:?}");
    assert!(out.reason.contains("timed out"), "{}", out.reason);
    assert_eq!(f.active(), Some(1));
    let left: Vec<u64> = f.store().list().iter().map(|g| g.id).collect();
    assert_eq!(
        left,
        [1],
        "the unfinished and the timed-out generations are gone"
    );
    assert_eq!(f.import("gen_keep"), "1.0");
}

#[test]
fn a_flat_target_from_before_generations_is_adopted_with_what_it_holds() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "gen_base", "1.0", &[]);
    write_wheel(&f.wheels, "gen_app", "1.0", &["gen-base>=1"]);
    write_wheel(&f.wheels, "gen_other", "1.0", &[]);
    pip_into_venv(
        &f.venv,
        &f.wheels,
        &["--target", f.target.to_str().unwrap(), "gen-app"],
    );
    let abi_of_old_image = "3.11:.cpython-311-x86_64-linux-gnu.so";
    std::fs::write(f.target.join(".python-abi"), abi_of_old_image).unwrap();
    assert!(f.target.is_dir() && !f.target.is_symlink());

    let out = install_specs(&["gen-other"], &f.options());
    assert!(out.ok, "{out:?}");
    let adopted = f.record(1);
    assert_eq!(adopted.origin, generations::Origin::Adopted);
    assert_eq!(
        specs_of(&adopted),
        [("gen_app".to_string(), Requester::Adopted)],
        "what was asked for, not what it pulled in"
    );
    assert_eq!(adopted.abi, abi_of_old_image);
    assert_eq!(adopted.resolved.len(), 2);
    assert_eq!(f.active(), Some(2));
    let now = f.record(2);
    assert_eq!(
        specs_of(&now),
        [
            ("gen_app".to_string(), Requester::Adopted),
            ("gen-other".to_string(), Requester::Cli)
        ]
    );
    for module in ["gen_app", "gen_base", "gen_other"] {
        assert_eq!(f.import(module), "1.0");
    }
    assert!(
        f.store().path_of(1).join("gen_app/__init__.py").exists(),
        "the adopted tree is kept as it was"
    );
}

#[test]
fn a_dry_run_builds_no_generation() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "gen_dry", "1.0", &[]);
    let mut o = f.options();
    o.dry_run = true;
    let out = install_specs(&["gen-dry"], &o);
    assert!(out.ok && out.dry_run, "{out:?}");
    assert!(f.store().list().is_empty());
    assert!(!Path::new(&f.target).join("gen_dry").exists());
}

/// Options that can reach no package at all: the image booted with no index reachable.
fn offline(f: &Fixture) -> InstallOptions {
    let empty = f.dir.path().join("no-wheels");
    std::fs::create_dir_all(&empty).unwrap();
    options(f.dir.path(), f.env(), &empty)
}

#[test]
fn a_changed_core_is_resolved_again_and_an_unchanged_one_left_alone() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "gen_plugin", "1.0", &[]);
    write_wheel(&f.wheels, "gen_corepkg", "1.0", &[]);
    assert!(install_specs(&["gen-plugin"], &f.options()).ok);

    let report = generations::resolve_again(&f.options(), false).unwrap();
    assert_eq!(
        report.resolution,
        generations::Resolution::UpToDate { generation: 1 }
    );

    // The new image's core holds another package: its lock changed.
    pip_into_venv(&f.venv, &f.wheels, &["gen-corepkg"]);
    let report = generations::resolve_again(&f.options(), false).unwrap();
    assert_eq!(
        report.resolution,
        generations::Resolution::Reresolved { from: 1, to: 2 },
        "{report:?}"
    );
    assert!(
        report.reason.contains("core packages changed"),
        "{report:?}"
    );
    assert_eq!(f.record(2).origin, generations::Origin::Reresolved);
    assert_eq!(f.import("gen_plugin"), "1.0");
    assert_eq!(
        generations::ResolutionReport::read(&f.target).as_ref(),
        Some(&report),
        "the outcome is kept for doctor, status and the dashboard"
    );
    let again = generations::resolve_again(&f.options(), false).unwrap();
    assert_eq!(
        again.resolution,
        generations::Resolution::UpToDate { generation: 2 }
    );
}

#[test]
fn offline_a_generation_that_still_imports_is_kept() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "gen_pure", "1.0", &[]);
    write_wheel(&f.wheels, "gen_corepkg", "1.0", &[]);
    assert!(install_specs(&["gen-pure"], &f.options()).ok);
    pip_into_venv(&f.venv, &f.wheels, &["gen-corepkg"]);

    let report = generations::resolve_again(&offline(&f), false).unwrap();
    match &report.resolution {
        generations::Resolution::KeptCompatible { generation: 1, why } => {
            assert!(why.contains("failed"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!report.degraded());
    assert!(
        report.summary().contains("hermes plugins repair"),
        "{}",
        report.summary()
    );
    assert_eq!(f.active(), Some(1));
    assert_eq!(f.import("gen_pure"), "1.0");
}

#[test]
fn offline_a_generation_that_no_longer_imports_is_never_served_and_comes_back_later() {
    let Some(f) = Fixture::new() else { return };
    // A plugin that needs what the old core had (and does not declare it).
    write_wheel_with_init(
        &f.wheels,
        "gen_needs",
        "1.0",
        &[],
        "import gen_oldcore\n__version__ = '1.0'\n",
    );
    write_wheel(&f.wheels, "gen_oldcore", "1.0", &[]);
    pip_into_venv(&f.venv, &f.wheels, &["gen-oldcore"]);
    assert!(install_specs(&["gen-needs"], &f.options()).ok);
    assert_eq!(f.import("gen_needs"), "1.0");

    // The new image's core lost it, and no index is reachable.
    let st = std::process::Command::new(f.venv.join("bin/python"))
        .args(["-m", "pip", "uninstall", "-y", "-q", "gen-oldcore"])
        .status()
        .unwrap();
    assert!(st.success());
    let report = generations::resolve_again(&offline(&f), false).unwrap();
    let generations::Resolution::Unavailable { from, to, packages } = &report.resolution else {
        panic!("{report:?}");
    };
    assert_eq!((*from, *to), (1, 2));
    assert_eq!(packages.len(), 1);
    assert_eq!(packages[0].spec, "gen-needs");
    assert!(
        packages[0].why.contains("gen_oldcore"),
        "the import that fails is named: {}",
        packages[0].why
    );
    assert!(report.degraded());
    let summary = report.summary();
    assert!(
        summary.contains("gen-needs") && summary.contains("hermes plugins repair"),
        "{summary}"
    );
    assert_eq!(f.active(), Some(2), "the broken generation is not served");
    let placeholder = f.record(2);
    assert_eq!(placeholder.origin, generations::Origin::Unresolved);
    assert_eq!(placeholder.specs(), ["gen-needs"], "the request is kept");
    assert!(
        f.store().path_of(1).exists(),
        "the old one stays on the volume"
    );

    // Back online with what it needs: the next attempt brings it back.
    write_wheel_with_init(&f.wheels, "gen_needs", "1.1", &[], "__version__ = '1.1'\n");
    let report = generations::resolve_again(&f.options(), false).unwrap();
    assert_eq!(
        report.resolution,
        generations::Resolution::Reresolved { from: 2, to: 3 },
        "{report:?}"
    );
    assert!(report.reason.contains("unavailable"), "{}", report.reason);
    assert_eq!(f.import("gen_needs"), "1.1");
}

#[test]
fn a_new_interpreter_is_resolved_again() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "gen_abi", "1.0", &[]);
    assert!(install_specs(&["gen-abi"], &f.options()).ok);
    // What a generation built by an image with another Python records.
    let first = f.store().path_of(1);
    let mut rec = f.record(1);
    rec.abi = "3.99:.cpython-399-x86_64-linux-gnu.so".into();
    std::fs::set_permissions(&first, std::fs::Permissions::from_mode(0o755)).unwrap();
    rec.write(&first).unwrap();
    std::fs::set_permissions(&first, std::fs::Permissions::from_mode(0o555)).unwrap();

    let report = generations::resolve_again(&f.options(), false).unwrap();
    assert_eq!(
        report.resolution,
        generations::Resolution::Reresolved { from: 1, to: 2 }
    );
    assert!(
        report.reason.contains("interpreter changed") && report.reason.contains("3.99"),
        "{}",
        report.reason
    );
    assert_ne!(f.record(2).abi, rec.abi);
}

#[test]
fn with_installs_switched_off_a_changed_core_is_said_and_nothing_installed() {
    let Some(f) = Fixture::new() else { return };
    write_wheel(&f.wheels, "gen_off", "1.0", &[]);
    write_wheel(&f.wheels, "gen_corepkg", "1.0", &[]);
    assert!(install_specs(&["gen-off"], &f.options()).ok);
    pip_into_venv(&f.venv, &f.wheels, &["gen-corepkg"]);
    let mut off = f.options();
    off.allow_lazy_installs = false;
    let report = generations::resolve_again(&off, false).unwrap();
    match &report.resolution {
        generations::Resolution::Blocked { generation: 1, why } => {
            assert!(why.contains("allow_lazy_installs"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    assert!(report.notable() && !report.degraded());
    assert_eq!(f.store().list().len(), 1, "nothing was built");
    assert_eq!(f.active(), Some(1));
}
