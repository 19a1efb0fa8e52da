//! `gateway run`: one profile's gateway in the foreground, on a current-thread tokio runtime,
//! until SIGTERM/SIGINT (stop) or SIGUSR1 (restart, exit 75) — unless a supervisor runs it
//! instead (`hand_over.rs`) or its engine is the agent (`agent.rs`). Run by the supervisor, it
//! serves on the API socket the supervisor passed (`LISTEN_FDS`) and, in a restart, beside
//! the gateway it takes over from (`HERMES_HANDOVER_FROM`).

use hermes_gateway::{ExitReason, Phase, ShutdownRequest, StateRecorder};
use hermes_home::Home;
use hermes_services::agent::{Engine, EngineProblem};
use hermes_services::upgrade::UpgradeProblem;

use super::recorder::CliRecorder;
use super::{agent, hand_over, settings};
use crate::commands::service;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// Whether this native gateway serves every profile of the volume at `/p/<profile>/`
/// (`hermes_gateway`'s multiplexing): only the default profile's gateway does, when the switch
/// is on (`GATEWAY_MULTIPLEX_PROFILES` in the environment, then the root `config.yaml`, as
/// `hermes_home::multiplex` reads it); the native gateway's default is off. A named profile's
/// gateway serves its own profile whatever the switch says.
fn multiplexing(home: &Home) -> Result<bool, Failure> {
    if *home.profile() != hermes_home::ProfileRef::Default {
        return Ok(false);
    }
    let config = hermes_settings::config_of(home.dir())?;
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

/// `gateway run [--replace] [--no-supervise]`: hand over to a running supervisor, exec the
/// agent, or serve here until a signal; the exit code tells a supervisor what to do next.
pub(super) fn run_gateway(ctx: &Context, replace: bool, no_supervise: bool) -> CommandResult {
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
        let failure = Failure::new(
            hermes_services::multiplex::served_by_default_line(home.profile().name(), &multiplex),
            Some(format!(
                "use the default profile's gateway (`/p/{}/v1/...`), or switch multiplexing off \
                 ({}=0 or `{}: false`)",
                home.profile().name(),
                hermes_home::multiplex::MULTIPLEX_VAR,
                hermes_home::multiplex::MULTIPLEX_KEY
            )),
        );
        return Err(configuration(failure, None));
    }
    if !foreground_only(no_supervise, Context::var)
        && let Ok(mut client) = service::connect(home.root())
    {
        return hand_over::hand_over(&home, &mut client);
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
                    let failure = Failure::from(hermes_services::Error::from(problem));
                    return Err(configuration(failure, (!downgrade).then_some(&recorder)));
                }
            }
            return Err(agent::exec_agent(&home, &agent));
        }
        // An unreadable config.yaml is reported, with its line, by the settings below (78).
        Ok(_) | Err(EngineProblem::Unreadable { .. }) => {}
        Err(problem) => {
            // Asked for an engine that cannot run here: a configuration error, parked (78).
            let failure = Failure::from(hermes_services::Error::from(problem));
            return Err(configuration(failure, Some(&recorder)));
        }
    }
    let mut profile = match settings::resolve(&home) {
        Ok(profile) => profile,
        // A profile whose settings cannot be resolved is a configuration error: exit 78 so a
        // supervisor parks it instead of restarting it in a loop.
        Err(failure) => return Err(configuration(failure, Some(&recorder))),
    };
    profile.settings.replace = replace;
    // A supervisor's hand-over and the sockets it passes (`LISTEN_FDS`): read once, before
    // anything could start a process that inherits them.
    let listen_failure =
        |e: hermes_gateway::listen::Error| configuration(Failure::from(e), Some(&recorder));
    profile.settings.handover_from =
        hermes_gateway::listen::handover_from_env().map_err(listen_failure)?;
    let sockets = hermes_gateway::Inherited::from_env().map_err(listen_failure)?;
    profile.settings.multiplex = match multiplexing(&home) {
        Ok(on) => on,
        Err(failure) => return Err(configuration(failure, Some(&recorder))),
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
        .block_on(hermes_gateway::run_with(
            profile,
            &recorder,
            shutdown_signal(),
            sockets,
        ))
        // 78 for configuration, 1 for the rest (lock held, port in use, unusable state.db):
        // the error carries it.
        .map_err(Failure::from)?;
    match reason {
        ExitReason::Stopped => Ok(ExitStatus::Success),
        ExitReason::RestartRequested => Ok(ExitStatus::External(hermes_errors::exit::TEMPFAIL)),
        ExitReason::ConfigError(error) => Err(configuration(Failure::from(error), None)),
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

/// A failure to start for the profile's configuration: exit 78, so a supervisor parks the
/// gateway instead of restarting it in a loop; recorded in its state file when `recorder` is
/// given (a volume newer than the agent is left untouched, so that one is not).
fn configuration(mut failure: Failure, recorder: Option<&CliRecorder>) -> Failure {
    if let Some(recorder) = recorder {
        recorder.record(Phase::StartupFailed, Some(&failure.one_line()));
    }
    failure.code = hermes_errors::exit::CONFIG;
    failure
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
