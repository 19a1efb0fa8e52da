//! The original Python agent (`hermes-agent` from PyPI) when the image ships it, and which
//! *engine* serves a profile's gateway.
//!
//! Words:
//! * **agent** — an installation of `hermes-agent`: a venv whose console script (also called
//!   `hermes`) is [`Agent::cli`]. The `full` image installs it in [`DEFAULT_AGENT_CLI`]'s venv;
//!   `HERMES_AGENT_CLI` names another console script, and an empty `HERMES_AGENT_CLI` says
//!   there is none (the slim image, or a test).
//! * **engine** — what runs a profile's gateway service: the [`Engine::Native`] gateway of this
//!   binary, or the agent's own `hermes gateway run` ([`Engine::Agent`]).
//!
//! Which engine ([`choose_engine`]): the profile's `config.yaml` `gateway.engine` (`native` or
//! `agent`), else the image-wide `HERMES_GATEWAY_ENGINE`, else the agent where it is installed
//! and native otherwise ([`profile_engine`] reads them for a profile). Asking for the agent
//! where none is installed is an error the gateway reports (exit 78), never a silent fallback.
//!
//! How the agent serves a profile ([`gateway_command`]): `hermes gateway run` execs the
//! agent's own `gateway run` with the arguments and environment the original image's
//! supervisor gives it, so the supervised pid, signals and exit codes are the agent's
//! (`docs/gateway.md`, "Engines").

use std::path::{Path, PathBuf};

use hermes_settings::ProfileRead;

/// Where the `full` image installs the agent's console script.
pub const DEFAULT_AGENT_CLI: &str = "/opt/hermes-agent/bin/hermes";

/// The variable naming the agent's console script (empty: no agent).
pub const AGENT_CLI_VAR: &str = "HERMES_AGENT_CLI";

/// The image-wide default engine (`native` or `agent`).
pub const ENGINE_VAR: &str = "HERMES_GATEWAY_ENGINE";

/// Where Hermes runs, for saying how to get the agent: in our container image, or on a
/// machine of its own (a host).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Our image (its marker file is there).
    Image,
    /// Anywhere else.
    Host,
}

impl Place {
    /// Where this process runs.
    pub fn current() -> Place {
        if hermes_privilege::image_marker_present(Path::new(hermes_privilege::IMAGE_MARKER)) {
            Place::Image
        } else {
            Place::Host
        }
    }

    /// `in this container` or `on this machine`.
    pub fn here(self) -> &'static str {
        match self {
            Place::Image => "in this container",
            Place::Host => "on this machine",
        }
    }

    /// How to get hermes-agent here, for a hint: the `full` image in a container; pip and
    /// [`AGENT_CLI_VAR`] on a host (where no image is involved).
    pub fn get_the_agent(self) -> String {
        match self {
            Place::Image => format!(
                "run the `full` image, which ships hermes-agent, or set `{AGENT_CLI_VAR}` to an \
                 agent's `hermes`"
            ),
            Place::Host => format!(
                "install hermes-agent (`pip install hermes-agent`) and set `{AGENT_CLI_VAR}` to \
                 its `hermes` script"
            ),
        }
    }
}

/// An installed agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// Its console script (`<venv>/bin/hermes`).
    pub cli: PathBuf,
    /// The venv's interpreter beside it (`<venv>/bin/python`).
    pub python: PathBuf,
    /// Its version, from the venv's `hermes_agent-<version>.dist-info` (`None` if unreadable).
    pub version: Option<String>,
    /// Where it was installed from ([`install_source`]): the image's stamp
    /// (`pypi:0.19.0`, `git+https://...@v0.21.4`, `context:vendor/hermes-agent`), else what
    /// the package metadata says (`editable /path`, `url ...`, `pypi`); `None` if unknown.
    pub source: Option<String>,
}

impl Agent {
    /// The agent at console script `cli`, if that is a file.
    pub fn at(cli: &Path) -> Option<Agent> {
        if !cli.is_file() {
            return None;
        }
        let bin = cli.parent()?;
        let venv = bin.parent();
        let dist_info = venv.and_then(dist_info);
        Some(Agent {
            cli: cli.to_path_buf(),
            python: bin.join("python"),
            version: dist_info.as_ref().map(|(_, version)| version.clone()),
            source: venv.and_then(|venv| {
                install_source(venv, dist_info.as_ref().map(|(d, _)| d.as_path()))
            }),
        })
    }
}

