//! The dashboard's sign-in token under a supervisor: made once by the supervisor (PID 1 or
//! `hermes up`), given to the `dashboard` service in its environment and kept in the runtime
//! directory, where only the supervisor's user can read it (`hermes dashboard link`).
//!
//! Why the supervisor holds it and not the dashboard: a token the dashboard made itself had to
//! be printed to be usable, and its output is a service log — on the volume, on the Logs page
//! and in every backup. And a token made per dashboard start signed everybody out at each
//! restart; this one lives as long as the supervisor.
//!
//! A token the operator fixed (`HERMES_DASHBOARD_SESSION_TOKEN` in the supervisor's
//! environment) is theirs: nothing is made, given or kept.

use std::io;
use std::path::Path;

use hermes_supervisor::ServiceSpec;
use serde::{Deserialize, Serialize};

/// The dashboard's variable for a fixed session token (the original's name).
pub const TOKEN_VAR: &str = "HERMES_DASHBOARD_SESSION_TOKEN";
/// The token's file in the runtime directory.
pub const TOKEN_FILE: &str = "dashboard-sign-in.json";

/// A new token: 32 random bytes, hex (the dashboard's own length).
///
/// # Errors
/// `/dev/urandom` cannot be read.
pub fn new_token() -> io::Result<String> {
    hermes_home::random::random_hex(32)
}

/// For a supervisor about to start `specs`: unless the operator fixed a token (`var`), a new
/// one given to our dashboard service when it is switched on (`<exe> dashboard`, not one
/// declared under the same name) and returned, to be [kept](keep) once the supervisor holds
/// its lock. `None` when there is nothing to keep.
///
/// # Errors
/// `/dev/urandom` cannot be read.
pub fn prepare(
    specs: &mut [ServiceSpec],
    exe: &Path,
    var: impl Fn(&str) -> Option<String>,
) -> io::Result<Option<String>> {
    if var(TOKEN_VAR).is_some_and(|v| !v.is_empty()) {
        return Ok(None);
    }
    let exe = exe.to_string_lossy();
    let Some(ours) = specs.iter_mut().find(|s| {
        s.enabled
            && s.name == crate::dashboard::DASHBOARD_SERVICE
            && s.argv.first().map(String::as_str) == Some(&*exe)
            && s.argv.get(1).map(String::as_str) == Some("dashboard")
    }) else {
        return Ok(None);
    };
    let token = new_token()?;
    ours.env.insert(TOKEN_VAR.into(), token.clone());
    Ok(Some(token))
}

/// The dashboard's variables that decide its address: the link must use the supervisor's
/// values, not those of the shell that asks for it.
pub const ADDRESS_VARS: [&str; 3] = [
    "HERMES_DASHBOARD_HOST",
    "HERMES_DASHBOARD_PORT",
    "HERMES_DASHBOARD_BASE_PATH",
];

/// What a supervisor keeps for `hermes dashboard link`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kept {
    /// The token given to the dashboard.
    pub token: String,
    /// The supervisor's [`ADDRESS_VARS`] that are set.
    pub address_env: Vec<(String, String)>,
}

impl Kept {
    /// `token`, with the address variables `var` (the supervisor's environment) sets.
    pub fn new(token: &str, var: impl Fn(&str) -> Option<String>) -> Self {
        let address_env = ADDRESS_VARS
            .iter()
            .filter_map(|k| Some((k.to_string(), var(k)?)))
            .collect();
        Self {
            token: token.to_string(),
            address_env,
        }
    }

    /// The variables the dashboard was given, as `hermes dashboard link` resolves its
    /// settings with them: the address and the token.
    pub fn environment(&self) -> Vec<(String, String)> {
        let mut env = self.address_env.clone();
        env.push((TOKEN_VAR.to_string(), self.token.clone()));
        env
    }
}

