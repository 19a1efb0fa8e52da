//! `.env`: the per-profile secrets file.
//!
//! Format (compatible with the original's files and with `python-dotenv`):
//!
//! | line                         | meaning                                         |
//! |------------------------------|-------------------------------------------------|
//! | `KEY=value`                  | a variable; surrounding whitespace trimmed      |
//! | `export KEY=value`           | same (the `export ` prefix is tolerated)        |
//! | `KEY="a b # c"`, `KEY='x'`   | quoted values; `\"`, `\\`, `\n` in double quotes |
//! | `KEY=value  # note`          | an unquoted value ends at ` #`                  |
//! | `${:-$}` in a value          | a literal `$`, as python-dotenv reads it        |
//! | `# comment`, blank           | kept verbatim by the writer                     |
//!
//! The writer keeps comments and the order of lines, replaces a key in place, appends new keys,
//! refuses invalid names and a denylist of variables that control how processes start, strips
//! CR/LF from values, and writes atomically with mode 0600. Lines it cannot parse are kept. A
//! value it writes reads back the same here and in the original (python-dotenv, which would
//! expand a `${...}` in it: the writer writes its `$` as `${:-$}`).
//!
//! The only way to write is [`DotEnv::edit`] (or [`set_var`]), which holds `.env.lock` from the
//! read to the write, so concurrent writers never lose each other's keys.
//!
//! # Over the process environment
//!
//! One rule, for every reader (the gateway, `doctor`, `dump`, `profile list`, plugin status):
//! a variable's value is its last assignment in `.env` — **an empty one included** — else the
//! process environment's. Readers then treat a value that is empty after trimming as unset
//! ([`nonblank`]), and `${VAR}` in `config.yaml` expands to it. So `OPENAI_API_KEY=` in `.env`
//! switches off a key exported in the shell, as in the original, which loads `.env` with
//! python-dotenv's `load_dotenv(override=True)` (an empty assignment replaces the shell's
//! value with `""`, and the original reads `""` as no key). A line without `=` assigns
//! nothing. [`DotEnv::value_over`] is the rule; [`DotEnv::over`] (a lookup function) and
//! [`DotEnv::overlay`] (the whole environment as a map) are built on it.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::owner::write_atomic_keeping_owner;
use crate::{damage, lock};

/// The mode of `.env` and of its lock file.
const MODE: u32 = 0o600;

/// Variables `.env` may never set: they change how every process in the profile starts.
pub const DENYLIST: &[&str] = &[
    "PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "HERMES_HOME",
    "HOME",
    "SHELL",
    "USER",
    "LOGNAME",
    "IFS",
    "BASH_ENV",
    "ENV",
    "NODE_OPTIONS",
];

#[derive(Debug, Clone, PartialEq, Eq)]
enum Line {
    /// A comment, a blank line, or a line we do not understand: kept verbatim.
    Other(String),
    Var {
        key: String,
        value: String,
        raw: String,
    },
}

/// A parsed `.env` file that can be edited and written back without losing comments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DotEnv {
    lines: Vec<Line>,
}

impl DotEnv {
    /// Parses `.env` text.
    pub fn parse(text: &str) -> Self {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let lines = text
            .lines()
            .map(|raw| match parse_line(raw) {
                Some((key, value)) => Line::Var {
                    key,
                    value,
                    raw: raw.to_string(),
                },
                None => Line::Other(raw.to_string()),
            })
            .collect();
        DotEnv { lines }
    }