/// The stamp the `full` image's build writes into the agent's venv: one line, the
/// `HERMES_AGENT_SOURCE` it was installed from (`docker/agent-install.sh`).
pub const SOURCE_STAMP: &str = ".hermes-agent-source";

/// Where the agent in `venv` came from: the first line of its [`SOURCE_STAMP`] when the image
/// wrote one; else, from its `dist_info` directory, `editable <path>` (a source tree installed
/// with `pip install -e`, by its `direct_url.json`), `url <url>` (installed from a file or URL)
/// or `pypi` (no `direct_url.json`: installed from a package index); `None` without either.
pub fn install_source(venv: &Path, dist_info: Option<&Path>) -> Option<String> {
    if let Ok(text) = std::fs::read_to_string(venv.join(SOURCE_STAMP))
        && let Some(line) = text.lines().next().map(str::trim).filter(|l| !l.is_empty())
    {
        return Some(line.to_string());
    }
    let dist_info = dist_info?;
    let Ok(text) = std::fs::read_to_string(dist_info.join("direct_url.json")) else {
        return Some("pypi".into());
    };
    // PEP 610: {"url": "file:///opt/tree", "dir_info": {"editable": true}}.
    let direct: serde_json::Value = serde_json::from_str(&text).ok()?;
    let url = direct.get("url")?.as_str()?;
    let editable = direct
        .pointer("/dir_info/editable")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    Some(match (editable, url.strip_prefix("file://")) {
        (true, Some(path)) => format!("editable {}", percent_decode(path)),
        (true, None) => format!("editable {url}"),
        (false, _) => format!("url {url}"),
    })
}

/// `%XX` escapes of a `file://` URL's path decoded (a malformed escape is kept as written).
fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The installed agent, by `HERMES_AGENT_CLI` (looked up with `var`), else
/// [`DEFAULT_AGENT_CLI`].
pub fn locate(var: impl Fn(&str) -> Option<String>) -> Option<Agent> {
    match var(AGENT_CLI_VAR) {
        Some(path) if path.trim().is_empty() => None,
        Some(path) => Agent::at(Path::new(path.trim())),
        None => Agent::at(Path::new(DEFAULT_AGENT_CLI)),
    }
}

/// `<venv>/lib/python3.*/site-packages/hermes_agent-<version>.dist-info` and its version: read
/// from a directory name, so `hermes version` never starts Python.
pub(crate) fn dist_info(venv: &Path) -> Option<(PathBuf, String)> {
    let lib = venv.join("lib");
    for python in std::fs::read_dir(&lib).ok()?.flatten() {
        let site = python.path().join("site-packages");
        let Ok(entries) = std::fs::read_dir(&site) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(version) = name
                .strip_prefix("hermes_agent-")
                .and_then(|rest| rest.strip_suffix(".dist-info"))
            {
                return Some((entry.path(), version.to_string()));
            }
        }
    }
    None
}

/// What serves a profile's gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// This binary's native gateway.
    Native,
    /// The agent's own `hermes gateway run`.
    Agent,
}

impl Engine {
    /// The setting's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Native => "native",
            Engine::Agent => "agent",
        }
    }

    fn parse(value: &str) -> Option<Engine> {
        match value.trim().to_ascii_lowercase().as_str() {
            "native" => Some(Engine::Native),
            "agent" => Some(Engine::Agent),
            _ => None,
        }
    }
}

/// Why no engine could be chosen: a configuration error (the gateway exits 78).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineProblem {
    /// A value that is neither `native` nor `agent`.
    #[error("`{setting}` is `{value}`: the gateway engine is `native` or `agent`")]
    Unknown {
        /// Where it was set (`gateway.engine`, `HERMES_GATEWAY_ENGINE`).
        setting: &'static str,
        /// The value found.
        value: String,
    },
    /// The agent was asked for and is not installed.
    #[error("`{setting}` asks for the agent engine, but hermes-agent is not installed here")]
    AgentMissing {
        /// Where it was asked for.
        setting: &'static str,
    },
    /// The profile's `config.yaml` cannot be read, so neither can its `gateway.engine`.
    #[error("cannot read the gateway engine from `{}`: {reason}", path.display())]
    Unreadable {
        /// The profile's `config.yaml`.
        path: PathBuf,
        /// Why (one line).
        reason: String,
    },
}

