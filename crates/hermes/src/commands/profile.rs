//! `hermes profile ...`: create, delete, list, show and use profiles.

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use hermes_home::gateway_state;
use hermes_home::layout::read_active_profile;
use hermes_home::profile::{self, CreateOptions, Disposal, alias};
use hermes_home::{Home, ProfileName, ProfileRef};
use hermes_services::gateway::Registration;
use serde::Serialize;

use crate::cli::ProfileCommand;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// How long profile commands wait for the supervisor.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Dispatches `hermes profile <sub>`.
pub fn run(ctx: &Context, command: ProfileCommand) -> CommandResult {
    match command {
        ProfileCommand::Create {
            name,
            clone_from,
            description,
            no_alias,
        } => create(ctx, &name, clone_from.as_deref(), description, !no_alias),
        ProfileCommand::Delete { name, yes, purge } => delete(ctx, &name, yes, purge),
        ProfileCommand::List(flag) => list(ctx, flag.json),
        ProfileCommand::Show { name, json } => show(ctx, &name, json),
        ProfileCommand::Use { name } => use_profile(ctx, &name),
    }
}

fn alias_dir() -> Option<PathBuf> {
    alias::dir(Context::var("HOME").as_deref())
}

fn create(
    ctx: &Context,
    name: &str,
    clone_from: Option<&str>,
    description: Option<String>,
    with_alias: bool,
) -> CommandResult {
    let name = ProfileName::parse(name)?;
    let root = ctx.root()?;
    let clone_from = clone_from.map(ProfileRef::parse).transpose()?;
    let dir = profile::create(
        &root,
        &name,
        &CreateOptions {
            clone_from: clone_from.clone(),
            description,
        },
    )?;
    let mut text = format!("Created profile `{name}` at `{}`", dir.display());
    if let Some(from) = clone_from {
        text.push_str(&format!(" (cloned from `{}`)", from.name()));
    }
    text.push('\n');
    // A running supervisor learns about the new profile's gateway at once (down until started).
    // Not reaching one is said, never skipped in silence: with none running the gateway is
    // picked up at the next start; a supervisor that runs but cannot be reached is a problem.
    let home = Home::for_profile(root.clone(), ProfileRef::Named(name.clone()))?;
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("hermes"));
    let mut warnings = Vec::new();
    let registration = hermes_services::gateway::register_new_gateway(
        &home,
        Context::var,
        &exe,
        CONNECT_TIMEOUT,
        &mut warnings,
    );
    if !warnings.is_empty() {
        output::stderr(&String::from_utf8_lossy(&warnings));
    }
    match registration {
        Registration::Registered | Registration::Known => text.push_str(&format!(
            "Registered `{}` with the supervisor (start it with `hermes -p {name} gateway start`)\n",
            hermes_services::service_name(name.as_str())
        )),
        Registration::NoSupervisor => text.push_str(
            "No supervisor is running: its gateway is registered when `hermes up` (or the \
             container) starts\n",
        ),
        Registration::Failed(e) => output::stderr(&format!(
            "warning: could not register the gateway with the supervisor: {}\n",
            hermes_errors::one_line(&e)
        )),
    }
    if with_alias {
        match alias_dir() {
            Some(bin) => {
                let path_var = Context::var("PATH");
                let hermes = wrapper_target(path_var.as_deref());
                match alias::write(&bin, &name, &hermes.path, path_var.as_deref()) {
                    Ok(alias::AliasOutcome::Written(path)) => {
                        text.push_str(&format!(
                            "Wrote alias `{}`: run `{name}` as a shortcut for `hermes -p {name}`\n",
                            path.display()
                        ));
                        if hermes.build_only {
                            output::stderr(&build_only_warning(&path, &hermes.path));
                        }
                        if !alias::dir_on_path(&bin, path_var.as_deref()) {
                            output::stderr(&not_on_path_warning(&bin, &name));
                        }
                    }
                    Ok(alias::AliasOutcome::Conflict(existing)) => text.push_str(&format!(
                        "No alias written: `{}` already exists; use `hermes -p {name}`\n",
                        existing.display()
                    )),
                    Err(e) => output::stderr(&format!("warning: could not write the alias: {e}\n")),
                }
            }
            None => output::stderr("warning: no alias written: `HOME` is not set\n"),
        }
    }
    output::stdout(&text)?;
    Ok(ExitStatus::Success)
}

