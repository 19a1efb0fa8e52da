//! The command line: clap definitions only. Doc comments here are the `--help` text.
//!
//! Nothing in this module does work; `main.rs` turns these types into library settings.

use clap::{Arg, Args, CommandFactory, Parser, Subcommand};

/// Our command tree with `-p` on the commands that act on one profile and the `--help`
/// section naming what is handed over to hermes-agent (`commands::handoff`). Parse, print
/// help and generate completions and the man page with this, never with `Cli::command()`
/// alone.
pub fn command() -> clap::Command {
    let ours = with_profile_flag(Cli::command(), &[]);
    let section = crate::commands::handoff::help_section(&ours);
    ours.after_help(section)
}

/// The commands that act on one profile, as paths of subcommand names: each takes
/// `-p/--profile` after its name too (`hermes gateway start -p work`), and only these show
/// it in their `--help`. Every other command is the same for every profile (`up`, `service`,
/// `version`, …), or names its profile as an argument (`profile show NAME`), or is PID 1
/// (`init`, whose `-p` is tini's signal).
///
/// `-p` before the command (`hermes -p work gateway start`) is the top level's own flag and
/// is accepted before any command, as the profile aliases (`exec hermes -p work "$@"`) need.
pub const PROFILE_COMMANDS: &[&[&str]] = &[
    &["gateway", "run"],
    &["gateway", "start"],
    &["gateway", "stop"],
    &["gateway", "restart"],
    &["gateway", "install"],
    &["gateway", "uninstall"],
    &["chat"],
    &["auth", "list"],
    &["deps", "status"],
    &["deps", "install"],
    &["deps", "ensure"],
    &["plugins", "list"],
    &["memory", "setup"],
    &["memory", "status"],
    &["config", "get"],
    &["config", "set"],
    &["config", "unset"],
    &["config", "path"],
    &["config", "env-path"],
    &["config", "edit"],
    &["dump"],
    &["doctor"],
];

/// The id of the `-p/--profile` argument, at the top level and on [`PROFILE_COMMANDS`].
pub const PROFILE_ARG: &str = "profile";

/// The `-p/--profile` argument of a command in [`PROFILE_COMMANDS`].
fn profile_arg() -> Arg {
    Arg::new(PROFILE_ARG)
        .short('p')
        .long("profile")
        .value_name("NAME")
        .help("Act on this profile instead of the active one (see `hermes profile use`)")
}

/// `command` (at subcommand path `path`) with [`profile_arg`] added to every command of
/// [`PROFILE_COMMANDS`] below it. A lifecycle command's `--all` conflicts with it.
fn with_profile_flag(command: clap::Command, path: &[&str]) -> clap::Command {
    let mut command = command;
    if !path.is_empty() && PROFILE_COMMANDS.contains(&path) {
        command = command.arg(profile_arg());
        if command.get_arguments().any(|a| a.get_id() == "all") {
            command = command.mut_arg("all", |all| all.conflicts_with(PROFILE_ARG));
        }
    }
    let names: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in names {
        let mut sub_path = path.to_vec();
        sub_path.push(&name);
        command = command.mut_subcommand(&name, |sub| with_profile_flag(sub, &sub_path));
    }
    command
}

