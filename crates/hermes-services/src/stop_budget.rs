//! How long a profile's gateway may take to stop before the supervisor kills it: a budget
//! derived from what the gateway does, so a clean stop is never cut short by a SIGKILL (the
//! kill mid-write is what corrupts a `state.db`).
//!
//! * The **native** engine drains its in-flight requests for its `drain_timeout` (30 s by
//!   default), then records its state and exits: the drain and [`AFTER_DRAIN`] more.
//! * The **agent** engine drains for `agent.restart_drain_timeout` (the API server's drain if
//!   that is longer), lets an in-flight cron delivery finish (the agent bounds that at
//!   [`AGENT_CRON_DRAIN`]; counted only for a profile with cron jobs), then tears its platforms
//!   down: upstream's budget, `max(60, max(drain, cron + 10) + 30)` seconds.
//! * The operator's `gateway.stop_timeout` (seconds, in the profile's `config.yaml`) or
//!   `HERMES_GATEWAY_STOP_TIMEOUT` wins over both.
//!
//! The container needs the longest of its services' budgets and a little more
//! ([`container_needs`]): PID 1 and `hermes up` say it, and warn when the container's own stop
//! timeout, as `HERMES_STOP_TIMEOUT` tells it (the compose file and the Helm chart set it from
//! theirs), is shorter.

use std::time::Duration;

use hermes_home::api_server;
use hermes_settings::ProfileFiles;

use crate::agent::Engine;

/// What the native gateway does after its drain: records its state, releases its lock.
pub const AFTER_DRAIN: Duration = Duration::from_secs(10);

/// How long the agent waits for an in-flight cron delivery at shutdown (its
/// `_CRON_SHUTDOWN_DRAIN_TIMEOUT`).
pub const AGENT_CRON_DRAIN: Duration = Duration::from_secs(65);

/// The operator's budget for one profile's gateway, in its `config.yaml`.
pub const STOP_TIMEOUT_KEY: &str = "gateway.stop_timeout";
/// The same in the environment (wins over the key).
pub const STOP_TIMEOUT_VAR: &str = "HERMES_GATEWAY_STOP_TIMEOUT";
/// The container's own stop timeout, when its runtime tells it (compose, the Helm chart).
pub const CONTAINER_STOP_TIMEOUT_VAR: &str = "HERMES_STOP_TIMEOUT";

/// What PID 1 (or `hermes up`) needs beyond the longest service: stopping the supervisor.
const SUPERVISOR_MARGIN: Duration = Duration::from_secs(5);

/// A gateway's stop budget and why it is that long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopBudget {
    /// How long the supervisor waits after SIGTERM before SIGKILL.
    pub grace: Duration,
    /// Where it comes from, in words (`the drain (30 s) and 10 s`).
    pub why: String,
}

/// The budget of the gateway of a profile whose files are `files`, run by `engine` (module
/// doc). `has_cron_jobs`: whether the profile has scheduled jobs the agent may be delivering.
pub fn gateway(files: &ProfileFiles, engine: Engine, has_cron_jobs: bool) -> StopBudget {
    let env = files.environment();
    let config = files.config();
    let lookup = |k: &str| env.get(k).cloned();
    let seconds = |text: &str| text.trim().parse::<u64>().ok().filter(|s| *s > 0);
    let chosen = env
        .get(STOP_TIMEOUT_VAR)
        .and_then(|v| seconds(v).map(|s| (s, format!("`{STOP_TIMEOUT_VAR}`"))))
        .or_else(|| {
            config
                .string(STOP_TIMEOUT_KEY, &lookup)
                .and_then(|v| seconds(&v).map(|s| (s, format!("`{STOP_TIMEOUT_KEY}`"))))
        });
    if let Some((secs, origin)) = chosen {
        return StopBudget {
            grace: Duration::from_secs(secs),
            why: format!("{origin} ({secs} s)"),
        };
    }
    let drain =
        api_server::drain_timeout(&env, config).unwrap_or(api_server::DEFAULT_DRAIN_TIMEOUT);
    match engine {
        Engine::Native => StopBudget {
            grace: drain + AFTER_DRAIN,
            why: format!(
                "the drain ({} s) and {} s",
                drain.as_secs(),
                AFTER_DRAIN.as_secs()
            ),
        },
        Engine::Agent => {
            let restart_drain = env
                .get("HERMES_RESTART_DRAIN_TIMEOUT")
                .cloned()
                .or_else(|| config.string("agent.restart_drain_timeout", &lookup))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .map_or(Duration::ZERO, Duration::from_secs_f64);
            let drain = drain.max(restart_drain);
            let cron = if has_cron_jobs {
                AGENT_CRON_DRAIN + Duration::from_secs(10)
            } else {
                Duration::ZERO
            };
            let grace = Duration::from_secs(60).max(drain.max(cron) + Duration::from_secs(30));
            StopBudget {
                grace,
                why: format!(
                    "the agent's: max(60, max(drain {} s, cron {} s) + 30)",
                    drain.as_secs(),
                    cron.as_secs()
                ),
            }
        }
    }
}

