//! Spec safety: the gate every pip spec passes before any process is started.
//!
//! A *spec* is one requirement string as it would be handed to `pip install`
//! or `uv pip install` (`mem0ai>=2.0.10,<3`, `mautrix[encryption]==0.21.1`).
//! A spec names a package **on the package index**, never a local file, a
//! path, a URL or an installer option: pip and uv read an argument such as
//! `evil-0.1-py3-none-any.whl`, `evil.tar.gz` or `pkg==1.zip` as a file in
//! the current directory and install it. [`check_spec`] accepts only the
//! PEP 508 shape `NAME[EXTRAS]SPECIFIER`, with no whitespace and no markers:
//!
//! * NAME is a PEP 508 name: ASCII letters, digits, `.`, `-`, `_`, starting
//!   and ending with a letter or digit;
//! * EXTRAS, optional, is `[a,b]`: one or more PEP 508 names, comma separated;
//! * SPECIFIER, optional, is one or more clauses `OP VERSION`, comma
//!   separated, OP one of `===` `~=` `==` `!=` `<=` `>=` `<` `>`, VERSION
//!   letters, digits and `.` `-` `_` `+` `!`, starting with a letter or digit,
//!   with a trailing `.*` only after `==` or `!=`.
//!
//! Before the shape, and so with a precise reason, it refuses: an empty spec
//! or one longer than [`MAX_SPEC_LEN`]; shell metacharacters and control
//! characters; a leading `-` (an installer option); `:` or `@` (URLs such as
//! `file:` or `https://`, and direct references `name @ url`); `/`, `\` or a
//! leading `.` or `~` (a local path); any whitespace (a smuggled option); and
//! a name or spec ending in an archive suffix ([`ARCHIVE_SUFFIXES`], any case).
//!
//! Words: the *package name* is the leading NAME; the *specifier* is whatever
//! follows NAME and EXTRAS (empty when the spec is unconstrained).

use std::fmt;

/// Longest spec accepted, in characters.
pub const MAX_SPEC_LEN: usize = 200;

/// What a spec must look like, for hints.
pub const SPEC_HINT: &str = "a spec names a package on the package index, like `honcho-ai>=1.0` or \
     `mautrix[encryption]==0.21.1`; local files, paths, URLs and installer options are not installed";

/// File suffixes pip or uv take as a local archive (pip's archive extensions,
/// uv's source distribution extensions, eggs), longest first. Matched
/// case-insensitively against the package name and against the whole spec.
pub const ARCHIVE_SUFFIXES: &[&str] = &[
    ".tar.lzma",
    ".pybundle",
    ".tar.bz2",
    ".tar.zst",
    ".tar.gz",
    ".tar.xz",
    ".tar.lz",
    ".lzma",
    ".tbz2",
    ".tzst",
    ".tar",
    ".tgz",
    ".tbz",
    ".txz",
    ".tlz",
    ".whl",
    ".zip",
    ".egg",
    ".bz2",
    ".zst",
    ".exe",
    ".gz",
    ".xz",
    ".lz",
];

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
    /// The spec contains a shell metacharacter or a control character.
    ForbiddenChar {
        /// The offending character.
        ch: char,
    },
    /// The spec starts with `-`: the installer would read it as an option.
    Option,
    /// The spec is a URL (`file:`, `https://`) or a direct reference (`name @ url`).
    DirectReference,
    /// The spec looks like a local path: `/`, `\`, or a leading `.` or `~`.
    LocalPath,
    /// The spec contains whitespace (one spec per argument; no smuggled options).
    Whitespace,
    /// The name or the spec ends in an archive suffix: the installer would
    /// install a local file of that name.
    Archive {
        /// The suffix, lowercase (`.whl`, `.tar.gz`).
        suffix: &'static str,
    },
    /// The spec is not a PEP 508 `name[extras]specifier`.
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
            Self::Option => write!(
                f,
                "it starts with `-`, so the installer would read it as an option"
            ),
            Self::DirectReference => write!(
                f,
                "it is a URL or a direct reference (`:` and `@` are refused)"
            ),
            Self::LocalPath => write!(
                f,
                "it looks like a local path (`/`, `\\`, or a leading `.` or `~`)"
            ),
            Self::Whitespace => write!(
                f,
                "it contains whitespace (one spec per argument; installer options are refused)"
            ),
            Self::Archive { suffix } => write!(
                f,
                "it ends in `{suffix}`, so the installer would install a local file of that name"
            ),
            Self::BadShape => write!(
                f,
                "it is not a PEP 508 requirement of the form `name[extras]specifier`"
            ),
        }
    }
}

/// Shell metacharacters; control characters are refused as well.
const FORBIDDEN: [char; 5] = [';', '|', '&', '`', '$'];

