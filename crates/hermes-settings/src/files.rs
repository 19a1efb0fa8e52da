//! [`ProfileFiles`]: a profile's `.env` and `config.yaml`, read once, over the process
//! environment it runs with; the variables they give, each with its [`Source`].

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use hermes_home::config::{Config, ModelSettings, expand_vars};
use hermes_home::dotenv::DotEnv;
use hermes_home::seeds::{API_SERVER_KEY, KeySeed};

/// Variables of the process environment a named profile never takes: only its own files can
/// give them (the environment's key is the default profile's, and one key must not open both).
pub const NOT_BORROWED: [&str; 1] = [API_SERVER_KEY];

/// The nested `config.yaml` key the API server's key is read from after the environment.
const NESTED_KEY: &str = "platforms.api_server.extra.key";

/// Whether a profile is the default one (it takes the whole process environment) or a named
/// one (it takes it without [`NOT_BORROWED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The root profile.
    Default,
    /// A profile under `profiles/`.
    Named,
}

impl Scope {
    /// The scope of the profile named `profile`.
    pub fn of(profile: &str) -> Scope {
        if profile == hermes_home::DEFAULT_PROFILE {
            Scope::Default
        } else {
            Scope::Named
        }
    }
}

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The profile's `.env` (it wins over the process environment).
    DotEnv,
    /// The process environment.
    Environment,
    /// A top-level scalar of `config.yaml`, which the original bridges into the environment
    /// where nothing above sets it.
    ConfigTopLevel,
    /// A nested key of `config.yaml` (dotted).
    ConfigKey(&'static str),
    /// Set nowhere: the value the gateway takes then.
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::DotEnv => f.write_str("`.env`"),
            Source::Environment => f.write_str("the container's environment"),
            Source::ConfigTopLevel => f.write_str("the top level of `config.yaml`"),
            Source::ConfigKey(key) => write!(f, "`{key}` in `config.yaml`"),
            Source::Default => f.write_str("the default"),
        }
    }
}

/// A setting's value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The value, trimmed (never blank).
    pub value: String,
    /// Where it came from.
    pub source: Source,
}

/// A setting set in several places with different values: one is in force, the others are
/// not used (never the values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shadowed {
    /// The variable (`API_SERVER_KEY`, `API_SERVER_PORT`).
    pub variable: &'static str,
    /// Where the value in force is set.
    pub in_force: Source,
    /// Where the different, unused ones are.
    pub unused: Vec<Source>,
}

impl Shadowed {
    /// What to do about it, in one line.
    pub fn fix(&self) -> String {
        let unused: Vec<String> = self.unused.iter().map(Source::to_string).collect();
        let (what, var) = (self.noun(), self.variable);
        match self.in_force {
            Source::DotEnv => format!(
                "delete the `{var}=` line of `.env` to use the {what} in {}, or set the same {what} in both",
                unused.join(" and ")
            ),
            _ => format!(
                "remove the {what} from {}, or set the same {what} everywhere",
                unused.join(" and ")
            ),
        }
    }

    /// `key` for the API server's key, else `value`.
    fn noun(&self) -> &'static str {
        if self.variable == API_SERVER_KEY {
            "key"
        } else {
            "value"
        }
    }
}

impl fmt::Display for Shadowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unused: Vec<String> = self.unused.iter().map(Source::to_string).collect();
        let unused = unused.join(" and ");
        if self.variable == API_SERVER_KEY {
            write!(
                f,
                "the API server's key in {} is in force; the different one in {unused} is not \
                 used (clients holding it get 401)",
                self.in_force
            )
        } else {
            write!(
                f,
                "`{}` in {} is in force; the different value in {unused} is not used",
                self.variable, self.in_force
            )
        }
    }
}

/// A profile's files, read once, over the process environment it runs with.
#[derive(Debug, Clone)]
pub struct ProfileFiles {
    dotenv: DotEnv,
    config: Config,
    scope: Scope,
    process: BTreeMap<String, String>,
}

