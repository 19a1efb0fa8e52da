//! The import check a generation must pass before it becomes active.
//!
//! For every package the generation was asked to hold, a fresh core interpreter with the
//! generation appended to `sys.path` (the Hermes path order: core first) imports each of the
//! distribution's top-level modules: `top_level.txt` when the wheel has one, else the
//! top-level names in its file list. A compiled module built for another interpreter, a
//! dependency the core no longer satisfies, a half-written tree: each fails here, before the
//! pointer moves, instead of in a gateway.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::python::{Interpreter, QUERY_TIMEOUT};
use crate::spec::package_name;
use crate::{Environment, Error};

const CHECK_CODE: &str = r#"import json, re, importlib, importlib.metadata as md
def _norm(n):
    return re.sub(r"[-_.]+", "-", n).lower()
def _modules(d):
    top = d.read_text("top_level.txt")
    if top:
        names = [l.strip() for l in top.splitlines()]
    else:
        names = []
        for f in d.files or []:
            first = f.parts[0]
            if len(f.parts) > 1:
                if f.parts[1] == "__init__.py":
                    names.append(first)
            elif first.endswith(".py"):
                names.append(first[:-3])
            elif first.endswith(".so"):
                names.append(first.split(".")[0])
    return sorted({n for n in names if n and n.isidentifier()})
_found = {}
for _d in md.distributions():
    _name = _d.metadata["Name"] if _d.metadata else None
    if _name:
        _found.setdefault(_norm(_name), _d)
_failures = {}
for _n in sys.argv[1:]:
    _d = _found.get(_norm(_n))
    if _d is None:
        _failures[_n] = "not installed"
        continue
    for _m in _modules(_d):
        try:
            importlib.import_module(_m)
        except BaseException as _e:
            _failures[_n] = "import %s: %s: %s" % (_m, type(_e).__name__, str(_e).splitlines()[0] if str(_e) else "")
            break
print(json.dumps(_failures))
"#;

/// Imports what each of `specs` installed, from `generation` behind the core `python`.
/// Returns the packages that failed, each with why (`import yaml: ImportError: …`).
pub fn failed_imports(
    python: &Path,
    generation: &Path,
    specs: &[String],
    env: &Environment,
) -> Result<BTreeMap<String, String>, Error> {
    let names: Vec<&str> = specs.iter().filter_map(|s| package_name(s)).collect();
    if names.is_empty() {
        return Ok(BTreeMap::new());
    }
    let interp = Interpreter::new(
        python.to_path_buf(),
        Some(PathBuf::from(generation)),
        env.clone(),
    );
    let out = interp.run(CHECK_CODE, &names, QUERY_TIMEOUT)?;
    let detail = |d: String| Error::PythonQuery {
        python: python.to_path_buf(),
        detail: d,
    };
    if !out.success {
        return Err(detail(
            crate::process::tail(out.stderr.trim(), 400).to_string(),
        ));
    }
    // A module that prints on import must not spoil the answer: it is the last line.
    let last = out.stdout.trim().lines().last().unwrap_or_default();
    serde_json::from_str(last).map_err(|e| detail(e.to_string()))
}
