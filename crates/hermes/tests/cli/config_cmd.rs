//! `config.yaml` writes keep every byte they do not change (`memory setup`), and `hermes
//! config` (path, env-path, get, set, unset, edit) as the original's users use it.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use crate::util::{TestContext, render};

/// Comments, quoting, a flow and a block list, odd indentation, CRLF line endings.
const HAND_WRITTEN: &str = "# my settings\r\n_config_version: 33\r\nmodel:\r\n   default: 'gpt-4o'   # pinned\r\n   provider: \"openrouter\"\r\ntoolsets: [web, terminal]\r\nallow:\r\n-   a\r\n-   'b'\r\nmemory:\r\n   provider: ''  # built-in for now\r\n\r\n# end\r\n";

fn tinymem(t: &TestContext) {
    let plugin = t.root().join("plugins/tinymem");
    fs::create_dir_all(&plugin).unwrap();
    fs::write(plugin.join("plugin.yaml"), "name: tinymem\nkind: memory\n").unwrap();
}

#[test]
fn memory_setup_changes_only_memory_provider() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let path = t.root().join("config.yaml");
    fs::write(&path, HAND_WRITTEN).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    tinymem(&t);
    let out = t.run(&["memory", "setup", "tinymem", "--non-interactive"]);
    assert!(out.status.success(), "{}", render(&out));
    let after = fs::read(&path).unwrap();
    assert_eq!(
        String::from_utf8(after).unwrap(),
        HAND_WRITTEN.replace("provider: ''  #", "provider: 'tinymem'  #")
    );
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn set_get_unset_change_only_their_key_with_the_originals_value_parsing() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let path = t.root().join("config.yaml");
    fs::write(&path, HAND_WRITTEN).unwrap();
    let out = t.ok(&["config", "set", "model.default", "x/y"]);
    assert_eq!(
        out,
        format!("✓ Set model.default = x/y in {}\n", path.display())
    );
    let out = t.ok(&["config", "set", "agent.max_turns", "64"]);
    assert_eq!(
        out,
        format!("✓ Set agent.max_turns = 64 in {}\n", path.display())
    );
    t.ok(&["config", "set", "memory.provider", "off"]);
    t.ok(&["config", "set", "display.bell_on_complete", "yes"]);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        HAND_WRITTEN
            .replace("default: 'gpt-4o'", "default: 'x/y'")
            .replace("provider: ''  #", "provider: 'off'  #")
            .replace(
                "built-in for now\r\n",
                "built-in for now\r\nagent:\r\n   max_turns: 64\r\ndisplay:\r\n   bell_on_complete: true\r\n"
            )
    );
    assert_eq!(t.ok(&["config", "get", "agent.max_turns"]), "64\n");
    assert_eq!(t.ok(&["config", "get", "model.default"]), "x/y\n");
    assert_eq!(
        t.ok(&["config", "get", "display.bell_on_complete"]),
        "true\n"
    );
    assert_eq!(t.ok(&["config", "get", "allow"]), "- a\n- b\n");
    let out = t.ok(&["config", "unset", "agent.max_turns"]);
    assert_eq!(
        out,
        format!("✓ Unset agent.max_turns from {}\n", path.display())
    );
    let text = fs::read_to_string(&path).unwrap();
    assert!(!text.contains("agent:"), "{text:?}");
    // Unset again: not set, exit 1 with a hint; a key inside a list is refused.
    let out = t.run(&["config", "unset", "agent.max_turns"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(render(&out).contains("hint:"), "{}", render(&out));
    let out = t.run(&["config", "set", "allow.0", "z"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    // Secrets by name go to .env.
    t.ok(&["config", "set", "OPENROUTER_API_KEY", "sk-or-123"]);
    let env = fs::read_to_string(t.root().join(".env")).unwrap();
    assert!(env.contains("OPENROUTER_API_KEY=sk-or-123"), "{env}");
    assert_eq!(
        t.ok(&["config", "get", "OPENROUTER_API_KEY"]),
        "sk-or-123\n"
    );
}

#[test]
fn paths_and_writes_follow_the_profile_flag() {
    let t = TestContext::new();
    t.ok(&["profile", "create", "work"]);
    let work = t.root().join("profiles/work");
    assert_eq!(
        t.ok(&["-p", "work", "config", "path"]),
        format!("{}\n", work.join("config.yaml").display())
    );
    assert_eq!(
        t.ok(&["config", "env-path", "-p", "work"]),
        format!("{}\n", work.join(".env").display())
    );
    let root_before = fs::read(t.root().join("config.yaml")).unwrap();
    t.ok(&["-p", "work", "config", "set", "model.default", "w"]);
    assert_eq!(
        t.ok(&["-p", "work", "config", "get", "model.default"]),
        "w\n"
    );
    assert_eq!(fs::read(t.root().join("config.yaml")).unwrap(), root_before);
    let out = t.run(&["-p", "nosuch", "config", "path"]);
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
}

/// `hermes config` and `hermes memory setup` run as root (a root `docker exec`) leave
/// `config.yaml` and `.env` the service user's: the writers keep the owner themselves, so no
/// command can forget to.
#[test]
fn as_root_the_file_keeps_its_owner() {
    use std::os::unix::fs::{MetadataExt, chown};
    if hermes_test_support::skip_unless_root("not root: a file cannot be given away") {
        return;
    }
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let path = t.root().join("config.yaml");
    let env = t.root().join(".env");
    for file in [&path, &env] {
        chown(file, Some(12345), Some(12345)).unwrap();
    }
    t.ok(&["config", "set", "model.default", "m"]);
    t.ok(&["config", "unset", "model.default"]);
    t.ok(&["config", "set", "OPENROUTER_API_KEY", "sk-or-1"]);
    t.ok(&["config", "set", "terminal.backend", "docker"]);
    t.ok(&["config", "unset", "OPENROUTER_API_KEY"]);
    let plugin = t.root().join("plugins/tinymem");
    fs::create_dir_all(&plugin).unwrap();
    fs::write(
        plugin.join("plugin.yaml"),
        "name: tinymem\nkind: memory\nsettings:\n  - {key: token, env_var: TINYMEM_TOKEN}\n",
    )
    .unwrap();
    let out = t.run(&[
        "memory",
        "setup",
        "tinymem",
        "--set",
        "token=t-1",
        "--non-interactive",
    ]);
    assert!(out.status.success(), "{}", render(&out));
    assert!(
        fs::read_to_string(&env)
            .unwrap()
            .contains("TINYMEM_TOKEN=t-1\n")
    );
    for file in [&path, &env] {
        let meta = fs::metadata(file).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid()),
            (12345, 12345),
            "{}",
            file.display()
        );
    }
}

/// The original's own example: a whole section replaced by a value, in place.
/// A fresh install's own `config.yaml` (its empty sections seeded as `gateway: {}` and
/// `services: {}`) takes the settings operators set first, by `config set` as by the
/// dashboard's form (the same editor).
#[test]
fn a_fresh_config_takes_settings_in_its_empty_sections() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let path = t.root().join("config.yaml");
    let seeded = fs::read_to_string(&path).unwrap();
    assert!(seeded.contains("\ngateway: {}\n"), "{seeded}");
    t.ok(&["config", "set", "gateway.drain_timeout", "5"]);
    t.ok(&["config", "set", "gateway.memory_max", "1GiB"]);
    assert_eq!(t.ok(&["config", "get", "gateway.drain_timeout"]), "5\n");
    let text = fs::read_to_string(&path).unwrap();
    assert!(
        text.contains("\ngateway:\n  drain_timeout: 5\n  memory_max: \"1GiB\"\n"),
        "{text}"
    );
    assert_eq!(
        text.replace(
            "gateway:\n  drain_timeout: 5\n  memory_max: \"1GiB\"\n",
            "gateway: {}\n"
        ),
        seeded,
        "nothing else changed"
    );
}

