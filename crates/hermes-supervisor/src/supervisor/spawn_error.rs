//! Why a service could not be started, in one line that names the real cause.
//!
//! std reports a failed spawn as a bare errno: `ENOENT` reads the same whether the service's
//! working directory, its program or the program's `#!` interpreter is missing. `spawn` finds
//! out which step failed and says so here; the machine receives the words and the shell's
//! exit code as plain data ([`crate::machine::Event::SpawnFailed`]).

use std::fmt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

use crate::machine::{EXIT_NOT_EXECUTABLE, EXIT_SPAWN_FAILED};

/// Why a service could not be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SpawnError {
    /// Nothing to run: the spec is gone or its command is empty (validated specs never are).
    Nothing(&'static str),
    /// The child could not change to the service's working directory.
    Cwd {
        /// The service.
        service: String,
        /// Its `cwd`.
        dir: PathBuf,
        /// What `chdir` said.
        errno: Errno,
    },
    /// The program could not be executed.
    Exec {
        /// The program as the spec names it.
        program: String,
        /// What `exec` said.
        errno: Errno,
        /// The program exists: a "not found" is about its `#!` interpreter.
        exists: bool,
    },
}

impl SpawnError {
    /// The exit status a shell gives the same failure: 126 found but not runnable, 127 not
    /// found (PID 1 exits with it when its main program cannot start).
    pub(super) fn exit_code(&self) -> i32 {
        match self {
            SpawnError::Cwd { errno, .. } | SpawnError::Exec { errno, .. }
                if matches!(
                    errno,
                    Errno::EACCES | Errno::ENOEXEC | Errno::EPERM | Errno::EISDIR
                ) =>
            {
                EXIT_NOT_EXECUTABLE
            }
            _ => EXIT_SPAWN_FAILED,
        }
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Nothing(what) => write!(f, "cannot start: {what}"),
            SpawnError::Cwd {
                service,
                dir,
                errno,
            } => write!(
                f,
                "cannot change to directory `{}` (service `{service}`): {}",
                dir.display(),
                describe(*errno)
            ),
            SpawnError::Exec {
                program,
                errno,
                exists,
            } => {
                write!(f, "cannot start: `{program}`: ")?;
                match (errno, exists) {
                    (Errno::ENOENT, false) => f.write_str("command not found"),
                    (Errno::ENOENT, true) => f.write_str("its `#!` interpreter was not found"),
                    (Errno::EACCES | Errno::EPERM, _) => f.write_str(
                        "permission denied (it, or a directory on its path, is not executable \
                         by the service's user)",
                    ),
                    (Errno::ENOEXEC, _) => {
                        f.write_str("not an executable format (a script needs a `#!` line)")
                    }
                    (errno, _) => f.write_str(&describe(*errno)),
                }
            }
        }
    }
}

/// The errno's text as the rest of a sentence: `no such file or directory`.
fn describe(errno: Errno) -> String {
    let text = errno.desc();
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        // `I/O error` keeps its capitals.
        (Some(first), Some(second)) if second.is_lowercase() => first
            .to_lowercase()
            .chain(text[first.len_utf8()..].chars())
            .collect(),
        _ => text.to_string(),
    }
}

/// Whether `program` names an existing file, looked up as `exec` does: a name with a `/` from
/// `cwd`, a bare name on `path` (the child's `PATH`).
pub(super) fn program_exists(program: &str, cwd: Option<&Path>, path: Option<&str>) -> bool {
    if program.contains('/') {
        let at = Path::new(program);
        return match cwd {
            Some(dir) if at.is_relative() => dir.join(at).is_file(),
            _ => at.is_file(),
        };
    }
    path.unwrap_or_default()
        .split(':')
        .filter(|dir| !dir.is_empty())
        .any(|dir| Path::new(dir).join(program).is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(program: &str, errno: Errno, exists: bool) -> SpawnError {
        SpawnError::Exec {
            program: program.into(),
            errno,
            exists,
        }
    }

    #[test]
    fn each_cause_is_named_with_a_shells_code() {
        let cwd = SpawnError::Cwd {
            service: "web".into(),
            dir: "/x".into(),
            errno: Errno::ENOENT,
        };
        assert_eq!(
            cwd.to_string(),
            "cannot change to directory `/x` (service `web`): no such file or directory"
        );
        assert_eq!(cwd.exit_code(), 127);
        let missing = exec("nosuch", Errno::ENOENT, false);
        assert_eq!(
            missing.to_string(),
            "cannot start: `nosuch`: command not found"
        );
        assert_eq!(missing.exit_code(), 127);
        let interpreter = exec("/srv/run", Errno::ENOENT, true);
        assert!(
            interpreter.to_string().contains("`#!` interpreter"),
            "{interpreter}"
        );
        let denied = exec("/srv/run", Errno::EACCES, true);
        assert!(
            denied
                .to_string()
                .starts_with("cannot start: `/srv/run`: permission denied"),
            "{denied}"
        );
        assert_eq!(denied.exit_code(), 126);
        assert_eq!(
            exec("x", Errno::EIO, true).to_string(),
            "cannot start: `x`: I/O error"
        );
        assert_eq!(
            SpawnError::Nothing("empty command").to_string(),
            "cannot start: empty command"
        );
    }

    #[test]
    fn programs_are_looked_up_as_exec_does() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("tool"), "").unwrap();
        let path = dir.path().to_str().unwrap();
        assert!(program_exists(
            "tool",
            None,
            Some(&format!("/nonexistent:{path}"))
        ));
        assert!(!program_exists("tool", None, Some("/nonexistent")));
        assert!(!program_exists("tool", None, None));
        assert!(program_exists("./tool", Some(dir.path()), None));
        assert!(program_exists(
            &dir.path().join("tool").display().to_string(),
            None,
            None
        ));
    }
}