/// Hermes: run AI agent profiles, their gateways and your services from one binary.
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
    /// Act on this profile instead of the active one (see `hermes profile use`). Commands
    /// that act on one profile take it after their name too.
    #[arg(short = 'p', long = "profile", value_name = "NAME")]
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
    /// Run the supervisor: every profile's gateway, the services in `config.yaml` and the
    /// dashboard. In the foreground Ctrl-C stops everything in order; `-d` runs it in the
    /// background (`hermes down` stops it); `--unit` prints a systemd user unit for it.
    Up(UpArgs),
    /// Stop the supervisor `hermes up -d` started, and every service it runs (gateways finish
    /// their requests first). Nothing running is not an error.
    Down,
    /// Ask the running supervisor about its services, start, stop or restart them, read logs.
    #[command(subcommand)]
    Service(ServiceCommand),
    /// Run and manage each profile's gateway: its agent over an OpenAI-compatible HTTP API.
    #[command(subcommand)]
    Gateway(GatewayCommand),
    /// Ask the profile's agent one question; the answer is printed (streamed on a terminal).
    /// Where the profile's gateway engine is hermes-agent, this is hermes-agent's `chat`.
    Chat {
        /// The question.
        #[arg(short = 'q', long = "query", value_name = "TEXT")]
        query: String,
        /// Continue this conversation (the id printed to stderr by an earlier `chat`).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
    },
    /// Create, list, select and delete profiles.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Inspect stored provider credentials (`auth.json`).
    #[command(subcommand)]
    Auth(AuthCommand),
    /// Back up the data volume while it runs, check an archive, restore one (docs/backup.md).
    #[command(subcommand)]
    Backup(BackupCommand),
    /// Python dependencies of optional features: status, install, ensure.
    #[command(subcommand)]
    Deps(DepsCommand),
    /// Plugins (memory providers): what is installed and available.
    #[command(subcommand)]
    Plugins(PluginsCommand),
    /// Configure and inspect the memory provider.
    #[command(subcommand)]
    Memory(MemoryCommand),
    /// Read and change config.yaml as hermes-agent's `hermes config` does: get, set, unset,
    /// path, env-path, edit (show, check and migrate are hermes-agent's).
    ///
    /// Writes change only the key they set (comments, quoting and order stay). `set` reads
    /// true/yes/on and false/no/off as booleans and digits as numbers.
    Config {
        #[command(subcommand)]
        command: Option<ConfigCommand>,
    },
    /// Print the version, build commit, install method and directory, and hermes-agent's version.
    Version(JsonFlag),
    /// Print a support summary to paste into a bug report (never prints secret values).
    Dump(JsonFlag),
    /// Check this installation and profile; exits 1 if any check fails.
    Doctor(JsonFlag),
    /// Before pointing this image at a volume the original wrote: what carries over.
    #[command(subcommand)]
    Migrate(MigrateCommand),
    /// Exit 0 when the running supervisor answers and no service is failing (failed, crash
    /// loop, still starting); 1 otherwise, one line per problem. The image's healthcheck.
    ///
    /// A volume (HERMES_HOME's file system) 90 % used or more is reported as degraded, in one
    /// line, and still exits 0: this is the liveness probe, and restarting the container does
    /// not free a disk. `--strict` makes degraded exit 1 too.
    Health(HealthArgs),
    /// Serve the web dashboard: services, logs, profiles, plugins, sessions, diagnostics.
    ///
    /// On loopback (the default, 127.0.0.1:9119) a link with a fresh token is printed (under
    /// `hermes up` or in the container: `hermes dashboard link` prints it); any other address
    /// needs HERMES_DASHBOARD_BASIC_AUTH_USERNAME and _PASSWORD (or
    /// _PASSWORD_HASH), or a trusted proxy's user header, or the dashboard refuses to start
    /// (exit 78). Settings come from the environment with the root .env over it. See
    /// docs/dashboard.md.
    Dashboard(DashboardArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell).
    ///
    /// For example `hermes completions bash > ~/.local/share/bash-completion/completions/hermes`;
    /// the README says where each shell looks for one. `hermes completion [SHELL]`, the
    /// original's spelling, is the same command (bash when no shell is given, as there).
    #[command(visible_alias = "completion")]
    Completions {
        /// The shell.
        #[arg(value_enum, default_value_t = Shell::Bash)]
        shell: Shell,
    },
    /// Print the `hermes(1)` manual page (roff), or write every page to a directory.
    ///
    /// `hermes man | man -l -` reads it; packagers run `hermes man --dir DIR`.
    Man(ManArgs),
    /// Run as the container's PID 1: boot, supervise, and run CMD as the main program.
    ///
    /// CMD routing: nothing runs `hermes`; a hermes subcommand or a word starting with `-`
    /// runs `hermes CMD`; a program on PATH runs as is; anything else runs `hermes CMD`.
    /// Exits with the main program's code (128 + signal when it was killed). Flags of tini
    /// (`-s -g -v -w -p SIG -e CODE`) are accepted; see docs/container.md.
    Init(InitArgs),
}

