//! Signal forwarding to the main program's process group, and the TTY: the main program owns
//! the foreground, so input reaches it and Ctrl-C interrupts it.

use std::fs;
use std::os::fd::AsFd;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::util::*;

fn alive(pid: i32) -> bool {
    // A zombie still answers kill(0); read the state instead.
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[test]
fn sigterm_reaches_the_whole_process_group_of_the_main_program() {
    let sb = Sandbox::new();
    let script = "sleep 1000 & echo $! > grandchild; echo up > ready; wait";
    let mut child = sb
        .init(&["sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = sb.path().join("ready");
    wait_for("the main program", || ready.exists());
    let grandchild: i32 = fs::read_to_string(sb.path().join("grandchild"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(grandchild));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < TIMEOUT, "init did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The shell died of the forwarded SIGTERM: 128 + 15.
    assert_eq!(status.code(), Some(143));
    wait_for("the grandchild to die", || !alive(grandchild));
}

#[test]
fn forwarded_signals_are_delivered_not_treated_as_shutdown() {
    let sb = Sandbox::new();
    for (sig, name) in [
        (Signal::SIGUSR1, "USR1"),
        (Signal::SIGHUP, "HUP"),
        (Signal::SIGWINCH, "WINCH"),
    ] {
        let script = format!(
            "trap 'echo {name} > got; exit 7' {name}; echo up > ready; \
             while :; do sleep 0.05; done"
        );
        let _ = fs::remove_file(sb.path().join("ready"));
        let mut child = sb
            .init(&["sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("the main program", || sb.path().join("ready").exists());
        kill(Pid::from_raw(child.id() as i32), sig).unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(start.elapsed() < TIMEOUT, "no exit after {name}");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(7), "{name}");
        assert_eq!(
            fs::read_to_string(sb.path().join("got")).unwrap().trim(),
            name
        );
    }
}

#[test]
fn kill_1_from_inside_the_namespace_reaches_the_main_program() {
    if skip_unless_root("a new PID namespace needs root") {
        return;
    }
    let sb = Sandbox::new();
    let out = run(&mut sb.init_pid1(&["sh", "-c", "kill -TERM 1; sleep 30; echo ignored"]));
    assert_eq!(out.status.code(), Some(143), "{}", render(&out));
    assert!(!stdout(&out).contains("ignored"));
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            // `setsid` execs `hermes init`, which heads its own session: kill its children too.
            let pid = self.0.id() as i32;
            let _ = std::process::Command::new("pkill")
                .args(["-KILL", "-s", &pid.to_string()])
                .status();
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Reads the pty master until `pred` holds on everything read so far.
fn read_until(
    master: &std::os::fd::OwnedFd,
    seen: &mut String,
    what: &str,
    pred: impl Fn(&str) -> bool,
) {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    while !pred(seen) {
        assert!(
            start.elapsed() < TIMEOUT,
            "timed out waiting for {what}; got {seen:?}"
        );
        let mut fds = [nix::poll::PollFd::new(
            master.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u16)).unwrap_or(0) > 0 {
            match nix::unistd::read(master, &mut buf) {
                Ok(0) | Err(_) => std::thread::sleep(Duration::from_millis(20)),
                Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            }
        }
    }
}

#[test]
fn the_main_program_owns_the_tty_and_ctrl_c_interrupts_it() {
    let sb = Sandbox::new();
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = std::fs::File::from(pty.slave);
    // `setsid -c` makes the pty our controlling terminal, as `docker run -it` does for PID 1.
    let script = "echo \"fg=$(ps -o tpgid= -p $$ | tr -d ' ') pg=$(ps -o pgid= -p $$ | tr -d ' ')\"; exec cat";
    let mut cmd = std::process::Command::new("setsid");
    cmd.args(["-c", hermes(), "init", "--", "sh", "-c", script])
        .env_clear()
        .envs(sb.env())
        .current_dir(sb.path())
        .stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    let child = cmd.spawn().unwrap();
    drop(cmd);
    // Killed on every exit path, so a failing assertion leaves no init holding the pty.
    let mut child = KillOnDrop(child);
    let child = &mut child.0;
    let master = pty.master;
    let mut seen = String::new();
    read_until(&master, &mut seen, "the foreground report", |s| {
        s.lines()
            .any(|l| l.starts_with("fg=") && l.contains(" pg="))
    });
    let line = seen
        .lines()
        .find(|l| l.starts_with("fg="))
        .unwrap()
        .trim()
        .to_string();
    let (fg, pg) = line.split_once(' ').unwrap();
    assert_eq!(
        fg.trim_start_matches("fg="),
        pg.trim_start_matches("pg="),
        "{line}"
    );
    // Input reaches `cat` (a background reader would be stopped by SIGTTIN): the line comes
    // back twice, once echoed by the terminal and once printed by `cat`.
    nix::unistd::write(&master, b"ping-42\n").unwrap();
    read_until(&master, &mut seen, "cat's echo", |s| {
        s.matches("ping-42").count() >= 2
    });
    // Ctrl-C: the terminal sends SIGINT to the foreground group.
    nix::unistd::write(&master, b"\x03").unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < TIMEOUT,
            "no exit after Ctrl-C; got {seen:?}"
        );
        let mut buf = [0u8; 4096];
        let mut fds = [nix::poll::PollFd::new(
            master.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u16)).unwrap_or(0) > 0 {
            let _ = nix::unistd::read(&master, &mut buf);
        }
    };
    assert_eq!(status.code(), Some(130), "{seen}");
}

#[test]
fn the_main_program_starts_with_no_blocked_signal() {
    // PID 1 blocks the signals it reads from its signalfd; a mask survives fork and exec, so
    // without a reset the main program could not be stopped by SIGTERM.
    let sb = Sandbox::new();
    let out = run(&mut sb.init(&["grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status"]));
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let text = stdout(&out);
    assert!(text.contains("SigBlk:\t0000000000000000"), "{text}");
    // Nothing PID 1 handles is ignored either (other bits come from whoever started us).
    let ign = text
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:\t"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap();
    for sig in [1, 2, 3, 10, 12, 15, 17, 28] {
        assert_eq!(ign & (1 << (sig - 1)), 0, "signal {sig} ignored: {text}");
    }
}

/// PID 1's stdout is a pipe nobody reads (a stalled log driver) while a gateway floods it:
/// supervision goes on — the main program's status requests are answered — and init exits
/// when the main program does.
#[test]
fn an_unread_stdout_never_stalls_pid1() {
    let sb = Sandbox::new();
    let home = sb.home();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("SOUL.md"), "soul").unwrap();
    std::fs::write(
        home.join("config.yaml"),
        "gateway:\n  command: \"exec yes flood-line\"\n",
    )
    .unwrap();
    std::fs::write(
        home.join("gateway_state.json"),
        r#"{"gateway_state":"running"}"#,
    )
    .unwrap();
    let script = format!(
        "for i in $(seq 20); do '{}' service status >/dev/null 2>&1 || exit 9; done; \
         echo answered > status-ok",
        hermes()
    );
    let mut child = sb
        .init(&["sh", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The pipe is held open and never read.
    let _unread = child.stdout.take();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("init stalled on its unread stdout");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(sb.path().join("status-ok")).unwrap_or_default(),
        "answered\n"
    );
}
