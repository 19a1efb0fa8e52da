//! How a command ends: the exit-status policy and the `error:` / `hint:` rendering.
//!
//! Library crates return typed errors with a `hint()`; each gets a `From` impl here, so the
//! rendering lives in exactly one place. A library's message says what failed and never
//! repeats its source; the source is the `Caused by:` line (the convention is
//! `hermes-errors`'s doc):
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

/// The exit code of a command line clap rejects (its own convention, kept under `--json`).
pub const USAGE_EXIT: u8 = 2;

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
    /// The kind of the `io::Error` this failure is, when it is one (writing stdout fails as
    /// one: `main` takes a broken pipe for a reader that has had enough).
    pub io_kind: Option<std::io::ErrorKind>,
}

impl Failure {
    /// A failure with a message and an optional hint.
    pub fn new(message: impl Into<String>, hint: Option<String>) -> Self {
        Failure {
            message: message.into(),
            causes: Vec::new(),
            hint,
            code: 1,
            io_kind: None,
        }
    }

    /// A command line clap rejected, for `--json`: clap's first line without its `error: `,
    /// its `tip:` as the hint (else where to read the usage), exit 2.
    pub fn usage(error: &clap::Error) -> Self {
        let text = error.render().to_string();
        let mut lines = text.lines().map(str::trim);
        let message = lines
            .next()
            .map(|line| line.strip_prefix("error: ").unwrap_or(line).to_string())
            .unwrap_or_else(|| error.kind().to_string());
        let hint = lines
            .find_map(|line| line.strip_prefix("tip: "))
            .map_or_else(|| "see the command's `--help`".to_string(), str::to_string);
        Failure {
            message,
            causes: Vec::new(),
            hint: Some(hint),
            code: USAGE_EXIT,
            io_kind: None,
        }
    }

    /// The message of `error`, its causes (each once: see [`hermes_errors::causes`]) and the
    /// hint.
    fn from_error(error: &(dyn std::error::Error + 'static), hint: Option<String>) -> Self {
        Failure {
            message: error.to_string(),
            causes: hermes_errors::causes(error),
            hint,
            code: 1,
            io_kind: None,
        }
    }

    /// The message and its causes in one line, for a record that has one line for it.
    pub fn one_line(&self) -> String {
        std::iter::once(&self.message)
            .chain(&self.causes)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(": ")
    }

    /// The failure as the JSON object a command run with `--json` prints on stdout:
    /// `{"error", "hint", "exit_code"}`, and `causes` (outermost first) when there are any.
    /// `hint` is always there (`null` when there is none), so a script can read it blindly.
    pub fn to_json(&self) -> serde_json::Value {
        let mut object = serde_json::json!({
            "error": self.message,
            "hint": self.hint,
            "exit_code": self.code,
        });
        if !self.causes.is_empty()
            && let Some(fields) = object.as_object_mut()
        {
            fields.insert("causes".into(), serde_json::json!(self.causes));
        }
        object
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
    hermes_sessions::Error,
    hermes_services::Error,
    hermes_backup::Error,
    hermes_backup::schedule::Error,
);

/// Errors that also carry the exit code of a process that fails with them (`exit_code()`: 78
/// for configuration): the failure takes it, so no command patches codes after the fact.
macro_rules! from_coded_error {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for Failure {
            fn from(error: $error) -> Self {
                let hint = error.hint();
                let mut failure = Failure::from_error(&error, hint);
                failure.code = error.exit_code();
                failure
            }
        }
    )*};
}

