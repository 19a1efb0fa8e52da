//! The `hermes` binary: parse the command line, run one command, map the outcome to an exit
//! code. All real work lives in the `hermes-*` library crates.
//!
//! What this binary does not implement is handed over to hermes-agent's CLI when it is
//! installed (`commands::handoff`), after the root-exec shim and before clap parses anything.
//!
//! Exit codes: 0 success, 1 a user-facing failure (one `error:` line and a `hint:`), 2 a usage
//! error (clap's message), 127 a command of hermes-agent where it is not installed, anything
//! else chosen by a command (a gateway's 78/75, PID 1's child status) or by hermes-agent.

mod cli;
mod commands;
mod context;
mod failure;
mod output;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::FromArgMatches;

use crate::cli::{Cli, Command};
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus};

fn main() -> ExitCode {
    // Before anything else (and while this is the only thread): root inside the image drops
    // to the service user, except `hermes init` itself, which is PID 1 and stays root.
    if let Err(failure) = commands::init::root_exec_shim() {
        return report(&failure, Format::Text);
    }
    if commands::uv_shim::invoked_as_uv() {
        return commands::uv_shim::run(&std::env::args_os().collect::<Vec<_>>());
    }
    let args = arguments();
    // Built once: the command tree is most of what parsing costs (PID 1 starts through here).
    let mut command = cli::command();
    let invocation = commands::handoff::route(&args, &command);
    if let Err(failure) = commands::handoff::before_parse(&args, &invocation) {
        return report(&failure, Format::Text);
    }
    let matches = match command.try_get_matches_from_mut(&args) {
        Ok(matches) => matches,
        Err(e) => {
            if let Some(failure) = commands::handoff::after_rejection(&args, &invocation, &e) {
                return report(&failure, Format::Text);
            }
            return usage_error(&e, Format::asked_in(&args));
        }
    };
    // Not kept for the command's life: PID 1 lives as long as the container.
    drop(command);
    let format = Format::of(&matches);
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e, format),
    };
    match profile_of(&matches) {
        Ok(profile) => cli.profile = profile,
        Err(e) => return usage_error(&e, format),
    }
    match run(cli) {
        Ok(status) => ExitCode::from(status.code()),
        Err(failure) if is_broken_pipe(&failure) => ExitCode::SUCCESS,
        Err(failure) => report(&failure, format),
    }
}

/// The `-p/--profile` given: the command's own (`hermes gateway start -p work`, see
/// `cli::PROFILE_COMMANDS`) over the top level's (`hermes -p work gateway start`). `--all`
/// with the top level's is the conflict clap reports for the command's own.
fn profile_of(matches: &clap::ArgMatches) -> Result<Option<String>, clap::Error> {
    let top = matches.get_one::<String>(cli::PROFILE_ARG).cloned();
    let mut leaf = matches;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    if let Ok(Some(own)) = leaf.try_get_one::<String>(cli::PROFILE_ARG)
        && !std::ptr::eq(leaf, matches)
    {
        return Ok(Some(own.clone()));
    }
    if top.is_some() && matches!(leaf.try_get_one::<bool>("all"), Ok(Some(true))) {
        return Err(cli::command().error(
            clap::error::ErrorKind::ArgumentConflict,
            "the argument '--all' cannot be used with '--profile <NAME>'",
        ));
    }
    Ok(top)
}

/// How a failure is reported: as text on stderr, or — for a command run with `--json` — also
/// as one JSON object on stdout, so a script that reads stdout always gets JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

impl Format {
    /// `Json` when the command that was parsed takes `--json` and it was given. Read from
    /// clap's matches (the innermost subcommand's `json` flag), so every command that gains
    /// a `--json` flag reports its failures as JSON without being listed here.
    fn of(matches: &clap::ArgMatches) -> Format {
        let mut leaf = matches;
        while let Some((_, sub)) = leaf.subcommand() {
            leaf = sub;
        }
        match leaf.try_get_one::<bool>("json") {
            Ok(Some(true)) => Format::Json,
            _ => Format::Text,
        }
    }

    /// For a command line clap rejected (so there are no matches): `Json` when `--json` is
    /// among its options (before any `--`).
    fn asked_in(args: &[std::ffi::OsString]) -> Format {
        let json = args
            .iter()
            .skip(1)
            .take_while(|a| *a != "--")
            .any(|a| a == "--json");
        if json { Format::Json } else { Format::Text }
    }
}

