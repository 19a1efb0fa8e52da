//! Hand-over to hermes-agent's own CLI: one `hermes` command for both programs.
//!
//! Words:
//! * **agent** — the original `hermes-agent` (its console script is also called `hermes`),
//!   found by `hermes_services::agent::locate`.
//! * **hand over** — replace this process with the agent's CLI (`execve`): the same arguments
//!   (global flags such as `-p work` included), the same environment, the same process, so its
//!   exit code, signals and terminal are the agent's. It happens after the root-exec shim, so
//!   inside the image the agent runs as the service user too.
//!
//! What goes where ([`route`], decided on the raw arguments before clap parses them, so our
//! own commands' usage errors stay ours):
//!
//! | first word after `-p NAME` | goes to |
//! |---|---|
//! | nothing (bare `hermes`) | the agent's interactive chat; our help when it is not installed |
//! | one of our commands | us, except `chat` for a profile whose engine is the agent, and the subcommands of a shared command that only the agent has (`auth add`, `memory off`, ...) |
//! | one of the agent's commands ([`AGENT_COMMANDS`]) | the agent |
//! | `-h`, `--help`, `-V`, `--version` | us |
//! | one of the agent's top-level flags ([`AGENT_FLAGS`]: `-z PROMPT`, `--tui`, ...) | the agent |
//! | any other word | clap's error when it is close to one of our commands (its suggestion); else the agent when installed (its plugins add commands) |
//!
//! An agent command where the agent is not installed fails with one `error:` line naming
//! hermes-agent and a hint, exit 127 ([`NOT_INSTALLED_EXIT`]).
//!
//! The lists below are hermes-agent 0.19.0's argparse definition (`hermes_cli/_parser.py` and
//! the `subparsers.add_parser` calls of `hermes_cli/main.py`), kept static so routing never
//! starts Python; a CLI test compares them with the installed agent's `--help`.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use hermes_services::agent::{self, Agent, Engine};

use crate::context::Context;
use crate::failure::Failure;

/// Exit code when an agent command is asked for and the agent is not installed: the shell's
/// "command not found", as `hermes init` uses for a CMD that cannot be started.
pub const NOT_INSTALLED_EXIT: u8 = 127;

/// Exit code when the agent's CLI exists but cannot be executed (the shell's convention).
const CANNOT_EXEC_EXIT: u8 = 126;

/// hermes-agent 0.19.0's top-level commands, aliases included, in its `--help` order.
pub const AGENT_COMMANDS: &[&str] = &[
    "chat",
    "model",
    "moa",
    "fallback",
    "secrets",
    "migrate",
    "gateway",
    "proxy",
    "lsp",
    "setup",
    "postinstall",
    "whatsapp",
    "whatsapp-cloud",
    "slack",
    "send",
    "login",
    "logout",
    "auth",
    "status",
    "cron",
    "webhook",
    "portal",
    "kanban",
    "project",
    "hooks",
    "doctor",
    "security",
    "dump",
    "debug",
    "backup",
    "checkpoints",
    "import",
    "config",
    "console",
    "pairing",
    "skills",
    "bundles",
    "plugins",
    "curator",
    "pets",
    "journey",
    "learning",
    "memory-graph",
    "memory",
    "tools",
    "computer-use",
    "mcp",
    "sessions",
    "insights",
    "claw",
    "version",
    "update",
    "uninstall",
    "acp",
    "profile",
    "completion",
    "dashboard",
    "serve",
    "desktop",
    "gui",
    "logs",
    "prompt-size",
];

/// The subcommands of the agent's commands that we also have, aliases included: those we do
/// not implement are handed over (`hermes auth add`), ours stay ours (`hermes auth list`).
pub const AGENT_SUBCOMMANDS: &[(&str, &[&str])] = &[
    (
        "auth",
        &[
            "add", "list", "remove", "reset", "status", "logout", "spotify",
        ],
    ),
    (
        "gateway",
        &[
            "run",
            "start",
            "stop",
            "restart",
            "status",
            "install",
            "uninstall",
            "list",
            "setup",
            "migrate-legacy",
            "enroll",
        ],
    ),
    (
        "config",
        &[
            "show", "edit", "get", "set", "unset", "path", "env-path", "check", "migrate",
        ],
    ),
    ("memory", &["setup", "status", "off", "reset"]),
    ("migrate", &["xai"]),
    (
        "plugins",
        &[
            "install",
            "update",
            "remove",
            "rm",
            "uninstall",
            "list",
            "ls",
            "enable",
            "disable",
        ],
    ),
    (
        "profile",
        &[
            "list", "use", "create", "delete", "describe", "show", "alias", "rename", "export",
            "import", "install", "update", "info",
        ],
    ),
];

