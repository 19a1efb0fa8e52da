//! hermes-deps' integration tests, one test binary: each module was a `tests/*.rs` of its own,
//! and each of those relinked the crate's whole stack.
//!
//! Modules:
//! * `agent_import` — What our installer puts in the durable target reaches the original
//!   agent's Python
//! * `generations` — Installs into the durable target as generations: built beside the
//!   active one, switched to only when they import, collected
//! * `install` — Real installs through the public API, hermetic
//!
//! Shared helpers live in `common`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

mod agent_import;
mod common;
mod generations;
mod install;
