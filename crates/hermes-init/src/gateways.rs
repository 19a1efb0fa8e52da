//! Boot stage 7: reconcile profile gateways into supervisor services, and persist operator
//! choices back into each profile's `gateway_state.json` ([`StateHooks`]).
//!
//! Words:
//! * **gateway service** — `gateway-<profile>`, one per profile (a directory holding
//!   `SOUL.md`; the default profile, `HERMES_HOME` itself, always counts). Its command is
//!   `hermes -p <profile> gateway run --no-supervise`, or the profile's `gateway.command` from its
//!   `config.yaml` (string → `/bin/sh -c`, list → argv), so an operator can run another agent
//!   implementation per profile.
//! * **prior state** — the profile's effective state from `gateway_state.json` (desired, else
//!   last); a missing, unreadable or corrupt file is "no state" (`None` in the boot log).
//! * **action** — `started` (prior state `running`: the service starts at boot) or
//!   `registered` (known to the supervisor, `down` until an operator starts it).
//!
//! Each profile gets one line in `logs/container-boot.log`:
//! `<ts> profile=<p> prior_state=<s> action=<started|registered>` with `<ts>` in local time,
//! `%Y-%m-%dT%H:%M:%S%z`; the file is rotated to `.1` once it reaches [`BOOT_LOG_ROTATE`].
//! A stale `gateway.pid` (and `processes.json`) is removed: the supervisor, not a PID file,
//! knows whether a gateway runs.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use hermes_home::ProfileRef;
use hermes_home::config::Config;
use hermes_home::gateway_state::{self, StateRead};
use hermes_privilege::Identity;
use hermes_supervisor::{Desired, Hooks, LogTarget, RestartPolicy, RunAs, ServiceSpec};

/// Writes one plain line (best effort: a closed log never stops reconciliation).
fn say(out: &mut dyn Write, line: impl std::fmt::Display) {
    let _ = writeln!(out, "{line}");
}
use crate::creds::AsUser;

/// Rotation threshold of `container-boot.log`.
pub const BOOT_LOG_ROTATE: u64 = 256 * 1024;
/// Service name prefix of profile gateways.
pub const GATEWAY_PREFIX: &str = "gateway-";

/// What reconciliation decided for one profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayAction {
    /// Profile name (`default` for the root).
    pub profile: String,
    /// The effective state read from disk, if any.
    pub prior_state: Option<String>,
    /// Whether the gateway starts at boot.
    pub started: bool,
}

impl GatewayAction {
    /// The boot-log line without its timestamp.
    pub fn describe(&self) -> String {
        format!(
            "profile={} prior_state={} action={}",
            self.profile,
            self.prior_state.as_deref().unwrap_or("None"),
            if self.started {
                "started"
            } else {
                "registered"
            }
        )
    }
}

/// Builds the gateway services of every profile under `home` (stage 7, and `hermes up`).
/// Must run with the service user's ids (see [`AsUser`]), so the files it touches stay
/// theirs. `fresh_default_runs`: a default profile that never ran a gateway (no state file)
/// starts it — `hermes up` on a fresh home; a container boot waits for
/// `HERMES_GATEWAY_BOOTSTRAP_STATE` instead.
pub fn reconcile(
    home: &Path,
    hermes_exe: &Path,
    identity: Option<&Identity>,
    fresh_default_runs: bool,
    out: &mut dyn Write,
) -> (Vec<ServiceSpec>, Vec<GatewayAction>) {
    let profiles: Vec<(String, PathBuf)> = match hermes_home::profile::list(home) {
        Ok(list) => list
            .into_iter()
            .map(|e| (e.profile.name().to_owned(), e.dir))
            .collect(),
        Err(e) => {
            say(
                out,
                format!("warning: cannot list profiles: {e}; only `default` is reconciled"),
            );
            vec![(ProfileRef::Default.name().to_owned(), home.to_path_buf())]
        }
    };
    let mut specs = Vec::new();
    let mut actions = Vec::new();
    for (profile, dir) in profiles {
        let state_file = dir.join("gateway_state.json");
        let prior_state = match gateway_state::read(&state_file) {
            Ok(StateRead::Valid(s)) => s.effective_state().map(str::to_owned),
            Ok(StateRead::Missing) => None,
            Ok(StateRead::Invalid(why)) => {
                say(
                    out,
                    format!("warning: profile `{profile}`: ignoring `gateway_state.json`: {why}"),
                );
                None
            }
            Err(e) => {
                say(out, format!("warning: profile `{profile}`: {e}"));
                None
            }
        };
        for stale in ["gateway.pid", "processes.json"] {
            let p = dir.join(stale);
            if fs::symlink_metadata(&p).is_ok()
                && let Err(e) = fs::remove_file(&p)
            {
                say(
                    out,
                    format!("warning: cannot remove stale `{}`: {e}", p.display()),
                );
            }
        }
        let fresh_default = fresh_default_runs
            && profile == ProfileRef::Default.name()
            && fs::symlink_metadata(&state_file).is_err();
        let started = prior_state.as_deref() == Some("running") || fresh_default;
        specs.push(gateway_spec(
            home, &profile, &dir, hermes_exe, identity, started, out,
        ));
        actions.push(GatewayAction {
            profile,
            prior_state,
            started,
        });
    }
    (specs, actions)
}

