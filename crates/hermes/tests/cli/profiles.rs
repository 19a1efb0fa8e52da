//! Profile lifecycle and profile-name rules, driven through the real binary.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::util::TestContext;

#[test]
fn first_use_seeds_the_home_once_and_never_touches_existing_files() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let root = t.root();
    for dir in ["logs", "sessions", "memories", "skills", "profiles"] {
        assert!(root.join(dir).is_dir(), "{dir} missing");
    }
    let env_mode = fs::metadata(root.join(".env"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(env_mode, 0o600);
    assert!(
        fs::read_to_string(root.join(".env"))
            .unwrap()
            .starts_with("# Per-profile secrets")
    );
    fs::write(root.join("SOUL.md"), "custom soul").unwrap();
    fs::write(root.join("config.yaml"), "custom: 1\n").unwrap();
    t.ok(&["profile", "list"]);
    assert_eq!(
        fs::read_to_string(root.join("SOUL.md")).unwrap(),
        "custom soul"
    );
    assert_eq!(
        fs::read_to_string(root.join("config.yaml")).unwrap(),
        "custom: 1\n"
    );
}

#[test]
fn create_list_show_use_delete() {
    let t = TestContext::new();
    let out = t.ok(&["profile", "create", "work", "--description", "Work bot"]);
    assert!(out.contains("Created profile `work`"), "{out}");
    let alias = t.home().join(".local/bin/work");
    let script = fs::read_to_string(&alias).unwrap();
    assert!(
        script.starts_with("#!/bin/sh\nexec ") && script.ends_with(" -p work \"$@\"\n"),
        "{script}"
    );

    let listed: serde_json::Value =
        serde_json::from_str(&t.ok(&["profile", "list", "--json"])).unwrap();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "work"]);
    assert_eq!(listed[1]["description"], "Work bot");

    let shown: serde_json::Value =
        serde_json::from_str(&t.ok(&["profile", "show", "work", "--json"])).unwrap();
    assert_eq!(shown["active"], false);

    t.ok(&["profile", "use", "work"]);
    assert_eq!(
        fs::read_to_string(t.root().join("active_profile")).unwrap(),
        "work\n"
    );
    assert!(t.ok(&["dump"]).contains("profile:          work\n"));
    assert!(
        t.ok(&["-p", "default", "dump"])
            .contains("profile:          default\n")
    );

    let out = t.ok(&["profile", "delete", "work", "--yes"]);
    assert!(out.contains("profiles/.trash/work-"), "{out}");
    assert!(out.contains("The active profile is now `default`"), "{out}");
    assert!(!alias.exists(), "alias removed with the profile");
    assert!(!t.root().join("active_profile").exists());
    let trash: Vec<_> = fs::read_dir(t.root().join("profiles/.trash"))
        .unwrap()
        .collect();
    assert_eq!(trash.len(), 1, "the deleted profile is recoverable");
}

#[test]
fn clone_copies_config_env_soul_skills_and_memories() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let root = t.root();
    fs::write(root.join("config.yaml"), "model:\n  default: m1\n").unwrap();
    fs::write(root.join(".env"), "OPENAI_API_KEY=sk-x\n").unwrap();
    fs::write(root.join("SOUL.md"), "soul").unwrap();
    fs::write(root.join("skills/a.md"), "skill").unwrap();
    fs::write(root.join("memories/MEMORY.md"), "memory").unwrap();
    t.ok(&[
        "profile",
        "create",
        "copy",
        "--clone-from",
        "default",
        "--no-alias",
    ]);
    let dir = root.join("profiles/copy");
    assert_eq!(
        fs::read_to_string(dir.join("config.yaml")).unwrap(),
        "model:\n  default: m1\n"
    );
    // The source's secrets, and a client key of the clone's own.
    let env = fs::read_to_string(dir.join(".env")).unwrap();
    assert!(env.starts_with("OPENAI_API_KEY=sk-x\n"), "{env}");
    assert_eq!(key_in(&dir).map(|k| k.len()), Some(64), "{env}");
    assert_eq!(
        fs::metadata(dir.join(".env")).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(fs::read_to_string(dir.join("SOUL.md")).unwrap(), "soul");
    assert_eq!(
        fs::read_to_string(dir.join("skills/a.md")).unwrap(),
        "skill"
    );
    assert_eq!(
        fs::read_to_string(dir.join("memories/MEMORY.md")).unwrap(),
        "memory"
    );
    assert!(!t.home().join(".local/bin/copy").exists(), "--no-alias");
}

#[test]
fn alias_is_not_written_over_an_existing_command() {
    let t = TestContext::new();
    let bin = t.dir.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    fs::write(bin.join("work"), "#!/bin/sh\necho theirs\n").unwrap();
    fs::set_permissions(bin.join("work"), fs::Permissions::from_mode(0o755)).unwrap();
    let out = t
        .cmd(&["profile", "create", "work"])
        .env("PATH", &bin)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.contains("No alias written"), "{stdout}");
    assert_eq!(
        fs::read_to_string(bin.join("work")).unwrap(),
        "#!/bin/sh\necho theirs\n"
    );
    assert!(!t.home().join(".local/bin/work").exists());
}

