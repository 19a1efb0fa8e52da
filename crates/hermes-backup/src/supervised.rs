//! Backups among the running services, as the CLI and the dashboard both offer them: the
//! identity an archive records, and a restore that the running gateways never see half done.
//!
//! The rule of a restore ([`restore`]):
//! * an archive whose config schema is newer than the installed agent's is refused unless
//!   forced: the agent would misread and rewrite what a newer release wrote (the same rule as
//!   the boot's, [`hermes_services::upgrade`]);
//! * every gateway service serving a profile whose files change — its own, or the multiplexing
//!   gateway that serves it — is stopped through the supervisor first and started again after,
//!   whether the restore succeeded or was rolled back (under multiplexing that is the default
//!   profile's gateway: [`hermes_services::multiplex`]);
//! * without a supervisor, a gateway that holds its profile's `gateway.lock` (one run by hand)
//!   makes the restore refuse: nothing could stop it, and it would write over what is restored.
//!
//! The files themselves are [`crate::restore`]'s: plan, stage, swap, roll back.

use std::path::Path;
use std::time::Duration;

use hermes_supervisor::StateName;

use crate::Error;
use crate::create::Identity;
use crate::restore::{Applied, Plan};

/// The identity an archive made here records: `build` (as `hermes --version` names it) and the
/// installed agent's version, when there is one.
pub fn identity(build: String, var: &dyn Fn(&str) -> Option<String>) -> Identity {
    Identity {
        build,
        agent_version: hermes_services::agent::locate(var).and_then(|a| a.version),
    }
}

/// Options of [`restore`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RestoreOptions {
    /// Restore an archive from a newer config schema than the installed agent's anyway.
    pub force: bool,
    /// How long each exchange with the supervisor may take.
    pub timeout: Duration,
}

/// What [`restore`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restored {
    /// The files.
    pub applied: Applied,
    /// Gateway services stopped for the restore and started again.
    pub restarted: Vec<String>,
    /// Those that would not start again, with the supervisor's answer.
    pub start_failures: Vec<(String, String)>,
}

/// The agent's refusal of `plan`'s archive (module doc), `None` when it may be restored. An
/// archive with no `config.yaml` or an image with no agent is not checked.
pub fn schema_refusal(plan: &Plan, var: &dyn Fn(&str) -> Option<String>) -> Option<Error> {
    let (archive, profile) = plan.archive.newest_config_version()?;
    let agent = hermes_services::agent::locate(var)?;
    let facts = hermes_services::agent_probe::probe_cached(&agent, None).ok()?;
    (archive > facts.config_version).then(|| Error::NewerThanAgent {
        profile: profile.to_owned(),
        archive,
        agent_version: agent.version.clone(),
        agent: facts.config_version,
    })
}

/// Restores `plan` (module doc): the schema check, the gateways stopped, the files swapped,
/// the gateways started again.
///
/// # Errors
/// [`Error::NewerThanAgent`] (not forced), [`Error::GatewayOutsideSupervisor`], a
/// supervisor that cannot be asked, or the restore's own failure (the volume rolled back, the
/// gateways started again).
pub fn restore(
    plan: &Plan,
    options: RestoreOptions,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Restored, Error> {
    if !options.force
        && let Some(refusal) = schema_refusal(plan, var)
    {
        return Err(refusal);
    }
    let root = &plan.root;
    let changed = plan.profiles_changed();
    let mut client = match hermes_services::connect(root, var, options.timeout) {
        Ok(client) => Some(client),
        Err(hermes_services::Error::NotRunning { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let (stopped, stopping) = match &mut client {
        Some(client) => stop_serving(client, root, &changed, var, options.timeout),
        None => {
            refuse_unsupervised_gateways(root, &changed)?;
            (Vec::new(), Ok(()))
        }
    };
    // Whatever happens from here, the gateways that were stopped are started again.
    let applied = stopping.and_then(|()| crate::restore::apply(plan));
    let mut start_failures = Vec::new();
    if let Some(client) = &mut client {
        for service in &stopped {
            if let Err(e) = client.start(service) {
                start_failures.push((service.clone(), hermes_errors::one_line(&e)));
            }
        }
    }
    Ok(Restored {
        applied: applied?,
        restarted: stopped,
        start_failures,
    })
}

/// Stops every running gateway service that serves one of `profiles` and waits until their
/// processes have exited; returns the ones it stopped (to start them again whatever happened)
/// and whether they all are.
fn stop_serving(
    client: &mut hermes_supervisor::Client,
    root: &Path,
    profiles: &[String],
    var: &dyn Fn(&str) -> Option<String>,
    timeout: Duration,
) -> (Vec<String>, Result<(), Error>) {
    let multiplex = hermes_services::multiplex::resolve_asking_agent(root, var);
    let mut serving: Vec<String> = profiles
        .iter()
        .map(|p| {
            multiplex
                .served_by(p)
                .unwrap_or_else(|| hermes_services::service_name(p))
        })
        .collect();
    serving.sort();
    serving.dedup();
    let statuses = match client.status(None) {
        Ok(statuses) => statuses,
        Err(e) => return (Vec::new(), Err(e.into())),
    };
    let running: Vec<String> = statuses
        .into_iter()
        .filter(|s| {
            serving.contains(&s.name)
                && matches!(
                    s.state,
                    StateName::Up | StateName::Starting | StateName::Backoff
                )
        })
        .map(|s| s.name)
        .collect();
    let mut stopped = Vec::new();
    for service in running {
        if let Err(e) = client.stop(&service) {
            return (stopped, Err(e.into()));
        }
        stopped.push(service);
    }
    let waited = wait_until_stopped(client, &stopped, timeout);
    (stopped, waited)
}

/// The supervisor answers a stop at once, while the gateway drains: the swap waits until every
/// process of `services` has exited (none stopping, none draining), or gives up after `timeout`.
fn wait_until_stopped(
    client: &mut hermes_supervisor::Client,
    services: &[String],
    timeout: Duration,
) -> Result<(), Error> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let still: Vec<String> = client
            .status(None)?
            .into_iter()
            .filter(|s| services.contains(&s.name))
            .filter(|s| s.pid.is_some() || !s.draining.is_empty() || s.state == StateName::Stopping)
            .map(|s| s.name)
            .collect();
        if still.is_empty() {
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            return Err(Error::GatewayWouldNotStop {
                services: still,
                waited: timeout,
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`Error::GatewayOutsideSupervisor`] when a gateway of one of `profiles` runs without a
/// supervisor (module doc).
fn refuse_unsupervised_gateways(root: &Path, profiles: &[String]) -> Result<(), Error> {
    for profile in profiles {
        let dir = match hermes_home::ProfileRef::parse(profile) {
            Ok(hermes_home::ProfileRef::Named(name)) => {
                hermes_home::profile::profile_dir(root, &name)
            }
            _ => root.to_path_buf(),
        };
        if let Some(holder) =
            hermes_home::gateway_lock::live_holder(&hermes_home::gateway_lock::path(&dir))
        {
            return Err(Error::GatewayOutsideSupervisor {
                profile: profile.clone(),
                pid: holder.pid,
            });
        }
    }
    Ok(())
}
