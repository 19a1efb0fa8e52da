//! Passing a listener the way the supervisor does, talking HTTP to it, and reading `/proc` to
//! see who holds or listens on a socket.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermes_test_support::poll;

/// The API key the agents are given (their start-up guard wants 16 characters or more).
pub const KEY: &str = "hook-test-key-0123456789abcdef";

/// A listener on 127.0.0.1, on a port of its own.
pub fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").unwrap()
}

/// The socket inode `fd` of this process refers to.
pub fn socket_inode(fd: &impl AsRawFd) -> u64 {
    inode_of(&PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())))
        .expect("a socket descriptor")
}

/// `socket:[N]` behind a `/proc/<pid>/fd/<n>` link, as N.
fn inode_of(link: &Path) -> Option<u64> {
    let target = std::fs::read_link(link).ok()?;
    target
        .to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The environment of a service started by the tests: `PATH`, no bytecode written, and `env`.
pub fn service_env(env: &[(String, String)]) -> Vec<(String, String)> {
    let mut all = vec![
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
    ];
    all.extend(env.iter().cloned());
    all
}

/// `argv` with only `env` ([`service_env`]), and with `listener` passed as the supervisor
/// passes a held socket: through `sh`, which sets `LISTEN_PID` to its own pid and execs `argv`
/// in place (so the pid is the program's), the socket as fd 3, `LISTEN_FDS=1` and
/// `LISTEN_FDNAMES=name`. Without `listener`, `argv` itself.
pub fn service(
    argv: &[String],
    env: &[(String, String)],
    listener: Option<(&TcpListener, &str)>,
) -> Command {
    let Some((listener, name)) = listener else {
        let mut command = Command::new(&argv[0]);
        command.args(&argv[1..]).env_clear().envs(service_env(env));
        return command;
    };
    let mut command = Command::new("sh");
    command
        .args(["-c", r#"export LISTEN_PID=$$; exec "$0" "$@""#])
        .args(argv)
        .env_clear()
        .envs(service_env(env))
        .env("LISTEN_FDS", "1")
        .env("LISTEN_FDNAMES", name);
    let fd = listener.as_raw_fd();
    #[allow(unsafe_code)]
    // SAFETY: dup2 and fcntl are async-signal-safe and touch only descriptors of the child.
    unsafe {
        command.pre_exec(move || {
            use nix::libc;
            if fd == 3 {
                // dup2 onto itself keeps close-on-exec: clear it instead.
                if libc::fcntl(3, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, 3) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

/// A child whose output goes to a log file; killed and reaped on drop.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// Spawns `command` with stdout and stderr in `log`.
    pub fn spawn(mut command: Command, log: PathBuf) -> Proc {
        let out = File::create(&log).unwrap();
        let child = command
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Proc { child, log }
    }

    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal).unwrap();
    }

    /// Waits until it has exited; its exit status.
    pub fn wait_exit(&mut self, what: &str, limit: Duration) -> std::process::ExitStatus {
        poll::until(what, limit, || self.child.try_wait().unwrap())
    }

    /// Panics with its output if it has exited.
    pub fn assert_running(&mut self, what: &str) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("{what}: it exited ({status}):\n{}", self.output());
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes one HTTP/1.1 request with the test key on `stream` (the connection closes after).
pub fn send(stream: &mut TcpStream, method: &str, path: &str, body: &str) {
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
}

/// Everything `stream` says until it closes (waiting at most `limit`).
pub fn read_all(stream: &mut TcpStream, limit: Duration) -> String {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// One request on 127.0.0.1:`port`; the whole response, `None` while nothing answers.
pub fn http(port: u16, method: &str, path: &str, body: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(90)))
        .ok()?;
    send(&mut stream, method, path, body);
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    (!response.is_empty()).then_some(response)
}

/// The inodes of the TCP sockets listening on `port` (IPv4 and IPv6, every address).
pub fn listening_inodes(port: u16) -> Vec<u64> {
    let port = format!(":{port:04X}");
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl, local_address, rem_address, st (0A: LISTEN), ..., inode is the tenth.
            if fields.len() > 9 && fields[1].ends_with(&port) && fields[3] == "0A" {
                inodes.push(fields[9].parse().unwrap());
            }
        }
    }
    inodes
}

/// The descriptors of process `pid` that refer to socket `inode`, each with its `flags` (octal,
/// from `fdinfo`).
pub fn fds_of(pid: i32, inode: u64) -> Vec<(String, u32)> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut fds = Vec::new();
    for entry in entries.flatten() {
        if inode_of(&entry.path()) != Some(inode) {
            continue;
        }
        let fd = entry.file_name().to_string_lossy().into_owned();
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap();
        let flags = info
            .lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
            .unwrap();
        fds.push((fd, flags));
    }
    fds
}

/// Every process (that this one may inspect) holding socket `inode`.
pub fn holders(inode: u64) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| !fds_of(*pid, inode).is_empty())
        .collect()
}

/// Whether process `pid` descends from `ancestor` (by the parent pids in `/proc`).
pub fn descends_from(pid: i32, ancestor: i32) -> bool {
    let mut pid = pid;
    while pid > 1 {
        let Some(parent) = parent_of(pid) else {
            return false;
        };
        if parent == ancestor {
            return true;
        }
        pid = parent;
    }
    false
}

/// The parent pid of `pid`: the field after the command name (in parentheses, which may hold
/// spaces) and the state.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `O_CLOEXEC` as `fdinfo` shows it.
pub const O_CLOEXEC: u32 = 0o2_000_000;