/// The agent's top-level flags besides `-h/--help` and `-V/--version` (ours) and
/// `-p/--profile` (both programs read it the same way).
pub const AGENT_FLAGS: &[&str] = &[
    "-z",
    "--oneshot",
    "--usage-file",
    "-m",
    "--model",
    "--provider",
    "-t",
    "--toolsets",
    "-r",
    "--resume",
    "--no-restore-cwd",
    "-c",
    "--continue",
    "-w",
    "--worktree",
    "--accept-hooks",
    "-s",
    "--skills",
    "--yolo",
    "--pass-session-id",
    "--ignore-user-config",
    "--ignore-rules",
    "--safe-mode",
    "--tui",
    "--cli",
    "--dev",
];

/// Where an invocation goes (module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Our CLI parses it (and reports its usage errors).
    Ours,
    /// The agent's CLI; `what` names the command for the not-installed error (`hermes cron`).
    Agent {
        /// The command as the user typed it, e.g. `hermes auth add` or `hermes -z`.
        what: String,
    },
    /// Bare `hermes` (perhaps with `-p NAME`).
    Bare,
    /// `hermes chat`: the agent's or ours, by the profile's engine.
    Chat,
    /// A word neither CLI lists (an agent plugin's command, or a typo).
    Unknown,
}

/// The invocation after the program name: where it goes and the `-p` it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Where it goes.
    pub route: Route,
    /// The last `-p/--profile` value before `--`, wherever it is (clap's global flag).
    pub profile: Option<String>,
}

/// Routes `args` (the full argv, program name first) against our command tree `ours`.
pub fn route(args: &[OsString], ours: &clap::Command) -> Invocation {
    let mut words = args.iter().skip(1).map(|a| a.to_str());
    let route = loop {
        let Some(word) = words.next() else {
            break Route::Bare;
        };
        // A word that is not UTF-8 is nobody's command: clap reports it.
        let Some(word) = word else { break Route::Ours };
        if profile_flag(word, &mut words).is_some() {
            continue;
        }
        if word.starts_with('-') {
            break flag_route(word);
        }
        let next = words.next().flatten();
        break word_route(word, next, ours);
    };
    Invocation {
        route,
        profile: profile_in(args),
    }
}

/// The last `-p/--profile` value anywhere before `--` (clap's global flag may follow the
/// command: `hermes chat -p work -q hi`).
fn profile_in(args: &[OsString]) -> Option<String> {
    let mut words = args.iter().skip(1).map(|a| a.to_str());
    let mut found = None;
    while let Some(word) = words.next() {
        match word {
            Some("--") => break,
            Some(word) => {
                if let Some(value) = profile_flag(word, &mut words) {
                    found = value;
                }
            }
            None => {}
        }
    }
    found
}

/// `-p NAME`, `-pNAME`, `--profile NAME`, `--profile=NAME`: `Some(value)` when `word` is the
/// profile flag (taking its value from `rest` when separate), `None` otherwise.
fn profile_flag<'a>(
    word: &str,
    rest: &mut impl Iterator<Item = Option<&'a str>>,
) -> Option<Option<String>> {
    match word {
        "-p" | "--profile" => Some(rest.next().flatten().map(str::to_owned)),
        _ => word
            .strip_prefix("--profile=")
            .or_else(|| word.strip_prefix("-p").filter(|v| !v.starts_with('-')))
            .map(|v| v.strip_prefix('=').unwrap_or(v))
            .filter(|v| !v.is_empty())
            .map(|v| Some(v.to_owned())),
    }
}

/// A flag before any command: the agent's when it is one of [`AGENT_FLAGS`]; otherwise ours
/// (`-h`, `-V`, which the agent has too) or clap's to reject (a flag neither has).
fn flag_route(word: &str) -> Route {
    let name = flag_name(word);
    if AGENT_FLAGS.contains(&name) {
        Route::Agent {
            what: format!("hermes {name}"),
        }
    } else {
        Route::Ours
    }
}

