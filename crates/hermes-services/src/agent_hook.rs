//! The hook that lets the agent's gateway serve the socket the supervisor holds for it.
//!
//! The supervisor binds a gateway's API address once and passes it to every process it starts
//! (`LISTEN_FDS`, `LISTEN_PID`, `LISTEN_FDNAMES`, the socket named `api`). The agent engine's
//! process is the agent itself (`hermes gateway run` execs it: [`crate::agent::gateway_command`]),
//! and its API server binds its port on its own, which would fail with `EADDRINUSE` while the
//! supervisor holds it. So the supervisor passes the socket only to an agent whose venv has
//! this hook ([`is_installed`]): a Python module, [`MODULE`], and a one-line [`PTH`] file that
//! imports it at interpreter start when `LISTEN_FDS` is set (any other start pays one
//! environment lookup). In the agent's process it makes the inherited fds non-inheritable, has
//! the aiohttp site on the socket's port serve the socket instead of binding, and on SIGTERM
//! stops accepting and lets the API requests in flight finish (up to
//! `HERMES_GATEWAY_DRAIN_TIMEOUT` seconds, default 30) before the agent's own shutdown runs;
//! the module's docstring is the full account.
//!
//! The Python text lives once, in `src/agent_hook/`: this crate embeds it, and the full image's
//! build copies the same files (`docker/agent-site.sh`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::agent::Agent;

/// The module's file name in site-packages.
pub const MODULE_FILE: &str = "hermes_listen.py";

/// The module: what the agent's process does with an inherited socket.
pub const MODULE: &str = include_str!("agent_hook/hermes_listen.py");

/// The `.pth` file's name: it sorts first, so the inherited fds are made non-inheritable
/// before any other `.pth` line could start a process.
pub const PTH_FILE: &str = "00-hermes-listen.pth";

/// The `.pth` line that imports [`MODULE`] when `LISTEN_FDS` is set.
pub const PTH: &str = include_str!("agent_hook/00-hermes-listen.pth");

/// Both files are read by whoever runs the agent, written only by the venv's owner.
const MODE: u32 = 0o644;

/// Why the hook could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// The directory given is not one.
    #[error("`{}` is not a directory, so the socket hook cannot be installed in it", dir.display())]
    NotADirectory {
        /// The site-packages directory given.
        dir: PathBuf,
    },
    /// A file of the hook could not be written (or given its mode).
    #[error("cannot install the socket hook in `{}`", dir.display())]
    Write {
        /// The site-packages directory.
        dir: PathBuf,
        /// What failed (boxed: the error is large and this one is rare).
        #[source]
        source: Box<hermes_home::Error>,
    },
    /// A file of the hook could not be given mode 0644.
    #[error("cannot make `{}` readable by everyone", path.display())]
    Mode {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

impl HookError {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            HookError::NotADirectory { .. } => {
                "give the agent venv's site-packages (`<venv>/lib/python3.X/site-packages`)".into()
            }
            HookError::Write { .. } | HookError::Mode { .. } => {
                "install it as the owner of the agent's venv (the full image does it at build time)"
                    .into()
            }
        })
    }
}

/// The site-packages directory of `agent`'s venv: the one holding its
/// `hermes_agent-<version>.dist-info` (as [`Agent::at`] reads the version), `None` when the
/// venv has none.
pub fn site_packages(agent: &Agent) -> Option<PathBuf> {
    let venv = agent.cli.parent()?.parent()?;
    let (dist_info, _) = crate::agent::dist_info(venv)?;
    dist_info.parent().map(Path::to_path_buf)
}

/// Whether `agent`'s venv has this hook, exactly as this binary would install it: only then may
/// the supervisor pass it a socket (without it the agent binds the port itself, and fails).
pub fn is_installed(agent: &Agent) -> bool {
    site_packages(agent).is_some_and(|dir| installed_in(&dir))
}

/// Whether `dir` holds both files with this binary's text.
fn installed_in(dir: &Path) -> bool {
    [(MODULE_FILE, MODULE), (PTH_FILE, PTH)]
        .iter()
        .all(|(name, text)| std::fs::read(dir.join(name)).is_ok_and(|b| b == text.as_bytes()))
}

