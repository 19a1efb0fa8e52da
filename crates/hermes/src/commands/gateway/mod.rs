//! `hermes gateway ...` and `hermes chat`: each profile's agent over an OpenAI-compatible API.
//!
//! * `gateway run` resolves the profile's settings (`SOUL.md`, `.env` over the environment,
//!   `config.yaml` with `${VAR}` expanded) and runs `hermes_gateway::run` on a tokio runtime —
//!   or, when a supervisor is running and this is not the supervised child, hands the gateway to
//!   the supervisor and follows its log. When the profile's engine is the agent
//!   (`hermes_services::agent::profile_engine`), it execs the agent's own gateway instead.
//! * `start|stop|restart|status|list` talk to the supervisor; a missing gateway service is
//!   registered first when the profile exists.
//! * The gateway service of a profile is described in one place,
//!   `hermes_services::gateway_spec`, shared with PID 1, `hermes up` and the dashboard; so are
//!   registering it and the systemd unit.
//!
//! The words: a profile's *gateway service* is `gateway-<profile>`; its *recorded state* is
//! the effective state of its `gateway_state.json` (desired, else last).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_gateway::api_server::ApiServer;
use hermes_gateway::source::SettingsSource;
use hermes_gateway::{ExitReason, GatewaySettings, Phase, Profile, ShutdownRequest, StateRecorder};
use hermes_home::Home;
use hermes_home::gateway_state;
use hermes_home::profile;
use hermes_services::agent::{Engine, EngineProblem};
use hermes_services::readiness::Request;
use hermes_services::upgrade::UpgradeProblem;
use serde_json::{Value, json};

use crate::cli::{GatewayCommand, GatewayTarget};
use crate::commands::service;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// The supervisor service name of a profile's gateway (`hermes_services::service_name`).
pub fn service_name(profile: &str) -> String {
    hermes_services::service_name(profile)
}

/// Dispatches `hermes gateway <sub>`.
pub fn run(ctx: &Context, command: GatewayCommand) -> CommandResult {
    match command {
        GatewayCommand::Run {
            replace,
            no_supervise,
        } => run_gateway(ctx, replace, no_supervise),
        GatewayCommand::Start { target, wait } => {
            lifecycle(ctx, target, Lifecycle::Start, service::wait_for(&wait))
        }
        GatewayCommand::Stop(target) => lifecycle(ctx, target, Lifecycle::Stop, None),
        GatewayCommand::Restart { target, wait } => {
            lifecycle(ctx, target, Lifecycle::Restart, service::wait_for(&wait))
        }
        GatewayCommand::Status(flag) => status(ctx, flag.json, true),
        GatewayCommand::List(flag) => status(ctx, flag.json, false),
        GatewayCommand::Install => install(ctx, true),
        GatewayCommand::Uninstall => install(ctx, false),
    }
}

/// Resolves the gateway settings of a profile: its `.env` over the process environment by
/// the one rule (`hermes_home::DotEnv::overlay`), `config.yaml` and `SOUL.md`. Variables whose
/// name or value is not UTF-8 cannot be configuration and are left out (never a panic).
///
/// The profile carries its source, so a running gateway reads it again when one of those
/// files changes (`hermes_gateway::live`).
pub fn settings(home: &Home) -> Result<Profile, Failure> {
    let (_, loaded) = SettingsSource::from_process(home.clone()).read();
    let mut profile = loaded?;
    profile.settings.argv = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    Ok(profile)
}

/// Whether this native gateway serves every profile of the volume at `/p/<profile>/`
/// (`hermes_gateway`'s multiplexing): only the default profile's gateway does, when the switch
/// is on (`GATEWAY_MULTIPLEX_PROFILES` in the environment, then the root `config.yaml`, as
/// `hermes_home::multiplex` reads it); the native gateway's default is off. A named profile's
/// gateway serves its own profile whatever the switch says.
fn multiplexing(home: &Home) -> Result<bool, Failure> {
    if *home.profile() != hermes_home::ProfileRef::Default {
        return Ok(false);
    }
    let config = hermes_home::config::Config::load(&home.config_path())?;
    Ok(hermes_home::multiplex::configured(&config, &Context::var).is_some_and(|(on, _)| on))
}

/// Set to a truthy word (`hermes_errors::switch`): `gateway run` never hands over to a
/// supervisor, as `--no-supervise` (the supervised child itself is started that way).
const NO_SUPERVISE_VAR: &str = "HERMES_GATEWAY_NO_SUPERVISE";

