//! `hermes version`, `hermes dump` and `hermes doctor`: what support needs to know.

use hermes_diag::doctor::{self, Check};
use hermes_diag::dump::{self, AgentView, SupervisorView};
use hermes_diag::{BuildIdentity, Install};
use serde_json::json;

use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

fn identity_and_install() -> (BuildIdentity, Install) {
    let install = Install::current();
    (BuildIdentity::current(install.dir.as_deref()), install)
}

/// The original agent whose commands are handed over, for `version` and `dump`.
fn agent_view() -> AgentView {
    match crate::commands::handoff::installed() {
        Some(agent) => AgentView::Installed {
            version: agent.version,
            cli: agent.cli.display().to_string(),
        },
        None => AgentView::NotInstalled,
    }
}

/// The one-line banner: `hermes 0.1.0 · build abcdef12`.
pub fn banner() -> String {
    let (identity, _) = identity_and_install();
    format!(
        "hermes {} · build {}\n",
        identity.version,
        identity.short_sha()
    )
}

/// `hermes version` / `hermes --version`.
pub fn run_version(json_output: bool) -> CommandResult {
    let (identity, install) = identity_and_install();
    let agent = agent_view();
    let dir = install
        .dir
        .as_ref()
        .map_or_else(|| "(unknown)".to_string(), |d| d.display().to_string());
    if json_output {
        output::json(&json!({
            "version": identity.version,
            "build": { "sha": identity.sha, "short": identity.short_sha(), "source": identity.source },
            "install": { "method": install.method, "dir": install.dir },
            "upgrade": install.method.upgrade_advice(),
            "agent": agent,
        }))?;
    } else {
        output::stdout(&format!(
            "hermes {}\nbuild:           {}\ninstall method:  {}\ninstall dir:     {dir}\nupgrade:         {}\nhermes-agent:    {}\n",
            identity.label(),
            identity.short_sha(),
            install.method.as_str(),
            install.method.upgrade_advice(),
            agent.label(),
        ))?;
    }
    Ok(ExitStatus::Success)
}

/// `hermes dump`.
pub fn run_dump(ctx: &Context, json_output: bool) -> CommandResult {
    let home = ctx.home()?;
    let (identity, install) = identity_and_install();
    let report = dump::collect(
        &home,
        &Context::var,
        &identity,
        &install,
        supervisor_view(&home),
        agent_view(),
    );
    if json_output {
        output::json(&report)?;
    } else {
        output::stdout(&dump::render(&report))?;
    }
    Ok(ExitStatus::Success)
}

/// Installer and memory-provider rows. Skipped when the config does not parse (that is
/// already a ✗ above, and we cannot know whether installs are switched off).
fn plugin_checks(home: &hermes_home::Home) -> Vec<Check> {
    let Ok(options) = crate::commands::plugins::install_options(home) else {
        return Vec::new();
    };
    let raw = hermes_home::config::Config::load(&home.config_path())
        .ok()
        .and_then(|c| c.string("memory.provider", &|_| None));
    let disc = hermes_plugins::discover(Some(&home.root().join("plugins")));
    hermes_plugins::doctor_rows(&disc, raw.as_deref(), &options)
        .into_iter()
        .map(Check::from)
        .collect()
}

/// What the supervisor of this home says, for `dump`.
fn supervisor_view(home: &hermes_home::Home) -> SupervisorView {
    let status =
        hermes_services::connect(home.root(), Context::var, std::time::Duration::from_secs(2))
            .and_then(|mut c| Ok(c.status(None)?));
    match status {
        Ok(rows) => SupervisorView::Running {
            services: rows
                .into_iter()
                .map(|r| dump::ServiceLine {
                    name: r.name,
                    state: r.state.to_string(),
                    pid: r.pid.and_then(|p| u32::try_from(p).ok()),
                })
                .collect(),
        },
        Err(hermes_services::Error::NotRunning { .. }) => SupervisorView::NotRunning,
        Err(e) => SupervisorView::Unreachable {
            reason: hermes_errors::one_line(&e),
        },
    }
}

/// `hermes doctor`.
pub fn run_doctor(ctx: &Context, json_output: bool) -> CommandResult {
    let (identity, _) = identity_and_install();
    // Doctor must report a broken home, not stop at it: seeding is attempted (first use
    // creates the home) but its failure is left for the checks to describe.
    let root = hermes_home::layout::resolve_root(Context::var)?;
    let _ = hermes_home::layout::ensure_skeleton(&root, true);
    let home = match hermes_home::Home::select(root.clone(), ctx.profile_flag.as_deref()) {
        Ok(home) => home,
        Err(e) => return Err(Failure::from(e)),
    };
    let mut checks: Vec<Check> = doctor::home_checks(&home, &identity, &Context::var);
    checks.extend(plugin_checks(&home));
    if json_output {
        output::json(
            &json!({ "profile": home.profile().name(), "home": home.dir(), "checks": checks }),
        )?;
    } else {
        let title = format!(
            "hermes doctor — profile `{}` (`{}`)",
            home.profile().name(),
            home.dir().display()
        );
        output::stdout(&doctor::render(&title, &checks, output::color_stdout()))?;
    }
    Ok(if doctor::has_failures(&checks) {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
