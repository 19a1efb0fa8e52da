//! Whether one gateway serves every profile ([`resolve`]), and what status views say of it.
//!
//! The mode is resolved as the original resolves it: the environment, then the root
//! `config.yaml` (`hermes_home::multiplex::configured`), then the default of the engine that
//! serves the default profile — the installed agent's own default (asked of the agent:
//! `agent_probe`), or off for the native gateway. When it is on, `gateway-default` serves every
//! profile and the named profiles' services are registered but never started, by reconciliation
//! or by an operator: two gateways must never own one profile's messaging platforms.

use std::path::Path;

use hermes_home::config::Config;
use hermes_home::multiplex::{Source, configured};

use hermes_settings::ProfileRead;

use crate::agent::{Agent, Engine, engine_of};

/// The resolved mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Multiplexing {
    /// Whether the default profile's gateway serves every profile.
    pub on: bool,
    /// Where that was decided.
    pub source: Source,
    /// The engine of the default profile's gateway (the one that multiplexes).
    pub engine: Engine,
}

impl Multiplexing {
    /// Off, decided by nobody: a volume whose settings cannot be read.
    pub const OFF: Multiplexing = Multiplexing {
        on: false,
        source: Source::Default,
        engine: Engine::Native,
    };

    /// `multiplexed` or `standalone`, as status views name the mode.
    pub fn mode(&self) -> &'static str {
        if self.on { "multiplexed" } else { "standalone" }
    }

    /// Whether `profile`'s own gateway may run: always for `default`, never for a named
    /// profile while multiplexing is on.
    pub fn runs_own_gateway(&self, profile: &str) -> bool {
        !self.on || profile == hermes_home::DEFAULT_PROFILE
    }
}

impl Multiplexing {
    /// The service that serves `profile` in its place: `gateway-default` for a named profile
    /// while multiplexing is on, `None` when it runs its own.
    pub fn served_by(&self, profile: &str) -> Option<String> {
        (!self.runs_own_gateway(profile)).then(|| crate::service_name(hermes_home::DEFAULT_PROFILE))
    }

    /// One line for status views: `multiplexed (from config.yaml): gateway-default serves
    /// default, work`, or `standalone: each profile runs its own gateway`.
    pub fn summary(&self, profiles: &[&str]) -> String {
        if self.on {
            format!(
                "multiplexed (from {}, {} engine): gateway-default serves {}",
                self.source.as_str(),
                self.engine.as_str(),
                profiles.join(", ")
            )
        } else {
            "standalone: each profile runs its own gateway".into()
        }
    }

    /// The mode as status documents carry it: `{mode, source, engine}` and, when on, the
    /// profiles the default gateway serves.
    pub fn to_json(&self, profiles: &[&str]) -> serde_json::Value {
        serde_json::json!({
            "mode": self.mode(),
            "source": self.source.as_str(),
            "engine": self.engine.as_str(),
            "serves": if self.on { serde_json::json!(profiles) } else { serde_json::Value::Null },
        })
    }
}

/// The mode for the volume whose default profile is `root`, as read (module doc).
/// `agent_default` asks the installed agent its default
/// (`agent_probe::probe_cached(..).multiplex_default`); it is called only when neither the
/// environment nor `config.yaml` decides and the agent serves the default profile.
pub fn resolve(
    root: &ProfileRead,
    var: &dyn Fn(&str) -> Option<String>,
    agent_default: impl FnOnce(&Agent) -> Option<bool>,
) -> Multiplexing {
    // A default profile whose engine cannot run decides nothing by default; an explicit switch
    // holds all the same (its named profiles must not start while it is broken).
    let (engine, agent) = engine_of(root, var).unwrap_or((Engine::Native, None));
    let unreadable = Config::empty(&hermes_home::layout::config_path(&root.dir));
    if let Some((on, source)) = configured(root.config().unwrap_or(&unreadable), var) {
        return Multiplexing { on, source, engine };
    }
    let on = match (engine, agent.as_ref()) {
        (Engine::Agent, Some(agent)) => agent_default(agent).unwrap_or(false),
        _ => false,
    };
    Multiplexing {
        on,
        source: Source::Default,
        engine,
    }
}

