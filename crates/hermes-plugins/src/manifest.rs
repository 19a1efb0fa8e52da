//! `plugin.yaml`: the plugin manifest format.
//!
//! ```text
//! <plugin>/plugin.yaml
//!   name: honcho                 # [A-Za-z0-9][A-Za-z0-9_-]{0,63}, required
//!   version: 1.0.0
//!   description: ...
//!   kind: memory                 # default `memory`; other kinds are listed, not set up
//!   pip_dependencies: [honcho-ai==2.2.0]   # installed through hermes-deps
//!   requires_env: [HONCHO_API_KEY]          # must be set for the plugin to be available
//!   external_dependencies:                  # `check` is run (no shell), `install` only shown
//!     - {name: brv, check: "brv --version", install: "curl ... | sh"}
//!   settings:                               # what a setup wizard asks for
//!     - key: api_key                        # [a-z0-9_]+
//!       description: Honcho API key
//!       secret: true                        # secret → written to `.env` under env_var
//!       env_var: HONCHO_API_KEY             # required for secrets
//!       required: true
//!       url: https://app.honcho.dev         # "get yours at"
//!     - key: recall_mode                    # plain → config.yaml `memory.<name>.<key>`
//!       default: hybrid
//!       choices: [hybrid, context, tools]
//! ```
//!
//! The file is shared with the original implementation, so keys this module
//! does not know (`hooks`, `profile_clone`, ...) are ignored, not refused.
//! Files are UTF-8; a leading BOM is tolerated. Validation collects every
//! problem and reports them together.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Error;

/// Environment names a plugin may never ask to set (they would change how
/// Hermes or Python itself runs).
pub const ENV_DENYLIST: [&str; 10] = [
    "PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "HERMES_HOME",
    "HERMES_LAZY_INSTALL_TARGET",
    "HERMES_DISABLE_LAZY_INSTALLS",
    "HERMES_VENV",
    "HOME",
];

/// What a plugin is.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum PluginKind {
    /// A memory provider (the default: the original's manifests omit `kind`).
    #[default]
    Memory,
    /// Anything else, kept by name.
    Other(String),
}

impl From<String> for PluginKind {
    fn from(s: String) -> Self {
        if s.trim().eq_ignore_ascii_case("memory") {
            Self::Memory
        } else {
            Self::Other(s)
        }
    }
}

impl From<PluginKind> for String {
    fn from(k: PluginKind) -> Self {
        k.as_str().to_string()
    }
}

impl PluginKind {
    /// The kind's name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Memory => "memory",
            Self::Other(s) => s,
        }
    }
}

/// A program the plugin needs that pip cannot install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalDependency {
    /// Display name.
    pub name: String,
    /// Command run (no shell) to see whether it is present; exit 0 = present.
    #[serde(default)]
    pub check: String,
    /// Install instructions, shown to the user, never run.
    #[serde(default)]
    pub install: String,
}

/// One setting a setup wizard asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    /// Key, `[a-z0-9_]+`.
    pub key: String,
    /// Prompt text.
    #[serde(default)]
    pub description: String,
    /// A secret: stored in `.env` under `env_var`, shown masked.
    #[serde(default)]
    pub secret: bool,
    /// Environment variable the value is stored under (required for secrets).
    #[serde(default)]
    pub env_var: Option<String>,
    /// Setup is incomplete without it.
    #[serde(default)]
    pub required: bool,
    /// Default value.
    #[serde(default)]
    pub default: Option<String>,
    /// Allowed values (empty = free text).
    #[serde(default)]
    pub choices: Vec<String>,
    /// Where to get the value.
    #[serde(default)]
    pub url: Option<String>,
}

/// A parsed, validated `plugin.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Plugin name.
    pub name: String,
    /// Plugin version.
    #[serde(default)]
    pub version: String,
    /// One-line description.
    #[serde(default)]
    pub description: String,
    /// Plugin kind.
    #[serde(default)]
    pub kind: PluginKind,
    /// Pip specs installed through the installer.
    #[serde(default)]
    pub pip_dependencies: Vec<String>,
    /// Environment variables that must be set.
    #[serde(default)]
    pub requires_env: Vec<String>,
    /// Programs pip cannot install.
    #[serde(default)]
    pub external_dependencies: Vec<ExternalDependency>,
    /// Settings for the setup wizard.
    #[serde(default)]
    pub settings: Vec<Setting>,
}

/// Is `name` a valid plugin name (`[A-Za-z0-9][A-Za-z0-9_-]{0,63}`)?
pub fn valid_plugin_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Is `name` an environment name a plugin may use (`[A-Z_][A-Z0-9_]*`, not denylisted)?
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !ENV_DENYLIST.contains(&name)
}