    /// Reads `path`; a missing file is an empty `.env`. Bytes that are not UTF-8 are
    /// [`Error::NotUtf8`]: the file is damaged, and [`DotEnv::edit`] never rewrites it.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let bytes = match fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(Error::io("read", path, e)),
        };
        let text = damage::decode_text(path, &bytes)?;
        Ok(Self::parse(text))
    }

    /// 1-based numbers of the lines that are neither an assignment, a comment nor blank: Hermes
    /// ignores them (and keeps them when it writes). Numbers only, because such a line may be
    /// a pasted secret.
    pub fn unparsed_lines(&self) -> Vec<usize> {
        self.lines
            .iter()
            .enumerate()
            .filter(|(_, line)| {
                matches!(line, Line::Other(raw) if !raw.trim().is_empty() && !raw.trim_start().starts_with('#'))
            })
            .map(|(i, _)| i + 1)
            .collect()
    }

    /// The value of `key` (the last assignment wins, as in a shell).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars()
            .filter(|(k, _)| *k == key)
            .last()
            .map(|(_, v)| v)
    }

    /// The value of `name` with this file over `var` (the process environment): the file's
    /// last assignment, even an empty one, else `var(name)`. This is the one merge rule (see
    /// the module doc); an empty result still counts as unset for readers ([`nonblank`]).
    pub fn value_over(&self, name: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        match self.get(name) {
            Some(value) => Some(value.to_string()),
            None => var(name),
        }
    }

    /// [`DotEnv::value_over`] as a lookup function (for `config.yaml`'s `${VAR}` and for
    /// reports).
    pub fn over<'a>(
        &'a self,
        var: &'a dyn Fn(&str) -> Option<String>,
    ) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| self.value_over(name, var)
    }

    /// The environment a profile's processes see, as a map: `process` (the process
    /// environment) with every assignment of this file over it — the same values as
    /// [`DotEnv::value_over`] gives name by name.
    pub fn overlay(
        &self,
        process: impl IntoIterator<Item = (String, String)>,
    ) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = process.into_iter().collect();
        for (key, value) in self.vars() {
            env.insert(key.to_string(), value.to_string());
        }
        env
    }

    /// All assignments in file order.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.lines.iter().filter_map(|line| match line {
            Line::Var { key, value, .. } => Some((key.as_str(), value.as_str())),
            Line::Other(_) => None,
        })
    }

    /// Sets `key`, in place when it exists, appended otherwise. CR and LF are removed from the
    /// value so a value can never smuggle in a second assignment.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        validate_key(key)?;
        let value: String = value.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        let raw = format!("{key}={}", quote(&value));
        let mut replaced = false;
        self.lines.retain_mut(|line| match line {
            Line::Var { key: k, .. } if k == key => {
                if replaced {
                    return false; // drop later duplicates so the new value is the one in force
                }
                *line = Line::Var {
                    key: key.to_string(),
                    value: value.clone(),
                    raw: raw.clone(),
                };
                replaced = true;
                true
            }
            _ => true,
        });
        if !replaced {
            self.lines.push(Line::Var {
                key: key.to_string(),
                value,
                raw,
            });
        }
        Ok(())
    }

    /// Removes every assignment of `key`; returns whether there was one.
    pub fn unset(&mut self, key: &str) -> bool {
        let before = self.lines.len();
        self.lines
            .retain(|line| !matches!(line, Line::Var { key: k, .. } if k == key));
        before != self.lines.len()
    }

    /// The file text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            match line {
                Line::Other(raw) | Line::Var { raw, .. } => out.push_str(raw),
            }
            out.push('\n');
        }
        out
    }

    /// Changes the `.env` at `path`: loads it, runs `change` and writes the result back
    /// (atomically, mode 0600, keeping the file's owner when root writes it: [`crate::owner`])
    /// if `change` changed anything, all while holding `.env.lock`, so a key another process
    /// sets meanwhile is never lost. A missing file starts empty; when `change` fails nothing
    /// is written.
    pub fn edit<T>(
        path: &Path,
        change: impl FnOnce(&mut DotEnv) -> Result<T, Error>,
    ) -> Result<T, Error> {
        lock::with_locked(&lock::sidecar(path), MODE, || {
            let mut env = DotEnv::load(path)?;
            let before = env.clone();
            let out = change(&mut env)?;
            if env != before {
                write_atomic_keeping_owner(path, env.render().as_bytes(), MODE)?;
            }
            Ok(out)
        })
    }
}

/// `value` trimmed, when that is not empty: whether a variable counts as set. Every reader of
/// a merged value ([`DotEnv::value_over`]) asks this, so an empty `KEY=` in `.env` means "no
/// key" everywhere.
pub fn nonblank(value: &str) -> Option<&str> {
    Some(value.trim()).filter(|v| !v.is_empty())
}

/// Sets one key in the `.env` at `path`, creating the file if needed.
pub fn set_var(path: &Path, key: &str, value: &str) -> Result<PathBuf, Error> {
    DotEnv::edit(path, |env| env.set(key, value))?;
    Ok(path.to_path_buf())
}

/// Checks a variable name against the syntax and the denylist.
pub fn validate_key(key: &str) -> Result<(), Error> {
    let mut chars = key.chars();
    let valid = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(Error::EnvKeyInvalid {
            key: key.to_string(),
        });
    }
    if DENYLIST.contains(&key) {
        return Err(Error::EnvKeyDenied {
            key: key.to_string(),
        });
    }
    Ok(())
}

fn parse_line(raw: &str) -> Option<(String, String)> {
    let line = raw.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let line = line
        .strip_prefix("export ")
        .map(str::trim_start)
        .unwrap_or(line);
    let (key, rest) = line.split_once('=')?;
    let key = key.trim();
    let mut chars = key.chars();
    let valid = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return None;
    }
    Some((key.to_string(), parse_value(rest.trim())))
}