impl EngineProblem {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            EngineProblem::Unknown { setting, .. } => {
                format!("set `{setting}` to `native` or `agent`, or remove it to get the default")
            }
            EngineProblem::AgentMissing { setting } => format!(
                "{}, or set `{setting}` to `native`",
                Place::current().get_the_agent()
            ),
            EngineProblem::Unreadable { .. } => "fix the file, then start the gateway again".into(),
        })
    }
}

/// The engine of a profile: `configured` (its `gateway.engine`), else `image_default`
/// (`HERMES_GATEWAY_ENGINE`), else the agent when `agent` is installed, else native.
///
/// # Errors
///
/// [`EngineProblem`] for an unknown value, or the agent asked for where none is installed.
pub fn choose_engine(
    configured: Option<&str>,
    image_default: Option<&str>,
    agent: Option<&Agent>,
) -> Result<Engine, EngineProblem> {
    let asked = [("gateway.engine", configured), (ENGINE_VAR, image_default)]
        .into_iter()
        .find_map(|(setting, v)| v.filter(|v| !v.trim().is_empty()).map(|v| (setting, v)));
    match asked {
        Some((setting, value)) => match Engine::parse(value) {
            Some(Engine::Agent) if agent.is_none() => Err(EngineProblem::AgentMissing { setting }),
            Some(engine) => Ok(engine),
            None => Err(EngineProblem::Unknown {
                setting,
                value: value.to_string(),
            }),
        },
        None if agent.is_some() => Ok(Engine::Agent),
        None => Ok(Engine::Native),
    }
}

/// A profile's engine and the agent that would serve it: [`choose_engine`] with the
/// `gateway.engine` of the profile's `config.yaml` in `dir`, `HERMES_GATEWAY_ENGINE` and the
/// agent looked up with `var` (as [`locate`]).
///
/// # Errors
/// [`EngineProblem`]: an unusable setting, or a `config.yaml` that cannot be read.
pub fn profile_engine(
    dir: &Path,
    var: impl Fn(&str) -> Option<String>,
) -> Result<(Engine, Option<Agent>), EngineProblem> {
    let config = hermes_settings::config_of(dir).map_err(|e| EngineProblem::Unreadable {
        path: hermes_home::layout::config_path(dir),
        reason: hermes_errors::one_line(&e),
    })?;
    engine_in(&config, var)
}

/// [`profile_engine`] of a profile already read (boot and `hermes up` read every profile once:
/// [`hermes_settings::VolumeFiles`]).
///
/// # Errors
/// As [`profile_engine`].
pub fn engine_of(
    read: &ProfileRead,
    var: impl Fn(&str) -> Option<String>,
) -> Result<(Engine, Option<Agent>), EngineProblem> {
    match &read.files {
        Ok(files) => engine_in(files.config(), var),
        Err(why) => Err(EngineProblem::Unreadable {
            path: hermes_home::layout::config_path(&read.dir),
            reason: why.to_string(),
        }),
    }
}

/// The engine `config` asks for, with `HERMES_GATEWAY_ENGINE` and the agent of `var`.
fn engine_in(
    config: &hermes_home::config::Config,
    var: impl Fn(&str) -> Option<String>,
) -> Result<(Engine, Option<Agent>), EngineProblem> {
    let configured = match config.raw("gateway.engine") {
        None | Some(yaml_serde::Value::Null) => None,
        Some(yaml_serde::Value::String(s)) => Some(s.clone()),
        // A number or a list is no engine name; say what was found rather than ignore it.
        Some(other) => Some(
            yaml_serde::to_string(other)
                .map(|t| t.trim().to_owned())
                .unwrap_or_else(|_| "(not a string)".into()),
        ),
    };
    let agent = locate(&var);
    let engine = choose_engine(
        configured.as_deref(),
        var(ENGINE_VAR).as_deref(),
        agent.as_ref(),
    )?;
    Ok((engine, agent))
}