impl Manifest {
    /// Parses and validates manifest text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, Error> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let invalid = |detail: String| Error::InvalidManifest {
            path: origin.to_path_buf(),
            detail,
        };
        let m: Manifest = yaml_serde::from_str(text).map_err(|e| invalid(e.to_string()))?;
        let problems = m.problems();
        if problems.is_empty() {
            Ok(m)
        } else {
            Err(invalid(problems.join("; ")))
        }
    }

    /// Reads and validates `<dir>/plugin.yaml`.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let path = dir.join("plugin.yaml");
        let bytes = std::fs::read(&path).map_err(|source| Error::ReadManifest {
            path: path.clone(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| Error::InvalidManifest {
            path: path.clone(),
            detail: "not UTF-8".into(),
        })?;
        Self::parse(&text, &path)
    }

    /// Every validation problem, empty when valid.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        if !valid_plugin_name(&self.name) {
            p.push(format!(
                "name `{}` must match `[A-Za-z0-9][A-Za-z0-9_-]{{0,63}}`",
                self.name
            ));
        }
        for spec in &self.pip_dependencies {
            if let Err(why) = hermes_deps::check_spec(spec) {
                p.push(format!("pip dependency `{spec}`: {why}"));
            }
        }
        for env in &self.requires_env {
            if !valid_env_name(env) {
                p.push(format!(
                    "requires_env `{env}` is not an allowed environment name"
                ));
            }
        }
        for dep in &self.external_dependencies {
            if dep.name.trim().is_empty() {
                p.push("external dependency without a name".into());
            }
            if split_command(&dep.check).is_none() {
                p.push(format!(
                    "external dependency `{}`: unbalanced quotes in `check`",
                    dep.name
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for s in &self.settings {
            if s.key.is_empty()
                || !s
                    .key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            {
                p.push(format!("setting key `{}` must match `[a-z0-9_]+`", s.key));
            }
            if !seen.insert(s.key.as_str()) {
                p.push(format!("setting `{}` is declared twice", s.key));
            }
            match &s.env_var {
                Some(e) if !valid_env_name(e) => {
                    p.push(format!(
                        "setting `{}`: env_var `{e}` is not an allowed environment name",
                        s.key
                    ));
                }
                None if s.secret => {
                    p.push(format!("secret setting `{}` needs an `env_var`", s.key))
                }
                _ => {}
            }
            if let Some(d) = &s.default
                && !s.choices.is_empty()
                && !s.choices.contains(d)
            {
                p.push(format!(
                    "setting `{}`: default `{d}` is not one of its choices",
                    s.key
                ));
            }
        }
        p
    }
}

/// Splits a `check` command into argv (POSIX-like: single quotes, double
/// quotes, backslash escapes; no expansion). `None` on unbalanced quotes;
/// an empty command gives an empty argv.
pub fn split_command(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        ch => cur.push(ch),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => cur.push(chars.next()?),
                        ch => cur.push(ch),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(chars.next()?);
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Some(out)
}

/// Origin label for a bundled manifest in errors.
pub fn bundled_origin(name: &str) -> PathBuf {
    PathBuf::from(format!("bundled:{name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\u{feff}name: tiny\nversion: 0.1\ndescription: d\npip_dependencies: ['tiny-sdk>=1,<2']\n\
        requires_env: [TINY_KEY]\nhooks: [on_session_end]\nprofile_clone: true\n\
        external_dependencies:\n  - {name: brv, check: \"brv --version\", install: \"curl x | sh\"}\n\
        settings:\n  - {key: api_key, secret: true, env_var: TINY_KEY, required: true}\n  - {key: mode, default: a, choices: [a, b]}\n";

    #[test]
    fn parses_with_bom_and_unknown_keys() {
        let m = Manifest::parse(GOOD, Path::new("x")).unwrap();
        assert_eq!(m.name, "tiny");
        assert_eq!(m.version, "0.1", "a YAML number is read as text");
        assert_eq!(m.kind, PluginKind::Memory);
        assert_eq!(m.settings.len(), 2);
        assert_eq!(m.external_dependencies[0].check, "brv --version");
    }

    #[test]
    fn collects_every_problem() {
        let bad = "name: ../evil\npip_dependencies: ['x; rm -rf /', 'git+https://h/x']\nrequires_env: [LD_PRELOAD]\n\
            settings:\n  - {key: Key, secret: true}\n  - {key: m, default: z, choices: [a]}\n";
        let e = Manifest::parse(bad, Path::new("/p/plugin.yaml")).unwrap_err();
        let Error::InvalidManifest { detail, .. } = &e else {
            panic!("{e:?}")
        };
        for needle in [
            "name `../evil`",
            "x; rm -rf /",
            "git+https",
            "LD_PRELOAD",
            "`Key`",
            "needs an `env_var`",
            "default `z`",
        ] {
            assert!(detail.contains(needle), "{needle} missing in {detail}");
        }
        assert!(Manifest::parse(": : :", Path::new("p")).is_err());
        assert!(
            Manifest::parse("version: 1\n", Path::new("p")).is_err(),
            "name is required"
        );
    }

    #[test]
    fn splits_commands_like_a_shell() {
        assert_eq!(
            split_command("brv --version").unwrap(),
            vec!["brv", "--version"]
        );
        assert_eq!(
            split_command("a 'b c' \"d\\\"e\" f\\ g").unwrap(),
            vec!["a", "b c", "d\"e", "f g"]
        );
        assert_eq!(split_command("''").unwrap(), vec![""]);
        assert_eq!(split_command("  ").unwrap(), Vec::<String>::new());
        assert_eq!(split_command("'open"), None);
    }

    #[test]
    fn names() {
        assert!(valid_plugin_name("mem0") && valid_plugin_name("my_plugin-2"));
        assert!(!valid_plugin_name("") && !valid_plugin_name("-x") && !valid_plugin_name("a/b"));
        assert!(!valid_plugin_name(&"a".repeat(65)));
        assert!(
            valid_env_name("HONCHO_API_KEY") && !valid_env_name("PATH") && !valid_env_name("lower")
        );
    }
}
