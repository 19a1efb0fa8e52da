//! Boot stage 7: the profile gateways, as PID 1 does it ([`stage_gateways`]), the boot log
//! ([`append_boot_log`]) and PID 1's supervisor hooks ([`InitHooks`]).
//!
//! What a gateway service is and how profiles are reconciled into services is the service
//! layer's (`hermes_services::gateway`, `hermes_services::reconcile`), shared with `hermes
//! up`. What is PID 1's alone:
//! * reconciliation and the `desired_state` writes run with the service user's effective ids
//!   ([`AsUser`]), so the files they touch stay theirs;
//! * each profile gets one line in `logs/container-boot.log`:
//!   `<ts> profile=<p> prior_state=<s> action=<started|registered> prior_exit=<e>` (the
//!   original's line; `<e>` is `clean`, `unclean` or `unknown`) with `<ts>` in local time,
//!   `%Y-%m-%dT%H:%M:%S%z`; the file is rotated to `.1` once it reaches [`BOOT_LOG_ROTATE`];
//! * once the loop has settled, PID 1 gives back its boot-only pages
//!   ([`crate::pages::release_boot_memory`]).

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use hermes_privilege::Identity;
use hermes_services::dashboard::{DASHBOARD_VAR, Host, dashboard_enabled, dashboard_spec};
use hermes_services::multiplex;
use hermes_services::reconcile::reconcile;
use hermes_services::upgrade::MIGRATION_FAILED_VAR;
use hermes_services::{DesiredStateHooks, GatewayAction};
use hermes_supervisor::{Desired, Hooks, ServiceSpec};

use crate::Settings;
use crate::boot::{Booted, InitLog, say};
use crate::route::first_word;
use hermes_privilege::AsUser;
use hermes_settings::VolumeFiles;

/// Rotation threshold of `container-boot.log`.
pub const BOOT_LOG_ROTATE: u64 = 256 * 1024;

/// Stage 7a: every profile's files (`.env`, `config.yaml`), read once as the service user,
/// after seeding and migration have written them: every later stage builds its services from
/// this read. A setting of the API server shadowed by another value in the same profile (its
/// key, its port, …) is said for each profile. `None`
/// in a dashboard container (it runs no services) or when the service user cannot be acted as
/// (a warning, and no services).
pub fn stage_read_volume(
    settings: &Settings,
    booted: &Booted,
    log: &mut dyn Write,
) -> Option<VolumeFiles> {
    if first_word(&settings.cmd) == Some("dashboard") {
        say(log, "dashboard container: skipping gateway reconciliation");
        return None;
    }
    let _scope = as_service_user(booted, log)?;
    let process_env: Vec<(String, String)> = settings.env.vars().collect();
    let volume = VolumeFiles::read(&settings.home, &process_env);
    for read in volume.profiles() {
        let shadowed = read
            .files
            .as_ref()
            .map(|f| f.shadowed())
            .unwrap_or_default();
        for shadowed in shadowed {
            let whose = match read.name.as_str() {
                hermes_home::DEFAULT_PROFILE => String::new(),
                name => format!("profile `{name}`: "),
            };
            say(
                log,
                format!("warning: {whose}{shadowed}; {}", shadowed.fix()),
            );
        }
    }
    Some(volume)
}

/// Acting as the service user for a stage's reads and writes; a failure is said as a warning
/// (and the stage makes no services).
fn as_service_user(booted: &Booted, log: &mut dyn Write) -> Option<AsUser> {
    match AsUser::enter(booted.identity.as_ref()) {
        Ok(scope) => Some(scope),
        Err(e) => {
            say(
                log,
                format!("warning: cannot act as the service user ({e}); no gateways"),
            );
            None
        }
    }
}