/// The shells `hermes completions` writes for.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Shell {
    /// Bash.
    Bash,
    /// Zsh.
    Zsh,
    /// Fish.
    Fish,
    /// PowerShell.
    Powershell,
}

/// `hermes man [--dir DIR]`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `hermes.1` and a page per command (`hermes-gateway-start.1`, …) into this
    /// existing directory instead of printing `hermes.1`.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// `hermes up [--no-dashboard]`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Do not run the dashboard (on by default; `HERMES_DASHBOARD=0` does the same). It is
    /// still listed, as `disabled`.
    #[arg(long)]
    pub no_dashboard: bool,
    /// Run in the background: return once the supervisor answers, its output appended to
    /// logs/up.log. `hermes down` stops it.
    #[arg(short = 'd', long, conflicts_with = "unit")]
    pub detach: bool,
    /// Print a systemd user unit that runs `hermes up` for this volume, to start it with the
    /// machine: `hermes up --unit > ~/.config/systemd/user/hermes.service`, then
    /// `systemctl --user enable --now hermes`.
    #[arg(long)]
    pub unit: bool,
}

/// `hermes dashboard [--host H] [--port P]`, or `hermes dashboard hash-password`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DashboardArgs {
    #[command(subcommand)]
    pub command: Option<DashboardCommand>,
    /// Address to listen on [env: HERMES_DASHBOARD_HOST; default 127.0.0.1].
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Port to listen on [env: HERMES_DASHBOARD_PORT; default 9119].
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
}

/// `hermes dashboard` subcommands.
#[derive(Debug, Subcommand)]
pub enum DashboardCommand {
    /// Print a bcrypt hash of a password for HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH.
    ///
    /// The password is read from standard input (without echo on a terminal), never from the
    /// command line, where other users could see it in the process list.
    HashPassword,
    /// Print the sign-in link of the dashboard that `hermes up` or the container runs.
    ///
    /// Its supervisor makes the token and keeps it where only the supervisor's user can read
    /// it, so it is never written to the dashboard's log (the volume, the Logs page, backups).
    /// The link works until the supervisor restarts; restarting the dashboard keeps it.
    Link,
}

/// `hermes init [flags] [--] [CMD ...]` (tini-compatible flags).
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Register as a child sub-reaper (always done when not PID 1; accepted for tini).
    #[arg(short = 's', long = "subreaper")]
    pub subreaper: bool,
    /// Forward signals to the main program's process group (always done; accepted for tini).
    #[arg(short = 'g')]
    pub group: bool,
    /// Print more about the boot (repeatable).
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Warn about reaped zombies (accepted for tini; orphans are reaped silently).
    #[arg(short = 'w')]
    pub warn_zombies: bool,
    /// Report this exit code of the main program as 0 (repeatable; tini's `-e`).
    #[arg(short = 'e', value_name = "CODE")]
    pub success_codes: Vec<u8>,
    /// Send this signal to the main program when hermes dies (tini's `-p`; a name such as
    /// `SIGKILL` or `TERM`, or a number). Not a profile: `init` acts on every profile.
    #[arg(short = 'p', value_name = "SIGNAL")]
    pub parent_death_signal: Option<String>,
    /// The command to run as the main program (default: `hermes`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub cmd: Vec<String>,
}

/// `--json` for commands that print state.
#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `hermes health [--json] [--strict]`
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Print machine-readable JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when degraded too (the volume 90 % used or more), not only when unhealthy.
    #[arg(long)]
    pub strict: bool,
}

