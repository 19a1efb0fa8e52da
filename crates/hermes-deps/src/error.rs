//! The crate's typed error and its hints.
//!
//! Every variant carries its context in fields (path, program, feature); the
//! message says what failed, its source (an OS error) says why, and
//! [`Error::hint`] gives the "what to do" line. Inside [`crate::install_specs`]
//! errors never escape: they become the `reason`/`hint` of an
//! [`crate::InstallOutcome`], the reason in one line with its cause
//! ([`hermes_errors::one_line`]), so callers see a sentence, never a raw OS error.

use std::path::PathBuf;

/// Everything that can go wrong in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No Python interpreter could be found.
    #[error("no Python interpreter found (looked for {searched})")]
    PythonNotFound {
        /// What was looked for, for display.
        searched: String,
    },
    /// A program could not be started.
    #[error("could not start `{program}`")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A program ran longer than its time limit and was stopped.
    #[error("`{program}` timed out after {seconds}s")]
    Timeout {
        /// The program.
        program: String,
        /// The limit.
        seconds: u64,
    },
    /// Python answered a query with something unexpected.
    #[error("could not query the Python interpreter `{python}`: {detail}")]
    PythonQuery {
        /// The interpreter.
        python: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The Hermes-managed venv could not be created.
    #[error("could not create the Python environment `{path}`: {detail}")]
    VenvCreate {
        /// Where the venv was to be created.
        path: PathBuf,
        /// The failure, last lines of stderr.
        detail: String,
    },
    /// The durable install target could not be prepared.
    #[error("lazy install target `{path}` is not writable")]
    TargetNotWritable {
        /// The target directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Something in the install generations beside the durable target failed.
    #[error("could not {action} `{path}`")]
    Generations {
        /// The directory or link.
        path: PathBuf,
        /// What was being done (`lock`, `switch`, `adopt`, …).
        action: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The durable target is something the generations do not manage.
    #[error("the lazy install target `{path}` is {what}, not an install generation")]
    ForeignTarget {
        /// The target.
        path: PathBuf,
        /// What it is instead.
        what: String,
    },
    /// A temporary file (the constraints file) could not be written.
    #[error("could not write a temporary constraints file")]
    TempFile {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The private working directory for the installer could not be created.
    #[error("could not create a private working directory for the installer")]
    WorkDir {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An install was asked for with no spec at all (an empty list, or only blank specs).
    #[error("nothing to install: no spec was given")]
    NoSpecs,
    /// Neither uv nor pip can run in the core environment.
    #[error("pip is not available in `{python}` and `ensurepip` failed: {detail}")]
    PipUnavailable {
        /// The interpreter.
        python: PathBuf,
        /// Why ensurepip failed.
        detail: String,
    },
    /// The feature registry does not know this feature.
    #[error("feature `{name}` is not in the feature registry")]
    UnknownFeature {
        /// The feature asked for.
        name: String,
    },
    /// A feature registry file failed to parse or validate.
    #[error("invalid feature registry: {detail}")]
    Registry {
        /// What is wrong.
        detail: String,
    },
}

impl Error {
    /// The "what to do" line for this error.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            Self::PythonNotFound { .. } => {
                "install Python 3 (`python3` on `PATH`) or set `HERMES_VENV` to a Python environment"
                    .to_string()
            }
            Self::Spawn { program, .. } => {
                format!("check that `{program}` exists and is executable")
            }
            Self::Timeout { .. } => "check network access to the package index; if you need a \
                 mirror, set `index-url` in `pip.conf` or `PIP_INDEX_URL` (it is passed to uv too)"
                .to_string(),
            Self::PythonQuery { python, .. } => {
                format!("run `{} -c 'import sys; print(sys.version)'` to check the interpreter", python.display())
            }
            Self::VenvCreate { .. } => "install the venv module (Debian: `apt-get install python3-venv`) \
                 or set `HERMES_VENV` to an existing environment"
                .to_string(),
            Self::TargetNotWritable { path, .. } => format!(
                "make `{}` writable by the Hermes user, or point `HERMES_LAZY_INSTALL_TARGET` at a writable directory on the data volume",
                path.display()
            ),
            Self::Generations { path, .. } => format!(
                "give `{}` to the user Hermes runs as (`chown -R`), or point `HERMES_LAZY_INSTALL_TARGET` at a writable directory on the data volume",
                path.display()
            ),
            Self::ForeignTarget { path, .. } => format!(
                "move `{}` aside; the next install creates a new generation there",
                path.display()
            ),
            Self::TempFile { .. } => {
                "check that the temporary directory (`TMPDIR`, default `/tmp`) exists and is writable"
                    .to_string()
            }
            Self::WorkDir { .. } => {
                "check that the temporary directory (`TMPDIR`, default `/tmp`) exists and is writable"
                    .to_string()
            }
            Self::NoSpecs => {
                "name at least one package on the package index, like `honcho-ai>=1.0`".to_string()
            }
            Self::PipUnavailable { .. } => {
                "install uv (`pip install uv`) or pip into the core environment".to_string()
            }
            Self::UnknownFeature { .. } => "run `hermes deps status` to list the known features".to_string(),
            // The registry is compiled into the binary: a broken one is a build defect.
            Self::Registry { .. } => "the feature list built into this binary is damaged: \
                reinstall Hermes, and report it with the output of `hermes version`"
                .to_string(),
        })
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::PythonNotFound { .. } => Error::PythonNotFound {
        searched: "`python3`, `python`".into(),
    },
    Error::Spawn { .. } => Error::Spawn {
        program: "uv".into(),
        source: std::io::Error::from_raw_os_error(13),
    },
    Error::Timeout { .. } => Error::Timeout {
        program: "uv".into(),
        seconds: 600,
    },
    Error::PythonQuery { .. } => Error::PythonQuery {
        python: "/opt/hermes/.venv/bin/python".into(),
        detail: "exited with code 1".into(),
    },
    Error::VenvCreate { .. } => Error::VenvCreate {
        path: "/opt/data/.venv".into(),
        detail: "ensurepip is not available".into(),
    },
    Error::TargetNotWritable { .. } => Error::TargetNotWritable {
        path: "/opt/data/lazy-packages".into(),
        source: std::io::Error::from_raw_os_error(30),
    },
    Error::Generations { .. } => Error::Generations {
        path: "/opt/data/lazy-packages.generations".into(),
        action: "lock",
        source: std::io::Error::from_raw_os_error(13),
    },
    Error::ForeignTarget { .. } => Error::ForeignTarget {
        path: "/opt/data/lazy-packages".into(),
        what: "a link to `/tmp/elsewhere`".into(),
    },
    Error::TempFile { .. } => Error::TempFile {
        source: std::io::Error::from_raw_os_error(28),
    },
    Error::WorkDir { .. } => Error::WorkDir {
        source: std::io::Error::from_raw_os_error(13),
    },
    Error::NoSpecs => Error::NoSpecs,
    Error::PipUnavailable { .. } => Error::PipUnavailable {
        python: "/opt/hermes/.venv/bin/python".into(),
        detail: "No module named ensurepip".into(),
    },
    Error::UnknownFeature { .. } => Error::UnknownFeature {
        name: "memory.nope".into(),
    },
    Error::Registry { .. } => Error::Registry {
        detail: "feature `memory.honcho` has no packages".into(),
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_read_as_phrases_in_one_line() {
        let e = Error::TargetNotWritable {
            path: "/t".into(),
            source: std::io::Error::from_raw_os_error(30),
        };
        assert_eq!(e.to_string(), "lazy install target `/t` is not writable");
        assert_eq!(
            hermes_errors::one_line(&e),
            "lazy install target `/t` is not writable: read-only file system"
        );
        let e = Error::Spawn {
            program: "uv".into(),
            source: std::io::Error::from_raw_os_error(13),
        };
        assert_eq!(
            hermes_errors::one_line(&e),
            "could not start `uv`: permission denied"
        );
    }

    #[test]
    fn messages_follow_the_conventions() {
        for (name, e) in Error::every_variant() {
            let m = e.to_string();
            assert!(!m.contains("os error"), "{name}: {m}");
            assert!(
                m.starts_with(|c: char| c.is_lowercase() || c == '`'),
                "{name}: {m}"
            );
            assert!(!m.ends_with('.'), "{name}: {m}");
            if let Some(h) = e.hint() {
                assert!(!h.ends_with('.'), "{name}: {h}");
            }
        }
    }
}
