//! The CMD routing table through the real binary, and environment passthrough.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::util::*;

#[test]
fn routing_table() {
    let sb = Sandbox::new();
    // A program named like a hermes subcommand, first on PATH: it must not win.
    let bin = sb.path().join("bin");
    fs::create_dir(&bin).unwrap();
    for name in ["profile", "version"] {
        let p = bin.join(name);
        fs::write(&p, "#!/bin/sh\necho WRONG-PROGRAM\n").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let case = |cmd: &[&str]| {
        let mut c = sb.init(cmd);
        c.env("PATH", &path);
        run(&mut c)
    };

    // No CMD: `hermes` (prints its help).
    let out = case(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert!(stdout(&out).contains("Usage: hermes"), "{}", render(&out));
    // A leading dash: `hermes --version`.
    let out = case(&["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert!(stdout(&out).starts_with("hermes "), "{}", render(&out));
    // Subcommands beat programs on PATH.
    for cmd in [&["profile", "list"][..], &["version"][..]] {
        let out = case(cmd);
        assert_eq!(out.status.code(), Some(0), "{cmd:?}: {}", render(&out));
        assert!(
            !stdout(&out).contains("WRONG-PROGRAM"),
            "{cmd:?}: {}",
            render(&out)
        );
    }
    let out = case(&["profile", "list"]);
    assert!(stdout(&out).contains("default"), "{}", render(&out));
    // Programs on PATH run as they are.
    let out = case(&["sh", "-c", "exit 42"]);
    assert_eq!(out.status.code(), Some(42), "{}", render(&out));
    let out = case(&["echo", "hello", "world"]);
    assert_eq!(stdout(&out), "hello world\n");
    let out = case(&["/bin/sh", "-c", "echo by-path"]);
    assert_eq!(stdout(&out), "by-path\n");
    // Anything else: `hermes <CMD>`, which says it does not know it (usage error, 2).
    let out = case(&["no-such-thing-here"]);
    assert_eq!(out.status.code(), Some(2), "{}", render(&out));
    assert!(
        stderr(&out).contains("no-such-thing-here"),
        "{}",
        render(&out)
    );
}

#[test]
fn the_container_environment_reaches_the_main_program_unchanged() {
    let sb = Sandbox::new();
    let mut c = sb.init(&["env"]);
    c.env("HERMES_TEST_VALUE", "a b=c 'q' \"dq\" $NOT_EXPANDED")
        .env("LANG", "C.UTF-8")
        .env("EMPTY", "");
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let mut got: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    let mut want: Vec<String> = sb
        .env()
        .into_iter()
        .chain([
            (
                "HERMES_TEST_VALUE".to_string(),
                "a b=c 'q' \"dq\" $NOT_EXPANDED".to_string(),
            ),
            ("LANG".into(), "C.UTF-8".into()),
            ("EMPTY".into(), String::new()),
        ])
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    got.sort();
    want.sort();
    assert_eq!(got, want, "{}", render(&out));
}

#[test]
fn the_main_program_runs_in_the_working_directory_it_was_given() {
    let sb = Sandbox::new();
    let wd = sb.path().join("work dir");
    fs::create_dir(&wd).unwrap();
    let mut c = sb.init(&["pwd"]);
    c.current_dir(&wd);
    let out = run(&mut c);
    assert_eq!(
        stdout(&out).trim(),
        wd.display().to_string(),
        "{}",
        render(&out)
    );
}

#[test]
fn a_dashboard_container_skips_gateway_reconciliation() {
    let sb = Sandbox::new();
    // `dashboard` routes to `hermes dashboard` (here its help); no gateways, and no second
    // dashboard as a service beside the main program.
    let mut c = sb.init(&["dashboard", "--help"]);
    c.env("HERMES_DASHBOARD", "yes");
    let out = run(&mut c);
    let err = stderr(&out);
    assert!(
        err.contains("skipping gateway reconciliation"),
        "{}",
        render(&out)
    );
    assert!(
        err.contains("the dashboard is the main program; no `dashboard` service"),
        "{}",
        render(&out)
    );
    assert!(!sb.home().join("logs/container-boot.log").exists());
    let out = run(&mut sb.init(&["true"]));
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let log = fs::read_to_string(sb.home().join("logs/container-boot.log")).unwrap();
    assert!(
        log.contains(" profile=default prior_state=None action=registered"),
        "{log}"
    );
}

/// `docker run IMAGE init -- CMD` (or `hermes init ...`, `tini ...`) asks for what PID 1
/// already is: CMD runs as the main program, with no second supervisor inside the first.
#[test]
fn a_nested_init_runs_its_command_without_a_second_supervisor() {
    let sb = Sandbox::new();
    for cmd in [
        &["init", "--", "sh", "-c", "echo nested-ran; exit 4"][..],
        &[
            "hermes",
            "init",
            "-s",
            "sh",
            "-c",
            "echo nested-ran; exit 4",
        ][..],
    ] {
        let out = run(&mut sb.init(cmd));
        assert_eq!(out.status.code(), Some(4), "{cmd:?}: {}", render(&out));
        assert_eq!(
            stdout(&out).matches("nested-ran").count(),
            1,
            "{}",
            render(&out)
        );
        let err = stderr(&out);
        assert!(
            err.contains("this container's init is already running"),
            "{err}"
        );
        assert_eq!(
            err.matches("reconcile: profile=default").count(),
            1,
            "{err}"
        );
    }
}

/// A main program that cannot be executed is said in one line naming it, and the exit code is
/// a shell's: 127 when it (or its `#!` interpreter) is not found, 126 when it cannot run.
#[test]
fn a_main_program_that_cannot_run_says_why_with_a_shells_code() {
    let sb = Sandbox::new();
    let noexec = sb.path().join("noexec");
    fs::write(&noexec, "#!/bin/sh\necho never\n").unwrap();
    fs::set_permissions(&noexec, fs::Permissions::from_mode(0o644)).unwrap();
    let badinterp = sb.path().join("badinterp");
    fs::write(&badinterp, "#!/nonexistent/interpreter\necho never\n").unwrap();
    fs::set_permissions(&badinterp, fs::Permissions::from_mode(0o755)).unwrap();
    for (program, code) in [
        ("/nonexistent/program".to_string(), 127),
        (badinterp.display().to_string(), 127),
        (noexec.display().to_string(), 126),
    ] {
        let out = run(&mut sb.init(&[&program]));
        assert_eq!(out.status.code(), Some(code), "{program}: {}", render(&out));
        // On stderr, in tini's shape (`[FATAL tini (7)] exec /x failed: …`), not as the
        // main program's output.
        let err = stderr(&out);
        let line = format!(
            "[FATAL hermes ({})] cannot start: `{program}`",
            out_pid(&err)
        );
        assert!(err.contains(&line), "{program}: {}", render(&out));
        assert!(
            !stdout(&out).contains("cannot start"),
            "not on stdout: {}",
            render(&out)
        );
        assert!(!stdout(&out).contains("never") && !err.contains("never"));
    }
}

/// The pid in a `[FATAL hermes (<pid>)]` line (PID 1 in a container, the init's own pid here).
fn out_pid(err: &str) -> String {
    err.split("[FATAL hermes (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or("?")
        .to_owned()
}
