//! Running Python with the Hermes path order.
//!
//! An [`Interpreter`] is a core Python (a venv's `bin/python3`) plus, on sealed
//! images, the durable target. Every piece of Python Hermes runs goes through
//! [`Interpreter::command`], which prefixes the code with [`BOOTSTRAP`]: the
//! target is added with `site.addsitedir` (so `.pth` files in it work) and then
//! every entry that was not on `sys.path` before is moved to the END. Core
//! packages therefore always win a name collision. `PYTHONPATH` is never used
//! for the target because it would put it FIRST.
//!
//! Children run with `PYTHONDONTWRITEBYTECODE=1` so that merely querying a
//! read-only core venv never tries to write `__pycache__` into it, and the
//! bootstrap removes the current directory that `python -c` puts first on
//! `sys.path`, so no module is ever imported from the caller's directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::{Captured, run_captured};
use crate::spec::{package_name, specifier};
use crate::version::satisfies;
use crate::{Environment, Error};

/// Python prelude that drops the current directory from `sys.path` (`-c`
/// puts it first, so a `json.py` in the caller's directory would be imported),
/// appends the durable target (argv[1], may be empty) to the END of
/// `sys.path`, then drops the target from argv.
pub const BOOTSTRAP: &str = r#"import sys, os, site
if sys.path and sys.path[0] == "":
    del sys.path[0]
def _hermes_activate(t):
    if not t or not os.path.isdir(t) or t in sys.path:
        return
    before = list(sys.path)
    site.addsitedir(t)
    sys.path[:] = [p for p in sys.path if p in before] + [p for p in sys.path if p not in before]
_hermes_activate(sys.argv[1] if len(sys.argv) > 1 else "")
del sys.argv[1:2]
del _hermes_activate
"#;

const VERSIONS_CODE: &str = r#"import json, importlib.metadata as _m
_out = {}
for _n in sys.argv[1:]:
    try:
        _out[_n] = _m.version(_n)
    except Exception:
        _out[_n] = None
print(json.dumps(_out))
"#;

const INFO_CODE: &str = r#"import json, sysconfig
print(json.dumps({
    "abi": "%d.%d:%s" % (sys.version_info[0], sys.version_info[1], sysconfig.get_config_var("EXT_SUFFIX") or ""),
    "version": "%d.%d.%d" % sys.version_info[:3],
    "prefix": sys.prefix,
    "site_packages": sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}),
}))
"#;

/// Time limit for short Python queries.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(60);

/// What the interpreter says about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct PythonInfo {
    /// `"<major>.<minor>:<EXT_SUFFIX>"`, the content of the `.python-abi` stamp.
    pub abi: String,
    /// `major.minor.micro`.
    pub version: String,
    /// `sys.prefix`.
    pub prefix: PathBuf,
    /// The environment's site-packages directories.
    pub site_packages: Vec<PathBuf>,
}

/// The interpreter of a venv: `bin/python3`, else `bin/python`.
pub fn venv_python(venv: &Path) -> Option<PathBuf> {
    ["python3", "python"]
        .iter()
        .map(|n| venv.join("bin").join(n))
        .find(|p| p.exists())
}

/// A core Python plus the optional durable target, run with the Hermes path order.
#[derive(Debug, Clone)]
pub struct Interpreter {
    python: PathBuf,
    target: Option<PathBuf>,
    env: Environment,
}

impl Interpreter {
    /// An interpreter at `python`, with `target` appended to `sys.path`.
    pub fn new(python: PathBuf, target: Option<PathBuf>, env: Environment) -> Self {
        Self {
            python,
            target,
            env,
        }
    }

    /// The interpreter path.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// The durable target appended to `sys.path`, if any.
    pub fn target(&self) -> Option<&Path> {
        self.target.as_deref()
    }

