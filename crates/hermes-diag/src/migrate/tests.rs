//! The report on hand-made volumes (the originals' own volumes: `crates/hermes/tests/cli/migrate.rs`).

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

fn volume() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(dir.path()).unwrap();
    fs::write(root.join("SOUL.md"), "soul\n").unwrap();
    (dir, root)
}

fn profile(root: &Path, name: &str) -> PathBuf {
    let dir = root.join("profiles").join(name);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("SOUL.md"), "soul\n").unwrap();
    dir
}

/// An agent installed with its API server's `aiohttp`, as the image installs it.
fn agent(schema: u64) -> Image {
    Image {
        agent_version: Some("0.19.0".into()),
        agent_installed: true,
        agent_schema: Some(schema),
        agent_packages: ["aiohttp".to_string()].into(),
        ..Image::default()
    }
}

fn run(root: &Path, image: &Image) -> MigrationReport {
    check(root, image, &|_| None).unwrap()
}

fn findings<'a>(report: &'a MigrationReport, profile: &str) -> &'a [Finding] {
    &report
        .profiles
        .iter()
        .find(|p| p.name == profile)
        .unwrap()
        .findings
}

fn attention<'a>(fs: &'a [Finding], area: &str) -> Vec<&'a Finding> {
    fs.iter()
        .filter(|f| f.area == area && f.status == Status::Attention)
        .collect()
}

