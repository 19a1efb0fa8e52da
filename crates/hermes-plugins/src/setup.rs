//! `hermes memory setup [PROVIDER]` and `hermes memory status`, library side.
//!
//! [`setup_provider`] installs a provider's pip dependencies through the
//! installer (so a sealed image routes to the durable target, and a blocked
//! install reports its reason), checks external dependencies, and returns a
//! [`SetupPlan`]: what the caller must write (secrets for `.env`, values for
//! `config.yaml`) and the provider's availability from a fresh re-check. It
//! writes nothing itself: the caller owns `.env` and `config.yaml`. When the
//! install fails, the plan carries no writes, so a failed setup leaves the
//! configuration untouched.
//!
//! Words: the *active provider* is `memory.provider` from config.yaml; empty,
//! `built-in`, `builtin` and `none` all mean built-in memory only.

use std::collections::BTreeMap;
use std::io::Write;

use serde::Serialize;

use hermes_deps::{Environment, InstallOptions, InstallOutcome, install_specs};

use crate::Error;
use crate::discovery::{Discovery, Plugin};
use crate::manifest::{PluginKind, Setting};
use crate::status::{ExternalState, PluginStatus, plugin_status, statuses};

/// One `KEY=value` for `.env`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvWrite {
    /// Variable name (validated against the manifest rules).
    pub key: String,
    /// Value (CR/LF removed).
    pub value: String,
    /// The value is a secret (mask it when displayed).
    pub secret: bool,
}

/// One `config.yaml` assignment: a key path (`["memory", "provider"]`) and a string value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigWrite {
    /// Key path from the document root.
    pub path: Vec<String>,
    /// Value.
    pub value: String,
}

/// What setup did and what the caller must write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetupPlan {
    /// The provider.
    pub provider: String,
    /// Dependencies installed (or nothing to install) and the writes below are valid.
    pub ok: bool,
    /// The pip dependencies that were missing before the install.
    pub missing_before: Vec<String>,
    /// The dependency install (`ok` with an empty command when nothing was missing).
    pub install: InstallOutcome,
    /// Lines for `.env` (empty when `ok` is false).
    pub env_writes: Vec<EnvWrite>,
    /// Assignments for `config.yaml`, ending with `memory.provider` (empty when `ok` is false).
    pub config_writes: Vec<ConfigWrite>,
    /// External dependencies whose check failed, with their install hints.
    pub external_missing: Vec<ExternalState>,
    /// Required settings with no value given and none in the environment.
    pub missing_settings: Vec<String>,
    /// Availability after the install, as if the env writes were applied.
    pub status: PluginStatus,
}

/// A question for the setup wizard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Question {
    /// The setting.
    pub setting: Setting,
    /// Its env var is already set (the wizard may offer "blank to keep").
    pub already_set: bool,
    /// For secrets already set: `...` + last 4 characters.
    pub current_hint: Option<String>,
}

/// Normalises `memory.provider`: `None` means built-in only.
pub fn active_provider(raw: Option<&str>) -> Option<String> {
    let v = raw?.trim();
    if v.is_empty() || ["built-in", "builtin", "none"].contains(&v.to_ascii_lowercase().as_str()) {
        None
    } else {
        Some(v.to_string())
    }
}

/// Finds a memory provider by name.
pub fn find_provider<'a>(discovery: &'a Discovery, name: &str) -> Result<&'a Plugin, Error> {
    let p = discovery.get(name).ok_or_else(|| Error::UnknownProvider {
        name: name.to_string(),
    })?;
    if p.manifest.kind != PluginKind::Memory {
        return Err(Error::NotAMemoryProvider {
            name: name.to_string(),
            kind: p.manifest.kind.as_str().to_string(),
        });
    }
    Ok(p)
}

