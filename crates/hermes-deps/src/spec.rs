//! Spec safety: the gate every pip spec passes before any process is started.
//!
//! A *spec* is one requirement string as it would be handed to `pip install`
//! (`mem0ai>=2.0.10,<3`, `mautrix[encryption]==0.21.1`). Only the plain
//! "NAME[EXTRAS]SPECIFIER" shape is accepted: no URLs, no paths, no flags, no
//! markers, no whitespace, no shell metacharacters. The rules are the original
//! implementation's, kept exactly so that a manifest accepted there is accepted
//! here and vice versa:
//!
//! 1. non-empty and at most [`MAX_SPEC_LEN`] characters;
//! 2. none of `;` `|` `&` `` ` `` `$` newline, CR, tab, backslash;
//! 3. does not start with `-`, `/` or `.`;
//! 4. no `://` and no `@` (no direct references, no VCS URLs);
//! 5. the whole string is NAME, optional `[EXTRAS]`, optional SPECIFIER.
//!
//! Words: the *package name* is the leading NAME; the *specifier* is whatever
//! follows NAME and EXTRAS (empty when the spec is unconstrained).

use std::fmt;

/// Longest spec accepted, in characters.
pub const MAX_SPEC_LEN: usize = 200;

/// Why a spec was refused. Rendered as the tail of
/// ``refusing to install unsafe spec `<spec>`: <why>``.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpecRejection {
    /// The spec is empty.
    Empty,
    /// The spec is longer than [`MAX_SPEC_LEN`] characters.
    TooLong {
        /// Its length in characters.
        len: usize,
    },
    /// The spec contains a forbidden character.
    ForbiddenChar {
        /// The offending character.
        ch: char,
    },
    /// The spec starts like a flag or a path.
    BadStart {
        /// The first character.
        ch: char,
    },
    /// The spec is a URL or a direct reference.
    DirectReference,
    /// The spec is not `NAME[EXTRAS]SPECIFIER`.
    BadShape,
}

impl fmt::Display for SpecRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "the spec is empty"),
            Self::TooLong { len } => {
                write!(
                    f,
                    "the spec is {len} characters long (at most {MAX_SPEC_LEN})"
                )
            }
            Self::ForbiddenChar { ch } => write!(f, "it contains the forbidden character {ch:?}"),
            Self::BadStart { ch } => {
                write!(f, "it starts with {ch:?} (flags and paths are refused)")
            }
            Self::DirectReference => {
                write!(f, "direct references and URLs (`://`, `@`) are refused")
            }
            Self::BadShape => write!(f, "it is not of the form `name[extras]specifier`"),
        }
    }
}

const FORBIDDEN: [char; 9] = [';', '|', '&', '`', '$', '\n', '\r', '\t', '\\'];

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

fn is_extra_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | '-')
}

fn is_op_char(c: char) -> bool {
    matches!(c, '<' | '>' | '=' | '!' | '~')
}

fn is_version_char(c: char) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            '_' | '.' | '-' | '+' | ',' | '*' | '<' | '>' | '=' | '!' | '~'
        )
}

/// Checks a spec against every rule; `Ok(())` means it may be handed to pip.
pub fn check_spec(spec: &str) -> Result<(), SpecRejection> {
    let len = spec.chars().count();
    if len == 0 {
        return Err(SpecRejection::Empty);
    }
    if len > MAX_SPEC_LEN {
        return Err(SpecRejection::TooLong { len });
    }
    if let Some(ch) = spec.chars().find(|c| FORBIDDEN.contains(c)) {
        return Err(SpecRejection::ForbiddenChar { ch });
    }
    if let Some(ch) = spec.chars().next().filter(|c| matches!(c, '-' | '/' | '.')) {
        return Err(SpecRejection::BadStart { ch });
    }
    if spec.contains("://") || spec.contains('@') {
        return Err(SpecRejection::DirectReference);
    }
    if parse_shape(spec).is_none() {
        return Err(SpecRejection::BadShape);
    }
    Ok(())
}

/// True iff [`check_spec`] accepts the spec.
pub fn spec_is_safe(spec: &str) -> bool {
    check_spec(spec).is_ok()
}

/// Splits a spec into (name, extras, specifier) byte ranges when its shape is valid.
fn parse_shape(spec: &str) -> Option<(&str, &str, &str)> {
    let mut chars = spec.char_indices().peekable();
    let (_, first) = chars.next()?;
    if !is_name_start(first) {
        return None;
    }
    let mut name_end = first.len_utf8();
    while let Some(&(i, c)) = chars.peek() {
        if !is_name_char(c) {
            break;
        }
        name_end = i + c.len_utf8();
        chars.next();
    }
    let name = &spec[..name_end];
    let mut rest = &spec[name_end..];
    let mut extras = "";
    if let Some(after) = rest.strip_prefix('[') {
        let close = after.find(']')?;
        let inner = &after[..close];
        if inner.is_empty() || !inner.chars().all(is_extra_char) {
            return None;
        }
        extras = &rest[..close + 2];
        rest = &after[close + 1..];
    }
    if !rest.is_empty() {
        let mut it = rest.chars();
        let op = it.next()?;
        if !is_op_char(op) {
            return None;
        }
        let tail = it.as_str();
        let tail = tail.strip_prefix('=').unwrap_or(tail);
        if tail.is_empty() || !tail.chars().all(is_version_char) {
            return None;
        }
    }
    Some((name, extras, rest))
}

