//! `hermes up`: the supervisor in the foreground on a normal machine, as the current user.
//!
//! It supervises one gateway per profile — reconciled like a container boot: started when its
//! recorded state is `running`, registered `down` otherwise, and on a fresh home the default
//! profile's gateway starts — plus the services declared under `services:` in the root's
//! `config.yaml`. Bad entries are reported with the service name and key, and the valid ones
//! still run. Ctrl-C or
//! SIGTERM stops everything in reverse start order and exits 0; a second `hermes up` on the
//! same home finds the lock and says which pid holds it.

use hermes_home::config::Config;
use hermes_home::gateway_state;
use hermes_home::layout::runtime_dir;
use hermes_supervisor::{Desired, Hooks, Options, ServiceSpec, Supervisor};

use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus};
use crate::output;

/// Persists an operator's start/stop of a profile's gateway in that profile's
/// `gateway_state.json`, so the choice survives a restart.
pub struct DesiredStateHooks {
    /// `HERMES_HOME`.
    pub root: std::path::PathBuf,
}

impl Hooks for DesiredStateHooks {
    fn desired_state_changed(&mut self, service: &ServiceSpec, desired: Desired) {
        let Some(profile) = &service.profile else {
            return;
        };
        let dir = if profile == hermes_home::profile::DEFAULT_PROFILE {
            self.root.clone()
        } else {
            self.root.join("profiles").join(profile)
        };
        let word = match desired {
            Desired::Running => "running",
            Desired::Stopped => "stopped",
        };
        if let Err(e) = gateway_state::set_desired(&dir.join("gateway_state.json"), word) {
            output::stderr(&format!(
                "warning: could not record `{word}` for `{}`: {e}\n",
                service.name
            ));
        }
    }
}

/// Runs `hermes up`.
pub fn run(ctx: &Context) -> CommandResult {
    let root = ctx.root()?;
    let config = Config::load(&root.join("config.yaml"))?;
    // The parser works on JSON values; YAML maps onto them one to one.
    let services = serde_json::to_value(config.services()).unwrap_or_default();
    let (mut specs, errors) = hermes_supervisor::parse_services(&services);
    let (gateways, warnings) = crate::commands::gateway::reconcile(&root, true);
    let mut lines = String::new();
    for gateway in &gateways {
        let action = if gateway.spec.autostart {
            "started"
        } else {
            "registered"
        };
        let prior = gateway.prior.as_deref().unwrap_or("none");
        lines.push_str(&format!(
            "hermes up: {} prior_state={prior} action={action}\n",
            gateway.spec.name
        ));
    }
    specs.extend(gateways.into_iter().map(|g| g.spec));
    let options = Options::new(runtime_dir(&root, Context::var), root.join("logs"));
    // Taking the lock comes first: a second `hermes up` says who runs, nothing else.
    let supervisor = Supervisor::new(options, specs)?;
    for error in &errors {
        let hint = error
            .hint()
            .map(|h| format!("\n  hint: {h}"))
            .unwrap_or_default();
        output::stderr(&format!("warning: {error}{hint}\n"));
    }
    for warning in &warnings {
        output::stderr(&format!("warning: {warning}\n"));
    }
    output::stderr(&lines);
    output::stderr(&format!(
        "hermes up: supervising `{}` (control socket `{}`); Ctrl-C stops everything\n",
        root.display(),
        supervisor.socket_path().display()
    ));
    let mut hooks = DesiredStateHooks { root };
    supervisor.run(&mut hooks, &mut std::io::stdout())?;
    Ok(ExitStatus::Success)
}
