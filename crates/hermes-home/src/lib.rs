//! `hermes-home`: everything Hermes keeps on disk, in one place.
//!
//! * [`names`] — profile names, `default`, [`ProfileRef`] (below `layout` and `profile`);
//! * [`layout`] — resolving `HERMES_HOME`, selecting a profile, the directory skeleton;
//! * [`profile`] — create / clone / list / use / delete profiles, alias wrappers;
//! * [`config`] — `config.yaml` (tolerant read, typed view, key-preserving write);
//! * [`yaml_edit`] — byte-preserving edits of `config.yaml`'s text (one key, every other byte
//!   kept), text in, text out;
//! * [`config_file`] — the locked, owner-keeping write of `config.yaml` around that editor;
//! * [`dotenv`] — `.env` (comment-preserving edits, denylist, 0600);
//! * [`providers`] — the model providers Hermes knows (key variables, addresses, key domains);
//! * [`auth`] — `auth.json` (never lost on a permission error, corrupt copies kept);
//! * [`api_server`] — where a profile's API server listens and how long it drains;
//! * [`gateway_state`] — `gateway_state.json` (its one writer: field-merging, effective state);
//! * [`cron_jobs`] — the agent's scheduled jobs (`cron/jobs.json`) and its ticker's files
//!   (the reading side);
//! * [`drains`] — `gateway_drains.json` (what stopping gateways let finish, and cut);
//! * [`gateway_lock`] — who holds a profile's `gateway.lock` (the reading side);
//! * [`lifecycle_ledger`] — `state/gateway.lifecycle.json` (how the last gateway life ended);
//! * [`db_check`] — `state/database-check.json` (a profile's databases that failed their check);
//! * [`volume`] — what on the data volume belongs to the service user (ownership repair);
//! * [`schema`] — the config schema version (`_config_version`) each profile was written with;
//! * [`seeds`] — the files a new profile starts with;
//! * [`no_follow`] — reading a file below a directory without following a planted symlink;
//! * [`random`] — random tokens (keys, session tokens, ids) from the kernel's generator;
//! * [`atomic`] — the temp-file + fsync + rename writer every module uses;
//! * [`owner`] — that write keeping the file's owner when root writes (`config.yaml`, `.env`);
//! * [`lock`] — the exclusive sidecar lock every read-modify-write holds;
//! * [`multiplex`] — whether one gateway serves every profile, as the operator set it.
//!
//! The formats are shared with the original Python implementation's data volumes: a file we
//! do not fully understand is read tolerantly and written back with every unknown key intact.

#![deny(missing_docs)]

pub mod api_server;
pub mod atomic;
pub mod auth;
pub mod config;
pub mod config_file;
pub mod cron_jobs;
mod damage;
pub mod db_check;
pub mod disk;
pub mod dotenv;
pub mod drains;
mod error;
pub mod gateway_lock;
pub mod gateway_state;
pub mod layout;
pub mod lifecycle_ledger;
pub mod lock;
pub mod multiplex;
pub mod names;
pub mod no_follow;
pub mod owner;
pub mod profile;
pub mod providers;
pub mod random;
pub mod readiness;
pub mod schema;
pub mod seeds;
pub mod time;
pub mod volume;
pub mod yaml_edit;

pub use error::Error;
pub use layout::Home;
pub use names::{DEFAULT_PROFILE, ProfileName, ProfileRef};

#[cfg(test)]
pub(crate) mod test_support {
    /// Runs `write(0..n)` on `n` threads released at the same moment (the way concurrent
    /// `hermes` processes collide) and returns their results in order.
    pub(crate) fn race<T: Send + 'static>(
        n: usize,
        write: impl Fn(usize) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
        let write = std::sync::Arc::new(write);
        let writers: Vec<_> = (0..n)
            .map(|i| {
                let (barrier, write) = (barrier.clone(), write.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    write(i)
                })
            })
            .collect();
        writers
            .into_iter()
            .map(|w| w.join().expect("writer thread"))
            .collect()
    }
}
