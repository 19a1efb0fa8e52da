//! The messaging platforms the installed agent supports, as its own dashboard lists them
//! (`hermes_cli.web_server._messaging_platform_catalog()`, in 0.19 and 0.20): an id, a name, a
//! description, a docs link and the platform's env vars, the required ones marked.
//!
//! Asked of the agent, never from a table of ours: 0.19.0 lists 23 platforms; a 0.20 tree lists
//! its built-in ones plus the adapters under its `plugins/platforms/` (the 0.20.1 fixture is
//! trimmed and lists 6). Importing the module takes 2 s (0.19.0) to 4–6 s (0.20.1) and writes a
//! home skeleton, so the script runs with `HERMES_HOME` in a temporary directory it removes.
//! The answer is kept for the life of the process, per agent, and between processes for as
//! long as the agent's files are the same ([`agent_probe::ask_remembered`]): a restarted
//! dashboard lists the platforms without starting the agent.

use std::path::Path;
use std::sync::Mutex;

use hermes_services::agent::Agent;
use hermes_services::agent_probe::{self, ProbeError};
use serde::{Deserialize, Serialize};

/// One env var of a platform, as the agent describes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvVar {
    /// The variable's name (`TELEGRAM_BOT_TOKEN`).
    pub key: String,
    /// Whether the platform cannot connect without it.
    pub required: bool,
    /// The agent's label for it.
    pub prompt: String,
    /// The agent's description.
    pub description: String,
    /// Whether the value is a secret (the page's field hides what is typed).
    pub is_password: bool,
    /// Whether the agent's own page folds it away as advanced.
    pub advanced: bool,
}

/// One platform.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    /// Its id: the key under `platforms:` in `config.yaml` and in `gateway_state.json`.
    pub id: String,
    /// Its name.
    pub name: String,
    /// What it is.
    pub description: String,
    /// Where its setup is documented.
    pub docs_url: String,
    /// Its env vars.
    pub env_vars: Vec<EnvVar>,
}

impl Platform {
    /// Whether `key` is one of this platform's variables (the only ones a write may touch).
    pub fn owns(&self, key: &str) -> bool {
        self.env_vars.iter().any(|v| v.key == key)
    }
}

/// The script: the catalogue as JSON, with nothing written on the volume (module doc).
const SCRIPT: &str = r#"
import json, os, shutil, tempfile
home = tempfile.mkdtemp(prefix="hermes-catalog-")
os.environ["HERMES_HOME"] = home
try:
    from hermes_cli import web_server as ws
    info = getattr(ws, "_messaging_env_info", None)
    platforms = []
    for entry in ws._messaging_platform_catalog():
        required = set(entry.get("required_env", ()))
        keys = []
        for key in entry.get("env_vars", ()):
            meta = info(key) if info else {}
            keys.append({
                "key": key, "required": key in required,
                "prompt": meta.get("prompt") or key,
                "description": meta.get("description") or "",
                "is_password": bool(meta.get("is_password", True)),
                "advanced": bool(meta.get("advanced")),
            })
        platforms.append({
            "id": entry["id"], "name": entry.get("name") or entry["id"],
            "description": entry.get("description") or "",
            "docs_url": entry.get("docs_url") or "", "env_vars": keys,
        })
    print("HERMES_ANSWER " + json.dumps({"platforms": platforms}), flush=True)
finally:
    shutil.rmtree(home, ignore_errors=True)
"#;

/// The catalogue of `agent`, asked once per installed agent, remembered in `file` (the
/// dashboard user's [`agent_probe::cache_file`]); failures are not kept: the next request asks
/// again.
///
/// # Errors
/// [`ProbeError`] when the agent cannot be run or answers something else.
pub fn platforms(agent: &Agent, file: Option<&Path>) -> Result<Vec<Platform>, ProbeError> {
    type Key = (std::path::PathBuf, Option<std::path::PathBuf>);
    static CACHE: Mutex<Vec<(Key, Vec<Platform>)>> = Mutex::new(Vec::new());
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // What the file remembers, kept for the process: per agent and per file.
    let key = (agent.cli.clone(), file.map(Path::to_path_buf));
    if let Some((_, known)) = cache.iter().find(|(k, _)| *k == key) {
        return Ok(known.clone());
    }
    // Held while asking: a burst of first requests starts one interpreter, not one each.
    let answer = agent_probe::ask_remembered(agent, "messaging-platforms", file, || {
        agent_probe::run_agent_python(agent, SCRIPT, &[], None, None)
    })?;
    let platforms: Vec<Platform> =
        serde_json::from_value(answer["platforms"].clone()).map_err(|_| ProbeError::BadAnswer {
            python: agent.python.display().to_string(),
            answer: answer.to_string().chars().take(200).collect(),
        })?;
    cache.push((key, platforms.clone()));
    Ok(platforms)
}