#[test]
fn bad_names_are_refused_with_the_rule() {
    let t = TestContext::new();
    insta::assert_snapshot!(
        "invalid_name",
        t.snapshot(&t.run(&["profile", "create", "Work"]))
    );
    insta::assert_snapshot!(
        "reserved_name",
        t.snapshot(&t.run(&["profile", "create", "root"]))
    );
    let long = "a".repeat(65);
    let out = t.run(&["profile", "create", &long]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("longer than 64"));
    for bad in ["../evil", "-x", "a b", ""] {
        let out = t.run(&["profile", "create", "--", bad]);
        assert_eq!(out.status.code(), Some(1), "{bad:?}");
    }
    let created = fs::read_dir(t.root().join("profiles"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(created, 0, "nothing created for bad names");
}

#[test]
fn missing_profile_is_an_error_and_is_not_created() {
    let t = TestContext::new();
    insta::assert_snapshot!(
        "missing_profile",
        t.snapshot(&t.run(&["-p", "ghost", "dump"]))
    );
    assert!(!t.root().join("profiles/ghost").exists());
}

#[test]
fn default_profile_cannot_be_deleted_and_delete_needs_confirmation() {
    let t = TestContext::new();
    insta::assert_snapshot!(
        "delete_default",
        t.snapshot(&t.run(&["profile", "delete", "default", "--yes"]))
    );
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let out = t.run(&["profile", "delete", "work"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    assert!(
        t.root().join("profiles/work/SOUL.md").is_file(),
        "nothing deleted without confirmation"
    );
    t.ok(&["profile", "delete", "work", "--yes", "--purge"]);
    assert!(!t.root().join("profiles/work").exists());
    assert!(
        !t.root().join("profiles/.trash").exists(),
        "purge skips the trash"
    );
}

/// A supervisor that runs but does not answer (it accepts the connection and closes it) may
/// still run the profile's gateway, writing into the profile: the delete is refused — one
/// line saying so, one hint, exit 1 — and nothing is moved. The dashboard refuses the same
/// case with 503 (one rule, `hermes_services::profile`).
#[test]
fn delete_is_refused_while_a_running_supervisor_does_not_answer() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let run = t.dir.path().join("run");
    fs::create_dir(&run).unwrap();
    fs::set_permissions(&run, fs::Permissions::from_mode(0o700)).unwrap();
    let listener = std::os::unix::net::UnixListener::bind(run.join("supervisor.sock")).unwrap();
    // Reads the request, then closes without an answer (reading it first makes the close an
    // end of file for the client, never a reset).
    let mute = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut request = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(&stream), &mut request).unwrap();
    });
    let out = t
        .cmd(&["profile", "delete", "work", "--yes"])
        .env("HERMES_RUNTIME_DIR", &run)
        .output()
        .unwrap();
    mute.join().unwrap();
    assert!(
        t.root().join("profiles/work/SOUL.md").is_file(),
        "nothing deleted while the gateway may run"
    );
    insta::assert_snapshot!("delete_supervisor_unanswered", t.snapshot(&out));
}

#[test]
fn usage_errors_exit_2() {
    let t = TestContext::new();
    assert_eq!(t.run(&["--no-such-flag"]).status.code(), Some(2));
    assert_eq!(t.run(&["profile", "create"]).status.code(), Some(2));
    assert_eq!(t.run(&["--help"]).status.code(), Some(0));
}

/// A `gateway_state.json` that is not UTF-8 is damaged, not a record whose bytes can be
/// replaced: it shows as `unknown`, like one that is not JSON.
#[test]
fn gateway_state_that_is_not_utf8_lists_as_unknown() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let state = t.root().join("profiles/work/gateway_state.json");
    fs::write(
        &state,
        b"{\"gateway_state\": \"running\", \"argv\": [\"\xff\"]}",
    )
    .unwrap();
    let listed: serde_json::Value =
        serde_json::from_str(&t.ok(&["profile", "list", "--json"])).unwrap();
    assert_eq!(listed[1]["gateway"], "unknown", "{listed}");
}

/// The `API_SERVER_KEY` a profile's `.env` sets.
fn key_in(dir: &std::path::Path) -> Option<String> {
    fs::read_to_string(dir.join(".env"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("API_SERVER_KEY="))
        .map(str::to_owned)
}

#[test]
fn every_new_or_cloned_profile_gets_a_key_of_its_own() {
    // The environment's key (a compose file's `environment:`) is the default profile's: the
    // root keeps using it, a named profile never does, and a clone does not share its source's.
    const ENV_KEY: &str = "key-from-the-environment-0123";
    let t = TestContext::new();
    let run = |args: &[&str]| {
        let out = t.cmd(args).env("API_SERVER_KEY", ENV_KEY).output().unwrap();
        assert!(out.status.success(), "{}", crate::util::render(&out));
    };
    run(&["profile", "create", "work", "--no-alias"]);
    let root = t.root();
    assert_eq!(
        key_in(&root),
        None,
        "the root profile uses the environment's key"
    );
    let work = key_in(&root.join("profiles/work")).expect("work has a key");
    assert_eq!(work.len(), 64, "{work}");
    assert_ne!(work, ENV_KEY);

    run(&[
        "profile",
        "create",
        "copy",
        "--clone-from",
        "work",
        "--no-alias",
    ]);
    let copy = key_in(&root.join("profiles/copy")).expect("the clone has a key");
    assert_eq!(copy.len(), 64, "{copy}");
    assert_ne!(copy, work, "a clone's key is its own");
    let env = fs::read_to_string(root.join("profiles/copy/.env")).unwrap();
    assert_eq!(env.matches("API_SERVER_KEY=").count(), 1, "{env}");
}
