//! `hermes up -d` and `hermes down`: the supervisor in the background on a machine, as
//! `docker compose up -d` / `down` and `pm2 start` / `kill` do it.
//!
//! * `up -d` starts `hermes up` in a session of its own (a closed terminal does not stop it),
//!   its output appended to `logs/up.log`, and returns once its control socket answers — or
//!   says why it did not start, with the log's last lines.
//! * `down` asks that supervisor to stop everything (SIGTERM, what Ctrl-C does in the
//!   foreground) and waits until it has: the gateways drain first, so this can take their stop
//!   grace. Nothing running is not an error. The container's supervisor is PID 1 and stops
//!   with the container: `down` refuses it and names `docker stop`.
//!
//! As a service of the machine's own init, `hermes up --unit` prints a systemd user unit
//! (`hermes up` in the foreground, its stop grace, no restart after a configuration error).

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cli::UpArgs;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// How long `up -d` waits for the supervisor's control socket (the boot of every gateway is
/// not waited for: `hermes service status` shows them).
const START_WAIT: Duration = Duration::from_secs(30);
/// How long `down` waits: the gateways' stop grace (35 s, they drain in parallel) and the
/// supervisor's own, with room.
const STOP_WAIT: Duration = Duration::from_secs(90);
/// How often both look.
const POLL: Duration = Duration::from_millis(100);
/// The log of a supervisor in the background, under `logs/`.
pub const UP_LOG: &str = "up.log";

/// `hermes up -d`.
pub fn detach(ctx: &Context, args: &UpArgs) -> CommandResult {
    let root = ctx.root()?;
    if let Some(pid) = running_supervisor(&root) {
        return Err(Failure::new(
            format!(
                "a supervisor already runs for `{}` (pid {pid})",
                root.display()
            ),
            Some("`hermes service status` shows it; `hermes down` stops it".into()),
        ));
    }
    let log_path = hermes_home::layout::logs_dir(&root).join(UP_LOG);
    let log = open_log(&log_path).map_err(|e| {
        Failure::new(
            format!(
                "cannot open `{}`: {}",
                log_path.display(),
                hermes_errors::describe_io(&e)
            ),
            Some("the volume's logs/ must be writable by this user".into()),
        )
    })?;
    let started = Instant::now();
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg("up")
        .env("HERMES_HOME", &root)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    if args.no_dashboard {
        command.arg("--no-dashboard");
    }
    #[allow(unsafe_code)]
    // SAFETY: runs between fork and exec and only calls setsid(2), which is async-signal-safe.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    let mut child = command.spawn()?;
    let pid = child.id();
    loop {
        if let Some(status) = child.try_wait()? {
            let tail = hermes_services::tail(&log_path, 10).unwrap_or_default();
            return Err(Failure::new(
                format!(
                    "`hermes up` exited ({status}) before it was running; the end of `{}`:\n{}",
                    log_path.display(),
                    tail.join("\n")
                ),
                Some("fix what it says, then run `hermes up -d` again".into()),
            ));
        }
        if running_supervisor(&root).is_some() {
            break;
        }
        if started.elapsed() > START_WAIT {
            return Err(Failure::new(
                format!(
                    "`hermes up` (pid {pid}) did not answer within {} s",
                    START_WAIT.as_secs()
                ),
                Some(format!(
                    "it may still be starting: see `{}`, or stop it with `hermes down`",
                    log_path.display()
                )),
            ));
        }
        std::thread::sleep(POLL);
    }
    let mut said = format!(
        "hermes up: running in the background (pid {pid}), its log in `{}`; `hermes service status` shows the services, `hermes down` stops them\n",
        log_path.display()
    );
    if !args.no_dashboard {
        said.push_str("hermes up: `hermes dashboard link` prints the dashboard's sign-in link\n");
    }
    output::stderr(&said);
    Ok(ExitStatus::Success)
}

/// `hermes down`.
pub fn down(ctx: &Context) -> CommandResult {
    let root = ctx.root()?;
    let Some(pid) = running_supervisor(&root) else {
        output::stderr(&format!(
            "hermes down: no supervisor runs for `{}`; nothing to stop\n",
            root.display()
        ));
        return Ok(ExitStatus::Success);
    };
    if pid == 1 {
        return Err(Failure::new(
            "the supervisor is this container's PID 1; it stops with the container",
            Some("stop the container: `docker stop -t 40 <container>` (docs/docker.md)".into()),
        ));
    }
    let target = nix::unistd::Pid::from_raw(pid);
    nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGTERM).map_err(|e| {
        Failure::new(
            format!("cannot signal the supervisor (pid {pid}): {e}"),
            Some("run `hermes down` as the user that started it".into()),
        )
    })?;
    output::stderr(&format!(
        "hermes down: stopping the supervisor (pid {pid}) and its services; gateways finish their requests first\n"
    ));
    let started = Instant::now();
    let mut said = Duration::ZERO;
    while nix::sys::signal::kill(target, None).is_ok() && running_supervisor(&root) == Some(pid) {
        if started.elapsed() > STOP_WAIT {
            return Err(Failure::new(
                format!(
                    "the supervisor (pid {pid}) is still stopping after {} s",
                    STOP_WAIT.as_secs()
                ),
                Some("`hermes service status` shows what still runs".into()),
            ));
        }
        // A line every 10 s, so a long drain is not mistaken for a hang.
        if started.elapsed() >= said + Duration::from_secs(10) {
            said = started.elapsed();
            output::stderr(&format!(
                "hermes down: still stopping ({} s)\n",
                said.as_secs()
            ));
        }
        std::thread::sleep(POLL);
    }
    output::stderr("hermes down: every service has stopped\n");
    Ok(ExitStatus::Success)
}

/// `hermes up --unit`: a systemd user unit running `hermes up` for this volume.
pub fn unit(ctx: &Context, args: &UpArgs) -> CommandResult {
    let root = ctx.root()?;
    let exe = std::env::current_exe()?;
    output::stdout(&hermes_services::up_unit(&root, &exe, args.no_dashboard))?;
    Ok(ExitStatus::Success)
}

/// The pid of the supervisor of `root` when its control socket answers.
fn running_supervisor(root: &Path) -> Option<i32> {
    hermes_services::connect(root, Context::var, Duration::from_secs(2)).ok()?;
    hermes_services::supervisor_pid(root, Context::var)
}

/// `logs/up.log`, appended to, created owner-only with its directory.
fn open_log(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
}
