//! [`Settings`]: everything `hermes init` needs, resolved once at the edge from the command
//! line (tini-compatible flags) and the container environment.
//!
//! Words:
//! * **container environment** — the environment PID 1 was started with (Dockerfile `ENV` +
//!   `docker run -e`). It reaches every stage, service and the main program unchanged, except
//!   the variables a privilege drop sets (`HOME`, `USER`, `LOGNAME`, `SHELL`, XDG dirs) and
//!   `HERMES_HOME` when it was unset (then it is set to the default, so children agree with
//!   PID 1 on where the data lives).
//! * **tini flags** — `-s -g -v -w -p SIG -e CODE`: accepted so templates written for tini keep
//!   working. `-s` and `-g` are what `hermes init` always does; `-e CODE` maps that exit code
//!   of the main program to 0; `-p SIG` asks for `SIG` when our parent dies.

use std::ffi::OsString;
use std::path::PathBuf;

use hermes_privilege::{Env, SystemFiles};

use nix::sys::signal::Signal;

/// Default `HERMES_HOME` in the container.
pub const DEFAULT_HOME: &str = "/opt/data";
/// The tini-compatible flags, as parsed by the binary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// `-v`, repeatable: more boot detail.
    pub verbose: u8,
    /// `-e CODE`, repeatable: main-program exit codes reported as 0.
    pub success_codes: Vec<u8>,
    /// `-p SIG`: signal to receive when the parent dies (only meaningful when not PID 1).
    pub parent_death_signal: Option<Signal>,
}

/// Everything `hermes init` runs on.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The CMD (words after the flags and `--`).
    pub cmd: Vec<String>,
    /// Names of the `hermes` subcommands, from the binary's command tree (routing).
    pub subcommands: Vec<String>,
    /// The running `hermes` binary (what a `hermes` route and gateways execute).
    pub hermes_exe: PathBuf,
    /// `HERMES_HOME`: the default profile and data volume.
    pub home: PathBuf,
    /// Whether `HERMES_HOME` was unset (then children get it set to [`Settings::home`]).
    pub home_defaulted: bool,
    /// Account files (`/etc/passwd`, `/etc/group`).
    pub accounts: SystemFiles,
    /// The image marker file (see `hermes_privilege::IMAGE_MARKER`).
    pub image_marker: PathBuf,
    /// Sockets and device nodes whose groups the service user joins.
    pub device_paths: Vec<PathBuf>,
    /// The container environment, as the pure decisions read it.
    pub env: Env,
    /// `PATH` of the container environment (program lookup for routing).
    pub path: Option<OsString>,
    /// Working directory for the main program (Docker's `-w`).
    pub cwd: Option<PathBuf>,
    /// Flags.
    pub flags: Flags,
}

impl Settings {
    /// Settings for the real container: the process environment, `/etc` account files, the
    /// image marker and device paths at their standard places.
    pub fn from_process(
        cmd: Vec<String>,
        subcommands: Vec<String>,
        hermes_exe: PathBuf,
        flags: Flags,
    ) -> Self {
        let env = Env::from_process();
        let home_var = env
            .get("HERMES_HOME")
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        Settings {
            cmd,
            subcommands,
            hermes_exe,
            home_defaulted: home_var.is_none(),
            home: home_var.unwrap_or_else(|| PathBuf::from(DEFAULT_HOME)),
            accounts: SystemFiles::system(),
            image_marker: PathBuf::from(hermes_privilege::IMAGE_MARKER),
            device_paths: hermes_privilege::default_device_paths(std::path::Path::new(
                hermes_privilege::DRI_DIR,
            )),
            env,
            path: std::env::var_os("PATH"),
            cwd: std::env::current_dir().ok(),
            flags,
        }
    }

    /// The exit code `hermes init` reports for the main program's `code` (`-e` applied).
    pub fn exit_code(&self, code: i32) -> u8 {
        let code = u8::try_from(code).unwrap_or(255);
        if self.flags.success_codes.contains(&code) {
            0
        } else {
            code
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_codes_map_to_zero_and_others_pass_through() {
        let mut s = Settings::from_process(vec![], vec![], "/bin/hermes".into(), Flags::default());
        s.flags.success_codes = vec![143];
        assert_eq!(s.exit_code(143), 0);
        assert_eq!(s.exit_code(42), 42);
        assert_eq!(s.exit_code(0), 0);
        assert_eq!(s.exit_code(300), 255);
    }
}
