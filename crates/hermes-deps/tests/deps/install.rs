//! Real installs through the public API, hermetic: every package comes from a
//! wheelhouse the test writes itself (`--no-index --find-links`).
//!
//! Covered: venv install with availability flipping missing → available in
//! the same process; durable-target install next to a read-only core venv that
//! is never written to; core wins a name collision at import; a resolve
//! conflict against the core constraints fails with the installer's stderr;
//! a failed install leaves a flat target from before generations adopted and active; uv
//! (skipped when absent). Generations themselves: `generations.rs`.

#![allow(clippy::print_stdout)]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use common::wheel::write_wheel;
use common::{make_venv, options, pip_into_venv, python3};
use hermes_deps::env::{DISABLE_VAR, TARGET_VAR, VENV_VAR};
use hermes_deps::{Environment, InstallEvent, InstallOptions, InstallerChoice, install_specs};

/// Path → (size, mtime, mode) for every entry under `root` (symlinks not followed).
fn tree(root: &Path) -> BTreeMap<PathBuf, (u64, i64, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read_dir") {
            let e = e.expect("entry");
            let m = std::fs::symlink_metadata(e.path()).expect("meta");
            out.insert(e.path(), (m.len(), m.mtime(), m.mode()));
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    out
}

fn chmod_tree(root: &Path, writable: bool) {
    let mode = if writable { "u+w" } else { "a-w" };
    let st = Command::new("chmod")
        .args(["-R", mode])
        .arg(root)
        .status()
        .expect("chmod");
    assert!(st.success());
}

fn assert_no_raw_os_error(o: &hermes_deps::InstallOutcome) {
    for text in [&o.reason, &o.stderr, &o.stdout] {
        assert!(
            !text.contains("os error") && !text.contains("Errno") && !text.contains("EROFS"),
            "raw OS error leaked: {text}"
        );
    }
}