/// Stage 7b: the gateway service of every profile of `volume`, reconciled as the service user
/// and logged (`[init] reconcile: …` lines and `container-boot.log`, after the lines of stages
/// 6c and 6d, `databases`), then the services
/// declared in the root's `config.yaml`, each run as the service user. A failure to act as the
/// service user is a warning and no services.
pub fn stage_gateways(
    settings: &Settings,
    booted: &Booted,
    volume: &VolumeFiles,
    schema: &crate::migrate::Outcome,
    databases: &[String],
    log: &mut dyn Write,
) -> Vec<ServiceSpec> {
    let Some(_scope) = as_service_user(booted, log) else {
        return Vec::new();
    };
    let var = |k: &str| settings.env.get(k).map(str::to_owned);
    // The agent's own default, from what stage 6b asked it (no second interpreter start).
    let multiplex = multiplex::resolve(volume.root(), &var, |_| {
        schema.agent.as_ref().and_then(|(_, f)| f.multiplex_default)
    });
    let (mut gateways, actions) = reconcile(
        &settings.home,
        &settings.hermes_exe,
        booted.identity.as_ref(),
        false,
        &multiplex,
        volume,
        &mut InitLog::new(log),
    );
    for a in &actions {
        say(log, format!("reconcile: {}", a.describe()));
    }
    for spec in &mut gateways {
        if let Some((_, reason)) = schema
            .failed
            .iter()
            .find(|(p, _)| spec.profile.as_deref() == Some(p.as_str()))
        {
            spec.env.insert(MIGRATION_FAILED_VAR.into(), reason.clone());
        }
    }
    let mut lines: Vec<String> = schema.log_lines.clone();
    lines.extend(databases.iter().cloned());
    lines.extend(actions.iter().map(GatewayAction::describe));
    append_boot_log(
        &hermes_home::layout::logs_dir(&settings.home),
        &lines,
        &mut InitLog::new(log),
    );
    let mut specs = gateways;
    specs.extend(declared(volume, booted, log));
    specs
}

/// The `dashboard` service: on when `HERMES_DASHBOARD` is truthy, `disabled` otherwise (so
/// `hermes service status` never shows a guess), run as the service user. None in a
/// dashboard container, where `hermes dashboard` is already the main program.
pub fn dashboard_service(
    settings: &Settings,
    booted: &Booted,
    log: &mut dyn Write,
) -> Option<ServiceSpec> {
    if first_word(&settings.cmd) == Some("dashboard") {
        say(
            log,
            "the dashboard is the main program; no `dashboard` service",
        );
        return None;
    }
    let enabled = dashboard_enabled(Host::Container, settings.env.get(DASHBOARD_VAR));
    Some(dashboard_spec(
        &settings.hermes_exe,
        enabled,
        booted.identity.as_ref(),
    ))
}

/// The `backup` service of scheduled snapshots when a schedule is set (`backup.schedule` in the
/// root's `config.yaml`, or `HERMES_BACKUP_SCHEDULE`), run as the service user
/// (`hermes_services::backup_schedule`). A dashboard container, which shares the volume of one
/// that runs it, reads no volume and so runs none.
pub fn backup_service(
    settings: &Settings,
    booted: &Booted,
    volume: &VolumeFiles,
    log: &mut dyn Write,
) -> Option<ServiceSpec> {
    let config = match &volume.root().files {
        Ok(files) => files.config(),
        Err(why) => {
            say(log, format!("warning: no scheduled backups: {why}"));
            return None;
        }
    };
    let var = |k: &str| settings.env.get(k).map(str::to_owned);
    hermes_services::backup_schedule::backup_service(
        config,
        &settings.hermes_exe,
        &var,
        booted.identity.as_ref(),
    )
}

/// The services declared under `services:` in the root's `config.yaml`, each confined to the
/// service user (`hermes_services::declared`); problems are warnings in the boot log.
fn declared(volume: &VolumeFiles, booted: &Booted, log: &mut dyn Write) -> Vec<ServiceSpec> {
    let config = match &volume.root().files {
        Ok(files) => files.config(),
        Err(why) => {
            say(log, format!("warning: no declared services: {why}"));
            return Vec::new();
        }
    };
    let declared = hermes_services::declared::declared_services(config, booted.identity.as_ref());
    for problem in &declared.problems {
        say(log, format!("warning: {problem}"));
    }
    for spec in &declared.specs {
        say(log, format!("declared service: {}", spec.name));
    }
    declared.specs
}