/// Whether `gateway run` stays in the foreground whatever supervisor runs: `--no-supervise`,
/// or [`NO_SUPERVISE_VAR`] truthy in `var`.
fn foreground_only(no_supervise: bool, var: impl Fn(&str) -> Option<String>) -> bool {
    no_supervise || var(NO_SUPERVISE_VAR).is_some_and(|v| hermes_errors::switch::is_truthy(&v))
}

fn run_gateway(ctx: &Context, replace: bool, no_supervise: bool) -> CommandResult {
    let mut home = ctx.home()?;
    let multiplex = hermes_services::multiplex::resolve_asking_agent(home.root(), &Context::var);
    if ctx.profile_flag.is_none() && !multiplex.runs_own_gateway(home.profile().name()) {
        // A sticky `active_profile` (`hermes profile use work`) must not turn the container's
        // `gateway run` into a second owner beside the multiplexer (upstream #119880): the
        // gateway that serves every profile is the default one.
        output::stderr(&format!(
            "hermes: `active_profile` selects `{}`, but multiplexing is on: running the default \
             profile's gateway, which serves it\n",
            home.profile().name()
        ));
        home = Home::for_profile(home.root().to_path_buf(), hermes_home::ProfileRef::Default)?;
    }
    if !multiplex.runs_own_gateway(home.profile().name()) {
        // However it was started (a supervisor asked by the dashboard, a sticky profile, a
        // terminal), a named gateway never runs beside the multiplexing one.
        let mut failure = Failure::new(
            hermes_services::multiplex::served_by_default_line(home.profile().name(), &multiplex),
            Some(format!(
                "use the default profile's gateway (`/p/{}/v1/...`), or switch multiplexing off \
                 ({}=0 or `{}: false`)",
                home.profile().name(),
                hermes_home::multiplex::MULTIPLEX_VAR,
                hermes_home::multiplex::MULTIPLEX_KEY
            )),
        );
        failure.code = hermes_errors::exit::CONFIG;
        return Err(failure);
    }
    if !foreground_only(no_supervise, Context::var)
        && let Ok(mut client) = service::connect(home.root())
    {
        return hand_over(&home, &mut client);
    }
    let recorder = CliRecorder::new(&home);
    match hermes_services::agent::profile_engine(home.dir(), Context::var) {
        Ok((Engine::Agent, Some(agent))) => {
            // Never an agent older than the volume, nor one whose boot migration failed: the
            // same refusal for a supervisor start, a restart and an operator's start (78).
            match hermes_services::upgrade::gate_agent_start(
                home.root(),
                home.dir(),
                &agent,
                &Context::var,
            ) {
                Ok(warnings) => {
                    for w in warnings {
                        output::stderr(&format!("hermes: {w}\n"));
                    }
                }
                Err(problem) => {
                    // A volume newer than the agent is left exactly as it is: not even the
                    // gateway's state record is written (the log line says why).
                    let downgrade = matches!(problem, UpgradeProblem::Downgrade { .. });
                    let mut failure = Failure::from(hermes_services::Error::from(problem));
                    if !downgrade {
                        recorder.record(Phase::StartupFailed, Some(&failure.one_line()));
                    }
                    failure.code = hermes_errors::exit::CONFIG;
                    return Err(failure);
                }
            }
            return Err(exec_agent(&home, &agent));
        }
        // An unreadable config.yaml is reported, with its line, by the settings below (78).
        Ok(_) | Err(EngineProblem::Unreadable { .. }) => {}
        Err(problem) => {
            // Asked for an engine that cannot run here: a configuration error, parked (78).
            let mut failure = Failure::from(hermes_services::Error::from(problem));
            recorder.record(Phase::StartupFailed, Some(&failure.one_line()));
            failure.code = hermes_errors::exit::CONFIG;
            return Err(failure);
        }
    }
    let mut profile = match settings(&home) {
        Ok(profile) => profile,
        Err(mut failure) => {
            // A profile whose settings cannot be resolved is a configuration error: exit 78 so
            // a supervisor parks it instead of restarting it in a loop.
            recorder.record(Phase::StartupFailed, Some(&failure.one_line()));
            failure.code = hermes_errors::exit::CONFIG;
            return Err(failure);
        }
    };
    profile.settings.replace = replace;
    profile.settings.multiplex = match multiplexing(&home) {
        Ok(on) => on,
        Err(mut failure) => {
            recorder.record(Phase::StartupFailed, Some(&failure.one_line()));
            failure.code = hermes_errors::exit::CONFIG;
            return Err(failure);
        }
    };
    log_to_stderr();
    // One thread serves a profile's traffic: a stream is relayed end to end without handing
    // its events between workers (measured: half the time waiting for a CPU, a third of the
    // context switches per answer; bench/gateway/RESULTS.md). SQLite work still goes to the
    // blocking pool.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let reason = runtime
        .block_on(hermes_gateway::run(profile, &recorder, shutdown_signal()))
        .map_err(|error| {
            // 78 for configuration, 1 for the rest (lock held, port in use, unusable state.db).
            let code = error.exit_code();
            let mut failure = Failure::from(error);
            failure.code = code;
            failure
        })?;
    match reason {
        ExitReason::Stopped => Ok(ExitStatus::Success),
        ExitReason::RestartRequested => Ok(ExitStatus::External(hermes_errors::exit::TEMPFAIL)),
        ExitReason::ConfigError(error) => {
            let mut failure = Failure::from(error);
            failure.code = hermes_errors::exit::CONFIG;
            Err(failure)
        }
        // A way of ending this binary does not know (the enum is non-exhaustive): its exit
        // code, never its debug form.
        other => {
            let mut failure = Failure::new(
                format!(
                    "the gateway stopped for a reason this version of hermes cannot name (exit \
                     code {})",
                    other.exit_code()
                ),
                Some("see the lines above; report it if they do not explain it".into()),
            );
            failure.code = other.exit_code();
            Err(failure)
        }
    }
}

