//! `hermes migrate check`: what of a data volume written by the original (any release) carries
//! over to this image, and what needs an action first. Strictly read-only: files are read, never
//! written, locked, repaired or copied aside; `state.db` is opened read-only; nothing behind a
//! symlink that leaves the volume is read ([`inside`]).
//!
//! Per profile (the root is `default`; `profiles/<name>/` with a `SOUL.md` are the others,
//! [`hermes_home::profile::list`]): its config schema, credentials (`.env` key *names*,
//! `auth.json` providers — never a value), sessions (`state.db`), memories, skills, cron jobs,
//! messaging platforms and whether their package is installed ([`platforms`]), the API
//! server's port, and the memory provider. Volume-wide: multiplexing, ports shared between
//! profiles, and whether the installed agent is older than the volume.
//!
//! What the image has is the caller's to find out ([`Image`]): the installed agent's schema
//! version comes from the agent itself, its packages and the plugins' pip packages from the
//! crates above this one. Every result is a [`Finding`]: `ok` (carries over) or `attention`
//! (will not, or needs an action, named in `action`); the command exits 1 when any finding
//! needs attention.
//!
//! `--json` prints [`MigrationReport`]; its shape is documented in `docs/diagnostics.md` and
//! versioned by [`FORMAT_VERSION`].

pub mod inside;
pub mod platforms;
mod profile;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use hermes_home::config::Config;
use hermes_home::{layout, multiplex};
use hermes_settings::{ProfileFiles, Scope};
use serde::Serialize;

pub use profile::{
    ApiServerFacts, ConfigFacts, Credentials, CronFacts, FileCount, MemoryProviderFacts,
    ProfileReport, SessionFacts,
};

/// The version of the `--json` document; raised when a field changes meaning or goes away
/// (new fields may appear without it).
pub const FORMAT_VERSION: u32 = 1;

/// What this image brings, found by the caller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Image {
    /// The installed agent's version, `None` when no agent is installed.
    pub agent_version: Option<String>,
    /// Whether an agent is installed at all.
    pub agent_installed: bool,
    /// The installed agent's config schema (its `DEFAULT_CONFIG["_config_version"]`); `None`
    /// when no agent is installed or it could not be asked.
    pub agent_schema: Option<u64>,
    /// Distributions installed in the agent's environment (PEP 503 names).
    pub agent_packages: BTreeSet<String>,
    /// Distributions in the volume's `lazy-packages/` (PEP 503 names).
    pub lazy_packages: BTreeSet<String>,
    /// The memory providers this image knows, each with the distributions it needs.
    pub memory_providers: BTreeMap<String, Vec<String>>,
}

impl Image {
    /// Where distribution `name` is installed: `agent`, `lazy-packages`, or `None`.
    pub fn installed_in(&self, name: &str) -> Option<&'static str> {
        if self.agent_packages.contains(name) {
            Some("agent")
        } else if self.lazy_packages.contains(name) {
            Some("lazy-packages")
        } else {
            None
        }
    }
}

/// How one finding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Carries over as it is.
    Ok,
    /// Will not carry over, or needs an action first.
    Attention,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// How it stands.
    pub status: Status,
    /// What it is about: `config`, `credentials`, `sessions`, `memories`, `skills`, `cron`,
    /// `platforms`, `api_server`, `plugins`, `volume`, `agent`, `multiplex`, `ports`.
    pub area: &'static str,
    /// What was found, one line.
    pub message: String,
    /// What to do, for `attention`.
    pub action: Option<String>,
}

impl Finding {
    pub(crate) fn ok(area: &'static str, message: impl Into<String>) -> Finding {
        Finding {
            status: Status::Ok,
            area,
            message: message.into(),
            action: None,
        }
    }

    pub(crate) fn attention(
        area: &'static str,
        message: impl Into<String>,
        action: impl Into<String>,
    ) -> Finding {
        Finding {
            status: Status::Attention,
            area,
            message: message.into(),
            action: Some(action.into()),
        }
    }
}

/// The agent of this image, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentFacts {
    /// Whether one is installed.
    pub installed: bool,
    /// Its version.
    pub version: Option<String>,
    /// Its config schema.
    pub schema: Option<u64>,
}

/// Whether one gateway served every profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MultiplexFacts {
    /// On or off as configured; `None` when nothing says (the agent's default applies).
    pub on: Option<bool>,
    /// Where it was set: `environment` (the process or the root `.env`), `config.yaml`,
    /// `default`.
    pub source: &'static str,
}

