//! Pause, resume and trigger, made by the installed agent's own cron code (module doc of
//! [`super`]): one interpreter start per action, as the owner of the profile's jobs (below), with
//! `HERMES_HOME` at the profile so the agent's `cron.jobs` works on that profile's store.

use axum::http::StatusCode;
use hermes_home::Home;
use hermes_services::agent_probe::{self, ProbeError};

use crate::pages::request::{Step, refuse};
use crate::server::App;

/// Why the buttons are off without an agent, and what to do.
pub fn no_agent_hint() -> String {
    format!(
        "changing a job takes the agent's own cron code: {}",
        hermes_services::agent::Place::current().get_the_agent()
    )
}

/// The longest job reference accepted (the agent's ids are 12 hex digits; names are short).
const MAX_REFERENCE: usize = 256;

/// The agent's change, by name: the job's id and the verb come in the environment, never in
/// the script's text. Prints whether the job was found, or the agent's refusal (its
/// `resume_job` refuses a one-shot whose time has passed).
const SCRIPT: &str = r#"
import json, os
from cron import jobs as cron_jobs
change = {
    "pause": cron_jobs.pause_job,
    "resume": cron_jobs.resume_job,
    "trigger": cron_jobs.trigger_job,
}[os.environ["HERMES_CRON_ACTION"]]
try:
    answer = {"found": change(os.environ["HERMES_CRON_JOB"]) is not None}
except ValueError as e:
    answer = {"refused": str(e)}
print("HERMES_ANSWER " + json.dumps(answer), flush=True)
"#;

/// An action of the API's path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    /// `enabled: false, state: paused, paused_at: now`.
    Pause,
    /// `enabled: true, state: scheduled`, the next run computed from now.
    Resume,
    /// Due now: the scheduler runs it at its next tick.
    Trigger,
}

impl Verb {
    /// `pause`, `resume` or `trigger` (anything else is a 404: no such endpoint).
    pub fn parse(text: &str) -> Step<Verb> {
        match text {
            "pause" => Ok(Verb::Pause),
            "resume" => Ok(Verb::Resume),
            "trigger" => Ok(Verb::Trigger),
            other => Err(refuse(
                StatusCode::NOT_FOUND,
                &format!("no cron action `{other}`"),
                Some("the actions are pause, resume and trigger".into()),
            )),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Verb::Pause => "pause",
            Verb::Resume => "resume",
            Verb::Trigger => "trigger",
        }
    }
}

/// A job reference from a URL: text of a sane length without control characters.
pub fn check_reference(reference: &str) -> Step<()> {
    if reference.trim().is_empty()
        || reference.len() > MAX_REFERENCE
        || reference.chars().any(char::is_control)
    {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "invalid job id",
            Some("use the `id` the job list gives".into()),
        ));
    }
    Ok(())
}

/// Has the agent make `verb` on the job `id` of `home`'s profile.
pub fn run(app: &App, home: &Home, verb: Verb, id: &str) -> Step<()> {
    let agent = crate::pages::installed_agent(app, "changing a job")?;
    let _turn = crate::pages::agent_turn();
    let dir = home.dir().to_string_lossy().into_owned();
    // As the first owner that is not root of the file the agent rewrites, its directory or the
    // profile's: a root dashboard never has the agent act as root where the service user can
    // write (and plant links).
    let jobs = hermes_home::cron_jobs::jobs_path(home.dir());
    let cron = home.dir().join(hermes_home::cron_jobs::DIR);
    let identity = [jobs.as_path(), cron.as_path(), home.dir()]
        .into_iter()
        .find_map(agent_probe::owner_identity);
    let answer = agent_probe::run_agent_python(
        &agent,
        SCRIPT,
        &[
            ("HERMES_HOME", dir.as_str()),
            ("HERMES_CRON_ACTION", verb.as_str()),
            ("HERMES_CRON_JOB", id),
        ],
        Some(home.dir()),
        identity.as_ref(),
    )
    .map_err(|e: ProbeError| {
        refuse(
            StatusCode::BAD_GATEWAY,
            &format!("the agent could not {} the job: {e}", verb.as_str()),
            Some("`hermes doctor` checks the agent's install".into()),
        )
    })?;
    if let Some(reason) = answer.get("refused").and_then(|r| r.as_str()) {
        return Err(refuse(
            StatusCode::CONFLICT,
            &format!("the agent refused: {reason}"),
            Some("a one-shot job whose time has passed cannot run again: create a new one".into()),
        ));
    }
    if answer.get("found").and_then(|f| f.as_bool()) != Some(true) {
        return Err(refuse(StatusCode::NOT_FOUND, "Job not found", None));
    }
    Ok(())
}
