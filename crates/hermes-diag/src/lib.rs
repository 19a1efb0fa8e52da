//! `hermes-diag`: what support needs to know about a running Hermes.
//!
//! * [`identity`] — the commit this binary was built from (embedded, baked file, unknown);
//! * [`install`] — how it was installed and how to upgrade it;
//! * [`dump`] — the `hermes dump` support summary;
//! * [`doctor`] — the `hermes doctor` checks;
//! * [`report`] — the one [`report::doctor`] and the one [`report::dump`] for a home, which the
//!   CLI and the dashboard both show (the parts of services, plugins, deps and the gateway put
//!   together; their types are `hermes-report`'s);
//! * [`migrate`] — `hermes migrate check`: what of an original's volume carries over.

pub mod doctor;
pub mod dump;
// Shared with build.rs, which uses the parts the library does not.
#[allow(dead_code)]
mod git;
pub mod identity;
pub mod install;
pub mod migrate;
pub mod report;

pub use identity::BuildIdentity;
pub use install::{Install, InstallMethod};
