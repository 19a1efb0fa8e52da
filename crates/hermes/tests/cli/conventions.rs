//! The conventions of a command-line tool: shell completions and a man page from the parser's
//! own definitions, colour only where it is wanted, `-p` only where it applies, profile
//! aliases that outlive a cargo build and say when they cannot be found, a systemd unit
//! that is uninstalled in the right order, and an install's progress in a log.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use crate::util::{PyEnv, TestContext, render};

#[test]
fn completions_for_every_shell_name_our_commands() {
    let t = TestContext::new();
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let script = t.ok(&["completions", shell]);
        for word in ["gateway", "completions", "json"] {
            assert!(script.contains(word), "{shell}: no `{word}`");
        }
    }
    // The bash script is valid bash.
    if Path::new("/bin/bash").exists() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("hermes.bash");
        fs::write(&file, t.ok(&["completions", "bash"])).unwrap();
        let check = std::process::Command::new("/bin/bash")
            .arg("-n")
            .arg(&file)
            .output()
            .unwrap();
        assert!(check.status.success(), "{}", render(&check));
    }
    let out = t.run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", render(&out));
    // The original's spelling, `hermes completion [SHELL]` (bash by default), is ours too:
    // never handed to the agent, whose script would complete its commands, not ours.
    assert_eq!(t.ok(&["completion"]), t.ok(&["completions", "bash"]));
    assert_eq!(
        t.ok(&["completion", "fish"]),
        t.ok(&["completions", "fish"])
    );
}

#[test]
fn the_man_page_is_generated_from_the_same_definitions() {
    let t = TestContext::new();
    let page = t.ok(&["man"]);
    assert!(
        page.contains(".TH hermes 1") && page.contains(env!("CARGO_PKG_VERSION")),
        "{page}"
    );
    assert!(page.contains("gateway") && page.contains("completions"));
    let dir = tempfile::tempdir().unwrap();
    t.ok(&["man", "--dir", dir.path().to_str().unwrap()]);
    for name in ["hermes.1", "hermes-gateway.1", "hermes-gateway-start.1"] {
        let text = fs::read_to_string(dir.path().join(name)).unwrap();
        assert!(text.starts_with(".ie") || text.contains(".TH"), "{name}");
    }
    let start = fs::read_to_string(dir.path().join("hermes-gateway-start.1")).unwrap();
    assert!(start.contains("profile"), "{start}");
    // A directory that is not there: one error with a hint, nothing written elsewhere.
    let missing = dir.path().join("no/such/dir");
    let out = t.run(&["man", "--dir", missing.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(
        stderr.contains("error: ") && stderr.contains("hint: "),
        "{stderr}"
    );
}

/// The options section of `hermes ARGS --help`.
fn help(t: &TestContext, args: &[&str]) -> String {
    let mut args = args.to_vec();
    args.push("--help");
    t.ok(&args)
}

#[test]
fn profile_flag_is_offered_only_where_it_applies() {
    let t = TestContext::new();
    for args in [
        &["gateway", "start"][..],
        &["gateway", "run"],
        &["dump"],
        &["doctor"],
        &["chat"],
        &["deps", "install"],
        &["memory", "setup"],
    ] {
        assert!(help(&t, args).contains("-p, --profile <NAME>"), "{args:?}");
    }
    for args in [
        &["version"][..],
        &["up"],
        &["health"],
        &["service", "list"],
        &["gateway", "status"],
        &["gateway", "list"],
        &["profile", "list"],
        &["profile", "create"],
        &["completions"],
    ] {
        assert!(!help(&t, args).contains("--profile"), "{args:?}");
    }
    // Under init, `-p` is tini's signal and says so.
    let init = help(&t, &["init"]);
    assert!(
        !init.contains("--profile") && init.contains("-p <SIGNAL>"),
        "{init}"
    );
    // The top level still has it (it applies to what follows).
    assert!(help(&t, &[]).contains("-p, --profile <NAME>"));
}

#[test]
fn profile_flag_works_before_and_after_the_command() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    for args in [
        &["-p", "work", "dump", "--json"][..],
        &["dump", "--json", "-p", "work"],
        &["dump", "--profile=work", "--json"],
    ] {
        let dump: serde_json::Value = serde_json::from_str(&t.ok(args)).unwrap();
        assert_eq!(dump["profile"], "work", "{args:?}");
    }
    for args in [&["-p", "ghost", "dump"][..], &["dump", "-p", "ghost"]] {
        assert_eq!(t.run(args).status.code(), Some(1), "{args:?}");
    }
    // Where it does not apply, after the command it is a usage error...
    let out = t.run(&["version", "-p", "work"]);
    assert_eq!(out.status.code(), Some(2), "{}", render(&out));
    // ...and `--all` excludes it wherever it is.
    for args in [
        &["-p", "work", "gateway", "start", "--all"][..],
        &["gateway", "start", "--all", "-p", "work"],
    ] {
        let out = t.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", render(&out));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--all"));
    }
}

