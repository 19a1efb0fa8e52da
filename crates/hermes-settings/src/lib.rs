//! A profile's settings: its files read once ([`ProfileFiles`]), and each setting resolved
//! here, in the original's precedence, with where its value came from ([`Setting`],
//! [`Source`]). The gateway, boot, diagnostics and the CLI ask this crate instead of reading
//! `config.yaml` and `.env` for themselves, so they cannot disagree.
//!
//! The original's environment (`gateway/run.py` at start-up, 0.19.0 and 0.20.1 alike):
//!
//! 1. the profile's `.env`, loaded with `override=True` — it wins over the process environment;
//! 2. the process environment (a compose file's `environment:`, a Kubernetes Secret);
//! 3. every top-level scalar of `config.yaml` (string, number, boolean) whose name is not set
//!    by then, `${VAR}` expanded — its `hermes config set API_SERVER_KEY …` writes there.
//!
//! Nested keys (`platforms.api_server.extra.key`) come after all three. A blank value
//! (`API_SERVER_KEY=` in `.env`) is set — it hides the layers below, as in the original — and
//! reads as unset ([`ProfileFiles::var`]).
//!
//! Words:
//! * **scope** — whether the profile is the default one or a named one ([`Scope`]): a named
//!   profile never takes [`NOT_BORROWED`] variables from the process environment, which are
//!   the default profile's.
//! * **volume** — every profile of a `HERMES_HOME`, read once ([`VolumeFiles`]): boot and
//!   `hermes up` build every service from one read, after seeding and migration have written
//!   the files.

mod files;
mod volume;

pub use files::{NOT_BORROWED, ProfileFiles, Scope, Setting, Shadowed, Source};
pub use volume::{ProfileRead, Unreadable, VolumeFiles};

use std::path::Path;

/// [`hermes_home::layout::ensure_skeleton`] for the root profile, whose seeded `.env` carries a
/// generated key only when the profile has none anywhere ([`ProfileFiles::key_seed_for`]).
///
/// # Errors
/// As `ensure_skeleton`.
pub fn ensure_root_skeleton(
    root: &Path,
    process_env: impl IntoIterator<Item = (String, String)>,
) -> Result<hermes_home::layout::SkeletonReport, hermes_home::Error> {
    let key = ProfileFiles::key_seed_for(root, Scope::Default, process_env);
    hermes_home::layout::ensure_skeleton(root, true, &key)
}

/// The `config.yaml` of the profile in `dir` alone (a missing file is an empty one), for the
/// settings no variable overrides (`gateway.engine`, `services:`, `backup:`): what a command
/// about one profile reads when it needs nothing else ([`ProfileFiles`] for the rest).
///
/// # Errors
/// A file that cannot be read or parsed.
pub fn config_of(dir: &Path) -> Result<hermes_home::config::Config, hermes_home::Error> {
    hermes_home::config::Config::load(&hermes_home::layout::config_path(dir))
}

/// The model of the profile `name` in `dir` as its gateway reads it (`model.default`, `${VAR}`
/// from the profile's environment: [`ProfileFiles::model`]); `None` when none is configured.
/// What `hermes profile list`, `hermes up` and the dashboard's Profiles page show.
///
/// # Errors
/// A `.env` or `config.yaml` that cannot be read or parsed.
pub fn model_name(dir: &Path, name: &str) -> Result<Option<String>, hermes_home::Error> {
    Ok(ProfileFiles::read(dir, Scope::of(name), process_env())?
        .model()
        .default)
}

/// A `config.yaml` text that is not the profile's file yet (an edit to check before it is
/// written, an archive's), parsed as the profile's would be; `path` names it in errors.
///
/// # Errors
/// A text that does not parse.
pub fn parse_config(
    path: &Path,
    text: &str,
) -> Result<hermes_home::config::Config, hermes_home::Error> {
    hermes_home::config::Config::parse(path, text)
}

/// This process's environment; variables whose name or value is not UTF-8 cannot be settings
/// and are left out (never a panic, as `std::env::vars` would).
pub fn process_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// This process's variables, and the [`GATEWAY_VARIABLES`], by name, with the values `var`
/// gives them: the process environment of a caller that controls what is seen through `var`
/// (the dashboard, `doctor`, tests).
pub fn process_through(var: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let names = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .chain(GATEWAY_VARIABLES.map(str::to_owned));
    let mut seen = std::collections::BTreeMap::new();
    for name in names {
        if let Some(value) = var(&name) {
            seen.insert(name, value);
        }
    }
    seen.into_iter().collect()
}

/// The variables a gateway reads from its profile's environment that operators set by name
/// (`hermes config get|set`): read and written where the gateway reads them.
pub const GATEWAY_VARIABLES: [&str; 6] = [
    hermes_home::seeds::API_SERVER_KEY,
    "API_SERVER_PORT",
    "API_SERVER_HOST",
    "API_SERVER_ENABLED",
    "API_SERVER_CORS_ORIGINS",
    "API_SERVER_MODEL_NAME",
];

/// The [`GATEWAY_VARIABLES`] entry `key` names (any case), if it names one.
pub fn gateway_variable(key: &str) -> Option<&'static str> {
    GATEWAY_VARIABLES
        .into_iter()
        .find(|v| v.eq_ignore_ascii_case(key))
}

/// Whether the variable `name` holds a secret (shown masked): `*_KEY`, `*_TOKEN`, and any
/// name with `SECRET` or `PASSWORD` in it (`EMAIL_PASSWORD`, `MATRIX_PASSWORD`).
pub fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.ends_with("_KEY")
        || upper.ends_with("_TOKEN")
        || upper.contains("SECRET")
        || upper.contains("PASSWORD")
}