/// The questions a wizard should ask for `plugin`, given the current environment.
pub fn questions(plugin: &Plugin, env: &Environment) -> Vec<Question> {
    plugin
        .manifest
        .settings
        .iter()
        .map(|s| {
            let current = s.env_var.as_deref().and_then(|e| env.get_nonempty(e));
            let current_hint = current.filter(|_| s.secret).map(|v| {
                let tail: String = v
                    .chars()
                    .rev()
                    .take(4)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                format!("...{tail}")
            });
            Question {
                setting: s.clone(),
                already_set: current.is_some(),
                current_hint,
            }
        })
        .collect()
}

/// `.env` writes, `config.yaml` writes, required settings still missing.
type PlannedWrites = (Vec<EnvWrite>, Vec<ConfigWrite>, Vec<String>);

fn plan_writes(
    plugin: &Plugin,
    values: &BTreeMap<String, String>,
    env: &Environment,
) -> Result<PlannedWrites, Error> {
    let m = &plugin.manifest;
    if let Some(k) = values
        .keys()
        .find(|k| !m.settings.iter().any(|s| &s.key == *k))
    {
        return Err(Error::InvalidValue {
            key: k.clone(),
            detail: format!("`{}` declares no such setting", m.name),
        });
    }
    let mut env_writes = Vec::new();
    let mut config_writes = Vec::new();
    let mut missing = Vec::new();
    for s in &m.settings {
        let given = values
            .get(&s.key)
            .map(|v| v.replace(['\r', '\n'], ""))
            .filter(|v| !v.trim().is_empty());
        if let Some(v) = &given
            && !s.choices.is_empty()
            && !s.choices.contains(v)
        {
            return Err(Error::InvalidValue {
                key: s.key.clone(),
                detail: format!("`{v}` is not one of {}", s.choices.join(", ")),
            });
        }
        let in_env = s
            .env_var
            .as_deref()
            .is_some_and(|e| env.get_nonempty(e).is_some());
        match (&given, &s.env_var) {
            (Some(v), Some(e)) => {
                env_writes.push(EnvWrite {
                    key: e.clone(),
                    value: v.clone(),
                    secret: s.secret,
                });
                if !s.secret {
                    config_writes.push(ConfigWrite {
                        path: vec!["memory".into(), m.name.clone(), s.key.clone()],
                        value: v.clone(),
                    });
                }
            }
            (Some(v), None) => {
                config_writes.push(ConfigWrite {
                    path: vec!["memory".into(), m.name.clone(), s.key.clone()],
                    value: v.clone(),
                });
            }
            (None, _) if s.required && !in_env => missing.push(s.key.clone()),
            (None, _) => {}
        }
    }
    config_writes.push(ConfigWrite {
        path: vec!["memory".into(), "provider".into()],
        value: m.name.clone(),
    });
    Ok((env_writes, config_writes, missing))
}

/// The pip dependencies of `plugin` missing now (in a fresh interpreter), and their install
/// through the installer (`ok` with an empty command when nothing was missing).
fn install_missing(
    plugin: &Plugin,
    options: &InstallOptions,
) -> Result<(Vec<String>, InstallOutcome), Error> {
    let before = plugin_status(plugin, options)?;
    let missing: Vec<String> = before
        .dependencies
        .iter()
        .filter(|d| !d.installed)
        .map(|d| d.spec.clone())
        .collect();
    let install = if missing.is_empty() {
        InstallOutcome {
            ok: true,
            ..InstallOutcome::default()
        }
    } else {
        install_specs(&missing, options)
    };
    Ok((missing, install))
}

/// What [`install_provider`] did: the dependency install alone, nothing activated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstallReport {
    /// The provider.
    pub provider: String,
    /// The pip dependencies that were missing before.
    pub missing_before: Vec<String>,
    /// The install (`ok` with an empty command when nothing was missing).
    pub install: InstallOutcome,
    /// Availability checked afresh after the install.
    pub status: PluginStatus,
}

/// Installs a memory provider's missing pip dependencies through the installer (the same
/// routing and refusals as `hermes memory setup`), then checks its availability afresh.
/// Writes no configuration.
pub fn install_provider(
    discovery: &Discovery,
    name: &str,
    options: &InstallOptions,
) -> Result<InstallReport, Error> {
    let plugin = find_provider(discovery, name)?;
    let (missing_before, install) = install_missing(plugin, options)?;
    let status = plugin_status(plugin, options)?;
    Ok(InstallReport {
        provider: name.to_string(),
        missing_before,
        install,
        status,
    })
}

