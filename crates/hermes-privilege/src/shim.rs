//! Who may run `hermes` as whom: the root-exec shim and the `hermes init` user guard.
//!
//! Words:
//! * *image marker*: a file the container image bakes ([`IMAGE_MARKER`]); its presence means
//!   "this process runs inside the Hermes image", where root is only for PID 1.
//! * *root-exec shim*: the rule that any `hermes` command started as root inside the image
//!   (`docker exec c hermes login`) first drops to the service user, so it cannot leave
//!   root-owned files (a root-owned 0600 `auth.json` locks the gateway out of its own
//!   credentials). [`shim_decision`] is the pure rule, [`shim_drop`] performs it.
//! * *opt-out*: [`EXEC_AS_ROOT_VAR`] set to a truthy word (`1`, `true`, `yes`, `on`, any case,
//!   surrounding whitespace ignored: [`hermes_errors::switch`]) keeps root on purpose. Anything else, typos included, does not opt out:
//!   failing towards the safe side.
//! * *user guard*: `hermes init` started with `--user` as neither root nor the service user
//!   cannot own the data volume; it stops with a remedy ([`init_user_guard`]).
//!
//! `hermes init` itself stays root: the caller simply does not consult the shim for it.

use std::path::Path;

use crate::{Env, Error, Identity, SystemFiles, drop_to};

/// The service user (and group) every Hermes process runs as inside the image.
pub const SERVICE_USER: &str = "hermes";

/// The file the image bakes to say "inside the Hermes image".
pub const IMAGE_MARKER: &str = "/opt/hermes/.container-image";

/// The opt-out variable that keeps root for a `docker exec`.
pub const EXEC_AS_ROOT_VAR: &str = "HERMES_DOCKER_EXEC_AS_ROOT";

/// What a `hermes` command should do about its privileges before anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShimDecision {
    /// Keep the current credentials.
    RunAsIs(RunAsIsReason),
    /// Drop to this user first (then exit 126 if that is impossible).
    DropTo(String),
}

/// Why a command keeps its credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAsIsReason {
    /// Not root: nothing to drop (`docker exec --user hermes`, supervised children, host).
    NotRoot,
    /// Root, but not inside the image (a host install run with sudo is the user's choice).
    OutsideImage,
    /// Root inside the image with [`EXEC_AS_ROOT_VAR`] truthy.
    OptedOut,
}

/// Whether the image marker at `marker` exists (any file type; a dangling symlink counts as
/// absent).
pub fn image_marker_present(marker: &Path) -> bool {
    marker.exists()
}

/// The root-exec shim rule, as a pure function of the effective uid, the image marker and
/// the environment.
pub fn shim_decision(euid: u32, marker_present: bool, env: &Env) -> ShimDecision {
    if euid != 0 {
        return ShimDecision::RunAsIs(RunAsIsReason::NotRoot);
    }
    if !marker_present {
        return ShimDecision::RunAsIs(RunAsIsReason::OutsideImage);
    }
    if env
        .get(EXEC_AS_ROOT_VAR)
        .is_some_and(hermes_errors::switch::is_truthy)
    {
        return ShimDecision::RunAsIs(RunAsIsReason::OptedOut);
    }
    ShimDecision::DropTo(SERVICE_USER.to_owned())
}

/// Performs a [`ShimDecision::DropTo`]: looks `user` up, adds `extra_gids` (device groups,
/// see [`crate::device_gids`]) and drops the current process with [`drop_to`].
///
/// Any failure (no such user, a failed or unverifiable drop, threads already running) is
/// wrapped in [`Error::ShimDrop`], whose [`Error::exit_code`] is 126 and whose hint names
/// `--user hermes` and the opt-out. Never falls back to running as root.
pub fn shim_drop(files: &SystemFiles, user: &str, extra_gids: &[u32]) -> Result<Identity, Error> {
    let wrap = |source: Error| Error::ShimDrop {
        user: user.to_owned(),
        source: Box::new(source),
    };
    let mut identity = Identity::lookup(files, user).map_err(wrap)?;
    // Gid 0 is never added from outside, whatever the caller passes: see `device_gids`.
    identity.add_groups(extra_gids.iter().copied().filter(|gid| *gid != 0));
    drop_to(&identity).map_err(wrap)?;
    Ok(identity)
}