impl ProfileFiles {
    /// Reads the profile in `dir` (`.env`, `config.yaml`; a missing file is an empty one) with
    /// `process_env` as its process environment, as `scope` takes it.
    ///
    /// # Errors
    /// A file that cannot be read or parsed ([`hermes_home::Error`]).
    pub fn read(
        dir: &Path,
        scope: Scope,
        process_env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, hermes_home::Error> {
        let dotenv = DotEnv::load(&dir.join(".env"))?;
        let config = Config::load(&dir.join("config.yaml"))?;
        Ok(Self::from_parts(dotenv, config, scope, process_env))
    }

    /// The same, from files already read.
    pub fn from_parts(
        dotenv: DotEnv,
        config: Config,
        scope: Scope,
        process_env: impl IntoIterator<Item = (String, String)>,
    ) -> Self {
        let process = process_env
            .into_iter()
            .filter(|(k, _)| scope == Scope::Default || !NOT_BORROWED.contains(&k.as_str()))
            .collect();
        ProfileFiles {
            dotenv,
            config,
            scope,
            process,
        }
    }

    /// The profile's `.env`.
    pub fn dotenv(&self) -> &DotEnv {
        &self.dotenv
    }

    /// The profile's `config.yaml`.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The environment the profile's processes see, as the original builds it (the crate's
    /// table): `.env` over the process environment, then the top-level scalars of
    /// `config.yaml` where neither sets the variable (a blank value is set, and unset to
    /// whoever reads it).
    pub fn environment(&self) -> BTreeMap<String, String> {
        let mut env = self.dotenv.overlay(self.process.clone());
        let bridged: Vec<(String, String)> = self
            .top_level_scalars()
            .filter(|(k, _)| !env.contains_key(*k))
            .map(|(k, raw)| {
                (
                    k.to_string(),
                    expand_vars(&raw, &|name| env.get(name).cloned()),
                )
            })
            .collect();
        env.extend(bridged);
        env
    }

    /// A lookup of the profile's [`environment`](Self::environment) for code that takes one. A
    /// variable set blank is returned blank, as the original's environment holds it: `${VAR}`
    /// expands it to nothing, and readers count it unset ([`hermes_home::dotenv::nonblank`]).
    pub fn lookup(&self) -> impl Fn(&str) -> Option<String> + use<> {
        let env = self.environment();
        move |name| env.get(name).cloned()
    }

    /// [`lookup`](Self::lookup) with the process environment given by `process` instead of
    /// the one the files were read with: for a caller that controls what the process
    /// environment is (`doctor`, `dump`, `migrate check`, the dashboard, their tests). The same
    /// order and the same scope: `.env`, then `process`, then the top level of `config.yaml`
    /// (`${VAR}` expanded from the two above); a blank value hides the layers below and is
    /// returned blank.
    pub fn lookup_with<'a>(
        &'a self,
        process: &'a dyn Fn(&str) -> Option<String>,
    ) -> impl Fn(&str) -> Option<String> + 'a {
        let process = move |name: &str| {
            let borrowed = self.scope == Scope::Default || !NOT_BORROWED.contains(&name);
            borrowed.then(|| process(name)).flatten()
        };
        move |name: &str| {
            let above_bridge = |k: &str| {
                self.dotenv
                    .get(k)
                    .map(str::to_string)
                    .or_else(|| process(k))
            };
            above_bridge(name).or_else(|| {
                self.top_level_scalars()
                    .find(|(k, _)| *k == name)
                    .map(|(_, raw)| expand_vars(&raw, &above_bridge))
            })
        }
    }

    /// The `model` section as the gateway reads it: `${VAR}` expanded from the profile's
    /// [`environment`](Self::environment).
    pub fn model(&self) -> ModelSettings {
        let env = self.environment();
        self.config.model(&|name| env.get(name).cloned())
    }

    /// Every source that sets `key` to a non-blank value, in precedence order (the first is
    /// in force unless a layer above it sets the variable blank: [`ProfileFiles::var`]).
    pub fn sources(&self, key: &str) -> Vec<Setting> {
        self.layers(key)
            .into_iter()
            .filter_map(|(source, value)| Some(setting(nonblank(&value?)?, source)))
            .collect()
    }

    /// Where a new value of the variable `key` goes so that it is the one in force without
    /// moving the operator's: the top level of `config.yaml` when the value in force is there
    /// (the original's `config set` put it there), else `.env` (above every other place).
    pub fn write_place(&self, key: &str) -> Source {
        match self.var(key) {
            Some(Setting {
                source: Source::ConfigTopLevel,
                ..
            }) => Source::ConfigTopLevel,
            _ => Source::DotEnv,
        }
    }

    /// [`var`](Self::var), else the value the gateway of `profile` takes when the variable is
    /// set nowhere ([`Source::Default`]): its port ([`hermes_home::api_server::default_port`])
    /// and host; `None` for a variable without a default (the key).
    pub fn var_or_default(&self, key: &str, profile: &str) -> Option<Setting> {
        self.var(key).or_else(|| {
            let default = match key {
                "API_SERVER_PORT" => hermes_home::api_server::default_port(profile).to_string(),
                "API_SERVER_HOST" => hermes_home::api_server::DEFAULT_HOST.to_string(),
                _ => return None,
            };
            Some(setting(&default, Source::Default))
        })
    }

    /// The value of the variable `key` the profile's processes see, with its source: the
    /// first layer that sets it; `None` when none does or that one sets it blank.
    pub fn var(&self, key: &str) -> Option<Setting> {
        let (source, value) = self
            .layers(key)
            .into_iter()
            .find_map(|(source, value)| Some((source, value?)))?;
        Some(setting(nonblank(&value)?, source))
    }

    /// What each layer sets `key` to (`None`: not set there), in precedence order; a
    /// top-level value of `config.yaml` `${VAR}` expanded from the layers above.
    fn layers(&self, key: &str) -> [(Source, Option<String>); 3] {
        let lookup = |name: &str| self.environment_without_bridge(name);
        let top = self
            .top_level_scalars()
            .find(|(k, _)| *k == key)
            .map(|(_, raw)| expand_vars(&raw, &lookup));
        [
            (Source::DotEnv, self.dotenv.get(key).map(str::to_string)),
            (Source::Environment, self.process.get(key).cloned()),
            (Source::ConfigTopLevel, top),
        ]
    }

    /// Every source that gives the API server its key, the one in force first: the variable
    /// `API_SERVER_KEY` (its sources), then `platforms.api_server.extra.key`.
    pub fn api_server_key_sources(&self) -> Vec<Setting> {
        let mut found = self.sources(API_SERVER_KEY);
        let env = self.environment();
        if let Some(v) = self
            .config
            .string(NESTED_KEY, &|name| env.get(name).cloned())
        {
            found.push(setting(&v, Source::ConfigKey(NESTED_KEY)));
        }
        found
    }

    /// The API server's key, with its source: the variable `API_SERVER_KEY`, else the nested
    /// key; `None` when neither gives one.
    pub fn api_server_key(&self) -> Option<Setting> {
        self.var(API_SERVER_KEY).or_else(|| {
            self.api_server_key_sources()
                .into_iter()
                .find(|s| matches!(s.source, Source::ConfigKey(_)))
        })
    }

    /// When the API server's key is set in more than one place with different values: which
    /// is in force and where the unused ones are. `None` when there is one key (or none).
    pub fn shadowed_api_key(&self) -> Option<Shadowed> {
        let in_force = self.api_server_key()?;
        let unused: Vec<Source> = self
            .api_server_key_sources()
            .into_iter()
            .filter(|s| s.source != in_force.source && s.value != in_force.value)
            .map(|s| s.source)
            .collect();
        (!unused.is_empty()).then(|| Shadowed {
            variable: API_SERVER_KEY,
            in_force: in_force.source.clone(),
            unused,
        })
    }

    /// Every gateway variable ([`crate::GATEWAY_VARIABLES`]) set in more than one place with
    /// different values, the API server's key ([`shadowed_api_key`](Self::shadowed_api_key),
    /// its nested key included) first.
    pub fn shadowed(&self) -> Vec<Shadowed> {
        let others = crate::GATEWAY_VARIABLES
            .into_iter()
            .filter(|v| *v != API_SERVER_KEY)
            .filter_map(|variable| {
                let sources = self.sources(variable);
                let in_force = self.var(variable)?;
                let unused: Vec<Source> = sources
                    .into_iter()
                    .filter(|s| s.source != in_force.source && s.value != in_force.value)
                    .map(|s| s.source)
                    .collect();
                (!unused.is_empty()).then_some(Shadowed {
                    variable,
                    in_force: in_force.source,
                    unused,
                })
            });
        self.shadowed_api_key().into_iter().chain(others).collect()
    }

    /// What a `.env` seeded now must do about the API server's key: generate one only when
    /// the profile has none anywhere the original reads one (a generated key in `.env` would
    /// win over the operator's).
    pub fn key_seed(&self) -> KeySeed {
        match self.api_server_key() {
            Some(key) => KeySeed::SetIn(key.source.to_string()),
            None => KeySeed::Generate,
        }
    }

    /// [`ProfileFiles::key_seed`] for the profile in `dir`, read now; when its files cannot be
    /// read, no key is generated (the unreadable file may hold the operator's).
    pub fn key_seed_for(
        dir: &Path,
        scope: Scope,
        process_env: impl IntoIterator<Item = (String, String)>,
    ) -> KeySeed {
        match Self::read(dir, scope, process_env) {
            Ok(files) => files.key_seed(),
            Err(_) => KeySeed::SetIn("a `config.yaml` or `.env` that cannot be read".into()),
        }
    }

    /// `.env` over the process environment (what `${VAR}` in `config.yaml` expands from).
    fn environment_without_bridge(&self, name: &str) -> Option<String> {
        self.dotenv
            .get(name)
            .or_else(|| self.process.get(name).map(String::as_str))
            .map(str::to_string)
    }

    /// The top-level keys of `config.yaml` whose value is a string, number or boolean, with
    /// the value as text (unexpanded).
    fn top_level_scalars(&self) -> impl Iterator<Item = (&str, String)> {
        let mapping = self.config.document().as_mapping();
        mapping.into_iter().flatten().filter_map(|(k, v)| {
            let text = match v {
                yaml_serde::Value::String(s) => s.clone(),
                yaml_serde::Value::Number(n) => n.to_string(),
                yaml_serde::Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
                _ => return None,
            };
            Some((k.as_str()?, text))
        })
    }
}

