//! [`run`]: the whole life of `hermes init`, from the first instruction to the exit code.
//!
//! Order, and why:
//! 1. Block the forwarded signals and `SIGCHLD` *first*, before any thread could exist, so no
//!    signal is ever delivered to a handler: the supervisor reads them from a `signalfd`.
//!    Children get an empty mask again before `exec` (the supervisor resets it in the child;
//!    std does not). No-op handlers make `kill 1` from inside the namespace count.
//! 2. Not PID 1 (`docker run --init`, Fly, some Kubernetes set-ups): become a child
//!    sub-reaper, so orphans of the main program come to us exactly as they would to PID 1.
//!    Same behaviour from here on: no degraded mode.
//! 3. Boot stages 1–7 ([`crate::boot`], [`crate::gateways`]); each is contained. The
//!    supervisor listens in the first runtime directory it can make private
//!    (`hermes_services::runtime`, the rule every client follows).
//! 4. Route the CMD ([`mod@crate::route`]) and supervise: the main program runs as the service
//!    user, in its own process group, in the foreground of the TTY when there is one, in the
//!    working directory Docker gave. Signals go to its group; orphans are reaped.
//! 5. When it exits, services stop in order with their grace and `run` returns its exit code
//!    (or 128 + signal), with `-e` codes mapped to 0.
//!
//! Once the supervisor runs nothing may bail: PID 1 exiting kills the container. About 1 s
//! into the loop, PID 1 gives back the file pages only the boot used
//! ([`crate::pages::release_boot_memory`], from its hooks [`InitHooks`]).

use std::io::{IsTerminal, Write};

use hermes_services::DesiredStateHooks;
use hermes_services::boot_record::BootRecord;
use hermes_services::dashboard::add_unless_declared;
use hermes_supervisor::{LogTarget, Options, RestartPolicy, ServiceSpec, Supervisor};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal, sigaction};

use crate::boot::{Booted, run_stages, say};
use crate::gateways::{
    InitHooks, backup_service, dashboard_service, stage_gateways, stage_read_volume,
};
use crate::route::{program_exists, route};
use crate::{Error, Settings};

/// Name of the main program's service in the supervisor.
pub const MAIN_SERVICE: &str = "main";

/// Signals PID 1 takes over: the forwarded ones and `SIGCHLD` — exactly the loop's.
pub const HANDLED_SIGNALS: [Signal; 8] = hermes_supervisor::LOOP_SIGNALS;

