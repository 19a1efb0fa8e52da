//! `hermes deps`, `hermes plugins` and `hermes memory`: runtime Python dependencies and the
//! memory-provider plugins that need them.
//!
//! The installer (`hermes-deps`) and plugin logic (`hermes-plugins`) return data; this module
//! builds their options from the profile (its `.env` over the process environment, its
//! `security.allow_lazy_installs`), prints progress (one line per step on stderr, on a
//! terminal or not, so a log shows how far an install got), and writes what a memory
//! setup asks for with the `hermes-home` writers (which keep every other key).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use hermes_deps::generations::Resolution;
use hermes_deps::{Environment, InstallEvent, InstallOptions};
use hermes_home::Home;
use hermes_plugins::{Discovery, SetupPlan};

use crate::cli::{DepsCommand, MemoryCommand, PluginsCommand};
use crate::commands::prompt;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// Installer options for a profile (`hermes_plugins::profile::install_options`, the same
/// for the dashboard) from the process environment, with progress: one plain line per step
/// on stderr whether or not it is a terminal (no spinner, no `\r`), so `docker logs` and CI
/// show a long install's steps as they happen.
pub fn install_options(home: &Home) -> Result<InstallOptions, Failure> {
    let mut options = hermes_plugins::profile::install_options(home, Environment::from_process())?;
    options.progress = Some(Arc::new(|event: &InstallEvent| {
        if let Some(line) = describe(event) {
            output::stderr(&format!("{line}\n"));
        }
    }));
    Ok(options)
}

/// Root working on the durable target acts as the owner of the directory that holds it (the
/// volume's owner, `AsUser::owner_of`) for as long as the value lives: everything an install,
/// a repair or a collection makes is that user's, and no path that user can swap is followed
/// with root's rights. Anyone else, or no target: nothing changes.
pub fn as_volume_owner(options: &InstallOptions) -> Result<hermes_privilege::AsUser, Failure> {
    let dir = options
        .env
        .durable_target()
        .and_then(|t| std::path::absolute(t).ok())
        .and_then(|t| t.parent().map(std::path::Path::to_path_buf))
        .filter(|d| d.is_dir());
    let owner = match dir {
        Some(dir) => hermes_privilege::AsUser::owner_of(&dir)?,
        None => hermes_privilege::AsUser::enter(None).map_err(std::io::Error::from)?,
    };
    Ok(owner)
}

fn describe(event: &InstallEvent) -> Option<String> {
    Some(match event {
        InstallEvent::Blocked { reason } => format!("blocked: {reason}"),
        InstallEvent::CreatingVenv { path } => {
            format!("creating the Python environment `{}`…", path.display())
        }
        InstallEvent::Adopted { path, generation } => format!(
            "`{}` (installed before generations) is now generation {generation}, as it was",
            path.display()
        ),
        InstallEvent::BuildingGeneration { generation, path } => {
            format!("building generation {generation} in `{}`…", path.display())
        }
        InstallEvent::CheckingImports { generation } => {
            format!("checking that generation {generation} imports…")
        }
        InstallEvent::Switched { from, to } => match from {
            Some(from) => format!("switched from generation {from} to {to}"),
            None => format!("switched to generation {to}"),
        },
        InstallEvent::BootstrappingPip => "bootstrapping pip…".into(),
        InstallEvent::Running { command } => format!("running `{command}`…"),
        InstallEvent::Rechecking => "checking availability…".into(),
        InstallEvent::Finished { .. } => return None,
        _ => return None,
    })
}