/// The whole report (`hermes migrate check --json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrationReport {
    /// [`FORMAT_VERSION`].
    pub format: u32,
    /// The volume (`HERMES_HOME`).
    pub root: PathBuf,
    /// `ok` when nothing needs attention, else `attention`.
    pub verdict: Status,
    /// How many findings need attention.
    pub attention: usize,
    /// This image's agent.
    pub agent: AgentFacts,
    /// The highest config schema of the volume's profiles, if any has one.
    pub volume_schema: Option<u64>,
    /// Whether the installed agent is older than the volume (`None`: not known).
    pub agent_older_than_volume: Option<bool>,
    /// Multiplexing as the volume's root configuration (and the environment) set it.
    pub multiplex: MultiplexFacts,
    /// The volume-wide findings.
    pub findings: Vec<Finding>,
    /// Each profile, `default` first.
    pub profiles: Vec<ProfileReport>,
}

impl MigrationReport {
    /// Whether anything needs attention (the command then exits 1).
    pub fn needs_attention(&self) -> bool {
        self.attention > 0
    }
}

/// Why the volume could not be looked at, at all.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The root cannot be resolved or listed.
    #[error("cannot read the data volume `{}`: {reason}", path.display())]
    Root {
        /// The root.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// Checks the volume at `root` against `image`; `var` reads the process environment (for
/// `GATEWAY_MULTIPLEX_PROFILES`, which the root `.env` overrides, as the original loads it).
///
/// # Errors
///
/// [`CheckError`] only when the root itself cannot be read; everything below it is a finding.
pub fn check(
    root: &Path,
    image: &Image,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<MigrationReport, CheckError> {
    let root_error = |reason: String| CheckError::Root {
        path: root.to_path_buf(),
        reason,
    };
    let volume = inside::Volume::open(root).map_err(|e| root_error(e.to_string()))?;
    let entries =
        hermes_home::profile::list(volume.root()).map_err(|e| root_error(e.to_string()))?;

    let (multiplex, mut findings) = multiplex_facts(&volume, var);
    let multiplexed = multiplex.on == Some(true);
    let profiles: Vec<ProfileReport> = entries
        .iter()
        .map(|entry| {
            profile::collect(
                &volume,
                entry.profile.name(),
                &entry.dir,
                image,
                multiplexed,
            )
        })
        .collect();

    let volume_schema = profiles.iter().filter_map(|p| p.config.schema).max();
    let agent_older_than_volume = match (image.agent_schema, volume_schema) {
        (Some(agent), Some(volume)) => Some(agent < volume),
        _ => None,
    };
    findings.push(agent_finding(image, volume_schema, agent_older_than_volume));
    findings.extend(port_findings(&profiles, multiplexed));
    findings.extend(api_server_package(&profiles, image));

    let attention = findings
        .iter()
        .chain(profiles.iter().flat_map(|p| &p.findings))
        .filter(|f| f.status == Status::Attention)
        .count();
    Ok(MigrationReport {
        format: FORMAT_VERSION,
        root: volume.root().to_path_buf(),
        verdict: if attention == 0 {
            Status::Ok
        } else {
            Status::Attention
        },
        attention,
        agent: AgentFacts {
            installed: image.agent_installed,
            version: image.agent_version.clone(),
            schema: image.agent_schema,
        },
        volume_schema,
        agent_older_than_volume,
        multiplex,
        findings,
        profiles,
    })
}

/// Multiplexing from the root `.env` over `var`, then the root `config.yaml`
/// ([`multiplex::configured`]); a root file that cannot be read is a finding.
fn multiplex_facts(
    volume: &inside::Volume,
    var: &dyn Fn(&str) -> Option<String>,
) -> (MultiplexFacts, Vec<Finding>) {
    let root = volume.root();
    let config = profile::read_config(volume, &layout::config_path(root))
        .ok()
        .flatten()
        .unwrap_or_else(|| Config::empty(&layout::config_path(root)));
    let dotenv = profile::read_dotenv(volume, &layout::env_path(root))
        .ok()
        .flatten()
        .unwrap_or_default();
    let files = ProfileFiles::from_parts(
        dotenv,
        config,
        Scope::Default,
        hermes_settings::process_through(var),
    );
    let facts = match multiplex::configured(files.config(), &files.lookup_with(var)) {
        Some((on, source)) => MultiplexFacts {
            on: Some(on),
            source: source.as_str(),
        },
        None => MultiplexFacts {
            on: None,
            source: "default",
        },
    };
    let finding = match facts.on {
        Some(true) => Finding::ok(
            "multiplex",
            format!(
                "multiplexed ({}): one gateway serves every profile, under the agent engine and \
                 the native one",
                facts.source
            ),
        ),
        Some(false) => Finding::ok(
            "multiplex",
            format!(
                "not multiplexed ({}): one gateway per profile",
                facts.source
            ),
        ),
        None => Finding::ok(
            "multiplex",
            "multiplexing not set: the installed agent's default applies (off in 0.19 and 0.20, \
             on since 0.21; off for the native gateway)",
        ),
    };
    (facts, vec![finding])
}

/// Whether the installed agent can run on a volume of `volume_schema`.
fn agent_finding(image: &Image, volume_schema: Option<u64>, older: Option<bool>) -> Finding {
    let version = image
        .agent_version
        .as_deref()
        .unwrap_or("(unknown version)");
    match (
        image.agent_installed,
        image.agent_schema,
        volume_schema,
        older,
    ) {
        (false, _, _, _) => Finding::ok(
            "agent",
            "no hermes-agent in this image: the native gateway serves every profile",
        ),
        (true, Some(agent), Some(volume), Some(true)) => Finding::attention(
            "agent",
            format!(
                "the volume is at config schema {volume}, newer than this image's hermes-agent \
                 {version} (schema {agent}): it will not start on this volume"
            ),
            "use an image whose agent is at least as new as the one that wrote the volume \
             (build argument HERMES_AGENT_SOURCE), or set HERMES_ALLOW_AGENT_DOWNGRADE=1 at \
             your own risk",
        ),
        (true, Some(agent), Some(volume), _) if agent > volume => Finding::ok(
            "agent",
            format!(
                "hermes-agent {version} (schema {agent}) is newer than the volume (schema \
                 {volume}): the boot migrates each config.yaml after copying it aside"
            ),
        ),
        (true, Some(agent), Some(_), _) => Finding::ok(
            "agent",
            format!("hermes-agent {version} is at the volume's schema ({agent})"),
        ),
        (true, Some(agent), None, _) => Finding::ok(
            "agent",
            format!("hermes-agent {version} (schema {agent}); no profile records a schema"),
        ),
        (true, None, _, _) => Finding::attention(
            "agent",
            format!("hermes-agent {version} did not say its config schema"),
            "run `hermes doctor`; the agent's Python may be broken",
        ),
    }
}

/// The agent's API server platform imports `aiohttp`, which the agent's own package does not
/// always bring (0.19.0 has it in its `messaging` extra only): without it the agent's gateway
/// logs "API Server: aiohttp not installed" and refuses every client. Said once, when a
/// profile's API server is on and the agent (the engine wherever it is installed) lacks it.
fn api_server_package(profiles: &[ProfileReport], image: &Image) -> Option<Finding> {
    let serving = profiles.iter().any(|p| p.api_server.enabled);
    if !serving || !image.agent_installed || image.installed_in("aiohttp").is_some() {
        return None;
    }
    Some(Finding::attention(
        "api_server",
        "the agent's API server needs `aiohttp`, which is not installed in the agent's \
         environment: its gateway would start without it",
        "install it into the agent's environment (`<agent venv>/bin/pip install aiohttp`, or \
         the agent with its `messaging` extra), or run the native engine \
         (`gateway.engine: native`)",
    ))
}

/// Two profiles whose API servers would listen on one port (without multiplexing, where every
/// gateway binds its own).
fn port_findings(profiles: &[ProfileReport], multiplexed: bool) -> Vec<Finding> {
    let mut by_port: BTreeMap<u16, Vec<&str>> = BTreeMap::new();
    for p in profiles.iter().filter(|p| p.api_server.enabled) {
        by_port.entry(p.api_server.port).or_default().push(&p.name);
    }
    let shared: Vec<_> = by_port
        .iter()
        .filter(|(_, names)| names.len() > 1)
        .collect();
    if shared.is_empty() {
        return Vec::new();
    }
    if multiplexed {
        return vec![Finding::ok(
            "ports",
            "several profiles name one API port; multiplexed, the default profile's gateway \
             serves them all on its port",
        )];
    }
    shared
        .into_iter()
        .map(|(port, names)| {
            Finding::attention(
                "ports",
                format!(
                    "profiles {} all serve their API on port {port}: only one gateway can bind it",
                    names.join(", ")
                ),
                "set a distinct API_SERVER_PORT in each profile's .env, or multiplex \
                 (gateway.multiplex_profiles: true in the root config.yaml)",
            )
        })
        .collect()
}

/// The report as text: the volume-wide findings, then each profile's, then the verdict.
pub fn render(report: &MigrationReport) -> String {
    let mut out = format!("hermes migrate check — `{}`\n", report.root.display());
    let line = |out: &mut String, f: &Finding| {
        let mark = match f.status {
            Status::Ok => "✓",
            Status::Attention => "✗",
        };
        out.push_str(&format!("  {mark} {:<11} {}\n", f.area, f.message));
        if let Some(action) = &f.action {
            out.push_str(&format!("      action: {action}\n"));
        }
    };
    out.push_str("volume\n");
    for f in &report.findings {
        line(&mut out, f);
    }
    for p in &report.profiles {
        out.push_str(&format!("profile `{}` ({})\n", p.name, p.dir.display()));
        for f in &p.findings {
            line(&mut out, f);
        }
    }
    out.push_str(&match report.attention {
        0 => "nothing is lost: everything carries over\n".to_string(),
        1 => "1 finding needs attention before switching images\n".to_string(),
        n => format!("{n} findings need attention before switching images\n"),
    });
    out
}

#[cfg(test)]
mod tests;
