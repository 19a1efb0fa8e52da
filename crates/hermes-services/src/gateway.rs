//! The gateway service of a profile: described once ([`gateway_spec`]), registered with a
//! running supervisor ([`ensure_registered`]), or run by systemd ([`systemd_user_unit`]).
//!
//! Words:
//! * **gateway service** — `gateway-<profile>` ([`service_name`]), one per profile (a
//!   directory holding `SOUL.md`; the default profile, `HERMES_HOME` itself, always counts).
//!   Its command is `hermes -p <profile> gateway run --no-supervise`, or the profile's
//!   `gateway.command` from its `config.yaml` (string → `/bin/sh -c`, list → argv), so an
//!   operator can run another agent implementation per profile.
//! * **autostart** — whether the supervisor starts the service when it is registered; a
//!   gateway that does not autostart is `down` (not `disabled`) until an operator starts it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_home::config::Config;
use hermes_home::{Home, ProfileRef};
use hermes_privilege::Identity;
use hermes_settings::ProfileRead;
use hermes_supervisor::{Client, LogTarget, RestartPolicy, RunAs, ServiceSpec};

use crate::{Error, say};

/// Service name prefix of profile gateways.
pub const GATEWAY_PREFIX: &str = "gateway-";

/// Set (to `1`) in a gateway service's environment: the process is a supervised service, which
/// is restarted when it exits 75. The agent engine then hands its restarts to the supervisor.
pub const SUPERVISED_VAR: &str = "HERMES_GATEWAY_SUPERVISED";

/// A gateway's stop grace when its settings cannot be read: the native gateway's default
/// drain (30 s) and a little more. Otherwise it is the profile's [`crate::stop_budget`].
pub const GATEWAY_STOP_GRACE: Duration = Duration::from_secs(40);

/// The most processes a gateway's tree may hold (`pids_max`): far above what the agent runs
/// (its tools, a browser's processes), low enough that a fork bomb in a tool is stopped
/// before it takes the container's pids.
pub const GATEWAY_PIDS_MAX: u64 = 512;

/// The supervisor service name of `profile`'s gateway: `gateway-<profile>`.
pub fn service_name(profile: &str) -> String {
    format!("{GATEWAY_PREFIX}{profile}")
}

/// The profile whose gateway `service` is (`gateway-<profile>`), as a home under `root`; `None`
/// for any other service (or a name that is not a valid profile's).
pub fn home_of_service(root: &Path, service: &str) -> Option<Home> {
    let profile = ProfileRef::parse(service.strip_prefix(GATEWAY_PREFIX)?).ok()?;
    Home::for_profile(root.to_path_buf(), profile).ok()
}

/// Whether a supervisor restarts the gateway running with this environment (`var`) when it
/// exits 75 (`EX_TEMPFAIL`): ours ([`SUPERVISED_VAR`] truthy, as [`gateway_spec`] sets it) or
/// systemd (`INVOCATION_ID`, which systemd sets for a unit's processes, as for the unit
/// [`systemd_user_unit`] describes). A gateway in a terminal has no one to start it again.
pub fn restarted_on_tempfail(var: impl Fn(&str) -> Option<String>) -> bool {
    var(SUPERVISED_VAR).is_some_and(|v| hermes_errors::switch::is_truthy(&v))
        || var("INVOCATION_ID").is_some_and(|v| !v.is_empty())
}

