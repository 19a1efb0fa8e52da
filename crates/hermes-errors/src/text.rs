//! Text from outside shown on a terminal: [`printable`].
//!
//! A name read from an archive, a volume or a peer can hold an escape sequence (which rewrites
//! or hides what the terminal shows: `ESC [ 2 K` erases the line it is on), a line break (which
//! prints a fake line), or a bidirectional override (which shows characters in another order
//! than they are). Anything such a name is interpolated into goes through [`printable`] first.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character (C0, DEL, C1), line or paragraph separator and
/// bidirectional control written as an escape: `\n`, `\r`, `\t`, `\x1b`, `\u{202e}`. Other text
/// is left as it is (borrowed when there is nothing to escape).
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) && (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let name = "profiles/work/memories/notes – été.md";
        assert!(matches!(printable(name), std::borrow::Cow::Borrowed(s) if s == name));
    }

    #[test]
    fn escapes_line_breaks_terminal_sequences_and_bidi_overrides() {
        assert_eq!(printable("a\nb\r\tc"), "a\\nb\\r\\tc");
        assert_eq!(printable("x\x1b[2K.env"), "x\\x1b[2K.env");
        assert_eq!(printable("\u{7f}\u{9b}"), "\\x7f\\x9b");
        assert_eq!(printable("evil\u{202e}vne."), "evil\\u{202e}vne.");
        assert_eq!(printable("a\u{2028}b\u{2066}"), "a\\u{2028}b\\u{2066}");
    }
}
