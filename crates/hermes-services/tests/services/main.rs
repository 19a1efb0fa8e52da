//! hermes-services' integration tests, one test binary.
//!
//! Modules:
//! * `hook` — the agent's socket hook in a bare venv of the system's Python: what the image
//!   script installs is what the binary checks, nothing happens without `LISTEN_FDS`, and an
//!   inherited socket is kept from children;
//! * `agent_socket` — the real agents (0.19.0 from PyPI, the 0.20.1 fixture; opt-in with
//!   `HERMES_TEST_PYPI=1`) serve a socket passed to them, drain on SIGTERM, leave waiting
//!   connections to the next instance, and bind as before without one.
//!
//! Shared helpers live in `support`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

mod agent_socket;
mod hook;
mod support;
