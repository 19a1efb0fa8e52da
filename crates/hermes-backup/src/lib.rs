//! `hermes-backup`: backups of the data volume that are never quietly incomplete.
//!
//! * [`select`] — which files a backup holds (the original's rules, plus the runtime files it
//!   must never hold), scopes (profiles, quick), archive paths;
//! * [`create`] — the archive: databases through SQLite's online backup API, other files under
//!   their writers' locks, a manifest last, written under a temporary name;
//! * [`manifest`] — what an archive of ours says it holds;
//! * [`content`] — what a database holds (schema and rows) as one digest, to tell the same
//!   database from a replaced one;
//! * [`verify`] — every checksum, every database's integrity, the manifest against the contents;
//! * [`restore`] — plan, stage on the volume, swap, and roll back whatever a crash interrupted;
//! * [`schedule`] — scheduled snapshots: the schedule, the settings, naming, pruning, one run;
//! * [`check`] — every profile's databases checked before their gateways start, a damaged one
//!   restored from the newest archive with a sound copy;
//! * [`holders`] — the processes holding a database (or its side files) open;
//! * [`supervised`] — a restore among running services: the gateways it affects stopped and
//!   started again, an archive from a newer agent schema refused.
//!
//! The archive is the original's format: a zip of `HERMES_HOME` with paths relative to it, so
//! its `hermes import` restores ours and ours restores its `hermes backup`.
//!
//! PID 1 does not link this crate (it would bring SQLite and zip into the init's footprint):
//! the boot rolls back an interrupted restore by running `hermes backup recover` when it sees a
//! staging directory ([`hermes_home::layout::RESTORE_STAGING_PREFIX`]).

#![deny(missing_docs)]

pub mod check;
pub mod content;
pub mod create;
mod error;
pub mod holders;
pub mod manifest;
pub mod restore;
pub mod schedule;
pub mod select;
pub mod supervised;
pub mod verify;

pub use create::{Compression, Identity, Progress, Summary, create_file, create_to};
pub use error::Error;
pub use select::Scope;

/// Root acts in `dir`, a directory another user owns, with that user's ids (the one rule for
/// root on such a tree: `hermes_privilege::as_user`); anyone else, and root in its own
/// directories, acts as itself.
pub(crate) fn as_owner_of(dir: &std::path::Path) -> Result<hermes_privilege::AsUser, Error> {
    hermes_privilege::AsUser::owner_of(dir).map_err(|e| Error::io("act as the owner of", dir, e))
}
