//! Test harness: runs the `supervise` example as a separate process (so its `waitpid(-1)`
//! and signal mask never touch the test runner), with a fresh temp directory per test.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hermes_supervisor::{Client, Error, ServiceStatus, StateName};

/// Generous: the CI machine has two loaded cores.
pub const WAIT: Duration = Duration::from_secs(20);

/// Path of the `supervise` example (built by `cargo test` alongside the tests).
pub fn supervise_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("examples").join("supervise");
    assert!(
        bin.exists(),
        "`{}` is missing: run `cargo test -p hermes-supervisor` (it builds examples)",
        bin.display()
    );
    bin
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub runtime: PathBuf,
    pub logs: PathBuf,
    pub child: Option<Child>,
}

impl Harness {
    /// Starts a supervisor on `config` (YAML) with extra flags; waits for its socket.
    pub fn start(config: &str, flags: &[&str]) -> Harness {
        let dir = tempfile::tempdir().expect("tempdir");
        let runtime = dir.path().join("run");
        let logs = dir.path().join("logs");
        let cfg = dir.path().join("config.yaml");
        fs::write(
            &cfg,
            config
                .replace("$DIR", &dir.path().display().to_string())
                .replace("$SUPERVISE", &supervise_bin().display().to_string()),
        )
        .unwrap();
        let out = fs::File::create(dir.path().join("stdout")).unwrap();
        let err = fs::File::create(dir.path().join("stderr")).unwrap();
        let child = Command::new(supervise_bin())
            .arg("run")
            .arg(&runtime)
            .arg(&logs)
            .arg(&cfg)
            .args(flags)
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .expect("spawn supervise");
        let h = Harness {
            dir,
            runtime,
            logs,
            child: Some(child),
        };
        h.wait_for("control socket", || {
            Client::connect(&h.runtime, Duration::from_secs(2)).is_ok()
        });
        h
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.runtime, Duration::from_secs(10)).expect("connect")
    }

    pub fn status(&self, name: &str) -> Result<ServiceStatus, Error> {
        let mut rows = self.client().status(Some(name))?;
        Ok(rows.remove(0))
    }

    pub fn state(&self, name: &str) -> StateName {
        self.status(name).expect("status").state
    }

    /// Polls `cond` until true or [`WAIT`]; panics with `what` and the supervisor output.
    pub fn wait_for(&self, what: &str, mut cond: impl FnMut() -> bool) {
        let start = Instant::now();
        while start.elapsed() < WAIT {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "timed out waiting for {what}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.stdout(),
            self.read("stderr")
        );
    }

    pub fn wait_state(&self, name: &str, want: StateName) -> ServiceStatus {
        let mut last = None;
        self.wait_for(&format!("`{name}` to be {want}"), || {
            let s = self.status(name).ok();
            let hit = s.as_ref().is_some_and(|s| s.state == want);
            last = s;
            hit
        });
        last.expect("status")
    }

    pub fn read(&self, name: &str) -> String {
        fs::read_to_string(self.path(name)).unwrap_or_default()
    }

    pub fn stdout(&self) -> String {
        self.read("stdout")
    }

    pub fn log(&self, service: &str) -> String {
        fs::read_to_string(self.logs.join(service).join("current")).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the supervisor's exit code.
    pub fn terminate(&mut self) -> i32 {
        let mut child = self.child.take().expect("running");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let start = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st.code().unwrap_or(-1);
            }
            assert!(start.elapsed() < WAIT, "supervisor did not exit on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(c.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(15) {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Nanosecond timestamps, one per line, as appended by `date +%s%N`.
pub fn stamps(text: &str) -> Vec<Duration> {
    text.lines()
        .filter_map(|l| l.trim().parse::<u64>().ok())
        .map(Duration::from_nanos)
        .collect()
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}
