//! Shared helpers: a [`Sandbox`] per test (temp `HERMES_HOME` and runtime dir), commands that
//! run `hermes init` directly (sub-reaper), in a new PID namespace (PID 1), or in a private
//! mount namespace with a temp copy of `/etc` (and optionally the image marker) bind-mounted
//! over the real one. This machine's own `/etc` is never modified.

#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Generous: CI has two loaded cores.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// The service user of the test account files.
pub const HERMES_UID: u32 = 10000;

pub fn hermes() -> &'static str {
    env!("CARGO_BIN_EXE_hermes")
}

pub use hermes_test_support::skip_unless_root;

pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Sandbox {
    /// A temp dir everyone may enter and write (the service user must reach its home), sticky
    /// like `/tmp` so nobody can rename what another user made in it (the supervisor refuses a
    /// runtime directory that someone else could swap).
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o1777)).unwrap();
        Sandbox { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> PathBuf {
        self.path().join("data")
    }

    pub fn runtime(&self) -> PathBuf {
        self.path().join("run")
    }

    /// The environment `hermes init` gets (the "container environment").
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            (
                "PATH".into(),
                "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into(),
            ),
            ("HERMES_HOME".into(), self.home().display().to_string()),
            (
                "HERMES_RUNTIME_DIR".into(),
                self.runtime().display().to_string(),
            ),
            ("NO_COLOR".into(), "1".into()),
        ]
    }

    /// `hermes init -- <cmd>`, run directly (not PID 1: a child sub-reaper).
    pub fn init(&self, cmd: &[&str]) -> Command {
        let mut c = Command::new(hermes());
        c.arg("init").arg("--").args(cmd);
        self.prepare(&mut c);
        c
    }

    /// `unshare --pid --fork --mount-proc hermes init -- <cmd>`: `hermes init` is PID 1.
    pub fn init_pid1(&self, cmd: &[&str]) -> Command {
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--mount-proc", hermes(), "init", "--"])
            .args(cmd);
        self.prepare(&mut c);
        c
    }

    fn prepare(&self, c: &mut Command) {
        c.env_clear()
            .envs(self.env())
            .current_dir(self.path())
            .stdin(Stdio::null());
    }

    /// A copy of `/etc` with a `hermes` user (uid/gid 10000, home `/opt/data`) and a group
    /// `extra` (gid 20000) listing it, unless `with_hermes` is false.
    pub fn etc_copy(&self, with_hermes: bool) -> PathBuf {
        let etc = self.path().join("etc");
        let st = Command::new("cp")
            .args(["-a", "/etc/.", &etc.display().to_string()])
            .status()
            .unwrap();
        assert!(st.success(), "cp -a /etc");
        if with_hermes {
            append(
                &etc.join("passwd"),
                "hermes:x:10000:10000:Hermes:/opt/data:/bin/sh\n",
            );
            append(
                &etc.join("group"),
                "hermes:x:10000:\nextra:x:20000:hermes\n",
            );
        }
        etc
    }

    /// Wraps `argv` so it runs in a private mount namespace where `etc` is mounted over
    /// `/etc` and, with `marker`, `/opt` is a tmpfs holding the image marker.
    pub fn in_mount_ns(&self, etc: &Path, marker: bool, argv: &[&str]) -> Command {
        // The host's device nodes must not leak into expectations: a Docker socket or
        // `/dev/dri` on the test machine would add its group to every drop. Hidden here (a
        // root-owned /dev/null over a socket, an empty tmpfs over /dev/dri), so the tests see
        // the same devices on every machine: none.
        let hide_devices = "for s in /run/docker.sock /var/run/docker.sock; do \
             if [ -S \"$s\" ]; then mount --bind /dev/null \"$s\"; fi; done\n\
             if [ -d /dev/dri ]; then mount -t tmpfs tmpfs /dev/dri; fi\n";
        let script = format!(
            "set -e\nmount --bind '{}' /etc\n{hide_devices}{}exec \"$@\"\n",
            etc.display(),
            if marker {
                "mount -t tmpfs tmpfs /opt\nmkdir -p /opt/hermes\ntouch /opt/hermes/.container-image\n"
            } else {
                ""
            }
        );
        let mut c = Command::new("unshare");
        c.args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            "sh",
        ])
        .args(argv);
        self.prepare(&mut c);
        c
    }
}

fn append(path: &Path, text: &str) {
    let mut s = fs::read_to_string(path).unwrap_or_default();
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(text);
    fs::write(path, s).unwrap();
}

/// Runs `cmd` to completion with a deadline; kills it and panics on timeout.
pub fn run(cmd: &mut Command) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id() as i32;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(TIMEOUT) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("timed out after {TIMEOUT:?}: {cmd:?}");
        }
    }
}

pub fn render(out: &Output) -> String {
    format!(
        "exit: {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A client of the supervisor whose runtime directory is `runtime`, once it accepts
/// connections: the socket file appears at `bind`, a moment before the supervisor listens, so
/// its existence alone is not enough.
pub fn connect_supervisor(runtime: &std::path::Path) -> hermes_supervisor::Client {
    let mut client = None;
    wait_for("the supervisor to accept connections", || {
        client = hermes_supervisor::Client::connect(runtime, Duration::from_secs(10)).ok();
        client.is_some()
    });
    client.expect("connected")
}

/// Waits until `cond` holds, up to [`TIMEOUT`].
pub fn wait_for(what: &str, cond: impl FnMut() -> bool) {
    hermes_test_support::poll::until_true(what, TIMEOUT, cond);
}
