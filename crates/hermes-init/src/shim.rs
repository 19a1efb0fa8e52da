//! The root-exec shim as the binary runs it: [`root_exec_shim`].
//!
//! Any `hermes` command started as root inside the image (the image marker exists) drops to
//! the service user before it does anything else, so `docker exec c hermes login` can never
//! leave root-owned files on the volume. Opt-out: `HERMES_DOCKER_EXEC_AS_ROOT` = 1/true/yes.
//! If the drop is impossible the command must not run at all: the caller exits 126 with the
//! error and its hint. `hermes init` itself never calls this (PID 1 stays root).
//!
//! The rule is `hermes_privilege::shim_decision`; this module only binds it to the real
//! process (effective uid, marker path, environment, device groups).

use std::path::Path;

use hermes_privilege::{
    Env, Identity, ShimDecision, SystemFiles, device_gids, shim_decision, shim_drop,
};

use crate::Error;

/// What the shim did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shim {
    /// Nothing to do; the command runs with the credentials it has.
    Kept(ShimDecision),
    /// The process now runs as this identity (environment updated).
    Dropped(Identity),
}

/// Applies the root-exec shim to this process. Call first thing in `main`, while the process
/// has one thread.
///
/// # Errors
/// [`Error::Privilege`] wrapping `ShimDrop` (exit code 126) when a drop is required and
/// impossible.
/// `dri_dir` is where GPU nodes live (normally `hermes_privilege::DRI_DIR`); it and the Docker
/// sockets are only looked at when a drop actually happens, so the common path stays cheap.
pub fn root_exec_shim(
    marker: &Path,
    accounts: &SystemFiles,
    dri_dir: &Path,
    env: &Env,
) -> Result<Shim, Error> {
    let euid = nix::unistd::geteuid().as_raw();
    // Only look at the filesystem when it can matter (root): the common path stays a getuid.
    let marker_present = euid == 0 && hermes_privilege::image_marker_present(marker);
    match shim_decision(euid, marker_present, env) {
        ShimDecision::DropTo(user) => {
            let devices = hermes_privilege::default_device_paths(dri_dir);
            let identity = shim_drop(accounts, &user, &device_gids(&devices))?;
            Ok(Shim::Dropped(identity))
        }
        kept => Ok(Shim::Kept(kept)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_privilege::RunAsIsReason;

    #[test]
    fn outside_the_image_or_opted_out_nothing_happens() {
        let dir = tempfile::tempdir().unwrap();
        let files = SystemFiles::new(dir.path().join("passwd"), dir.path().join("group"));
        let none = dir.path().join("no-marker");
        let got = root_exec_shim(&none, &files, dir.path(), &Env::default()).unwrap();
        let want_reason = if nix::unistd::geteuid().is_root() {
            RunAsIsReason::OutsideImage
        } else {
            RunAsIsReason::NotRoot
        };
        assert_eq!(got, Shim::Kept(ShimDecision::RunAsIs(want_reason)));
    }
}
