//! `hermes-plugins`: plugin manifests (memory providers), discovery, status,
//! setup and doctor rows.
//!
//! A *plugin* is a folder with a `plugin.yaml` ([`manifest`]). Bundled plugins
//! ship in the binary; user plugins live in `$HERMES_HOME/plugins/<name>/`
//! ([`discovery`]). Their pip dependencies are installed only through
//! `hermes-deps`, so they follow the same routing (core venv or durable
//! target) and the same safety rules as every other runtime install, and a
//! bundled plugin's pins are also its `memory.<name>` feature for
//! `hermes deps` ([`features`]). This
//! crate returns data and plain-text renderers; [`setup::SetupPlan`] says what to
//! write, and [`profile::apply_plan`] writes it with the `hermes-home` writers (the
//! one place a setup touches `.env` and `config.yaml`, for the CLI and the dashboard).

pub mod discovery;
pub mod doctor;
mod error;
pub mod features;
pub mod manifest;
pub mod profile;
pub mod setup;
pub mod status;

pub use discovery::{Discovery, Plugin, Source, discover};
pub use doctor::doctor_rows;
pub use error::Error;
pub use features::feature_registry;
pub use manifest::{ExternalDependency, Manifest, PluginKind, Setting};
pub use setup::{
    ConfigWrite, EnvWrite, InstallReport, MemoryStatus, Question, SetupPlan, Step, active_provider,
    find_provider, install_provider, memory_status, questions, setup_provider,
};
pub use status::{PluginStatus, list_plugins, plugin_status, render_list};