/// Longer than the gateway's own 30 s drain, so a clean stop is never cut short.
pub const GATEWAY_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(35);

/// The supervisor service of one profile's gateway: `hermes -p <profile> gateway run
/// --no-supervise` (the flag keeps the supervised child from handing itself over to the
/// supervisor again) or the profile's `gateway.command`; restarted on failure only (exit 0
/// parks it `down`, 78 `failed`, 75 restarts it at once); `autostart` decides whether it starts
/// when registered; logs in `logs/gateways/<profile>/`. The one place a gateway service is
/// described: PID 1, `hermes up`, `hermes gateway start` and `hermes profile create` use it.
pub fn gateway_spec(
    home: &Path,
    profile: &str,
    dir: &Path,
    hermes_exe: &Path,
    identity: Option<&Identity>,
    autostart: bool,
    out: &mut dyn Write,
) -> ServiceSpec {
    let mut spec = ServiceSpec::new(
        format!("{GATEWAY_PREFIX}{profile}"),
        gateway_argv(profile, dir, hermes_exe, out),
    );
    spec.restart = RestartPolicy::OnFailure;
    spec.stop_grace = GATEWAY_STOP_GRACE;
    spec.autostart = autostart;
    spec.profile = Some(profile.to_owned());
    spec.cwd = Some(dir.to_path_buf());
    spec.log = LogTarget::Dir(gateway_log_dir(home, profile));
    // For a `gateway.command` that runs another agent implementation.
    spec.env.insert("HERMES_PROFILE".into(), profile.to_owned());
    spec.env.insert(
        "HERMES_PROFILE_HOME".into(),
        dir.to_string_lossy().into_owned(),
    );
    if let Some(id) = identity {
        run_as_identity(&mut spec, id);
    }
    spec
}

/// Makes `spec` run as `id`: uid, gid and supplementary groups applied before `exec` (when
/// the supervisor is root), and `HOME`, `USER`, `LOGNAME`, `SHELL` and the XDG dirs from the
/// passwd entry — never the supervisor's `HOME=/root`.
pub fn run_as_identity(spec: &mut ServiceSpec, id: &Identity) {
    spec.run_as = Some(RunAs {
        uid: id.uid,
        gid: id.gid,
        groups: id.groups.clone(),
    });
    spec.env.extend(id.env_overrides());
}

/// The systemd user unit that runs `profile`'s gateway on a host without `hermes up` — the
/// same command, restart rule and grace as [`gateway_spec`]: `systemd` restarts it on failure
/// but not after exit 78 (bad configuration), and waits the grace before SIGKILL.
pub fn systemd_user_unit(profile: &str, home: &Path, hermes_exe: &Path) -> String {
    format!(
        "[Unit]\nDescription=Hermes gateway for profile {profile}\nAfter=network-online.target\n\n\
         [Service]\nEnvironment=HERMES_HOME={home}\n\
         ExecStart={exe} -p {profile} gateway run --no-supervise\n\
         Restart=on-failure\nRestartPreventExitStatus=78\nKillSignal=SIGTERM\nTimeoutStopSec={grace}\n\n\
         [Install]\nWantedBy=default.target\n",
        home = home.display(),
        exe = hermes_exe.display(),
        grace = GATEWAY_STOP_GRACE.as_secs(),
    )
}