/// Every file under `root` with its bytes, to prove the report changed nothing.
fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                out.push((path.clone(), fs::read(&path).unwrap()));
            } else {
                out.push((path.clone(), Vec::new()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_complete_profile_carries_over_and_names_no_secret() {
    let (_dir, root) = volume();
    fs::write(
        root.join("config.yaml"),
        "_config_version: 33\nmodel:\n  default: m\nmemory:\n  provider: honcho\n",
    )
    .unwrap();
    fs::write(
        root.join(".env"),
        "OPENROUTER_API_KEY=sk-or-very-secret-value\nEMPTY=\nTELEGRAM_BOT_TOKEN=123:tg-secret\n",
    )
    .unwrap();
    fs::write(
        root.join("auth.json"),
        json!({"version": 1, "providers": {"nous": {"access_token": "nous-secret"}},
               "credential_pool": {"openrouter": [{"access_token": "pool-secret"}]}})
        .to_string(),
    )
    .unwrap();
    let store = hermes_sessions::SessionStore::open(&root.join("state.db")).unwrap();
    store
        .append("s1", "default", &[json!({"role": "user", "content": "hi"})])
        .unwrap();
    drop(store);
    fs::create_dir_all(root.join("memories")).unwrap();
    fs::write(root.join("memories/MEMORY.md"), "m\n").unwrap();
    fs::write(root.join("memories/USER.md"), "u\n").unwrap();
    fs::create_dir_all(root.join("skills/cat/one")).unwrap();
    fs::write(root.join("skills/cat/one/SKILL.md"), "s\n").unwrap();
    fs::write(root.join("skills/cat/one/notes.txt"), "n\n").unwrap();
    fs::create_dir_all(root.join("cron")).unwrap();
    fs::write(
        root.join("cron/jobs.json"),
        json!({"jobs": [{"id": "a"}, {"id": "b"}]}).to_string(),
    )
    .unwrap();
    let mut image = agent(33);
    image.agent_packages.insert("python-telegram-bot".into());
    image.lazy_packages.insert("honcho-ai".into());
    image
        .memory_providers
        .insert("honcho".into(), vec!["honcho-ai".into()]);

    let before = snapshot(&root);
    let report = run(&root, &image);
    let names = |s: &[(PathBuf, Vec<u8>)]| s.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&snapshot(&root)),
        names(&before),
        "the report made or removed files"
    );
    assert_eq!(snapshot(&root), before, "the report wrote to the volume");
    assert!(!report.needs_attention(), "{}", render(&report));
    assert_eq!(report.verdict, Status::Ok);
    let p = &report.profiles[0];
    assert_eq!(p.name, "default");
    assert_eq!(p.config.schema, Some(33));
    assert_eq!(
        p.credentials.env_keys,
        ["OPENROUTER_API_KEY", "TELEGRAM_BOT_TOKEN"]
    );
    assert_eq!(p.credentials.auth_providers, ["nous"]);
    assert_eq!(p.credentials.credential_pools, ["openrouter"]);
    assert_eq!(
        (p.sessions.sessions, p.sessions.messages),
        (Some(1), Some(1))
    );
    assert_eq!(p.memories.count, 2);
    assert_eq!(p.skills.count, 1);
    assert_eq!(p.cron.jobs, 2);
    assert_eq!(p.platforms[0].name, "telegram");
    assert_eq!(p.platforms[0].installed_in.as_deref(), Some("agent"));
    assert_eq!(
        p.memory_provider.as_ref().unwrap().missing,
        Vec::<String>::new()
    );
    assert_eq!(report.agent_older_than_volume, Some(false));
    let text = render(&report);
    let document = serde_json::to_string(&report).unwrap();
    for secret in [
        "sk-or-very-secret-value",
        "tg-secret",
        "nous-secret",
        "pool-secret",
    ] {
        assert!(
            !text.contains(secret) && !document.contains(secret),
            "{secret} printed"
        );
    }
    assert!(text.contains("nothing is lost"), "{text}");
}

#[test]
fn a_volume_newer_than_the_agent_needs_attention() {
    let (_dir, root) = volume();
    fs::write(root.join("config.yaml"), "_config_version: 33\n").unwrap();
    let work = profile(&root, "work");
    fs::write(work.join("config.yaml"), "_config_version: 35\n").unwrap();
    let report = run(&root, &agent(33));
    assert_eq!(report.volume_schema, Some(35));
    assert_eq!(report.agent_older_than_volume, Some(true));
    assert_eq!(attention(&report.findings, "agent").len(), 1);
    assert!(report.needs_attention());
    // The same volume with an agent at 35, or with no agent, does not.
    assert!(!run(&root, &agent(35)).needs_attention());
    let none = run(&root, &Image::default());
    assert_eq!(none.agent_older_than_volume, None);
    assert!(!none.needs_attention(), "{}", render(&none));
}

#[test]
fn a_platform_without_its_package_and_two_profiles_on_one_port_need_attention() {
    let (_dir, root) = volume();
    let key = "k".repeat(32);
    fs::write(
        root.join(".env"),
        format!("API_SERVER_KEY={key}\nDISCORD_BOT_TOKEN=d\n"),
    )
    .unwrap();
    let work = profile(&root, "work");
    fs::write(work.join(".env"), format!("API_SERVER_KEY={key}\n")).unwrap();
    let other = profile(&root, "other");
    fs::write(
        other.join(".env"),
        format!("API_SERVER_KEY={key}\nAPI_SERVER_PORT=8650\n"),
    )
    .unwrap();

    let report = run(&root, &agent(33));
    let discord = attention(findings(&report, "default"), "platforms");
    assert_eq!(discord.len(), 1);
    assert!(discord[0].message.contains("discord-py"), "{discord:?}");
    let ports = attention(&report.findings, "ports");
    assert_eq!(ports.len(), 1, "{}", render(&report));
    assert!(ports[0].message.contains("default, work") && ports[0].message.contains("8642"));
    assert_eq!(
        report
            .profiles
            .iter()
            .find(|p| p.name == "other")
            .unwrap()
            .api_server
            .port,
        8650
    );

    // Multiplexed, the named profiles are served by the default gateway: no collision.
    fs::write(
        root.join("config.yaml"),
        "gateway:\n  multiplex_profiles: true\n",
    )
    .unwrap();
    let report = run(&root, &agent(33));
    assert_eq!(report.multiplex.on, Some(true));
    assert_eq!(report.multiplex.source, "config.yaml");
    assert!(attention(&report.findings, "ports").is_empty());
    // The environment's switch wins over the file, as in the original.
    let off = check(&root, &agent(33), &|k| {
        (k == "GATEWAY_MULTIPLEX_PROFILES").then(|| "0".to_string())
    })
    .unwrap();
    assert_eq!(
        (off.multiplex.on, off.multiplex.source),
        (Some(false), "environment")
    );
}

#[test]
fn a_malformed_config_and_an_unreadable_state_db_are_reported_not_crashed_on() {
    let (_dir, root) = volume();
    let bad_config = "model: [unclosed\n";
    fs::write(root.join("config.yaml"), bad_config).unwrap();
    fs::write(root.join("state.db"), "this is not a database, just text").unwrap();
    fs::create_dir_all(root.join("cron")).unwrap();
    fs::write(root.join("cron/jobs.json"), "{not json").unwrap();
    fs::write(root.join("auth.json"), "{broken").unwrap();
    let before = snapshot(&root);

    let report = run(&root, &agent(33));
    let f = findings(&report, "default");
    assert_eq!(attention(f, "config").len(), 1, "{f:#?}");
    assert!(
        report.profiles[0]
            .config
            .error
            .as_deref()
            .unwrap()
            .contains("config.yaml")
    );
    assert_eq!(attention(f, "sessions").len(), 1, "{f:#?}");
    assert_eq!(attention(f, "cron").len(), 1);
    assert_eq!(attention(f, "credentials").len(), 1);
    // Nothing was repaired, renamed or copied aside (no `auth.json.corrupt.*`).
    assert_eq!(snapshot(&root), before);
    assert_eq!(
        fs::read_to_string(root.join("config.yaml")).unwrap(),
        bad_config
    );
}

#[test]
fn symlinks_out_of_the_volume_are_named_and_not_followed() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(
        outside.path().join(".env"),
        "TELEGRAM_BOT_TOKEN=outside-secret\n",
    )
    .unwrap();
    fs::create_dir_all(outside.path().join("skills/x")).unwrap();
    fs::write(outside.path().join("skills/x/SKILL.md"), "s\n").unwrap();
    fs::write(outside.path().join("MEMORY.md"), "m\n").unwrap();
    let (_dir, root) = volume();
    symlink(outside.path().join(".env"), root.join(".env")).unwrap();
    symlink(outside.path().join("skills"), root.join("skills")).unwrap();
    fs::create_dir_all(root.join("memories")).unwrap();
    fs::write(root.join("memories/USER.md"), "u\n").unwrap();
    symlink(
        outside.path().join("MEMORY.md"),
        root.join("memories/MEMORY.md"),
    )
    .unwrap();
    // A whole profile that is a link out of the volume.
    fs::create_dir_all(root.join("profiles")).unwrap();
    fs::write(outside.path().join("SOUL.md"), "soul\n").unwrap();
    symlink(outside.path(), root.join("profiles/away")).unwrap();

    let report = run(&root, &agent(33));
    let p = &report.profiles[0];
    assert!(p.credentials.env_keys.is_empty(), "{:?}", p.credentials);
    assert!(p.platforms.is_empty());
    assert_eq!(p.skills.count, 0);
    assert_eq!(p.skills.links_out, [root.join("skills")]);
    assert_eq!(p.memories.count, 1);
    assert_eq!(p.memories.links_out, [root.join("memories/MEMORY.md")]);
    let f = findings(&report, "default");
    assert_eq!(attention(f, "credentials").len(), 1);
    assert_eq!(attention(f, "skills").len(), 1);
    assert_eq!(attention(f, "memories").len(), 1);
    let away = findings(&report, "away");
    assert_eq!(attention(away, "volume").len(), 1, "{away:#?}");
    assert!(
        !serde_json::to_string(&report)
            .unwrap()
            .contains("outside-secret")
    );
}

