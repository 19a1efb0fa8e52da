//! Boot stage 6d: the plugin packages on the volume resolved again for this image, before any
//! gateway starts.
//!
//! A new image may bring another Python or other core packages than the ones the volume's
//! install generations were resolved against (`hermes_deps::generations`). PID 1 links no
//! installer: it runs `hermes plugins repair --at-start` as the service user (a real drop: pip
//! and uv run as that user and everything they write is that user's), bounded in time, and
//! passes on what it says — `[init] plugins: …` lines now, and `container-boot.log` with
//! stage 7's lines. Whatever happens, boot goes on: at worst the gateways start without the
//! plugin packages, and the lines say which are unavailable and the command that fixes it.
//!
//! Nothing runs when the volume holds no install generations and no flat target (no plugin
//! was ever installed), so a plain boot spawns nothing.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::Settings;
use crate::boot::{Booted, say};
use crate::route::first_word;

/// Variable naming the durable install target (as `hermes-deps` reads it).
const TARGET_VAR: &str = "HERMES_LAZY_INSTALL_TARGET";
/// Variable overriding how long each installer run of the stage may take, in seconds.
pub const TIMEOUT_VAR: &str = "HERMES_PLUGIN_RESOLVE_TIMEOUT";
/// Default time limit of one installer run at boot.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(180);
/// What the whole stage may take beyond the installer's own limit (the interpreter queries
/// and import checks) before PID 1 stops it.
const SLACK: Duration = Duration::from_secs(60);

/// Runs the stage (module doc) and returns its lines for the boot log.
pub fn stage_resolve_plugins(
    settings: &Settings,
    booted: &Booted,
    out: &mut dyn Write,
) -> Vec<String> {
    if first_word(&settings.cmd) == Some("dashboard") {
        return Vec::new();
    }
    let Some(target) = settings
        .env
        .get(TARGET_VAR)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(PathBuf::from)
    else {
        return Vec::new();
    };
    if !anything_installed(&target) {
        return Vec::new();
    }
    let timeout = settings
        .env
        .get(TIMEOUT_VAR)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let mut cmd = Command::new(&settings.hermes_exe);
    cmd.args(["plugins", "repair", "--at-start", "--timeout"])
        .arg(timeout.as_secs().to_string())
        .env("HERMES_HOME", &settings.home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(id) = &booted.identity {
        hermes_privilege::configure_command(&mut cmd, id);
    }
    let lines = match run_bounded(cmd, timeout + SLACK) {
        Ok((status, said)) => {
            let mut lines: Vec<String> = said
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| format!("plugins: {l}"))
                .collect();
            match status {
                Some(s) if s.success() => {}
                Some(s) => lines.push(format!(
                    "plugins: warning: `hermes plugins repair` ended with {s}; the gateways start \
                     without the packages named above (run `hermes plugins repair`)"
                )),
                None => lines.push(format!(
                    "plugins: warning: resolving the plugin packages again took longer than {} s \
                     and was stopped; the previous packages stay active (run `hermes plugins \
                     repair`, or raise {TIMEOUT_VAR})",
                    (timeout + SLACK).as_secs()
                )),
            }
            lines
        }
        Err(e) => vec![format!(
            "plugins: warning: cannot run `{} plugins repair` ({e}); the plugin packages were \
             not checked against this image",
            settings.hermes_exe.display()
        )],
    };
    for line in &lines {
        say(out, line);
    }
    lines
}

/// Whether the volume holds install generations or a flat target with something in it.
fn anything_installed(target: &Path) -> bool {
    let mut store = target.as_os_str().to_os_string();
    store.push(".generations");
    if Path::new(&store).is_dir() {
        return true;
    }
    std::fs::read_dir(target)
        .is_ok_and(|mut entries| entries.any(|e| e.is_ok_and(|e| e.file_name() != ".python-abi")))
}

/// Runs `cmd` until it exits or `limit` passes (then kills it): its status (`None` when
/// stopped) and what it wrote to stderr (its progress) then stdout (its result).
fn run_bounded(
    mut cmd: Command,
    limit: Duration,
) -> std::io::Result<(Option<std::process::ExitStatus>, String)> {
    let mut child = cmd.spawn()?;
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut pipe| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            buf
        })
    })
    .collect();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = readers
        .into_iter()
        .map(|r| String::from_utf8_lossy(&r.join().unwrap_or_default()).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    Ok((status, said))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_volume_with_installs_is_checked() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("lazy-packages");
        assert!(!anything_installed(&target));
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join(".python-abi"), "3.13:.so").unwrap();
        assert!(!anything_installed(&target), "an empty flat target");
        std::fs::create_dir(target.join("six")).unwrap();
        assert!(anything_installed(&target));
        std::fs::remove_dir_all(&target).unwrap();
        std::fs::create_dir(d.path().join("lazy-packages.generations")).unwrap();
        assert!(anything_installed(&target));
    }

    #[test]
    fn a_child_past_its_limit_is_stopped() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; exec sleep 30"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let started = Instant::now();
        let (status, said) = run_bounded(cmd, Duration::from_millis(500)).unwrap();
        assert_eq!(status, None);
        assert!(said.contains("started"), "{said}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