/// The flag itself: `--model=x` → `--model`, `-zPROMPT` → `-z`.
fn flag_name(word: &str) -> &str {
    if let Some(long) = word.strip_prefix("--") {
        let end = long.find('=').map_or(word.len(), |i| i + 2);
        &word[..end]
    } else {
        word.get(..2).unwrap_or(word)
    }
}

/// The first word `word` (and the one after it, `next`, for a shared command's subcommand).
fn word_route(word: &str, next: Option<&str>, ours: &clap::Command) -> Route {
    if let Some(our) = ours.find_subcommand(word) {
        if our.get_name() == "chat" {
            return Route::Chat;
        }
        return match next.filter(|n| only_the_agents(our, n)) {
            Some(sub) => Route::Agent {
                what: format!("hermes {word} {sub}"),
            },
            None => Route::Ours,
        };
    }
    if word == "help" {
        return Route::Ours;
    }
    if AGENT_COMMANDS.contains(&word) {
        return Route::Agent {
            what: format!("hermes {word}"),
        };
    }
    Route::Unknown
}

/// Whether `sub` is a subcommand the agent has under our command `our` and we do not.
fn only_the_agents(our: &clap::Command, sub: &str) -> bool {
    our.find_subcommand(sub).is_none()
        && AGENT_SUBCOMMANDS
            .iter()
            .any(|(name, subs)| *name == our.get_name() && subs.contains(&sub))
}

/// The agent's top-level commands we do not have, and its subcommands of ours we do not have
/// (`auth add|remove|...`), for `--help`.
pub fn handed_over(
    ours: &clap::Command,
) -> (Vec<&'static str>, Vec<(&'static str, Vec<&'static str>)>) {
    let commands = AGENT_COMMANDS
        .iter()
        .copied()
        .filter(|c| ours.find_subcommand(c).is_none())
        .collect();
    let subcommands = AGENT_SUBCOMMANDS
        .iter()
        .filter_map(|(name, subs)| {
            let our = ours.find_subcommand(name)?;
            let only: Vec<&str> = subs
                .iter()
                .copied()
                .filter(|s| our.find_subcommand(s).is_none())
                .collect();
            (!only.is_empty()).then_some((*name, only))
        })
        .collect();
    (commands, subcommands)
}

/// The `--help` section naming what is handed over.
pub fn help_section(ours: &clap::Command) -> String {
    let (commands, subcommands) = handed_over(ours);
    let mut text = String::from("Commands of hermes-agent (handed over when it is installed):\n");
    text.push_str(&wrap(&commands.join(", "), "  ", 76));
    for (name, subs) in subcommands {
        text.push_str(&format!("  {name} {}\n", subs.join("|")));
    }
    text.push_str(&wrap(
        &format!("flags: {}", AGENT_FLAGS.join(", ")),
        "  ",
        76,
    ));
    text.push_str(
        "  bare `hermes`: its interactive chat (our help when it is not installed)\n  \
         `chat`: its chat when the profile's gateway engine is the agent\n",
    );
    text
}

/// `text` broken at `, ` into lines of at most `width` characters, each after `indent`.
fn wrap(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for item in text.split_inclusive(", ") {
        if !line.is_empty() && line.len() + item.trim_end().len() > width {
            out.push_str(&format!("{indent}{}\n", line.trim_end()));
            line.clear();
        }
        line.push_str(item);
    }
    if !line.is_empty() {
        out.push_str(&format!("{indent}{}\n", line.trim_end()));
    }
    out
}

/// The installed agent, if any (`HERMES_AGENT_CLI`, else the full image's install).
pub fn installed() -> Option<Agent> {
    agent::locate(Context::var)
}

/// Hands `args` over to the agent, or explains that `what` needs it. Returns only on failure.
pub fn hand_over(args: &[OsString], what: &str) -> Failure {
    match installed() {
        Some(agent) => exec(&agent, args),
        None => not_installed(what),
    }
}

/// Replaces this process with the agent's CLI and `args` (the program name dropped). Returns
/// only when that fails.
pub fn exec(agent: &Agent, args: &[OsString]) -> Failure {
    let error = std::process::Command::new(&agent.cli)
        .args(args.iter().skip(1))
        .exec();
    let mut failure = Failure::new(
        format!("cannot run hermes-agent's CLI `{}`", agent.cli.display()),
        Some(format!(
            "check that `{}` is an executable console script of hermes-agent (`{}` names it)",
            agent.cli.display(),
            agent::AGENT_CLI_VAR
        )),
    );
    failure.causes.push(error.to_string());
    failure.code = CANNOT_EXEC_EXIT;
    failure
}