/// The supervisor service of one profile's gateway: `hermes -p <profile> gateway run
/// --no-supervise` (the flag keeps the supervised child from handing itself over to the
/// supervisor again) or the profile's `gateway.command`; restarted on failure only (exit 0
/// parks it `down`, 78 `failed`, 75 restarts it at once); `autostart` decides whether it starts
/// when registered; logs in `logs/gateways/<profile>/`. The one place a gateway service is
/// described: PID 1, `hermes up`, `hermes gateway start` and `hermes profile create` use it.
/// A broken `gateway.command` is said on `out` and the default command used. `read` is the
/// profile as read ([`hermes_settings::ProfileRead`]): boot and `hermes up` read every profile
/// once; files that cannot be read are said on `out`, and the gateway then runs with the
/// defaults (and says what is wrong itself).
pub fn gateway_spec(
    home: &Path,
    read: &ProfileRead,
    hermes_exe: &Path,
    identity: Option<&Identity>,
    autostart: bool,
    out: &mut dyn Write,
) -> ServiceSpec {
    let (profile, dir) = (read.name.as_str(), read.dir.as_path());
    let config = read.config();
    if let Err(why) = &read.files {
        say(out, format!("warning: profile `{profile}`: {why}"));
    }
    let (argv, custom) = gateway_argv(profile, config, hermes_exe, out);
    let mut spec = ServiceSpec::new(service_name(profile), argv);
    let default_limit = std::env::var(MEMORY_MAX_VAR).ok();
    spec.memory_max = memory_max(profile, config, default_limit.as_deref(), out);
    spec.pids_max = Some(GATEWAY_PIDS_MAX);
    spec.restart = RestartPolicy::OnFailure;
    spec.stop_grace = GATEWAY_STOP_GRACE;
    spec.autostart = autostart;
    spec.profile = Some(profile.to_owned());
    spec.cwd = Some(dir.to_path_buf());
    spec.log = LogTarget::Dir(gateway_log_dir(home, profile));
    spec.env.insert(SUPERVISED_VAR.into(), "1".into());
    // The volume by its path, never by `HOME`: a service run as a user gets that user's passwd
    // `HOME`, which is not where a supervisor found through `$HOME/.hermes` looked.
    spec.env.insert(
        hermes_home::layout::HERMES_HOME_VAR.into(),
        home.to_string_lossy().into_owned(),
    );
    // For a `gateway.command` that runs another agent implementation.
    spec.env.insert("HERMES_PROFILE".into(), profile.to_owned());
    spec.env.insert(
        "HERMES_PROFILE_HOME".into(),
        dir.to_string_lossy().into_owned(),
    );
    if let Some(id) = identity {
        run_as_identity(&mut spec, id);
    }
    crate::held_socket::apply(&mut spec, read, custom);
    if let Some(budget) = stop_budget(read, custom) {
        spec.stop_grace = budget.grace;
    }
    spec
}

/// The stop budget of the gateway of the profile `read` as its service would get it (its
/// `gateway.command` counted).
pub fn stop_budget_of(read: &ProfileRead) -> Option<crate::stop_budget::StopBudget> {
    let (_, custom) = gateway_argv(
        &read.name,
        read.config(),
        Path::new("hermes"),
        &mut std::io::sink(),
    );
    stop_budget(read, custom)
}

