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
    /// The read end of the supervisor's stdout when it was started with
    /// [`Harness::start_unread`]: held open, never read unless a test decides to.
    pub stdout_pipe: Option<fs::File>,
    config: PathBuf,
    flags: Vec<String>,
    /// `cgroup.procs` files the supervisor joins before `exec`, with `HERMES_CGROUPS=on`
    /// ([`Harness::start_in_cgroups`]).
    cgroups: Vec<PathBuf>,
}

impl Harness {
    /// Starts a supervisor on `config` (YAML) with extra flags; waits for its socket. Its
    /// stdout goes to the file `stdout` in the test directory.
    pub fn start(config: &str, flags: &[&str]) -> Harness {
        Self::start_with(config, flags, false, Vec::new())
    }

    /// Like [`Harness::start`], with the supervisor in the cgroups whose `cgroup.procs` are
    /// given (joined before `exec`) and told they are delegated to it (`HERMES_CGROUPS=on`).
    pub fn start_in_cgroups(config: &str, procs: Vec<PathBuf>) -> Harness {
        Self::start_with(config, &[], false, procs)
    }

    /// Like [`Harness::start`], but the supervisor's stdout is a pipe nobody reads (a paused
    /// `hermes up | less`, a stalled log driver): [`Harness::stdout_pipe`] holds its read end.
    pub fn start_unread(config: &str, flags: &[&str]) -> Harness {
        Self::start_with(config, flags, true, Vec::new())
    }

    fn start_with(config: &str, flags: &[&str], unread: bool, cgroups: Vec<PathBuf>) -> Harness {
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
        let mut h = Harness {
            dir,
            runtime,
            logs,
            child: None,
            stdout_pipe: None,
            config: cfg,
            flags: flags.iter().map(|f| f.to_string()).collect(),
            cgroups,
        };
        h.spawn_supervisor(unread);
        h
    }

    /// Starts a new supervisor on the same directory, config and flags (the previous one must
    /// be gone: killed or terminated). Its output is appended to the same `stdout` file.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the previous supervisor still runs");
        self.spawn_supervisor(false);
    }

    fn spawn_supervisor(&mut self, unread: bool) {
        let append = |name: &str| {
            fs::File::options()
                .create(true)
                .append(true)
                .open(self.dir.path().join(name))
                .unwrap()
        };
        let stdout = if unread {
            // Close-on-exec: other tests spawn children concurrently, which must not inherit it.
            let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
            self.stdout_pipe = Some(fs::File::from(read));
            Stdio::from(write)
        } else {
            Stdio::from(append("stdout"))
        };
        let mut cmd = Command::new(supervise_bin());
        cmd.arg("run")
            .arg(&self.runtime)
            .arg(&self.logs)
            .arg(&self.config)
            .args(&self.flags)
            .stdout(stdout)
            .stderr(Stdio::from(append("stderr")));
        let joins: Vec<fs::File> = self
            .cgroups
            .iter()
            .map(|p| {
                fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .expect("cgroup.procs")
            })
            .collect();
        if !joins.is_empty() {
            cmd.env("HERMES_CGROUPS", "on");
            let fds: Vec<i32> = joins.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
            #[allow(unsafe_code)]
            // SAFETY: between fork and exec: write(2) on descriptors opened before the fork.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                    for &fd in &fds {
                        if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().expect("spawn supervise");
        drop(joins);
        self.child = Some(child);
        self.wait_for("control socket", || {
            Client::connect(&self.runtime, Duration::from_secs(2)).is_ok()
        });
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

    /// Waits until `service` (one that keeps crashing) has been restarted `more` more times:
    /// a clock that only runs while the supervisor's loop does, so "nothing happened to X
    /// meanwhile" is checked against real supervision work, not a sleep.
    pub fn let_the_loop_run(&self, service: &str, more: u32) {
        let start = self.status(service).expect("clock service").restarts;
        self.wait_for(&format!("`{service}` to restart {more} more times"), || {
            self.status(service)
                .is_ok_and(|s| s.restarts >= start + more)
        });
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

/// The fields of `/proc/<pid>/stat` after the command name, or `None` once the pid is gone.
fn proc_stat(pid: i32) -> Option<Vec<String>> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = s.rsplit_once(')')?.1;
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// Whether `pid` is a live process: it exists and is not a zombie (a killed process whose
/// parent — possibly not us — has not reaped it yet is dead for every purpose here).
pub fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|f| f.first().is_some_and(|state| state != "Z" && state != "X"))
}

/// User plus system CPU time of `pid`, in clock ticks (`/proc/<pid>/stat` fields 14 and 15).
pub fn cpu_ticks(pid: u32) -> u64 {
    let f = proc_stat(pid as i32).expect("process exists");
    // Fields 14 and 15 are at 11 and 12 counting from field 3 (the state).
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Resident memory of `pid` in KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kib(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("process exists");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Open file descriptors of `pid`.
pub fn fd_count(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("process exists")
        .count()
}

/// Zombie children of `pid`: exited, not reaped.
pub fn zombie_children(pid: u32) -> Vec<i32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&p| proc_stat(p).is_some_and(|f| f[0] == "Z" && f[1] == pid.to_string()))
        .collect()
}
