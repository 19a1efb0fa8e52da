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
//! 3. Boot stages 1–7 ([`crate::boot`], [`crate::gateways`]); each is contained.
//! 4. Route the CMD ([`mod@crate::route`]) and supervise: the main program runs as the service
//!    user, in its own process group, in the foreground of the TTY when there is one, in the
//!    working directory Docker gave. Signals go to its group; orphans are reaped.
//! 5. When it exits, services stop in order with their grace and `run` returns its exit code
//!    (or 128 + signal), with `-e` codes mapped to 0.
//!
//! Once the supervisor runs nothing may bail: PID 1 exiting kills the container. About 1 s
//! into the loop, PID 1 gives back the file pages only the boot used
//! ([`release_boot_text`]).

use std::io::{IsTerminal, Write};

use hermes_supervisor::{LogTarget, Options, RestartPolicy, ServiceSpec, Supervisor};
use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal, sigaction};

use crate::boot::{Booted, run_stages, say};
use crate::gateways::{StateHooks, append_boot_log, reconcile};
use crate::route::{first_word, program_exists, route};
use crate::{Error, Settings};

/// Name of the main program's service in the supervisor.
pub const MAIN_SERVICE: &str = "main";

/// Signals PID 1 takes over: the forwarded ones and `SIGCHLD` — exactly the loop's.
pub const HANDLED_SIGNALS: [Signal; 8] = hermes_supervisor::LOOP_SIGNALS;

/// Variable that makes PID 1 announce a (not yet available) dashboard.
pub const DASHBOARD_VAR: &str = "HERMES_DASHBOARD";

/// Runs `hermes init` to completion and returns the exit code for the container.
///
/// `log` receives `[init]` boot lines; `mirror` receives service output as `[service] line`.
///
/// # Errors
/// Only before the main program starts: the signal mask, the user guard, a missing service user
/// inside the image, or a supervisor that cannot start (see [`Error`]).
pub fn run(settings: &Settings, log: &mut dyn Write, mirror: &mut dyn Write) -> Result<u8, Error> {
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

    let booted = run_stages(settings, log)?;
    let mut specs = Vec::new();
    if first_word(&settings.cmd) == Some("dashboard") {
        say(log, "dashboard container: skipping gateway reconciliation");
    } else {
        match crate::creds::AsUser::enter(booted.identity.as_ref()) {
            Ok(_scope) => {
                let mut init_log = crate::boot::InitLog::new(log);
                let (gateways, actions) = reconcile(
                    &settings.home,
                    &settings.hermes_exe,
                    booted.identity.as_ref(),
                    false,
                    &mut init_log,
                );
                for a in &actions {
                    say(log, format!("reconcile: {}", a.describe()));
                }
                append_boot_log(
                    &settings.home.join("logs"),
                    &actions,
                    &mut crate::boot::InitLog::new(log),
                );
                specs.extend(gateways);
            }
            Err(e) => say(
                log,
                format!("warning: cannot act as the service user ({e}); no gateways"),
            ),
        }
    }
    if settings
        .env
        .get(DASHBOARD_VAR)
        .is_some_and(hermes_privilege::is_truthy)
    {
        say(
            log,
            "the dashboard is not available in this build; no `dashboard` service registered",
        );
    }
    if settings.flags.verbose > 0 {
        say(
            log,
            format!("boot done; {} service(s) registered", specs.len()),
        );
    }
    specs.push(main_spec(settings, &booted));
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
    let mut opts = Options::new(&runtime_dir, settings.home.join("logs"));
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
    let supervisor = Supervisor::new(opts, specs)?;
    let mut hooks_log = crate::boot::InitLog::new(log);
    let mut hooks = StateHooks {
        home: settings.home.clone(),
        identity: booted.identity.clone(),
        log: &mut hooks_log,
    };
    let outcome = supervisor.run(&mut hooks, mirror)?;
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

/// Gives back the file pages that only the boot touched.
///
/// PID 1 lives as long as the container, but most of the code and constant data it used
/// (argument parsing, YAML, the boot stages, spawning) is never used again. Those pages are
/// clean copies of the binary and its libraries, so `MADV_DONTNEED` simply unmaps them from
/// this process: they stay in the page cache (shared with every other `hermes` process) and
/// fault back in if ever needed.
///
/// Only read-only private file mappings whose pages are all still clean copies of the file
/// (`Anonymous: 0 kB` in `/proc/self/smaps`) are touched. A writable mapping, or a RELRO
/// page the dynamic linker relocated, holds state the file does not and must never be
/// dropped: it would silently revert to the file's bytes.
pub fn release_boot_text() {
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    for (start, end) in releasable(&smaps) {
        #[allow(unsafe_code)]
        // SAFETY: the range is a whole read-only private file mapping of this process with no
        // anonymous (modified) page, from /proc/self/smaps; dropping its pages loses nothing,
        // because they are re-read from the unchanged file on the next access.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
        }
    }
}

/// The ranges of `smaps` text that [`release_boot_text`] may drop: read-only private file
/// mappings (`r--p`, `r-xp`) whose `Anonymous:` is `0 kB`.
fn releasable(smaps: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut current = None;
    for line in smaps.lines() {
        if let Some((range, perms, file)) = header(line) {
            current = (matches!(perms, "r--p" | "r-xp") && file.starts_with('/')).then_some(range);
        } else if let Some(kb) = line.strip_prefix("Anonymous:")
            && let Some(range) = current.take()
            && kb.trim() == "0 kB"
        {
            out.push(range);
        }
    }
    out
}

/// A mapping header (`start-end perms offset dev inode [path]`): range, perms and path.
fn header(line: &str) -> Option<((usize, usize), &str, &str)> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    let file = fields.nth(3).unwrap_or("");
    (end > start).then_some(((start, end), perms, file))
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
        crate::gateways::run_as_identity(&mut spec, id);
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
5600-5700 r--p 00000000 08:01 11 /usr/bin/hermes
Rss:                  12 kB
Anonymous:             0 kB
THPeligible:           0
5700-5800 r-xp 00001000 08:01 11 /usr/bin/hermes
Anonymous:             0 kB
5800-5900 r--p 00009000 08:01 11 /usr/bin/hermes
Anonymous:             8 kB
5900-5a00 rw-p 0000a000 08:01 11 /usr/bin/hermes
Anonymous:             0 kB
5a00-5b00 rw-p 00000000 00:00 0 [heap]
Anonymous:             0 kB
7f00-7f10 r-xp 00000000 00:00 0 [vdso]
Anonymous:             0 kB
7f10-7f20 r-xp 00000000 00:00 0
Anonymous:             0 kB
";

    #[test]
    fn only_clean_read_only_file_mappings_are_released() {
        // Text and clean rodata go; relocated RELRO (anonymous pages), writable data, the
        // heap, the vdso and anonymous executable memory stay.
        assert_eq!(releasable(SMAPS), [(0x5600, 0x5700), (0x5700, 0x5800)]);
    }

    #[test]
    fn releasing_our_own_pages_keeps_the_process_working() {
        let before = std::fs::read_to_string("/proc/self/smaps").unwrap();
        assert!(!releasable(&before).is_empty());
        release_boot_text();
        // Code, constants and relocated pointers all still work after the release.
        let text = format!("{:?}", std::collections::BTreeMap::from([(1, "one")]));
        assert_eq!(text, "{1: \"one\"}");
    }
}
