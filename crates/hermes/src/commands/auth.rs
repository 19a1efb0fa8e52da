//! `hermes auth list`: which providers have stored credentials.

use hermes_home::auth::AuthStore;
use serde_json::json;

use crate::cli::AuthCommand;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus};
use crate::output;

/// Dispatches `hermes auth <sub>`.
pub fn run(ctx: &Context, command: AuthCommand) -> CommandResult {
    match command {
        AuthCommand::List(flag) => list(ctx, flag.json),
    }
}

fn list(ctx: &Context, json_output: bool) -> CommandResult {
    let home = ctx.home()?;
    let path = home.auth_path();
    let loaded = AuthStore::load(&path)?;
    if let Some(corrupt) = &loaded.corrupt {
        let kept = match &corrupt.preserved_at {
            Some(copy) => format!("a copy is preserved at `{}`", copy.display()),
            None => "a copy could NOT be preserved".into(),
        };
        output::stderr(&format!(
            "warning: `{}` could not be parsed ({}); reading it as empty, {kept}\n",
            corrupt.path.display(),
            corrupt.reason
        ));
    }
    let store = &loaded.store;
    let providers = store.providers();
    if json_output {
        output::json(
            &json!({ "path": path, "active_provider": store.active_provider(), "providers": providers }),
        )?;
    } else if providers.is_empty() {
        output::stdout(&format!("No stored credentials in `{}`\n", path.display()))?;
    } else {
        let mut text = String::new();
        for provider in &providers {
            let marker = if store.active_provider() == Some(provider) {
                "*"
            } else {
                " "
            };
            text.push_str(&format!("{marker} {provider}\n"));
        }
        output::stdout(&text)?;
    }
    Ok(ExitStatus::Success)
}
