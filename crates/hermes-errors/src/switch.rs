//! How a switch's text reads as on or off: the one rule for every switch Hermes reads from
//! the environment, `.env` or a `config.yaml` string (`API_SERVER_ENABLED`, `HERMES_DASHBOARD`,
//! `HERMES_GATEWAY_NO_SUPERVISE`, `HERMES_DOCKER_EXEC_AS_ROOT`, `GATEWAY_MULTIPLEX_PROFILES`, …).
//!
//! The words are the original's `utils.TRUTHY_STRINGS` (`1`, `true`, `yes`, `on`), any case,
//! surrounding space ignored. Anything else is off; [`parse`] also tells an off word (`0`,
//! `false`, `no`, `off`) from a value that is neither, for a switch whose absence falls back to
//! another source.

/// The words that mean "on".
pub const ON: [&str; 4] = ["1", "true", "yes", "on"];

/// The words that mean "off" explicitly (for [`parse`]).
pub const OFF: [&str; 4] = ["0", "false", "no", "off"];

/// Whether `value` means "on": one of [`ON`], any case, surrounding space ignored.
pub fn is_truthy(value: &str) -> bool {
    parse(value) == Some(true)
}

/// `Some(true)` for an [`ON`] word, `Some(false)` for an [`OFF`] word (any case, surrounding
/// space ignored), `None` for anything else.
pub fn parse(value: &str) -> Option<bool> {
    let value = value.trim();
    let is = |words: &[&str]| words.iter().any(|w| value.eq_ignore_ascii_case(w));
    if is(&ON) {
        Some(true)
    } else if is(&OFF) {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthy_words_are_the_originals() {
        for on in ["1", "true", "YES", " on ", "On", "tRuE", "yes\n", " 1 "] {
            assert!(is_truthy(on), "{on:?}");
            assert_eq!(parse(on), Some(true), "{on:?}");
        }
        for off in [
            "",
            "0",
            "false",
            "no",
            "off",
            "enabled",
            "2",
            "y",
            "t rue",
            "yes please",
        ] {
            assert!(!is_truthy(off), "{off:?}");
        }
    }

    #[test]
    fn off_words_are_told_from_other_text() {
        for off in ["0", "FALSE", " no ", "Off"] {
            assert_eq!(parse(off), Some(false), "{off:?}");
        }
        for neither in ["", "maybe", "2", "n"] {
            assert_eq!(parse(neither), None, "{neither:?}");
        }
    }
}