/// The one-line refusal for an agent command where the agent is not installed; its hint
/// names our own command for the same thing first, when there is one ([`built_in_for`]).
pub fn not_installed(what: &str) -> Failure {
    let install = format!(
        "for hermes-agent's own, {}",
        agent::Place::current().get_the_agent()
    );
    let hint = match built_in_for(what) {
        Some(ours) => format!("{ours}; {install}"),
        None => install,
    };
    let mut failure = Failure::new(
        format!("`{what}` is a command of hermes-agent, which is not installed here"),
        Some(hint),
    );
    failure.code = NOT_INSTALLED_EXIT;
    failure
}

/// What Hermes itself offers in place of the agent's command `what` (`hermes logs`), if
/// anything.
fn built_in_for(what: &str) -> Option<&'static str> {
    let command = what.split_whitespace().nth(1)?;
    Some(match command {
        "logs" => {
            "`hermes service logs gateway-default` shows a gateway's log (`--follow` to follow \
             it), `hermes service logs SERVICE` any service's"
        }
        "sessions" => {
            "the dashboard's Sessions page lists and searches them (`hermes dashboard`), and \
             `hermes chat --session ID` goes on with one"
        }
        "status" => "`hermes service status` shows every service, `hermes doctor` what is wrong",
        "cron" => "the dashboard's Cron page shows the jobs and their ticker",
        _ => return None,
    })
}

/// The agent to run `hermes chat` with: `Some` when the selected profile's gateway engine is
/// the agent (`hermes_services::agent::profile_engine`, as `gateway run` decides it), `None`
/// for our own chat.
///
/// # Errors
/// A home that cannot be opened, or an engine setting that cannot be honoured (an unknown
/// value, the agent asked for and not installed, an unreadable `config.yaml`).
pub fn chat_agent(ctx: &Context) -> Result<Option<Agent>, Failure> {
    let home = ctx.home()?;
    let (engine, agent) = agent::profile_engine(home.dir(), Context::var)
        .map_err(|problem| Failure::from(hermes_services::Error::from(problem)))?;
    Ok(agent.filter(|_| engine == Engine::Agent))
}

/// Hands the invocation over when it is the agent's (module doc). `Ok` means our CLI runs
/// it; `Err` is the failure to report (the exec failed, or the agent is not installed).
///
/// # Errors
/// See [`hand_over`] and [`chat_agent`].
pub fn before_parse(args: &[OsString], invocation: &Invocation) -> Result<(), Failure> {
    let agent = match &invocation.route {
        Route::Agent { what } => return Err(hand_over(args, what)),
        Route::Bare => installed(),
        Route::Chat => chat_agent(&Context {
            profile_flag: invocation.profile.clone(),
        })?,
        Route::Ours | Route::Unknown => None,
    };
    match agent {
        Some(agent) => Err(exec(&agent, args)),
        None => Ok(()),
    }
}

/// After clap rejected an [`Route::Unknown`] word: the agent's failure to report when it took
/// the invocation over (see [`unknown_goes_to_agent`]), `None` to print clap's error.
pub fn after_rejection(
    args: &[OsString],
    invocation: &Invocation,
    error: &clap::Error,
) -> Option<Failure> {
    if invocation.route != Route::Unknown || !unknown_goes_to_agent(error) {
        return None;
    }
    installed().map(|agent| exec(&agent, args))
}