/// Where a supervised service of `home` logs: a profile's gateway in
/// `logs/gateways/<profile>/`, any other service in `logs/<service>/` (the supervisor's
/// default). `None` for a name no service can have.
pub fn service_log_dir(home: &Path, service: &str) -> Option<PathBuf> {
    if !hermes_supervisor::spec::is_valid_name(service) {
        return None;
    }
    Some(match service.strip_prefix(GATEWAY_PREFIX) {
        Some(profile) => gateway_log_dir(home, profile),
        None => home.join("logs").join(service),
    })
}

/// Where a profile's gateway logs: `<home>/logs/gateways/<profile>/current` (+ archives).
pub fn gateway_log_dir(home: &Path, profile: &str) -> PathBuf {
    home.join("logs").join("gateways").join(profile)
}

/// The gateway command: the profile's `gateway.command` override, else `hermes -p <p>
/// gateway run`. A broken override is reported and the default used.
fn gateway_argv(profile: &str, dir: &Path, hermes_exe: &Path, out: &mut dyn Write) -> Vec<String> {
    let default = vec![
        hermes_exe.to_string_lossy().into_owned(),
        "-p".into(),
        profile.into(),
        "gateway".into(),
        "run".into(),
        "--no-supervise".into(),
    ];
    let config = match Config::load(&dir.join("config.yaml")) {
        Ok(c) => c,
        Err(e) => {
            say(out, format!("warning: profile `{profile}`: {e}"));
            return default;
        }
    };
    match config.raw("gateway.command") {
        None | Some(yaml_serde::Value::Null) => default,
        Some(yaml_serde::Value::String(s)) if !s.trim().is_empty() => {
            vec!["/bin/sh".into(), "-c".into(), s.clone()]
        }
        Some(yaml_serde::Value::Sequence(items)) if !items.is_empty() => {
            let argv: Option<Vec<String>> = items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect();
            match argv {
                Some(a) if a.first().is_some_and(|p| !p.is_empty()) => a,
                _ => {
                    say(
                        out,
                        format!(
                            "warning: profile `{profile}`: `gateway.command` must be a string \
                             or a list of strings; using `hermes gateway run`"
                        ),
                    );
                    default
                }
            }
        }
        Some(_) => {
            say(
                out,
                format!(
                    "warning: profile `{profile}`: `gateway.command` must be a string or a \
                     list of strings; using `hermes gateway run`"
                ),
            );
            default
        }
    }
}

/// Appends one line per action to `<logs>/container-boot.log`, rotating it first.
pub fn append_boot_log(logs: &Path, actions: &[GatewayAction], out: &mut dyn Write) {
    let path = logs.join("container-boot.log");
    if let Err(e) = fs::create_dir_all(logs) {
        say(
            out,
            format!("warning: cannot create `{}`: {e}", logs.display()),
        );
        return;
    }
    if fs::metadata(&path).is_ok_and(|m| m.len() >= BOOT_LOG_ROTATE) {
        let rotated = logs.join("container-boot.log.1");
        if let Err(e) = fs::rename(&path, &rotated) {
            say(
                out,
                format!("warning: cannot rotate `{}`: {e}", path.display()),
            );
        }
    }
    let ts = local_timestamp();
    let mut text = String::new();
    for a in actions {
        text.push_str(&format!("{ts} {}\n", a.describe()));
    }
    let written = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        say(
            out,
            format!("warning: cannot write `{}`: {e}", path.display()),
        );
    }
}

/// Local time as `%Y-%m-%dT%H:%M:%S%z`; UTC when the local offset is unknown.
pub fn local_timestamp() -> String {
    let now = time::OffsetDateTime::now_local().unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second][offset_hour sign:mandatory][offset_minute]"
    );
    now.format(&fmt).unwrap_or_default()
}