/// The name of the engine that serves (or would serve) the profile in `dir`, as status
/// displays show it: `native`, `agent`, or `invalid` for a setting that cannot be honoured
/// (the gateway then exits 78 and says why). Shared by `hermes gateway status`, `hermes
/// service status` and the dashboard.
pub fn engine_label(dir: &Path, var: impl Fn(&str) -> Option<String>) -> &'static str {
    match profile_engine(dir, var) {
        Ok((engine, _)) => engine.as_str(),
        Err(_) => "invalid",
    }
}

/// Set for a supervised agent gateway: it names the s6 child of the original image, and the
/// agent reads it as "a supervisor runs me" (its `/restart` then exits 75 instead of spawning a
/// detached successor) and as "my profile is fixed" (it never follows `active_profile`).
pub const SUPERVISED_CHILD_VAR: &str = "HERMES_S6_SUPERVISED_CHILD";

/// The program, arguments and environment that make the agent serve `profile`'s gateway on
/// the volume at `root`: `<agent> -p <profile> gateway run --replace` with `HERMES_HOME` the
/// root (and `PYTHONUNBUFFERED`) and, when `supervised` (a supervisor restarts it when it exits), as the original
/// image's supervisor runs it: `--external-supervisor` and [`SUPERVISED_CHILD_VAR`].
///
/// * `-p <profile>` always, `-p default` included: the agent (0.19) resolves `default` to the
///   root, so its sticky `active_profile` can never redirect the default profile's gateway.
/// * `--replace`: the gateway wins over a stray foreground one holding the profile's lock,
///   instead of failing in a restart loop.
/// * `--external-supervisor` (supervised only): `hermes update` asks this gateway to exit 75
///   and leaves the restart to the supervisor, instead of spawning its own watcher beside it.
///   Unsupervised (a terminal), the agent keeps its own restart helper, since no one would
///   start it again after exit 75.
pub fn gateway_command(
    agent: &Agent,
    root: &Path,
    profile: &str,
    supervised: bool,
) -> (Vec<String>, Vec<(String, String)>) {
    let mut argv = vec![agent.cli.to_string_lossy().into_owned()];
    argv.extend(["-p", profile, "gateway", "run", "--replace"].map(str::to_owned));
    let mut env = vec![
        (
            "HERMES_HOME".to_owned(),
            root.to_string_lossy().into_owned(),
        ),
        // Python block-buffers a pipe: without this, the agent's stdout (its banner, plain
        // prints) reaches the service log late, or never if it is killed.
        ("PYTHONUNBUFFERED".to_owned(), "1".to_owned()),
    ];
    if supervised {
        argv.push("--external-supervisor".to_owned());
        env.push((SUPERVISED_CHILD_VAR.to_owned(), "1".to_owned()));
    }
    (argv, env)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn how_to_get_the_agent_is_said_for_where_hermes_runs() {
        let host = Place::Host.get_the_agent();
        assert!(
            host.contains("pip install hermes-agent") && !host.contains("image"),
            "{host}"
        );
        let image = Place::Image.get_the_agent();
        assert!(image.contains("`full` image"), "{image}");
        assert_eq!(
            (Place::Host.here(), Place::Image.here()),
            ("on this machine", "in this container")
        );
    }

    #[test]
    fn the_engine_label_names_the_engine_or_says_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let no_agent = |k: &str| (k == AGENT_CLI_VAR).then(String::new);
        assert_eq!(engine_label(dir.path(), no_agent), "native");
        std::fs::write(
            dir.path().join("config.yaml"),
            "gateway:\n  engine: agent\n",
        )
        .unwrap();
        assert_eq!(
            engine_label(dir.path(), no_agent),
            "invalid",
            "no agent installed"
        );
        std::fs::write(dir.path().join("config.yaml"), "gateway:\n  engine: 3\n").unwrap();
        assert_eq!(engine_label(dir.path(), no_agent), "invalid");
    }

    fn fake_venv(dir: &Path, version: &str) -> PathBuf {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("hermes"), "#!/bin/sh\n").unwrap();
        let site = dir.join("lib/python3.13/site-packages");
        std::fs::create_dir_all(site.join(format!("hermes_agent-{version}.dist-info"))).unwrap();
        std::fs::create_dir_all(site.join("other-1.0.dist-info")).unwrap();
        bin.join("hermes")
    }

    #[test]
    fn an_agent_is_found_by_its_variable_with_its_version() {
        let dir = tempfile::tempdir().unwrap();
        let cli = fake_venv(dir.path(), "0.19.0");
        let cli_str = cli.to_string_lossy().into_owned();
        let agent = locate(|k| (k == AGENT_CLI_VAR).then(|| cli_str.clone())).unwrap();
        assert_eq!(agent.cli, cli);
        assert_eq!(agent.python, dir.path().join("bin/python"));
        assert_eq!(agent.version.as_deref(), Some("0.19.0"));
        assert_eq!(locate(|k| (k == AGENT_CLI_VAR).then(String::new)), None);
        let missing = dir
            .path()
            .join("nope/bin/hermes")
            .to_string_lossy()
            .into_owned();
        assert_eq!(locate(|_| Some(missing.clone())), None);
    }

    #[test]
    fn the_source_is_the_images_stamp_first() {
        let dir = tempfile::tempdir().unwrap();
        let cli = fake_venv(dir.path(), "0.20.1");
        let dist = dir
            .path()
            .join("lib/python3.13/site-packages/hermes_agent-0.20.1.dist-info");
        std::fs::write(
            dist.join("direct_url.json"),
            r#"{"url": "file:///opt/hermes-agent/src", "dir_info": {"editable": true}}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join(SOURCE_STAMP),
            "context:vendor/hermes-agent-0.20.1\nignored\n",
        )
        .unwrap();
        let agent = Agent::at(&cli).unwrap();
        assert_eq!(
            agent.source.as_deref(),
            Some("context:vendor/hermes-agent-0.20.1")
        );
        assert_eq!(agent.version.as_deref(), Some("0.20.1"));
        // An empty stamp says nothing: the metadata answers.
        std::fs::write(dir.path().join(SOURCE_STAMP), "\n").unwrap();
        assert_eq!(
            Agent::at(&cli).unwrap().source.as_deref(),
            Some("editable /opt/hermes-agent/src")
        );
    }

    #[test]
    fn without_a_stamp_the_source_is_what_the_package_metadata_says() {
        let dir = tempfile::tempdir().unwrap();
        let cli = fake_venv(dir.path(), "0.19.0");
        assert_eq!(Agent::at(&cli).unwrap().source.as_deref(), Some("pypi"));
        let direct = dir
            .path()
            .join("lib/python3.13/site-packages/hermes_agent-0.19.0.dist-info/direct_url.json");
        std::fs::write(
            &direct,
            r#"{"url": "file:///home/a%20b/hermes-agent", "dir_info": {"editable": true}}"#,
        )
        .unwrap();
        assert_eq!(
            Agent::at(&cli).unwrap().source.as_deref(),
            Some("editable /home/a b/hermes-agent")
        );
        std::fs::write(
            &direct,
            r#"{"url": "https://example.org/hermes_agent-0.19.0-py3-none-any.whl", "archive_info": {}}"#,
        )
        .unwrap();
        assert_eq!(
            Agent::at(&cli).unwrap().source.as_deref(),
            Some("url https://example.org/hermes_agent-0.19.0-py3-none-any.whl")
        );
        // Unreadable metadata is no source, not a guess.
        std::fs::write(&direct, "{not json").unwrap();
        assert_eq!(Agent::at(&cli).unwrap().source, None);
        // No dist-info at all: nothing to say.
        let bare = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(bare.path().join("bin")).unwrap();
        std::fs::write(bare.path().join("bin/hermes"), "#!/bin/sh\n").unwrap();
        let agent = Agent::at(&bare.path().join("bin/hermes")).unwrap();
        assert_eq!((agent.version, agent.source), (None, None));
    }

    #[test]
    fn a_malformed_percent_escape_is_kept_as_written() {
        assert_eq!(percent_decode("/a%2Fb%zz%4"), "/a/b%zz%4");
        assert_eq!(percent_decode("/caf%C3%A9"), "/café");
    }

    #[test]
    fn the_engine_is_the_profiles_then_the_images_then_what_is_installed() {
        let agent = Agent {
            cli: "/a/bin/hermes".into(),
            python: "/a/bin/python".into(),
            version: None,
            source: None,
        };
        let a = Some(&agent);
        assert_eq!(choose_engine(None, None, None), Ok(Engine::Native));
        assert_eq!(choose_engine(None, None, a), Ok(Engine::Agent));
        assert_eq!(choose_engine(None, Some("native"), a), Ok(Engine::Native));
        assert_eq!(
            choose_engine(Some("Agent"), Some("native"), a),
            Ok(Engine::Agent)
        );
        assert_eq!(
            choose_engine(Some(" "), Some("native"), a),
            Ok(Engine::Native)
        );
        assert_eq!(
            choose_engine(Some("agent"), None, None),
            Err(EngineProblem::AgentMissing {
                setting: "gateway.engine"
            })
        );
        let err = choose_engine(None, Some("python"), a).unwrap_err();
        assert!(err.to_string().contains("HERMES_GATEWAY_ENGINE"), "{err}");
    }

    #[test]
    fn a_profile_names_its_engine_in_its_config() {
        let dir = tempfile::tempdir().unwrap();
        let cli = fake_venv(&dir.path().join("venv"), "0.19.0");
        let cli_str = cli.to_string_lossy().into_owned();
        let with_agent = |k: &str| (k == AGENT_CLI_VAR).then(|| cli_str.clone());
        let profile = dir.path().join("work");
        std::fs::create_dir_all(&profile).unwrap();

        // No config: the installed agent serves it.
        let (engine, agent) = profile_engine(&profile, with_agent).unwrap();
        assert_eq!(
            (engine, agent.map(|a| a.cli)),
            (Engine::Agent, Some(cli.clone()))
        );

        std::fs::write(profile.join("config.yaml"), "gateway:\n  engine: native\n").unwrap();
        assert_eq!(
            profile_engine(&profile, with_agent).unwrap().0,
            Engine::Native
        );

        std::fs::write(profile.join("config.yaml"), "gateway:\n  engine: agent\n").unwrap();
        let no_agent = |k: &str| (k == AGENT_CLI_VAR).then(String::new);
        assert_eq!(
            profile_engine(&profile, no_agent).unwrap_err(),
            EngineProblem::AgentMissing {
                setting: "gateway.engine"
            }
        );

        std::fs::write(profile.join("config.yaml"), "gateway:\n  engine: 3\n").unwrap();
        assert_eq!(
            profile_engine(&profile, with_agent).unwrap_err(),
            EngineProblem::Unknown {
                setting: "gateway.engine",
                value: "3".into()
            }
        );

        std::fs::write(profile.join("config.yaml"), "gateway: [unclosed\n").unwrap();
        let err = profile_engine(&profile, with_agent).unwrap_err();
        assert!(matches!(err, EngineProblem::Unreadable { .. }), "{err}");
        assert!(err.hint().is_some());
    }

    #[test]
    fn the_agents_gateway_serves_the_profile_on_the_same_volume() {
        let agent = Agent {
            cli: "/a/bin/hermes".into(),
            python: "/a/bin/python".into(),
            version: None,
            source: None,
        };
        let (argv, env) = gateway_command(&agent, Path::new("/opt/data"), "work", true);
        assert_eq!(
            argv,
            [
                "/a/bin/hermes",
                "-p",
                "work",
                "gateway",
                "run",
                "--replace",
                "--external-supervisor"
            ]
        );
        assert!(env.contains(&("HERMES_HOME".to_owned(), "/opt/data".to_owned())));
        assert!(env.contains(&(SUPERVISED_CHILD_VAR.to_owned(), "1".to_owned())));
        // In a terminal: no supervisor to hand restarts to.
        let (argv, env) = gateway_command(&agent, Path::new("/opt/data"), "default", false);
        assert_eq!(
            argv,
            [
                "/a/bin/hermes",
                "-p",
                "default",
                "gateway",
                "run",
                "--replace"
            ]
        );
        assert!(env.contains(&("HERMES_HOME".to_owned(), "/opt/data".to_owned())));
        assert!(!env.iter().any(|(k, _)| k == SUPERVISED_CHILD_VAR));
    }
}