/// How a literal `$` before `{` is written so that python-dotenv reads it unchanged.
///
/// The original loads `.env` with python-dotenv (`load_dotenv`, `interpolate=True`), which
/// expands every `${NAME}` and `${NAME:-default}` in a value — single-quoted, double-quoted or
/// bare alike — and has no escape for `$`. `${:-$}` is a variable with an empty name (which no
/// environment can hold) and the default `$`: it always reads as `$`, and python-dotenv does not
/// expand what an expansion produced. So the writer puts it for the `$` of every `${` in a value
/// (`pa ss${HOME}word` is written `"pa ss${:-$}{HOME}word"`), and the reader turns it back
/// into `$` wherever it appears, as python-dotenv does.
const DOLLAR: &str = "${:-$}";

fn parse_value(rest: &str) -> String {
    let value = parse_quoted_value(rest);
    if value.contains(DOLLAR) {
        value.replace(DOLLAR, "$")
    } else {
        value
    }
}

fn parse_quoted_value(rest: &str) -> String {
    if let Some(body) = rest.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return out,
                '\\' => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some(other) => out.push(other),
                    None => out.push('\\'),
                },
                c => out.push(c),
            }
        }
        out
    } else if let Some(body) = rest.strip_prefix('\'') {
        body.split_once('\'')
            .map(|(v, _)| v)
            .unwrap_or(body)
            .to_string()
    } else {
        let end = rest
            .find(" #")
            .or_else(|| rest.find("\t#"))
            .unwrap_or(rest.len());
        rest[..end].trim().to_string()
    }
}

