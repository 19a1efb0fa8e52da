//! One `hermes` command: what our CLI does not implement is handed over to hermes-agent's CLI
//! (`commands::handoff`), first with a fake agent that reports what it was given, then with
//! the original agent itself.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use crate::util::{TestContext, render};

/// The exit code of the fake agent, so a test can tell its exit from ours.
const FAKE_EXIT: i32 = 7;

/// A fake hermes-agent venv in the test's directory: `bin/hermes` prints its pid, uid, two
/// variables and each argument on a line, then exits [`FAKE_EXIT`]; the venv's metadata says
/// version 9.9.9. Returns its console script.
fn fake_agent(t: &TestContext) -> PathBuf {
    let venv = t.dir.path().join("agent");
    let cli = venv.join("bin/hermes");
    fs::create_dir_all(cli.parent().unwrap()).unwrap();
    fs::create_dir_all(venv.join("lib/python3.11/site-packages/hermes_agent-9.9.9.dist-info"))
        .unwrap();
    // What the full image's build writes: where the agent came from.
    fs::write(
        venv.join(".hermes-agent-source"),
        "context:vendor/hermes-agent-9.9.9\n",
    )
    .unwrap();
    fs::write(
        &cli,
        "#!/bin/sh\n\
         echo \"pid=$$\"\n\
         echo \"uid=$(id -u)\"\n\
         echo \"HERMES_HOME=$HERMES_HOME\"\n\
         echo \"PROBE=$HANDOFF_PROBE\"\n\
         for a in \"$@\"; do echo \"arg=$a\"; done\n\
         exit 7\n",
    )
    .unwrap();
    fs::set_permissions(&cli, fs::Permissions::from_mode(0o755)).unwrap();
    cli
}

/// Runs `hermes args` with the fake agent installed.
fn with_fake(t: &TestContext, args: &[&str]) -> Output {
    t.cmd(args)
        .env("HERMES_AGENT_CLI", fake_agent(t))
        .env("HANDOFF_PROBE", "probe value")
        .output()
        .unwrap()
}

/// The arguments the fake agent received, or `None` when it did not run.
fn agent_args(out: &Output) -> Option<Vec<String>> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout.lines().any(|l| l.starts_with("pid=")).then(|| {
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix("arg="))
            .map(str::to_owned)
            .collect()
    })
}

#[test]
fn arguments_environment_and_exit_code_pass_through_in_the_same_process() {
    let t = TestContext::new();
    let child = t
        .cmd(&[
            "-p",
            "work",
            "cron",
            "create",
            "every 1h",
            "--deliver",
            "local",
        ])
        .env("HERMES_AGENT_CLI", fake_agent(&t))
        .env("HANDOFF_PROBE", "probe value")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(FAKE_EXIT), "{}", render(&out));
    assert_eq!(
        agent_args(&out).unwrap(),
        [
            "-p",
            "work",
            "cron",
            "create",
            "every 1h",
            "--deliver",
            "local"
        ]
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    // exec, not a child: the agent is the process we started, so signals reach it directly.
    assert!(stdout.contains(&format!("pid={pid}\n")), "{stdout}");
    assert!(
        stdout.contains(&format!("HERMES_HOME={}\n", t.root().display())),
        "{stdout}"
    );
    assert!(stdout.contains("PROBE=probe value\n"), "{stdout}");
    let uid = nix::unistd::getuid();
    assert!(stdout.contains(&format!("uid={uid}\n")), "{stdout}");
}

#[test]
fn agent_flags_bare_hermes_and_agent_only_subcommands_are_handed_over() {
    let t = TestContext::new();
    for args in [
        &["-z", "say hi"][..],
        &["--profile=work", "--tui"],
        &[],
        &["-p", "work"],
        &["auth", "add", "openrouter", "--api-key", "k"],
        &["memory", "off"],
        // An agent plugin's command: no command of ours is close, so the agent decides.
        &["honcho", "status"],
    ] {
        let out = with_fake(&t, args);
        assert_eq!(
            out.status.code(),
            Some(FAKE_EXIT),
            "{args:?}: {}",
            render(&out)
        );
        assert_eq!(agent_args(&out).unwrap(), args, "{args:?}");
    }
}

