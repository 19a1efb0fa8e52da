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

/// Whether stdout is a terminal and colour is allowed (`NO_COLOR` unset).
pub fn color_stdout() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}
