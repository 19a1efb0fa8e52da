//! `hermes version`, `hermes dump` and `hermes doctor`: what support needs to know.

use hermes_deps::Environment;
use hermes_diag::dump;
use hermes_diag::report::{self, identity_and_install};
use serde_json::json;

use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

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
    let agent = report::agent(&Context::var);
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
    let report = report::dump(&home, &Context::var);
    if json_output {
        output::json(&report)?;
    } else {
        output::stdout(&dump::render(&report))?;
    }
    Ok(ExitStatus::Success)
}

/// `hermes doctor`.
pub fn run_doctor(ctx: &Context, json_output: bool) -> CommandResult {
    // Doctor must report a broken home, not stop at it: seeding is attempted (first use
    // creates the home) but its failure is left for the checks to describe.
    let root = hermes_home::layout::resolve_root(Context::var)?;
    let _ = hermes_settings::ensure_root_skeleton(&root, hermes_settings::process_env());
    let home = match hermes_home::Home::select(root.clone(), ctx.profile_flag.as_deref()) {
        Ok(home) => home,
        Err(e) => return Err(Failure::from(e)),
    };
    let report = report::doctor(&home, &Context::var, Environment::from_process());
    if json_output {
        output::json(&report)?;
    } else {
        output::stdout(&report.render(output::color_stdout()))?;
    }
    Ok(if report.failed() {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
