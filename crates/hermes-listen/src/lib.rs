//! Sockets passed from a supervisor to its child with systemd's socket-activation protocol.
//!
//! The supervisor binds a service's listening sockets once and keeps them across the service's
//! restarts and crashes; each new process gets them as fds from [`LISTEN_FDS_START`] on, with
//! [`LISTEN_FDS`]` = <n>`, [`LISTEN_PID`]` = <its pid>` and [`LISTEN_FDNAMES`]` =
//! <name>:<name>…`. A connection that arrives while no process serves waits in the socket's
//! backlog instead of being refused. A gateway's API socket is named [`API_SOCKET_NAME`].
//!
//! A restart may be a hand-over: the new process starts while the old one still serves, with
//! [`HANDOVER_FROM`] set to the old one's pid ([`handover_from_env`]).
//!
//! * Receiving: [`Inherited`] — parse once, take each socket by name or address.
//! * Passing: [`passing_env`] and [`install`] (between fork and exec).
//!
//! This crate is linked by PID 1: no async runtime, no allocation where a forked child runs.
#![deny(missing_docs)]

mod error;
mod inherited;
mod pass;
mod vars;

use std::os::fd::RawFd;

pub use error::Error;
pub use inherited::Inherited;
pub use pass::{MAX_PASSED, install, passing_env};

/// The first passed fd (after stdin, stdout and stderr).
pub const LISTEN_FDS_START: RawFd = 3;
/// How many fds were passed.
pub const LISTEN_FDS: &str = "LISTEN_FDS";
/// The pid the fds were passed to; a process that is not it inherited the variables only.
pub const LISTEN_PID: &str = "LISTEN_PID";
/// The passed fds' names, `:`-separated, in fd order.
pub const LISTEN_FDNAMES: &str = "LISTEN_FDNAMES";
/// The pid of the instance a new one takes over from, set while both run.
pub const HANDOVER_FROM: &str = "HERMES_HANDOVER_FROM";
/// The name of a gateway's API socket.
pub const API_SOCKET_NAME: &str = "api";

/// The predecessor `HERMES_HANDOVER_FROM` names, if it is set.
pub fn handover_from_env() -> Result<Option<u32>, Error> {
    handover_from(|var| std::env::var_os(var).map(|v| v.to_string_lossy().into_owned()))
}

/// As [`handover_from_env`], with the variables from `lookup`.
pub fn handover_from(lookup: impl Fn(&str) -> Option<String>) -> Result<Option<u32>, Error> {
    vars::handover_from(&lookup)
}
