//! `hermes-init`: everything PID 1 of the Hermes container does.
//!
//! `hermes init [tini flags] [--] [CMD ...]` runs as PID 1 or, when something else is PID 1
//! (`docker run --init`, Fly, some Kubernetes set-ups), as a child sub-reaper with the same
//! behaviour. It blocks signals before anything else, runs the boot stages, routes the CMD to
//! the *main program*, supervises it with the profile gateways, and exits with the main
//! program's code. The binary also calls the root-exec shim from here for every other command.
//!
//! * [`settings`] — [`Settings`] and the tini-compatible [`Flags`];
//! * [`route`](mod@route) — CMD routing ([`Route`], [`route()`]);
//! * [`boot`] — boot stages 1–6;
//! * [`migrate`] — stage 6b: the installed agent against the volume's config schema (refuse an
//!   older agent, migrate with a backup);
//! * [`databases`] — stage 6c: every profile's databases checked (and a damaged one restored)
//!   before any gateway starts;
//! * [`plugins`] — stage 6d: the volume's plugin packages resolved again when the image's
//!   Python or core packages changed;
//! * [`gateways`] — stage 7: profile gateways as the service user, the boot log, PID 1's
//!   hooks ([`gateways::InitHooks`]);
//! * [`run`](mod@run) — the whole life of PID 1 ([`run()`]);
//! * [`pages`] — giving back the pages only the boot used;
//! * [`shim`] — the root-exec shim ([`root_exec_shim`]);
//! * acting as the service user without giving up root is `hermes_privilege::AsUser`.
//!
//! What a gateway service is, reconciling profiles into services, where the supervisor
//! listens and recording an operator's `desired_state` belong to `hermes-services`, shared
//! with `hermes up`, the CLI and the dashboard: this crate holds only what PID 1 alone does.
//!
//! The crate never prints: lines go to the writers the caller passes, errors are [`Error`]
//! with a [`hint`](Error::hint). See `docs/container.md` for the operator's view.

#![deny(missing_docs)]

pub mod boot;
pub mod databases;
mod error;
pub mod gateways;
pub mod migrate;
pub mod pages;
pub mod plugins;
pub mod route;
pub mod run;
pub mod settings;
pub mod shim;

pub use error::Error;
pub use route::{Route, program_exists, route};
pub use run::{MAIN_SERVICE, run};
pub use settings::{Flags, Settings};
pub use shim::{Shim, root_exec_shim};