/// How `hermes init` runs, given who started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitMode {
    /// Root: remap, repair ownership and drop every child to the service user.
    Root,
    /// Already the service user (`--user 10000`): continue without root powers; remap,
    /// ownership repair and drops are skipped (they would fail anyway).
    ServiceUser,
}

/// The `--user` guard of `hermes init`.
///
/// `uid`/`gid` are the process's real ids; `service_uid` is the service user's uid from the
/// passwd file, `None` when it has no entry. Any uid other than 0 and the service uid is
/// [`Error::ForeignUser`] (the caller exits 1), whose hint gives the `HERMES_UID` remedy.
pub fn init_user_guard(
    uid: u32,
    gid: u32,
    user: &str,
    service_uid: Option<u32>,
) -> Result<InitMode, Error> {
    if uid == 0 {
        Ok(InitMode::Root)
    } else if Some(uid) == service_uid {
        Ok(InitMode::ServiceUser)
    } else {
        Err(Error::ForeignUser {
            uid,
            gid,
            user: user.to_owned(),
            service_uid,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(value: Option<&str>) -> ShimDecision {
        let env: Env = value.map(|v| (EXEC_AS_ROOT_VAR, v)).into_iter().collect();
        shim_decision(0, true, &env)
    }

    #[test]
    fn truthy_values_opt_out() {
        for v in [
            "1", "true", "yes", "TRUE", " Yes", "True", "YES", "tRuE", "yes\n", " 1 ", "on", "ON",
        ] {
            assert_eq!(
                decide(Some(v)),
                ShimDecision::RunAsIs(RunAsIsReason::OptedOut),
                "{v:?}"
            );
        }
    }

    #[test]
    fn anything_else_drops() {
        let drop = ShimDecision::DropTo("hermes".to_owned());
        for v in [
            "0",
            "false",
            "no",
            "",
            "yes please",
            "garbage",
            "2",
            "y",
            "off",
            "t rue",
        ] {
            assert_eq!(decide(Some(v)), drop, "{v:?}");
        }
        assert_eq!(decide(None), drop);
    }

    #[test]
    fn non_root_and_outside_image_run_as_is() {
        let env: Env = [(EXEC_AS_ROOT_VAR, "0")].into_iter().collect();
        assert_eq!(
            shim_decision(10000, true, &env),
            ShimDecision::RunAsIs(RunAsIsReason::NotRoot)
        );
        assert_eq!(
            shim_decision(0, false, &env),
            ShimDecision::RunAsIs(RunAsIsReason::OutsideImage)
        );
    }

    #[test]
    fn marker_presence_is_a_file_check() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join(".container-image");
        assert!(!image_marker_present(&marker));
        std::fs::write(&marker, "").unwrap();
        assert!(image_marker_present(&marker));
    }

    #[test]
    fn shim_drop_without_the_user_is_a_126_error() {
        let dir = tempfile::tempdir().unwrap();
        let files = SystemFiles::new(dir.path().join("passwd"), dir.path().join("group"));
        std::fs::write(&files.passwd, "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        std::fs::write(&files.group, "root:x:0:\n").unwrap();
        let err = shim_drop(&files, "hermes", &[]).unwrap_err();
        assert_eq!(err.exit_code(), 126);
        assert!(matches!(err, Error::ShimDrop { ref source, .. }
            if matches!(**source, Error::UnknownUser { .. })));
        assert!(err.hint().unwrap().contains("--user hermes"));
    }

    #[test]
    fn user_guard_matrix() {
        assert_eq!(
            init_user_guard(0, 0, "hermes", Some(10000)).unwrap(),
            InitMode::Root
        );
        assert_eq!(
            init_user_guard(0, 0, "hermes", None).unwrap(),
            InitMode::Root
        );
        assert_eq!(
            init_user_guard(10000, 10000, "hermes", Some(10000)).unwrap(),
            InitMode::ServiceUser
        );
        let err = init_user_guard(1000, 1000, "hermes", Some(10000)).unwrap_err();
        assert!(matches!(
            err,
            Error::ForeignUser {
                uid: 1000,
                gid: 1000,
                ..
            }
        ));
        assert!(err.hint().unwrap().contains("HERMES_UID=1000"));
        assert!(init_user_guard(10000, 10000, "hermes", None).is_err());
    }
}
