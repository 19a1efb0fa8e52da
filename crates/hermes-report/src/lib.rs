//! `hermes-report`: the parts of `hermes doctor` and `hermes dump` that the crates below
//! `hermes-diag` produce, as plain data.
//!
//! * [`Check`] and its [`Status`] — one `doctor` row (the services' declared-service rows, the
//!   installer's and the plugins' rows are checks);
//! * [`SupervisorView`] with its [`ServiceLine`]s, [`InvalidService`] and [`AgentView`] — what
//!   `dump` (and `version`) show of the supervisor, the declared services and the original
//!   agent.
//!
//! This crate is a leaf (serde only): `hermes-services` and `hermes-deps`, which PID 1 links,
//! describe themselves through it without linking the assembler. `hermes-diag` puts the parts
//! together into the one `doctor()` and the one `dump()` that the CLI and the dashboard call.

mod check;
mod views;

pub use check::{Check, Status};
pub use views::{AgentView, InvalidService, ServiceLine, SupervisorView};
