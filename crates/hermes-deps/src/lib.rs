//! `hermes-deps`: the runtime dependency installer.
//!
//! Optional Python packages (memory provider SDKs, messaging adapters,
//! providers) are installed at run time through ONE entry point,
//! [`install_specs`], which decides where they go ([`route`]), refuses unsafe
//! specs before any process starts ([`spec`]), runs uv or pip with a time
//! limit, and re-checks availability in a fresh interpreter whose `sys.path`
//! puts core packages first ([`python`]). Everything Hermes knows how to
//! install lazily is listed as data in `features.yaml` ([`features`]).
//!
//! The crate never reads the process environment or config files itself: the
//! caller passes `$HERMES_HOME`, the `security.allow_lazy_installs` switch and
//! an [`Environment`] snapshot in [`InstallOptions`].

pub mod doctor;
pub mod env;
mod error;
pub mod features;
pub mod generations;
pub mod install;
pub mod pipconf;
pub mod process;
pub mod python;
pub mod route;
pub mod spec;
pub mod target;
pub mod version;

pub use doctor::{DoctorRow, Status, installer_rows};
pub use env::Environment;
pub use error::Error;
pub use features::{
    EnsureOutcome, Feature, FeatureRegistry, FeatureStatus, ensure_feature, feature_status,
    render_status,
};
pub use generations::Requester;
pub use install::{
    InstallEvent, InstallOptions, InstallOutcome, InstallerChoice, Progress, install_specs,
};
pub use python::Interpreter;
pub use route::{BlockReason, Route};
pub use spec::{check_spec, spec_is_safe};
