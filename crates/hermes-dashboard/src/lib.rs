//! `hermes-dashboard`: the web UI and its JSON API (`hermes dashboard`, and the `dashboard`
//! service). A client like the CLI — of the supervisor's control socket
//! (`hermes_services::connect`) and of `hermes-home` — never a second source of truth: every
//! answer is asked afresh.
//!
//! Modules:
//! * [`config`] — host, port and the auth mode from flags and the original's environment;
//!   a public bind without credentials is refused ([`Error::CredentialsRequired`], exit 78);
//! * [`guard`] — what every request passes: security headers, Host allowlist, public paths,
//!   the token link (cookie), login rate limiting, authentication, CSRF on POST;
//! * [`status`] — the Overview's snapshot;
//! * [`server`] — routes, the event stream, actions;
//! * [`page`], [`openapi`] — HTML and the API description.

#![deny(missing_docs)]

pub mod config;
mod error;
pub mod guard;
pub mod openapi;
pub mod page;
pub mod server;
pub mod status;

pub use config::{Auth, Settings};
pub use error::Error;
pub use server::{Vars, bind, router, serve};
