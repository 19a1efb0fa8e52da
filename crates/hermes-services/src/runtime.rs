//! Where the supervisor listens, and reaching it: the one rule for server and clients.
//!
//! Words:
//! * **runtime directory** — the directory that holds the supervisor's lock
//!   (`supervisor.lock`), its control socket (`supervisor.sock`) and readiness sockets.
//! * **candidates** — the runtime directories the supervisor of a home may use, in order
//!   ([`hermes_home::layout::runtime_dirs`]): `HERMES_RUNTIME_DIR` alone when set; inside the
//!   image (its marker file exists) `/run/hermes`, `/tmp/hermes`, `/dev/shm/hermes`,
//!   `$HERMES_HOME/run`;
//!   otherwise `$HERMES_HOME/run`.
//!
//! The server (`hermes init`, `hermes up`) takes the first candidate it can make private
//! ([`choose_runtime_dir`]); every client (the CLI, the dashboard, hooks) talks to the first
//! that holds a control socket ([`find_runtime_dir`], [`connect`]). So a `--read-only` or
//! `--user` container and `docker exec c hermes service status` agree without extra
//! environment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hermes_supervisor::Client;
use hermes_supervisor::client::SOCKET_NAME;

use crate::Error;

/// The candidates of the supervisor of `root`, in order, with "inside the image" read from the
/// image's marker file at its standard place (`hermes_privilege::IMAGE_MARKER`).
pub fn runtime_dirs(root: &Path, var: impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    runtime_dirs_with_marker(root, var, Path::new(hermes_privilege::IMAGE_MARKER))
}

/// [`runtime_dirs`] with the image marker at `marker` (PID 1 takes it from its settings).
pub fn runtime_dirs_with_marker(
    root: &Path,
    var: impl Fn(&str) -> Option<String>,
    marker: &Path,
) -> Vec<PathBuf> {
    let in_image = hermes_privilege::image_marker_present(marker);
    hermes_home::layout::runtime_dirs(root, var, in_image)
}

/// The client side of the rule: the first candidate that holds a control socket (so `docker
/// exec c hermes service status` finds PID 1's wherever it could bind), else the first.
pub fn find_runtime_dir(root: &Path, var: impl Fn(&str) -> Option<String>) -> PathBuf {
    first_with_socket(&runtime_dirs(root, var))
        .unwrap_or_else(|| hermes_home::layout::run_dir(root))
}

/// The first of `candidates` that holds a control socket, else the first of them.
fn first_with_socket(candidates: &[PathBuf]) -> Option<PathBuf> {
    candidates
        .iter()
        .find(|dir| std::fs::symlink_metadata(dir.join(SOCKET_NAME)).is_ok())
        .or(candidates.first())
        .cloned()
}

/// The server side of the rule: the first candidate this process can make private (see
/// [`hermes_privilege::SafeDir::create_private`]).
///
/// # Errors
/// [`Error::NoRuntimeDir`] with every candidate and why it was refused.
pub fn choose_runtime_dir(candidates: &[PathBuf]) -> Result<PathBuf, Error> {
    let mut tried = Vec::new();
    for dir in candidates {
        match hermes_privilege::SafeDir::create_private(dir, 0o755) {
            Ok(_) => return Ok(dir.clone()),
            Err(e) => tried.push((dir.clone(), hermes_errors::describe_io(&e))),
        }
    }
    Err(Error::NoRuntimeDir { tried })
}

/// Connects to the supervisor of `root` (found by [`find_runtime_dir`]); every call on the
/// client is bounded by `timeout`.
///
/// # Errors
/// [`Error::NotRunning`] when no supervisor listens there; [`Error::Supervisor`] when one does
/// but cannot be used (permission denied on the socket, an I/O error).
pub fn connect(
    root: &Path,
    var: impl Fn(&str) -> Option<String>,
    timeout: Duration,
) -> Result<Client, Error> {
    let dir = find_runtime_dir(root, var);
    Client::connect(&dir, timeout).map_err(|e| match e {
        hermes_supervisor::Error::NotRunning { socket } => Error::NotRunning {
            root: root.to_path_buf(),
            socket,
        },
        other => Error::Supervisor(other),
    })
}

/// The pid of the supervisor of `root`, as its lock file records it (`None` when there is
/// none or it cannot be read). Used to tell whether we are the supervisor's own child — PID
/// 1's main program — whose console already shows every service's output.
pub fn supervisor_pid(root: &Path, var: impl Fn(&str) -> Option<String>) -> Option<i32> {
    let lock = find_runtime_dir(root, var).join(hermes_supervisor::supervisor::LOCK_NAME);
    std::fs::read_to_string(lock).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supervisor_takes_the_first_private_candidate_and_says_why_not_the_others() {
        let d = tempfile::tempdir().unwrap();
        let shared = d.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        let good = d.path().join("private/run");
        let chosen = choose_runtime_dir(&[shared.join("run"), good.clone()]).unwrap();
        assert_eq!(chosen, good);
        let err = choose_runtime_dir(&[shared.join("run")]).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("shared/run"), "{text}");
        assert!(err.hint().unwrap().contains("--tmpfs"), "{:?}", err.hint());
    }

    #[test]
    fn clients_take_the_candidate_that_holds_a_socket() {
        let d = tempfile::tempdir().unwrap();
        let set =
            |k: &str| (k == hermes_home::layout::RUNTIME_DIR_VAR).then(|| "/run/x".to_string());
        assert_eq!(find_runtime_dir(d.path(), set), PathBuf::from("/run/x"));
        if !hermes_privilege::image_marker_present(Path::new(hermes_privilege::IMAGE_MARKER)) {
            assert_eq!(find_runtime_dir(d.path(), |_| None), d.path().join("run"));
        }
        let (first, second) = (d.path().join("a"), d.path().join("b"));
        let both = [first.clone(), second.clone()];
        assert_eq!(first_with_socket(&both), Some(first));
        std::fs::create_dir(&second).unwrap();
        std::fs::write(second.join(SOCKET_NAME), "").unwrap();
        assert_eq!(first_with_socket(&both), Some(second));
        assert_eq!(first_with_socket(&[]), None);
    }

    #[test]
    fn no_supervisor_is_not_running_for_the_home() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("rt");
        let var = |k: &str| {
            (k == hermes_home::layout::RUNTIME_DIR_VAR).then(|| dir.to_string_lossy().into())
        };
        let err = connect(d.path(), var, Duration::from_secs(1)).unwrap_err();
        assert!(
            matches!(&err, Error::NotRunning { root, socket }
                if root == d.path() && *socket == dir.join(SOCKET_NAME)),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("no supervisor is running for `{}`", d.path().display())
        );
    }
}