/// One step of an install or a setup, as a result row: what was done, whether it went well,
/// what came of it, and what to do when it did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    /// What the step is (`dependencies`, `install`, `re-check`, `external <name>`, …).
    pub step: String,
    /// It succeeded (or found what it looked for).
    pub ok: bool,
    /// What came of it, in one line.
    pub detail: String,
    /// What to do about a failure.
    pub hint: Option<String>,
    /// The installer's error output, on a failed install.
    pub output: String,
}

impl Step {
    fn new(step: impl Into<String>, ok: bool, detail: impl Into<String>) -> Self {
        Self {
            step: step.into(),
            ok,
            detail: detail.into(),
            hint: None,
            output: String::new(),
        }
    }

    fn hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

/// The result rows of a dependency install: what was missing, the installer's run (or its
/// refusal), the re-check in a fresh interpreter, external dependencies, unset variables,
/// and the availability that follows.
fn install_steps(missing: &[String], install: &InstallOutcome, status: &PluginStatus) -> Vec<Step> {
    let mut steps = vec![Step::new(
        "dependencies",
        true,
        match (status.dependencies.len(), missing.is_empty()) {
            (0, _) => "no pip dependencies declared".to_string(),
            (n, true) => format!("all {n} already installed"),
            (_, false) => format!("missing: {}", missing.join(", ")),
        },
    )];
    if !missing.is_empty() {
        steps.push(install_step(install));
    }
    if !missing.is_empty() && install.ok {
        steps.push(recheck_step(install));
    }
    for external in &status.external {
        let step = format!("external {}", external.name);
        steps.push(if external.found {
            Step::new(step, true, "found")
        } else {
            Step::new(
                step,
                false,
                "not found (Hermes does not run install commands)",
            )
            .hint(Some(format!("install it with: {}", external.install)))
        });
    }
    if !status.env_missing.is_empty() {
        steps.push(
            Step::new(
                "environment",
                false,
                format!("not set: {}", status.env_missing.join(", ")),
            )
            .hint(Some("set them in the profile's `.env`".into())),
        );
    }
    steps.push(Step::new(
        "available",
        status.available,
        if status.available {
            "available"
        } else {
            "not available"
        },
    ));
    steps
}

fn install_step(install: &InstallOutcome) -> Step {
    let detail = match (install.ok, install.blocked) {
        (true, _) => format!("ran: {}", install.command),
        (false, true) => format!("blocked: {}", install.reason),
        (false, false) => format!("failed: {}", install.reason),
    };
    let mut step = Step::new("install", install.ok, detail).hint(install.hint.clone());
    if !install.ok {
        step.output = install.stderr.trim_end().to_string();
    }
    step
}

fn recheck_step(install: &InstallOutcome) -> Step {
    match (&install.recheck_error, install.still_missing.is_empty()) {
        (Some(e), _) => Step::new("re-check", false, format!("could not check: {e}")),
        (None, true) => Step::new("re-check", true, "importable in a fresh interpreter"),
        (None, false) => Step::new(
            "re-check",
            false,
            format!("still missing: {}", install.still_missing.join(", ")),
        ),
    }
}

impl InstallReport {
    /// The install's result rows, one per step.
    pub fn steps(&self) -> Vec<Step> {
        install_steps(&self.missing_before, &self.install, &self.status)
    }
}

/// Sets up a memory provider: validates `values` (setting key → value),
/// installs missing pip dependencies through the installer, runs external
/// checks, and returns what to write plus post-install availability.
pub fn setup_provider(
    discovery: &Discovery,
    name: &str,
    values: &BTreeMap<String, String>,
    options: &InstallOptions,
) -> Result<SetupPlan, Error> {
    let plugin = find_provider(discovery, name)?;
    let (env_writes, config_writes, missing_settings) = plan_writes(plugin, values, &options.env)?;
    let (missing_before, install) = install_missing(plugin, options)?;
    // Re-check in a fresh interpreter, seeing the env as it will be once written.
    let mut after_opts = options.clone();
    for w in &env_writes {
        after_opts.env = after_opts.env.with(&w.key, &w.value);
    }
    let status = plugin_status(plugin, &after_opts)?;
    let external_missing = status
        .external
        .iter()
        .filter(|e| !e.found)
        .cloned()
        .collect();
    let ok = install.ok;
    Ok(SetupPlan {
        provider: name.to_string(),
        ok,
        missing_before,
        install,
        env_writes: if ok { env_writes } else { Vec::new() },
        config_writes: if ok { config_writes } else { Vec::new() },
        external_missing,
        missing_settings,
        status,
    })
}

impl SetupPlan {
    /// The setup's result rows, one per step: the install's, then the activation (the
    /// caller applies the writes only when `ok`).
    pub fn steps(&self) -> Vec<Step> {
        let mut steps = install_steps(&self.missing_before, &self.install, &self.status);
        if !self.missing_settings.is_empty() {
            steps.push(
                Step::new(
                    "settings",
                    false,
                    format!("required, not set: {}", self.missing_settings.join(", ")),
                )
                .hint(Some(format!(
                    "set them with `hermes memory setup {}`",
                    self.provider
                ))),
            );
        }
        steps.push(if self.ok {
            Step::new(
                "activate",
                true,
                format!("memory.provider = {}", self.provider),
            )
        } else {
            Step::new("activate", false, "not activated; nothing was saved")
        });
        steps
    }

