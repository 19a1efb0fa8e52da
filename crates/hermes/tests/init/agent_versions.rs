//! Boot stage 6b end to end, with a stand-in agent whose schema the test chooses: an agent
//! older than the volume never starts (its gateway parks `failed`, exit 78, the volume's files
//! byte-identical), an override runs it with a warning, a newer agent migrates the volume after
//! a backup (a failed migration is undone and parks the gateway), and a multiplexing volume
//! starts exactly one gateway. The real agents (0.19.0, the 0.20.1 fixture) are tested on the
//! same paths in `hermes-services` and in real Docker.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use hermes_supervisor::{Client, StateName};

use crate::util::*;

/// A stand-in agent venv under `dir` with config schema `schema`: its `bin/python` answers the
/// runtime's probe and migration scripts (a migration sets the file's stamp, or fails after
/// breaking the file when `migration_fails`), its `bin/hermes` is a gateway that says so and
/// waits.
fn fake_agent(dir: &Path, schema: u64, migration_fails: bool) -> PathBuf {
    let bin = dir.join("agent/bin");
    fs::create_dir_all(&bin).unwrap();
    let migrate = if migration_fails {
        "echo 'broken: [' > \"$HERMES_HOME/config.yaml\"; echo 'Traceback: migration exploded' >&2; exit 1".to_owned()
    } else {
        format!(
            "before=$(sed -n 's/^_config_version: //p' \"$HERMES_HOME/config.yaml\"); \
             sed -i 's/^_config_version: .*/_config_version: {schema}/' \"$HERMES_HOME/config.yaml\"; \
             echo \"HERMES_ANSWER {{\\\"before\\\": $before, \\\"after\\\": {schema}, \\\"latest\\\": {schema}}}\""
        )
    };
    let python = format!(
        "#!/bin/sh\ncase \"$4\" in\n  *migrate_config*) {migrate} ;;\n  *) echo \"HERMES_ANSWER {{\\\"config_version\\\": {schema}, \\\"multiplex_default\\\": false}}\" ;;\nesac\n"
    );
    let gateway = "#!/bin/sh\necho \"agent-gateway-up $*\"\nexec sleep 60\n";
    for (name, text) in [("python", python.as_str()), ("hermes", gateway)] {
        fs::write(bin.join(name), text).unwrap();
        fs::set_permissions(bin.join(name), fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin.join("hermes")
}

/// A volume with a default profile and `work`, both stamped `schema`, both last `running`.
fn volume(home: &Path, schema: u64) {
    for dir in [home.to_path_buf(), home.join("profiles/work")] {
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("SOUL.md"), "soul").unwrap();
        fs::write(
            dir.join("config.yaml"),
            format!("_config_version: {schema}\nmodel:\n  default: kept # mine\n"),
        )
        .unwrap();
        fs::write(dir.join(".env"), "API_SERVER_KEY=k\nOTHER=${HOME}x\n").unwrap();
        fs::write(
            dir.join("gateway_state.json"),
            r#"{"gateway_state":"running"}"#,
        )
        .unwrap();
    }
}

/// Every file of the volume outside `logs/`, with its bytes; the empty lock sidecars
/// (`.env.lock`) that boot stage 5 takes while it checks `.env` are left out.
fn files(home: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, home: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.starts_with(home.join("logs")) || path.extension().is_some_and(|e| e == "lock")
            {
                continue;
            }
            if path.is_dir() {
                walk(&path, home, out);
            } else {
                out.insert(path.clone(), fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(home, home, &mut out);
    out
}

fn boot(sb: &Sandbox, cli: &Path, extra: &[(&str, &str)]) -> Child {
    let mut cmd = sb.init(&["sleep", "60"]);
    cmd.env("HERMES_AGENT_CLI", cli)
        .envs(extra.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

fn state(client: &mut Client, name: &str) -> Option<(StateName, String)> {
    client
        .status(Some(name))
        .unwrap()
        .into_iter()
        .next()
        .map(|r| (r.state, r.reason))
}

fn wait_state(client: &mut Client, name: &str, want: StateName) -> String {
    let mut reason = String::new();
    wait_for(&format!("`{name}` {want:?}"), || {
        match state(client, name) {
            Some((s, r)) if s == want => {
                reason = r;
                true
            }
            _ => false,
        }
    });
    reason
}

fn stop(child: Child) -> String {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let out = child.wait_with_output().unwrap();
    render(&out)
}

#[test]
fn an_agent_older_than_the_volume_never_starts_and_writes_nothing() {
    let sb = Sandbox::new();
    let home = sb.home();
    volume(&home, 35);
    let cli = fake_agent(sb.path(), 33, false);
    let before = files(&home);

    let child = boot(&sb, &cli, &[]);
    let mut client = connect_supervisor(&sb.runtime());
    let reason = wait_state(&mut client, "gateway-default", StateName::Failed);
    assert!(reason.contains("78"), "{reason}");
    wait_state(&mut client, "gateway-work", StateName::Failed);
    let log = fs::read_to_string(home.join("logs/gateways/default/current")).unwrap();
    assert!(
        log.contains("config schema 35") && log.contains("(schema 33)"),
        "{log}"
    );
    assert!(log.contains("HERMES_ALLOW_AGENT_DOWNGRADE"), "{log}");
    assert!(!log.contains("agent-gateway-up"), "{log}");
    let said = stop(child);
    assert!(
        said.contains("[init] error: the volume was written with config schema 35"),
        "{said}"
    );
    assert_eq!(files(&home), before, "the volume's files changed");

    // The override runs it, with a warning.
    let child = boot(&sb, &cli, &[("HERMES_ALLOW_AGENT_DOWNGRADE", "1")]);
    let mut client = connect_supervisor(&sb.runtime());
    wait_for("the agent's gateway", || {
        fs::read_to_string(home.join("logs/gateways/default/current"))
            .is_ok_and(|t| t.contains("agent-gateway-up"))
    });
    assert!(matches!(
        state(&mut client, "gateway-default"),
        Some((StateName::Up | StateName::Starting, _))
    ));
    let log = fs::read_to_string(home.join("logs/gateways/default/current")).unwrap();
    assert!(log.contains("running it anyway"), "{log}");
    stop(child);
}

#[test]
fn a_newer_agent_migrates_after_a_backup() {
    let sb = Sandbox::new();
    let home = sb.home();
    volume(&home, 33);
    let cli = fake_agent(sb.path(), 35, false);
    let original = fs::read(home.join("config.yaml")).unwrap();

    let child = boot(&sb, &cli, &[]);
    let mut client = connect_supervisor(&sb.runtime());
    wait_state(&mut client, "gateway-default", StateName::Up);
    let said = stop(child);
    for dir in [home.clone(), home.join("profiles/work")] {
        let text = fs::read_to_string(dir.join("config.yaml")).unwrap();
        assert!(text.starts_with("_config_version: 35\n"), "{text}");
        let copies: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("config.yaml.bak-") || n.starts_with(".env.bak-"))
            .collect();
        assert_eq!(copies.len(), 2, "{copies:?}");
    }
    let copy = fs::read_dir(&home)
        .unwrap()
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("config.yaml.bak-")
        })
        .unwrap();
    assert_eq!(fs::read(copy.path()).unwrap(), original);
    let boot_log = fs::read_to_string(home.join("logs/container-boot.log")).unwrap();
    assert!(
        boot_log.contains("config-migrate profile=default from=33 to=35 result=migrated backups="),
        "{boot_log}"
    );
    assert!(
        boot_log.contains("config-migrate profile=work from=33 to=35 result=migrated"),
        "{boot_log}"
    );
    assert!(
        said.contains("[init] config-migrate profile=work"),
        "{said}"
    );

    // Migrated already: nothing to do at the next boot.
    let child = boot(&sb, &cli, &[]);
    let mut client = connect_supervisor(&sb.runtime());
    wait_state(&mut client, "gateway-default", StateName::Up);
    let said = stop(child);
    assert!(!said.contains("config-migrate"), "{said}");
}

#[test]
fn skipping_or_failing_migrations_leave_the_files_as_they_were() {
    let sb = Sandbox::new();
    let home = sb.home();
    volume(&home, 33);
    let before = files(&home);

    // HERMES_SKIP_CONFIG_MIGRATION: said, nothing touched, the gateways run.
    let cli = fake_agent(sb.path(), 35, false);
    let child = boot(&sb, &cli, &[("HERMES_SKIP_CONFIG_MIGRATION", "true")]);
    let mut client = connect_supervisor(&sb.runtime());
    wait_state(&mut client, "gateway-default", StateName::Up);
    stop(child);
    let boot_log = fs::read_to_string(home.join("logs/container-boot.log")).unwrap();
    assert!(
        boot_log.contains("from=33 to=35 result=skipped reason=HERMES_SKIP_CONFIG_MIGRATION"),
        "{boot_log}"
    );
    // The settings the migration touches; a gateway that fails records it in its
    // `gateway_state.json`, as every failed start does.
    let unchanged = |after: &BTreeMap<PathBuf, Vec<u8>>| {
        before
            .iter()
            .filter(|(path, _)| !path.ends_with("gateway_state.json"))
            .all(|(path, bytes)| after.get(path) == Some(bytes))
    };
    assert!(unchanged(&files(&home)));

    // A migration that breaks the file and fails: restored, and the gateway parked with why.
    let cli = fake_agent(sb.path(), 35, true);
    let child = boot(&sb, &cli, &[]);
    let mut client = connect_supervisor(&sb.runtime());
    wait_state(&mut client, "gateway-default", StateName::Failed);
    let said = stop(child);
    assert!(unchanged(&files(&home)), "the originals are restored");
    assert!(
        said.contains("result=failed") && said.contains("migration exploded"),
        "{said}"
    );
    let log = fs::read_to_string(home.join("logs/gateways/default/current")).unwrap();
    assert!(
        log.contains("could not migrate") && log.contains("migration exploded"),
        "{log}"
    );
}

#[test]
fn a_multiplexing_volume_starts_one_gateway_and_refuses_a_second_owner() {
    let sb = Sandbox::new();
    let home = sb.home();
    volume(&home, 35);
    let third = home.join("profiles/third");
    fs::create_dir_all(&third).unwrap();
    fs::write(third.join("SOUL.md"), "soul").unwrap();
    fs::write(
        third.join("gateway_state.json"),
        r#"{"desired_state":"running"}"#,
    )
    .unwrap();
    let cli = fake_agent(sb.path(), 35, false);

    let child = boot(&sb, &cli, &[("GATEWAY_MULTIPLEX_PROFILES", "1")]);
    let mut client = connect_supervisor(&sb.runtime());
    wait_state(&mut client, "gateway-default", StateName::Up);
    for named in ["gateway-work", "gateway-third"] {
        assert_eq!(
            state(&mut client, named).map(|s| s.0),
            Some(StateName::Down),
            "{named}"
        );
    }
    // An operator's start of a named one (as `hermes -p work gateway start` does) is refused by
    // the gateway itself: no second owner of the profile's platforms.
    client.start("gateway-work").unwrap();
    let reason = wait_state(&mut client, "gateway-work", StateName::Failed);
    assert!(reason.contains("78"), "{reason}");
    let log = fs::read_to_string(home.join("logs/gateways/work/current")).unwrap();
    assert!(
        log.contains("profile `work` is served by the default profile's gateway"),
        "{log}"
    );
    let said = stop(child);
    assert!(
        said.contains("multiplexing is on (from environment)"),
        "{said}"
    );
    let boot_log = fs::read_to_string(home.join("logs/container-boot.log")).unwrap();
    assert!(
        boot_log.contains("profile=work prior_state=running action=registered"),
        "{boot_log}"
    );
    // The recorded intent is kept for when multiplexing is switched off.
    let work_state = fs::read_to_string(home.join("profiles/work/gateway_state.json")).unwrap();
    assert!(work_state.contains("running"), "{work_state}");
}