/// Version operators, longest first so `===` is not read as `==`.
const OPERATORS: [&str; 8] = ["===", "~=", "==", "!=", "<=", ">=", "<", ">"];

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// A PEP 508 name: `[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?`.
fn is_pep508_name(s: &str) -> bool {
    let starts_and_ends_alnum = s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric());
    starts_and_ends_alnum && s.chars().all(is_name_char)
}

/// One clause `OP VERSION` of a specifier.
fn is_clause(clause: &str) -> bool {
    let Some(op) = OPERATORS.iter().find(|op| clause.starts_with(**op)) else {
        return false;
    };
    let version = &clause[op.len()..];
    let (version, wildcard) = match version.strip_suffix(".*") {
        Some(v) => (v, true),
        None => (version, false),
    };
    if wildcard && !matches!(*op, "==" | "!=") {
        return false;
    }
    version.starts_with(|c: char| c.is_ascii_alphanumeric())
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '+' | '!'))
}

/// The archive suffix `s` ends in, if any (ASCII case-insensitive).
fn archive_suffix(s: &str) -> Option<&'static str> {
    let lower = s.to_ascii_lowercase();
    ARCHIVE_SUFFIXES
        .iter()
        .copied()
        .find(|suffix| lower.ends_with(suffix))
}

/// Checks a spec against every rule (see the module doc); `Ok(())` means it
/// names a package on the index and may be handed to pip or uv.
pub fn check_spec(spec: &str) -> Result<(), SpecRejection> {
    let len = spec.chars().count();
    if len == 0 {
        return Err(SpecRejection::Empty);
    }
    if len > MAX_SPEC_LEN {
        return Err(SpecRejection::TooLong { len });
    }
    if let Some(ch) = spec
        .chars()
        .find(|c| FORBIDDEN.contains(c) || c.is_control())
    {
        return Err(SpecRejection::ForbiddenChar { ch });
    }
    if spec.starts_with('-') {
        return Err(SpecRejection::Option);
    }
    if spec.contains([':', '@']) {
        return Err(SpecRejection::DirectReference);
    }
    if spec.contains(['/', '\\']) || spec.starts_with(['.', '~']) {
        return Err(SpecRejection::LocalPath);
    }
    if spec.contains(char::is_whitespace) {
        return Err(SpecRejection::Whitespace);
    }
    let name_end = spec.find(|c| !is_name_char(c)).unwrap_or(spec.len());
    if let Some(suffix) = archive_suffix(&spec[..name_end]).or_else(|| archive_suffix(spec)) {
        return Err(SpecRejection::Archive { suffix });
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

/// Splits a spec into (name, extras, specifier) when its shape is valid.
fn parse_shape(spec: &str) -> Option<(&str, &str, &str)> {
    let name_end = spec.find(|c| !is_name_char(c)).unwrap_or(spec.len());
    let name = &spec[..name_end];
    if !is_pep508_name(name) {
        return None;
    }
    let mut rest = &spec[name_end..];
    let mut extras = "";
    if let Some(after) = rest.strip_prefix('[') {
        let close = after.find(']')?;
        if !after[..close].split(',').all(is_pep508_name) {
            return None;
        }
        extras = &rest[..close + 2];
        rest = &after[close + 1..];
    }
    if !rest.is_empty() && !rest.split(',').all(is_clause) {
        return None;
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
            ("pkg\t--pre", SpecRejection::ForbiddenChar { ch: '\t' }),
            ("pkg\0", SpecRejection::ForbiddenChar { ch: '\0' }),
            ("--index-url=https://evil", SpecRejection::Option),
            ("-r requirements.txt", SpecRejection::Option),
            ("/abs/path.whl", SpecRejection::LocalPath),
            ("./local", SpecRejection::LocalPath),
            ("../up", SpecRejection::LocalPath),
            ("git+https://github.com/x/y", SpecRejection::DirectReference),
            ("https://example.com/x.whl", SpecRejection::DirectReference),
            ("pkg @ file:///tmp/x", SpecRejection::DirectReference),
            ("pkg@1", SpecRejection::DirectReference),
            ("", SpecRejection::Empty),
            (long.as_str(), SpecRejection::TooLong { len: 201 }),
            ("pkg >=1", SpecRejection::Whitespace),
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
    fn says_why_a_local_file_path_url_or_option_is_refused() {
        use SpecRejection::*;
        for (spec, want) in [
            ("evil-0.1-py3-none-any.whl", Archive { suffix: ".whl" }),
            ("evil-0.1-py3-none-any.WHL", Archive { suffix: ".whl" }),
            ("evil.tar.gz", Archive { suffix: ".tar.gz" }),
            ("EVIL.ZIP", Archive { suffix: ".zip" }),
            ("evil.Tar.Bz2", Archive { suffix: ".tar.bz2" }),
            ("evil.tar.zst", Archive { suffix: ".tar.zst" }),
            ("evil.egg", Archive { suffix: ".egg" }),
            ("evil.whl[x]", Archive { suffix: ".whl" }),
            ("pkg==1.zip", Archive { suffix: ".zip" }),
            ("./evil", LocalPath),
            ("/tmp/x", LocalPath),
            ("evil\\x", LocalPath),
            ("~/evil", LocalPath),
            (".evil", LocalPath),
            ("pkg @ https://x", DirectReference),
            ("file:///x", DirectReference),
            ("file:evil", DirectReference),
            ("--index-url=http://x", Option),
            ("-e .", Option),
            ("pkg --pre", Whitespace),
            ("pkg --index-url=http://x", DirectReference),
            ("pkg\u{a0}--pre", Whitespace),
            ("_pkg", BadShape),
            ("pkg-", BadShape),
            ("pkg>=1.*", BadShape),
        ] {
            assert_eq!(check_spec(spec), Err(want), "{spec:?}");
        }
    }

    /// Specs pip or uv would read as a local file, a path, a URL or an option.
    const NOT_INDEX_PACKAGES: &[&str] = &[
        "evil-0.1-py3-none-any.whl",
        "evil-0.1-py3-none-any.WHL",
        "evil.tar.gz",
        "EVIL.ZIP",
        "evil.tgz",
        "evil.tar.bz2",
        "evil.tar.xz",
        "evil.tar",
        "evil.egg",
        "evil.whl[x]",
        "evil.tar.gz[x]==1",
        "pkg==1.zip",
        "pkg>=1.0.whl",
        "./evil",
        ".evil",
        ".",
        "..",
        "/tmp/x",
        "evil/",
        "sub/evil.whl",
        "evil\\x",
        "~/evil",
        "~evil",
        "pkg @ https://x",
        "pkg@https://x",
        "pkg[x]@file:///tmp/x",
        "--index-url=http://x",
        "-e .",
        "-e",
        "-rreq.txt",
        "file:///x",
        "file:evil.whl",
        "https://x/evil.whl",
        "git+https://x/y",
        "pkg --index-url=http://x",
        "pkg\u{a0}--pre",
        "pkg\u{2003}x",
        "pkg\0",
        "_pkg",
        "pkg-",
        "pkg.",
        "pkg_",
        "pkg[a,]",
        "pkg[,a]",
        "pkg[-a]",
        "pkg>=1,,<2",
        "pkg>=1,",
        "pkg=1",
        "pkg>=",
        "pkg>=>1",
        "pkg==1.*.2",
        "pkg>=1.*",
        "pkg==.1",
    ];

    #[test]
    fn refuses_local_files_paths_urls_and_options() {
        let accepted: Vec<&str> = NOT_INDEX_PACKAGES
            .iter()
            .copied()
            .filter(|bad| {
                spec_is_safe(bad) || package_name(bad).is_some() || specifier(bad).is_some()
            })
            .collect();
        assert!(
            accepted.is_empty(),
            "accepted, must be refused: {accepted:?}"
        );
    }

    #[test]
    fn accepts_pep508_index_requirements() {
        for (ok, name, spec) in [
            ("a", "a", ""),
            ("A1", "A1", ""),
            ("honcho-ai", "honcho-ai", ""),
            ("zope.interface>=5", "zope.interface", ">=5"),
            ("discord.py[voice]==2.7.1", "discord.py", "==2.7.1"),
            ("pkg[a,b]>=1,<2,!=1.5", "pkg", ">=1,<2,!=1.5"),
            ("pkg===1.0", "pkg", "===1.0"),
            ("pkg<2", "pkg", "<2"),
            ("pkg>1", "pkg", ">1"),
            ("pkg<=2", "pkg", "<=2"),
            ("pkg~=1.4.2", "pkg", "~=1.4.2"),
            ("pkg==1!2.0", "pkg", "==1!2.0"),
            ("pkg==1.0.post1.dev2", "pkg", "==1.0.post1.dev2"),
            ("pkg!=1.*", "pkg", "!=1.*"),
            ("Pillow==12.3.0", "Pillow", "==12.3.0"),
            (
                "python-telegram-bot[webhooks]==22.8",
                "python-telegram-bot",
                "==22.8",
            ),
            ("my_pkg.sub-name", "my_pkg.sub-name", ""),
        ] {
            assert_eq!(check_spec(ok), Ok(()), "{ok}");
            assert_eq!(package_name(ok), Some(name), "{ok}");
            assert_eq!(specifier(ok), Some(spec), "{ok}");
        }
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
            SpecRejection::Option,
            SpecRejection::DirectReference,
            SpecRejection::LocalPath,
            SpecRejection::Whitespace,
            SpecRejection::Archive { suffix: ".whl" },
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
                prop_assert!(!s.contains(char::is_whitespace));
                prop_assert!(!s.contains(['/', '\\', ':', '@']));
                prop_assert!(!s.starts_with(['-', '.', '~']));
                prop_assert!(archive_suffix(&s).is_none());
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