/// Replaces this process with the agent's own gateway for the profile
/// (`hermes_services::agent::gateway_command`). `exec`, not a child: the supervisor's pid is
/// the agent's, so its signals (SIGTERM to stop, SIGUSR1 to restart) and its exit code (75 to
/// be restarted, 78 for bad configuration, 1 after a crash) reach the supervisor untouched.
/// Returns only when the exec failed: an install that cannot run is not fixed by restarting
/// it, so that is exit 78.
fn exec_agent(home: &Home, agent: &hermes_services::agent::Agent) -> Failure {
    use std::os::unix::process::CommandExt;
    let (argv, env) = hermes_services::agent::gateway_command(
        agent,
        home.root(),
        home.profile().name(),
        supervised(),
    );
    output::stderr(&format!(
        "hermes: profile `{}`: the gateway engine is hermes-agent {} (`{}`)\n",
        home.profile().name(),
        agent.version.as_deref().unwrap_or("(unknown version)"),
        agent.cli.display()
    ));
    let mut command = std::process::Command::new(&argv[0]);
    command.args(&argv[1..]).envs(env).current_dir(home.dir());
    let error = command.exec();
    let mut failure = Failure::new(
        format!(
            "cannot run hermes-agent's gateway `{}`",
            agent.cli.display()
        ),
        Some(format!(
            "check that `{}` is hermes-agent's console script (`{}` names another), or set \
             `gateway.engine: native` in the profile's config.yaml",
            agent.cli.display(),
            hermes_services::agent::AGENT_CLI_VAR
        )),
    );
    failure.causes.push(error.to_string());
    failure.code = hermes_errors::exit::CONFIG;
    failure
}

/// Whether a supervisor restarts this gateway when it exits 75: ours (the service's
/// environment says so) or systemd (`INVOCATION_ID`, as in the unit `gateway install` writes).
fn supervised() -> bool {
    Context::var(hermes_services::gateway::SUPERVISED_VAR)
        .is_some_and(|v| hermes_errors::switch::is_truthy(&v))
        || Context::var("INVOCATION_ID").is_some_and(|v| !v.is_empty())
}

/// The gateway's own messages (a withheld provider key, a refused connection, provider
/// retries) go to stderr, one line each, which the supervisor timestamps into the gateway's
/// log. `RUST_LOG` overrides the default level, `info`.
fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .with_target(false)
        .try_init();
}

/// SIGTERM / SIGINT stop the gateway (after draining); SIGUSR1 asks for a restart (exit 75).
async fn shutdown_signal() -> ShutdownRequest {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut usr1)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::user_defined1()),
    ) else {
        // Without signal handlers nothing could stop us cleanly; run until killed.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => ShutdownRequest::Stop,
        _ = int.recv() => ShutdownRequest::Stop,
        _ = usr1.recv() => ShutdownRequest::Restart,
    }
}

