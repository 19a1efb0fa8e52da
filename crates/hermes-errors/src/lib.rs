//! The error convention every Hermes library follows, as code.
//!
//! Each library has one typed `Error` enum with a `hint()`. Its message says **what failed**
//! (`could not read `/x/.env``); **why** is its source (`#[source]`/`#[from]`), never also
//! interpolated in the message, so each cause is said once. An error reaches the user in one of
//! two shapes:
//!
//! * **As an error** (a command fails): the binary renders the message, one `Caused by:` line
//!   per [`causes`] entry, a blank line and the hint (`crates/hermes/src/failure.rs`).
//! * **In one line** (a warning, a doctor row, a status reason, a recorded state): [`one_line`]
//!   joins the message and its causes with `: `, OS errors as phrases ([`describe_io`]).
//!
//! [`every_variant!`] gives an error enum `Error::every_variant()`, one value of each variant,
//! behind each crate's `examples` feature; the binary snapshots every one as users see it.
//!
//! Words: the **chain** of an error is the error and its sources, outermost first; a **cause** is
//! one source in it.
//!
//! # The rules every crate shares
//!
//! This crate depends on nothing, so every Hermes crate (PID 1's included) can use it; it also
//! holds the few small rules that must read the same everywhere and would otherwise be copied:
//!
//! * [`switch`] — which words turn a switch on (`1`, `true`, `yes`, `on`);
//! * [`bytes`] — sizes: `1GiB` read, `1.3 GiB` shown;
//! * [`exit`] — the exit codes a supervisor reads: 75 "restart me", 78 "bad configuration";
//! * [`suggest`] — "did you mean …?": the known words close to a mistyped one;
//! * [`text`] — names from outside (archives, volumes, peers) made safe to print on a terminal.
#![deny(missing_docs)]

use std::error::Error;

pub mod bytes;
pub mod exit;
pub mod suggest;
pub mod switch;
pub mod text;

/// The `Caused by:` lines of `error`: the text of each source, outermost first.
///
/// A cause whose text the line above already contains is not said again: errors from outside
/// Hermes (an `io::Error` that names its path, a client library's wrapper) may repeat their
/// source in their own message.
pub fn causes(error: &(dyn Error + 'static)) -> Vec<String> {
    let message = error.to_string();
    let mut causes: Vec<String> = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // Compared with the last line said, the message or a cause.
        if !causes.last().unwrap_or(&message).contains(&text) {
            causes.push(text);
        }
        source = cause.source();
    }
    causes
}

/// `error` in one line, for places that have one line for it (warnings, doctor rows, status
/// reasons): the message and each cause, joined with `: `, OS errors as lowercase phrases
/// (`could not write `/x/gateway_state.json`: read-only file system`).
pub fn one_line(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut said = line.clone();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !said.contains(&text) {
            line.push_str(": ");
            match cause.downcast_ref::<std::io::Error>() {
                Some(io) => line.push_str(&describe_io(io)),
                None => line.push_str(&text),
            }
            said = text;
        }
        source = cause.source();
    }
    line
}

/// An OS error as a lowercase phrase without the `(os error N)` suffix, so a line reads as a
/// sentence (`read-only file system`, `permission denied`).
pub fn describe_io(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// Gives an error enum `every_variant()`: one value of each variant, named by its pattern.
///
/// ```
/// #[derive(Debug, thiserror::Error)]
/// enum Error {
///     #[error("no home")]
///     NoHome,
///     #[error("could not read `{path}`")]
///     Read { path: String, source: std::io::Error },
/// }
///
/// hermes_errors::every_variant!(Error {
///     Error::NoHome => Error::NoHome,
///     Error::Read { .. } => Error::Read {
///         path: "/x".into(),
///         source: std::io::ErrorKind::NotFound.into(),
///     },
/// });
///
/// let all = Error::every_variant();
/// assert_eq!(all[1].0, "Error::Read { .. }");
/// ```
///
/// Why a macro: the generated function matches every value against all the patterns, with no
/// wildcard, so an enum that gains a variant does not compile until the variant has an entry;
/// each value is checked against its own pattern, and a pattern listed twice is an
/// unreachable pattern. So the list cannot silently miss a variant, and whatever renders it (the
/// binary's snapshot of every error) sees each one.
///
/// Invoke it in the crate that defines the enum, behind `#[cfg(any(test, feature =
/// "examples"))]`.
#[macro_export]
macro_rules! every_variant {
    ($error:ty { $($pattern:pat => $value:expr),+ $(,)? }) => {
        impl $error {
            /// One value of every variant with its pattern, for tests that render them all.
            /// Generated by `hermes_errors::every_variant!`.
            #[doc(hidden)]
            pub fn every_variant() -> ::std::vec::Vec<(&'static str, $error)> {
                // No wildcard: a new variant fails to compile until it is listed.
                fn listed(error: &$error) {
                    match error {
                        $($pattern => {})+
                    }
                }
                ::std::vec![$({
                    let value: $error = $value;
                    listed(&value);
                    assert!(
                        matches!(value, $pattern),
                        "the value listed for `{}` is another variant",
                        stringify!($pattern),
                    );
                    (stringify!($pattern), value)
                }),+]
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrap(&'static str, Option<Box<dyn Error + 'static>>);

    impl std::fmt::Display for Wrap {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Wrap {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref()
        }
    }

    fn chain() -> Wrap {
        // EROFS
        let io = std::io::Error::from_raw_os_error(30);
        Wrap("could not write `/x`", Some(Box::new(io)))
    }

    #[test]
    fn causes_are_listed_outermost_first() {
        assert_eq!(causes(&chain()), ["Read-only file system (os error 30)"]);
        assert!(causes(&Wrap("alone", None)).is_empty());
    }

    #[test]
    fn a_cause_the_line_above_says_is_not_repeated() {
        let inner = Wrap("denied", None);
        let outer = Wrap("cannot open `x`: denied", Some(Box::new(inner)));
        assert!(causes(&outer).is_empty());
        assert_eq!(one_line(&outer), "cannot open `x`: denied");
    }

    #[test]
    fn one_line_joins_the_chain_with_os_errors_as_phrases() {
        assert_eq!(
            one_line(&chain()),
            "could not write `/x`: read-only file system"
        );
        let deep = Wrap("cannot load the settings", Some(Box::new(chain())));
        assert_eq!(
            one_line(&deep),
            "cannot load the settings: could not write `/x`: read-only file system"
        );
    }

    #[test]
    fn os_errors_read_as_phrases() {
        assert_eq!(
            describe_io(&std::io::Error::from_raw_os_error(13)),
            "permission denied"
        );
        assert_eq!(describe_io(&std::io::Error::other("Boom")), "boom");
    }
}
