//! Running a child process with captured output and a hard time limit.
//!
//! Owns [`run_captured`]: stdin is `/dev/null`, stdout and stderr are read on
//! two threads (so a chatty child never blocks on a full pipe), output is
//! decoded as UTF-8 with replacement, and a child that outlives its deadline is
//! killed and reaped. Used for pip/uv, Python queries and plugin `check`
//! commands.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::Error;

/// Output of a finished child.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// Whether it exited with status 0.
    pub success: bool,
    /// Its exit code, `None` when killed by a signal.
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

fn reader<R: Read + Send + 'static>(pipe: Option<R>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            // A read error only truncates what we show; the exit status still decides.
            let _ = p.read_to_end(&mut buf);
        }
        buf
    })
}

/// Runs `cmd` to completion or until `timeout`, capturing its output.
pub fn run_captured(cmd: &mut Command, timeout: Duration) -> Result<Captured, Error> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn {
            program: program.clone(),
            source,
        })?;
    let out = reader(child.stdout.take());
    let err = reader(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = out.join();
                let _ = err.join();
                return Err(Error::Timeout {
                    program,
                    seconds: timeout.as_secs(),
                });
            }
            Ok(None) => thread::sleep(Duration::from_millis(20)),
            Err(source) => return Err(Error::Spawn { program, source }),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok(Captured {
        success: status.success(),
        code: status.code(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    })
}

/// The last `max` characters of `text` (on a char boundary).
pub fn tail(text: &str, max: usize) -> &str {
    let count = text.chars().count();
    if count <= max {
        return text;
    }
    match text.char_indices().nth(count - max) {
        Some((i, _)) => &text[i..],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_status() {
        let c = run_captured(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(30),
        )
        .unwrap();
        assert!(!c.success);
        assert_eq!(c.code, Some(3));
        assert_eq!(c.stdout, "out\n");
        assert_eq!(c.stderr, "err\n");
    }

    #[test]
    fn kills_on_timeout() {
        let start = Instant::now();
        let e = run_captured(Command::new("sleep").arg("30"), Duration::from_millis(300));
        assert!(matches!(e, Err(Error::Timeout { .. })), "{e:?}");
        assert!(start.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let e = run_captured(
            &mut Command::new("/nonexistent/hermes-x"),
            Duration::from_secs(5),
        );
        assert!(matches!(e, Err(Error::Spawn { .. })));
    }

    #[test]
    fn tail_keeps_the_end() {
        assert_eq!(tail("abcdef", 3), "def");
        assert_eq!(tail("ab", 3), "ab");
        assert_eq!(tail("ééé", 2), "éé");
    }
}