#[test]
fn a_section_set_to_a_value_is_replaced_in_place() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let path = t.root().join("config.yaml");
    fs::write(&path, HAND_WRITTEN).unwrap();
    t.ok(&["config", "set", "model", "anthropic/claude-sonnet-4"]);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        HAND_WRITTEN.replace(
            "model:\r\n   default: 'gpt-4o'   # pinned\r\n   provider: \"openrouter\"\r\n",
            "model: anthropic/claude-sonnet-4\r\n"
        )
    );
    assert_eq!(
        t.ok(&["config", "get", "model"]),
        "anthropic/claude-sonnet-4\n"
    );
}

/// And back: a key below a value (`model: <name>`, the original's string form) makes it a
/// section in the value's place, its comment kept; the rest of the file byte for byte.
#[test]
fn a_value_set_below_becomes_a_section_in_place() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let path = t.root().join("config.yaml");
    let string_form = HAND_WRITTEN.replace(
        "model:\r\n   default: 'gpt-4o'   # pinned\r\n   provider: \"openrouter\"\r\n",
        "model: gpt-4o   # pinned\r\n",
    );
    fs::write(&path, &string_form).unwrap();
    t.ok(&["config", "set", "model.default", "x/y"]);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        string_form.replace(
            "model: gpt-4o   # pinned\r\n",
            "model:   # pinned\r\n   default: x/y\r\n"
        )
    );
    assert_eq!(t.ok(&["config", "get", "model.default"]), "x/y\n");
}