fn nonblank(v: &str) -> Option<&str> {
    let v = v.trim();
    (!v.is_empty()).then_some(v)
}

fn setting(value: &str, source: Source) -> Setting {
    Setting {
        value: value.trim().to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dotenv: &str, config: &str, scope: Scope, process: &[(&str, &str)]) -> ProfileFiles {
        let config = Config::parse(Path::new("config.yaml"), config).unwrap();
        ProfileFiles::from_parts(
            DotEnv::parse(dotenv),
            config,
            scope,
            process.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        )
    }

    #[test]
    fn dotenv_wins_over_the_environment_which_wins_over_the_top_level_of_config() {
        let f = files(
            "API_SERVER_KEY=from-dotenv\n",
            "API_SERVER_KEY: from-config\nAPI_SERVER_PORT: 9001\nDEBUG: true\nnested: {a: 1}\n",
            Scope::Default,
            &[("API_SERVER_KEY", "from-env"), ("API_SERVER_PORT", " ")],
        );
        let sources: Vec<Source> = f
            .sources("API_SERVER_KEY")
            .into_iter()
            .map(|s| s.source)
            .collect();
        assert_eq!(
            sources,
            [Source::DotEnv, Source::Environment, Source::ConfigTopLevel]
        );
        let env = f.environment();
        assert_eq!(env["API_SERVER_KEY"], "from-dotenv");
        // Set blank in the environment: not bridged, and unset to whoever reads it.
        assert_eq!(env["API_SERVER_PORT"], " ");
        assert_eq!(f.var("API_SERVER_PORT"), None);
        assert_eq!(f.sources("API_SERVER_PORT")[0].value, "9001");
        // Python's str(True), as the original bridges a boolean; mappings are not bridged.
        assert_eq!(env["DEBUG"], "True");
        assert!(!env.contains_key("nested"));
    }

    #[test]
    fn a_key_only_at_the_top_of_config_is_the_one_in_force_and_expanded() {
        let f = files(
            "SECRET=s3cret-value-0123456789\n",
            "API_SERVER_KEY: ${SECRET}\n",
            Scope::Default,
            &[],
        );
        let key = f.api_server_key().unwrap();
        assert_eq!(key.value, "s3cret-value-0123456789");
        assert_eq!(key.source, Source::ConfigTopLevel);
        assert_eq!(f.environment()["API_SERVER_KEY"], "s3cret-value-0123456789");
    }

    #[test]
    fn the_nested_key_comes_after_every_variable() {
        let nested = "platforms:\n  api_server:\n    extra:\n      key: nested-key\n";
        let f = files("", nested, Scope::Default, &[]);
        assert_eq!(
            f.api_server_key().map(|s| s.source),
            Some(Source::ConfigKey(NESTED_KEY))
        );
        let f = files("", nested, Scope::Default, &[("API_SERVER_KEY", "env-key")]);
        let all = f.api_server_key_sources();
        assert_eq!(all[0].source, Source::Environment);
        assert_eq!(all[1].value, "nested-key");
        assert_eq!(files("", "", Scope::Default, &[]).api_server_key(), None);
    }

    #[test]
    fn a_named_profile_never_borrows_the_environments_key() {
        let f = files(
            "",
            "",
            Scope::Named,
            &[("API_SERVER_KEY", "default-key"), ("TZ", "UTC")],
        );
        assert_eq!(f.api_server_key(), None);
        assert_eq!(f.environment().get("TZ").map(String::as_str), Some("UTC"));
        assert!(!f.environment().contains_key("API_SERVER_KEY"));
    }

    #[test]
    fn a_shadowed_key_names_where_each_is_never_its_value() {
        let f = files(
            "API_SERVER_KEY=generated\n",
            "API_SERVER_KEY: operators\n",
            Scope::Default,
            &[("API_SERVER_KEY", "generated")],
        );
        let shadowed = f.shadowed_api_key().unwrap();
        assert_eq!(shadowed.in_force, Source::DotEnv);
        assert_eq!(shadowed.unused, [Source::ConfigTopLevel]);
        let text = shadowed.to_string();
        assert!(text.contains("`.env` is in force"), "{text}");
        assert!(
            !text.contains("operators") && !text.contains("generated"),
            "{text}"
        );
        let same = files(
            "API_SERVER_KEY=k\n",
            "API_SERVER_KEY: k\n",
            Scope::Default,
            &[],
        );
        assert_eq!(same.shadowed_api_key(), None);
        // `.env` over a Secret's key, added after the first boot: said.
        let secret = [("API_SERVER_KEY", "secret-key")];
        let env = files("API_SERVER_KEY=file-key\n", "", Scope::Default, &secret);
        assert_eq!(
            env.shadowed_api_key().unwrap().unused,
            [Source::Environment]
        );
        // Nothing to say without a second key, or with a blank one.
        for process in [" file-key ", "  "] {
            let env = [("API_SERVER_KEY", process)];
            let f = files("API_SERVER_KEY=file-key\n", "", Scope::Default, &env);
            assert_eq!(f.shadowed_api_key(), None, "{process:?}");
        }
    }

    #[test]
    fn a_new_value_goes_where_the_one_in_force_is_else_to_env() {
        let top = files("", "API_SERVER_PORT: 9001\n", Scope::Default, &[]);
        assert_eq!(top.write_place("API_SERVER_PORT"), Source::ConfigTopLevel);
        let env = [("API_SERVER_PORT", "9002")];
        let shell = files("", "API_SERVER_PORT: 9001\n", Scope::Default, &env);
        assert_eq!(shell.write_place("API_SERVER_PORT"), Source::DotEnv);
        assert_eq!(
            files("", "", Scope::Default, &[]).write_place("X"),
            Source::DotEnv
        );
    }

    #[test]
    fn a_key_is_seeded_only_where_the_profile_has_none() {
        let top = files("", "API_SERVER_KEY: mine\n", Scope::Default, &[]);
        assert_eq!(
            top.key_seed(),
            KeySeed::SetIn("the top level of `config.yaml`".into())
        );
        let env = files("", "", Scope::Default, &[("API_SERVER_KEY", "k")]);
        assert_eq!(
            env.key_seed(),
            KeySeed::SetIn("the container's environment".into())
        );
        let named = files("", "", Scope::Named, &[("API_SERVER_KEY", "k")]);
        assert_eq!(named.key_seed(), KeySeed::Generate);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.yaml"), "a: [").unwrap();
        assert!(matches!(
            ProfileFiles::key_seed_for(dir.path(), Scope::Default, Vec::new()),
            KeySeed::SetIn(_)
        ));
    }

    #[test]
    fn files_are_read_from_the_profile_directory_and_may_be_missing() {
        let dir = tempfile::tempdir().unwrap();
        let empty = ProfileFiles::read(dir.path(), Scope::Default, Vec::new()).unwrap();
        assert!(empty.environment().is_empty());
        std::fs::write(dir.path().join("config.yaml"), "API_SERVER_KEY: k\n").unwrap();
        let f = ProfileFiles::read(dir.path(), Scope::Default, Vec::new()).unwrap();
        assert_eq!(
            f.var("API_SERVER_KEY").unwrap().source,
            Source::ConfigTopLevel
        );
        std::fs::write(dir.path().join("config.yaml"), "a: [").unwrap();
        assert!(ProfileFiles::read(dir.path(), Scope::Default, Vec::new()).is_err());
    }

    #[test]
    fn a_lookup_through_a_given_process_environment_is_the_environment_it_would_give() {
        let config = "API_SERVER_PORT: 9000\nMODEL: '${NAME}-x'\nHIDDEN: top\n";
        let dotenv = "NAME=file\nHIDDEN=\nAPI_SERVER_KEY=from-env-file-0123\n";
        let process = [
            ("NAME".to_string(), "shell".to_string()),
            ("API_SERVER_PORT".to_string(), "7000".to_string()),
            (
                "API_SERVER_KEY".to_string(),
                "shell-key-0123456789".to_string(),
            ),
            ("ONLY_SHELL".to_string(), "s".to_string()),
        ];
        for scope in [Scope::Default, Scope::Named] {
            let files = ProfileFiles::from_parts(
                DotEnv::parse(dotenv),
                Config::parse(Path::new("config.yaml"), config).unwrap(),
                scope,
                process.clone(),
            );
            let given = |k: &str| process.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let (read, through) = (files.lookup(), files.lookup_with(&given));
            for name in [
                "NAME",
                "MODEL",
                "HIDDEN",
                "API_SERVER_PORT",
                "API_SERVER_KEY",
                "ONLY_SHELL",
                "NONE",
            ] {
                assert_eq!(read(name), through(name), "{name} ({scope:?})");
            }
            assert_eq!(through("MODEL").as_deref(), Some("file-x"));
            assert_eq!(
                through("HIDDEN").as_deref(),
                Some(""),
                "a blank `.env` value hides the top level"
            );
        }
    }

    #[test]
    fn every_shadowed_gateway_variable_is_named_the_key_first() {
        let f = files(
            "API_SERVER_PORT=8700\nAPI_SERVER_KEY=generated\n",
            "API_SERVER_PORT: 9000\nAPI_SERVER_KEY: operators\nAPI_SERVER_HOST: 0.0.0.0\n",
            Scope::Default,
            &[("API_SERVER_HOST", "0.0.0.0")],
        );
        let shadowed = f.shadowed();
        let variables: Vec<&str> = shadowed.iter().map(|s| s.variable).collect();
        assert_eq!(
            variables,
            ["API_SERVER_KEY", "API_SERVER_PORT"],
            "the same host twice is no shadow"
        );
        let port = &shadowed[1];
        assert_eq!(
            (&port.in_force, &port.unused[..]),
            (&Source::DotEnv, &[Source::ConfigTopLevel][..])
        );
        let text = port.to_string();
        assert!(
            text.contains("`API_SERVER_PORT` in `.env` is in force"),
            "{text}"
        );
        assert!(!text.contains("8700") && !text.contains("9000"), "{text}");
        assert!(
            port.fix().contains("delete the `API_SERVER_PORT=` line"),
            "{}",
            port.fix()
        );
    }

    #[test]
    fn a_port_or_host_set_nowhere_is_the_default_and_says_so() {
        let f = files("", "", Scope::Named, &[]);
        let port = f.var_or_default("API_SERVER_PORT", "work").unwrap();
        assert_eq!(port.source, Source::Default);
        assert_eq!(
            port.value,
            hermes_home::api_server::default_port("work").to_string()
        );
        assert_eq!(
            f.var_or_default("API_SERVER_HOST", "work").unwrap().value,
            "127.0.0.1"
        );
        assert_eq!(f.var_or_default("API_SERVER_KEY", "work"), None);
        let set = files("API_SERVER_PORT=9001\n", "", Scope::Named, &[]);
        assert_eq!(
            set.var_or_default("API_SERVER_PORT", "work")
                .unwrap()
                .source,
            Source::DotEnv
        );
        assert_eq!(Source::Default.to_string(), "the default");
    }
}