#[test]
fn venv_install_flips_availability_in_process() {
    if python3().is_none() {
        hermes_test_support::skip("python3 not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    write_wheel(&wh, "hermes_tiny", "1.0", &[]);
    let venv = d.path().join("core");
    make_venv(&venv);
    let env = Environment::from_process()
        .with(VENV_VAR, &venv.to_string_lossy())
        .without(TARGET_VAR)
        .without(DISABLE_VAR);
    let mut o = options(d.path(), env, &wh);
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    o.progress = Some(Arc::new(move |e: &InstallEvent| {
        sink.lock().unwrap().push(e.clone())
    }));

    let interp = o.interpreter().expect("core venv exists");
    let spec = vec!["hermes-tiny==1.0".to_string()];
    assert_eq!(
        interp.missing(&spec).unwrap(),
        spec,
        "missing before install"
    );

    let out = install_specs(&spec, &o);
    assert!(out.ok, "{out:?}");
    assert!(!out.blocked);
    assert!(
        out.command.contains("-m pip install") && !out.command.contains("--target"),
        "{}",
        out.command
    );
    assert!(out.still_missing.is_empty(), "{:?}", out.still_missing);
    assert!(
        interp.missing(&spec).unwrap().is_empty(),
        "available right after install, same process"
    );
    let ev = events.lock().unwrap();
    assert!(ev.iter().any(|e| matches!(e, InstallEvent::Running { .. })));
    assert_eq!(ev.last(), Some(&InstallEvent::Finished { ok: true }));
}

#[test]
fn managed_venv_is_created_on_first_need() {
    if python3().is_none() {
        hermes_test_support::skip("python3 not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    write_wheel(&wh, "hermes_managed", "0.3", &[]);
    let home = d.path().join("home");
    let env = Environment::from_process()
        .without(VENV_VAR)
        .without(TARGET_VAR)
        .without(DISABLE_VAR);
    let o = options(&home, env, &wh);
    assert!(o.interpreter().is_none(), "no managed venv yet");
    let out = install_specs(&["hermes-managed"], &o);
    assert!(out.ok, "{out:?}");
    assert!(home.join("venv/bin/python").exists());
    assert!(out.still_missing.is_empty());
}

#[test]
fn durable_target_next_to_read_only_core() {
    if python3().is_none() {
        hermes_test_support::skip("python3 not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    write_wheel(&wh, "hermes_lazy", "2.1", &[]);
    let venv = d.path().join("core");
    make_venv(&venv);
    // Warm pip once so its own bytecode exists before we freeze the tree.
    let _ = Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "--version"])
        .output();
    let target = d.path().join("data/lazy-packages");
    chmod_tree(&venv, false);
    let before = tree(&venv);

    let env = Environment::from_process()
        .with(VENV_VAR, &venv.to_string_lossy())
        .with(DISABLE_VAR, "1")
        .with(TARGET_VAR, &target.to_string_lossy());
    let o = options(d.path(), env, &wh);
    let out = install_specs(&["hermes-lazy==2.1"], &o);
    let after = tree(&venv);
    chmod_tree(&venv, true);

    assert!(out.ok, "{out:?}");
    let generation = d.path().join("data/lazy-packages.generations/0001");
    assert!(
        out.command
            .contains(&format!("--target {}", generation.display())),
        "installs go into a new generation: {}",
        out.command
    );
    assert_eq!(out.generation, Some(1));
    assert!(target.is_symlink(), "the target names the generation");
    assert!(target.join("hermes_lazy/__init__.py").exists());
    assert!(target.join(".python-abi").exists());
    assert_eq!(before, after, "the core venv must not be written to");
    assert!(
        out.still_missing.is_empty(),
        "target is on sys.path for the re-check: {:?}",
        out.still_missing
    );
    assert_no_raw_os_error(&out);

    let interp = o.interpreter().unwrap();
    let r = interp
        .run(
            "import hermes_lazy; print(hermes_lazy.__version__)",
            &[],
            hermes_deps::python::QUERY_TIMEOUT,
        )
        .unwrap();
    assert_eq!(r.stdout.trim(), "2.1", "{}", r.stderr);
}

#[test]
fn core_wins_a_collision_at_import() {
    if python3().is_none() {
        hermes_test_support::skip("python3 not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    write_wheel(&wh, "hermes_coll", "1.0", &[]);
    write_wheel(&wh, "hermes_coll", "2.0", &[]);
    let venv = d.path().join("core");
    make_venv(&venv);
    pip_into_venv(&venv, &wh, &["hermes-coll==1.0"]);
    let target = d.path().join("lazy");
    // A stale target copy at another version (as an older install could leave).
    pip_into_venv(
        &venv,
        &wh,
        &["--target", target.to_str().unwrap(), "hermes-coll==2.0"],
    );
    assert!(target.join("hermes_coll/__init__.py").exists());

    let env = Environment::from_process()
        .with(VENV_VAR, &venv.to_string_lossy())
        .with(DISABLE_VAR, "1")
        .with(TARGET_VAR, &target.to_string_lossy());
    let o = options(d.path(), env, &wh);
    let interp = o.interpreter().unwrap();
    let r = interp
        .run(
            "import hermes_coll; print(hermes_coll.__version__)",
            &[],
            hermes_deps::python::QUERY_TIMEOUT,
        )
        .unwrap();
    assert_eq!(r.stdout.trim(), "1.0", "core must win: {}", r.stderr);
    let v = interp.installed_versions(&["hermes-coll"]).unwrap();
    assert_eq!(v.get("hermes-coll"), Some(&Some("1.0".to_string())));
    assert_eq!(
        interp
            .missing(&["hermes-coll==2.0".to_string()])
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn conflict_with_core_fails_with_stderr_passthrough() {
    if python3().is_none() {
        hermes_test_support::skip("python3 not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    write_wheel(&wh, "hermes_base", "1.0", &[]);
    write_wheel(&wh, "hermes_base", "2.0", &[]);
    write_wheel(&wh, "hermes_app", "1.0", &["hermes-base>=2"]);
    let venv = d.path().join("core");
    make_venv(&venv);
    pip_into_venv(&venv, &wh, &["hermes-base==1.0"]);
    let target = d.path().join("lazy");
    // A flat target from before generations, built for another interpreter.
    std::fs::create_dir_all(target.join("stale_pkg")).unwrap();
    std::fs::write(target.join(".python-abi"), "2.7:.so\n").unwrap();

    let env = Environment::from_process()
        .with(VENV_VAR, &venv.to_string_lossy())
        .with(DISABLE_VAR, "1")
        .with(TARGET_VAR, &target.to_string_lossy());
    let o = options(d.path(), env, &wh);
    let out = install_specs(&["hermes-app"], &o);
    assert!(!out.ok && !out.blocked, "{out:?}");
    assert!(out.reason.contains("failed"), "{}", out.reason);
    assert!(out.hint.is_some());
    assert!(
        out.stderr.contains("conflicting dependencies"),
        "stderr passed through: {}",
        out.stderr
    );
    assert!(
        out.stdout.contains("hermes-base") || out.stdout.contains("hermes_base"),
        "{}",
        out.stdout
    );
    assert!(out.stderr.chars().count() <= hermes_deps::install::STDERR_TAIL);
    // The flat target was adopted as it was (nothing deleted) and stays active; the failed
    // install left no generation behind.
    let store = d.path().join("lazy.generations");
    assert_eq!(
        std::fs::read_link(&target).unwrap(),
        Path::new("lazy.generations/0001")
    );
    assert!(store.join("0001/stale_pkg").is_dir());
    assert!(
        !store.join("0002").exists(),
        "the failed generation is removed"
    );
    assert_eq!(out.generation, None);
    assert_no_raw_os_error(&out);
}

#[test]
fn uv_installs_into_a_venv_when_available() {
    let env = Environment::from_process();
    let Some(_uv) = env.which("uv") else {
        hermes_test_support::skip("uv not on PATH");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    write_wheel(&wh, "hermes_uvpkg", "1.0", &[]);
    let venv = d.path().join("core");
    make_venv(&venv);
    let env = env
        .with(VENV_VAR, &venv.to_string_lossy())
        .without(TARGET_VAR)
        .without(DISABLE_VAR);
    let mut o = options(d.path(), env, &wh);
    o.installer = InstallerChoice::Auto;
    let out = install_specs(&["hermes-uvpkg==1.0"], &o);
    assert!(out.ok, "{out:?}");
    // The command that ran, with its real flags (`hermes_deps::install::command_line`).
    assert!(
        out.command.contains("uv pip install --python "),
        "{}",
        out.command
    );
    assert!(out.still_missing.is_empty());
}

#[test]
fn uv_installs_into_a_durable_target_when_available() {
    let env = Environment::from_process();
    if env.which("uv").is_none() {
        hermes_test_support::skip("uv not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    write_wheel(&wh, "hermes_uvlazy", "3.0", &[]);
    let venv = d.path().join("core");
    make_venv(&venv);
    chmod_tree(&venv, false);
    let before = tree(&venv);
    let target = d.path().join("lazy");
    let env = env
        .with(VENV_VAR, &venv.to_string_lossy())
        .with(DISABLE_VAR, "1")
        .with(TARGET_VAR, &target.to_string_lossy());
    let mut o = options(d.path(), env, &wh);
    o.installer = InstallerChoice::Auto;
    let out = install_specs(&["hermes-uvlazy==3.0"], &o);
    let after = tree(&venv);
    chmod_tree(&venv, true);
    assert!(out.ok, "{out:?}");
    assert!(
        out.command.contains("uv pip install --python ")
            && out.command.contains(&format!(
                " --target {}/0001 ",
                d.path().join("lazy.generations").display()
            )),
        "{}",
        out.command
    );
    assert!(target.join("hermes_uvlazy/__init__.py").exists());
    assert_eq!(before, after, "the core venv must not be written to");
    assert!(out.still_missing.is_empty(), "{:?}", out.still_missing);
    assert_no_raw_os_error(&out);
}

/// Makes `dir` a read-only bind mount in a private mount namespace of the
/// CURRENT THREAD (children spawned from it inherit it). Root only.
fn read_only_bind_in_private_namespace(dir: &Path) -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    unshare(CloneFlags::CLONE_NEWNS).map_err(|e| format!("unshare: {e}"))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("make / private: {e}"))?;
    mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|e| format!("bind: {e}"))?;
    mount(
        None::<&str>,
        dir,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .map_err(|e| format!("remount read-only: {e}"))
}

#[test]
fn durable_target_next_to_a_truly_read_only_core() {
    if !nix::unistd::geteuid().is_root() {
        hermes_test_support::skip("a read-only bind mount needs root");
        return;
    }
    if python3().is_none() {
        hermes_test_support::skip("python3 not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    write_wheel(&wh, "hermes_rolazy", "1.0", &[]);
    let venv = d.path().join("core");
    make_venv(&venv);
    let target = d.path().join("lazy");
    // A dedicated thread owns the private mount namespace, so nothing else in
    // the test binary sees the read-only mount.
    let (venv2, target2, wh2, home) = (
        venv.clone(),
        target.clone(),
        wh.clone(),
        d.path().to_path_buf(),
    );
    let result: Result<_, String> = std::thread::spawn(move || {
        read_only_bind_in_private_namespace(&venv2)?;
        // Proof the mount is really read-only for root.
        assert!(
            std::fs::write(venv2.join("probe"), "x").is_err(),
            "core must be read-only"
        );
        let env = Environment::from_process()
            .with(VENV_VAR, &venv2.to_string_lossy())
            .with(DISABLE_VAR, "1")
            .with(TARGET_VAR, &target2.to_string_lossy());
        Ok(install_specs(
            &["hermes-rolazy"],
            &options(&home, env, &wh2),
        ))
    })
    .join()
    .expect("install thread");
    let out = match result {
        Ok(out) => out,
        Err(e) => {
            hermes_test_support::skip(&format!("cannot create a read-only bind mount here ({e})"));
            return;
        }
    };
    assert!(out.ok, "{out:?}");
    assert!(target.join("hermes_rolazy/__init__.py").exists());
    assert!(out.still_missing.is_empty());
    assert_no_raw_os_error(&out);
}

#[test]
fn ensure_feature_installs_once_then_reports_satisfied() {
    if python3().is_none() {
        hermes_test_support::skip("python3 not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let wh = d.path().join("wheels");
    write_wheel(&wh, "hermes_feat_a", "1.0", &[]);
    write_wheel(&wh, "hermes_feat_b", "2.5", &[]);
    let venv = d.path().join("core");
    make_venv(&venv);
    let registry = hermes_deps::FeatureRegistry::parse(
        "version: 1\nfeatures:\n  test.feat:\n    description: a test feature\n    specs: [hermes-feat-a==1.0, 'hermes-feat-b>=2,<3']\n",
    )
    .unwrap();
    let env = Environment::from_process()
        .with(VENV_VAR, &venv.to_string_lossy())
        .without(TARGET_VAR)
        .without(DISABLE_VAR);
    let o = options(d.path(), env, &wh);

    let rows = hermes_deps::feature_status(&registry, &o).unwrap();
    assert!(!rows[0].installed);
    assert_eq!(rows[0].missing.len(), 2);

    let first = hermes_deps::ensure_feature(&registry, "test.feat", &o).unwrap();
    assert!(
        !first.already_satisfied && first.install.ok,
        "{:?}",
        first.install
    );
    assert!(hermes_deps::feature_status(&registry, &o).unwrap()[0].installed);

    let second = hermes_deps::ensure_feature(&registry, "test.feat", &o).unwrap();
    assert!(second.already_satisfied && second.install.command.is_empty());
}

#[test]
fn unwritable_target_fails_with_a_sentence_and_runs_nothing() {
    let Some(py) = python3() else {
        hermes_test_support::skip("python3 not on PATH");
        return;
    };
    let real = Command::new(py)
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
    let d = tempfile::tempdir().unwrap();
    let venv = d.path().join("core");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::os::unix::fs::symlink(&real, venv.join("bin/python3")).unwrap();
    // A target below a regular file can never be created, even by root.
    std::fs::write(d.path().join("file"), "").unwrap();
    let target = d.path().join("file/lazy");
    let env = Environment::from_process()
        .with(VENV_VAR, &venv.to_string_lossy())
        .with(DISABLE_VAR, "1")
        .with(TARGET_VAR, &target.to_string_lossy());
    let out = install_specs(&["hermes-anything"], &options(d.path(), env, d.path()));
    assert!(!out.ok && !out.blocked, "{out:?}");
    assert!(
        out.reason.starts_with(&format!(
            "lazy install target `{}` is not writable: ",
            target.display()
        )),
        "{}",
        out.reason
    );
    assert!(
        out.hint
            .as_deref()
            .unwrap_or("")
            .contains("HERMES_LAZY_INSTALL_TARGET")
    );
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "no installer ran"
    );
    assert_no_raw_os_error(&out);
}

/// One line a fake installer wrote: its arguments, working directory, that
/// directory's mode and owner, and how many entries it held.
#[derive(Debug)]
struct Seen {
    args: String,
    cwd: PathBuf,
    mode: String,
    uid: u32,
    entries: usize,
}

const RECORD_VAR: &str = "HERMES_TEST_INSTALLER_RECORD";

/// Shell that appends one `Seen` line to `$HERMES_TEST_INSTALLER_RECORD`.
const RECORD_SH: &str = r#"printf '%s|%s|%s|%s|%s\n' "$*" "$(pwd -P)" "$(stat -c %a .)" "$(stat -c %u .)" "$(ls -A | wc -l)" >> "$HERMES_TEST_INSTALLER_RECORD""#;

fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn read_record(path: &Path) -> Vec<Seen> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split('|').collect();
            assert_eq!(f.len(), 5, "{l}");
            Seen {
                args: f[0].to_string(),
                cwd: PathBuf::from(f[1]),
                mode: f[2].to_string(),
                uid: f[3].parse().unwrap(),
                entries: f[4].trim().parse().unwrap(),
            }
        })
        .collect()
}

/// A core venv whose `bin/python3` records every `-m pip ...` run (and
/// succeeds) and hands everything else to the real interpreter.
fn recording_venv(root: &Path) -> PathBuf {
    let real = Command::new(python3().unwrap())
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let real = String::from_utf8_lossy(&real.stdout).trim().to_string();
    let venv = root.join("core");
    write_script(
        &venv.join("bin/python3"),
        &format!(
            "if [ \"$1\" = -m ] && [ \"$2\" = pip ]; then\n{RECORD_SH}\nexit 0\nfi\nexec '{real}' \"$@\""
        ),
    );
    venv
}

fn assert_private_and_fresh(runs: &[Seen], what: &str) {
    let here = std::env::current_dir().unwrap().canonicalize().unwrap();
    assert!(!runs.is_empty(), "{what}: the fake installer did not run");
    for s in runs {
        assert_ne!(s.cwd, here, "{what} ran in the caller's directory: {s:?}");
        assert_eq!(s.mode, "700", "{what}: directory not private: {s:?}");
        assert_eq!(s.uid, nix::unistd::geteuid().as_raw(), "{what}: {s:?}");
        assert_eq!(s.entries, 0, "{what}: directory not fresh: {s:?}");
        assert!(
            !s.cwd.exists(),
            "{what}: the private directory is removed after the run: {s:?}"
        );
    }
}

#[test]
fn pip_runs_in_a_fresh_private_directory_not_the_callers() {
    if python3().is_none() {
        hermes_test_support::skip("python3 not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let venv = recording_venv(d.path());
    let record = d.path().join("record");
    let env = Environment::from_process()
        .with(VENV_VAR, &venv.to_string_lossy())
        .with(RECORD_VAR, &record.to_string_lossy())
        .without(TARGET_VAR)
        .without(DISABLE_VAR);
    let mut o = InstallOptions::new(d.path().join("home"), true, env);
    o.installer = InstallerChoice::Pip;
    let first = install_specs(&["hermes-cwd-probe"], &o);
    assert!(first.ok, "{first:?}");
    let second = install_specs(&["hermes-cwd-probe"], &o);
    assert!(second.ok, "{second:?}");
    let runs = read_record(&record);
    let installs: Vec<&Seen> = runs
        .iter()
        .filter(|s| s.args.starts_with("-m pip install"))
        .collect();
    assert_eq!(installs.len(), 2, "{runs:?}");
    assert!(installs[0].args.ends_with(" hermes-cwd-probe"), "{runs:?}");
    assert_ne!(
        installs[0].cwd, installs[1].cwd,
        "a fresh directory per run"
    );
    assert_private_and_fresh(&runs, "pip");
}

#[test]
fn uv_runs_in_a_fresh_private_directory_not_the_callers() {
    if python3().is_none() {
        hermes_test_support::skip("python3 not on PATH");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let venv = recording_venv(d.path());
    let home = d.path().join("home");
    write_script(&home.join("bin/uv"), RECORD_SH);
    let record = d.path().join("record");
    let env = Environment::from_process()
        .with(VENV_VAR, &venv.to_string_lossy())
        .with(RECORD_VAR, &record.to_string_lossy())
        .without(TARGET_VAR)
        .without(DISABLE_VAR);
    let o = InstallOptions::new(&home, true, env);
    let out = install_specs(&["hermes-cwd-probe"], &o);
    assert!(out.ok, "{out:?}");
    assert!(
        out.command.starts_with(&format!(
            "{} pip install --python ",
            home.join("bin/uv").display()
        )),
        "{}",
        out.command
    );
    let runs = read_record(&record);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].args.starts_with("pip install --python"), "{runs:?}");
    assert_private_and_fresh(&runs, "uv");
}
