//! Boot stage 6b: the installed agent against the volume's config schema
//! (`hermes_services::upgrade`), before any gateway starts.
//!
//! * No agent installed (the slim image): nothing to do.
//! * The agent is older than the volume: one `[init]` line (which schema wrote the volume,
//!   which agent is installed, what to do) and no migration; every agent gateway then refuses
//!   to start by itself (exit 78, parked `failed`), writing nothing.
//! * The agent is newer than a profile's `config.yaml`: the agent's own migration, after
//!   copying `config.yaml` and `.env` aside; a failure restores them and parks that profile's
//!   gateway with the reason ([`Outcome::failed`], handed to its service as
//!   `HERMES_CONFIG_MIGRATION_FAILED`). `HERMES_SKIP_CONFIG_MIGRATION` skips it; a file this
//!   boot cannot replace (a read-only ConfigMap) is reported and left alone.
//!
//! Each outcome is an `[init]` line and a line in `logs/container-boot.log`:
//! `<ts> config-migrate profile=<p> from=<n> to=<m> result=<migrated|failed|skipped|read-only>
//! [backups=<files>] [reason=<why>]`. The copies and the backups are made as the service user
//! ([`AsUser`]); the agent runs as the service user (a real drop, outside that scope).

use std::io::Write;

use hermes_home::schema::VolumeSchema;
use hermes_services::agent::{self, Agent};
use hermes_services::agent_probe::{self, AgentFacts};
use hermes_services::upgrade::{self, Backup, SKIP_MIGRATION_VAR};

use crate::Settings;
use crate::boot::{Booted, say};
use hermes_privilege::AsUser;

/// What the stage found and did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The installed agent and what it said about itself.
    pub agent: Option<(Agent, AgentFacts)>,
    /// Profiles whose migration failed, with the reason.
    pub failed: Vec<(String, String)>,
    /// The lines for `container-boot.log` (without timestamps).
    pub log_lines: Vec<String>,
}

/// Runs stage 6b (module doc).
pub fn stage_agent_schema(settings: &Settings, booted: &Booted, log: &mut dyn Write) -> Outcome {
    let var = |k: &str| settings.env.get(k).map(str::to_owned);
    let mut outcome = Outcome::default();
    let Some(agent) = agent::locate(var) else {
        return outcome;
    };
    let facts = match agent_probe::probe(&agent, booted.identity.as_ref()) {
        Ok(facts) => facts,
        Err(e) => {
            say(
                log,
                format!("warning: cannot read hermes-agent's config schema: {e}; no migration"),
            );
            return outcome;
        }
    };
    outcome.agent = Some((agent.clone(), facts));
    let volume = {
        let _scope = AsUser::enter(booted.identity.as_ref());
        VolumeSchema::read(&settings.home)
    };
    match upgrade::check(&volume, &agent, facts, &var) {
        Ok(Some(warning)) => {
            say(log, &warning);
            return outcome;
        }
        Ok(None) => {}
        Err(problem) => {
            say(
                log,
                format!(
                    "error: {problem}; its gateways will not start — {}",
                    problem.hint().unwrap_or_default()
                ),
            );
            return outcome;
        }
    }
    let skip = var(SKIP_MIGRATION_VAR).is_some_and(|v| hermes_errors::switch::is_truthy(&v));
    for p in &volume.profiles {
        let from = match &p.version {
            Ok(Some(v)) if *v < facts.config_version => *v,
            Ok(_) => continue,
            Err(e) => {
                say(
                    log,
                    format!("warning: profile `{}`: {e}; not migrated", p.profile),
                );
                continue;
            }
        };
        let to = facts.config_version;
        let head = format!("config-migrate profile={} from={from} to={to}", p.profile);
        let line = if skip {
            format!("{head} result=skipped reason={SKIP_MIGRATION_VAR}")
        } else {
            migrate_one(p, &agent, booted, &head, &mut outcome.failed)
        };
        say(log, &line);
        outcome.log_lines.push(line);
    }
    outcome
}

/// Migrates one profile and returns its log line; a failure is also pushed onto `failed`.
fn migrate_one(
    p: &hermes_home::schema::ProfileSchema,
    agent: &Agent,
    booted: &Booted,
    head: &str,
    failed: &mut Vec<(String, String)>,
) -> String {
    let backup = {
        let _scope = AsUser::enter(booted.identity.as_ref());
        if !upgrade::replaceable(&p.config) {
            return format!(
                "{head} result=read-only reason=`{}` cannot be replaced (a read-only mount?); \
                 the agent runs on the older schema",
                p.config.display()
            );
        }
        Backup::take(&p.dir, &hermes_home::time::compact_utc_now())
    };
    let backup = match backup {
        Ok(backup) => backup,
        Err(reason) => {
            failed.push((p.profile.clone(), reason.clone()));
            return format!("{head} result=failed reason={reason}");
        }
    };
    match upgrade::migrate_profile(agent, &p.dir, booted.identity.as_ref()) {
        Ok(_) => format!("{head} result=migrated backups={}", backup.describe()),
        Err(reason) => {
            let restored = {
                let _scope = AsUser::enter(booted.identity.as_ref());
                backup.restore()
            };
            let reason = match restored {
                Ok(_) => format!("{reason}; restored from {}", backup.describe()),
                Err(e) => format!("{reason}; {e}"),
            };
            failed.push((p.profile.clone(), reason.clone()));
            format!("{head} result=failed reason={reason}")
        }
    }
}
