//! How a command ends: the exit-status policy and the `error:` / `hint:` rendering.
//!
//! Library crates return typed errors with a `hint()`; each gets a `From` impl here, so the
//! rendering lives in exactly one place:
//!
//! ```text
//! error: <what failed>
//!   Caused by: <source>
//!
//! hint: <what to do>
//! ```

use std::fmt::Write as _;

/// The exit status of a command that did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// Exit 0.
    Success,
    /// Exit 1 without an error message (e.g. `doctor` found a failing check and said so).
    Failure,
    /// An exit code chosen by the command (a gateway's 75 or 78, PID 1's main program's).
    External(u8),
}

impl ExitStatus {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure => 1,
            ExitStatus::External(code) => code,
        }
    }
}

/// A user-facing failure: exit 1 with a one-line reason and, when we know one, a hint.
#[derive(Debug)]
pub struct Failure {
    /// The `error:` line.
    pub message: String,
    /// `Caused by:` lines, outermost first.
    pub causes: Vec<String>,
    /// The `hint:` line.
    pub hint: Option<String>,
    /// The exit code (1 unless a command needs another).
    pub code: u8,
}

impl Failure {
    /// A failure with a message and an optional hint.
    pub fn new(message: impl Into<String>, hint: Option<String>) -> Self {
        Failure {
            message: message.into(),
            causes: Vec::new(),
            hint,
            code: 1,
        }
    }

    fn from_error(error: &dyn std::error::Error, hint: Option<String>) -> Self {
        let message = error.to_string();
        let mut causes: Vec<String> = Vec::new();
        let mut source = error.source();
        while let Some(cause) = source {
            // Many messages already end with their source (`cannot open `x`: denied`): a
            // cause the line above already says is not said again.
            let text = cause.to_string();
            let above = causes.last().unwrap_or(&message);
            if !above.contains(&text) {
                causes.push(text);
            }
            source = cause.source();
        }
        Failure {
            message,
            causes,
            hint,
            code: 1,
        }
    }

    /// The text written to stderr.
    pub fn render(&self) -> String {
        let mut out = format!("error: {}\n", self.message);
        for cause in &self.causes {
            let _ = writeln!(out, "  Caused by: {cause}");
        }
        if let Some(hint) = &self.hint {
            let _ = write!(out, "\nhint: {hint}\n");
        }
        out
    }
}

/// Every library error type has a `hint()`; this gives each the same `From` impl.
macro_rules! from_hinted_error {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for Failure {
            fn from(error: $error) -> Self {
                let hint = error.hint();
                Failure::from_error(&error, hint)
            }
        }
    )*};
}

from_hinted_error!(
    hermes_home::Error,
    hermes_deps::Error,
    hermes_plugins::Error,
    hermes_supervisor::Error,
    hermes_gateway::Error,
    hermes_services::Error,
);

impl From<hermes_init::Error> for Failure {
    fn from(error: hermes_init::Error) -> Self {
        let hint = error.hint();
        let mut failure = Failure::from_error(&error, hint);
        failure.code = error.exit_code();
        failure
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        Failure::from_error(&error, None)
    }
}

/// What every command returns.
pub type CommandResult = Result<ExitStatus, Failure>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "cannot open `x`: {}", self.0)
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let f = Failure::from_error(&Outer(std::io::Error::other("denied")), None);
        assert_eq!(f.render(), "error: cannot open `x`: denied\n");
    }

    #[test]
    fn renders_error_causes_and_hint() {
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let err = hermes_home::Error::Io {
            action: "read",
            path: "/x/.env".into(),
            source: io,
        };
        let text = Failure::from(err).render();
        assert!(
            text.starts_with("error: could not read `/x/.env`\n  Caused by: denied\n\nhint: "),
            "{text}"
        );
    }
}
