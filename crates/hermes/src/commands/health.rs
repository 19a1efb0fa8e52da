//! `hermes health`: whether the running supervisor and its services are healthy, as an exit
//! code — the image's `HEALTHCHECK` and a Kubernetes probe. It asks the supervisor (the only
//! source of truth about services), never guesses from a port, and needs no API key.
//!
//! Healthy means: the supervisor answers, and no service is failing — none is `failed` (parked
//! after a failure restarting will not fix), in `backoff` (waiting to be restarted after a
//! crash: a crash loop keeps it there) or still `starting`. `down` and `disabled` are
//! deliberate (an operator stopped it, it exited cleanly, it is switched off) and healthy.

use hermes_supervisor::{ServiceStatus, StateName};
use serde_json::json;

use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus};
use crate::output;

/// One service that keeps the installation from being healthy, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The service.
    pub service: String,
    /// Its state.
    pub state: StateName,
    /// The supervisor's reason, if it gave one.
    pub reason: String,
}

/// The services that are not healthy (module doc); empty means healthy.
pub fn problems(rows: &[ServiceStatus]) -> Vec<Problem> {
    rows.iter()
        .filter(|row| match row.state {
            StateName::Failed | StateName::Backoff | StateName::Starting => true,
            StateName::Up | StateName::Down | StateName::Disabled | StateName::Stopping => false,
        })
        .map(|row| Problem {
            service: row.name.clone(),
            state: row.state,
            reason: row.reason.clone(),
        })
        .collect()
}

/// Runs `hermes health`: exit 0 when healthy, 1 with one line per problem otherwise (a
/// supervisor that does not answer is the usual one-line failure, also exit 1).
pub fn run(ctx: &Context, as_json: bool) -> CommandResult {
    let root = ctx.root()?;
    let rows = super::service::connect(&root)?.status(None)?;
    let found = problems(&rows);
    if as_json {
        let list: Vec<_> = found
            .iter()
            .map(|p| json!({ "service": p.service, "state": p.state, "reason": p.reason }))
            .collect();
        output::json(
            &json!({ "healthy": found.is_empty(), "services": rows.len(), "problems": list }),
        )?;
    } else if found.is_empty() {
        output::stdout(&format!("healthy: {} service(s)\n", rows.len()))?;
    } else {
        let mut text = String::new();
        for p in &found {
            let reason = if p.reason.is_empty() {
                String::new()
            } else {
                format!(": {}", p.reason)
            };
            text.push_str(&format!(
                "unhealthy: `{}` is {}{reason}\n",
                p.service, p.state
            ));
        }
        output::stdout(&text)?;
    }
    Ok(if found.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::External(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, state: StateName) -> ServiceStatus {
        ServiceStatus {
            name: name.into(),
            state,
            pid: None,
            uptime_secs: None,
            since_secs: 0.0,
            restarts: 0,
            last_exit: None,
            reason: format!("{name} reason"),
            profile: None,
            draining: Vec::new(),
            handover: None,
            listening: Vec::new(),
            resources: None,
            memory_max: None,
            last_failure: None,
        }
    }

    #[test]
    fn only_failing_services_are_problems() {
        use StateName::*;
        let rows: Vec<_> = [Up, Down, Disabled, Stopping, Failed, Backoff, Starting]
            .into_iter()
            .map(|s| row(s.as_str(), s))
            .collect();
        let names: Vec<_> = problems(&rows).into_iter().map(|p| p.service).collect();
        assert_eq!(names, ["failed", "backoff", "starting"]);
        assert!(problems(&rows[..4]).is_empty());
    }
}
