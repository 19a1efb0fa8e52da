//! The gateway's integration tests, one binary (each test file used to be a binary of its own,
//! relinking the whole stack): every module is one area, sharing [`support`] (a scripted
//! upstream, gateways started in-process, their state records).
//!
//! Process-wide state: `observability` installs the process's global `tracing` subscriber
//! (its capture keys lines by thread, and each test reading it runs on a current-thread
//! runtime, so the other modules' gateways writing into it change nothing it reads). No test
//! sets environment variables or the current directory.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

mod api;
mod config_yaml;
mod connections;
mod credentials;
mod full_volume;
mod handover;
mod lifecycle;
mod multiplex;
mod observability;
mod permissions;
mod profile_env;
mod prompt_parity;
mod provider_keys;
mod readiness;
mod reload;
mod state_db;
mod support;
