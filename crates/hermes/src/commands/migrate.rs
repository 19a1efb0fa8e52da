//! `hermes migrate check`: the migration report of the data volume (`hermes_diag::migrate`),
//! with what this image brings found here, above the libraries that know it: the agent (and
//! its schema version, from the agent itself), its installed packages, the volume's
//! `lazy-packages/`, and the memory-provider plugins.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use hermes_deps::spec::{normalize_name, package_name};
use hermes_deps::target::installed_distributions;
use hermes_diag::migrate::{self, Image};
use hermes_services::agent;

use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// `hermes migrate check [--json]`: exit 0 when everything carries over, 1 when something
/// needs attention.
pub fn run_check(json_output: bool) -> CommandResult {
    // Read-only: the root is resolved, never created or seeded.
    let root = hermes_home::layout::resolve_root(Context::var)?;
    let image = image(&root);
    let report = migrate::check(&root, &image, &Context::var).map_err(|e| {
        Failure::new(
            e.to_string(),
            Some("point HERMES_HOME at the data volume (in the image: /opt/data)".into()),
        )
    })?;
    if json_output {
        output::json(&report)?;
    } else {
        output::stdout(&migrate::render(&report))?;
    }
    Ok(if report.needs_attention() {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

/// What this image brings, for the volume at `root`.
fn image(root: &Path) -> Image {
    let agent = agent::locate(Context::var);
    // What the agent's interpreter imports: its venv, and `PYTHONPATH`, which the gateways
    // it runs inherit from this environment.
    let agent_packages = agent
        .as_ref()
        .map(|a| {
            let mut dirs = site_packages(&a.python);
            dirs.extend(
                Context::var("PYTHONPATH")
                    .iter()
                    .flat_map(std::env::split_paths)
                    .filter(|p| p.is_absolute()),
            );
            names(&dirs)
        })
        .unwrap_or_default();
    Image {
        agent_installed: agent.is_some(),
        agent_version: agent.as_ref().and_then(|a| a.version.clone()),
        // The one call site of the agent's schema version.
        // Asked of the agent itself, with its `HERMES_HOME` in a private temporary directory:
        // the report writes nothing, and importing the agent would seed the volume.
        agent_schema: agent.as_ref().and_then(|a| {
            hermes_services::agent_probe::probe(a, None)
                .ok()
                .map(|facts| facts.config_version)
        }),
        agent_packages,
        lazy_packages: names(&[root.join("lazy-packages")]),
        memory_providers: memory_providers(root),
    }
}

/// `<venv>/lib/python3.*/site-packages` of the venv whose interpreter is `python`.
fn site_packages(python: &Path) -> Vec<PathBuf> {
    let Some(venv) = python.parent().and_then(Path::parent) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(venv.join("lib")) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The PEP 503 names of the distributions in `dirs`.
fn names(dirs: &[PathBuf]) -> BTreeSet<String> {
    installed_distributions(dirs)
        .into_iter()
        .map(|(name, _)| normalize_name(&name))
        .collect()
}

/// Every memory-provider plugin this image knows (bundled and the volume's `plugins/`), with
/// the distributions its pip dependencies name.
fn memory_providers(root: &Path) -> BTreeMap<String, Vec<String>> {
    hermes_plugins::discover(Some(&hermes_home::layout::plugins_dir(root)))
        .memory_providers()
        .map(|plugin| {
            let packages = plugin
                .manifest
                .pip_dependencies
                .iter()
                .filter_map(|spec| package_name(spec))
                .map(normalize_name)
                .collect();
            (plugin.manifest.name.clone(), packages)
        })
        .collect()
}
