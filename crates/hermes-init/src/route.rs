//! Routing of the container's CMD: which program becomes the *main program*.
//!
//! Words:
//! * **CMD** — the words after `hermes init [flags] [--]` (Docker's `CMD`, or what the
//!   operator typed after the image name).
//! * **route** — what the CMD means ([`Route`]): run `hermes` with it, or run it as a program.
//!
//! The table, checked in this order (first match wins):
//!
//! | CMD | route |
//! |---|---|
//! | nothing | `hermes` |
//! | first word starts with `-` (`--help`, `--tui`) | `hermes <CMD>` |
//! | first word is a `hermes` subcommand (`login`, `mcp`, `dump`) | `hermes <CMD>`, even when a program of that name is on `PATH` |
//! | first word is a program on `PATH`, or a path (it contains `/`: `./run.sh`, `/bin/sleep`) | the CMD as is (a path that cannot be executed fails with one line and 126/127, as in a shell) |
//! | anything else | `hermes <CMD>` (which prints usage) |
//!
//! The subcommand list is passed in by the binary, which reads it from its own command tree,
//! so the table never drifts from the CLI.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What the CMD runs as the main program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Run the `hermes` binary with these arguments.
    Hermes(Vec<String>),
    /// Run this program (argv\[0\] looked up in `PATH`) with its arguments.
    Program(Vec<String>),
}

impl Route {
    /// The full argv of the main program, with `hermes` resolved to `hermes_exe`.
    pub fn argv(&self, hermes_exe: &Path) -> Vec<String> {
        match self {
            Route::Hermes(args) => {
                let mut argv = vec![hermes_exe.to_string_lossy().into_owned()];
                argv.extend(args.iter().cloned());
                argv
            }
            Route::Program(argv) => argv.clone(),
        }
    }
}

/// Applies the routing table (module doc). `on_path` answers "is this word a program?";
/// production code passes [`program_exists`] bound to the container's `PATH`.
pub fn route(cmd: &[String], subcommands: &[String], on_path: &dyn Fn(&str) -> bool) -> Route {
    let Some(first) = cmd.first() else {
        return Route::Hermes(Vec::new());
    };
    if first.starts_with('-') || subcommands.iter().any(|s| s == first) {
        return Route::Hermes(cmd.to_vec());
    }
    if first.contains('/') || (!first.is_empty() && on_path(first)) {
        return Route::Program(cmd.to_vec());
    }
    Route::Hermes(cmd.to_vec())
}

