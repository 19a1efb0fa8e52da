//! `hermes dashboard`: resolves the settings (refusing a public bind without credentials,
//! exit 78), binds, prints how to get in, and serves until stopped. The server is
//! `hermes-dashboard`'s; this module only wires it to the command line.

use std::sync::Arc;

use hermes_dashboard::{Auth, Settings};

use crate::cli::DashboardArgs;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// Runs the dashboard in the foreground.
pub fn run(ctx: &Context, args: DashboardArgs) -> CommandResult {
    let root = ctx.root()?;
    let settings = Settings::resolve(args.host, args.port, Context::var).map_err(failure)?;
    // Status and actions block on the control socket on the blocking pool; two workers
    // serve the pages and the event streams.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = hermes_dashboard::bind(&settings).await.map_err(failure)?;
        let port = listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or(settings.port);
        output::stderr(&announce(&settings, port));
        let vars: hermes_dashboard::Vars = Arc::new(Context::var);
        let router = hermes_dashboard::router(root, settings, vars);
        hermes_dashboard::serve(listener, router)
            .await
            .map_err(failure)
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
    match &settings.auth {
        Auth::Token => format!(
            "Hermes dashboard on http://{host}:{port}/\nOpen this link to sign in (it works until the dashboard restarts):\n    http://{host}:{port}/?token={}\n",
            settings.token
        ),
        Auth::Basic { username, .. } => format!(
            "Hermes dashboard on http://{host}:{port}/ (basic authentication as `{username}`)\n"
        ),
    }
}

/// The dashboard's error with its hint and its exit code (78 for configuration).
fn failure(error: hermes_dashboard::Error) -> Failure {
    let code = error.exit_code();
    let mut failure = Failure::from(error);
    failure.code = code;
    failure
}
