//! End-to-end tests of `hermes init`, driving the real binary as PID 1 (new PID namespace),
//! as a child sub-reaper, and through a pseudo-terminal.
//!
//! Table of contents:
//! * `backup_recovery` — a restore a kill interrupted, rolled back by the next boot
//! * `backup_schedule` — the `backup` service: registered with a schedule, its run recorded
//! * `dashboard` — the `dashboard` service: `disabled` unless `HERMES_DASHBOARD` is truthy
//! * `gateways` — profile gateways as services, `desired_state` hooks, ordered stop
//! * `plugins` — stage 6d: the volume's plugin packages resolved again for a changed image
//! * `pid1` — reaping (100 orphans, zero zombies), the exit-code table, PID 1 vs sub-reaper
//! * `signals` — forwarding to the main program's process group, Ctrl-C through a TTY
//! * `routing` — the CMD routing table and environment passthrough
//! * `privilege` — the privilege matrix, the `--user` guard, the root-exec shim truth table,
//!   symlink refusals and damaged state at boot (private mount namespaces, temp `/etc`)
//!
//! Tests that need root print `skipping: <reason>` otherwise. Shared helpers live in `util`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

mod agent_versions;
mod backup_recovery;
mod backup_schedule;
mod boot_record;
mod dashboard;
mod gateways;
mod pid1;
mod plugins;
mod privilege;
mod routing;
mod signals;
mod util;
