//! The crate's one error type.

use std::io;
use std::os::fd::RawFd;

/// What can go wrong while reading the sockets a supervisor passed, or preparing them for a
/// child.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A variable of the protocol has a value that is not what the protocol allows.
    #[error("malformed `{var}={value}`: {reason}")]
    Malformed {
        /// The variable (`LISTEN_FDS`, `LISTEN_PID`, `HERMES_HANDOVER_FROM`).
        var: &'static str,
        /// Its value as found.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// `LISTEN_FDNAMES` does not name each passed fd exactly once.
    #[error("`LISTEN_FDNAMES` has {names} name(s) but `LISTEN_FDS` passes {fds} socket(s)")]
    NameCount {
        /// The fds `LISTEN_FDS` says were passed.
        fds: usize,
        /// The names `LISTEN_FDNAMES` lists.
        names: usize,
    },

    /// A passed fd cannot be used (most often: it is not open).
    #[error("cannot use the inherited fd {fd} (`{name}`)")]
    Fd {
        /// The fd number.
        fd: RawFd,
        /// Its name in `LISTEN_FDNAMES`.
        name: String,
        /// What `fcntl` said.
        #[source]
        source: io::Error,
    },

    /// The fd with the name asked for is not a listening TCP socket.
    #[error("the inherited socket `{name}` (fd {fd}) is not a listening TCP socket")]
    NotListening {
        /// Its name in `LISTEN_FDNAMES`.
        name: String,
        /// The fd number.
        fd: RawFd,
    },

    /// A socket name cannot be passed in `LISTEN_FDNAMES`.
    #[error("`{name}` cannot name a passed socket: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// Why not.
        reason: &'static str,
    },
}

impl Error {
    /// How a process that cannot start for it exits: 78 (configuration), whatever the
    /// variant — the environment it was started with is wrong, and a restart would not help.
    pub fn exit_code(&self) -> u8 {
        hermes_errors::exit::CONFIG
    }

    /// What the operator can do about it.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            Error::Malformed { var, .. } => format!(
                "the supervisor sets `{var}` for the process it starts; when starting it by \
                 hand, unset `{var}`"
            ),
            Error::NameCount { .. } => "the supervisor sets `LISTEN_FDS` and `LISTEN_FDNAMES` \
                                        together; when starting the process by hand, unset both"
                .to_string(),
            Error::Fd { .. } => "the process that started this one passed fewer fds than \
                                 `LISTEN_FDS` says; start it from the supervisor, or unset \
                                 `LISTEN_FDS` and `LISTEN_PID`"
                .to_string(),
            Error::NotListening { name, .. } => format!(
                "the supervisor must pass a bound, listening TCP socket as `{name}`; check \
                 what it was told to bind"
            ),
            Error::BadName { .. } => "a socket name is 1 to 255 printable ASCII characters \
                                      other than `:`"
                .to_string(),
        })
    }
}

#[cfg(any(test, feature = "examples"))]
hermes_errors::every_variant!(Error {
    Error::Malformed { .. } => Error::Malformed {
        var: crate::LISTEN_FDS,
        value: "three".into(),
        reason: "not a number",
    },
    Error::NameCount { .. } => Error::NameCount { fds: 2, names: 1 },
    Error::Fd { .. } => Error::Fd {
        fd: 4,
        name: "api".into(),
        source: io::Error::from_raw_os_error(libc::EBADF),
    },
    Error::NotListening { .. } => Error::NotListening {
        name: "api".into(),
        fd: 3,
    },
    Error::BadName { .. } => Error::BadName {
        name: "a:b".into(),
        reason: "it contains `:`",
    },
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_follow_the_house_style_and_every_variant_has_a_hint() {
        for (name, err) in Error::every_variant() {
            let msg = err.to_string();
            let first = msg.chars().next().unwrap();
            assert!(!first.is_uppercase(), "{name}: uppercase: {msg}");
            assert!(!msg.ends_with('.'), "{name}: ends with a period: {msg}");
            assert!(!msg.contains('\n'), "{name}: more than one line: {msg}");
            let hint = err.hint().unwrap_or_default();
            assert!(!hint.is_empty(), "{name}: no hint for {msg}");
            assert!(
                !hint.ends_with('.'),
                "{name}: hint ends with a period: {hint}"
            );
        }
    }
}
