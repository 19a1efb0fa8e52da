//! `hermes-dashboard`: the web UI and its JSON API (`hermes dashboard`, and the `dashboard`
//! service). A client like the CLI — of the supervisor's control socket
//! (`hermes_services::connect`) and of `hermes-home` — never a second source of truth: every
//! answer is asked afresh.
//!
//! Modules:
//! * [`config`] — host, port, base path and the auth mode from flags and the original's
//!   environment; a public bind without credentials is refused
//!   ([`Error::CredentialsRequired`], exit 78);
//! * [`guard`] — what every request passes: security headers, Host allowlist, the sub-path,
//!   public paths, the token link (cookie), login rate limiting, authentication, CSRF;
//! * [`server`] — the router, assets, serving;
//! * [`pages`] — one module per page (Overview, Logs, Profiles, Plugins, Sessions,
//!   Backups, Diagnostics): its HTML, its `/api` endpoints, its part of [`openapi`];
//! * [`status`] — the Overview's snapshot, with the original's component rollup (`rollup`)
//!   and the dashboard's own health (`health`: its error answers).
//! * [`metrics`] — `GET /metrics`: the container in the Prometheus text format, with every
//!   running gateway's own metrics passed through.

#![deny(missing_docs)]

mod assets;
mod backup_store;
pub mod config;
mod error;
pub mod guard;
mod health;
mod limiter;
pub mod metrics;
mod model_settings;
pub mod openapi;
pub mod pages;
mod rollup;
mod secret;
pub mod server;
mod service_control;
pub mod status;
mod storage_probe;

pub use config::{Auth, Place, Settings};
pub use error::Error;
pub use server::{READY_TOKEN, Vars, bind, router, serve};