#[test]
fn our_commands_and_our_usage_errors_stay_ours() {
    let t = TestContext::new();
    let version = with_fake(&t, &["version"]);
    assert_eq!(version.status.code(), Some(0), "{}", render(&version));
    assert_eq!(agent_args(&version), None);
    let stdout = String::from_utf8_lossy(&version.stdout);
    assert!(stdout.contains("hermes-agent:    9.9.9 ("), "{stdout}");
    assert!(
        stdout.contains("/agent/bin/hermes) from context:vendor/hermes-agent-9.9.9\n"),
        "the agent's source: {stdout}"
    );
    for (args, tip) in [
        (
            &["gateway", "run", "--bogus"][..],
            "unexpected argument '--bogus'",
        ),
        (&["gateway", "bogus"], "unrecognized subcommand 'bogus'"),
        (&["gatwy"], "a similar subcommand exists: 'gateway'"),
        (&["--bogus"], "unexpected argument '--bogus'"),
    ] {
        let out = with_fake(&t, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", render(&out));
        assert_eq!(agent_args(&out), None, "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(tip),
            "{args:?}: {}",
            render(&out)
        );
    }
    let dump: serde_json::Value =
        serde_json::from_slice(&with_fake(&t, &["dump", "--json"]).stdout).unwrap();
    assert_eq!(dump["agent"]["status"], "installed");
    assert_eq!(dump["agent"]["version"], "9.9.9");
    assert_eq!(dump["agent"]["source"], "context:vendor/hermes-agent-9.9.9");
    let version: serde_json::Value =
        serde_json::from_slice(&with_fake(&t, &["version", "--json"]).stdout).unwrap();
    assert_eq!(
        version["agent"]["source"],
        "context:vendor/hermes-agent-9.9.9"
    );
}

#[test]
fn chat_follows_the_profiles_gateway_engine() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let config = t.root().join("profiles/work/config.yaml");
    fs::write(&config, "gateway:\n  engine: agent\n").unwrap();
    let agents = with_fake(&t, &["chat", "-q", "hi", "-p", "work"]);
    assert_eq!(agents.status.code(), Some(FAKE_EXIT), "{}", render(&agents));
    assert_eq!(
        agent_args(&agents).unwrap(),
        ["chat", "-q", "hi", "-p", "work"]
    );
    fs::write(&config, "gateway:\n  engine: native\n").unwrap();
    let ours = with_fake(&t, &["-p", "work", "chat", "-q", "hi"]);
    assert_eq!(agent_args(&ours), None, "{}", render(&ours));
    assert_eq!(ours.status.code(), Some(1), "no model: {}", render(&ours));
}

#[test]
fn without_the_agent_its_commands_fail_in_one_line_naming_it() {
    let t = TestContext::new();
    // With our own command for the same thing named first where there is one.
    for (args, what, ours) in [
        (&["cron", "list"][..], "hermes cron", Some("Cron page")),
        (
            &["-p", "work", "sessions", "list"],
            "hermes sessions",
            Some("Sessions page"),
        ),
        (
            &["logs"],
            "hermes logs",
            Some("`hermes service logs gateway-default`"),
        ),
        (&["-z", "hi"], "hermes -z", None),
        (&["auth", "add", "openrouter"], "hermes auth add", None),
    ] {
        let out = t.run(args);
        assert_eq!(out.status.code(), Some(127), "{args:?}: {}", render(&out));
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(
            lines.first().copied(),
            Some(
                format!(
                    "error: `{what}` is a command of hermes-agent, which is not installed here"
                )
                .as_str()
            ),
            "{stderr}"
        );
        assert_eq!(lines.len(), 2, "{stderr}");
        // How to get the agent where this runs (a host here: pip; the full image in ours).
        let how = hermes_services::agent::Place::current().get_the_agent();
        assert!(lines[1].contains(&how), "{stderr}");
        match ours {
            Some(ours) => assert!(
                lines[1].starts_with("hint: ") && lines[1].contains(ours),
                "{stderr}"
            ),
            None => assert!(
                lines[1].starts_with("hint: for hermes-agent's own"),
                "{stderr}"
            ),
        }
    }
    let bare = t.run(&[]);
    assert_eq!(bare.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&bare.stdout).contains("Usage: hermes"));
}

