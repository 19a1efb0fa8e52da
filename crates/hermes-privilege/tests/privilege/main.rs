//! hermes-privilege's integration tests, one test binary: each module was a `tests/*.rs` of its
//! own, and each of those relinked the crate's whole stack.
//!
//! Modules:
//! * `ownership` — Ownership repair on a temporary data volume
//! * `privilege_matrix` — The privilege matrix
//! * `remap` — UID/GID remap on temporary copies of passwd and group

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

mod ownership;
mod privilege_matrix;
mod remap;