/// An `EDITOR` that runs `script` on the file (`$1`).
fn editor(t: &TestContext, script: &str) -> String {
    let path = t.dir.path().join("editor.sh");
    fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

#[test]
fn edit_saves_a_valid_edit_and_keeps_the_file_on_a_broken_one() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let path = t.root().join("config.yaml");
    fs::write(&path, HAND_WRITTEN).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    let good = editor(&t, "sed -i 's/gpt-4o/gpt-5/' \"$1\"");
    let out = t
        .cmd(&["config", "edit"])
        .env("EDITOR", &good)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", render(&out));
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        HAND_WRITTEN.replace("gpt-4o", "gpt-5")
    );
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let before = fs::read(&path).unwrap();
    let broken = editor(&t, "printf 'model: [unclosed\\n' > \"$1\"");
    let out = t
        .cmd(&["config", "edit"])
        .env("VISUAL", &broken)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let text = render(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("does not parse") && text.contains("hint:"),
        "{text}"
    );
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(
        fs::read_to_string(t.root().join("config.yaml.rejected")).unwrap(),
        "model: [unclosed\n"
    );
    // No copy is left behind.
    let strays: Vec<_> = fs::read_dir(t.root())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".config.yaml.edit")
        })
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
}

/// A stand-in for hermes-agent's CLI that prints the arguments it got.
fn fake_agent(t: &TestContext) -> std::path::PathBuf {
    let venv = t.dir.path().join("agent");
    let cli = venv.join("bin/hermes");
    fs::create_dir_all(cli.parent().unwrap()).unwrap();
    fs::create_dir_all(venv.join("lib/python3.11/site-packages/hermes_agent-9.9.9.dist-info"))
        .unwrap();
    fs::write(&cli, "#!/bin/sh\necho \"agent: $*\"\n").unwrap();
    fs::set_permissions(&cli, fs::Permissions::from_mode(0o755)).unwrap();
    cli
}

#[test]
fn show_check_migrate_and_defaults_are_the_agents() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let agent = fake_agent(&t);
    let run = |args: &[&str]| {
        let out = t
            .cmd(args)
            .env("HERMES_AGENT_CLI", &agent)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {}", render(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(run(&["config"]), "agent: config\n");
    assert_eq!(run(&["config", "show"]), "agent: config show\n");
    assert_eq!(run(&["config", "check"]), "agent: config check\n");
    assert_eq!(run(&["config", "migrate"]), "agent: config migrate\n");
    // A key the file does not set, or a section: the agent knows the defaults.
    assert_eq!(
        run(&["config", "get", "agent.max_turns"]),
        "agent: config get agent.max_turns\n"
    );
    assert_eq!(
        run(&["config", "get", "model"]),
        "agent: config get model\n"
    );
    // A value the file sets is ours.
    t.ok(&["config", "set", "model.default", "m"]);
    assert_eq!(run(&["config", "get", "model.default"]), "m\n");
    // Without the agent: one line, exit 127.
    let out = t.run(&["config", "show"]);
    assert_eq!(out.status.code(), Some(127), "{}", render(&out));
}

#[test]
fn get_expands_variables_and_terminal_keys_are_mirrored_in_env() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(t.root().join(".env"), "# keys\nXKEY=from-env-file\n").unwrap();
    t.ok(&["config", "set", "model.api_key", "${XKEY}"]);
    assert_eq!(t.ok(&["config", "get", "model.api_key"]), "from-env-file\n");
    assert!(
        fs::read_to_string(t.root().join("config.yaml"))
            .unwrap()
            .contains("${XKEY}"),
        "the reference is stored, never the secret"
    );
    t.ok(&["config", "set", "terminal.backend", "docker"]);
    let env = fs::read_to_string(t.root().join(".env")).unwrap();
    assert_eq!(env, "# keys\nXKEY=from-env-file\nTERMINAL_ENV=docker\n");
    t.ok(&["config", "unset", "terminal.backend"]);
    let env = fs::read_to_string(t.root().join(".env")).unwrap();
    assert_eq!(env, "# keys\nXKEY=from-env-file\n");
    let out = t.ok(&["config", "set", "model.api_base", "http://h/v1"]);
    assert!(
        out.starts_with("  (note: 'api_base' is an alias — saved as model.base_url)\n✓ Set model.base_url = http://h/v1 in "),
        "{out}"
    );
    assert_eq!(t.ok(&["config", "get", "model.base_url"]), "http://h/v1\n");
}