/// A supervisor is running: make sure it runs this profile's gateway, then follow its log.
fn hand_over(home: &Home, client: &mut hermes_supervisor::Client) -> CommandResult {
    let name = service_name(home.profile().name());
    ensure_registered(home, client, true)?;
    client.start(&name)?;
    // As PID 1's main program (`docker run IMAGE gateway run`) our console is the
    // supervisor's, which already shows the gateway's lines: following the log too would
    // print each twice. Stay in the foreground until signalled, as the container's program.
    if hermes_services::supervisor_pid(home.root(), Context::var)
        == Some(nix::unistd::getppid().as_raw())
    {
        output::stderr(&format!(
            "hermes: `{name}` runs under the supervisor, whose output shows its log\n"
        ));
        loop {
            nix::unistd::pause();
        }
    }
    output::stderr(&format!(
        "hermes: `{name}` runs under the supervisor; following its log (Ctrl-C stops following)\n"
    ));
    let log = hermes_services::log_file(home.root(), &name)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !log.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    service::logs(home.root(), &name, 20, true)?;
    Ok(ExitStatus::Success)
}

/// Registers the profile's gateway service unless the supervisor already has it
/// (`hermes_services::ensure_registered`); warnings about its `gateway.command` go to stderr.
pub fn ensure_registered(
    home: &Home,
    client: &mut hermes_supervisor::Client,
    autostart: bool,
) -> Result<(), Failure> {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("hermes"));
    let mut warnings = Vec::new();
    let registered =
        hermes_services::ensure_registered(client, home, &exe, autostart, &mut warnings);
    if !warnings.is_empty() {
        output::stderr(&String::from_utf8_lossy(&warnings));
    }
    registered?;
    Ok(())
}

#[derive(Clone, Copy)]
enum Lifecycle {
    Start,
    Stop,
    Restart,
}

/// `gateway start|stop|restart`. A start or restart waits up to `wait` for each gateway to
/// serve (`hermes_services::readiness`) and says how each went; the first failures are
/// printed as they come, the last is the command's error (exit 1).
fn lifecycle(
    ctx: &Context,
    target: GatewayTarget,
    action: Lifecycle,
    wait: Option<Duration>,
) -> CommandResult {
    let root = ctx.root()?;
    let homes: Vec<Home> = if target.all {
        profile::list(&root)?
            .into_iter()
            .filter_map(|entry| Home::for_profile(root.clone(), entry.profile).ok())
            .collect()
    } else {
        vec![ctx.home()?]
    };
    let no_supervisor = || {
        Failure::new(
            format!("no supervisor is running for `{}`", root.display()),
            Some("start one with `hermes up` (on a host) or run Hermes in its container; to run one gateway in the foreground: `hermes gateway run`".into()),
        )
    };
    let mut client = match service::connect(&root) {
        Ok(client) => client,
        Err(_) if matches!(action, Lifecycle::Stop) => {
            return match stop_unsupervised(&homes)? {
                0 => Err(no_supervisor()),
                _ => Ok(ExitStatus::Success),
            };
        }
        Err(_) => return Err(no_supervisor()),
    };
    let mut failed = None;
    // Under multiplexing the default gateway serves the named profiles: starting one of theirs
    // would make a second owner of its platforms (`--all` starts the default one only).
    let multiplex = hermes_services::multiplex::resolve_asking_agent(&root, &Context::var);
    for home in &homes {
        let name = service_name(home.profile().name());
        if !matches!(action, Lifecycle::Stop) && !multiplex.runs_own_gateway(home.profile().name())
        {
            output::stdout(&format!(
                "{}\n",
                hermes_services::multiplex::served_by_default_line(
                    home.profile().name(),
                    &multiplex
                )
            ))?;
            continue;
        }
        let request = match action {
            Lifecycle::Stop => {
                mark_planned_stop(home, &mut client, &name);
                client.stop(&name)?;
                output::stdout(&format!("Stopping `{name}`\n"))?;
                continue;
            }
            Lifecycle::Start => Request::Start,
            Lifecycle::Restart => {
                ensure_registered(home, &mut client, false)?;
                mark_planned_stop(home, &mut client, &name);
                Request::Restart
            }
        };
        ensure_registered(home, &mut client, false)?;
        let outcome =
            hermes_services::readiness::start_and_wait(&mut client, &root, &name, request, wait)?;
        let address = address(home);
        // Beside the pid: `(pid 7, API server off)`, not `(pid 7, (API server off))`.
        let detail = address
            .strip_prefix('(')
            .and_then(|a| a.strip_suffix(')'))
            .unwrap_or(&address);
        match service::report(&name, request, outcome, Some(detail)) {
            Ok(line) => output::stdout(&line)?,
            Err(failure) => {
                if let Some(earlier) = failed.replace(failure) {
                    output::stderr(&earlier.render());
                }
            }
        }
    }
    failed.map_or(Ok(ExitStatus::Success), Err)
}

