//! Interactive prompts on the terminal: a line of text, or a secret typed without echo.

use std::io::{self, BufRead, IsTerminal, Write};

use nix::sys::termios::{self, LocalFlags, SetArg};

/// Whether stdin and stderr are both terminals (prompts go to stderr).
pub fn interactive() -> bool {
    io::stdin().is_terminal() && io::stderr().is_terminal()
}

/// Asks `question` on stderr and reads one line; `hidden` turns echo off while typing.
pub fn ask(question: &str, hidden: bool) -> io::Result<String> {
    let mut err = io::stderr().lock();
    write!(err, "{question}")?;
    err.flush()?;
    let stdin = io::stdin();
    // Restore the terminal even when reading fails.
    let saved = if hidden {
        termios::tcgetattr(&stdin).ok()
    } else {
        None
    };
    if let Some(saved) = &saved {
        let mut quiet = saved.clone();
        quiet.local_flags.remove(LocalFlags::ECHO);
        let _ = termios::tcsetattr(&stdin, SetArg::TCSANOW, &quiet);
    }
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if let Some(saved) = &saved {
        let _ = termios::tcsetattr(&stdin, SetArg::TCSANOW, saved);
        writeln!(err)?;
    }
    read?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}
