//! `TestContext`: a temporary `HOME` and `HERMES_HOME`, a ready `hermes` command, and
//! snapshot filters that replace run-specific values (`[TEMP]`, `[SHA]`, `[VERSION]`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct TestContext {
    pub dir: tempfile::TempDir,
}

impl TestContext {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        TestContext { dir }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("user")
    }

    /// `HERMES_HOME` (the default profile).
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// A `hermes` command with a clean, controlled environment.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
        cmd.args(args)
            .env_clear()
            .env("HOME", self.home())
            .env("HERMES_HOME", self.root())
            .env("PATH", "/usr/bin:/bin")
            .env("NO_COLOR", "1")
            .current_dir(self.dir.path());
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run hermes")
    }

    /// Runs and asserts success, returning stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "hermes {args:?} failed:\n{}",
            render(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Exit code, stdout and stderr with run-specific values filtered, for snapshots.
    pub fn snapshot(&self, out: &Output) -> String {
        let text = render(out);
        let temp = self.dir.path().to_string_lossy().to_string();
        let text = text.replace(&temp, "[TEMP]");
        regex_lite(&text)
    }
}

pub fn render(out: &Output) -> String {
    format!(
        "exit_code: {}\n----- stdout -----\n{}----- stderr -----\n{}",
        out.status.code().map_or("signal".into(), |c| c.to_string()),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Replaces the build commit and version, and timestamps in file names.
fn regex_lite(text: &str) -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let mut line = line.replace(&format!("{version} ["), "[VERSION] [");
        // `[0123abcd]` → `[SHA]`
        if let Some(start) = line.find("[VERSION] [") {
            let rest = &line[start + 11..];
            if let Some(end) = rest.find(']') {
                let sha = &rest[..end];
                if sha.len() == 8 && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
                    line = format!("{}[VERSION] [SHA]{}", &line[..start], &rest[end + 1..]);
                }
            }
        }
        out.push_str(&line);
    }
    out
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Makes `path` and its parents up to the temp dir traversable by other users.
pub fn open_up(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for dir in path.ancestors().take(3) {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
    }
}