/// Runs `hermes init` to completion and returns the exit code for the container.
///
/// `log` receives `[init]` boot lines; `mirror` receives service output as `[service] line`
/// (pass `Mirror::stdout()`: the supervisor then never blocks on a reader that stalls).
///
/// # Errors
/// Only before the main program starts: the signal mask, the user guard, a missing service user
/// inside the image, or a supervisor that cannot start (see [`Error`]).
pub fn run<'o>(
    settings: &Settings,
    log: &mut dyn Write,
    mirror: impl Into<hermes_supervisor::Mirror<'o>>,
) -> Result<u8, Error> {
    let boot_started = (std::time::SystemTime::now(), std::time::Instant::now());
    block_signals()?;
    let pid1 = nix::unistd::getpid().as_raw() == 1;
    if !pid1 {
        // Refused in some sandboxes (AWS Lambda): say so, and still run the main program.
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            say(
                log,
                format!("warning: cannot become a child sub-reaper ({e}); orphans go to PID 1"),
            );
        }
        if let Some(sig) = settings.flags.parent_death_signal
            && let Err(e) = nix::sys::prctl::set_pdeathsig(sig)
        {
            say(
                log,
                format!("warning: cannot set the parent-death signal: {e}"),
            );
        }
        if settings.flags.verbose > 0 {
            say(log, "not PID 1: running as a child sub-reaper");
        }
    }

    // `docker run IMAGE init -- CMD` asks for what this process already is: no second
    // supervisor inside the first, just CMD.
    let unwrapped;
    let settings = match crate::route::unwrap_nested_init(&settings.cmd) {
        Some(cmd) => {
            say(
                log,
                format!(
                    "`init` in the command: this container's init is already running; running `{}`",
                    cmd.join(" ")
                ),
            );
            unwrapped = Settings {
                cmd,
                ..settings.clone()
            };
            &unwrapped
        }
        None => settings,
    };
    let booted = run_stages(settings, log)?;
    let schema = crate::migrate::stage_agent_schema(settings, &booted, log);
    let volume = stage_read_volume(settings, &booted, log);
    let checked = match volume {
        Some(_) => {
            let mut lines = crate::databases::stage_check_databases(settings, log);
            lines.extend(crate::plugins::stage_resolve_plugins(
                settings, &booted, log,
            ));
            lines
        }
        None => Vec::new(),
    };
    let mut specs = match &volume {
        Some(volume) => stage_gateways(settings, &booted, volume, &schema, &checked, log),
        None => Vec::new(),
    };
    if let Some(dashboard) = dashboard_service(settings, &booted, log)
        && let Some(note) = add_unless_declared(&mut specs, dashboard)
    {
        say(log, note);
    }
    if let Some(volume) = &volume
        && let Some(backup) = backup_service(settings, &booted, volume, log)
        && let Some(note) =
            hermes_services::backup_schedule::add_unless_declared(&mut specs, backup)
    {
        say(log, note);
    }
    if settings.flags.verbose > 0 {
        say(
            log,
            format!("boot done; {} service(s) registered", specs.len()),
        );
    }
    specs.push(main_spec(settings, &booted));
    for line in hermes_services::stop_budget::describe_needs(
        specs.iter().map(|s| s.stop_grace),
        settings
            .env
            .get(hermes_services::stop_budget::CONTAINER_STOP_TIMEOUT_VAR),
    ) {
        say(log, line);
    }
    for spec in &mut specs {
        if settings.home_defaulted {
            spec.env.insert(
                "HERMES_HOME".into(),
                settings.home.to_string_lossy().into_owned(),
            );
        }
    }

    let candidates = hermes_services::runtime_dirs_with_marker(
        &settings.home,
        |k| settings.env.get(k).map(str::to_owned),
        &settings.image_marker,
    );
    let runtime_dir = hermes_services::choose_runtime_dir(&candidates)?;
    if settings.flags.verbose > 0 || runtime_dir != candidates[0] {
        say(
            log,
            format!("control socket in `{}`", runtime_dir.display()),
        );
    }
    let mut opts = Options::new(&runtime_dir, hermes_home::layout::logs_dir(&settings.home));
    opts.main = Some(MAIN_SERVICE.to_owned());
    opts.foreground_tty = std::io::stdin().is_terminal();
    if let Some(id) = &booted.identity {
        opts.allowed_uids = vec![id.uid];
        opts.socket_gid = Some(id.gid);
        // A gateway registered at run time by `hermes gateway start` (as hermes) runs as
        // hermes, with the device groups, never as root.
        opts.default_run_as = Some(hermes_supervisor::RunAs {
            uid: id.uid,
            gid: id.gid,
            groups: id.groups.clone(),
        });
    }
    let sign_in = hermes_services::sign_in::prepare(&mut specs, &settings.hermes_exe, |k| {
        settings.env.get(k).map(str::to_owned)
    })
    .unwrap_or_else(|e| {
        say(
            log,
            format!(
                "warning: no sign-in token for the dashboard ({}); it makes its own",
                hermes_errors::describe_io(&e)
            ),
        );
        None
    });
    let supervisor = Supervisor::new(opts, specs)?;
    for note in supervisor.notes() {
        say(log, format!("warning: {note}"));
    }
    if let Some(token) = &sign_in {
        // Never the token itself: this log is on the volume and in every backup.
        let kept =
            hermes_services::sign_in::Kept::new(token, |k| settings.env.get(k).map(str::to_owned));
        match hermes_services::sign_in::keep(&runtime_dir, &kept) {
            Ok(()) => say(
                log,
                "dashboard: `hermes dashboard link` (as root: `docker exec <container> hermes dashboard link`) prints the sign-in link",
            ),
            Err(e) => say(
                log,
                format!(
                    "warning: cannot keep the dashboard's sign-in token: {}",
                    hermes_errors::one_line(&e)
                ),
            ),
        }
    }
    let boot = BootRecord::new(boot_started.0, boot_started.1.elapsed());
    if let Err(e) = hermes_services::boot_record::write(&runtime_dir, &boot) {
        say(
            log,
            format!(
                "warning: cannot record the boot's duration in `{}`: {}",
                runtime_dir.display(),
                hermes_errors::describe_io(&e)
            ),
        );
    }
    let mut hooks_log = crate::boot::InitLog::new(log);
    let mut hooks = InitHooks {
        state: DesiredStateHooks {
            home: settings.home.clone(),
            log: &mut hooks_log,
        },
        identity: booted.identity.clone(),
    };
    let outcome = supervisor.run(&mut hooks, mirror);
    if sign_in.is_some() {
        hermes_services::sign_in::forget(&runtime_dir);
    }
    let outcome = outcome?;
    Ok(settings.exit_code(outcome.exit_code()))
}

/// Blocks [`HANDLED_SIGNALS`] in the calling (only) thread.
fn block_signals() -> Result<(), Error> {
    let mut mask = SigSet::empty();
    for s in HANDLED_SIGNALS {
        mask.add(s);
    }
    mask.thread_block().map_err(|e| Error::Signals {
        what: "the signal mask",
        source: e,
    })?;
    // The kernel drops a signal sent to a namespace's PID 1 *from inside* the namespace
    // (`docker exec c kill -TERM 1`) when its disposition is SIG_DFL, even if it is blocked.
    // A no-op handler changes the disposition; it never runs (the signals stay blocked and
    // are read from the signalfd), and `exec` resets it to SIG_DFL in children.
    let action = SigAction::new(
        SigHandler::Handler(ignore),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for s in HANDLED_SIGNALS {
        #[allow(unsafe_code)]
        // SAFETY: `ignore` is async-signal-safe (it does nothing), and no other code in this
        // process installs handlers for these signals.
        let _ = unsafe { sigaction(s, &action) };
    }
    // SIGTTOU/SIGTTIN would stop PID 1 if it ever touched the terminal from the background
    // (after the main program took the foreground); PID 1 never reads the terminal.
    let mut tty = SigSet::empty();
    tty.add(Signal::SIGTTOU);
    tty.add(Signal::SIGTTIN);
    let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&tty), None);
    Ok(())
}

extern "C" fn ignore(_: libc::c_int) {}

/// The main program's service: routed argv, run as the service user, the TTY, Docker's cwd.
pub fn main_spec(settings: &Settings, booted: &Booted) -> ServiceSpec {
    let path = settings.path.clone();
    let on_path = move |word: &str| program_exists(word, path.as_deref());
    let routed = route(&settings.cmd, &settings.subcommands, &on_path);
    let mut spec = ServiceSpec::new(MAIN_SERVICE, routed.argv(&settings.hermes_exe));
    spec.restart = RestartPolicy::Never;
    spec.log = LogTarget::Inherit;
    spec.cwd = settings.cwd.clone();
    if let Some(id) = &booted.identity {
        hermes_services::run_as_identity(&mut spec, id);
    }
    spec
}