#[test]
fn an_agent_that_cannot_be_executed_is_a_126_with_its_path() {
    let t = TestContext::new();
    let cli = fake_agent(&t);
    fs::set_permissions(&cli, fs::Permissions::from_mode(0o644)).unwrap();
    let out = t
        .cmd(&["cron", "list"])
        .env("HERMES_AGENT_CLI", &cli)
        .output()
        .unwrap();
    // Root may execute a file without execute bits only if some bit is set; 0644 has none.
    assert_eq!(out.status.code(), Some(126), "{}", render(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "error: cannot run hermes-agent's CLI `{}`",
            cli.display()
        )),
        "{stderr}"
    );
}

#[test]
fn help_lists_the_commands_of_hermes_agent() {
    let t = TestContext::new();
    insta::assert_snapshot!("help", t.snapshot(&t.run(&["--help"])));
}

// ----- the original agent -----

/// The first `{a,b,...}` choice list of an argparse `--help`.
fn argparse_choices(help: &str) -> BTreeSet<String> {
    let start = help.find('{').expect("a choice list") + 1;
    let end = start + help[start..].find('}').unwrap();
    help[start..end].split(',').map(str::to_owned).collect()
}

/// The flags of an argparse `--help`'s `options:` section (`-z PROMPT, --oneshot PROMPT`).
fn argparse_flags(help: &str) -> BTreeSet<String> {
    let section = &help[help.find("\noptions:\n").expect("an options section")..];
    section
        .lines()
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  -"))
        .flat_map(|l| l.trim().split(", ").map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|f| f.split([' ', '=']).next().map(str::to_owned))
        .filter(|f| f.starts_with('-'))
        .collect()
}

/// `program args` with `HERMES_HOME` in the test's directory; stdout.
fn agent_help(program: &Path, t: &TestContext, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .env("HERMES_HOME", t.root())
        .env("HOME", t.home())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", render(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The names of a clap `--help`'s `Commands:` section.
fn clap_commands(help: &str) -> BTreeSet<String> {
    let section = &help[help.find("Commands:\n").expect("a Commands section")..];
    let lines: Vec<&str> = section
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    let names = lines
        .iter()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned));
    // A command's visible aliases are ours too: `... [alias: completion]`.
    let aliases = lines.iter().filter_map(|l| {
        let at = l.find("[alias: ").or_else(|| l.find("[aliases: "))?;
        let list = &l[at..];
        let list = &list[list.find(": ")? + 2..list.find(']')?];
        Some(list.split(", ").map(str::to_owned).collect::<Vec<_>>())
    });
    names
        .chain(aliases.flatten())
        .filter(|c| c != "help")
        .collect()
}

/// Our `--help` section naming what is handed over.
struct HandoffSection {
    /// Its top-level commands.
    commands: BTreeSet<String>,
    /// Its `NAME a|b` lines: subcommands of a shared command.
    subcommands: Vec<(String, BTreeSet<String>)>,
    /// Its flags.
    flags: BTreeSet<String>,
}

/// Reads [`HandoffSection`] from our `--help`.
fn our_handoff_section(help: &str) -> HandoffSection {
    let section = &help[help
        .find("Commands of hermes-agent (handed over when it is installed):\n")
        .expect("the hand-over section")..];
    let lines: Vec<&str> = section.lines().skip(1).map(str::trim).collect();
    let flags_at = lines.iter().position(|l| l.starts_with("flags: ")).unwrap();
    let items = |ls: &[&str]| -> BTreeSet<String> {
        ls.join(" ")
            .split(", ")
            .map(|s| s.trim().to_owned())
            .collect()
    };
    let commands_end = lines.iter().position(|l| l.contains('|')).unwrap();
    let commands = items(&lines[..commands_end]);
    let subcommands = lines[commands_end..flags_at]
        .iter()
        .map(|l| {
            let (name, subs) = l.split_once(' ').unwrap();
            (
                name.to_owned(),
                subs.split('|').map(str::to_owned).collect(),
            )
        })
        .collect();
    let flag_lines: Vec<&str> = lines[flags_at..]
        .iter()
        .take_while(|l| l.starts_with('-') || l.starts_with("flags: "))
        .copied()
        .collect();
    let flags = items(&flag_lines)
        .into_iter()
        .map(|f| f.trim_start_matches("flags: ").to_owned())
        .collect();
    HandoffSection {
        commands,
        subcommands,
        flags,
    }
}

