//! The one error type of `hermes-home`, and the hint that goes with each variant.

use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong while resolving, reading or writing `HERMES_HOME`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system error while acting on a path.
    #[error("could not {action} `{}`", path.display())]
    Io {
        /// What was being done: "read", "write", "create directory", ...
        action: &'static str,
        /// The path acted on.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Neither `HERMES_HOME` nor `HOME` is set.
    #[error("cannot locate the Hermes home: neither `HERMES_HOME` nor `HOME` is set")]
    NoHome,
    /// A profile name that does not follow the naming rule.
    #[error("invalid profile name `{name}`: {reason}")]
    InvalidProfileName {
        /// The name as given.
        name: String,
        /// Which part of the rule it breaks.
        reason: &'static str,
    },
    /// A reserved profile name.
    #[error("profile name `{name}` is reserved")]
    ReservedProfileName {
        /// The name as given.
        name: String,
    },
    /// A named profile that does not exist.
    #[error("profile `{name}` does not exist (looked for `{}`)", path.join("SOUL.md").display())]
    ProfileNotFound {
        /// The profile name.
        name: String,
        /// Where it would live.
        path: PathBuf,
    },
    /// A profile that already exists.
    #[error("profile `{name}` already exists at `{}`", path.display())]
    ProfileExists {
        /// The profile name.
        name: String,
        /// Where it lives.
        path: PathBuf,
    },
    /// An attempt to delete the default profile.
    #[error("the default profile cannot be deleted")]
    DefaultProfileUndeletable,
    /// `config.yaml` is not valid YAML.
    #[error("`{}` is not valid YAML (line {line}, column {column}): {message}", path.display())]
    ConfigParse {
        /// The file.
        path: PathBuf,
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// A `config.yaml` layout the byte-preserving editor ([`crate::yaml_edit`]) does not
    /// change exactly: refused, nothing written.
    #[error("cannot set `{key}` in `{}` without rewriting other lines: {refusal}", path.display())]
    ConfigLayout {
        /// The file.
        path: PathBuf,
        /// The dotted key(s) being set.
        key: String,
        /// What in the file's layout stops the edit.
        refusal: crate::yaml_edit::Refusal,
    },
    /// `config.yaml` parses but its top level is not a mapping.
    #[error("`{}` must be a mapping of settings at the top level", path.display())]
    ConfigNotMapping {
        /// The file.
        path: PathBuf,
    },
    /// A text file (`.env`, `config.yaml`) whose bytes are not UTF-8.
    #[error("`{}` is not valid UTF-8 (line {line}, byte {offset})", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// 1-based line of the first invalid byte.
        line: usize,
        /// 0-based offset of the first invalid byte.
        offset: usize,
    },
    /// A `.env` key that is not a valid variable name.
    #[error("invalid environment variable name `{key}`")]
    EnvKeyInvalid {
        /// The key as given.
        key: String,
    },
    /// A `.env` key that Hermes refuses to set.
    #[error("refusing to set `{key}` in `.env`: it controls how processes start")]
    EnvKeyDenied {
        /// The key as given.
        key: String,
    },
    /// `auth.json` exists but the current user may not read it.
    #[error(
        "cannot read `{}`: permission denied (owner {owner}, mode {mode:04o}; running as {current})",
        path.display()
    )]
    AuthUnreadable {
        /// The file.
        path: PathBuf,
        /// The file's owner, as `name (uid N)`.
        owner: String,
        /// The file's permission bits.
        mode: u32,
        /// The current user, as `name (uid N)`.
        current: String,
        /// The current user's name, for the suggested `chown`.
        current_name: String,
    },
    /// Another process held a file's lock for longer than a writer waits.
    #[error("timed out after {} s waiting for the lock `{}`", waited.as_secs_f32(), path.display())]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long this writer waited.
        waited: std::time::Duration,
    },
    /// A lock file that is a symlink, a FIFO or anything but a regular file.
    #[error("refusing to use `{}` as a lock: it is a symlink or not a regular file", path.display())]
    LockNotAFile {
        /// The lock file.
        path: PathBuf,
    },
}

