//! `hermes dashboard`: resolves the settings (refusing a public bind without credentials,
//! exit 78), binds, prints how to get in (stderr) and the original's readiness line
//! `HERMES_DASHBOARD_READY port=N` (stdout), and serves until stopped; `hermes dashboard
//! hash-password` makes a password hash for the settings. The server is `hermes-dashboard`'s;
//! this module only wires it to the command line.

use std::io::{BufRead, IsTerminal};
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
    if let Some(DashboardCommand::HashPassword) = args.command {
        return hash_password();
    }
    let root = ctx.root()?;
    // The dashboard's settings are read from the default profile's environment, as its
    // gateway's (`hermes_settings`: `.env` over the process environment, so a password hash
    // can live in `.env` beside the other secrets). A `config.yaml` that does not parse must
    // not keep the dashboard that can fix it from starting: it is read as empty here.
    let dotenv = DotEnv::load(&hermes_home::layout::env_path(&root))?;
    let config = hermes_settings::config_of(&root)
        .unwrap_or_else(|_| Config::empty(&hermes_home::layout::config_path(&root)));
    let files = ProfileFiles::from_parts(
        dotenv,
        config,
        Scope::Default,
        hermes_settings::process_env(),
    );
    // In the image, configured credentials make the default host the original image's
    // (all addresses), so a published port reaches the dashboard (`Place::Image`).
    let place = if hermes_privilege::image_marker_present(std::path::Path::new(
        hermes_privilege::IMAGE_MARKER,
    )) {
        hermes_dashboard::Place::Image
    } else {
        hermes_dashboard::Place::Machine
    };
    let settings =
        Settings::resolve_at(place, args.host, args.port, files.lookup()).map_err(Failure::from)?;
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

/// What is printed once at start: where it listens and how to get in (the token link on
/// loopback, as Jupyter does; never the password).
fn announce(settings: &Settings, port: u16) -> String {
    let host = if settings.host.contains(':') && !settings.host.starts_with('[') {
        format!("[{}]", settings.host)
    } else {
        settings.host.clone()
    };
    let base = &settings.base_path;
    match &settings.auth {
        Auth::Token => format!(
            "Hermes dashboard on http://{host}:{port}{base}/\nOpen this link to sign in (it works until the dashboard restarts):\n    http://{host}:{port}{base}/?token={}\n",
            settings.token
        ),
        Auth::Basic { username, .. } => format!(
            "Hermes dashboard on http://{host}:{port}{base}/ (basic authentication as `{username}`)\n"
        ),
        Auth::Proxy { header } => format!(
            "Hermes dashboard on http://{host}:{port}{base}/ (users signed in by the trusted proxy's `{header}` header)\n"
        ),
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