/// Runs `hermes ARGS` with its stdout on a pseudo-terminal; what it wrote there.
fn on_a_terminal(t: &TestContext, args: &[&str], env: &[(&str, &str)]) -> String {
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut cmd = t.cmd(args);
    cmd.env_remove("NO_COLOR").env_remove("TERM");
    for (key, value) in env {
        cmd.env(key, value);
    }
    let child = cmd
        .stdout(Stdio::from(pty.slave))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // `cmd` holds the only other copy of the slave: drop it so the master sees the end.
    drop(cmd);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.code().is_some());
    let mut master = fs::File::from(pty.master);
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    // Linux answers EIO on the master once the slave is closed and drained.
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        text.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&text).into_owned()
}

#[test]
fn colour_only_on_a_terminal_that_wants_it() {
    let t = TestContext::new();
    t.ok(&["version"]);
    // Our own colour (doctor's marks) and clap's (the help's headings).
    for args in [&["doctor"][..], &["gateway", "--help"]] {
        let coloured = on_a_terminal(&t, args, &[("TERM", "xterm-256color")]);
        assert!(
            coloured.contains('\x1b'),
            "{args:?} on a terminal: {coloured:?}"
        );
        for env in [
            &[("TERM", "dumb")][..],
            &[("TERM", "xterm-256color"), ("NO_COLOR", "1")],
        ] {
            let plain = on_a_terminal(&t, args, env);
            assert!(
                plain.contains("doctor") || plain.contains("Usage"),
                "{plain:?}"
            );
            assert!(!plain.contains('\x1b'), "{args:?} {env:?}: {plain:?}");
        }
    }
}

/// An installed `hermes` (outside any cargo build directory) in a directory of its own.
fn installed_hermes(t: &TestContext) -> std::path::PathBuf {
    let bin = t.dir.path().join("installed/bin");
    fs::create_dir_all(&bin).unwrap();
    let hermes = bin.join("hermes");
    fs::write(
        &hermes,
        format!("#!/bin/sh\nexec {} \"$@\"\n", env!("CARGO_BIN_EXE_hermes")),
    )
    .unwrap();
    fs::set_permissions(&hermes, fs::Permissions::from_mode(0o755)).unwrap();
    hermes
}

