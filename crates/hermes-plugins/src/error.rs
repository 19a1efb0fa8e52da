//! The crate's typed error and its hints: the message says what failed, the source
//! (when there is one) why, and [`Error::hint`] what to do.

use std::path::PathBuf;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A manifest could not be read.
    #[error("could not read plugin manifest `{path}`")]
    ReadManifest {
        /// The manifest file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A manifest is malformed or fails validation.
    #[error("invalid plugin manifest `{path}`: {detail}")]
    InvalidManifest {
        /// The manifest file (or `bundled:<name>`).
        path: PathBuf,
        /// Every problem found, separated by `; `.
        detail: String,
    },
    /// No plugin has this name.
    #[error("memory provider `{name}` not found")]
    UnknownProvider {
        /// The name asked for.
        name: String,
    },
    /// The plugin exists but is not a memory provider.
    #[error("plugin `{name}` is not a memory provider (kind `{kind}`)")]
    NotAMemoryProvider {
        /// The plugin.
        name: String,
        /// Its kind.
        kind: String,
    },
    /// A setting value was refused.
    #[error("invalid value for setting `{key}`: {detail}")]
    InvalidValue {
        /// The setting key.
        key: String,
        /// Why.
        detail: String,
    },
    /// The installer failed outside an install (e.g. querying Python).
    #[error(transparent)]
    Deps(#[from] hermes_deps::Error),
}

impl Error {
    /// The "what to do" line for this error.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::ReadManifest { .. } => Some("check the plugin folder's permissions".into()),
            Self::InvalidManifest { .. } => {
                Some("fix `plugin.yaml` (see `docs/plugins.md` for the format)".into())
            }
            Self::UnknownProvider { .. } | Self::NotAMemoryProvider { .. } => {
                Some("run `hermes plugins list` to see the available providers".into())
            }
            Self::InvalidValue { .. } => {
                Some("run `hermes memory setup` again with a valid value".into())
            }
            Self::Deps(e) => e.hint(),
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::ReadManifest { .. } => Error::ReadManifest {
        path: "/opt/data/plugins/honcho/plugin.yaml".into(),
        source: std::io::Error::from_raw_os_error(13),
    },
    Error::InvalidManifest { .. } => Error::InvalidManifest {
        path: "/opt/data/plugins/honcho/plugin.yaml".into(),
        detail: "`kind` is missing; `version` must be 1".into(),
    },
    Error::UnknownProvider { .. } => Error::UnknownProvider {
        name: "honchoo".into(),
    },
    Error::NotAMemoryProvider { .. } => Error::NotAMemoryProvider {
        name: "search".into(),
        kind: "tool".into(),
    },
    Error::InvalidValue { .. } => Error::InvalidValue {
        key: "workspace".into(),
        detail: "it must not be empty".into(),
    },
    Error::Deps(_) => Error::Deps(hermes_deps::Error::UnknownFeature {
        name: "memory.honchoo".into(),
    }),
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_follow_the_conventions() {
        for (name, e) in Error::every_variant() {
            let m = e.to_string();
            assert!(m.starts_with(|c: char| c.is_lowercase()), "{name}: {m}");
            assert!(!m.ends_with('.'), "{name}: {m}");
            assert!(e.hint().is_some(), "{name}");
        }
    }
}