#[test]
fn cron_jobs_and_platforms_without_an_agent_need_attention() {
    let (_dir, root) = volume();
    fs::write(root.join(".env"), "SLACK_BOT_TOKEN=x\n").unwrap();
    fs::create_dir_all(root.join("cron")).unwrap();
    fs::write(
        root.join("cron/jobs.json"),
        json!([{"id": "a"}]).to_string(),
    )
    .unwrap();
    fs::write(root.join("config.yaml"), "memory:\n  provider: nobody\n").unwrap();
    let report = run(&root, &Image::default());
    let f = findings(&report, "default");
    assert_eq!(attention(f, "cron").len(), 1);
    assert_eq!(attention(f, "platforms").len(), 1);
    assert_eq!(attention(f, "plugins").len(), 1, "an unknown provider");
    assert_eq!(report.attention, 3);
}

/// A named profile's cron jobs run only while its own gateway runs: migrate check says so when
/// that gateway would not start with the container (no recorded `running`), and not when it
/// would, or when multiplexing has the default gateway run every profile's jobs.
#[test]
fn a_named_profiles_jobs_need_its_gateway_to_start() {
    let (_dir, root) = volume();
    let coder = profile(&root, "coder");
    fs::create_dir_all(coder.join("cron")).unwrap();
    fs::write(
        coder.join("cron/jobs.json"),
        json!([{"id": "a"}]).to_string(),
    )
    .unwrap();
    let cron = |report: &MigrationReport| attention(findings(report, "coder"), "cron").len();
    // No recorded state: registered, never started, its job never runs.
    let report = run(&root, &agent(33));
    let said = attention(findings(&report, "coder"), "cron");
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].message.contains("gateway-coder does not start"),
        "{:?}",
        said[0]
    );
    assert!(
        said[0]
            .action
            .as_deref()
            .is_some_and(|a| a.contains("hermes -p coder gateway start")),
        "{:?}",
        said[0]
    );
    // Stopped on purpose: the same.
    fs::write(
        coder.join("gateway_state.json"),
        r#"{"gateway_state": "stopped"}"#,
    )
    .unwrap();
    assert_eq!(cron(&run(&root, &agent(33))), 1);
    // Recorded running (or asked to restart): it starts, so do its jobs.
    fs::write(
        coder.join("gateway_state.json"),
        r#"{"gateway_state": "running"}"#,
    )
    .unwrap();
    assert_eq!(cron(&run(&root, &agent(33))), 0);
    fs::write(
        coder.join("gateway_state.json"),
        r#"{"gateway_state": "stopped", "restart_requested": true}"#,
    )
    .unwrap();
    assert_eq!(cron(&run(&root, &agent(33))), 0);
    // Multiplexed: the default profile's gateway runs them.
    fs::write(
        coder.join("gateway_state.json"),
        r#"{"gateway_state": "stopped"}"#,
    )
    .unwrap();
    fs::write(
        root.join("config.yaml"),
        "gateway:\n  multiplex_profiles: true\n",
    )
    .unwrap();
    assert_eq!(cron(&run(&root, &agent(33))), 0);
}