fn quote(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@+,=%".contains(c));
    if plain {
        value.to_string()
    } else {
        let escaped = value
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace("${", &format!("{DOLLAR}{{"));
        format!("\"{escaped}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_editing_leaves_the_file_its_owners() {
        use std::os::unix::fs::{MetadataExt, chown};
        if hermes_test_support::skip_unless_root("only root can give a file away") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        fs::write(&path, "A=1\n").unwrap();
        chown(&path, Some(12345), Some(12345)).unwrap();
        DotEnv::edit(&path, |env| env.set("B", "2")).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().uid(), 12345, "DotEnv::edit");
        set_var(&path, "C", "3").unwrap();
        assert_eq!(fs::metadata(&path).unwrap().uid(), 12345, "set_var");
        DotEnv::edit(&path, |env| Ok(env.unset("A"))).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (12345, 12345), "unset");
        assert_eq!(fs::read_to_string(&path).unwrap(), "B=2\nC=3\n");
    }

    #[test]
    fn tolerant_parsing() {
        let env = DotEnv::parse(
            "\u{feff}# header\nexport A=1\nB = two words # note\nC=\"x # y\\\"z\"\nD='single'\nnot a line\nE=\n",
        );
        assert_eq!(env.get("A"), Some("1"));
        assert_eq!(env.get("B"), Some("two words"));
        assert_eq!(env.get("C"), Some("x # y\"z"));
        assert_eq!(env.get("D"), Some("single"));
        assert_eq!(env.get("E"), Some(""));
        assert_eq!(env.vars().count(), 5);
    }

    #[test]
    fn writer_keeps_comments_order_and_unknown_lines() {
        let mut env = DotEnv::parse("# keep me\nA=1\nweird line\nB=2\n");
        env.set("A", "new value").unwrap();
        env.set("C", "3").unwrap();
        assert_eq!(
            env.render(),
            "# keep me\nA=\"new value\"\nweird line\nB=2\nC=3\n"
        );
        assert_eq!(DotEnv::parse(&env.render()).get("A"), Some("new value"));
    }

    /// Values python-dotenv would change if written plainly; each reads back as it was.
    const AWKWARD_VALUES: &[&str] = &[
        "pa ss${HOME}word",
        "${X}",
        "${X:-fallback}",
        "$X and $$ and $",
        "$${HOME}",
        "${:-$}",
        "a${",
        "it's \"quoted\" 'twice'",
        "hash # not a comment",
        "#leading",
        "back\\slash \\n \\t \\",
        "  spaces around  ",
        "sk-plain-0123",
        "",
    ];

    #[test]
    fn what_the_writer_writes_reads_back_unchanged() {
        let mut env = DotEnv::default();
        for (i, value) in AWKWARD_VALUES.iter().enumerate() {
            env.set(&format!("K{i}"), value).unwrap();
        }
        let back = DotEnv::parse(&env.render());
        for (i, value) in AWKWARD_VALUES.iter().enumerate() {
            assert_eq!(back.get(&format!("K{i}")), Some(*value), "{value:?}");
        }
        let mut one = DotEnv::default();
        one.set("PW", "pa ss${HOME}word").unwrap();
        assert_eq!(one.render(), "PW=\"pa ss${:-$}{HOME}word\"\n");
        // A hand-written `${:-$}` is a `$` for the original's reader, and so for ours.
        assert_eq!(DotEnv::parse("A=x${:-$}{y}\n").get("A"), Some("x${y}"));
    }

    #[test]
    fn values_cannot_inject_lines() {
        let mut env = DotEnv::default();
        env.set("KEY", "abc\nPATH=/evil\r").unwrap();
        assert_eq!(env.render().lines().count(), 1);
        assert_eq!(DotEnv::parse(&env.render()).get("PATH"), None);
    }

    #[test]
    fn file_values_override_the_environment_even_when_empty() {
        let env = DotEnv::parse("A=file\nEMPTY=\nBLANK=\"  \"\nNOEQUALS\n");
        let process = |name: &str| Some(format!("process-{name}"));
        let lookup = env.over(&process);
        assert_eq!(lookup("A").as_deref(), Some("file"));
        assert_eq!(lookup("B").as_deref(), Some("process-B"));
        // An empty assignment wins (python-dotenv's `override=True`) and reads as unset.
        assert_eq!(lookup("EMPTY").as_deref(), Some(""));
        assert_eq!(lookup("EMPTY").as_deref().and_then(nonblank), None);
        assert_eq!(lookup("BLANK").as_deref().and_then(nonblank), None);
        // A line without `=` assigns nothing.
        assert_eq!(lookup("NOEQUALS").as_deref(), Some("process-NOEQUALS"));
        assert_eq!(nonblank(" sk "), Some("sk"));
    }

    /// The map and the lookup are the same rule: for every name, in the file, in the process
    /// environment, in both or in neither, they give the same value.
    #[test]
    fn the_map_and_the_lookup_agree() {
        let env = DotEnv::parse("A=file\nEMPTY=\nA=last\nFILE_ONLY=f\n");
        let process: BTreeMap<String, String> = [("A", "p"), ("EMPTY", "p"), ("SHELL_ONLY", "s")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let var = |name: &str| process.get(name).cloned();
        let map = env.overlay(process.clone());
        for name in ["A", "EMPTY", "FILE_ONLY", "SHELL_ONLY", "NEITHER"] {
            assert_eq!(map.get(name).cloned(), env.value_over(name, &var), "{name}");
        }
        assert_eq!(map["A"], "last");
        assert_eq!(map["EMPTY"], "");
    }

    #[test]
    fn invalid_and_denied_names_are_refused() {
        let mut env = DotEnv::default();
        assert!(matches!(
            env.set("1ABC", "x"),
            Err(Error::EnvKeyInvalid { .. })
        ));
        assert!(matches!(
            env.set("A-B", "x"),
            Err(Error::EnvKeyInvalid { .. })
        ));
        for key in ["PATH", "LD_PRELOAD", "PYTHONPATH", "HERMES_HOME"] {
            assert!(
                matches!(env.set(key, "x"), Err(Error::EnvKeyDenied { .. })),
                "{key}"
            );
        }
    }

    #[test]
    fn save_is_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        set_var(&path, "OPENAI_API_KEY", "sk").unwrap();
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            DotEnv::load(&path).unwrap().get("OPENAI_API_KEY"),
            Some("sk")
        );
    }

    #[test]
    fn concurrent_writers_keep_every_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        let n = 20;
        let shared = path.clone();
        for result in crate::test_support::race(n, move |i| {
            set_var(&shared, &format!("KEY_{i}"), &format!("value-{i}"))
        }) {
            result.unwrap();
        }
        let env = DotEnv::load(&path).unwrap();
        let lost: Vec<usize> = (0..n)
            .filter(|i| env.get(&format!("KEY_{i}")) != Some(format!("value-{i}").as_str()))
            .collect();
        assert!(lost.is_empty(), "lost {} of {n} keys: {lost:?}", lost.len());
    }

    #[test]
    fn a_file_that_is_not_utf8_is_an_error_and_never_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        let damaged: &[u8] = b"A=1\nTOKEN=caf\xe9\n";
        fs::write(&path, damaged).unwrap();
        let err = DotEnv::load(&path).unwrap_err();
        assert!(
            matches!(
                err,
                Error::NotUtf8 {
                    line: 2,
                    offset: 13,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.hint().unwrap().contains("line 2"), "{:?}", err.hint());
        assert!(matches!(
            set_var(&path, "B", "2"),
            Err(Error::NotUtf8 { .. })
        ));
        assert_eq!(fs::read(&path).unwrap(), damaged);
    }

    #[test]
    fn unparsed_lines_are_numbered() {
        let env = DotEnv::parse("\u{feff}# c\nA=1\nsk-pasted\n\n  # indented comment\nB\n");
        assert_eq!(env.unparsed_lines(), [3, 6]);
        assert!(DotEnv::parse("A=1\n# x\n\n").unparsed_lines().is_empty());
    }
}