/// The static lists our `--help` shows are the installed agent's: a new command, subcommand
/// or flag of hermes-agent fails this test instead of silently not being handed over.
#[test]
fn the_handed_over_lists_match_the_installed_agents_argparse() {
    let Some(original) = hermes_test_support::original_agent() else {
        return;
    };
    let t = TestContext::new();
    let ours = t.ok(&["--help"]);
    let HandoffSection {
        commands,
        subcommands,
        flags,
    } = our_handoff_section(&ours);
    let theirs = agent_help(&original.hermes, &t, &["--help"]);
    let our_commands = clap_commands(&ours);
    let expected: BTreeSet<String> = argparse_choices(&theirs)
        .difference(&our_commands)
        .cloned()
        .collect();
    assert_eq!(commands, expected, "top-level commands of hermes-agent");
    let mut their_flags = argparse_flags(&theirs);
    for ours in ["-h", "--help", "-V", "--version"] {
        assert!(their_flags.remove(ours), "{ours} in {their_flags:?}");
    }
    assert_eq!(flags, their_flags, "top-level flags of hermes-agent");
    let shared: BTreeSet<&String> = our_commands
        .iter()
        .filter(|c| argparse_choices(&theirs).contains(*c))
        .collect();
    for (name, subs) in &subcommands {
        assert!(shared.contains(name), "{name} is a command of both");
        let their_subs = argparse_choices(&agent_help(&original.hermes, &t, &[name, "--help"]));
        let our_subs = clap_commands(&t.ok(&[name, "--help"]));
        let expected: BTreeSet<String> = their_subs.difference(&our_subs).cloned().collect();
        assert_eq!(
            subs, &expected,
            "subcommands of `{name}` only hermes-agent has"
        );
    }
}

#[test]
fn the_original_agent_answers_its_commands_through_ours() {
    let Some(original) = hermes_test_support::original_agent() else {
        return;
    };
    let t = TestContext::new();
    let run = |args: &[&str]| {
        t.cmd(args)
            .env("HERMES_AGENT_CLI", &original.hermes)
            .output()
            .unwrap()
    };
    let sessions = run(&["sessions", "list"]);
    assert_eq!(sessions.status.code(), Some(0), "{}", render(&sessions));
    assert_eq!(
        String::from_utf8_lossy(&sessions.stdout),
        agent_help(&original.hermes, &t, &["sessions", "list"]),
        "the agent's own output"
    );
    // The agent made its state in our HERMES_HOME: same home, same environment.
    assert!(t.root().join("state.db").is_file());
    // `version` stays ours and names the agent's version, the one the agent reports itself.
    let theirs = agent_help(&original.hermes, &t, &["--version"]);
    let their_version = theirs
        .split_whitespace()
        .find_map(|w| w.strip_prefix('v'))
        .expect("`Hermes Agent vX.Y.Z`");
    let ours = String::from_utf8_lossy(&run(&["--version"]).stdout).into_owned();
    assert!(ours.starts_with("hermes "), "{ours}");
    assert!(
        ours.contains(&format!(
            "hermes-agent:    {their_version} ({}) from ",
            original.hermes.display()
        )),
        "{ours}\n---\n{theirs}"
    );
    // A command only the agent has, reading the same home.
    let status = run(&["status"]);
    assert_eq!(status.status.code(), Some(0), "{}", render(&status));
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("Hermes Agent Status"),
        "{}",
        render(&status)
    );
}