/// The package name a spec installs (`mautrix[encryption]>=0.20` → `mautrix`);
/// `None` when the spec is not safe.
pub fn package_name(spec: &str) -> Option<&str> {
    check_spec(spec).ok()?;
    parse_shape(spec).map(|(name, _, _)| name)
}

/// The specifier tail of a spec (`mautrix[encryption]>=0.20,<1` → `>=0.20,<1`),
/// empty when unconstrained; `None` when the spec is not safe.
pub fn specifier(spec: &str) -> Option<&str> {
    check_spec(spec).ok()?;
    parse_shape(spec).map(|(_, _, spec)| spec)
}

/// Normalised distribution name (PEP 503): lowercase, runs of `-_.` become `-`.
pub fn normalize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_the_shapes_the_registry_uses() {
        for ok in [
            "mistralai>=2.3.0,<3",
            "boto3>=1.35.0,<2",
            "mautrix[encryption]>=0.20,<1",
            "honcho-ai",
            "anthropic==0.87.0",
            "requests~=2.31",
            "pkg>=1.0",
            "pkg==1.*",
            "pkg==1.0+local",
            "pkg!=1.2",
            "discord.py[voice]==2.7.1",
        ] {
            assert_eq!(check_spec(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn rejects_injection_attempts() {
        let long = "a".repeat(201);
        let cases: Vec<(&str, SpecRejection)> = vec![
            ("x; rm -rf /", SpecRejection::ForbiddenChar { ch: ';' }),
            ("x && y", SpecRejection::ForbiddenChar { ch: '&' }),
            ("x | y", SpecRejection::ForbiddenChar { ch: '|' }),
            ("x`id`", SpecRejection::ForbiddenChar { ch: '`' }),
            ("x$(id)", SpecRejection::ForbiddenChar { ch: '$' }),
            ("pkg\nother", SpecRejection::ForbiddenChar { ch: '\n' }),
            ("pkg\rother", SpecRejection::ForbiddenChar { ch: '\r' }),
            (
                "--index-url=https://evil",
                SpecRejection::BadStart { ch: '-' },
            ),
            ("-r requirements.txt", SpecRejection::BadStart { ch: '-' }),
            ("/abs/path.whl", SpecRejection::BadStart { ch: '/' }),
            ("./local", SpecRejection::BadStart { ch: '.' }),
            ("../up", SpecRejection::BadStart { ch: '.' }),
            ("git+https://github.com/x/y", SpecRejection::DirectReference),
            ("https://example.com/x.whl", SpecRejection::DirectReference),
            ("pkg @ file:///tmp/x", SpecRejection::DirectReference),
            ("pkg@1", SpecRejection::DirectReference),
            ("", SpecRejection::Empty),
            (long.as_str(), SpecRejection::TooLong { len: 201 }),
            ("pkg >=1", SpecRejection::BadShape),
            ("pkg[]", SpecRejection::BadShape),
            ("pkg==", SpecRejection::BadShape),
            ("pkg[x", SpecRejection::BadShape),
            ("pkg%", SpecRejection::BadShape),
        ];
        for (spec, want) in cases {
            assert_eq!(check_spec(spec), Err(want), "{spec:?}");
        }
        assert!(spec_is_safe(&"a".repeat(200)));
    }

    #[test]
    fn splits_name_and_specifier() {
        assert_eq!(package_name("mautrix[encryption]>=0.20"), Some("mautrix"));
        assert_eq!(specifier("mautrix[encryption]>=0.20,<1"), Some(">=0.20,<1"));
        assert_eq!(specifier("honcho-ai"), Some(""));
        assert_eq!(package_name("x; y"), None);
        assert_eq!(normalize_name("Foo_Bar..baz"), "foo-bar-baz");
    }

    #[test]
    fn rejection_messages_are_lowercase_without_period() {
        for r in [
            SpecRejection::Empty,
            SpecRejection::TooLong { len: 300 },
            SpecRejection::ForbiddenChar { ch: ';' },
            SpecRejection::BadStart { ch: '-' },
            SpecRejection::DirectReference,
            SpecRejection::BadShape,
        ] {
            let s = r.to_string();
            assert!(s.starts_with(|c: char| c.is_lowercase()), "{s}");
            assert!(!s.ends_with('.'), "{s}");
        }
    }

    proptest! {
        #[test]
        fn random_strings_never_panic(s in ".{0,300}") {
            let safe = spec_is_safe(&s);
            let _ = package_name(&s);
            let _ = specifier(&s);
            let _ = normalize_name(&s);
            if safe {
                prop_assert!(!s.contains(' '));
                prop_assert!(s.chars().count() <= MAX_SPEC_LEN);
            }
        }

        #[test]
        fn spec_like_strings_never_panic(s in "[a-z\\[\\]<>=!~.,*+@:/;$ -]{0,40}") {
            let _ = check_spec(&s);
            let _ = package_name(&s);
        }
    }
}
