//! `hermes service ...`: talk to the running supervisor over its control socket, and read
//! service logs.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
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
            if json {
                output::json(&rows)?;
            } else {
                output::stdout(&render_status_table(&rows))?;
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

/// Where a service's current log is (see `hermes_services::service_log_dir`).
pub fn log_path(root: &Path, service: &str) -> Result<PathBuf, Failure> {
    hermes_services::service_log_dir(root, service)
        .map(|dir| dir.join("current"))
        .ok_or_else(|| {
            Failure::new(
                format!("invalid service name `{service}`"),
                Some("list services with `hermes service list`".into()),
            )
        })
}

pub fn logs(root: &Path, service: &str, lines: usize, follow: bool) -> Result<(), Failure> {
    let path = log_path(root, service)?;
    let mut file = File::open(&path).map_err(|e| {
        Failure::new(
            format!("no log for `{service}` at `{}`: {e}", path.display()),
            Some("list services with `hermes service list`".into()),
        )
    })?;
    // A service may print anything: bytes that are not UTF-8 are shown as U+FFFD, never an
    // error that hides the rest of the log.
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    let tail = &all[all.len().saturating_sub(lines)..];
    let mut shown = tail.join("\n");
    if !shown.is_empty() {
        shown.push('\n');
    }
    output::stdout(&shown)?;
    if follow {
        follow_file(&path, file)?;
    }
    Ok(())
}

/// Prints what is appended to `path`, reopening it when it is rotated (new inode or shorter).
fn follow_file(path: &Path, mut file: File) -> Result<(), Failure> {
    let mut inode = file.metadata()?.ino();
    let mut pos = file.stream_position()?;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        if let Ok(meta) = std::fs::metadata(path)
            && (meta.ino() != inode || meta.len() < pos)
        {
            file = File::open(path)?;
            inode = meta.ino();
            pos = 0;
        }
        file.seek(SeekFrom::Start(pos))?;
        let mut chunk = Vec::new();
        file.read_to_end(&mut chunk)?;
        if !chunk.is_empty() {
            pos += chunk.len() as u64;
            output::stdout(&String::from_utf8_lossy(&chunk))?;
        }
    }
}