/// Whether a word neither CLI lists goes to the agent after clap rejected it: only when clap
/// has no suggestion among our commands (a typo of ours keeps clap's "did you mean").
pub fn unknown_goes_to_agent(error: &clap::Error) -> bool {
    error.kind() == clap::error::ErrorKind::InvalidSubcommand
        && error
            .get(clap::error::ContextKind::SuggestedSubcommand)
            .is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn route_of(args: &[&str]) -> Invocation {
        let argv: Vec<OsString> = std::iter::once("hermes")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        route(&argv, &crate::cli::Cli::command())
    }

    fn agent(what: &str) -> Route {
        Route::Agent { what: what.into() }
    }

    #[test]
    fn agent_commands_and_flags_go_to_the_agent_with_the_profile_seen() {
        assert_eq!(route_of(&["cron", "list"]).route, agent("hermes cron"));
        let work = route_of(&["-p", "work", "sessions", "list"]);
        assert_eq!(work.route, agent("hermes sessions"));
        assert_eq!(work.profile.as_deref(), Some("work"));
        assert_eq!(
            route_of(&["--profile=work", "-z", "hi"]).profile.as_deref(),
            Some("work")
        );
        assert_eq!(route_of(&["-pwork", "-zhi"]).route, agent("hermes -z"));
        assert_eq!(
            route_of(&["--model=x", "chat"]).route,
            agent("hermes --model")
        );
        assert_eq!(route_of(&["--tui"]).route, agent("hermes --tui"));
    }

    #[test]
    fn our_commands_flags_and_their_errors_stay_ours() {
        for args in [
            &["version"][..],
            &["dump", "--json"],
            &["gateway", "run", "--bogus"],
            &["gateway", "bogus"],
            &["auth", "list"],
            &["-V"],
            &["--help"],
            &["--bogus"],
            &["help", "cron"],
            &["-p", "work", "profile", "list"],
        ] {
            assert_eq!(route_of(args).route, Route::Ours, "{args:?}");
        }
    }

    #[test]
    fn subcommands_only_the_agent_has_under_a_shared_command_go_to_it() {
        assert_eq!(
            route_of(&["auth", "add", "openrouter"]).route,
            agent("hermes auth add")
        );
        assert_eq!(
            route_of(&["memory", "off"]).route,
            agent("hermes memory off")
        );
        assert_eq!(route_of(&["memory", "status"]).route, Route::Ours);
    }

    #[test]
    fn bare_chat_and_unknown_words_are_decided_later() {
        assert_eq!(route_of(&[]).route, Route::Bare);
        assert_eq!(route_of(&["-p", "work"]).route, Route::Bare);
        let chat = route_of(&["chat", "-q", "hi", "--profile", "work"]);
        assert_eq!(chat.route, Route::Chat);
        assert_eq!(chat.profile.as_deref(), Some("work"));
        assert_eq!(route_of(&["honcho", "status"]).route, Route::Unknown);
    }

    #[test]
    fn clap_keeps_typos_of_our_commands_and_lets_other_words_go() {
        let parse = |word: &str| {
            crate::cli::Cli::command()
                .try_get_matches_from(["hermes", word])
                .unwrap_err()
        };
        assert!(!unknown_goes_to_agent(&parse("gatewy")));
        assert!(unknown_goes_to_agent(&parse("honcho")));
    }

    #[test]
    fn help_lists_what_is_handed_over_and_not_ours() {
        let text = help_section(&crate::cli::Cli::command());
        assert!(text.contains("sessions") && text.contains("cron"), "{text}");
        assert!(
            text.contains("  auth add|remove|reset|status|logout|spotify\n"),
            "{text}"
        );
        let (commands, _) = handed_over(&crate::cli::Cli::command());
        assert!(!commands.contains(&"version") && !commands.contains(&"chat"));
        assert!(text.lines().all(|l| l.len() <= 80), "{text}");
    }

    #[test]
    fn the_refusal_names_the_command_and_how_to_get_the_agent() {
        let failure = not_installed("hermes cron");
        assert_eq!(failure.code, NOT_INSTALLED_EXIT);
        assert_eq!(
            failure.message,
            "`hermes cron` is a command of hermes-agent, which is not installed here"
        );
        let hint = failure.hint.unwrap();
        assert!(
            hint.contains(&agent::Place::current().get_the_agent()),
            "{hint}"
        );
    }

    #[test]
    fn the_refusal_names_our_own_command_for_the_same_thing_first() {
        for (what, ours) in [
            ("hermes logs", "`hermes service logs gateway-default`"),
            ("hermes sessions", "Sessions page"),
        ] {
            let hint = not_installed(what).hint.unwrap();
            let how = agent::Place::current().get_the_agent();
            let (built_in, agent) = (hint.find(ours), hint.find(&how));
            assert!(
                built_in.is_some() && agent.is_some() && built_in < agent,
                "{what}: ours first, then the agent: {hint}"
            );
        }
        assert!(
            !not_installed("hermes skills")
                .hint
                .unwrap()
                .contains("dashboard")
        );
    }
}