/// How long the container needs to stop cleanly: its longest service's grace and the
/// supervisor's own margin.
pub fn container_needs(graces: impl IntoIterator<Item = Duration>) -> Duration {
    graces.into_iter().max().unwrap_or_default() + SUPERVISOR_MARGIN
}

/// The warning when the container's stop timeout (`given`, the value of
/// [`CONTAINER_STOP_TIMEOUT_VAR`]) is shorter than it `needs`; `None` when it is long enough or
/// not known.
pub fn container_warning(given: Option<&str>, needs: Duration) -> Option<String> {
    let given = given?.trim().trim_end_matches('s').parse::<u64>().ok()?;
    (given < needs.as_secs()).then(|| {
        format!(
            "the container's stop timeout ({given} s, `{CONTAINER_STOP_TIMEOUT_VAR}`) is shorter than the {} s its services need to stop cleanly: a stop would kill a gateway mid-write; give it at least {} s (`docker stop -t`, compose `stop_grace_period`, Kubernetes `terminationGracePeriodSeconds`)",
            needs.as_secs(),
            needs.as_secs()
        )
    })
}

/// What PID 1 and `hermes up` say of stopping, for services with these `graces` and the
/// container's stop timeout `given` (when its runtime tells it): how long a clean stop takes,
/// and a warning when the container would be killed before.
pub fn describe_needs(
    graces: impl IntoIterator<Item = Duration>,
    given: Option<&str>,
) -> Vec<String> {
    let needs = container_needs(graces);
    let mut lines = vec![format!(
        "stop: the services need up to {} s to stop cleanly",
        needs.as_secs()
    )];
    lines.extend(container_warning(given, needs).map(|w| format!("warning: {w}")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_settings::Scope;

    fn files(config: &str, env: &str) -> (tempfile::TempDir, ProfileFiles) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.yaml"), config).unwrap();
        std::fs::write(dir.path().join(".env"), env).unwrap();
        let files = ProfileFiles::read(
            dir.path(),
            Scope::of("default"),
            std::collections::BTreeMap::new(),
        )
        .unwrap();
        (dir, files)
    }

    #[test]
    fn the_native_gateway_gets_its_drain_and_a_little_more() {
        let (_d, f) = files("", "");
        assert_eq!(
            gateway(&f, Engine::Native, true).grace,
            Duration::from_secs(40)
        );
        let (_d, f) = files("", "HERMES_GATEWAY_DRAIN_TIMEOUT=90\n");
        assert_eq!(
            gateway(&f, Engine::Native, false).grace,
            Duration::from_secs(100)
        );
    }

    #[test]
    fn the_agent_gets_upstreams_budget_with_its_cron_jobs_counted() {
        let (_d, f) = files("", "");
        assert_eq!(
            gateway(&f, Engine::Agent, false).grace,
            Duration::from_secs(60)
        );
        assert_eq!(
            gateway(&f, Engine::Agent, true).grace,
            Duration::from_secs(105)
        );
        let (_d, f) = files("agent:\n  restart_drain_timeout: 180\n", "");
        let budget = gateway(&f, Engine::Agent, true);
        assert_eq!(budget.grace, Duration::from_secs(210));
        assert!(budget.why.contains("drain 180 s"), "{}", budget.why);
    }

    #[test]
    fn the_operators_timeout_wins_and_nonsense_is_ignored() {
        let (_d, f) = files("gateway:\n  stop_timeout: 20\n  drain_timeout: 90\n", "");
        let budget = gateway(&f, Engine::Agent, true);
        assert_eq!(budget.grace, Duration::from_secs(20));
        assert!(budget.why.contains(STOP_TIMEOUT_KEY), "{}", budget.why);
        let (_d, f) = files(
            "gateway:\n  stop_timeout: 20\n",
            "HERMES_GATEWAY_STOP_TIMEOUT=300\n",
        );
        assert_eq!(
            gateway(&f, Engine::Native, false).grace,
            Duration::from_secs(300)
        );
        let (_d, f) = files("gateway:\n  stop_timeout: soon\n", "");
        assert_eq!(
            gateway(&f, Engine::Native, false).grace,
            Duration::from_secs(40)
        );
    }

    #[test]
    fn the_container_needs_its_longest_service_and_says_when_it_has_less() {
        let needs = container_needs([Duration::from_secs(40), Duration::from_secs(105)]);
        assert_eq!(needs, Duration::from_secs(110));
        assert_eq!(container_warning(None, needs), None);
        assert_eq!(container_warning(Some("120"), needs), None);
        assert_eq!(container_warning(Some("junk"), needs), None);
        let warned = container_warning(Some("40s"), needs).unwrap();
        assert!(
            warned.contains("(40 s") && warned.contains("at least 110 s"),
            "{warned}"
        );
    }
}
