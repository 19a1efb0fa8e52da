//! A *shadow* of the original agent's cached venv: a venv of its own whose `bin/python3` is the
//! same interpreter and whose site-packages holds a symlink to every entry of the agent's, so a
//! test can add files (the image's site script, a `.pth`) without touching the shared,
//! read-only reference. Run its interpreter with `PYTHONDONTWRITEBYTECODE=1`: nothing is then
//! written through those symlinks.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A shadow venv (see the module doc).
#[derive(Debug, Clone)]
pub struct ShadowVenv {
    /// The venv (`bin/python3`, `pyvenv.cfg`).
    pub venv: PathBuf,
    /// Its site-packages.
    pub site: PathBuf,
}

impl ShadowVenv {
    /// Makes `<dir>/agent-venv`, a shadow of the venv of the interpreter `python`.
    pub fn of(python: &Path, dir: &Path) -> Self {
        let agent_venv = python
            .parent()
            .and_then(Path::parent)
            .unwrap_or_else(|| panic!("shadow venv: `{}` is not in a venv", python.display()));
        let out = Command::new(python)
            .args([
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(dir)
            .output()
            .unwrap_or_else(|e| panic!("shadow venv: cannot run `{}`: {e}", python.display()));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let agent_site = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let rel = agent_site
            .strip_prefix(agent_venv)
            .unwrap_or_else(|_| panic!("shadow venv: site-packages outside the venv"));
        let venv = dir.join("agent-venv");
        let site = venv.join(rel);
        let io = |what: &str, r: std::io::Result<()>| {
            r.unwrap_or_else(|e| panic!("shadow venv: {what}: {e}"));
        };
        io("bin", std::fs::create_dir_all(venv.join("bin")));
        io("site-packages", std::fs::create_dir_all(&site));
        io(
            "pyvenv.cfg",
            std::fs::copy(agent_venv.join("pyvenv.cfg"), venv.join("pyvenv.cfg")).map(drop),
        );
        let interpreter = std::fs::canonicalize(python)
            .unwrap_or_else(|e| panic!("shadow venv: `{}`: {e}", python.display()));
        io(
            "python3",
            std::os::unix::fs::symlink(&interpreter, venv.join("bin/python3")),
        );
        io(
            "python",
            std::os::unix::fs::symlink("python3", venv.join("bin/python")),
        );
        let entries = std::fs::read_dir(&agent_site)
            .unwrap_or_else(|e| panic!("shadow venv: `{}`: {e}", agent_site.display()));
        for entry in entries.flatten() {
            io(
                "an entry",
                std::os::unix::fs::symlink(entry.path(), site.join(entry.file_name())),
            );
        }
        Self { venv, site }
    }

    /// Runs `docker/agent-site.sh` on it, as the image build does; the `.pth` it wrote.
    pub fn apply_site_script(&self) -> PathBuf {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docker/agent-site.sh");
        let out = Command::new("sh")
            .arg(script)
            .arg(&self.venv)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap_or_else(|e| panic!("agent-site.sh: {e}"));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let written = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        assert_eq!(written.parent(), Some(self.site.as_path()));
        written
    }
}
