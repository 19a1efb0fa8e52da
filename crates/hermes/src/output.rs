//! The one place the binary writes to the terminal.
//!
//! Data goes to stdout, messages to stderr. A closed stdout (`hermes dump | head -1`) is not
//! an error: `main` turns a broken pipe into a quiet exit 0.

use std::io::{self, IsTerminal, Write};

/// Writes `text` to stdout.
pub fn stdout(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Writes `text` to stderr (best effort: there is nowhere else to report a failure).
pub fn stderr(text: &str) {
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// Serializes `value` as pretty JSON on stdout.
pub fn json<T: serde::Serialize>(value: &T) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    text.push('\n');
    stdout(&text)
}

/// Whether to colour stdout: a terminal that can show colour, and the user did not opt out
/// ([`color_allowed`]).
pub fn color_stdout() -> bool {
    color_allowed(
        io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("TERM").as_deref(),
    )
}

/// Colour (or any other terminal control) only on a `terminal`, never with a non-empty
/// `NO_COLOR` (no-color.org) nor with `TERM=dumb`, a terminal that shows escape sequences
/// as text (Emacs' shell, some CI consoles).
pub fn color_allowed(
    terminal: bool,
    no_color: Option<&std::ffi::OsStr>,
    term: Option<&std::ffi::OsStr>,
) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty) && term.is_none_or(|t| t != "dumb")
}

#[cfg(test)]
mod tests {
    use super::color_allowed;
    use std::ffi::OsStr;

    #[test]
    fn colour_needs_a_terminal_and_no_opt_out() {
        let xterm = Some(OsStr::new("xterm-256color"));
        assert!(color_allowed(true, None, xterm));
        assert!(color_allowed(true, None, None));
        assert!(!color_allowed(false, None, xterm));
        assert!(!color_allowed(true, Some(OsStr::new("1")), xterm));
        // An empty NO_COLOR is no opt-out (no-color.org).
        assert!(color_allowed(true, Some(OsStr::new("")), xterm));
        assert!(!color_allowed(true, None, Some(OsStr::new("dumb"))));
    }
}
