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
            // No hermes-agent unless a test installs one: an agent on the host (the full
            // image's /opt/hermes-agent) must not change what our own commands print.
            .env("HERMES_AGENT_CLI", "")
            // No dashboard under `hermes up` unless a test asks: parallel supervisors would
            // all bind its default port.
            .env("HERMES_DASHBOARD", "0")
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

/// Makes `path` and its parents up to the temp dir traversable by other users.
pub fn open_up(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for dir in path.ancestors().take(3) {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
    }
}

/// A free loopback port (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A background `hermes` process, stopped on drop: SIGTERM first, so a `hermes up` stops its
/// gateways instead of orphaning them, then SIGKILL if it does not exit.
pub struct Running(pub std::process::Child);

impl Running {
    /// SIGTERM, then wait up to 40 s; the exit code, `None` if it did not exit or was killed.
    pub fn stop(&mut self) -> Option<i32> {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(status)) = self.0.try_wait() {
                return status.code();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait()
            && self.stop().is_none()
        {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A supervisor `hermes up -d` started, in a session of its own: killed when dropped unless
/// [`Detached::stopped`] (a failed assertion must not leave it running).
pub struct Detached(pub Option<i32>);

impl Detached {
    /// The supervisor `hermes up -d` started, from what it said (`… (pid N)`).
    pub fn from_said(said: &str) -> Detached {
        let pid = said
            .split("(pid ")
            .nth(1)
            .and_then(|rest| rest.split(')').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no pid in: {said}"));
        Detached(Some(pid))
    }

    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.0.expect("still running")
    }

    /// It has been stopped (`hermes down`): nothing to kill.
    pub fn stopped(&mut self) {
        self.0 = None;
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl TestContext {
    /// Starts `hermes up` (stderr piped, for tests that read it) and waits for its socket.
    pub fn start_up(&self) -> Running {
        self.start_up_with(std::iter::empty::<(&str, &str)>())
    }

    /// [`start_up`](Self::start_up) with `env` added to its environment.
    pub fn start_up_with<K, V>(&self, env: impl IntoIterator<Item = (K, V)>) -> Running
    where
        K: AsRef<std::ffi::OsStr>,
        V: AsRef<std::ffi::OsStr>,
    {
        let child = self
            .cmd(&["up"])
            .envs(env)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let up = Running(child);
        hermes_test_support::poll::until_true(
            "the supervisor",
            std::time::Duration::from_secs(30),
            || self.run(&["service", "list"]).status.success(),
        );
        up
    }

    /// `hermes up -d` with `env` added, which must succeed: the supervisor and what it said.
    pub fn up_detached(&self, env: &[(&str, &str)]) -> (Detached, String) {
        let mut cmd = self.cmd(&["up", "-d"]);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{said}");
        (Detached::from_said(&said), said)
    }

    /// One service's status row from the supervisor (`Null` when it has none).
    pub fn service(&self, name: &str) -> serde_json::Value {
        let out = self.run(&["service", "status", name, "--json"]);
        serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .map(|rows| rows[0].clone())
            .unwrap_or_default()
    }

    /// Gives the default profile and `profiles` each a free `API_SERVER_PORT` (and the test
    /// key, which switches their API server on).
    pub fn free_ports(&self, profiles: &[&str]) {
        std::fs::write(self.root().join(".env"), api_env(free_port())).unwrap();
        for p in profiles {
            let env = self.root().join("profiles").join(p).join(".env");
            std::fs::write(env, api_env(free_port())).unwrap();
        }
    }
}

/// The client key the tests' gateways use: strong enough for the API server's rule (16+
/// characters, not a placeholder).
pub const TEST_API_KEY: &str = "cli-test-api-server-key-0123456789";

/// A `.env` that switches a profile's API server on at `port` with [`TEST_API_KEY`].
pub fn api_env(port: u16) -> String {
    format!("API_SERVER_PORT={port}\nAPI_SERVER_KEY={TEST_API_KEY}\n")
}

impl Running {
    /// What the process wrote to its piped stderr, read to the end (call after [`stop`]).
    ///
    /// [`stop`]: Running::stop
    pub fn stderr(&mut self) -> String {
        use std::io::Read;
        let mut text = String::new();
        if let Some(mut pipe) = self.0.stderr.take() {
            pipe.read_to_string(&mut text).unwrap();
        }
        text
    }
}

/// A Python venv for `hermes deps install` and a loopback index serving one wheel, so the
/// installer tests run offline and never touch the user's pip configuration.
pub struct PyEnv {
    pub venv: PathBuf,
    pub index: hermes_test_support::wheel::WheelIndex,
}

impl PyEnv {
    /// The venv in `t`'s directory and an index serving `package` 1.0 (a module of that
    /// name), or `None` (said) where there is no `python3` on the tests' `PATH`
    /// (`/usr/bin:/bin`), which the venv needs.
    pub fn new(t: &TestContext, package: &str) -> Option<PyEnv> {
        let Some(python) = ["/usr/bin/python3", "/bin/python3"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
        else {
            hermes_test_support::skip(
                "no python3 in /usr/bin or /bin (the PATH `hermes` runs with)",
            );
            return None;
        };
        let venv = t.dir.path().join("venv");
        let made = Command::new(python)
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(made.success());
        let wheels = t.dir.path().join("wheels");
        hermes_test_support::wheel::write_wheel(&wheels, package, "1.0", &[]);
        let index = hermes_test_support::wheel::WheelIndex::serve(&wheels);
        Some(PyEnv { venv, index })
    }

    /// The venv's Python importing `module` (succeeds once the wheel is installed).
    pub fn import(&self, module: &str) -> Output {
        Command::new(self.venv.join("bin/python"))
            .args(["-c", &format!("import {module}")])
            .output()
            .unwrap()
    }

    /// The venv's Python importing `module` with `target` at the end of `sys.path`.
    pub fn import_from(&self, target: &Path, module: &str) -> Output {
        Command::new(self.venv.join("bin/python"))
            .args([
                "-c",
                &format!(
                    "import sys; sys.path.append({:?}); import {module}",
                    target.display().to_string()
                ),
            ])
            .output()
            .unwrap()
    }

    /// `hermes ARGS` installing into the venv from the index alone.
    pub fn hermes(&self, t: &TestContext, args: &[&str]) -> Command {
        let url = self.index.url();
        let mut cmd = t.cmd(args);
        cmd.env("HERMES_VENV", &self.venv)
            .env("PIP_INDEX_URL", &url)
            .env("UV_INDEX_URL", &url)
            .env("PIP_CONFIG_FILE", "/dev/null")
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1");
        cmd
    }
}