/// `path`, `get` and `set` print what the original's `hermes config` prints on the same home,
/// and what either writes the other reads back.
#[test]
fn path_get_and_set_match_the_original() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    fs::write(t.root().join(".env"), "XKEY=from-env-file\n").unwrap();
    let config = t.root().join("config.yaml");
    let original = |args: &[&str]| {
        let out = std::process::Command::new(&agent.hermes)
            .arg("config")
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", t.home())
            .env("HERMES_HOME", t.root())
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", render(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let ours = |args: &[&str]| {
        let mut full = vec!["config"];
        full.extend_from_slice(args);
        t.ok(&full)
    };
    // The same `set` on the same file prints the same line (each run on the same text).
    for args in [
        &["set", "model.default", "x/y"][..],
        &["set", "agent.max_turns", "64"],
        &["set", "display.bell_on_complete", "on"],
        &["set", "model.api_key", "${XKEY}"],
        &["set", "model.api_base", "http://h/v1"],
        &["set", "compression.threshold", "0.6"],
    ] {
        let before = fs::read(&config).unwrap();
        let theirs = original(args);
        let theirs_text = fs::read(&config).unwrap();
        fs::write(&config, &before).unwrap();
        assert_eq!(ours(args), theirs, "{args:?}");
        // What each wrote means the same: our `get` of the original's file equals ours.
        let key = if args[1] == "model.api_base" {
            "model.base_url"
        } else {
            args[1]
        };
        let mine = ours(&["get", key]);
        let ours_text = fs::read(&config).unwrap();
        fs::write(&config, &theirs_text).unwrap();
        assert_eq!(ours(&["get", key]), mine, "{args:?}");
        fs::write(&config, &ours_text).unwrap();
    }
    for args in [
        &["path"][..],
        &["env-path"],
        &["get", "model.default"],
        &["get", "agent.max_turns"],
        &["get", "display.bell_on_complete"],
        &["get", "model.api_key"],
        &["get", "compression.threshold"],
    ] {
        assert_eq!(ours(args), original(args), "{args:?}");
    }
    // The original's own example: a section replaced by a value.
    let before = fs::read(&config).unwrap();
    let set_model = ["set", "model", "anthropic/claude-sonnet-4"];
    let theirs = original(&set_model);
    assert_eq!(ours(&["get", "model"]), "anthropic/claude-sonnet-4\n");
    fs::write(&config, &before).unwrap();
    assert_eq!(ours(&set_model), theirs);
    assert_eq!(ours(&["get", "model"]), original(&["get", "model"]));
    // What the original's `set` wrote reads back the same through ours.
    original(&["set", "agent.max_turns", "32"]);
    assert_eq!(ours(&["get", "agent.max_turns"]), "32\n");
}

/// `hermes config edit` on a terminal (`script` gives it one): `answer` is typed at the
/// prompt (then the input ends); the editor writes a broken file first, a valid one after.
fn edit_on_a_terminal(t: &TestContext, answer: &str) -> Option<std::process::Output> {
    let script = ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file());
    let Some(script) = script else {
        hermes_test_support::skip("no `script` to give `hermes config edit` a terminal");
        return None;
    };
    let state = t.dir.path().join("edited-once");
    let editor = editor(
        t,
        &format!(
            "if [ -e '{0}' ]; then printf 'model:\\n  default: fixed\\n' > \"$1\"; \
             else printf 'model: [x\\n' > \"$1\"; touch '{0}'; fi",
            state.display()
        ),
    );
    let hermes = t.cmd(&[]);
    let mut cmd = std::process::Command::new(script);
    cmd.env_clear();
    for (key, value) in hermes.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let mut child = cmd
        .env("EDITOR", editor)
        .args(["-qec"])
        .arg(format!(
            "'{}' config edit",
            hermes.get_program().to_string_lossy()
        ))
        .arg("/dev/null")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answer.as_bytes())
        .unwrap();
    Some(child.wait_with_output().unwrap())
}

#[test]
fn on_a_terminal_a_broken_edit_is_offered_again() {
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let path = t.root().join("config.yaml");
    let Some(out) = edit_on_a_terminal(&t, "\n") else {
        return;
    };
    let text = render(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("your edit is not valid YAML (line 2"),
        "{text}"
    );
    assert!(text.contains("Edit again? [Y/n]"), "{text}");
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "model:\n  default: fixed\n"
    );

    // Input that ends at the prompt is a no: the file stays, the edit is kept, exit 1.
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let before = fs::read(t.root().join("config.yaml")).unwrap();
    let Some(out) = edit_on_a_terminal(&t, "") else {
        return;
    };
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert_eq!(fs::read(t.root().join("config.yaml")).unwrap(), before);
    assert!(t.root().join("config.yaml.rejected").is_file());
}