/// Where `home`'s gateway serves ([`address_of`] its settings).
fn address(home: &Home) -> String {
    address_of(
        settings(home)
            .map(|p| p.settings)
            .as_ref()
            .map_err(|e| e.message.as_str()),
    )
}

/// Where a gateway with these settings serves: `http://ADDR`, `(API server off)`, or
/// `(invalid: why)`.
fn address_of(settings: Result<&GatewaySettings, &str>) -> String {
    match settings.map(GatewaySettings::api_addr) {
        Ok(Some(addr)) => format!("http://{addr}"),
        Ok(None) => "(API server off)".to_string(),
        Err(why) => format!("(invalid: {why})"),
    }
}

/// Before an operator stop (or restart) of a supervised gateway: the planned-stop marker
/// (`hermes_services::stop::mark_planned_stop`); one that cannot be written only costs the
/// recorded state, so it is said on stderr.
fn mark_planned_stop(home: &Home, client: &mut hermes_supervisor::Client, name: &str) {
    if let Err(e) = hermes_services::stop::mark_planned_stop(home, client, name) {
        output::stderr(&format!("warning: {}\n", hermes_errors::one_line(&e)));
    }
}

/// `gateway stop` without a supervisor: each profile's gateway that runs in the foreground
/// is stopped (`hermes_services::stop::stop_unsupervised`), said as it goes. Returns how
/// many were stopped.
fn stop_unsupervised(homes: &[Home]) -> Result<usize, Failure> {
    let mut stopped = 0;
    for home in homes {
        if let Some(gateway) =
            hermes_services::stop::stop_unsupervised(home, hermes_services::GATEWAY_STOP_GRACE)?
        {
            output::stdout(&format!(
                "Stopped the `{}` gateway (pid {})\n",
                gateway.profile, gateway.pid
            ))?;
            stopped += 1;
        }
    }
    Ok(stopped)
}