from_coded_error!(
    hermes_init::Error,
    hermes_gateway::Error,
    hermes_dashboard::Error,
    hermes_gateway::listen::Error,
);

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        // A bare I/O error names no file: doctor checks the home's files one by one.
        let hint = match error.kind() {
            std::io::ErrorKind::PermissionDenied => {
                "run `hermes doctor`: it names each file of the home this user cannot read or write"
            }
            _ => "run `hermes doctor` to check the home and its files, and retry",
        };
        let mut failure = Failure::from_error(&error, Some(hint.into()));
        failure.io_kind = Some(error.kind());
        failure
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

    #[test]
    fn json_has_error_hint_exit_code_and_causes_only_when_there_are_some() {
        let mut failure = Failure::new(
            "no such profile `x`",
            Some("run `hermes profile list`".into()),
        );
        failure.code = hermes_errors::exit::CONFIG;
        assert_eq!(
            failure.to_json(),
            serde_json::json!({"error": "no such profile `x`", "hint": "run `hermes profile list`", "exit_code": 78})
        );
        let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied");
        let with_cause = Failure::from(hermes_home::Error::Io {
            action: "read",
            path: "/x/.env".into(),
            source: io,
        });
        let value = with_cause.to_json();
        assert_eq!(value["causes"], serde_json::json!(["denied"]));
        assert_eq!(value["exit_code"], 1);
        let bare = Failure::new("failed", None).to_json();
        assert!(
            bare["hint"].is_null() && bare.get("causes").is_none(),
            "{bare}"
        );
    }

    #[test]
    fn an_io_failure_keeps_its_kind() {
        let pipe = Failure::from(std::io::Error::from_raw_os_error(32));
        assert_eq!(pipe.io_kind, Some(std::io::ErrorKind::BrokenPipe));
        // A library error that mentions a pipe is not a closed stdout.
        let other = Failure::from(hermes_supervisor::Error::Protocol {
            reason: "cannot send to `/run/hermes/supervisor.sock`: Broken pipe (os error 32)"
                .into(),
        });
        assert_eq!(other.io_kind, None);
    }

    /// Every variant of a library's error as `hermes` prints it, each under its pattern and
    /// exit code.
    fn render_all(crate_name: &str, all: Vec<(&'static str, Failure)>) -> String {
        let mut out = String::new();
        let mut seen = std::collections::BTreeSet::new();
        for (pattern, failure) in all {
            assert!(seen.insert(pattern), "{pattern} is listed twice");
            // The style every library follows (uv's): one sentence, lowercase, no period.
            let m = &failure.message;
            assert!(
                !m.is_empty()
                    && !m.ends_with('.')
                    && m.chars().next().is_some_and(|c| !c.is_uppercase()),
                "{crate_name} {pattern}: message style: {m}"
            );
            // Every `error:` a user meets says what to do about it, in the message's style.
            assert!(
                failure
                    .hint
                    .as_deref()
                    .is_some_and(|h| !h.trim().is_empty() && !h.ends_with('.')),
                "{crate_name} {pattern}: no hint: {}",
                failure.render()
            );
            assert!(
                failure
                    .causes
                    .iter()
                    .all(|c| !failure.message.contains(c.as_str())),
                "{crate_name} {pattern}: the message repeats its cause: {}",
                failure.render()
            );
            let _ = write!(
                out,
                "── {crate_name}::{pattern} (exit {}) ──\n{}\n",
                failure.code,
                failure.render()
            );
        }
        out
    }

    fn failures<E>(all: Vec<(&'static str, E)>) -> Vec<(&'static str, Failure)>
    where
        Failure: From<E>,
    {
        all.into_iter()
            .map(|(pattern, e)| (pattern, Failure::from(e)))
            .collect()
    }

    /// As [`failures`], each with the exit code its command gives it where the code depends on
    /// the command, not the error (`exit_code`).
    fn failures_exiting<E>(
        all: Vec<(&'static str, E)>,
        exit_code: impl Fn(&E) -> u8,
    ) -> Vec<(&'static str, Failure)>
    where
        Failure: From<E>,
    {
        all.into_iter()
            .map(|(pattern, e)| {
                let code = exit_code(&e);
                let mut failure = Failure::from(e);
                failure.code = code;
                (pattern, failure)
            })
            .collect()
    }

    // One snapshot per library: every variant of its `Error`, as users see it. Each list is
    // `Error::every_variant()` (`hermes_errors::every_variant!`), which does not compile
    // while a variant is missing, so a new variant changes its snapshot and this test fails
    // until the new rendering is reviewed and accepted.

    #[test]
    fn every_home_error() {
        let all = failures(hermes_home::Error::every_variant());
        insta::assert_snapshot!(render_all("hermes_home", all));
    }

    #[test]
    fn every_privilege_error() {
        // The binary meets these through `hermes_init::Error::Privilege`, which renders them
        // as they are (its hint, its exit code).
        let all = hermes_privilege::Error::every_variant()
            .into_iter()
            .map(|(pattern, e)| (pattern, Failure::from(hermes_init::Error::Privilege(e))))
            .collect();
        insta::assert_snapshot!(render_all("hermes_privilege", all));
    }

    #[test]
    fn every_supervisor_error() {
        let all = failures(hermes_supervisor::Error::every_variant());
        insta::assert_snapshot!(render_all("hermes_supervisor", all));
    }

    /// The binary's own failures (`Failure::new(message, hint)` in its commands) have a hint
    /// too: no call passes `None`.
    #[test]
    fn every_failure_the_commands_build_has_a_hint() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![src.join("main.rs"), src.join("context.rs")];
        // A command split into a directory (`commands/gateway/`) is scanned too.
        let mut dirs = vec![src.join("commands")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    files.push(path);
                }
            }
        }
        let mut calls = 0;
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (at, _) in text.match_indices("Failure::new(") {
                let args = call_arguments(&text[at + "Failure::new(".len()..]);
                calls += 1;
                assert!(
                    !args.trim_end().trim_end_matches(',').ends_with("None"),
                    "{}: a failure without a hint: Failure::new({args})",
                    file.display()
                );
            }
        }
        assert!(calls > 10, "the scan found the calls ({calls})");
    }

    /// The text up to the `)` that closes a call whose arguments start `rest`, skipping
    /// string literals (which may hold parentheses).
    fn call_arguments(rest: &str) -> &str {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for (i, c) in rest.char_indices() {
            match (in_string, c) {
                (true, _) if escaped => escaped = false,
                (true, '\\') => escaped = true,
                (true, '"') => in_string = false,
                (true, _) => {}
                (false, '"') => in_string = true,
                (false, '(' | '[' | '{') => depth += 1,
                (false, ')') if depth == 0 => return &rest[..i],
                (false, ')' | ']' | '}') => depth -= 1,
                _ => {}
            }
        }
        rest
    }

    #[test]
    fn every_refusal_of_the_supervisor_has_a_hint() {
        // `every_variant` lists one `Refused`; the others differ only by their code.
        let codes = hermes_supervisor::protocol::ErrorCode::KNOWN
            .into_iter()
            .chain([hermes_supervisor::protocol::ErrorCode::Other(
                "new_code".into(),
            )]);
        for code in codes {
            let failure = Failure::from(hermes_supervisor::Error::Refused {
                code: code.clone(),
                message: "refused".into(),
            });
            assert!(
                failure.hint.as_deref().is_some_and(|h| !h.is_empty()),
                "{code:?}: {}",
                failure.render()
            );
        }
    }

    #[test]
    fn every_services_error() {
        let all = failures(hermes_services::Error::every_variant());
        insta::assert_snapshot!(render_all("hermes_services", all));
    }

    #[test]
    fn every_backup_error() {
        let all = failures(hermes_backup::Error::every_variant());
        insta::assert_snapshot!(render_all("hermes_backup", all));
    }

    #[test]
    fn every_init_error() {
        let all = failures(hermes_init::Error::every_variant());
        insta::assert_snapshot!(render_all("hermes_init", all));
    }

    #[test]
    fn every_gateway_error() {
        // The provider client's errors reach users as the gateway's (`Error::Provider`, which
        // renders them as they are): listed in its place, each under its own name.
        let all = hermes_gateway::Error::every_variant()
            .into_iter()
            .flat_map(|(pattern, e)| match e {
                hermes_gateway::Error::Provider(_) => hermes_provider::Error::every_variant()
                    .into_iter()
                    .map(|(pattern, e)| (pattern, hermes_gateway::Error::Provider(e)))
                    .collect(),
                e => vec![(pattern, e)],
            })
            .collect();
        // With the exit code each carries (78: configuration).
        let all = failures(all);
        insta::assert_snapshot!(render_all("hermes_gateway", all));
    }

    #[test]
    fn every_dashboard_error() {
        // With the exit code each carries (78: configuration).
        let all = failures(hermes_dashboard::Error::every_variant());
        insta::assert_snapshot!(render_all("hermes_dashboard", all));
    }

    #[test]
    fn every_deps_error() {
        let all = failures(hermes_deps::Error::every_variant());
        insta::assert_snapshot!(render_all("hermes_deps", all));
    }

    #[test]
    fn every_listen_error() {
        let all = failures(hermes_gateway::listen::Error::every_variant());
        insta::assert_snapshot!(render_all("hermes_listen", all));
    }

    #[test]
    fn every_backup_schedule_error() {
        use hermes_backup::schedule::Error;
        // Reading the settings is the `backup` service's start: a refusal there is exit 78
        // (`hermes backup scheduled`); the state and the archives' errors are a run's result.
        let all = failures_exiting(Error::every_variant(), |e| match e {
            Error::Io { .. } | Error::State { .. } => 1,
            Error::Schedule { .. }
            | Error::Keep { .. }
            | Error::Switch { .. }
            | Error::NotScalar { .. }
            | Error::DirBackedUp { .. }
            | Error::Home(_) => hermes_errors::exit::CONFIG,
        });
        insta::assert_snapshot!(render_all("hermes_backup::schedule", all));
    }

    #[test]
    fn every_plugins_error() {
        let all = failures(hermes_plugins::Error::every_variant());
        insta::assert_snapshot!(render_all("hermes_plugins", all));
    }
}