/// The profile's gateway's stop budget ([`crate::stop_budget`]); `None` when its files cannot
/// be read (the default grace then). A `gateway.command` of the operator's own runs another
/// agent implementation: it gets the agent's budget.
fn stop_budget(read: &ProfileRead, custom: bool) -> Option<crate::stop_budget::StopBudget> {
    let files = read.files.as_ref().ok()?;
    let env = files.environment();
    let engine = if custom {
        crate::agent::Engine::Agent
    } else {
        crate::agent::engine_of(read, |k| env.get(k).cloned())
            .map_or(crate::agent::Engine::Native, |(engine, _)| engine)
    };
    let has_cron_jobs = hermes_home::cron_jobs::read(&read.dir).is_ok_and(|jobs| !jobs.is_empty());
    Some(crate::stop_budget::gateway(files, engine, has_cron_jobs))
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

/// Where a profile's gateway logs: `<home>/logs/gateways/<profile>/current` (+ archives).
pub fn gateway_log_dir(home: &Path, profile: &str) -> PathBuf {
    hermes_home::layout::logs_dir(home)
        .join("gateways")
        .join(profile)
}

/// The gateway service of `home`'s profile as a client registers it ([`gateway_spec`]),
/// running as the current user, looked up in `/etc/passwd` like the privilege drop (no NSS in
/// a static build). A supervisor running as root also confines a service registered by a
/// non-root client to that client's identity, whatever the spec says.
pub fn client_gateway_spec(
    home: &Home,
    hermes_exe: &Path,
    autostart: bool,
    out: &mut dyn Write,
) -> ServiceSpec {
    let identity = Identity::lookup_uid(
        &hermes_privilege::SystemFiles::system(),
        nix::unistd::geteuid().as_raw(),
    )
    .ok()
    .flatten();
    let read = ProfileRead::read(
        home.profile().name(),
        home.dir(),
        hermes_settings::process_env(),
    );
    gateway_spec(
        home.root(),
        &read,
        hermes_exe,
        identity.as_ref(),
        autostart,
        out,
    )
}

/// Registers `home`'s profile's gateway service ([`client_gateway_spec`]) with the supervisor
/// behind `client` unless it already has a service of that name. Returns whether it was
/// registered now. Warnings about the profile's `gateway.command` go to `out`.
///
/// # Errors
/// [`Error::Supervisor`] when the supervisor cannot be asked or refuses the registration.
pub fn ensure_registered(
    client: &mut Client,
    home: &Home,
    hermes_exe: &Path,
    autostart: bool,
    out: &mut dyn Write,
) -> Result<bool, Error> {
    let name = service_name(home.profile().name());
    let spec = client_gateway_spec(home, hermes_exe, autostart, out);
    if client.status(None)?.iter().any(|s| s.name == name) {
        // Registered already: how it listens and restarts follows the configuration now (a
        // changed API address is bound at its next start).
        client.listen(&spec)?;
        return Ok(false);
    }
    client.register(spec)?;
    Ok(true)
}

/// What [`register_new_gateway`] did with a new profile's gateway service.
#[derive(Debug)]
pub enum Registration {
    /// Registered now with the running supervisor: `down` until an operator starts it.
    Registered,
    /// The supervisor already had a service of that name.
    Known,
    /// No supervisor runs: reconciliation registers it when one starts.
    NoSupervisor,
    /// A supervisor runs but could not be reached, or refused the registration.
    Failed(Error),
}

/// Tells the supervisor of `home`'s root, if one runs, about the gateway of `home`'s profile
/// (just created; it does not autostart): what `hermes profile create` and the dashboard's
/// Profiles page both do. Warnings about its `gateway.command` go to `out`.
pub fn register_new_gateway(
    home: &Home,
    var: impl Fn(&str) -> Option<String>,
    hermes_exe: &Path,
    timeout: Duration,
    out: &mut dyn Write,
) -> Registration {
    let mut client = match crate::connect(home.root(), var, timeout) {
        Ok(client) => client,
        Err(Error::NotRunning { .. }) => return Registration::NoSupervisor,
        Err(e) => return Registration::Failed(e),
    };
    match ensure_registered(&mut client, home, hermes_exe, false, out) {
        Ok(true) => Registration::Registered,
        Ok(false) => Registration::Known,
        Err(e) => Registration::Failed(e),
    }
}

/// The systemd user unit that runs `profile`'s gateway on a host without `hermes up` — the
/// same command, restart rule and grace (the profile's stop budget, [`stop_budget_of`]) as
/// [`gateway_spec`]: `systemd` restarts it on failure but not after exit 78 (bad
/// configuration), and waits the grace before SIGKILL.
///
/// With `notify` (the native engine, which sends `READY=1` once it listens or has decided
/// to serve nothing) the unit is `Type=notify`, so `systemctl --user start` returns when the
/// gateway serves and fails when it dies while starting; `NotifyAccess=main` takes that
/// message from the gateway process only. The original agent sends `READY=1` only under its
/// opt-in watchdog, so its unit (`notify` false) is `Type=simple`, as the original writes it
/// then: a `Type=notify` unit would wait for a message that never comes and kill it.
pub fn systemd_user_unit(
    profile: &str,
    home: &Path,
    hermes_exe: &Path,
    notify: bool,
    grace: Duration,
) -> String {
    let service_type = if notify {
        "Type=notify\nNotifyAccess=main\n"
    } else {
        "Type=simple\n"
    };
    format!(
        "[Unit]\nDescription=Hermes gateway for profile {profile}\nAfter=network-online.target\n\n\
         [Service]\n{service_type}Environment=HERMES_HOME={home}\n\
         ExecStart={exe} -p {profile} gateway run --no-supervise\n\
         Restart=on-failure\nRestartPreventExitStatus={config}\nKillSignal=SIGTERM\nTimeoutStopSec={grace}\n\n\
         [Install]\nWantedBy=default.target\n",
        home = home.display(),
        exe = hermes_exe.display(),
        grace = grace.as_secs(),
        config = hermes_errors::exit::CONFIG,
    )
}

/// How long systemd gives `hermes up` to stop: the gateways stop in parallel within their
/// budgets (up to 105 s for the agent engine with cron jobs), then the supervisor exits.
pub const UP_STOP_GRACE: Duration = Duration::from_secs(120);

/// The systemd user unit that runs `hermes up` for the volume at `home` — every profile's
/// gateway, the declared services and the dashboard (`no_dashboard`: without it), as `hermes
/// up -d` does by hand. systemd signals `hermes up` alone (`KillMode=mixed`), which stops its
/// services in order; a configuration it refuses (exit 78) is not restarted in a loop.
pub fn up_unit(home: &Path, hermes_exe: &Path, no_dashboard: bool) -> String {
    format!(
        "[Unit]\nDescription=Hermes: every profile's gateway{dashboard} (hermes up)\nAfter=network-online.target\n\n\
         [Service]\nType=simple\nEnvironment=HERMES_HOME={home}\n\
         ExecStart={exe} up{flag}\n\
         Restart=on-failure\nRestartPreventExitStatus={config}\nKillSignal=SIGTERM\nKillMode=mixed\nTimeoutStopSec={grace}\n\n\
         [Install]\nWantedBy=default.target\n",
        dashboard = if no_dashboard {
            ""
        } else {
            " and the dashboard"
        },
        flag = if no_dashboard { " --no-dashboard" } else { "" },
        home = home.display(),
        exe = hermes_exe.display(),
        grace = UP_STOP_GRACE.as_secs(),
        config = hermes_errors::exit::CONFIG,
    )
}

/// The systemd socket unit that holds `profile`'s API address for the unit
/// [`systemd_user_unit`] describes (same name, `.socket`): systemd binds it once and passes it
/// across every restart and crash, as the supervisor does, named `api` (the name the gateway
/// looks for), with the supervisor's backlog.
pub fn systemd_socket_unit(profile: &str, address: &str) -> String {
    format!(
        "[Unit]\nDescription=API socket of the Hermes gateway for profile {profile}\n\n\
         [Socket]\nListenStream={address}\nFileDescriptorName={name}\nBacklog=1024\n\n\
         [Install]\nWantedBy=sockets.target\n",
        name = hermes_listen::API_SOCKET_NAME,
    )
}

/// The gateway command and whether it is the operator's own: the profile's `gateway.command`
/// override, else `hermes -p <p> gateway run`. A broken override is reported and the default
/// used.
fn gateway_argv(
    profile: &str,
    config: Option<&Config>,
    hermes_exe: &Path,
    out: &mut dyn Write,
) -> (Vec<String>, bool) {
    let default = default_argv(profile, hermes_exe);
    let argv = match config {
        Some(config) => configured_argv(profile, config, default.clone(), out),
        None => default.clone(),
    };
    let custom = argv != default;
    (argv, custom)
}

/// `hermes -p <profile> gateway run --no-supervise`.
fn default_argv(profile: &str, hermes_exe: &Path) -> Vec<String> {
    vec![
        hermes_exe.to_string_lossy().into_owned(),
        "-p".into(),
        profile.into(),
        "gateway".into(),
        "run".into(),
        "--no-supervise".into(),
    ]
}

/// The environment variable giving every gateway a memory limit its profile does not set.
pub const MEMORY_MAX_VAR: &str = "HERMES_GATEWAY_MEMORY_MAX";

/// A gateway's memory limit, for its service: [`resolve_memory_max`], a bad value said on
/// `out` as a warning and ignored (the gateway still starts: a typo must not take an agent
/// down; `hermes doctor` flags it too).
pub fn memory_max(
    profile: &str,
    config: Option<&Config>,
    default: Option<&str>,
    out: &mut dyn Write,
) -> Option<u64> {
    resolve_memory_max(config, default).unwrap_or_else(|problem| {
        say(
            out,
            format!(
                "warning: profile `{profile}`: {problem}; its gateway runs without a memory \
                 limit"
            ),
        );
        None
    })
}

/// What to do about a bad [`resolve_memory_max`] value.
pub const MEMORY_MAX_HINT: &str = "use a size such as `1GiB` or `512MiB` (powers of 1024, at \
                                   least 4 MiB), or `none` for no limit";

/// A gateway's memory limit: its profile's `gateway.memory_max` (`none` for no limit), else
/// `default` ([`MEMORY_MAX_VAR`]), else none.
///
/// # Errors
/// The value that is not a size, and where it came from, in one line.
pub fn resolve_memory_max(
    config: Option<&Config>,
    default: Option<&str>,
) -> Result<Option<u64>, String> {
    let configured = config.and_then(|c| match c.raw("gateway.memory_max") {
        None | Some(yaml_serde::Value::Null) => None,
        Some(yaml_serde::Value::String(s)) => Some(s.clone()),
        Some(yaml_serde::Value::Number(n)) => Some(n.to_string()),
        Some(other) => Some(format!("{other:?}")),
    });
    let (value, from) = match (configured, default) {
        (Some(v), _) => (v, "`gateway.memory_max`"),
        (None, Some(v)) if !v.trim().is_empty() => (v.to_string(), MEMORY_MAX_VAR),
        (None, _) => return Ok(None),
    };
    if matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "none" | "off" | "max"
    ) {
        return Ok(None);
    }
    let min = hermes_supervisor::spec::MIN_MEMORY_MAX;
    match hermes_errors::bytes::parse(&value) {
        Ok(bytes) if bytes >= min => Ok(Some(bytes)),
        Ok(_) => Err(format!(
            "{from}: `{value}` is less than {}",
            hermes_errors::bytes::human(min)
        )),
        Err(problem) => Err(format!("{from}: {problem}")),
    }
}

