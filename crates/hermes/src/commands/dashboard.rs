//! `hermes dashboard`: resolves the settings (refusing a public bind without credentials,
//! exit 78), binds, prints how to get in (stderr) and the original's readiness line
//! `HERMES_DASHBOARD_READY port=N` (stdout), and serves until stopped; `hermes dashboard
//! hash-password` makes a password hash for the settings. The server is `hermes-dashboard`'s;
//! this module only wires it to the command line.

use std::io::{BufRead, IsTerminal};
use std::path::Path;
use std::sync::Arc;

use hermes_dashboard::{Auth, Settings};
use hermes_home::config::Config;
use hermes_home::dotenv::DotEnv;
use hermes_settings::{ProfileFiles, Scope};

use crate::cli::{DashboardArgs, DashboardCommand};
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// Threads for blocking work (control-socket calls, files, password hashes).
const BLOCKING_THREADS: usize = 4;

/// bcrypt's cost for new hashes: about a quarter of a second here, the common default.
const HASH_COST: u32 = 12;

/// Runs the dashboard in the foreground, or its subcommand.
pub fn run(ctx: &Context, args: DashboardArgs) -> CommandResult {
    match args.command {
        Some(DashboardCommand::HashPassword) => return hash_password(),
        Some(DashboardCommand::Link) => return link(ctx),
        None => {}
    }
    let root = ctx.root()?;
    let settings = settings_of(&root, args.host, args.port, &[])?;
    // One thread serves the pages and the event streams (they only wait); status, actions
    // and files block on the blocking pool, capped so that 32 clients asking at once queue
    // for a few threads instead of each getting one (and its stack) for good.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(BLOCKING_THREADS)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = hermes_dashboard::bind(&settings)
            .await
            .map_err(Failure::from)?;
        let port = listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or(settings.port);
        output::stderr(&announce(&settings, port));
        // For a parent that started us on port 0 (the original's desktop app and launchers):
        // the port actually bound, on stdout, flushed, once the socket accepts connections.
        // Best effort: a parent that closed our stdout must not stop the dashboard.
        let _ = output::stdout(&format!("{} port={port}\n", hermes_dashboard::READY_TOKEN));
        let vars: hermes_dashboard::Vars = Arc::new(Context::var);
        let router = hermes_dashboard::router(root, settings, vars);
        hermes_dashboard::serve(listener, router)
            .await
            .map_err(Failure::from)
    })?;
    Ok(ExitStatus::Success)
}

/// The dashboard's settings as `hermes dashboard` resolves them: from the default profile's
/// environment, as its gateway's (`hermes_settings`: `.env` over the process environment, so a
/// password hash can live in `.env` beside the other secrets), the process environment with
/// the variables a supervisor `given` the dashboard (for a link).
fn settings_of(
    root: &Path,
    host: Option<String>,
    port: Option<u16>,
    given: &[(String, String)],
) -> Result<Settings, Failure> {
    let dotenv = DotEnv::load(&hermes_home::layout::env_path(root))?;
    // A `config.yaml` that does not parse must not keep the dashboard that can fix it from
    // starting: it is read as empty here.
    let config = hermes_settings::config_of(root)
        .unwrap_or_else(|_| Config::empty(&hermes_home::layout::config_path(root)));
    let mut env = hermes_settings::process_env();
    env.retain(|(k, _)| !given.iter().any(|(g, _)| g == k));
    env.extend(given.iter().cloned());
    let files = ProfileFiles::from_parts(dotenv, config, Scope::Default, env);
    // In the image, configured credentials make the default host the original image's
    // (all addresses), so a published port reaches the dashboard (`Place::Image`).
    let place = if hermes_privilege::image_marker_present(Path::new(hermes_privilege::IMAGE_MARKER))
    {
        hermes_dashboard::Place::Image
    } else {
        hermes_dashboard::Place::Machine
    };
    Settings::resolve_at(place, host, port, files.lookup()).map_err(Failure::from)
}

/// The address to sign in at, as the dashboard given `kept` by its supervisor resolves it.
pub fn sign_in_link(root: &Path, kept: &hermes_services::sign_in::Kept) -> Result<String, Failure> {
    let settings = settings_of(root, None, None, &kept.environment())?;
    Ok(link_text(&settings, settings.port))
}

