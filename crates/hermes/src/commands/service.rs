//! `hermes service ...`: talk to the running supervisor over its control socket, and read
//! service logs. Finding the supervisor and reading logs are `hermes-services`'s; this module
//! prints.

use std::path::Path;
use std::time::Duration;

use hermes_supervisor::{Client, render_status_table};
use serde_json::json;

use crate::cli::ServiceCommand;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// How long a CLI command waits for the supervisor to answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to the supervisor of `root` (`hermes_services::connect`); "not running" is one
/// line with what to run.
pub fn connect(root: &Path) -> Result<Client, Failure> {
    Ok(hermes_services::connect(
        root,
        Context::var,
        CLIENT_TIMEOUT,
    )?)
}

/// Dispatches `hermes service <sub>`.
pub fn run(ctx: &Context, command: ServiceCommand) -> CommandResult {
    let root = ctx.root()?;
    match command {
        ServiceCommand::List(flag) => {
            let rows = connect(&root)?.status(None)?;
            if flag.json {
                let list: Vec<_> = rows
                    .iter()
                    .map(|r| json!({ "name": r.name, "state": r.state }))
                    .collect();
                output::json(&list)?;
            } else {
                let width = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
                let text: String = rows
                    .iter()
                    .map(|r| format!("{:<width$}  {}\n", r.name, r.state))
                    .collect();
                output::stdout(&text)?;
            }
        }
        ServiceCommand::Status { name, json } => {
            let rows = connect(&root)?.status(name.as_deref())?;
            if let Some(name) = &name
                && rows.is_empty()
            {
                return Err(Failure::new(
                    format!("the supervisor has no service `{name}`"),
                    Some("list services with `hermes service list`".into()),
                ));
            }
            // A gateway's engine (`native` or `agent`) is the profile's, not the supervisor's.
            if json {
                output::json(&super::gateway::with_engines(&root, &rows)?)?;
            } else {
                output::stdout(&render_status_table(&rows))?;
                output::stdout(&super::gateway::engines_line(&root, &rows))?;
            }
        }
        ServiceCommand::Start { name } => {
            connect(&root)?.start(&name)?;
            output::stdout(&format!("Started `{name}`\n"))?;
        }
        ServiceCommand::Stop { name } => {
            connect(&root)?.stop(&name)?;
            output::stdout(&format!("Stopping `{name}`\n"))?;
        }
        ServiceCommand::Restart { name } => {
            connect(&root)?.restart(&name)?;
            output::stdout(&format!("Restarted `{name}`\n"))?;
        }
        ServiceCommand::Logs {
            name,
            lines,
            follow,
        } => logs(&root, &name, lines, follow)?,
    }
    Ok(ExitStatus::Success)
}

/// Prints the last `lines` lines of `service`'s log and, with `follow`, what is appended to
/// it until interrupted (`hermes_services::open_service_log`; lines that are not UTF-8 are
/// shown lossily).
pub fn logs(root: &Path, service: &str, lines: usize, follow: bool) -> Result<(), Failure> {
    let (tail, follower) = hermes_services::open_service_log(root, service, lines)?;
    let mut shown = tail.join("\n");
    if !shown.is_empty() {
        shown.push('\n');
    }
    output::stdout(&shown)?;
    if follow {
        for line in follower {
            output::stdout(&format!("{}\n", line?))?;
        }
    }
    Ok(())
}