impl Error {
    pub(crate) fn io(action: &'static str, path: &Path, source: io::Error) -> Self {
        Error::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    /// What the user can do about this error, when there is something to say.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::Io { source, path, .. } => match source.kind() {
                io::ErrorKind::PermissionDenied => Some(format!(
                    "check the owner and mode of `{}` (`ls -l`); in a container, files under \
                     `/opt/data` must belong to the `hermes` user",
                    path.display()
                )),
                io::ErrorKind::ReadOnlyFilesystem => {
                    Some("the file system is read-only; point `HERMES_HOME` at a writable volume".into())
                }
                io::ErrorKind::StorageFull => Some("the disk is full; free some space and retry".into()),
                _ => None,
            },
            Error::NoHome => Some("set `HERMES_HOME` to the directory that holds your Hermes data".into()),
            Error::InvalidProfileName { name, .. } => {
                let lower = name.trim().to_ascii_lowercase();
                let suggestion = if lower != name.as_str() && crate::ProfileName::parse(&lower).is_ok() {
                    format!(" (did you mean `{lower}`?)")
                } else {
                    String::new()
                };
                Some(format!(
                    "profile names are 1-64 characters from `a-z`, `0-9`, `_` and `-`, starting with \
                     a letter or digit{suggestion}"
                ))
            }
            Error::ReservedProfileName { .. } => Some(format!(
                "choose another name; reserved names are: {}",
                crate::profile::RESERVED_NAMES.join(", ")
            )),
            Error::ProfileNotFound { .. } => {
                Some("create it with `hermes profile create <name>`, or list profiles with `hermes profile list`".into())
            }
            Error::ProfileExists { .. } => Some("pick another name, or delete the old profile first".into()),
            Error::DefaultProfileUndeletable => {
                Some("the default profile is `HERMES_HOME` itself; remove that directory by hand if you really mean it".into())
            }
            Error::ConfigLayout { key, .. } => Some(format!(
                "set `{key}` by editing the file by hand (or write that part in block style, \
                 `key: value` one per line); Hermes changes only lines it can change exactly"
            )),
            Error::ConfigParse { .. } | Error::ConfigNotMapping { .. } => {
                Some("fix the file by hand; Hermes never rewrites a config it cannot parse".into())
            }
            Error::NotUtf8 { path, line, .. } => Some(format!(
                "fix line {line} by hand or re-save the file as UTF-8 (`iconv -f latin1 -t utf-8`); \
                 Hermes never rewrites `{}` while it does not decode",
                path.display()
            )),
            Error::EnvKeyInvalid { .. } => {
                Some("names start with a letter or `_` and contain only letters, digits and `_`".into())
            }
            Error::EnvKeyDenied { .. } => Some("set it in the environment of the container or shell instead".into()),
            Error::AuthUnreadable { path, current_name, .. } => Some(format!(
                "as root, run `chown {current_name}: {}` (in a container: `docker exec -u root <container> chown {current_name}: {}`); the file was left untouched",
                path.display(),
                path.display()
            )),
            Error::LockTimeout { path, .. } => Some(format!(
                "another Hermes process is changing the same file; retry in a moment, and if this \
                 persists look for a stuck `hermes` process holding `{}`",
                path.display()
            )),
            Error::LockNotAFile { path } => Some(format!(
                "remove it (`rm {}`); Hermes recreates lock files and never follows a link there",
                path.display()
            )),
        }
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::Io { .. } => Error::Io {
        action: "read",
        path: "/opt/data/.env".into(),
        source: io::Error::from_raw_os_error(13),
    },
    Error::NoHome => Error::NoHome,
    Error::InvalidProfileName { .. } => Error::InvalidProfileName {
        name: "Work".into(),
        reason: "it must start with a lowercase letter or a digit",
    },
    Error::ReservedProfileName { .. } => Error::ReservedProfileName {
        name: "default".into(),
    },
    Error::ProfileNotFound { .. } => Error::ProfileNotFound {
        name: "work".into(),
        path: "/opt/data/profiles/work".into(),
    },
    Error::ProfileExists { .. } => Error::ProfileExists {
        name: "work".into(),
        path: "/opt/data/profiles/work".into(),
    },
    Error::DefaultProfileUndeletable => Error::DefaultProfileUndeletable,
    Error::ConfigParse { .. } => Error::ConfigParse {
        path: "/opt/data/config.yaml".into(),
        line: 3,
        column: 7,
        message: "mapping values are not allowed in this context".into(),
    },
    Error::ConfigLayout { .. } => Error::ConfigLayout {
        path: "/opt/data/config.yaml".into(),
        key: "model.default".into(),
        refusal: crate::yaml_edit::Refusal::FlowStyle("model".into()),
    },
    Error::ConfigNotMapping { .. } => Error::ConfigNotMapping {
        path: "/opt/data/config.yaml".into(),
    },
    Error::NotUtf8 { .. } => Error::NotUtf8 {
        path: "/opt/data/.env".into(),
        line: 2,
        offset: 17,
    },
    Error::EnvKeyInvalid { .. } => Error::EnvKeyInvalid {
        key: "1PASSWORD".into(),
    },
    Error::EnvKeyDenied { .. } => Error::EnvKeyDenied {
        key: "LD_PRELOAD".into(),
    },
    Error::AuthUnreadable { .. } => Error::AuthUnreadable {
        path: "/opt/data/auth.json".into(),
        owner: "root (uid 0)".into(),
        mode: 0o600,
        current: "hermes (uid 10000)".into(),
        current_name: "hermes".into(),
    },
    Error::LockTimeout { .. } => Error::LockTimeout {
        path: "/opt/data/.env.lock".into(),
        waited: std::time::Duration::from_secs(10),
    },
    Error::LockNotAFile { .. } => Error::LockNotAFile {
        path: "/opt/data/.env.lock".into(),
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_follows_the_conventions() {
        for (name, e) in Error::every_variant() {
            let m = e.to_string();
            assert!(
                m.starts_with(|c: char| c.is_lowercase() || c == '`'),
                "{name}: {m}"
            );
            assert!(!m.ends_with('.'), "{name}: {m}");
            assert!(e.hint().is_some_and(|h| !h.is_empty()), "{name}");
        }
    }
}