    /// Plain-text report (secrets masked).
    pub fn render(&self, out: &mut dyn Write) -> std::io::Result<()> {
        if !self.install.command.is_empty() || !self.install.ok {
            self.install.render(out)?;
        }
        if !self.ok {
            writeln!(
                out,
                "memory provider `{}` was not activated; nothing was saved",
                self.provider
            )?;
            return Ok(());
        }
        for e in &self.external_missing {
            writeln!(
                out,
                "warning: `{}` not found; install it with: {}",
                e.name, e.install
            )?;
        }
        for w in &self.env_writes {
            let shown = if w.secret {
                "********"
            } else {
                w.value.as_str()
            };
            writeln!(out, ".env: {}={shown}", w.key)?;
        }
        for c in &self.config_writes {
            writeln!(out, "config.yaml: {} = {}", c.path.join("."), c.value)?;
        }
        if !self.missing_settings.is_empty() {
            writeln!(
                out,
                "missing settings: {}",
                self.missing_settings.join(", ")
            )?;
        }
        writeln!(
            out,
            "memory provider: {} ({})",
            self.provider,
            if self.status.available {
                "available"
            } else {
                "not available"
            }
        )
    }
}

/// `hermes memory status` as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryStatus {
    /// The active provider; `None` = built-in only.
    pub active: Option<String>,
    /// The active provider names no known plugin.
    pub active_unknown: bool,
    /// Status of the active provider.
    pub provider: Option<PluginStatus>,
    /// Every memory provider, with availability.
    pub installed: Vec<PluginStatus>,
}

/// Computes `hermes memory status`. `raw_active` is `memory.provider` as read from config.yaml.
pub fn memory_status(
    discovery: &Discovery,
    raw_active: Option<&str>,
    options: &InstallOptions,
) -> Result<MemoryStatus, Error> {
    let active = active_provider(raw_active);
    let installed = statuses(discovery.memory_providers(), options)?;
    let provider = active
        .as_deref()
        .and_then(|a| installed.iter().find(|s| s.name == a))
        .cloned();
    Ok(MemoryStatus {
        active_unknown: active.is_some() && provider.is_none(),
        active,
        provider,
        installed,
    })
}

