//! Plugin status: dependencies installed, env satisfied, available.
//!
//! A plugin is *available* when every pip dependency is satisfied (checked in
//! a fresh interpreter with the Hermes path order, through hermes-deps), every
//! `requires_env` variable is set and non-empty, and every external
//! dependency's `check` command exits 0. Check commands run without a shell,
//! with a time limit; their `install` hint is shown, never run.

use std::io::Write;
use std::process::Command;
use std::time::Duration;

use serde::Serialize;

use hermes_deps::python::spec_satisfied;
use hermes_deps::spec::package_name;
use hermes_deps::{Environment, InstallOptions};

use crate::Error;
use crate::discovery::{Discovery, Plugin, Source};
use crate::manifest::{ExternalDependency, split_command};

/// Time limit for one external `check` command.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// One pip dependency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DependencyState {
    /// The spec.
    pub spec: String,
    /// Satisfied in a fresh interpreter.
    pub installed: bool,
}

/// One external dependency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExternalState {
    /// Display name.
    pub name: String,
    /// Its `check` command exited 0.
    pub found: bool,
    /// How to install it (shown, never run).
    pub install: String,
}

/// Status of one plugin (a row of `hermes plugins list`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginStatus {
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: String,
    /// Version.
    pub version: String,
    /// Description.
    pub description: String,
    /// Bundled or user.
    pub source: Source,
    /// Pip dependencies.
    pub dependencies: Vec<DependencyState>,
    /// Every pip dependency is satisfied.
    pub dependencies_installed: bool,
    /// `requires_env` variables that are unset or empty.
    pub env_missing: Vec<String>,
    /// External dependencies.
    pub external: Vec<ExternalState>,
    /// Usable right now.
    pub available: bool,
}

/// Runs an external dependency's `check` (no shell). An empty check counts as found.
pub fn run_check(dep: &ExternalDependency, env: &Environment) -> bool {
    let Some(argv) = split_command(&dep.check) else {
        return false;
    };
    let Some((program, args)) = argv.split_first() else {
        return true;
    };
    let mut cmd = Command::new(program);
    cmd.args(args).env_clear().envs(env.child_vars());
    hermes_deps::process::run_captured(&mut cmd, CHECK_TIMEOUT).is_ok_and(|o| o.success)
}

fn status_from(
    plugin: &Plugin,
    versions: &std::collections::BTreeMap<String, Option<String>>,
    env: &Environment,
) -> PluginStatus {
    let m = &plugin.manifest;
    let dependencies: Vec<DependencyState> = m
        .pip_dependencies
        .iter()
        .map(|s| DependencyState {
            spec: s.clone(),
            installed: spec_satisfied(s, versions),
        })
        .collect();
    let env_missing: Vec<String> = m
        .requires_env
        .iter()
        .filter(|v| env.get_nonempty(v).is_none())
        .cloned()
        .collect();
    let external: Vec<ExternalState> = m
        .external_dependencies
        .iter()
        .map(|d| ExternalState {
            name: d.name.clone(),
            found: run_check(d, env),
            install: d.install.clone(),
        })
        .collect();
    let dependencies_installed = dependencies.iter().all(|d| d.installed);
    let available =
        dependencies_installed && env_missing.is_empty() && external.iter().all(|e| e.found);
    PluginStatus {
        name: m.name.clone(),
        kind: m.kind.as_str().to_string(),
        version: m.version.clone(),
        description: m.description.clone(),
        source: plugin.source.clone(),
        dependencies,
        dependencies_installed,
        env_missing,
        external,
        available,
    }
}

/// Status of several plugins with ONE interpreter run. `options.env` is the
/// environment the plugin will see (process env merged with `.env`).
pub fn statuses<'a>(
    plugins: impl IntoIterator<Item = &'a Plugin>,
    options: &InstallOptions,
) -> Result<Vec<PluginStatus>, Error> {
    let plugins: Vec<&Plugin> = plugins.into_iter().collect();
    let mut names: Vec<&str> = plugins
        .iter()
        .flat_map(|p| {
            p.manifest
                .pip_dependencies
                .iter()
                .filter_map(|s| package_name(s))
        })
        .collect();
    names.sort_unstable();
    names.dedup();
    let versions = match options.interpreter() {
        Some(i) => i.installed_versions(&names)?,
        None => Default::default(),
    };
    Ok(plugins
        .iter()
        .map(|p| status_from(p, &versions, &options.env))
        .collect())
}

/// Status of one plugin.
pub fn plugin_status(plugin: &Plugin, options: &InstallOptions) -> Result<PluginStatus, Error> {
    let mut v = statuses([plugin], options)?;
    v.pop().ok_or_else(|| Error::UnknownProvider {
        name: plugin.manifest.name.clone(),
    })
}

/// `hermes plugins list` as data.
pub fn list_plugins(
    discovery: &Discovery,
    options: &InstallOptions,
) -> Result<Vec<PluginStatus>, Error> {
    statuses(&discovery.plugins, options)
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// Plain-text table for `hermes plugins list`.
pub fn render_list(rows: &[PluginStatus], out: &mut dyn Write) -> std::io::Result<()> {
    let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    writeln!(
        out,
        "{:<w$}  {:<6}  {:<4}  {:<3}  {:<9}  SOURCE",
        "NAME", "KIND", "DEPS", "ENV", "AVAILABLE"
    )?;
    for r in rows {
        let source = match &r.source {
            Source::Bundled => "bundled".to_string(),
            Source::User(p) => p.display().to_string(),
        };
        writeln!(
            out,
            "{:<w$}  {:<6}  {:<4}  {:<3}  {:<9}  {source}",
            r.name,
            r.kind,
            yes_no(r.dependencies_installed),
            yes_no(r.env_missing.is_empty()),
            yes_no(r.available),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;
    use std::path::Path;

    fn plugin(text: &str) -> Plugin {
        Plugin {
            manifest: Manifest::parse(text, Path::new("t")).unwrap(),
            source: Source::Bundled,
        }
    }

    #[test]
    fn env_and_external_checks_decide_availability() {
        let p = plugin(
            "name: t\nrequires_env: [T_KEY]\nexternal_dependencies:\n  - {name: sh, check: \"sh -c 'exit 0'\"}\n  - {name: nope, check: hermes-not-a-program, install: get it}\n",
        );
        let env = Environment::from_process().without("T_KEY");
        let o = InstallOptions::new("/nonexistent/h", true, env.clone());
        let s = plugin_status(&p, &o).unwrap();
        assert_eq!(s.env_missing, vec!["T_KEY".to_string()]);
        assert!(s.dependencies_installed, "no pip deps");
        assert_eq!(
            s.external.iter().map(|e| e.found).collect::<Vec<_>>(),
            vec![true, false]
        );
        assert!(!s.available);
        let p2 = plugin("name: t2\nrequires_env: [T_KEY]\n");
        let o = InstallOptions::new("/nonexistent/h", true, env.with("T_KEY", "x"));
        assert!(plugin_status(&p2, &o).unwrap().available);
    }

    #[test]
    fn missing_core_venv_means_dependencies_missing() {
        let p = plugin("name: t\npip_dependencies: [hermes-nothing==1]\n");
        let o = InstallOptions::new("/nonexistent/h", true, Environment::default());
        let s = plugin_status(&p, &o).unwrap();
        assert!(!s.dependencies_installed && !s.available);
        let mut buf = Vec::new();
        render_list(&[s], &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(
            text.contains("t     memory  no    yes  no         bundled"),
            "{text}"
        );
    }
}
