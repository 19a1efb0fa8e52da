//! The supervisor's integration tests, one test binary: each module was a `tests/*.rs` of its
//! own, and each of those relinked the crate's whole stack.
//!
//! Modules:
//! * `cgroups` — Limits the kernel enforces, in cgroups delegated to the supervisor
//! * `clients` — Control clients that misbehave on the reply side
//! * `groups` — What a service leaves behind
//! * `loops` — Loops that must not run hot
//! * `output` — The mirrored output (`[service] line` on the supervisor's stdout) against a
//!   reader that does not read
//! * `supervise` — End-to-end tests of the supervisor with real processes
//! * `untrusted_volume` — A root supervisor against the user who owns the log volume
//!
//! Shared helpers live in `common`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

mod cgroups;
mod clients;
mod common;
mod groups;
mod loops;
mod memory;
mod output;
mod sockets;
mod supervise;
mod untrusted_volume;