impl MemoryStatus {
    /// Plain-text rendering.
    pub fn render(&self, out: &mut dyn Write) -> std::io::Result<()> {
        match (&self.active, &self.provider) {
            (None, _) => writeln!(out, "provider: (none, built-in only)")?,
            (Some(a), None) => {
                writeln!(out, "provider: {a} (not found: run `hermes plugins list`)")?
            }
            (Some(a), Some(p)) => {
                writeln!(out, "provider: {a}")?;
                writeln!(
                    out,
                    "status:   {}",
                    if p.available {
                        "available"
                    } else {
                        "not available"
                    }
                )?;
                for d in p.dependencies.iter().filter(|d| !d.installed) {
                    writeln!(
                        out,
                        "missing:  pip {} (run `hermes memory setup {a}`)",
                        d.spec
                    )?;
                }
                for e in &p.env_missing {
                    writeln!(out, "missing:  env {e} (set it in `.env`)")?;
                }
                for e in p.external.iter().filter(|e| !e.found) {
                    writeln!(out, "missing:  {} (install: {})", e.name, e.install)?;
                }
            }
        }
        writeln!(out, "installed providers:")?;
        for p in &self.installed {
            let mark = if self.active.as_deref() == Some(p.name.as_str()) {
                "  <- active"
            } else {
                ""
            };
            writeln!(
                out,
                "  {} ({}){mark}",
                p.name,
                if p.available {
                    "available"
                } else {
                    "not available"
                }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::discover;

    #[test]
    fn active_provider_normalisation() {
        for raw in [
            None,
            Some(""),
            Some(" built-in "),
            Some("builtin"),
            Some("None"),
        ] {
            assert_eq!(active_provider(raw), None, "{raw:?}");
        }
        assert_eq!(active_provider(Some("honcho")).as_deref(), Some("honcho"));
    }

    #[test]
    fn writes_are_planned_from_settings() {
        let d = discover(None);
        let p = find_provider(&d, "honcho").unwrap();
        let mut values = BTreeMap::new();
        values.insert("api_key".to_string(), "sk-123\n".to_string());
        values.insert("recall_mode".to_string(), "tools".to_string());
        let (env, cfg, missing) = plan_writes(p, &values, &Environment::default()).unwrap();
        assert_eq!(
            env,
            vec![EnvWrite {
                key: "HONCHO_API_KEY".into(),
                value: "sk-123".into(),
                secret: true
            }]
        );
        assert!(cfg.contains(&ConfigWrite {
            path: vec!["memory".into(), "honcho".into(), "recall_mode".into()],
            value: "tools".into()
        }));
        assert_eq!(
            cfg.last().unwrap().path,
            vec!["memory".to_string(), "provider".to_string()]
        );
        assert!(missing.is_empty());

        let (_, _, missing) = plan_writes(p, &BTreeMap::new(), &Environment::default()).unwrap();
        assert_eq!(missing, vec!["api_key".to_string()]);
        let (_, _, missing) = plan_writes(
            p,
            &BTreeMap::new(),
            &Environment::default().with("HONCHO_API_KEY", "x"),
        )
        .unwrap();
        assert!(missing.is_empty(), "already in the environment");

        values.insert("recall_mode".to_string(), "bogus".to_string());
        assert!(matches!(
            plan_writes(p, &values, &Environment::default()),
            Err(Error::InvalidValue { .. })
        ));
        let mut unknown = BTreeMap::new();
        unknown.insert("nope".to_string(), "x".to_string());
        assert!(matches!(
            plan_writes(p, &unknown, &Environment::default()),
            Err(Error::InvalidValue { .. })
        ));
    }

    #[test]
    fn questions_mask_current_secrets() {
        let d = discover(None);
        let p = find_provider(&d, "mem0").unwrap();
        let q = questions(
            p,
            &Environment::default().with("MEM0_API_KEY", "abcdef1234"),
        );
        assert!(q[0].already_set);
        assert_eq!(q[0].current_hint.as_deref(), Some("...1234"));
        assert!(!q[1].already_set && q[1].current_hint.is_none());
    }

    #[test]
    fn unknown_provider_and_blocked_setup() {
        let d = discover(None);
        assert!(matches!(
            find_provider(&d, "nope"),
            Err(Error::UnknownProvider { .. })
        ));
        let env = Environment::default()
            .with("HERMES_DISABLE_LAZY_INSTALLS", "1")
            .with("HERMES_VENV", "/nonexistent/v");
        let o = InstallOptions::new("/nonexistent/h", true, env);
        let mut values = BTreeMap::new();
        values.insert("api_key".to_string(), "k".to_string());
        let plan = setup_provider(&d, "mem0", &values, &o).unwrap();
        assert!(!plan.ok && plan.install.blocked);
        assert!(plan.install.reason.contains("HERMES_LAZY_INSTALL_TARGET"));
        assert!(
            plan.env_writes.is_empty() && plan.config_writes.is_empty(),
            "failed setup writes nothing"
        );
        let mut buf = Vec::new();
        plan.render(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(
            text.contains("error: runtime installs are disabled")
                && text.contains("nothing was saved"),
            "{text}"
        );
    }

    #[test]
    fn a_blocked_install_says_why_in_its_rows_and_activates_nothing() {
        let d = discover(None);
        let env = Environment::default()
            .with("HERMES_DISABLE_LAZY_INSTALLS", "1")
            .with("HERMES_VENV", "/nonexistent/v");
        let o = InstallOptions::new("/nonexistent/h", true, env);
        let report = install_provider(&d, "mem0", &o).unwrap();
        assert!(report.install.blocked && !report.status.available);
        let steps = report.steps();
        let names: Vec<&str> = steps.iter().map(|s| s.step.as_str()).collect();
        assert_eq!(
            names,
            ["dependencies", "install", "environment", "available"]
        );
        let install = &steps[1];
        assert!(
            !install.ok && install.detail.starts_with("blocked: "),
            "{install:?}"
        );
        assert!(
            install
                .hint
                .as_deref()
                .is_some_and(|h| h.contains("HERMES_LAZY_INSTALL_TARGET")),
            "{install:?}"
        );
        assert!(steps[0].detail.starts_with("missing: "), "{:?}", steps[0]);

        let plan = setup_provider(&d, "mem0", &BTreeMap::new(), &o).unwrap();
        let rows = plan.steps();
        let last = rows.last().unwrap();
        assert_eq!((last.step.as_str(), last.ok), ("activate", false));
        assert!(
            rows.iter().any(|r| r.step == "settings" && !r.ok),
            "{rows:?}"
        );
    }

    #[test]
    fn a_provider_without_dependencies_needs_no_install_step() {
        let dir = tempfile::tempdir().unwrap();
        let plugin = dir.path().join("bare");
        std::fs::create_dir_all(&plugin).unwrap();
        std::fs::write(
            plugin.join("plugin.yaml"),
            "name: bare\nversion: 0.1.0\ndescription: no deps\nkind: memory\n",
        )
        .unwrap();
        let d = discover(Some(dir.path()));
        let o = InstallOptions::new("/nonexistent/h", true, Environment::default());
        let report = install_provider(&d, "bare", &o).unwrap();
        assert!(report.install.ok && report.install.command.is_empty());
        let steps = report.steps();
        assert_eq!(steps.len(), 2, "{steps:?}");
        assert_eq!(steps[0].detail, "no pip dependencies declared");
        assert!(steps[1].ok && steps[1].step == "available");
        assert!(matches!(
            install_provider(&d, "nope", &o),
            Err(Error::UnknownProvider { .. })
        ));
    }

    #[test]
    fn memory_status_reports_active_and_missing() {
        let d = discover(None);
        let o = InstallOptions::new("/nonexistent/h", true, Environment::default());
        let s = memory_status(&d, Some("honcho"), &o).unwrap();
        assert_eq!(s.active.as_deref(), Some("honcho"));
        let p = s.provider.as_ref().unwrap();
        assert!(!p.available);
        assert_eq!(p.env_missing, vec!["HONCHO_API_KEY".to_string()]);
        let mut buf = Vec::new();
        s.render(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(
            text.contains("missing:  env HONCHO_API_KEY")
                && text.contains("honcho (not available)  <- active"),
            "{text}"
        );
        assert!(memory_status(&d, Some("ghost"), &o).unwrap().active_unknown);
    }
}
