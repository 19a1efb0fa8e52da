//! The command line: clap definitions only. Doc comments here are the `--help` text.
//!
//! Nothing in this module does work; `main.rs` turns these types into library settings.

use clap::{Args, Parser, Subcommand};

/// Hermes: run AI agent profiles, their gateways and a dashboard from one binary.
///
/// Data lives in `HERMES_HOME` (default `~/.hermes`; `/opt/data` in the container). The root
/// is the `default` profile; named profiles live in `profiles/<name>/`.
#[derive(Debug, Parser)]
#[command(
    name = "hermes",
    disable_version_flag = true,
    arg_required_else_help = false
)]
pub struct Cli {
    /// Act on this profile instead of the active one (see `hermes profile use`).
    #[arg(short = 'p', long = "profile", global = true, value_name = "NAME")]
    pub profile: Option<String>,

    /// Print version information and exit.
    #[arg(short = 'V', long = "version")]
    pub version: bool,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, list, select and delete profiles.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Inspect stored provider credentials (`auth.json`).
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Print the version, build commit, install method and install directory.
    Version(JsonFlag),
    /// Print a support summary to paste into a bug report (never prints secret values).
    Dump(JsonFlag),
    /// Check this installation and profile; exits 1 if any check fails.
    Doctor(JsonFlag),
}

/// `--json` for commands that print state.
#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `hermes profile ...`
#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Create a profile (a persona with its own SOUL.md, config, secrets and history).
    Create {
        /// Name: lowercase letters, digits, `_` and `-`, up to 64 characters.
        name: String,
        /// Copy config.yaml, .env, SOUL.md, skills and memories from this profile.
        #[arg(long, value_name = "PROFILE")]
        clone_from: Option<String>,
        /// A one-line description shown by `hermes profile list`.
        #[arg(long, value_name = "TEXT")]
        description: Option<String>,
        /// Do not write the `~/.local/bin/<name>` wrapper that runs `hermes -p <name>`.
        #[arg(long)]
        no_alias: bool,
    },
    /// Delete a profile: moved to `profiles/.trash/` (recoverable) unless `--purge`.
    Delete {
        /// The profile to delete.
        name: String,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Remove the profile's files for good instead of moving them to the trash.
        #[arg(long)]
        purge: bool,
    },
    /// List profiles.
    List(JsonFlag),
    /// Show one profile's details.
    Show {
        /// The profile to show.
        name: String,
        /// Print machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Make a profile the default for later commands (`default` resets).
    Use {
        /// The profile to activate.
        name: String,
    },
}

/// `hermes auth ...`
#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// List the providers that have stored credentials (names only, never secrets).
    List(JsonFlag),
}