/// Whether `word` names an executable: a path (it contains `/`) to an executable file, or
/// a name found in one of the `path` directories (`PATH` syntax; an empty entry is `.`).
pub fn program_exists(word: &str, path: Option<&OsStr>) -> bool {
    if word.contains('/') {
        return is_executable(Path::new(word));
    }
    let Some(path) = path else {
        return false;
    };
    std::env::split_paths(path).any(|dir| {
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        is_executable(&dir.join(word))
    })
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A CMD that is itself `init` — `init ...`, `hermes init ...`, `/path/to/hermes init ...` or
/// `tini ...` — asks for what this process already is. Returns the CMD after that word, its
/// tini-style flags (`-e`/`-p` take a value) and a `--`; `None` for any other CMD.
pub fn unwrap_nested_init(cmd: &[String]) -> Option<Vec<String>> {
    let name = |w: &str| {
        Path::new(w)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
    };
    let rest = match cmd {
        [first, rest @ ..] if first == "init" || name(first).as_deref() == Some("tini") => rest,
        [first, second, rest @ ..]
            if name(first).as_deref() == Some("hermes") && second == "init" =>
        {
            rest
        }
        _ => return None,
    };
    let mut words = rest.iter();
    let mut out = Vec::new();
    while let Some(w) = words.next() {
        match w.as_str() {
            "--" => {
                out.extend(words.cloned());
                break;
            }
            "-e" | "-p" => {
                words.next();
            }
            flag if flag.starts_with('-') => {}
            _ => {
                out.push(w.clone());
                out.extend(words.cloned());
                break;
            }
        }
    }
    Some(out)
}

/// The first word of the CMD as the boot stages see it: a leading `hermes` (or a path ending
/// in `/hermes`) is skipped, so `hermes dashboard` and `dashboard` are the same container.
pub fn first_word(cmd: &[String]) -> Option<&str> {
    let mut words = cmd.iter().map(String::as_str);
    let first = words.next()?;
    let is_hermes = Path::new(first).file_name().is_some_and(|n| n == "hermes");
    if is_hermes { words.next() } else { Some(first) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    fn subcommands() -> Vec<String> {
        s(&["login", "mcp", "dump", "profile", "dashboard"])
    }

    /// Programs "on PATH" for the table: the real collisions (`login`, `mcp`) included.
    fn on_path(word: &str) -> bool {
        ["bash", "sh", "sleep", "login", "mcp", "true"].contains(&word)
    }

    #[test]
    fn routing_table() {
        let hermes = |w: &[&str]| Route::Hermes(s(w));
        let program = |w: &[&str]| Route::Program(s(w));
        let cases: Vec<(Vec<String>, Route)> = vec![
            (s(&[]), hermes(&[])),
            (s(&["--help"]), hermes(&["--help"])),
            (s(&["--tui"]), hermes(&["--tui"])),
            (s(&["-p", "work", "chat"]), hermes(&["-p", "work", "chat"])),
            (s(&["login", "--help"]), hermes(&["login", "--help"])),
            (s(&["mcp"]), hermes(&["mcp"])),
            (s(&["dump"]), hermes(&["dump"])),
            (
                s(&["bash", "-c", "echo ok"]),
                program(&["bash", "-c", "echo ok"]),
            ),
            (s(&["sleep", "infinity"]), program(&["sleep", "infinity"])),
            (
                s(&["sh", "-c", "exit 42"]),
                program(&["sh", "-c", "exit 42"]),
            ),
            (s(&["chat", "-q", "hi"]), hermes(&["chat", "-q", "hi"])),
            // A path runs as is, even one that cannot run: its failure is the answer.
            (s(&["./run.sh", "x"]), program(&["./run.sh", "x"])),
            (s(&["/no/such/tool"]), program(&["/no/such/tool"])),
            (s(&["no-such-thing"]), hermes(&["no-such-thing"])),
            (s(&[""]), hermes(&[""])),
        ];
        for (cmd, want) in cases {
            assert_eq!(route(&cmd, &subcommands(), &on_path), want, "{cmd:?}");
        }
    }

    #[test]
    fn a_nested_init_is_unwrapped_to_its_command() {
        let cases: Vec<(Vec<String>, Option<Vec<String>>)> = vec![
            (
                s(&["init", "--", "sh", "-c", "x"]),
                Some(s(&["sh", "-c", "x"])),
            ),
            (
                s(&["init", "-s", "-e", "143", "sleep", "1"]),
                Some(s(&["sleep", "1"])),
            ),
            (
                s(&["hermes", "init", "-p", "SIGKILL", "--", "dump"]),
                Some(s(&["dump"])),
            ),
            (s(&["/usr/bin/tini", "--", "true"]), Some(s(&["true"]))),
            (s(&["init"]), Some(vec![])),
            (s(&["hermes", "dump"]), None),
            (s(&["sh", "init"]), None),
            (s(&[]), None),
        ];
        for (cmd, want) in cases {
            assert_eq!(unwrap_nested_init(&cmd), want, "{cmd:?}");
        }
    }

    #[test]
    fn argv_resolves_hermes_to_the_running_binary() {
        let r = Route::Hermes(s(&["dump"]));
        assert_eq!(
            r.argv(Path::new("/opt/hermes/bin/hermes")),
            s(&["/opt/hermes/bin/hermes", "dump"])
        );
        let r = Route::Program(s(&["sleep", "1"]));
        assert_eq!(r.argv(Path::new("/x")), s(&["sleep", "1"]));
    }

    #[test]
    fn path_lookup_needs_an_executable_file() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("tool");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plain = dir.path().join("notes");
        std::fs::write(&plain, "x").unwrap();
        std::fs::create_dir(dir.path().join("subdir")).unwrap();
        let path = std::env::join_paths(["/nonexistent", dir.path().to_str().unwrap()]).unwrap();
        assert!(program_exists("tool", Some(&path)));
        assert!(!program_exists("notes", Some(&path)));
        assert!(!program_exists("subdir", Some(&path)));
        assert!(!program_exists("tool", None));
        assert!(program_exists(exe.to_str().unwrap(), None));
        assert!(!program_exists("./definitely-not-here", None));
    }

    #[test]
    fn first_word_skips_a_leading_hermes() {
        assert_eq!(first_word(&s(&["dashboard"])), Some("dashboard"));
        assert_eq!(first_word(&s(&["hermes", "dashboard"])), Some("dashboard"));
        assert_eq!(
            first_word(&s(&["/opt/hermes/bin/hermes", "gateway"])),
            Some("gateway")
        );
        assert_eq!(first_word(&s(&["hermes"])), None);
        assert_eq!(first_word(&s(&[])), None);
    }
}