/// A value our `config set` writes into `.env` reads back unchanged through the original's own
/// loader (`hermes_cli.env_loader.load_hermes_dotenv`: python-dotenv, which expands `${...}` in
/// any value, quoted or not) and through ours.
#[test]
fn env_values_we_write_read_back_unchanged_in_the_original() {
    let Some(agent) = hermes_test_support::original_agent() else {
        return;
    };
    let t = TestContext::new();
    t.ok(&["profile", "list"]);
    let values = [
        "pa ss${HOME}word",
        "${OPENROUTER_API_KEY}",
        "${X:-fallback}",
        "$HOME and $$ and $",
        "$${HOME}",
        "${:-$}",
        "it's \"quoted\" 'twice'",
        "hash # not a comment",
        "#leading",
        "back\\slash \\n \\t \\",
        "two  spaces inside",
        "sk-plain-0123",
    ];
    let original_reads = || {
        let script = "import json, os\n\
                      from hermes_cli.env_loader import load_hermes_dotenv\n\
                      load_hermes_dotenv(hermes_home=os.environ['HERMES_HOME'])\n\
                      print(json.dumps(os.environ.get('OPENAI_API_KEY')))";
        let out = std::process::Command::new(&agent.python)
            .args(["-c", script])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", t.home())
            .env("HERMES_HOME", t.root())
            .env("OPENROUTER_API_KEY", "sk-or-from-the-environment")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", render(&out));
        serde_json::from_slice::<Option<String>>(&out.stdout).unwrap()
    };
    for value in values {
        t.ok(&["config", "set", "OPENAI_API_KEY", value]);
        let env = fs::read_to_string(t.root().join(".env")).unwrap();
        assert_eq!(
            original_reads().as_deref(),
            Some(value),
            "the original's loader on {env:?}"
        );
        let ours = hermes_home::dotenv::DotEnv::load(&t.root().join(".env")).unwrap();
        assert_eq!(ours.get("OPENAI_API_KEY"), Some(value), "ours on {env:?}");
    }
}

/// A volume of the original whose `config set API_SERVER_KEY` wrote the key at the top level
/// of `config.yaml`: our first command seeds no key that would shadow it, and `config get|set`
/// of the gateway's variables read and write where the gateway reads them, masked.
#[test]
fn the_api_server_key_is_read_and_written_where_the_gateway_reads_it() {
    let t = TestContext::new();
    let root = t.root();
    fs::create_dir_all(&root).unwrap();
    let key = "operator-key-0123456789abcdef";
    fs::write(root.join("config.yaml"), format!("API_SERVER_KEY: {key}\n")).unwrap();
    let out = t.ok(&["config", "get", "API_SERVER_KEY"]);
    assert_eq!(out, "oper...cdef   (from the top level of `config.yaml`)\n");
    let env = fs::read_to_string(root.join(".env")).unwrap();
    assert!(
        !env.lines().any(|l| l.starts_with("API_SERVER_KEY=")),
        "the seeded `.env` shadows nothing: {env}"
    );
    // `set` keeps it where it is in force.
    let new_key = "rotated-key-0123456789abcdef";
    let out = t.ok(&["config", "set", "API_SERVER_KEY", new_key]);
    assert!(
        out.contains("rota...cdef") && !out.contains(new_key),
        "{out}"
    );
    assert!(
        fs::read_to_string(root.join("config.yaml"))
            .unwrap()
            .contains(new_key)
    );
    // A port set in `.env` is read from there, and a port written when none is set goes there.
    // Set nowhere, it is the default the gateway takes, said as such.
    assert_eq!(
        t.ok(&["config", "get", "API_SERVER_PORT"]),
        "8642   (from the default)\n"
    );
    t.ok(&["config", "set", "API_SERVER_PORT", "9001"]);
    assert!(
        fs::read_to_string(root.join(".env"))
            .unwrap()
            .contains("API_SERVER_PORT=9001")
    );
    assert_eq!(
        t.ok(&["config", "get", "api_server_port"]),
        "9001   (from `.env`)\n"
    );
    // `.env` over the top level: a key written there wins, and `get` says so.
    fs::write(
        root.join(".env"),
        "API_SERVER_KEY=generated-0123456789abcdef\n",
    )
    .unwrap();
    assert_eq!(
        t.ok(&["config", "get", "API_SERVER_KEY"]),
        "gene...cdef   (from `.env`)\n"
    );
}