/// `gateway status` (`detailed`) and `gateway list`: one row per profile's gateway, with the
/// last error of a failing one on a line of its own below it
/// (`hermes_services::last_error`): its supervisor row failing, or — with no supervisor —
/// its record saying its last start failed.
fn status(ctx: &Context, json_output: bool, detailed: bool) -> CommandResult {
    let root = ctx.root()?;
    let supervised = service::connect(&root)
        .ok()
        .and_then(|mut c| c.status(None).ok());
    let mut rows = Vec::new();
    let mut last_errors = Vec::new();
    let multiplex = hermes_services::multiplex::resolve_asking_agent(&root, &Context::var);
    let profiles = profile::list(&root)?;
    let names: Vec<&str> = profiles.iter().map(|e| e.profile.name()).collect();
    let mode = multiplex.to_json(&names);
    let summary = multiplex.summary(&names);
    for entry in profiles.clone() {
        let Ok(home) = Home::for_profile(root.clone(), entry.profile) else {
            continue;
        };
        let name = service_name(home.profile().name());
        let service = supervised
            .as_ref()
            .and_then(|all| all.iter().find(|s| s.name == name));
        let last_error = match service {
            Some(row) => hermes_services::last_error::of_failing(&root, row),
            None => hermes_services::last_error::recorded(&root, &name),
        };
        let recorded = gateway_state::recorded_state(&home.gateway_state_path());
        let resolved = settings(&home).map(|p| p.settings);
        let api_server = match resolved.as_ref().map(|s| &s.api_server) {
            Ok(ApiServer::On) => json!({"enabled": true}),
            Ok(ApiServer::Off { reason }) => json!({"enabled": false, "reason": reason}),
            Err(_) => Value::Null,
        };
        let view = hermes_services::engines::of_home(
            name.clone(),
            home.clone(),
            &multiplex,
            &Context::var,
        );
        rows.push(json!({
            "profile": home.profile().name(),
            "service": name,
            "engine": view.engine,
            "state": service.map(|s| s.state.to_string()),
            "pid": service.and_then(|s| s.pid),
            "reason": service.map(|s| s.reason.clone()),
            "recorded": recorded,
            "address": address_of(resolved.as_ref().map_err(|e| e.message.as_str())),
            "api_server": api_server,
            "last_error": last_error.as_ref().map(|e| e.message.clone()),
            "served_by": view.served_by,
            "multiplex": mode,
        }));
        last_errors.push(last_error);
    }
    if json_output {
        if detailed {
            output::json(&rows)?;
        } else {
            output::json(&list_rows(&rows))?;
        }
        return Ok(ExitStatus::Success);
    }
    let cell = |v: &Value| {
        v.as_str().map_or_else(
            || {
                if v.is_null() {
                    "-".to_string()
                } else {
                    v.to_string()
                }
            },
            str::to_string,
        )
    };
    let mut table: Vec<Vec<String>> = Vec::new();
    if detailed {
        table.push(
            [
                "SERVICE", "ENGINE", "STATE", "PID", "RECORDED", "ADDRESS", "REASON",
            ]
            .map(String::from)
            .to_vec(),
        );
    }
    for r in &rows {
        table.push(if detailed {
            let state = if supervised.is_some() {
                cell(&r["state"])
            } else {
                "-".into()
            };
            let reason = match (cell(&r["reason"]), r["served_by"].as_str()) {
                (_, Some(by)) => format!("served by {by}"),
                (empty, None) if empty.is_empty() => "-".to_string(),
                (reason, None) => reason,
            };
            vec![
                cell(&r["service"]),
                cell(&r["engine"]),
                state,
                cell(&r["pid"]),
                cell(&r["recorded"]),
                cell(&r["address"]),
                reason,
            ]
        } else {
            vec![cell(&r["service"]), cell(&r["address"])]
        });
    }
    let header = usize::from(detailed);
    let mut text = String::new();
    for (i, line) in aligned(&table).iter().enumerate() {
        text.push_str(line);
        text.push('\n');
        if let Some(Some(error)) = i.checked_sub(header).and_then(|row| last_errors.get(row)) {
            text.push_str(&format!("  last error: {}\n", error.message));
        }
    }
    if detailed && multiplex.on {
        text.push_str(&format!("{summary}\n"));
    }
    if detailed && supervised.is_none() {
        text.push_str("(no supervisor is running: start one with `hermes up`)\n");
    }
    output::stdout(&text)?;
    Ok(ExitStatus::Success)
}

