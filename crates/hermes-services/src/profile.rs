//! Deleting a profile, the one rule for `hermes profile delete` and the dashboard's
//! `DELETE /api/profiles/{name}`: its gateway is stopped and forgotten by the supervisor
//! before its files move, so nothing writes into a directory that is being moved.
//!
//! The rule about the supervisor:
//! * none runs ([`Error::NotRunning`] on connecting): nothing will start the gateway again,
//!   the profile is deleted;
//! * one answers and removes the gateway (it answers only once the process has exited): the
//!   profile is deleted;
//! * one answers and refuses: [`Error::GatewayNotRemoved`], nothing deleted;
//! * one runs but cannot be asked (its socket cannot be used, it does not answer in time, it
//!   closes the connection): its gateway may be writing into the profile, so
//!   [`Error::SupervisorUnanswered`], nothing deleted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_home::profile::{self, Disposal, alias};
use hermes_home::{Home, ProfileRef};

use crate::Error;

/// What the supervisor did about the deleted profile's gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayRemoval {
    /// The supervisor stopped it (if it ran) and forgot it.
    Unregistered,
    /// No supervisor runs: nothing starts it again.
    NoSupervisor,
}

/// What [`delete`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    /// The profile's gateway service (`gateway-<name>`).
    pub service: String,
    /// What became of that service.
    pub gateway: GatewayRemoval,
    /// Where the profile's files went (`None` when purged).
    pub trashed_to: Option<PathBuf>,
    /// Whether the sticky `active_profile` pointed at it and is now `default`.
    pub active_reset: bool,
    /// The profile's alias wrapper (`~/.local/bin/<name>`) that was removed, if there was one.
    pub alias_removed: Option<PathBuf>,
}

/// The profile `profile` of `root` if it can be deleted: it exists and is not the default
/// one. A front end checks this before it asks for a confirmation.
///
/// # Errors
/// [`Error::Home`] with `ProfileNotFound` or `DefaultProfileUndeletable`.
pub fn deletable(root: &Path, profile: &ProfileRef) -> Result<Home, Error> {
    let home = Home::for_profile(root.to_path_buf(), profile.clone())?;
    if *profile == ProfileRef::Default {
        return Err(hermes_home::Error::DefaultProfileUndeletable.into());
    }
    Ok(home)
}

/// Deletes `profile` (see the module's rule): the supervisor stops and forgets its gateway,
/// then its files go to the trash (or are purged) and its alias wrapper is removed. `var`
/// reads the environment (the runtime directory, `HOME` for the alias directory); `timeout`
/// bounds each exchange with the supervisor.
///
/// # Errors
/// [`Error::Home`] when the profile cannot be deleted or moved,
/// [`Error::GatewayNotRemoved`] and [`Error::SupervisorUnanswered`] as the rule says; in
/// every error case nothing was deleted.
pub fn delete(
    root: &Path,
    profile: &ProfileRef,
    disposal: Disposal,
    var: impl Fn(&str) -> Option<String>,
    timeout: Duration,
) -> Result<Deletion, Error> {
    let home = deletable(root, profile)?;
    let name = home.profile().name().to_string();
    let service = crate::service_name(&name);
    let gateway = remove_gateway(root, &name, &service, &var, timeout)?;
    let deleted = profile::delete(root, profile, disposal)?;
    let alias_removed = match (alias::dir(var("HOME").as_deref()), profile) {
        (Some(bin), ProfileRef::Named(named)) => alias::remove(&bin, named).ok().flatten(),
        _ => None,
    };
    Ok(Deletion {
        service,
        gateway,
        trashed_to: deleted.trashed_to,
        active_reset: deleted.active_reset,
        alias_removed,
    })
}

/// The supervisor's part of [`delete`].
fn remove_gateway(
    root: &Path,
    profile: &str,
    service: &str,
    var: &dyn Fn(&str) -> Option<String>,
    timeout: Duration,
) -> Result<GatewayRemoval, Error> {
    let unanswered = |source: Error| Error::SupervisorUnanswered {
        profile: profile.to_string(),
        service: service.to_string(),
        source: Box::new(source),
    };
    let mut client = match crate::connect(root, var, timeout) {
        Ok(client) => client,
        Err(Error::NotRunning { .. }) => return Ok(GatewayRemoval::NoSupervisor),
        Err(e) => return Err(unanswered(e)),
    };
    match client.unregister(service) {
        Ok(()) => Ok(GatewayRemoval::Unregistered),
        Err(source @ hermes_supervisor::Error::Refused { .. }) => Err(Error::GatewayNotRemoved {
            profile: profile.to_string(),
            service: service.to_string(),
            source,
        }),
        Err(e) => Err(unanswered(Error::Supervisor(e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn root_with_work() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let name = hermes_home::ProfileName::parse("work").unwrap();
        profile::create(root.path(), &name, &Default::default()).unwrap();
        root
    }

    fn runtime_var(run: &Path) -> impl Fn(&str) -> Option<String> + use<> {
        let run = run.to_string_lossy().into_owned();
        move |k: &str| (k == "HERMES_RUNTIME_DIR").then(|| run.clone())
    }

    fn work() -> ProfileRef {
        ProfileRef::parse("work").unwrap()
    }

    #[test]
    fn without_a_supervisor_the_profile_is_deleted() {
        let root = root_with_work();
        let run = tempfile::tempdir().unwrap();
        let done = delete(
            root.path(),
            &work(),
            Disposal::Trash,
            runtime_var(run.path()),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(done.gateway, GatewayRemoval::NoSupervisor);
        assert_eq!(done.service, "gateway-work");
        assert!(done.trashed_to.is_some_and(|t| t.is_dir()));
        assert!(!root.path().join("profiles/work").exists());
    }

    /// A supervisor that accepts the connection but closes it without an answer may still
    /// run the gateway: nothing is deleted.
    #[test]
    fn a_supervisor_that_does_not_answer_keeps_the_profile() {
        let root = root_with_work();
        let run = tempfile::tempdir().unwrap();
        let listener =
            UnixListener::bind(run.path().join(hermes_supervisor::client::SOCKET_NAME)).unwrap();
        let mute = std::thread::spawn(move || drop(listener.accept()));
        let err = delete(
            root.path(),
            &work(),
            Disposal::Trash,
            runtime_var(run.path()),
            Duration::from_secs(5),
        )
        .unwrap_err();
        mute.join().unwrap();
        assert!(matches!(err, Error::SupervisorUnanswered { .. }), "{err:?}");
        assert!(err.to_string().contains("gateway-work"), "{err}");
        assert!(err.hint().unwrap().contains("retry"), "{:?}", err.hint());
        assert!(root.path().join("profiles/work/SOUL.md").is_file());
    }

    #[test]
    fn the_default_profile_and_a_missing_one_are_refused_before_the_supervisor_is_asked() {
        let root = root_with_work();
        let var = |_: &str| None;
        let err = delete(
            root.path(),
            &ProfileRef::Default,
            Disposal::Trash,
            var,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(matches!(
            err,
            Error::Home(hermes_home::Error::DefaultProfileUndeletable)
        ));
        let missing = ProfileRef::parse("nope").unwrap();
        let err = deletable(root.path(), &missing).unwrap_err();
        assert!(
            matches!(err, Error::Home(hermes_home::Error::ProfileNotFound { .. })),
            "{err:?}"
        );
    }
}