    /// `python -c <BOOTSTRAP + code> <target> args...` with the snapshot's
    /// environment (minus credentials).
    pub fn command(&self, code: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.python);
        cmd.env_clear();
        cmd.envs(self.env.child_vars());
        cmd.env("PYTHONDONTWRITEBYTECODE", "1");
        let target = self
            .target
            .as_deref()
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_default();
        cmd.arg("-c")
            .arg(format!("{BOOTSTRAP}{code}"))
            .arg(target)
            .args(args);
        cmd
    }

    /// Runs code with the bootstrap, capturing output.
    pub fn run(&self, code: &str, args: &[&str], timeout: Duration) -> Result<Captured, Error> {
        run_captured(&mut self.command(code, args), timeout)
    }

    fn run_json<T: serde::de::DeserializeOwned>(
        &self,
        code: &str,
        args: &[&str],
    ) -> Result<T, Error> {
        let out = self.run(code, args, QUERY_TIMEOUT)?;
        if !out.success {
            return Err(Error::PythonQuery {
                python: self.python.clone(),
                detail: crate::process::tail(out.stderr.trim(), 400).to_string(),
            });
        }
        serde_json::from_str(out.stdout.trim()).map_err(|e| Error::PythonQuery {
            python: self.python.clone(),
            detail: e.to_string(),
        })
    }

    /// ABI, version, prefix and site-packages of the interpreter.
    pub fn info(&self) -> Result<PythonInfo, Error> {
        self.run_json(INFO_CODE, &[])
    }

    /// Installed version of each distribution, as a fresh interpreter with the
    /// Hermes path order sees it (core first, so core wins a collision).
    pub fn installed_versions(
        &self,
        names: &[&str],
    ) -> Result<BTreeMap<String, Option<String>>, Error> {
        if names.is_empty() {
            return Ok(BTreeMap::new());
        }
        self.run_json(VERSIONS_CODE, names)
    }

    /// The specs that are not satisfied (not installed, or installed at a
    /// version outside the specifier). An unparseable version counts as
    /// satisfied; an unsafe spec counts as missing.
    pub fn missing(&self, specs: &[String]) -> Result<Vec<String>, Error> {
        let names: Vec<&str> = specs.iter().filter_map(|s| package_name(s)).collect();
        let versions = self.installed_versions(&names)?;
        Ok(specs
            .iter()
            .filter(|s| !spec_satisfied(s, &versions))
            .cloned()
            .collect())
    }
}

/// Is `spec` satisfied by the `versions` map (as returned by
/// [`Interpreter::installed_versions`])?
pub fn spec_satisfied(spec: &str, versions: &BTreeMap<String, Option<String>>) -> bool {
    let (Some(name), Some(spec_tail)) = (package_name(spec), specifier(spec)) else {
        return false;
    };
    match versions.get(name) {
        Some(Some(v)) => satisfies(v, spec_tail).unwrap_or(true),
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::print_stdout)]
mod tests {
    use super::*;

    fn system_python() -> Option<Interpreter> {
        let env = Environment::from_process();
        let py = env.which("python3")?;
        Some(Interpreter::new(py, None, env))
    }

    #[test]
    fn never_imports_from_the_current_directory() {
        let Some(py) = system_python() else {
            hermes_test_support::skip("python3 not on PATH");
            return;
        };
        let cwd = tempfile::tempdir().unwrap();
        std::fs::write(
            cwd.path().join("json.py"),
            "raise SystemExit('planted json.py ran')\n",
        )
        .unwrap();
        for code in [VERSIONS_CODE, INFO_CODE] {
            let mut cmd = py.command(code, &[]);
            cmd.current_dir(cwd.path());
            let out = run_captured(&mut cmd, QUERY_TIMEOUT).unwrap();
            assert!(out.success, "{}", out.stderr);
            assert!(!out.stderr.contains("planted"), "{}", out.stderr);
        }
        let mut cmd = py.command("print('' in sys.path, sys.path[0])", &[]);
        cmd.current_dir(cwd.path());
        let out = run_captured(&mut cmd, QUERY_TIMEOUT).unwrap();
        assert!(out.stdout.starts_with("False "), "{}", out.stdout);
    }

    #[test]
    fn satisfaction_uses_versions() {
        let mut v = BTreeMap::new();
        v.insert("a".to_string(), Some("1.5".to_string()));
        v.insert("b".to_string(), None);
        v.insert("c".to_string(), Some("weird version".to_string()));
        assert!(spec_satisfied("a>=1,<2", &v));
        assert!(!spec_satisfied("a>=2", &v));
        assert!(!spec_satisfied("b", &v));
        assert!(
            spec_satisfied("c==1", &v),
            "unparseable installed version must not churn"
        );
        assert!(!spec_satisfied("x; y", &v));
    }

    #[test]
    fn queries_a_real_interpreter() {
        let Some(py) = system_python() else {
            hermes_test_support::skip("python3 not on PATH");
            return;
        };
        let info = py.info().unwrap();
        assert!(info.abi.starts_with("3."), "{}", info.abi);
        let v = py
            .installed_versions(&["pip", "hermes-surely-not-installed"])
            .unwrap();
        assert_eq!(v.get("hermes-surely-not-installed"), Some(&None));
        let missing = py
            .missing(&["hermes-surely-not-installed".to_string()])
            .unwrap();
        assert_eq!(missing, vec!["hermes-surely-not-installed".to_string()]);
    }

    #[test]
    fn bootstrap_appends_target_at_the_end() {
        let Some(py) = system_python() else {
            hermes_test_support::skip("python3 not on PATH");
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let py = Interpreter::new(
            py.python().to_path_buf(),
            Some(dir.path().to_path_buf()),
            Environment::from_process(),
        );
        let out = py
            .run(
                "print(sys.path[-1]); print(sys.argv[1:])",
                &["x"],
                QUERY_TIMEOUT,
            )
            .unwrap();
        assert!(out.success, "{}", out.stderr);
        let mut lines = out.stdout.lines();
        assert_eq!(lines.next(), Some(dir.path().to_str().unwrap()));
        assert_eq!(lines.next(), Some("['x']"));
    }
}