/// `table`'s rows as lines whose columns line up: each column as wide as its widest cell, two
/// spaces between columns, the last one unpadded — so a long cell never runs into the next.
fn aligned(table: &[Vec<String>]) -> Vec<String> {
    let columns = table.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            table
                .iter()
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    table
        .iter()
        .map(|row| {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                line.push_str(cell);
                if c + 1 < row.len() {
                    let pad = widths[c] - cell.chars().count() + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// `hermes gateway list --json`: what the profiles declare — each profile's gateway service
/// and address — without the live state that is `gateway status`'s.
fn list_rows(rows: &[Value]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            json!({
                "profile": r["profile"],
                "service": r["service"],
                "address": r["address"],
                "api_server": r["api_server"],
                "served_by": r["served_by"],
            })
        })
        .collect()
}

/// The engines view of a supervisor's `rows` (`hermes_services::engines`).
fn service_engines(
    root: &Path,
    rows: &[hermes_supervisor::ServiceStatus],
) -> (
    Vec<hermes_services::engines::GatewayEngine>,
    hermes_services::multiplex::Multiplexing,
) {
    let multiplex = hermes_services::multiplex::resolve_asking_agent(root, &Context::var);
    let engines = hermes_services::engines::of_rows(root, rows, &multiplex, &Context::var);
    (engines, multiplex)
}

/// `hermes service status --json`: the supervisor's rows, a gateway's with its `engine`.
pub fn with_engines(
    root: &Path,
    rows: &[hermes_supervisor::ServiceStatus],
) -> Result<Value, Failure> {
    let (engines, _) = service_engines(root, rows);
    let mut values = serde_json::to_value(rows).map_err(std::io::Error::other)?;
    for item in values.as_array_mut().into_iter().flatten() {
        let engine = engines.iter().find(|g| item["name"] == g.service.as_str());
        if let (Some(row), Some(gateway)) = (item.as_object_mut(), engine) {
            row.insert("engine".into(), json!(gateway.engine));
        }
    }
    Ok(values)
}

/// `hermes service status`, under the table: `gateway engines: gateway-default native, …`
/// (nothing when no row is a gateway).
pub fn engines_line(root: &Path, rows: &[hermes_supervisor::ServiceStatus]) -> String {
    let (engines, multiplex) = service_engines(root, rows);
    if engines.is_empty() {
        return String::new();
    }
    let list: Vec<String> = engines
        .iter()
        .map(|g| format!("{} {}", g.service, g.engine))
        .collect();
    let mut text = format!("\ngateway engines: {}\n", list.join(", "));
    if multiplex.on {
        let names: Vec<&str> = engines.iter().map(|g| g.home.profile().name()).collect();
        text.push_str(&format!("gateway mode: {}\n", multiplex.summary(&names)));
    }
    text
}

/// `gateway install|uninstall` (`hermes_services::unit`).
fn install(ctx: &Context, install: bool) -> CommandResult {
    use hermes_services::unit::{self, UnitChange};
    let home = ctx.home()?;
    let change = if install {
        unit::install(&home, &std::env::current_exe()?, &Context::var)?
    } else {
        unit::uninstall(&home, &Context::var)?
    };
    match change {
        UnitChange::InContainer => output::stdout(
            "In the container, gateways are managed automatically: every profile gets one, started at boot when it was running before. Use `hermes gateway start|stop` instead.\n",
        )?,
        UnitChange::Written {
            unit,
            unit_name,
            exe,
            build_only,
        } => {
            if build_only {
                output::stderr(&format!(
                    "warning: the unit runs the build `{}`, which `cargo clean` removes\n\
                     hint: install hermes (e.g. `cargo install --path crates/hermes`) and run \
                     `hermes gateway install` again\n",
                    exe.display()
                ));
            }
            output::stdout(&format!(
                "Wrote `{}`; enable it with `systemctl --user daemon-reload && systemctl --user enable --now {unit_name}`\n",
                unit.display()
            ))?;
        }
        UnitChange::Absent { unit } => output::stdout(&format!(
            "No unit at `{}`; nothing to remove\n",
            unit.display()
        ))?,
        UnitChange::Removed { unit, unit_name } => output::stdout(&format!(
            "Removed `{}`; if the gateway still runs, stop it with `systemctl --user stop {unit_name}`, \
             then run `systemctl --user daemon-reload`\n",
            unit.display()
        ))?,
    }
    Ok(ExitStatus::Success)
}

/// The gateway's state file recorder, plus the terminal's part: where it listens, and any
/// failure to write the state file.
struct CliRecorder(hermes_gateway::StateFileRecorder);

impl CliRecorder {
    fn new(home: &Home) -> Self {
        let identity =
            hermes_diag::BuildIdentity::current(hermes_diag::Install::current().dir.as_deref());
        CliRecorder(hermes_gateway::StateFileRecorder::new(
            home.dir(),
            std::env::args().collect(),
            identity.sha,
            &identity.version,
        ))
    }
}

impl StateRecorder for CliRecorder {
    fn record(&self, phase: Phase, exit_reason: Option<&str>) {
        self.0.record(phase, exit_reason);
        self.print_warnings();
    }

    fn listening(&self, addr: std::net::SocketAddr) {
        output::stderr(&format!("hermes gateway: listening on http://{addr}\n"));
    }

    fn api_server(&self, state: &str, message: Option<&str>) {
        self.0.api_server(state, message);
        self.print_warnings();
    }

    fn exited(&self, exit_code: u8, reason: &str) {
        self.0.exited(exit_code, reason);
        self.print_warnings();
    }
}

impl CliRecorder {
    /// Failures to write the state file or the ledger: said, never fatal to the gateway.
    fn print_warnings(&self) {
        for warning in self.0.take_warnings() {
            output::stderr(&format!("warning: {warning}\n"));
        }
    }
}

/// `hermes chat -q TEXT`.
pub fn chat(ctx: &Context, query: &str, session: Option<&str>) -> CommandResult {
    // Checked before anything is read or sent: an empty message is a mistake (an unset shell
    // variable in `-q "$Q"`), not a question for the model.
    if query.trim().is_empty() {
        return Err(Failure::new(
            "the message is empty: nothing was sent",
            Some("write the question after `-q`, e.g. `hermes chat -q \"hello\"`".into()),
        ));
    }
    let home = ctx.home()?;
    let profile = settings(&home)?;
    if let Some(id) = session {
        existing_session(&profile.settings.state_db, id)?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let streaming = std::io::stdout().is_terminal();
    // Every conversation is stored, so it can be continued with `--session`.
    let session = session.map_or_else(new_session_id, str::to_string);
    let answer = runtime.block_on(hermes_gateway::chat_once(
        &profile,
        query,
        Some(&session),
        |delta| {
            if streaming {
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(delta.as_bytes());
                let _ = out.flush();
            }
        },
    ))?;
    if streaming {
        output::stdout("\n")?;
    } else {
        output::stdout(&format!("{}\n", answer.text))?;
    }
    output::stderr(&format!(
        "session: {session} (continue with `--session {session}`)\n"
    ));
    let _ = answer;
    Ok(ExitStatus::Success)
}

/// `--session ID` continues a conversation, so `ID` must name a stored one: a mistyped id
/// would otherwise start a new conversation without its history, unnoticed. As the
/// original's `--resume`, which says "Session not found"; a new conversation is `chat`
/// without `--session` (its id is printed afterwards).
fn existing_session(state_db: &Path, id: &str) -> Result<(), Failure> {
    use hermes_sessions::browse::{MAX_LIMIT, Reader};
    hermes_sessions::validate_session_id(id)?;
    let reader = Reader::open(state_db)?;
    let known = match &reader {
        Some(reader) if reader.session(id)?.is_some() => return Ok(()),
        Some(reader) => reader.list(MAX_LIMIT, None)?,
        None => Vec::new(),
    };
    let close = close_matches(id, known.iter().map(|s| s.id.as_str()));
    let hint = match close.as_slice() {
        [] => "list conversations on the dashboard's Sessions page, or leave `--session` out to \
               start a new one"
            .to_string(),
        [one] => format!("did you mean `--session {one}`?"),
        many => format!(
            "did you mean one of: {}?",
            many.iter()
                .map(|id| format!("`{id}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Err(Failure::new(
        format!("no conversation `{id}` in `{}`", state_db.display()),
        Some(hint),
    ))
}

/// The ids in `known` that `typed` may have meant: one is a prefix of the other, or they are
/// at most two edits apart. At most five, the closest first.
fn close_matches<'a>(typed: &str, known: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    use hermes_errors::suggest::{self, Within};
    let mut close = suggest::close_matches(typed, known, Within::EditsOrPrefix(2));
    close.truncate(5);
    close
}

/// `chat-` and 16 random hex digits.
fn new_session_id() -> String {
    let hex = hermes_home::random::random_hex(8).unwrap_or_else(|_| {
        // No /dev/urandom: time and pid are unique enough for a conversation id.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!(
            "{:016x}",
            (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32)
        )
    });
    format!("chat-{hex}")
}

#[cfg(test)]
mod chat_tests {
    use super::*;

    #[test]
    fn close_matches_are_prefixes_or_near_misses_closest_first() {
        let known = [
            "chat-0123456789abcdef",
            "chat-0123456789abcdeg",
            "chat-ffff",
            "other",
        ];
        assert_eq!(
            close_matches("chat-0123456789abcdfe", known.into_iter()),
            ["chat-0123456789abcdef", "chat-0123456789abcdeg"]
        );
        assert_eq!(close_matches("chat-ff", known.into_iter()), ["chat-ffff"]);
        assert!(close_matches("nothing-alike", known.into_iter()).is_empty());
        let many: Vec<String> = (0..9).map(|i| format!("chat-{i}")).collect();
        assert_eq!(
            close_matches("chat-", many.iter().map(String::as_str)).len(),
            5
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_supervise_takes_every_truthy_word() {
        let with = |value: &'static str| {
            move |name: &str| (name == NO_SUPERVISE_VAR).then(|| value.to_string())
        };
        // `on` used to hand over anyway: this switch read 1/true/yes only.
        for on in ["1", "true", "yes", "on", " ON "] {
            assert!(foreground_only(false, with(on)), "{on:?}");
        }
        for off in ["", "0", "off", "no", "later"] {
            assert!(!foreground_only(false, with(off)), "{off:?}");
        }
        assert!(foreground_only(true, |_: &str| None));
        assert!(!foreground_only(false, |_: &str| None));
    }
}