/// Keeps `kept` in `runtime_dir` for `hermes dashboard link`: owner-only (`0600`), replaced
/// atomically. Called once the supervisor holds its lock, so a second supervisor that is
/// refused never replaces the running one's token.
///
/// # Errors
/// The write failing.
pub fn keep(runtime_dir: &Path, kept: &Kept) -> Result<(), hermes_home::Error> {
    let text = serde_json::to_vec(kept).unwrap_or_default();
    hermes_home::atomic::write_atomic(&runtime_dir.join(TOKEN_FILE), &text, 0o600)
}

/// Forgets the kept token when the supervisor ends: the link stops working with it, and on a
/// machine the runtime directory is on the volume (`$HERMES_HOME/run`), where the original's
/// `hermes backup` would pick it up.
pub fn forget(runtime_dir: &Path) {
    let _ = std::fs::remove_file(runtime_dir.join(TOKEN_FILE));
}

/// What is kept in `runtime_dir`: `Ok(None)` when nothing is (no supervisor, or one that runs
/// the dashboard with the operator's token).
///
/// # Errors
/// The file exists but cannot be read (typically permission denied: it is the supervisor
/// user's), or is not what [`keep`] writes.
pub fn kept(runtime_dir: &Path) -> io::Result<Option<Kept>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Never through a link: a client finds the runtime directory among candidates, one of
    // which (`$HERMES_HOME/run`) the service user can write.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(runtime_dir.join(TOKEN_FILE));
    let mut file = match opened {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a regular file",
        ));
    }
    // A few hundred bytes when it is ours.
    let mut bytes = Vec::new();
    file.by_ref().take(64 * 1024).read_to_end(&mut bytes)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_kept_token_is_read_back_and_only_its_owner_can_read_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(kept(dir.path()).unwrap(), None, "nothing kept yet");
        let token = new_token().unwrap();
        assert_eq!(token.len(), 64);
        let supervisor = |k: &str| (k == "HERMES_DASHBOARD_PORT").then(|| "8080".to_string());
        keep(dir.path(), &Kept::new(&token, supervisor)).unwrap();
        let back = kept(dir.path()).unwrap().unwrap();
        assert_eq!(
            back.environment(),
            [
                ("HERMES_DASHBOARD_PORT".to_string(), "8080".to_string()),
                (TOKEN_VAR.to_string(), token.clone())
            ]
        );
        let mode = std::fs::metadata(dir.path().join(TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_ne!(new_token().unwrap(), token, "each supervisor makes its own");
        forget(dir.path());
        assert_eq!(kept(dir.path()).unwrap(), None, "gone with the supervisor");
        // A link planted under its name is not followed.
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join(TOKEN_FILE)).unwrap();
        assert!(kept(dir.path()).is_err());
    }

    #[test]
    fn our_dashboard_gets_a_token_unless_the_operator_fixed_one() {
        let exe = Path::new("/usr/bin/hermes");
        let ours = || crate::dashboard::dashboard_spec(exe, true, None);
        let mut specs = vec![ServiceSpec::new("web", vec!["sleep".into()]), ours()];
        let token = prepare(&mut specs, exe, |_| None).unwrap().unwrap();
        assert_eq!(specs[1].env.get(TOKEN_VAR), Some(&token));
        assert!(!specs[0].env.contains_key(TOKEN_VAR), "only the dashboard");

        let mut fixed = vec![ours()];
        let operator = |k: &str| (k == TOKEN_VAR).then(|| "theirs-0123456789".to_string());
        assert_eq!(prepare(&mut fixed, exe, operator).unwrap(), None);
        assert!(
            !fixed[0].env.contains_key(TOKEN_VAR),
            "theirs is used as it is"
        );

        // An operator's own service named `dashboard` (the agent's) is not ours to sign into.
        let mut declared = vec![ServiceSpec::new(
            "dashboard",
            vec!["hermes-agent".into(), "dashboard".into()],
        )];
        assert_eq!(prepare(&mut declared, exe, |_| None).unwrap(), None);
        assert!(!declared[0].env.contains_key(TOKEN_VAR));
    }
}