/// The profile's `gateway.command`, else `default`.
fn configured_argv(
    profile: &str,
    config: &Config,
    default: Vec<String>,
    out: &mut dyn Write,
) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_is_restarted_under_our_supervisor_or_systemd_only() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        assert!(restarted_on_tempfail(env(&[(SUPERVISED_VAR, "1")])));
        assert!(restarted_on_tempfail(env(&[(SUPERVISED_VAR, " on ")])));
        assert!(restarted_on_tempfail(env(&[("INVOCATION_ID", "0123abcd")])));
        // A terminal: nothing set, switched off, or an empty id.
        assert!(!restarted_on_tempfail(env(&[])));
        assert!(!restarted_on_tempfail(env(&[(SUPERVISED_VAR, "0")])));
        assert!(!restarted_on_tempfail(env(&[(SUPERVISED_VAR, "")])));
        assert!(!restarted_on_tempfail(env(&[("INVOCATION_ID", "")])));
    }

    #[test]
    fn a_gateway_service_names_its_profiles_home_and_nothing_else_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let work_dir = root.join("profiles/work");
        std::fs::create_dir_all(&work_dir).unwrap();
        std::fs::write(work_dir.join("SOUL.md"), "soul\n").unwrap();
        let default = home_of_service(root, "gateway-default").unwrap();
        assert_eq!(default.dir(), root);
        let work = home_of_service(root, "gateway-work").unwrap();
        assert_eq!(work.dir(), work_dir);
        // A profile that does not exist has no home to write a marker into.
        for other in [
            "dashboard",
            "gateway-",
            "gateway-../etc",
            "gatewaywork",
            "gateway-gone",
        ] {
            assert!(home_of_service(root, other).is_none(), "{other}");
        }
    }

    #[test]
    fn the_unit_runs_the_same_command_with_the_same_grace() {
        let grace = Duration::from_secs(40);
        let unit = systemd_user_unit(
            "work",
            Path::new("/data"),
            Path::new("/bin/hermes"),
            true,
            grace,
        );
        assert!(
            unit.contains("ExecStart=/bin/hermes -p work gateway run --no-supervise\n"),
            "{unit}"
        );
        assert!(unit.contains("Environment=HERMES_HOME=/data\n"), "{unit}");
        assert!(unit.contains("TimeoutStopSec=40\n"), "{unit}");
        assert!(unit.contains("RestartPreventExitStatus=78\n"), "{unit}");
        assert!(
            unit.contains("[Service]\nType=notify\nNotifyAccess=main\n"),
            "{unit}"
        );
        let agent = systemd_user_unit(
            "work",
            Path::new("/data"),
            Path::new("/bin/hermes"),
            false,
            Duration::from_secs(60),
        );
        assert!(
            agent.contains("[Service]\nType=simple\n")
                && !agent.contains("Notify")
                && agent.contains("TimeoutStopSec=60\n"),
            "{agent}"
        );
        assert_eq!(service_name("work"), "gateway-work");
    }

    #[test]
    fn a_spec_runs_as_the_identity_with_its_environment() {
        let id = Identity {
            name: "hermes".into(),
            uid: 10000,
            gid: 10000,
            groups: vec![10000, 998],
            home: "/opt/data".into(),
            shell: "/bin/sh".into(),
        };
        let dir = tempfile::tempdir().unwrap();
        let spec = gateway_spec(
            dir.path(),
            &ProfileRead::read("default", dir.path(), Vec::new()),
            Path::new("/bin/hermes"),
            Some(&id),
            true,
            &mut Vec::new(),
        );
        let run_as = spec.run_as.as_ref().unwrap();
        assert_eq!((run_as.uid, run_as.gid), (10000, 10000));
        assert_eq!(run_as.groups, [10000, 998]);
        assert_eq!(spec.env.get("HOME").map(String::as_str), Some("/opt/data"));
        // The volume by its path, whatever the user's `HOME`.
        assert_eq!(
            spec.env.get("HERMES_HOME").map(String::as_str),
            dir.path().to_str()
        );
        assert_eq!(spec.stop_grace, GATEWAY_STOP_GRACE);
        assert_eq!(spec.env.get(SUPERVISED_VAR).map(String::as_str), Some("1"));
        assert_eq!(spec.restart, RestartPolicy::OnFailure);
    }
}