/// `hermes dashboard link`: the sign-in link of the dashboard a supervisor runs, from what it
/// keeps in its runtime directory (`hermes_services::sign_in`), or with the operator's
/// `HERMES_DASHBOARD_SESSION_TOKEN`.
fn link(ctx: &Context) -> CommandResult {
    let root = ctx.root()?;
    let dir = hermes_services::find_runtime_dir(&root, Context::var);
    let kept = hermes_services::sign_in::kept(&dir).map_err(|e| {
        Failure::new(
            format!(
                "cannot read the dashboard's sign-in token in `{}`: {}",
                dir.display(),
                hermes_errors::describe_io(&e)
            ),
            Some("it is readable by the supervisor's user only: run this as that user (in the container as root: `docker exec <container> hermes dashboard link`)".into()),
        )
    })?;
    let given = kept.map(|k| k.environment()).unwrap_or_default();
    let settings = settings_of(&root, None, None, &given)?;
    if settings.auth == Auth::Token && !settings.token_given {
        return Err(Failure::new(
            "no supervisor keeps a sign-in token for the dashboard",
            Some("start it with `hermes up` (in the container: HERMES_DASHBOARD=1); `hermes dashboard` in the foreground prints its own link".into()),
        ));
    }
    output::stdout(&format!("{}\n", link_text(&settings, settings.port)))?;
    Ok(ExitStatus::Success)
}

/// What is printed once at start: where it listens and how to get in (the token link on
/// loopback, as Jupyter does; never the password).
fn announce(settings: &Settings, port: u16) -> String {
    let link = link_text(settings, port);
    match &settings.auth {
        // A token that was given is never printed: under a supervisor this is a service log
        // (on the volume, on the Logs page, in every backup).
        Auth::Token if settings.token_given => format!(
            "Hermes dashboard on {}\nSign in with the link `hermes dashboard link` prints (the token is not written here)\n",
            address(settings, port)
        ),
        Auth::Token => format!(
            "Hermes dashboard on {}\nOpen this link to sign in (it works until the dashboard restarts):\n    {link}\n",
            address(settings, port)
        ),
        _ => format!("Hermes dashboard on {link}\n"),
    }
}

/// `http://host:port/base/`, an IPv6 host in brackets.
fn address(settings: &Settings, port: u16) -> String {
    let host = if settings.host.contains(':') && !settings.host.starts_with('[') {
        format!("[{}]", settings.host)
    } else {
        settings.host.clone()
    };
    format!("http://{host}:{port}{}/", settings.base_path)
}

/// Where to sign in: the token link on loopback (as Jupyter does), else the address and how
/// the dashboard authenticates (never the password).
fn link_text(settings: &Settings, port: u16) -> String {
    let address = address(settings, port);
    match &settings.auth {
        Auth::Token => format!("{address}?token={}", settings.token),
        Auth::Basic { username, .. } => {
            format!("{address} (basic authentication as `{username}`)")
        }
        Auth::Proxy { header } => {
            format!("{address} (users signed in by the trusted proxy's `{header}` header)")
        }
    }
}

/// `hermes dashboard hash-password`: reads a password from standard input (echo off on a
/// terminal) and prints the line to put in `.env`.
fn hash_password() -> CommandResult {
    let stdin = std::io::stdin();
    let terminal = stdin.is_terminal();
    if terminal {
        output::stderr("Password (not shown): ");
    }
    let line = read_secret_line(&stdin, terminal)?;
    if terminal {
        output::stderr("\n");
    }
    let password = line.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        return Err(Failure::new(
            "no password given on standard input",
            Some("type it at the prompt, or pipe it: printf '%s' \"$PASSWORD\" | hermes dashboard hash-password".into()),
        ));
    }
    let hash = bcrypt::non_truncating_hash(password, HASH_COST).map_err(|e| {
        Failure::new(
            format!("cannot hash the password: {e}"),
            Some("bcrypt takes at most 72 bytes; use a shorter password".into()),
        )
    })?;
    output::stdout(&format!(
        "HERMES_DASHBOARD_BASIC_AUTH_PASSWORD_HASH='{hash}'\n"
    ))?;
    Ok(ExitStatus::Success)
}

/// One line from `stdin`, with the terminal's echo switched off while it is typed.
fn read_secret_line(stdin: &std::io::Stdin, terminal: bool) -> Result<String, Failure> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    let saved = if terminal {
        tcgetattr(stdin).ok()
    } else {
        None
    };
    if let Some(saved) = &saved {
        let mut quiet = saved.clone();
        quiet.local_flags.remove(LocalFlags::ECHO);
        let _ = tcsetattr(stdin, SetArg::TCSANOW, &quiet);
    }
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if let Some(saved) = &saved {
        let _ = tcsetattr(stdin, SetArg::TCSANOW, saved);
    }
    read?;
    Ok(line)
}