/// The API server's switch and key where the original reads them: the switch under `gateway.`
/// too, the key at the top level of `config.yaml` (its `config set` writes it there); a key
/// there and a different one in `.env` is named as shadowed, never shown.
#[test]
fn the_api_server_is_read_where_the_original_reads_it() {
    let (_dir, root) = volume();
    let key = "k".repeat(32);
    fs::write(
        root.join("config.yaml"),
        format!(
            "gateway:\n  platforms:\n    api_server:\n      enabled: true\n\
             platforms:\n  api_server:\n    extra:\n      key: {key}\n"
        ),
    )
    .unwrap();
    let report = run(&root, &agent(33));
    let default = report
        .profiles
        .iter()
        .find(|p| p.name == "default")
        .unwrap();
    assert!(default.api_server.enabled, "{}", render(&report));
    assert!(attention(findings(&report, "default"), "api_server").is_empty());

    fs::write(root.join("config.yaml"), format!("API_SERVER_KEY: {key}\n")).unwrap();

    fs::write(
        root.join(".env"),
        format!("API_SERVER_KEY={}\n", "j".repeat(32)),
    )
    .unwrap();
    let report = run(&root, &agent(33));
    let shadowed = attention(findings(&report, "default"), "api_server");
    assert_eq!(shadowed.len(), 1, "{}", render(&report));
    assert!(
        shadowed[0].message.contains("`.env` is in force")
            && shadowed[0]
                .message
                .contains("the top level of `config.yaml`")
            && !shadowed[0].message.contains(&key),
        "{shadowed:?}"
    );
}

