//! The `backup` service: scheduled snapshots of the volume, `hermes backup scheduled` under a
//! supervisor, as PID 1 and `hermes up` register it. Registered only when a schedule is set —
//! `backup.schedule` in the root's `config.yaml`, or `HERMES_BACKUP_SCHEDULE` (Helm, compose).
//!
//! This crate only decides *whether* it runs and describes the service; the schedule itself,
//! the other settings and each run are `hermes_backup::schedule`'s (above this crate, which PID
//! 1 does not link: it links SQLite), which reads the two names defined here: an invalid
//! schedule is the service's own refusal (exit 78, parked `failed` with the error, shown by
//! `hermes service status`).
//!
//! * Restarted only after a failure: it runs until asked to stop (exit 0 then), and a run that
//!   fails is recorded and retried at the next slot, never a crash loop.
//! * A stop in the middle of a run waits for the run, up to [`STOP_GRACE`]; a run killed after
//!   that leaves nothing under an archive's name (the archive is written under a temporary
//!   name until whole), and the next run removes what it left.

use std::path::Path;
use std::time::Duration;

use hermes_home::config::Config;
use hermes_privilege::Identity;
use hermes_supervisor::{RestartPolicy, ServiceSpec};

use crate::gateway::run_as_identity;

/// The service's name.
pub const BACKUP_SERVICE: &str = "backup";
/// `config.yaml`'s key for the schedule (also `hermes_backup::schedule::SCHEDULE_KEY`).
pub const SCHEDULE_KEY: &str = "backup.schedule";
/// Overrides [`SCHEDULE_KEY`] (also `hermes_backup::schedule::SCHEDULE_VAR`).
pub const SCHEDULE_VAR: &str = "HERMES_BACKUP_SCHEDULE";
/// How long a stop waits for a run in progress.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

/// The schedule's text when one is set (`HERMES_BACKUP_SCHEDULE` first, then `backup.schedule`
/// in the root's `config`), unchecked; `None` when neither is set or both are empty.
pub fn configured_schedule(
    config: &Config,
    var: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    var(SCHEDULE_VAR)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .or_else(|| config.string(SCHEDULE_KEY, var))
        .or_else(|| {
            // A list or a mapping is set, if not valid: the service says what is wrong.
            config
                .raw(SCHEDULE_KEY)
                .filter(|v| v.is_sequence() || v.is_mapping())
                .map(|_| "(not a single value)".to_owned())
        })
}

/// The spec: `<exe> backup scheduled`, restarted on failure, as `identity` when given.
pub fn backup_spec(exe: &Path, identity: Option<&Identity>) -> ServiceSpec {
    let mut spec = ServiceSpec::new(
        BACKUP_SERVICE,
        vec![
            exe.to_string_lossy().into_owned(),
            "backup".into(),
            "scheduled".into(),
        ],
    );
    spec.restart = RestartPolicy::OnFailure;
    spec.stop_grace = STOP_GRACE;
    if let Some(id) = identity {
        run_as_identity(&mut spec, id);
    }
    spec
}

/// The `backup` service when a schedule is set in the root's `config` or the environment
/// (`var`), else `None`.
pub fn backup_service(
    config: &Config,
    exe: &Path,
    var: &dyn Fn(&str) -> Option<String>,
    identity: Option<&Identity>,
) -> Option<ServiceSpec> {
    configured_schedule(config, var).map(|_| backup_spec(exe, identity))
}

/// Adds the backup `spec` to `specs` unless a service of its name is already there (one the
/// operator declared under `services:`): theirs runs, and the note says ours was left out.
pub fn add_unless_declared(specs: &mut Vec<ServiceSpec>, spec: ServiceSpec) -> Option<String> {
    crate::declared::add_unless_declared(specs, spec, "the scheduled backups")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(Path::new("/opt/data/config.yaml"), text).unwrap()
    }

    #[test]
    fn registered_only_when_a_schedule_is_set_the_environment_first() {
        let none = |_: &str| None;
        assert_eq!(configured_schedule(&config(""), &none), None);
        assert_eq!(
            configured_schedule(&config("backup:\n  keep: 3\n"), &none),
            None
        );
        assert_eq!(
            configured_schedule(&config("backup:\n  schedule: ''\n"), &none),
            None
        );
        assert_eq!(
            configured_schedule(&config("backup:\n  schedule: daily\n"), &none).as_deref(),
            Some("daily")
        );
        let env = |k: &str| (k == SCHEDULE_VAR).then(|| "0 3 * * *".to_owned());
        assert_eq!(
            configured_schedule(&config("backup:\n  schedule: daily\n"), &env).as_deref(),
            Some("0 3 * * *")
        );
        let empty = |k: &str| (k == SCHEDULE_VAR).then(String::new);
        assert_eq!(
            configured_schedule(&config("backup:\n  schedule: hourly\n"), &empty).as_deref(),
            Some("hourly")
        );
        // Set but not valid is still set: the service itself refuses it, visibly.
        assert!(configured_schedule(&config("backup:\n  schedule: [daily]\n"), &none).is_some());
        assert!(backup_service(&config(""), Path::new("/usr/bin/hermes"), &none, None).is_none());
        assert!(backup_service(&config(""), Path::new("/usr/bin/hermes"), &env, None).is_some());
    }

    #[test]
    fn the_spec_runs_the_scheduled_subcommand_restarted_on_failure_as_the_service_user() {
        let spec = backup_spec(Path::new("/usr/bin/hermes"), None);
        assert_eq!(spec.name, "backup");
        assert_eq!(spec.argv, ["/usr/bin/hermes", "backup", "scheduled"]);
        assert_eq!(spec.restart, RestartPolicy::OnFailure);
        assert_eq!(spec.stop_grace, STOP_GRACE);
        assert!(spec.enabled && spec.autostart);
        assert!(spec.run_as.is_none());
        let id = Identity {
            name: "hermes".into(),
            uid: 10000,
            gid: 10000,
            groups: vec![10000],
            home: "/opt/data/home".into(),
            shell: "/bin/sh".into(),
        };
        let spec = backup_spec(Path::new("/usr/bin/hermes"), Some(&id));
        assert_eq!(spec.run_as.as_ref().map(|r| r.uid), Some(10000));
    }

    #[test]
    fn a_declared_backup_service_wins_and_is_noted() {
        let exe = Path::new("/usr/bin/hermes");
        let mut specs = vec![ServiceSpec::new("web", vec!["sleep".into()])];
        assert_eq!(
            add_unless_declared(&mut specs, backup_spec(exe, None)),
            None
        );
        assert_eq!(specs.len(), 2);
        let mut declared = vec![ServiceSpec::new("backup", vec!["restic".into()])];
        let note = add_unless_declared(&mut declared, backup_spec(exe, None)).unwrap();
        assert!(note.contains("instead of the scheduled backups"), "{note}");
        assert_eq!(declared.len(), 1);
        assert_eq!(declared[0].argv, ["restic"]);
    }
}