/// [`resolve`] for the volume at `root`, read now, asking the installed agent for its default
/// ([`agent_default`]).
pub fn resolve_asking_agent(root: &Path, var: &dyn Fn(&str) -> Option<String>) -> Multiplexing {
    let read = ProfileRead::read(
        hermes_home::DEFAULT_PROFILE,
        root,
        hermes_settings::process_env(),
    );
    resolve(&read, var, agent_default)
}

/// The service whose restart applies a change to `home`'s profile: its own gateway, or the
/// default profile's while that one multiplexes it.
pub fn serving_service(home: &hermes_home::Home, var: &dyn Fn(&str) -> Option<String>) -> String {
    let profile = home.profile().name();
    resolve_asking_agent(home.root(), var)
        .served_by(profile)
        .unwrap_or_else(|| crate::gateway::service_name(profile))
}

/// The installed agent's own default, asked once per process.
pub fn agent_default(agent: &Agent) -> Option<bool> {
    crate::agent_probe::probe_cached(agent, None)
        .ok()
        .and_then(|f| f.multiplex_default)
}

/// The line a refused start of a named profile's gateway says.
pub fn served_by_default_line(profile: &str, m: &Multiplexing) -> String {
    format!(
        "profile `{profile}` is served by the default profile's gateway (multiplexing is on, \
         from {}): not starting a second gateway for it",
        m.source.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AGENT_CLI_VAR;
    use hermes_home::multiplex::MULTIPLEX_VAR;
    use std::fs;

    /// The default profile at `root`, read now.
    fn read(root: &Path) -> ProfileRead {
        ProfileRead::read("default", root, Vec::new())
    }

    #[test]
    fn the_mode_is_the_environment_the_file_then_the_engines_default() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("SOUL.md"), "s").unwrap();
        let native = |k: &str| (k == AGENT_CLI_VAR).then(String::new);
        let never = |_: &Agent| -> Option<bool> { panic!("the native engine asks no agent") };
        let m = resolve(&read(root), &native, never);
        assert_eq!(
            (m.on, m.source, m.engine),
            (false, Source::Default, Engine::Native)
        );
        assert_eq!(m.mode(), "standalone");

        fs::write(
            root.join("config.yaml"),
            "gateway:\n  multiplex_profiles: true\n",
        )
        .unwrap();
        let m = resolve(&read(root), &native, never);
        assert_eq!((m.on, m.source), (true, Source::Config));
        assert!(m.runs_own_gateway("default") && !m.runs_own_gateway("work"));

        let env_off = |k: &str| match k {
            AGENT_CLI_VAR => Some(String::new()),
            MULTIPLEX_VAR => Some("false".into()),
            _ => None,
        };
        let m = resolve(&read(root), &env_off, never);
        assert_eq!((m.on, m.source), (false, Source::Environment));
        assert!(m.runs_own_gateway("work"));
    }

    #[test]
    fn with_the_agent_its_own_default_decides() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("SOUL.md"), "s").unwrap();
        let venv = root.join("venv/bin");
        fs::create_dir_all(&venv).unwrap();
        fs::write(venv.join("hermes"), "#!/bin/sh\n").unwrap();
        let cli = venv.join("hermes").to_string_lossy().into_owned();
        let with_agent = |k: &str| (k == AGENT_CLI_VAR).then(|| cli.clone());
        let m = resolve(&read(root), &with_agent, |_| Some(true));
        assert_eq!(
            (m.on, m.source, m.engine),
            (true, Source::Default, Engine::Agent)
        );
        let m = resolve(&read(root), &with_agent, |_| None);
        assert!(!m.on, "an agent without the setting does not multiplex");
        // A broken engine setting: no default applies, an explicit switch still does.
        fs::write(root.join("config.yaml"), "gateway:\n  engine: python\n").unwrap();
        assert_eq!(
            resolve(&read(root), &with_agent, |_| Some(true)),
            Multiplexing::OFF
        );
        fs::write(
            root.join("config.yaml"),
            "gateway:\n  engine: python\n  multiplex_profiles: on\n",
        )
        .unwrap();
        assert!(resolve(&read(root), &with_agent, |_| Some(false)).on);
        let line = served_by_default_line(
            "work",
            &Multiplexing {
                on: true,
                source: Source::Environment,
                engine: Engine::Agent,
            },
        );
        assert!(
            line.contains("`work`") && line.contains("environment"),
            "{line}"
        );
    }
}