/// The `hermes` an alias wrapper runs: one that outlives a cargo build
/// (`alias::stable_hermes`).
fn wrapper_target(path_var: Option<&str>) -> alias::Hermes {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("hermes"));
    alias::stable_hermes(&exe, path_var)
}

/// Said when the only `hermes` to be found for `wrapper` is a cargo build's.
fn build_only_warning(wrapper: &std::path::Path, hermes: &std::path::Path) -> String {
    format!(
        "warning: `{}` runs the build `{}`, which `cargo clean` removes\n\
         hint: install hermes (e.g. `cargo install --path crates/hermes`) and put its path in \
         the wrapper\n",
        wrapper.display(),
        hermes.display()
    )
}

/// Said when the alias directory is not on `PATH`: the wrapper exists but `NAME` alone is
/// not found.
fn not_on_path_warning(bin: &std::path::Path, name: &ProfileName) -> String {
    format!(
        "warning: `{}` is not on your PATH, so `{name}` is not found as a command\n\
         hint: add it in your shell's startup file: `export PATH=\"{}:$PATH\"`; until then use \
         `hermes -p {name}`\n",
        bin.display(),
        bin.display()
    )
}

fn delete(ctx: &Context, name: &str, yes: bool, purge: bool) -> CommandResult {
    let root = ctx.root()?;
    let profile = ProfileRef::parse(name)?;
    // A missing or default profile fails before any prompt.
    let home = hermes_services::profile::deletable(&root, &profile)?;
    if !yes {
        confirm(name, home.dir())?;
    }
    let disposal = if purge {
        Disposal::Purge
    } else {
        Disposal::Trash
    };
    // The supervisor stops and forgets its gateway before the files move; a supervisor that
    // runs but cannot be asked keeps the profile (`hermes_services::profile`).
    let deleted =
        hermes_services::profile::delete(&root, &profile, disposal, Context::var, CONNECT_TIMEOUT)?;
    let mut text = format!("Deleted profile `{name}`");
    match &deleted.trashed_to {
        Some(trash) => text.push_str(&format!(
            "; its files are in `{}` (move it back to restore)\n",
            trash.display()
        )),
        None => text.push_str(" and purged its files\n"),
    }
    if let Some(path) = &deleted.alias_removed {
        text.push_str(&format!("Removed alias `{}`\n", path.display()));
    }
    if deleted.active_reset {
        text.push_str("The active profile is now `default`\n");
    }
    output::stdout(&text)?;
    Ok(ExitStatus::Success)
}

fn confirm(name: &str, dir: &std::path::Path) -> Result<(), Failure> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(Failure::new(
            format!("refusing to delete profile `{name}` without confirmation"),
            Some("pass `--yes` to delete without a prompt".into()),
        ));
    }
    output::stderr(&format!(
        "This deletes profile `{name}` (`{}`).\nType `{name}` to confirm: ",
        dir.display()
    ));
    let mut answer = String::new();
    stdin.lock().read_line(&mut answer)?;
    if answer.trim() != name {
        return Err(Failure::new(
            "cancelled: the name did not match",
            Some(format!(
                "type `{name}` exactly to delete it, or pass `--yes` to delete without a prompt"
            )),
        ));
    }
    Ok(())
}

/// One profile as `list` and `show` report it.
#[derive(Debug, Serialize)]
struct ProfileInfo {
    name: String,
    active: bool,
    path: PathBuf,
    description: Option<String>,
    model: Option<String>,
    gateway: Option<String>,
    alias: Option<PathBuf>,
    config_error: Option<String>,
}

fn info(root: &std::path::Path, entry: &profile::ProfileEntry, active: &ProfileRef) -> ProfileInfo {
    let home = Home::for_profile(root.to_path_buf(), entry.profile.clone()).ok();
    let (model, config_error) = match hermes_settings::model_name(&entry.dir, entry.profile.name())
    {
        Ok(model) => (model, None),
        Err(e) => (None, Some(hermes_errors::one_line(&e))),
    };
    let gateway = home.and_then(|h| gateway_state::recorded_state(&h.gateway_state_path()));
    let alias = match &entry.profile {
        ProfileRef::Named(name) => alias_dir()
            .map(|d| d.join(name.as_str()))
            .filter(|p| p.is_file()),
        ProfileRef::Default => None,
    };
    ProfileInfo {
        name: entry.profile.name().to_string(),
        active: &entry.profile == active,
        path: entry.dir.clone(),
        description: entry.description.clone(),
        model,
        gateway,
        alias,
        config_error,
    }
}