/// Appends `lines` (each after a timestamp) to `<logs>/container-boot.log`, rotating it first. Warnings
/// are plain lines on `out`.
pub fn append_boot_log(logs: &Path, lines: &[String], out: &mut dyn Write) {
    let warn = |out: &mut dyn Write, line: String| {
        let _ = writeln!(out, "{line}");
    };
    let path = logs.join("container-boot.log");
    if let Err(e) = fs::create_dir_all(logs) {
        warn(
            out,
            format!("warning: cannot create `{}`: {e}", logs.display()),
        );
        return;
    }
    if fs::metadata(&path).is_ok_and(|m| m.len() >= BOOT_LOG_ROTATE) {
        let rotated = logs.join("container-boot.log.1");
        if let Err(e) = fs::rename(&path, &rotated) {
            warn(
                out,
                format!("warning: cannot rotate `{}`: {e}", path.display()),
            );
        }
    }
    let ts = local_timestamp();
    let mut text = String::new();
    for line in lines {
        text.push_str(&format!("{ts} {line}\n"));
    }
    let written = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = written {
        warn(
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

/// PID 1's supervisor hooks: the service layer's [`DesiredStateHooks`] (an operator's
/// start/stop is written to the profile's `gateway_state.json`), written with the service
/// user's effective ids, and the boot-only pages given back once the loop has settled.
pub struct InitHooks<'a> {
    /// The hooks every supervisor of a home uses.
    pub state: DesiredStateHooks<'a>,
    /// The service user to write as (`None`: as PID 1 is).
    pub identity: Option<Identity>,
}

impl Hooks for InitHooks<'_> {
    fn settled(&mut self) {
        crate::pages::release_boot_memory();
    }

    fn desired_state_changed(&mut self, service: &ServiceSpec, desired: Desired) {
        if service.profile.is_none() {
            return;
        }
        match AsUser::enter(self.identity.as_ref()) {
            Ok(_scope) => self.state.record(service, desired),
            Err(e) => self.state.warn(format!(
                "cannot record desired state: cannot act as the service user: {e}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_log_lines_and_rotation() {
        let tmp = tempfile::tempdir().unwrap();
        let logs = tmp.path().join("logs");
        let a = GatewayAction {
            profile: "default".into(),
            prior_state: None,
            started: false,
            prior_exit: hermes_home::lifecycle_ledger::PriorExit::Unclean,
        };
        append_boot_log(&logs, &[a.describe()], &mut Vec::new());
        let text = fs::read_to_string(logs.join("container-boot.log")).unwrap();
        let line = text.lines().next().unwrap();
        let (ts, rest) = line.split_once(' ').unwrap();
        assert_eq!(
            rest,
            "profile=default prior_state=None action=registered prior_exit=unclean"
        );
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
        append_boot_log(&logs, &[a.describe()], &mut Vec::new());
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
    fn init_hooks_record_through_the_shared_hooks() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("SOUL.md"), "soul").unwrap();
        let mut log = Vec::new();
        let mut hooks = InitHooks {
            state: DesiredStateHooks {
                home: tmp.path().to_path_buf(),
                log: &mut log,
            },
            identity: None,
        };
        let mut spec = ServiceSpec::new("gateway-default", vec!["x".into()]);
        spec.profile = Some("default".into());
        hooks.desired_state_changed(&spec, Desired::Stopped);
        drop(hooks);
        let text = fs::read_to_string(tmp.path().join("gateway_state.json")).unwrap();
        assert!(text.contains("\"desired_state\":\"stopped\""), "{text}");
        assert!(log.is_empty(), "{}", String::from_utf8_lossy(&log));
    }
}
