//! What the `uv` shim is asked: the original agent's runtime installer (`tools/lazy_deps.py`)
//! installs with `uv pip install --target T --constraint C SPEC...` when `uv` is on `PATH`.
//! The images put a `uv` there that is `hermes` under another name, so the agent's installs
//! into the durable target land in a new generation, recorded as the agent's, without
//! changing its code. Anything else asked of `uv` goes to a real `uv`, if there is one.

use std::path::PathBuf;

/// A `uv` command line, as the shim reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UvCall {
    /// `uv pip install --target T [--constraint C] SPEC...`: an install into a directory.
    InstallInto {
        /// The `--target` directory.
        target: PathBuf,
        /// The specs.
        specs: Vec<String>,
    },
    /// Anything else: for a real `uv`.
    Other,
}

/// Options that take a value and that the shim may ignore: its own constraints (the core's)
/// replace the caller's, and the interpreter is the core's.
const IGNORED_WITH_VALUE: &[&str] = &["--constraint", "-c", "--python", "-p"];
/// Flags without a value that change nothing the shim does.
const IGNORED_FLAGS: &[&str] = &["--quiet", "-q", "--no-cache", "--compile-bytecode"];

/// Reads `args` (without the program name).
pub fn parse(args: &[String]) -> UvCall {
    let [pip, install, rest @ ..] = args else {
        return UvCall::Other;
    };
    if pip != "pip" || install != "install" {
        return UvCall::Other;
    }
    let mut target = None;
    let mut specs = Vec::new();
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        if let Some(value) = arg.strip_prefix("--target=") {
            target = Some(PathBuf::from(value));
        } else if arg == "--target" || arg == "-t" {
            let Some(value) = it.next() else {
                return UvCall::Other;
            };
            target = Some(PathBuf::from(value));
        } else if IGNORED_WITH_VALUE.contains(&arg.as_str()) {
            if it.next().is_none() {
                return UvCall::Other;
            }
        } else if IGNORED_WITH_VALUE
            .iter()
            .any(|o| o.starts_with("--") && arg.starts_with(&format!("{o}=")))
            || IGNORED_FLAGS.contains(&arg.as_str())
        {
        } else if arg.starts_with('-') {
            // An option the shim does not know: only a real uv may interpret it.
            return UvCall::Other;
        } else {
            specs.push(arg.clone());
        }
    }
    match target {
        Some(target) if !specs.is_empty() => UvCall::InstallInto { target, specs },
        _ => UvCall::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_agents_install_line_is_an_install_into_its_target() {
        assert_eq!(
            parse(&args(
                "pip install --target /opt/data/lazy-packages --constraint /tmp/c.txt honcho-ai==2.2.0 six"
            )),
            UvCall::InstallInto {
                target: "/opt/data/lazy-packages".into(),
                specs: vec!["honcho-ai==2.2.0".into(), "six".into()],
            }
        );
        assert_eq!(
            parse(&args("pip install --target=/t -q --constraint=/c x")),
            UvCall::InstallInto {
                target: "/t".into(),
                specs: vec!["x".into()],
            }
        );
    }

    #[test]
    fn anything_else_is_for_a_real_uv() {
        for line in [
            "--version",
            "pip install six",
            "pip install --target /t",
            "pip install --target",
            "pip install --target /t --editable . x",
            "pip uninstall --target /t x",
            "venv /tmp/v",
            "",
        ] {
            assert_eq!(parse(&args(line)), UvCall::Other, "{line}");
        }
    }
}
