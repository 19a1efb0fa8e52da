//! `hermes-services`: the service layer that `hermes init` (PID 1), `hermes up`, the CLI and
//! the dashboard share. It sits below all of them and above `hermes-supervisor` (the loop and
//! its control socket), `hermes-home` (the files) and `hermes-privilege` (identities); what
//! only PID 1 does (acting as the service user with effective ids, the boot stages and the
//! boot log, CMD routing, giving back boot-only pages) stays in `hermes-init`.
//!
//! Words:
//! * **supervisor** — the one process that owns every service (PID 1 in the container, `hermes
//!   up` on a host); it is reached through its **control socket**.
//! * **runtime directory** — where the supervisor keeps its lock and control socket; one
//!   ordered list of candidates for server and clients ([`runtime`]).
//! * **gateway service** — `gateway-<profile>`, one per profile, described once
//!   ([`gateway`]); **registering** it tells a running supervisor about it.
//! * **reconciliation** — every profile's gateway service when a supervisor starts, started
//!   or only registered according to its recorded state ([`reconcile`](mod@reconcile)).
//! * **desired state** — an operator's last start or stop of a gateway, remembered in its
//!   profile's `gateway_state.json` ([`hooks`]).
//! * **service log** — `current` in a service's log directory ([`logs`]).
//!
//! Modules:
//! * [`dashboard`] — the `dashboard` service ([`dashboard::dashboard_spec`]), `disabled`
//!   when switched off, and [`sign_in`], the sign-in token its supervisor makes and keeps;
//! * [`backup_schedule`] — the `backup` service of scheduled snapshots
//!   ([`backup_schedule::backup_service`]), registered when a schedule is set;
//! * [`declared`] — the services declared under `services:` in the root's `config.yaml`
//!   ([`declared::declared_services`]), run by PID 1 and `hermes up` alike;
//! * [`agent`] — the original Python agent where the image ships it ([`agent::locate`]) and
//!   which engine serves a profile's gateway ([`agent::choose_engine`]);
//! * [`agent_hook`] — the hook in the agent's venv that lets its API server serve the socket
//!   the supervisor holds ([`agent_hook::install`], [`agent_hook::is_installed`]);
//! * [`runtime`] — where the supervisor listens ([`runtime_dirs`], [`choose_runtime_dir`],
//!   [`find_runtime_dir`]) and reaching it ([`connect`]);
//! * [`gateway`] — [`gateway_spec`], [`ensure_registered`], [`systemd_user_unit`];
//! * [`stop_budget`] — how long a gateway may take to stop, from what it does, and what the
//!   container needs;
//! * [`reconcile`](mod@reconcile) — [`reconcile()`], [`GatewayAction`];
//! * [`hooks`] — [`DesiredStateHooks`];
//! * [`logs`] — [`service_log_dir`], [`log_file`], [`tail`], [`open_service_log`],
//!   [`Follower`];
//! * [`last_error`](mod@last_error) — a failing service's last error in one line, from its log
//!   and its gateway's state file;
//! * [`readiness`] — starting a service and waiting until it is ready or clearly is not;
//!
//! and the workflows the CLI and the dashboard share, which they only call and render:
//! * [`profile`] — deleting a profile (its gateway stopped and forgotten first; refused while
//!   a running supervisor cannot be asked);
//! * [`engines`] — which engine serves each profile gateway, and who serves it under
//!   multiplexing;
//! * [`stop`] — the planned-stop marker, and stopping a gateway that runs without the
//!   supervisor;
//! * [`unit`] — a profile's gateway as a systemd user unit.
//!
//! The crate never prints: warnings go to the writer the caller passes, errors are [`Error`]
//! with a [`hint`](Error::hint).

#![deny(missing_docs)]

pub mod agent;
pub mod agent_hook;
pub mod agent_probe;
pub mod backup_schedule;
pub mod boot_record;
pub mod dashboard;
pub mod declared;
pub mod diag;
pub mod engines;
mod error;
pub mod gateway;
pub mod handover;
mod held_socket;
pub mod hooks;
pub mod last_error;
pub mod logs;
pub mod multiplex;
pub mod profile;
pub mod readiness;
pub mod reconcile;
pub mod runtime;
pub mod sign_in;
pub mod status_view;
pub mod stop;
pub mod stop_budget;
#[cfg(test)]
mod testing;
pub mod unit;
pub mod upgrade;

pub use error::Error;
pub use gateway::{
    GATEWAY_PREFIX, GATEWAY_STOP_GRACE, client_gateway_spec, ensure_registered, gateway_log_dir,
    gateway_spec, run_as_identity, service_name, systemd_socket_unit, systemd_user_unit, up_unit,
};
pub use hooks::DesiredStateHooks;
pub use logs::{
    Follower, log_file, open_log, open_service_log, resume_service_log, service_log_dir,
    services_with_logs, tail,
};
pub use reconcile::{GatewayAction, reconcile};
pub use runtime::{
    choose_runtime_dir, connect, find_runtime_dir, runtime_dirs, runtime_dirs_with_marker,
    supervisor_pid,
};

/// Writes one plain line (best effort: a closed log never stops the caller).
fn say(out: &mut dyn std::io::Write, line: impl std::fmt::Display) {
    let _ = writeln!(out, "{line}");
}
