//! `gateway start|stop|restart`: through the supervisor (registering a missing gateway
//! service first), or — a stop with no supervisor — the gateways running in the foreground.

use std::path::PathBuf;
use std::time::Duration;

use hermes_home::{Home, profile};
use hermes_services::readiness::{Outcome, Request};

use super::settings;
use crate::cli::GatewayTarget;
use crate::commands::service;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// Registers the profile's gateway service unless the supervisor already has it
/// (`hermes_services::ensure_registered`); warnings about its `gateway.command` go to stderr.
pub(super) fn ensure_registered(
    home: &Home,
    client: &mut hermes_supervisor::Client,
    autostart: bool,
) -> Result<(), Failure> {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("hermes"));
    let mut warnings = Vec::new();
    let registered =
        hermes_services::ensure_registered(client, home, &exe, autostart, &mut warnings);
    if !warnings.is_empty() {
        output::stderr(&String::from_utf8_lossy(&warnings));
    }
    registered?;
    Ok(())
}

/// What `gateway start|stop|restart` does to each gateway.
#[derive(Clone, Copy)]
pub(super) enum Lifecycle {
    /// `gateway start`: registered if missing, started, waited for.
    Start,
    /// `gateway stop`: the planned-stop marker, then stopped (without a supervisor: the
    /// foreground gateways).
    Stop,
    /// `gateway restart`: as a stop, then as a start.
    Restart,
}

/// `gateway start|stop|restart`. A start or restart waits up to `wait` for each gateway to
/// serve (`hermes_services::readiness`) and says how each went; the first failures are
/// printed as they come, the last is the command's error (exit 1).
pub(super) fn lifecycle(
    ctx: &Context,
    target: GatewayTarget,
    action: Lifecycle,
    wait: Option<Duration>,
) -> CommandResult {
    let root = ctx.root()?;
    let homes: Vec<Home> = if target.all {
        profile::list(&root)?
            .into_iter()
            .filter_map(|entry| Home::for_profile(root.clone(), entry.profile).ok())
            .collect()
    } else {
        vec![ctx.home()?]
    };
    let no_supervisor = || {
        Failure::new(
            format!("no supervisor is running for `{}`", root.display()),
            Some("start one with `hermes up` (on a host) or run Hermes in its container; to run one gateway in the foreground: `hermes gateway run`".into()),
        )
    };
    let mut client = match service::connect(&root) {
        Ok(client) => client,
        Err(_) if matches!(action, Lifecycle::Stop) => {
            return match stop_unsupervised(&homes)? {
                0 => Err(no_supervisor()),
                _ => Ok(ExitStatus::Success),
            };
        }
        Err(_) => return Err(no_supervisor()),
    };
    let mut failed = None;
    // Under multiplexing the default gateway serves the named profiles: starting one of theirs
    // would make a second owner of its platforms (`--all` starts the default one only).
    let multiplex = hermes_services::multiplex::resolve_asking_agent(&root, &Context::var);
    for home in &homes {
        let name = hermes_services::service_name(home.profile().name());
        if !matches!(action, Lifecycle::Stop) && !multiplex.runs_own_gateway(home.profile().name())
        {
            output::stdout(&format!(
                "{}\n",
                hermes_services::multiplex::served_by_default_line(
                    home.profile().name(),
                    &multiplex
                )
            ))?;
            continue;
        }
        let request = match action {
            Lifecycle::Stop => {
                mark_planned_stop(home, &mut client, &name);
                client.stop(&name)?;
                output::stdout(&format!("Stopping `{name}`\n"))?;
                continue;
            }
            Lifecycle::Start => Request::Start,
            Lifecycle::Restart => {
                ensure_registered(home, &mut client, false)?;
                mark_planned_stop(home, &mut client, &name);
                Request::Restart
            }
        };
        ensure_registered(home, &mut client, false)?;
        let serving = service::serving_pid(&mut client, &name);
        let outcome =
            hermes_services::readiness::start_and_wait(&mut client, &root, &name, request, wait)?;
        let handed_over = match (&outcome, serving) {
            (
                Outcome::Ready {
                    row,
                    already: false,
                },
                Some(old),
            ) => hermes_services::handover::handed_over_from(row, old).then_some(old),
            _ => None,
        };
        let address = settings::address(home);
        // Beside the pid: `(pid 7, API server off)`, not `(pid 7, (API server off))`.
        let detail = address
            .strip_prefix('(')
            .and_then(|a| a.strip_suffix(')'))
            .unwrap_or(&address);
        match service::report(&name, request, outcome, Some(detail)) {
            Ok(line) => {
                output::stdout(&line)?;
                if let Some(old) = handed_over {
                    service::report_handover(&mut client, &root, &name, old)?;
                }
            }
            Err(failure) => {
                if let Some(earlier) = failed.replace(failure) {
                    output::stderr(&earlier.render());
                }
            }
        }
    }
    failed.map_or(Ok(ExitStatus::Success), Err)
}

/// Before an operator stop (or restart) of a supervised gateway: the planned-stop marker
/// (`hermes_services::stop::mark_planned_stop`); one that cannot be written only costs the
/// recorded state, so it is said on stderr.
fn mark_planned_stop(home: &Home, client: &mut hermes_supervisor::Client, name: &str) {
    if let Err(e) = hermes_services::stop::mark_planned_stop(home, client, name) {
        output::stderr(&format!("warning: {}\n", hermes_errors::one_line(&e)));
    }
}

/// `gateway stop` without a supervisor: each profile's gateway that runs in the foreground
/// is stopped (`hermes_services::stop::stop_unsupervised`), said as it goes. Returns how
/// many were stopped.
fn stop_unsupervised(homes: &[Home]) -> Result<usize, Failure> {
    let mut stopped = 0;
    for home in homes {
        if let Some(gateway) =
            hermes_services::stop::stop_unsupervised(home, hermes_services::GATEWAY_STOP_GRACE)?
        {
            output::stdout(&format!(
                "Stopped the `{}` gateway (pid {})\n",
                gateway.profile, gateway.pid
            ))?;
            stopped += 1;
        }
    }
    Ok(stopped)
}