fn list(ctx: &Context, json_output: bool) -> CommandResult {
    let root = ctx.root()?;
    let active = read_active_profile(&root).unwrap_or(ProfileRef::Default);
    let infos: Vec<ProfileInfo> = profile::list(&root)?
        .iter()
        .map(|e| info(&root, e, &active))
        .collect();
    if json_output {
        output::json(&infos)?;
        return Ok(ExitStatus::Success);
    }
    let width = infos.iter().map(|i| i.name.len()).max().unwrap_or(4).max(4);
    let mut text = format!(
        "  {:<width$}  {:<20}  {:<9}  DESCRIPTION\n",
        "NAME", "MODEL", "GATEWAY"
    );
    for i in &infos {
        text.push_str(&format!(
            "{} {:<width$}  {:<20}  {:<9}  {}\n",
            if i.active { "*" } else { " " },
            i.name,
            i.model.as_deref().unwrap_or("-"),
            i.gateway.as_deref().unwrap_or("-"),
            i.description.as_deref().unwrap_or(""),
        ));
    }
    output::stdout(&text)?;
    Ok(ExitStatus::Success)
}

fn show(ctx: &Context, name: &str, json_output: bool) -> CommandResult {
    let root = ctx.root()?;
    let profile = ProfileRef::parse(name)?;
    let home = Home::for_profile(root.clone(), profile.clone())?;
    let active = read_active_profile(&root).unwrap_or(ProfileRef::Default);
    let entry = profile::ProfileEntry {
        profile,
        dir: home.dir().to_path_buf(),
        description: None,
    };
    let mut i = info(&root, &entry, &active);
    i.description = profile::list(&root)?
        .into_iter()
        .find(|e| e.profile == entry.profile)
        .and_then(|e| e.description);
    // What the supervisor says of its gateway now: a recorded `running` must not hide a crash
    // loop. Without a supervisor, only the record is known.
    let service = hermes_services::service_name(&i.name);
    let row = crate::commands::service::connect(&root)
        .ok()
        .and_then(|mut client| client.status(Some(&service)).ok())
        .and_then(|rows| rows.into_iter().next());
    let last_error = match &row {
        Some(row) => hermes_services::last_error::of_failing(&root, row),
        None => hermes_services::last_error::recorded(&root, &service),
    };
    if json_output {
        let mut value = serde_json::to_value(&i).map_err(std::io::Error::other)?;
        value["service"] = serde_json::json!(row);
        value["last_error"] = serde_json::json!(last_error.map(|e| e.message));
        output::json(&value)?;
        return Ok(ExitStatus::Success);
    }
    let gateway = match &row {
        Some(row) => {
            let mut line = row.state.to_string();
            if let Some(pid) = row.pid {
                line.push_str(&format!(" (pid {pid})"));
            }
            if row.state != hermes_supervisor::StateName::Up && !row.reason.is_empty() {
                line.push_str(&format!(": {}", row.reason));
            }
            line
        }
        None => match i.gateway.as_deref() {
            Some(recorded) => format!("{recorded} (recorded; the supervisor does not run it)"),
            None => "never started".to_string(),
        },
    };
    let mut text = format!(
        "name:         {}{}\n",
        i.name,
        if i.active { " (active)" } else { "" }
    );
    text.push_str(&format!("path:         {}\n", i.path.display()));
    text.push_str(&format!(
        "description:  {}\n",
        i.description.as_deref().unwrap_or("-")
    ));
    text.push_str(&format!(
        "model:        {}\n",
        i.model.as_deref().unwrap_or("(not set)")
    ));
    text.push_str(&format!("gateway:      {gateway}\n"));
    if let Some(error) = &last_error {
        text.push_str(&format!("last error:   {}\n", error.message));
    }
    text.push_str(&format!(
        "alias:        {}\n",
        i.alias
            .as_ref()
            .map_or_else(|| "-".into(), |p| p.display().to_string())
    ));
    if let Some(error) = &i.config_error {
        text.push_str(&format!("config error: {error}\n"));
    }
    output::stdout(&text)?;
    Ok(ExitStatus::Success)
}

fn use_profile(ctx: &Context, name: &str) -> CommandResult {
    let root = ctx.root()?;
    let profile = ProfileRef::parse(name)?;
    profile::set_active(&root, &profile)?;
    output::stdout(&format!("Active profile is now `{}`\n", profile.name()))?;
    Ok(ExitStatus::Success)
}
