//! `hermes-services`: the service layer that `hermes init` (PID 1), `hermes up`, the CLI and
//! the dashboard share. It sits below all of them and above `hermes-supervisor` (the loop and
//! its control socket), `hermes-home` (the files) and `hermes-privilege` (identities); what
//! only PID 1 does stays in `hermes-init`.
//!
//! Words:
//! * **supervisor** — the one process that owns every service (PID 1 in the container, `hermes
//!   up` on a host); it is reached through its **control socket**.
//! * **runtime directory** — where the supervisor keeps its lock and control socket; one
//!   ordered list of candidates for server and clients ([`runtime`]).
//!
//! Modules:
//! * [`runtime`] — where the supervisor listens ([`runtime_dirs`], [`choose_runtime_dir`],
//!   [`find_runtime_dir`]) and reaching it ([`connect`]).
//!
//! The crate never prints: warnings go to the writer the caller passes, errors are [`Error`]
//! with a [`hint`](Error::hint).

#![deny(missing_docs)]

mod error;
pub mod runtime;

pub use error::Error;
pub use runtime::{
    choose_runtime_dir, connect, find_runtime_dir, runtime_dirs, runtime_dirs_with_marker,
};
