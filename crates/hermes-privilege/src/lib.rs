//! Users, groups and privileges for Hermes.
//!
//! Inside the container PID 1 (`hermes init`) is root and everything else runs as the
//! service user `hermes`. This crate owns every step of that model, as data and small
//! functions the binary wires together:
//!
//! * [`account`]: the account files ([`SystemFiles`]) and an [`Identity`] looked up by name,
//!   with the environment a drop sets ([`Identity::env_overrides`]).
//! * [`drop`](mod@drop): the privilege drop itself, in this process ([`drop_to`]) or in a
//!   child before `exec` ([`DropPlan`], [`configure_command`]).
//! * [`remap`](mod@remap): `HERMES_UID`/`HERMES_GID` (or `PUID`/`PGID`) rewrite the service user's
//!   entries atomically ([`IdRequest`], [`remap()`]).
//! * [`as_user`]: acting as another user for a while without giving up root ([`AsUser`]): the
//!   boot's writes on the volume, and root's backups and restores.
//! * [`caps`]: which capabilities this process has ([`Capabilities`]).
//! * [`devices`]: gids of a mounted Docker socket and `/dev/dri` nodes to add to a drop
//!   ([`device_gids`]).
//! * [`ownership`]: targeted, symlink-proof ownership repair of the data volume
//!   ([`RepairPlan`], [`repair_ownership`]).
//! * [`safe_fs`]: directories and files under a less privileged user's directories, reached
//!   without following that user's symlinks ([`SafeDir`]).
//! * [`shim`]: the root-exec shim rule ([`shim_decision`], [`shim_drop`]) and the
//!   `hermes init` user guard ([`init_user_guard`]).
//!
//! The crate never prints: warnings are returned as data, errors are [`Error`] with a
//! [`hint`](Error::hint).

#![deny(missing_docs)]

pub mod account;
pub mod as_user;
pub mod caps;
pub mod devices;
pub mod drop;
mod env;
mod error;
pub mod ownership;
pub mod remap;
pub mod safe_fs;
pub mod shim;

pub use account::{Identity, SystemFiles, group_gid};
pub use as_user::AsUser;
pub use caps::Capabilities;
pub use devices::{
    DOCKER_SOCKETS, DRI_DIR, default_device_paths, device_gids, record_device_groups,
};
pub use drop::{DropPlan, configure_command, drop_to};
pub use env::Env;
pub use error::{DropStep, Error};
pub use ownership::{FileRule, RepairPlan, RepairReport, repair_ownership};
pub use remap::{IdChange, IdRequest, IdWarning, RemapReport, remap};
pub use safe_fs::{Owner, SafeDir, is_untrusted_link};
pub use shim::{
    EXEC_AS_ROOT_VAR, IMAGE_MARKER, InitMode, RunAsIsReason, SERVICE_USER, ShimDecision,
    image_marker_present, init_user_guard, shim_decision, shim_drop,
};

#[cfg(test)]
pub(crate) mod test_support {
    pub(crate) use hermes_test_support::skip_unless_root;
}