/// Supervisor hooks of PID 1: an operator's start/stop of a gateway is written into its
/// profile's `gateway_state.json` as `desired_state`, with the service user's ids. A failure
/// is said on `log` at once (not at shutdown), and supervision goes on.
pub struct StateHooks<'a> {
    /// `HERMES_HOME`.
    pub home: PathBuf,
    /// Ids to write with.
    pub identity: Option<Identity>,
    /// Where warnings go (PID 1's boot log, `hermes up`'s stderr).
    pub log: &'a mut dyn Write,
}

impl Hooks for StateHooks<'_> {
    fn settled(&mut self) {
        crate::run::release_boot_text();
    }

    fn desired_state_changed(&mut self, service: &ServiceSpec, desired: Desired) {
        let Some(profile) = &service.profile else {
            return;
        };
        let dir = match ProfileRef::parse(profile) {
            Ok(ProfileRef::Default) => self.home.clone(),
            Ok(ProfileRef::Named(name)) => hermes_home::profile::profile_dir(&self.home, &name),
            Err(e) => {
                say(self.log, format!("warning: {e}"));
                return;
            }
        };
        let value = match desired {
            Desired::Running => "running",
            Desired::Stopped => "stopped",
        };
        let path = dir.join("gateway_state.json");
        let result = match AsUser::enter(self.identity.as_ref()) {
            Ok(_scope) => gateway_state::set_desired(&path, value).map_err(|e| e.to_string()),
            Err(e) => Err(format!("cannot act as the service user: {e}")),
        };
        if let Err(e) = result {
            say(
                self.log,
                format!("warning: cannot record desired state: {e}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(root: &Path, name: &str, state: Option<&str>, config: Option<&str>) -> PathBuf {
        let dir = if name == "default" {
            root.to_path_buf()
        } else {
            root.join("profiles").join(name)
        };
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("SOUL.md"), "soul").unwrap();
        if let Some(s) = state {
            fs::write(dir.join("gateway_state.json"), s).unwrap();
        }
        if let Some(c) = config {
            fs::write(dir.join("config.yaml"), c).unwrap();
        }
        dir
    }

    #[test]
    fn service_logs_live_where_the_supervisor_writes_them() {
        let home = Path::new("/data");
        assert_eq!(
            service_log_dir(home, "gateway-work"),
            Some(PathBuf::from("/data/logs/gateways/work"))
        );
        assert_eq!(
            service_log_dir(home, "llama"),
            Some(PathBuf::from("/data/logs/llama"))
        );
        for bad in ["", "../etc", "a/b", ".hidden"] {
            assert_eq!(service_log_dir(home, bad), None, "{bad}");
        }
    }

    #[test]
    fn a_fresh_default_profile_starts_only_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        profile(root, "default", None, None);
        profile(root, "work", None, None);
        let mut out = Vec::new();
        let (boot, _) = reconcile(root, Path::new("/bin/hermes"), None, false, &mut out);
        assert!(
            boot.iter().all(|s| !s.autostart),
            "a container boot waits for a recorded state"
        );
        let (up, actions) = reconcile(root, Path::new("/bin/hermes"), None, true, &mut out);
        assert!(
            up[0].autostart && !up[1].autostart,
            "`hermes up` starts the fresh default only"
        );
        assert_eq!(
            actions[0].describe(),
            "profile=default prior_state=None action=started"
        );
    }

    #[test]
    fn every_profile_gets_a_gateway_and_running_ones_start() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        profile(
            root,
            "default",
            Some(r#"{"gateway_state":"stopped","desired_state":"running"}"#),
            None,
        );
        let work = profile(
            root,
            "work",
            Some(r#"{"gateway_state":"running","desired_state":"stopped"}"#),
            None,
        );
        fs::write(work.join("gateway.pid"), "123").unwrap();
        profile(
            root,
            "alt",
            Some("{not json"),
            Some("gateway:\n  command: [\"my-agent\", \"--serve\"]\n"),
        );
        profile(
            root,
            "shell",
            Some(r#"{"gateway_state":"draining"}"#),
            Some("gateway:\n  command: \"exec agent2\"\n"),
        );
        fs::create_dir_all(root.join("profiles/nosoul")).unwrap();
        let mut out = Vec::new();
        let (specs, actions) = reconcile(root, Path::new("/bin/hermes"), None, false, &mut out);
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "gateway-default",
                "gateway-alt",
                "gateway-shell",
                "gateway-work"
            ]
        );
        let lines: Vec<String> = actions.iter().map(GatewayAction::describe).collect();
        assert_eq!(
            lines,
            [
                "profile=default prior_state=running action=started",
                "profile=alt prior_state=None action=registered",
                "profile=shell prior_state=running action=started",
                "profile=work prior_state=stopped action=registered",
            ]
        );
        assert_eq!(
            specs[0].argv,
            [
                "/bin/hermes",
                "-p",
                "default",
                "gateway",
                "run",
                "--no-supervise"
            ]
        );
        assert_eq!(specs[1].argv, ["my-agent", "--serve"]);
        assert_eq!(specs[2].argv, ["/bin/sh", "-c", "exec agent2"]);
        assert!(specs[0].autostart && !specs[3].autostart);
        assert!(
            specs.iter().all(|s| s.enabled),
            "registered means down, not disabled"
        );
        assert_eq!(
            specs[3].log,
            LogTarget::Dir(root.join("logs/gateways/work"))
        );
        assert_eq!(specs[3].profile.as_deref(), Some("work"));
        assert!(!work.join("gateway.pid").exists());
        let log = String::from_utf8(out).unwrap();
        assert!(
            log.contains("profile `alt`: ignoring `gateway_state.json`"),
            "{log}"
        );
    }

    #[test]
    fn boot_log_lines_and_rotation() {
        let tmp = tempfile::tempdir().unwrap();
        let logs = tmp.path().join("logs");
        let a = GatewayAction {
            profile: "default".into(),
            prior_state: None,
            started: false,
        };
        append_boot_log(&logs, std::slice::from_ref(&a), &mut Vec::new());
        let text = fs::read_to_string(logs.join("container-boot.log")).unwrap();
        let line = text.lines().next().unwrap();
        let (ts, rest) = line.split_once(' ').unwrap();
        assert_eq!(rest, "profile=default prior_state=None action=registered");
        // 2026-05-20T10:11:12+0000
        assert_eq!(ts.len(), 24, "{ts}");
        assert!(
            ts.as_bytes()[10] == b'T' && matches!(ts.as_bytes()[19], b'+' | b'-'),
            "{ts}"
        );
        fs::write(
            logs.join("container-boot.log"),
            vec![b'x'; BOOT_LOG_ROTATE as usize],
        )
        .unwrap();
        append_boot_log(&logs, &[a], &mut Vec::new());
        assert_eq!(
            fs::metadata(logs.join("container-boot.log.1"))
                .unwrap()
                .len(),
            BOOT_LOG_ROTATE
        );
        assert!(
            fs::read_to_string(logs.join("container-boot.log"))
                .unwrap()
                .starts_with("20")
        );
    }

    #[test]
    fn hooks_write_desired_state_and_keep_other_keys() {
        let tmp = tempfile::tempdir().unwrap();
        let work = profile(
            tmp.path(),
            "work",
            Some(r#"{"gateway_state":"running","x":1}"#),
            None,
        );
        let mut log = Vec::new();
        let mut hooks = StateHooks {
            home: tmp.path().to_path_buf(),
            identity: None,
            log: &mut log,
        };
        let mut spec = ServiceSpec::new("gateway-work", vec!["x".into()]);
        spec.profile = Some("work".into());
        hooks.desired_state_changed(&spec, Desired::Stopped);
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(work.join("gateway_state.json")).unwrap())
                .unwrap();
        assert_eq!(v["desired_state"], "stopped");
        assert_eq!(v["x"], 1);
        drop(hooks);
        assert!(log.is_empty(), "{}", String::from_utf8_lossy(&log));
    }
}