#[test]
fn an_alias_runs_the_installed_hermes_and_says_when_it_is_not_found() {
    let t = TestContext::new();
    let local_bin = t.home().join(".local/bin");
    // Run from the cargo build (as `cargo run` does), with an installed hermes on PATH and
    // `~/.local/bin` not on PATH.
    let installed = installed_hermes(&t);
    let path = format!("{}:/usr/bin:/bin", installed.parent().unwrap().display());
    let out = t
        .cmd(&["profile", "create", "work"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", render(&out));
    let wrapper = fs::read_to_string(local_bin.join("work")).unwrap();
    assert_eq!(
        wrapper,
        format!("#!/bin/sh\nexec {} -p work \"$@\"\n", installed.display())
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("`{}` is not on your PATH", local_bin.display()))
            && stderr.contains("export PATH="),
        "{stderr}"
    );
    assert!(!stderr.contains("cargo clean"), "{stderr}");
    // The wrapper works.
    let run = std::process::Command::new(local_bin.join("work"))
        .args(["dump", "--json"])
        .env_clear()
        .env("HOME", t.home())
        .env("HERMES_HOME", t.root())
        .env("HERMES_AGENT_CLI", "")
        .output()
        .unwrap();
    let dump: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(dump["profile"], "work");

    // With `~/.local/bin` on PATH and no installed hermes: no PATH warning, but the build it
    // had to use is said.
    let path = format!("{}:/usr/bin:/bin", local_bin.display());
    let out = t
        .cmd(&["profile", "create", "home"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", render(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("not on your PATH"), "{stderr}");
    assert!(stderr.contains("cargo clean"), "{stderr}");
    let wrapper = fs::read_to_string(local_bin.join("home")).unwrap();
    assert!(
        wrapper.contains(&format!("exec {} -p home", env!("CARGO_BIN_EXE_hermes"))),
        "{wrapper}"
    );
}

#[test]
fn the_gateway_unit_is_type_notify_and_uninstall_says_what_to_run_first() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let installed = installed_hermes(&t);
    let out = t
        .cmd(&["gateway", "install", "-p", "work"])
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", installed.parent().unwrap().display()),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", render(&out));
    let dir = t.home().join(".config/systemd/user");
    let unit = dir.join("hermes-gateway-work.service");
    let text = fs::read_to_string(&unit).unwrap();
    assert!(
        text.contains("Type=notify\n") && text.contains("NotifyAccess=main\n"),
        "{text}"
    );
    // The unit runs the installed hermes, not the cargo build.
    assert!(
        text.contains(&format!(
            "ExecStart={} -p work gateway run",
            installed.display()
        )),
        "{text}"
    );
    // A profile served by the original agent, which sends no `READY=1` without its
    // watchdog: `Type=simple`, or systemd would kill it for never being ready.
    t.ok(&["profile", "create", "agent", "--no-alias"]);
    fs::write(
        t.root().join("profiles/agent/config.yaml"),
        "gateway:\n  engine: agent\n",
    )
    .unwrap();
    t.ok(&["gateway", "install", "-p", "agent"]);
    let agent = fs::read_to_string(dir.join("hermes-gateway-agent.service")).unwrap();
    assert!(
        agent.contains("Type=simple\n") && !agent.contains("Type=notify"),
        "{agent}"
    );
    // Enabled as `systemctl --user enable` does: uninstall keeps it and says what to run.
    let wants = dir.join("default.target.wants");
    fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink(&unit, wants.join("hermes-gateway-work.service")).unwrap();
    let out = t.run(&["-p", "work", "gateway", "uninstall"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(
        stderr.contains(
            "hint: first run `systemctl --user disable --now hermes-gateway-work.service`"
        ),
        "{stderr}"
    );
    assert!(unit.exists(), "an enabled unit is kept");
    // Disabled: removed, and what is left to run is said.
    fs::remove_file(wants.join("hermes-gateway-work.service")).unwrap();
    let stdout = t.ok(&["-p", "work", "gateway", "uninstall"]);
    assert!(!unit.exists());
    assert!(
        stdout.contains("systemctl --user stop hermes-gateway-work.service")
            && stdout.contains("daemon-reload"),
        "{stdout}"
    );
}

/// The command of the `running `…`…` progress line on `stderr`.
fn running_line(stderr: &str) -> Option<&str> {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("running `")?.strip_suffix("`…"))
}

#[test]
fn an_install_shows_its_steps_without_a_terminal_and_the_command_that_ran() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let Some(py) = PyEnv::new(&t, "hermes_progress_pkg") else {
        return;
    };
    let install = |extra: &[&str]| {
        let mut args = vec!["deps", "install"];
        args.extend_from_slice(extra);
        args.push("hermes-progress-pkg==1.0");
        // stderr is a pipe here, as under `docker logs` or CI.
        py.hermes(&t, &args).output().unwrap()
    };

    // A dry run: the progress line names the flag that makes it one.
    let out = install(&["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let command = running_line(&stderr).unwrap_or_else(|| panic!("no progress: {stderr}"));
    assert!(command.contains(" --dry-run "), "{command}");

    // A real install: one line per step, and the command printed is the one that ran, with
    // the flags only the real command line has (pip's `--no-input`, uv's `--python`).
    let out = install(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let command = running_line(&stderr).unwrap_or_else(|| panic!("no progress: {stderr}"));
    assert!(
        command.contains(" --no-input ") || command.contains(" --python "),
        "{command}"
    );
    assert!(!command.contains("--dry-run"), "{command}");
    assert!(stderr.contains("checking availability…"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l == format!("ran: {command}")),
        "stdout names another command than the one that ran:\n{stdout}\nran: {command}"
    );
    let check = py.import("hermes_progress_pkg");
    assert!(check.status.success(), "{}", render(&check));
}