#[test]
fn multiplexed_under_the_agent_top_level_api_keys_are_named_where_its_release_ignores_them() {
    let (_dir, root) = volume();
    let top_level =
        "gateway:\n  multiplex_profiles: true\nAPI_SERVER_KEY: default-key-0123456789abcdef\n";
    fs::write(root.join("config.yaml"), top_level).unwrap();
    let work = profile(&root, "work");
    fs::write(
        work.join("config.yaml"),
        "API_SERVER_KEY: work-key-0123456789abcdef\nAPI_SERVER_PORT: 8700\n",
    )
    .unwrap();
    let moved = |fs: &[Finding]| -> Vec<String> {
        attention(fs, "api_server")
            .iter()
            .filter(|f| {
                f.message
                    .contains("multiplexed, the agent's gateway does not read")
            })
            .map(|f| f.action.clone().unwrap_or_default())
            .collect()
    };
    // 0.19.0: the default profile's key is not read; a named profile has none of its own.
    let report = run(&root, &agent(33));
    let default = moved(findings(&report, "default"));
    assert_eq!(default.len(), 1, "{default:?}");
    assert!(default[0].contains("API_SERVER_KEY") && default[0].contains("`.env`"));
    assert!(moved(findings(&report, "work")).is_empty());
    // 0.20.1: the named profile's are not read.
    let newer = Image {
        agent_version: Some("0.20.1".into()),
        ..agent(35)
    };
    let report = run(&root, &newer);
    assert!(moved(findings(&report, "default")).is_empty());
    let work = moved(findings(&report, "work"));
    assert_eq!(work.len(), 1, "{work:?}");
    assert!(
        work[0].contains("API_SERVER_KEY, API_SERVER_PORT")
            && work[0].contains("profiles/work/.env"),
        "{work:?}"
    );
    // Not multiplexed, or in `.env` already, or the native engine (no agent): nothing to say.
    fs::write(
        root.join("config.yaml"),
        "API_SERVER_KEY: default-key-0123456789abcdef\n",
    )
    .unwrap();
    let report = run(&root, &agent(33));
    assert!(moved(findings(&report, "default")).is_empty());
    fs::write(root.join("config.yaml"), top_level).unwrap();
    let report = run(&root, &Image::default());
    assert!(moved(findings(&report, "default")).is_empty());
}

#[test]
fn an_agent_without_aiohttp_cannot_serve_its_api_server() {
    let (_dir, root) = volume();
    fs::write(root.join(".env"), "API_SERVER_KEY=k3y-0123456789abcdef\n").unwrap();
    let bare = Image {
        agent_packages: Default::default(),
        ..agent(33)
    };
    let needs = |image: &Image| -> Vec<String> {
        attention(&run(&root, image).findings, "api_server")
            .iter()
            .filter(|f| f.message.contains("aiohttp"))
            .map(|f| f.action.clone().unwrap_or_default())
            .collect()
    };
    let said = needs(&bare);
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].contains("pip install aiohttp"), "{said:?}");
    assert!(needs(&agent(33)).is_empty(), "installed with it");
    let lazily = Image {
        lazy_packages: ["aiohttp".to_string()].into(),
        ..bare.clone()
    };
    assert!(needs(&lazily).is_empty(), "in lazy-packages");
    // The API server off, or the native engine (no agent): nothing to say.
    fs::write(root.join(".env"), "").unwrap();
    assert!(needs(&bare).is_empty());
}