/// Reports `failure` (see [`Format`]); its exit code. The `error:`/`hint:` text goes to stderr
/// in both formats: messages belong there, and a person watching a script still reads them.
fn report(failure: &failure::Failure, format: Format) -> ExitCode {
    if format == Format::Json {
        // Best effort, as stderr: a closed stdout leaves the exit code to say it.
        let _ = output::json(&failure.to_json());
    }
    output::stderr(&failure.render());
    ExitCode::from(failure.code)
}

/// A command line clap rejected: its message (exit 2), or the help it was asked for (exit 0).
fn usage_error(e: &clap::Error, format: Format) -> ExitCode {
    if !e.use_stderr() {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if format == Format::Json {
        let _ = output::json(&failure::Failure::usage(e).to_json());
    }
    let _ = e.print();
    ExitCode::from(failure::USAGE_EXIT)
}

/// The command line, with one alias: invoked as `tini` (the image links `/usr/bin/tini` to
/// `hermes`), `tini [flags] [--] CMD` means `hermes init [flags] [--] CMD`, so compose files and
/// scripts written for images that run tini keep working.
fn arguments() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if commands::init::invoked_as_tini() {
        args.splice(0..1, ["hermes".into(), "init".into()]);
    }
    args
}

/// A closed stdout (`hermes dump | head -1`): the reader has had enough, which is not an error
/// (as ripgrep). Only a failure that *is* an `io::Error` counts, never a library error whose
/// text mentions a pipe (a control connection the supervisor closed).
fn is_broken_pipe(failure: &failure::Failure) -> bool {
    failure.io_kind == Some(std::io::ErrorKind::BrokenPipe)
}

fn run(cli: Cli) -> CommandResult {
    let ctx = Context {
        profile_flag: cli.profile,
    };
    // Under `init`, `-p` is tini's signal, not a profile.
    if !matches!(cli.command, Some(Command::Init(_))) {
        ctx.check_profile_flag()?;
    }
    if cli.version {
        return commands::info::run_version(false);
    }
    match cli.command {
        None => {
            let mut text = String::new();
            if std::io::stdout().is_terminal() {
                text.push_str(&commands::info::banner());
                text.push('\n');
            }
            text.push_str(&cli::command().render_help().to_string());
            output::stdout(&text)?;
            Ok(ExitStatus::Success)
        }
        Some(Command::Up(args)) if args.unit => commands::background::unit(&ctx, &args),
        Some(Command::Up(args)) if args.detach => commands::background::detach(&ctx, &args),
        Some(Command::Up(args)) => commands::up::run(&ctx, &args),
        Some(Command::Down) => commands::background::down(&ctx),
        Some(Command::Service(command)) => commands::service::run(&ctx, command),
        Some(Command::Backup(command)) => commands::backup::run(&ctx, command),
        Some(Command::Gateway(command)) => commands::gateway::run(&ctx, command),
        Some(Command::Chat { query, session }) => {
            commands::chat::run(&ctx, &query, session.as_deref())
        }
        Some(Command::Profile(command)) => commands::profile::run(&ctx, command),
        Some(Command::Auth(command)) => commands::auth::run(&ctx, command),
        Some(Command::Deps(command)) => commands::plugins::run_deps(&ctx, command),
        Some(Command::Plugins(command)) => commands::plugins::run_plugins(&ctx, command),
        Some(Command::Memory(command)) => commands::plugins::run_memory(&ctx, command),
        Some(Command::Config { command }) => commands::config::run(&ctx, command),
        Some(Command::Version(flag)) => commands::info::run_version(flag.json),
        Some(Command::Dump(flag)) => commands::info::run_dump(&ctx, flag.json),
        Some(Command::Doctor(flag)) => commands::info::run_doctor(&ctx, flag.json),
        Some(Command::Migrate(crate::cli::MigrateCommand::Check(flag))) => {
            commands::migrate::run_check(flag.json)
        }
        Some(Command::Health(args)) => commands::health::run(&ctx, &args),
        Some(Command::Dashboard(args)) => commands::dashboard::run(&ctx, args),
        Some(Command::Completions { shell }) => commands::completions::run_completions(shell),
        Some(Command::Man(args)) => commands::completions::run_man(&args),
        Some(Command::Init(mut args)) => {
            // tini's `-p SIG` is init's own flag; before `init` (`hermes -p SIG init`, which
            // the global flag used to take) it still means the signal.
            let signal = args.parent_death_signal.take().or(ctx.profile_flag);
            commands::init::run(args, signal)
        }
    }
}