/// Installs the hook into `site_packages` (the module first, then the `.pth` that imports it),
/// each file written atomically with mode 0644. Files that already hold this text are left as
/// they are, so installing again changes nothing (and keeps a compiled module valid).
///
/// # Errors
/// [`HookError`] when `site_packages` is no directory or a file cannot be written.
pub fn install(site_packages: &Path) -> Result<(), HookError> {
    if !site_packages.is_dir() {
        return Err(HookError::NotADirectory {
            dir: site_packages.to_path_buf(),
        });
    }
    let write = |source| HookError::Write {
        dir: site_packages.to_path_buf(),
        source: Box::new(source),
    };
    for (name, text) in [(MODULE_FILE, MODULE), (PTH_FILE, PTH)] {
        let path = site_packages.join(name);
        if !same_text(&path, text) {
            hermes_home::atomic::write_atomic(&path, text.as_bytes(), MODE).map_err(write)?;
        }
        // write_atomic keeps the mode of a file it replaces; these must be readable by all.
        let mode_error = |source| HookError::Mode {
            path: path.clone(),
            source,
        };
        let mode = std::fs::metadata(&path)
            .map_err(mode_error)?
            .permissions()
            .mode()
            & 0o7777;
        if mode != MODE {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(MODE))
                .map_err(mode_error)?;
        }
    }
    Ok(())
}

fn same_text(path: &Path, text: &str) -> bool {
    std::fs::read(path).is_ok_and(|b| b == text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A venv with the agent's dist-info, as [`Agent::at`] finds one; its site-packages.
    fn fake_agent(dir: &Path) -> (Agent, PathBuf) {
        let site = dir.join("lib/python3.13/site-packages");
        std::fs::create_dir_all(site.join("hermes_agent-0.20.1.dist-info")).unwrap();
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/hermes"), "#!/bin/sh\n").unwrap();
        (Agent::at(&dir.join("bin/hermes")).unwrap(), site)
    }

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn the_pth_is_one_import_line_site_runs() {
        // site.py executes a .pth line only when it starts with `import` and a blank.
        assert_eq!(PTH.lines().count(), 1, "{PTH}");
        assert!(PTH.starts_with("import "), "{PTH}");
        assert!(PTH.contains("LISTEN_FDS") && PTH.contains("hermes_listen"));
        // The .pth imports the module by the name it is installed under.
        assert!(PTH.contains(&format!("\"{}\"", MODULE_FILE.trim_end_matches(".py"))));
    }

    #[test]
    fn installed_means_both_files_with_this_text() {
        let dir = tempfile::tempdir().unwrap();
        let (agent, site) = fake_agent(dir.path());
        assert_eq!(site_packages(&agent), Some(site.clone()));
        assert!(!is_installed(&agent));

        install(&site).unwrap();
        assert!(is_installed(&agent));
        assert_eq!(
            std::fs::read_to_string(site.join(MODULE_FILE)).unwrap(),
            MODULE
        );
        assert_eq!(std::fs::read_to_string(site.join(PTH_FILE)).unwrap(), PTH);
        assert_eq!(mode(&site.join(MODULE_FILE)), 0o644);
        assert_eq!(mode(&site.join(PTH_FILE)), 0o644);

        // A hook of another text (an older build's) is not this one: no socket for it.
        std::fs::write(site.join(MODULE_FILE), "# older hook\n").unwrap();
        assert!(!is_installed(&agent));
        std::fs::remove_file(site.join(MODULE_FILE)).unwrap();
        assert!(!is_installed(&agent), "the .pth alone");
        install(&site).unwrap();
        std::fs::remove_file(site.join(PTH_FILE)).unwrap();
        assert!(!is_installed(&agent), "the module alone");
    }

    #[test]
    fn installing_again_changes_nothing_but_a_wrong_mode() {
        let dir = tempfile::tempdir().unwrap();
        let (_, site) = fake_agent(dir.path());
        install(&site).unwrap();
        let module = site.join(MODULE_FILE);
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap());
        let before = inode(&module);
        install(&site).unwrap();
        assert_eq!(inode(&module), before, "the same file, not rewritten");

        std::fs::set_permissions(&module, std::fs::Permissions::from_mode(0o600)).unwrap();
        install(&site).unwrap();
        assert_eq!(
            mode(&module),
            0o644,
            "readable by the user running the agent"
        );
        let names: Vec<_> = std::fs::read_dir(&site)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(names.is_empty(), "no temporary file left: {names:?}");
    }

    #[test]
    fn no_site_packages_is_an_error_with_a_hint_and_no_agent_layout_is_not_installed() {
        let dir = tempfile::tempdir().unwrap();
        let err = install(&dir.path().join("missing")).unwrap_err();
        assert!(matches!(err, HookError::NotADirectory { .. }), "{err}");
        assert!(err.hint().is_some());

        // A console script without the agent's dist-info: nowhere to look, so no hook.
        std::fs::create_dir_all(dir.path().join("venv/bin")).unwrap();
        std::fs::write(dir.path().join("venv/bin/hermes"), "#!/bin/sh\n").unwrap();
        let agent = Agent::at(&dir.path().join("venv/bin/hermes")).unwrap();
        assert_eq!(site_packages(&agent), None);
        assert!(!is_installed(&agent));
    }
}