/// `hermes profile ...`
#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Create a profile (a persona with its own SOUL.md, config, secrets and history).
    Create {
        /// Name: lowercase letters, digits, `_` and `-`, up to 64 characters.
        name: String,
        /// Copy config.yaml, .env, SOUL.md, skills and memories from this profile (the copy
        /// gets an API_SERVER_KEY of its own).
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

/// `hermes migrate ...` (`xai` is hermes-agent's).
#[derive(Debug, Subcommand)]
pub enum MigrateCommand {
    /// Report, per profile, what of this data volume carries over to this image: config
    /// schema, credentials (names only), sessions, memories, skills, cron jobs, messaging
    /// platforms and their packages, API ports, memory provider; and whether this image's
    /// hermes-agent is older than the volume.
    ///
    /// Read-only: nothing on the volume is written, locked or followed through a symlink out
    /// of it. Exits 0 when everything carries over, 1 when something needs attention (each
    /// such line says what to do). Works on a volume of any original release (0.19, 0.20,
    /// 0.21, ...). See docs/diagnostics.md.
    Check(JsonFlag),
}

/// `hermes auth ...`
#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// List the stored credentials: each pool's keys (masked) with their status, and the logins.
    List(JsonFlag),
}

/// `hermes deps ...`
#[derive(Debug, Subcommand)]
pub enum DepsCommand {
    /// List optional features and whether their Python packages are installed.
    Status(JsonFlag),
    /// Install pip specs (e.g. `honcho-ai==2.2.0`) where Hermes's Python finds them.
    ///
    /// Installs go to the core Python environment, or on a sealed image to the durable
    /// target on the data volume (`HERMES_LAZY_INSTALL_TARGET`). See docs/plugins.md.
    Install {
        /// Pip requirement specs: NAME, optional [extras], optional version specifier.
        #[arg(required = true, value_name = "SPEC")]
        specs: Vec<String>,
        /// Resolve only; install nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Install whatever one optional feature is missing (see `hermes deps status`).
    Ensure {
        /// Feature name, e.g. `memory.honcho`.
        feature: String,
        /// Print machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `hermes plugins ...`
#[derive(Debug, Subcommand)]
pub enum PluginsCommand {
    /// List plugins with their dependencies, environment and availability.
    List(JsonFlag),
    /// List the install generations of the durable target (`HERMES_LAZY_INSTALL_TARGET`):
    /// which one is active, what each holds and who asked for it.
    ///
    /// Every install builds a new generation beside the active one and switches to it only
    /// once it imports; a failed or stopped install leaves the active one as it was.
    Generations(JsonFlag),
    /// Remove install generations older than the previous one (the active and the previous
    /// one are kept), and any an install left unfinished.
    Gc(JsonFlag),
    /// Install the durable target's packages again for this image when its Python or core
    /// packages changed since they were installed (boot does this before any gateway starts).
    ///
    /// The packages asked for are resolved into a new generation, active once it imports.
    /// When that fails (no package index reachable, a conflict) the previous generation stays
    /// if it still imports with this image; otherwise none is served and each package is
    /// named with why. Exit 1 when a package asked for is unavailable.
    Repair {
        /// Resolve again even when nothing changed.
        #[arg(long)]
        force: bool,
        /// Time limit of each installer run, in seconds (default 300).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// Boot's form: one line per step for the boot log, and a package index that does not
        /// answer fails fast.
        #[arg(long, hide = true)]
        at_start: bool,
        /// Print machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `hermes config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print a value of config.yaml (a mapping or list as YAML); secrets such as
    /// OPENROUTER_API_KEY come from .env.
    Get {
        /// Dotted key, e.g. `model.default` or `agent.max_turns`.
        key: String,
        /// Print the value as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Set a value, e.g. `hermes config set model.default x/y` or `agent.max_turns 64`.
    Set {
        /// Dotted key; a secret's name (`OPENROUTER_API_KEY`) goes to .env.
        key: String,
        /// The value: true/yes/on, false/no/off, digits and decimals are typed, the rest is
        /// text (a key holding text stays text).
        value: String,
        /// Accepted for scripts written for hermes-agent (it skips an unknown-key notice).
        #[arg(long)]
        force: bool,
    },
    /// Remove a value (and the sections it leaves empty).
    Unset {
        /// Dotted key.
        key: String,
    },
    /// Print the path of config.yaml.
    Path,
    /// Print the path of .env.
    EnvPath,
    /// Open config.yaml in $EDITOR (else $VISUAL, else vi); saved only if it parses.
    Edit,
}

/// `hermes memory ...`
#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Set up a memory provider: install its dependencies, ask for its settings, activate it.
    ///
    /// On a terminal this asks for each setting; in scripts pass them with `--set KEY=VALUE`.
    /// Secrets go to the profile's `.env`, `memory.provider` to `config.yaml`.
    Setup {
        /// The provider (honcho, mem0, hindsight, supermemory, or a user plugin).
        provider: Option<String>,
        /// A setting value, e.g. `--set api_key=...` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        values: Vec<String>,
        /// Never prompt; missing settings use their defaults.
        #[arg(long)]
        non_interactive: bool,
    },
    /// Show the active memory provider and what it is missing.
    Status(JsonFlag),
}

/// `hermes backup ...`
#[derive(Debug, Subcommand)]
pub enum BackupCommand {
    /// Write a zip of the volume (the original's format, with a manifest) while everything runs:
    /// databases through SQLite's online backup, other files under their writers' locks.
    /// A file that cannot be included fails the backup, naming it.
    #[command(
        after_help = "Examples:\n  hermes backup create\n  hermes backup create -o /backups/nightly.zip --profile work\n  docker exec hermes hermes backup create -o - > hermes-backup.zip"
    )]
    Create {
        /// Where to write the archive; `-` streams it to standard output. Default:
        /// `$HERMES_HOME/backups/hermes-backup-<UTC time>.zip`.
        #[arg(short = 'o', long, value_name = "PATH")]
        output: Option<String>,
        /// Only this profile (repeat for several; `default` is the root's files). Default: the
        /// whole volume.
        #[arg(long = "profile", value_name = "NAME")]
        profiles: Vec<String>,
        /// Only what holds state: settings, secrets, databases, memories, cron and pairing
        /// (no logs, skills or plugins).
        #[arg(long)]
        quick: bool,
        /// Deflate the databases too: about half the archive, about eight times the time.
        /// By default they are stored as they are (every other file is deflated), so a backup
        /// takes about as long as SQLite's own backup.
        #[arg(long)]
        compress: bool,
        /// Keep the newest N archives `hermes backup create` wrote in the backup directory;
        /// older ones are removed once the new one passes verification. Default: `backup.keep`
        /// (3). Not with `-o`.
        #[arg(long, value_name = "N", conflicts_with = "output", value_parser = clap::value_parser!(u16).range(1..))]
        keep: Option<u16>,
        /// Print the summary as JSON (on stderr with `-o -`).
        #[arg(long)]
        json: bool,
    },
    /// Check an archive: every checksum, every database's integrity, the manifest against the
    /// contents. Exits 1 naming what is wrong.
    Verify {
        /// The archive.
        file: std::path::PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Restore an archive (ours or the original's): shows what would change, then stages the
    /// files on the volume and swaps them in, all or nothing. Gateways of the profiles that
    /// change are stopped first and started after.
    #[command(
        after_help = "Examples:\n  hermes backup restore backup.zip --dry-run\n  hermes backup restore backup.zip --profile work --yes"
    )]
    Restore {
        /// The archive.
        file: std::path::PathBuf,
        /// Only show what would change.
        #[arg(long)]
        dry_run: bool,
        /// Only this profile's files (repeat for several; `default` is the root's files).
        #[arg(long = "profile", value_name = "NAME")]
        profiles: Vec<String>,
        /// Restore without asking (needed when standard input is not a terminal).
        #[arg(long, short = 'y')]
        yes: bool,
        /// Restore an archive made with a newer config schema than the installed agent's.
        #[arg(long)]
        force: bool,
        /// Print the plan (and what was done) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check every profile's databases (`PRAGMA quick_check`, at most 30 s each). A damaged
    /// one is named, and with `--repair` replaced by the newest sound copy among the archives
    /// in the backup directory (`backup.dir`), the damaged files moved to its `set-aside/`
    /// first. Exits 1 while a damaged database is still served. The container's boot and
    /// `hermes up` run `--at-start` before any gateway starts.
    #[command(after_help = "Examples:
  hermes backup check
  hermes backup check --repair
  docker exec hermes hermes backup check --json")]
    Check {
        /// Restore each damaged database from the newest archive that holds a sound copy.
        #[arg(long, conflicts_with = "at_start")]
        repair: bool,
        /// What a start does: restore a damaged database when `backup.restore_corrupt` is on
        /// (the default), print only what is not sound, and exit 0.
        #[arg(long)]
        at_start: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Roll back a restore that a kill or power cut interrupted. Every `hermes backup` command
    /// and the container's boot do this by themselves.
    Recover,
    /// The `backup` service: scheduled backups (`backup.schedule`) until stopped. Run by the
    /// supervisor.
    #[command(hide = true)]
    Scheduled,
}

/// `hermes service ...`
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// List the supervised services (names and states).
    List(JsonFlag),
    /// Show NAME, STATE, PID, UPTIME, MEMORY (with its limit), CPU, RESTARTS, LAST EXIT and
    /// REASON of all services or one (`--json`: also the 15-minute history of memory and CPU).
    Status {
        /// Only this service.
        name: Option<String>,
        /// Print machine-readable JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Start a service and wait until it is ready (or say why it is not).
    Start {
        /// The service.
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Stop a service (stop signal to its process group, SIGKILL after the grace period).
    Stop {
        /// The service.
        name: String,
    },
    /// Restart a service and wait until it is ready (or say why it is not).
    Restart {
        /// The service.
        name: String,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Print a service's log (`$HERMES_HOME/logs/<service>/current`).
    Logs {
        /// The service.
        name: String,
        /// Print only the last N lines.
        #[arg(short = 'n', long = "lines", value_name = "N", default_value_t = 50)]
        lines: usize,
        /// Keep printing new lines as they are written (Ctrl-C to stop).
        #[arg(short = 'f', long)]
        follow: bool,
    },
}

/// `hermes gateway ...`
#[derive(Debug, Subcommand)]
pub enum GatewayCommand {
    /// Run this profile's gateway. With a supervisor running it is handed to the supervisor
    /// (and its log followed); otherwise it runs in the foreground until Ctrl-C / SIGTERM.
    Run {
        /// Take over from a gateway already running for this profile.
        #[arg(long)]
        replace: bool,
        /// Always run in the foreground, never hand over to the supervisor (also
        /// `HERMES_GATEWAY_NO_SUPERVISE=1`).
        #[arg(long)]
        no_supervise: bool,
    },
    /// Start the gateway of this profile (or of every profile) under the running supervisor
    /// and wait until it serves (or say why it does not).
    Start {
        #[command(flatten)]
        target: GatewayTarget,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Stop the gateway of this profile (or of every profile); it stays stopped after a restart.
    Stop(GatewayTarget),
    /// Restart the gateway of this profile (or of every profile) and wait until it serves.
    Restart {
        #[command(flatten)]
        target: GatewayTarget,
        #[command(flatten)]
        wait: WaitArgs,
    },
    /// Every profile's gateway: supervisor state, recorded state, address.
    Status(JsonFlag),
    /// Every profile's gateway service name and address.
    List(JsonFlag),
    /// Write a systemd user unit that runs this profile's gateway (hosts only).
    Install,
    /// Remove the systemd user unit of this profile's gateway (hosts only).
    Uninstall,
}

/// How a start or restart waits for the service to be ready.
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// Wait at most this many seconds for readiness.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub timeout: u64,
    /// Do not wait: return once the supervisor has the request.
    #[arg(long, conflicts_with = "timeout")]
    pub no_wait: bool,
}

/// Which gateways a lifecycle command acts on.
#[derive(Debug, Args)]
pub struct GatewayTarget {
    /// Every profile's gateway instead of the selected profile's (not with `-p`).
    #[arg(long)]
    pub all: bool,
}