fn render_to_string(
    render: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>,
) -> Result<String, Failure> {
    let mut buf = Vec::new();
    render(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// `hermes deps <sub>`.
pub fn run_deps(ctx: &Context, command: DepsCommand) -> CommandResult {
    let home = ctx.home()?;
    let mut options = install_options(&home)?;
    let _owner = as_volume_owner(&options)?;
    match command {
        DepsCommand::Status(flag) => {
            let rows = hermes_deps::feature_status(&hermes_plugins::feature_registry()?, &options)?;
            if flag.json {
                output::json(&rows)?;
            } else {
                output::stdout(&render_to_string(|b| hermes_deps::render_status(&rows, b))?)?;
            }
            Ok(ExitStatus::Success)
        }
        DepsCommand::Install {
            specs,
            dry_run,
            json,
        } => {
            options.dry_run = dry_run;
            let outcome = hermes_deps::install_specs(&specs, &options);
            if json {
                output::json(&outcome)?;
            } else {
                output::stdout(&render_to_string(|b| outcome.render(b))?)?;
            }
            Ok(if outcome.ok {
                ExitStatus::Success
            } else {
                ExitStatus::Failure
            })
        }
        DepsCommand::Ensure { feature, json } => {
            let outcome = hermes_deps::ensure_feature(
                &hermes_plugins::feature_registry()?,
                &feature,
                &options,
            )?;
            if json {
                output::json(&outcome)?;
            } else if outcome.already_satisfied {
                output::stdout(&format!("`{feature}` is already installed\n"))?;
            } else {
                output::stdout(&render_to_string(|b| outcome.install.render(b))?)?;
            }
            Ok(if outcome.install.ok {
                ExitStatus::Success
            } else {
                ExitStatus::Failure
            })
        }
    }
}

fn discovery(home: &Home) -> Discovery {
    hermes_plugins::profile::discover_for(home)
}

/// `hermes plugins <sub>`.
pub fn run_plugins(ctx: &Context, command: PluginsCommand) -> CommandResult {
    let home = ctx.home()?;
    let options = install_options(&home)?;
    let _owner = as_volume_owner(&options)?;
    let disc = discovery(&home);
    for problem in &disc.problems {
        let problem = hermes_errors::one_line(problem);
        output::stderr(&format!("warning: {problem}\n"));
    }
    match command {
        PluginsCommand::List(flag) => {
            let rows = hermes_plugins::list_plugins(&disc, &options)?;
            if flag.json {
                output::json(&rows)?;
            } else {
                output::stdout(&render_to_string(|b| {
                    hermes_plugins::render_list(&rows, b)
                })?)?;
            }
        }
        PluginsCommand::Generations(flag) => {
            let overview = hermes_deps::generations::overview(&durable_target(&options)?);
            if flag.json {
                output::json(&overview)?;
            } else {
                output::stdout(&render_to_string(|b| overview.render(b))?)?;
            }
        }
        PluginsCommand::Gc(flag) => {
            let collected = hermes_deps::generations::collect(&durable_target(&options)?)?;
            if flag.json {
                output::json(&collected)?;
            } else if collected.removed.is_empty() {
                output::stdout("nothing to remove\n")?;
            } else {
                let ids: Vec<String> = collected.removed.iter().map(u64::to_string).collect();
                output::stdout(&format!(
                    "removed generation(s) {} ({:.1} MB freed)\n",
                    ids.join(", "),
                    collected.freed_bytes as f64 / 1_000_000.0
                ))?;
            }
        }
        PluginsCommand::Repair {
            force,
            timeout,
            at_start,
            json,
        } => return repair(options, force, timeout, at_start, json),
    }
    Ok(ExitStatus::Success)
}

/// Settings that make an unreachable index fail in seconds, not minutes (pip retries five
/// times with a 15 s timeout by default), unless the operator set them.
const FAIL_FAST: [(&str, &str); 3] = [
    ("PIP_RETRIES", "1"),
    ("PIP_DEFAULT_TIMEOUT", "10"),
    ("UV_HTTP_TIMEOUT", "10"),
];

/// What `hermes up` does before its gateways start, as PID 1's boot stage 6d: the plugin
/// packages resolved again when this Python or its core packages changed; the line to say,
/// when there is one worth saying.
pub fn resolve_before_start(home: &Home) -> Result<Option<String>, Failure> {
    let mut options = install_options(home)?;
    fail_fast(&mut options);
    let report = hermes_deps::generations::resolve_again(&options, false)?;
    Ok(report
        .notable()
        .then(|| format!("plugins: {}", report.summary())))
}

fn fail_fast(options: &mut InstallOptions) {
    for (key, value) in FAIL_FAST {
        if options.env.get(key).is_none() {
            options.env = options.env.clone().with(key, value);
        }
    }
}

/// `hermes plugins repair`.
fn repair(
    mut options: InstallOptions,
    force: bool,
    timeout: Option<u64>,
    at_start: bool,
    json: bool,
) -> CommandResult {
    if let Some(seconds) = timeout {
        options.timeout = std::time::Duration::from_secs(seconds.max(1));
    }
    if at_start {
        fail_fast(&mut options);
    }
    let report = hermes_deps::generations::resolve_again(&options, force)?;
    let quiet = at_start
        && matches!(
            report.resolution,
            Resolution::UpToDate { .. } | Resolution::NothingInstalled
        );
    if json {
        output::json(&report)?;
    } else if !quiet {
        // At boot only a change is worth a line in the boot log.
        output::stdout(&format!("{}\n", report.summary()))?;
    }
    Ok(if report.degraded() {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}

/// The durable target, or why there is none: generations exist only there.
fn durable_target(options: &InstallOptions) -> Result<std::path::PathBuf, Failure> {
    options.env.durable_target().ok_or_else(|| {
        Failure::new(
            "no durable install target: installs go to the Python environment itself",
            Some(
                "generations are kept for `HERMES_LAZY_INSTALL_TARGET` (the image sets it to \
                 `/opt/data/lazy-packages`)"
                    .into(),
            ),
        )
    })
}

/// `hermes memory <sub>`.
pub fn run_memory(ctx: &Context, command: MemoryCommand) -> CommandResult {
    let home = ctx.home()?;
    match command {
        MemoryCommand::Status(flag) => {
            let options = install_options(&home)?;
            let raw = hermes_plugins::profile::configured_provider(&home)?;
            let status =
                hermes_plugins::memory_status(&discovery(&home), raw.as_deref(), &options)?;
            if flag.json {
                output::json(&status)?;
            } else {
                output::stdout(&render_to_string(|b| status.render(b))?)?;
            }
            Ok(ExitStatus::Success)
        }
        MemoryCommand::Setup {
            provider,
            values,
            non_interactive,
        } => setup(&home, provider, &values, non_interactive),
    }
}

fn setup(
    home: &Home,
    provider: Option<String>,
    raw_values: &[String],
    non_interactive: bool,
) -> CommandResult {
    // Read both files first: a config we cannot parse must fail before anything is installed.
    hermes_settings::ProfileFiles::read(
        home.dir(),
        hermes_settings::Scope::of(home.profile().name()),
        hermes_settings::process_env(),
    )?;
    let mut options = install_options(home)?;
    options.requested_by = hermes_deps::Requester::MemorySetup;
    let _owner = as_volume_owner(&options)?;
    let disc = discovery(home);
    let interactive = !non_interactive && prompt::interactive();

    let mut values = BTreeMap::new();
    for raw in raw_values {
        let Some((key, value)) = raw.split_once('=') else {
            return Err(Failure::new(
                format!("invalid `--set {raw}`"),
                Some("write it as `--set KEY=VALUE`, e.g. `--set api_key=...`".into()),
            ));
        };
        values.insert(key.trim().to_string(), value.to_string());
    }

    let name = match provider {
        Some(name) => name,
        None => choose_provider(&disc, interactive)?,
    };
    let plugin = hermes_plugins::find_provider(&disc, &name)?;
    if interactive {
        for question in hermes_plugins::questions(plugin, &options.env) {
            let setting = &question.setting;
            if values.contains_key(&setting.key) || question.already_set {
                continue;
            }
            let mut label = if setting.description.is_empty() {
                setting.key.clone()
            } else {
                setting.description.clone()
            };
            if let Some(url) = &setting.url {
                label.push_str(&format!(" ({url})"));
            }
            if let Some(default) = &setting.default {
                label.push_str(&format!(" [{default}]"));
            }
            let answer = prompt::ask(&format!("{label}: "), setting.secret)?;
            if !answer.is_empty() {
                values.insert(setting.key.clone(), answer);
            }
        }
    }

    let plan: SetupPlan = hermes_plugins::setup_provider(&disc, &name, &values, &options)?;
    if plan.ok {
        hermes_plugins::profile::apply_plan(home, &plan)?;
    }
    let mut text = render_to_string(|b| plan.render(b))?;
    if plan.ok {
        text.push_str(&format!(
            "Memory provider `{name}` is now active in `{}`\n",
            home.config_path().display()
        ));
    }
    output::stdout(&text)?;
    Ok(if plan.ok {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

fn choose_provider(disc: &Discovery, interactive: bool) -> Result<String, Failure> {
    let names: Vec<&str> = disc
        .memory_providers()
        .map(|p| p.manifest.name.as_str())
        .collect();
    if !interactive {
        return Err(Failure::new(
            "no memory provider given",
            Some(format!(
                "name one: `hermes memory setup <provider>` with one of: {}",
                names.join(", ")
            )),
        ));
    }
    let mut menu = String::from("Memory providers:\n");
    for (i, plugin) in disc.memory_providers().enumerate() {
        menu.push_str(&format!(
            "  {}. {:<12} {}\n",
            i + 1,
            plugin.manifest.name,
            plugin.manifest.description
        ));
    }
    let _ = std::io::stderr().write_all(menu.as_bytes());
    let answer = prompt::ask("Choose a provider (number or name): ", false)?;
    let chosen = answer
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| names.get(n.wrapping_sub(1)).map(|s| s.to_string()))
        .unwrap_or_else(|| answer.trim().to_string());
    if chosen.is_empty() {
        return Err(Failure::new(
            "cancelled: no provider chosen",
            Some(
                "name one: `hermes memory setup <provider>` (`hermes plugins list` lists them)"
                    .into(),
            ),
        ));
    }
    Ok(chosen)
}
