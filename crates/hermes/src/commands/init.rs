//! `hermes init` and the root-exec shim: thin wiring to `hermes-init`.
//!
//! The subcommand list for CMD routing comes from clap's own command tree, so routing never
//! drifts from the CLI.

use std::path::PathBuf;

use clap::CommandFactory;
use hermes_init::{Flags, Settings};
use hermes_privilege::{Env, SystemFiles};

use crate::cli::{Cli, InitArgs};
use crate::failure::{CommandResult, ExitStatus, Failure};

/// The root-exec shim, skipped for `hermes init` (which must be the first argument).
pub fn root_exec_shim() -> Result<(), Failure> {
    if invoked_as_tini() || std::env::args_os().nth(1).is_some_and(|a| a == "init") {
        return Ok(());
    }
    hermes_init::root_exec_shim(
        std::path::Path::new(hermes_privilege::IMAGE_MARKER),
        &SystemFiles::system(),
        std::path::Path::new(hermes_privilege::DRI_DIR),
        &Env::from_process(),
    )?;
    Ok(())
}

/// Whether this process was started under the name `tini` (see `main::arguments`).
pub fn invoked_as_tini() -> bool {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .is_some_and(|argv0| argv0.file_name().is_some_and(|name| name == "tini"))
}

/// `hermes init [flags] [--] [CMD ...]`. tini's `-p SIG` arrives as `p_flag`.
pub fn run(args: InitArgs, p_flag: Option<String>) -> CommandResult {
    let InitArgs {
        parent_death_signal: _,
        subreaper: _,
        group: _,
        verbose,
        warn_zombies: _,
        success_codes,
        cmd,
    } = args;
    let parent_death_signal = match p_flag.as_deref() {
        None => None,
        Some(raw) => Some(hermes_supervisor::spec::parse_signal(raw).ok_or_else(|| {
            Failure::new(
                format!("unknown signal `{raw}` for `-p`"),
                Some("give a signal name such as `SIGKILL` or `TERM`, or a number".into()),
            )
        })?),
    };
    let mut subcommands: Vec<String> = Vec::new();
    for sub in Cli::command().get_subcommands() {
        subcommands.push(sub.get_name().to_owned());
        subcommands.extend(sub.get_all_aliases().map(str::to_owned));
    }
    // hermes-agent's commands are `hermes` commands too (handed over): `docker run image
    // status` means `hermes status`, not a program called `status`.
    subcommands.extend(
        super::handoff::AGENT_COMMANDS
            .iter()
            .map(|c| (*c).to_owned()),
    );
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("hermes"));
    let flags = Flags {
        verbose,
        success_codes,
        parent_death_signal,
    };
    let settings = Settings::from_process(cmd, subcommands, exe, flags);
    // Service output is mirrored to stdout without ever blocking: a stalled `docker logs`
    // driver or a paused terminal must not freeze PID 1.
    let code = hermes_init::run(
        &settings,
        &mut std::io::stderr(),
        hermes_supervisor::Mirror::stdout(),
    )?;
    Ok(ExitStatus::External(code))
}
