//! Asking the installed agent about itself ([`probe`]) and running a short piece of it
//! ([`run_agent_python`]).
//!
//! What the runtime must know of an agent release — its config schema version, whether its
//! gateway multiplexes by default — is read **from the agent**, never from a table of ours:
//! a release we have never seen (0.21, 0.22 from a source checkout) answers for itself. The
//! answer costs one interpreter start (about 1 s warm, 3 s cold for 0.20.1); callers that
//! ask often keep it ([`probe_cached`]).
//!
//! The interpreter runs isolated (`-I -B`: no `PYTHONPATH`, no user site, no bytecode written),
//! with stdin closed, as `identity` when given (and this process is root), and is killed after
//! [`PROBE_TIMEOUT`]. Importing the agent's config module creates its skeleton in
//! `HERMES_HOME`, so the probe points `HERMES_HOME` at a private temporary directory that it
//! removes: asking an agent its version writes nothing on the volume.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hermes_privilege::Identity;

use crate::agent::Agent;

/// How long the agent may take to answer (a cold start on a slow disk takes seconds).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(90);

/// The line prefix a script's answer is printed after (the agent may print other lines).
const ANSWER: &str = "HERMES_ANSWER ";

/// Reads the agent's schema and its gateway's multiplexing default. Runs with `HERMES_HOME`
/// in a temporary directory of its own (module doc).
const PROBE_SCRIPT: &str = r#"
import json, os, shutil, tempfile
home = tempfile.mkdtemp(prefix="hermes-probe-")
os.environ["HERMES_HOME"] = home
try:
    from hermes_cli.config import DEFAULT_CONFIG
    answer = {"config_version": DEFAULT_CONFIG.get("_config_version")}
    try:
        import dataclasses
        from gateway.config import GatewayConfig
        field = {f.name: f for f in dataclasses.fields(GatewayConfig)}.get("multiplex_profiles")
        answer["multiplex_default"] = None if field is None else bool(field.default)
    except Exception:
        answer["multiplex_default"] = None
    print("HERMES_ANSWER " + json.dumps(answer), flush=True)
finally:
    shutil.rmtree(home, ignore_errors=True)
"#;

/// What an agent says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AgentFacts {
    /// Its config schema version (`DEFAULT_CONFIG["_config_version"]`).
    pub config_version: u64,
    /// Whether its gateway multiplexes profiles when nothing says otherwise; `None` when it has
    /// no such setting.
    pub multiplex_default: Option<bool>,
}

/// Why the agent could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    /// The interpreter could not be started.
    #[error("cannot run `{python}`: {reason}")]
    Spawn {
        /// The interpreter.
        python: String,
        /// Why.
        reason: String,
    },
    /// It ran past [`PROBE_TIMEOUT`] and was killed.
    #[error("`{python}` did not answer within {} s", PROBE_TIMEOUT.as_secs())]
    Timeout {
        /// The interpreter.
        python: String,
    },
    /// It exited without an answer (an import error, a broken install).
    #[error("`{python}` gave no answer ({status}): {last_line}")]
    NoAnswer {
        /// The interpreter.
        python: String,
        /// Its exit status.
        status: String,
        /// The last line it wrote on stderr (usually the exception).
        last_line: String,
    },
    /// It answered something that is not the expected JSON.
    #[error("`{python}` answered `{answer}`, which is not what was asked")]
    BadAnswer {
        /// The interpreter.
        python: String,
        /// The answer line.
        answer: String,
    },
}

/// Asks `agent` for its [`AgentFacts`], running as `identity` when given.
///
/// # Errors
/// [`ProbeError`] when it cannot be run or does not answer.
pub fn probe(agent: &Agent, identity: Option<&Identity>) -> Result<AgentFacts, ProbeError> {
    let answer = run_agent_python(agent, PROBE_SCRIPT, &[], None, identity)?;
    let python = agent.python.display().to_string();
    let bad = || ProbeError::BadAnswer {
        python: python.clone(),
        answer: answer.to_string(),
    };
    let config_version = answer
        .get("config_version")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(bad)?;
    Ok(AgentFacts {
        config_version,
        multiplex_default: answer
            .get("multiplex_default")
            .and_then(serde_json::Value::as_bool),
    })
}

/// [`probe`], asked once per agent per process (a dashboard or a status view asks often; the
/// installed agent does not change under a running process), and remembered between
/// processes ([`ask_remembered`] in [`cache_file`]): each `hermes service status` used to start the agent's
/// interpreter (0.6 s of its 0.62 s). Failures are not kept.
pub fn probe_cached(agent: &Agent, identity: Option<&Identity>) -> Result<AgentFacts, ProbeError> {
    static CACHE: Mutex<Vec<(std::path::PathBuf, AgentFacts)>> = Mutex::new(Vec::new());
    if let Some(facts) = CACHE
        .lock()
        .ok()
        .and_then(|c| c.iter().find(|(cli, _)| *cli == agent.cli).map(|(_, f)| *f))
    {
        return Ok(facts);
    }
    let file = cache_file(|k| std::env::var(k).ok());
    let facts = probe_remembered(agent, identity, file.as_deref())?;
    if let Ok(mut cache) = CACHE.lock() {
        cache.push((agent.cli.clone(), facts));
    }
    Ok(facts)
}

/// [`probe`] through [`ask_remembered`] in `file`.
fn probe_remembered(
    agent: &Agent,
    identity: Option<&Identity>,
    file: Option<&Path>,
) -> Result<AgentFacts, ProbeError> {
    let bad = |answer: &serde_json::Value| ProbeError::BadAnswer {
        python: agent.python.display().to_string(),
        answer: answer.to_string(),
    };
    let answer = ask_remembered(agent, "facts", file, || {
        let facts = probe(agent, identity)?;
        serde_json::to_value(facts).map_err(|_| ProbeError::BadAnswer {
            python: agent.python.display().to_string(),
            answer: format!("{facts:?}"),
        })
    })?;
    serde_json::from_value(answer.clone()).map_err(|_| bad(&answer))
}

/// Where a process remembers agents' answers: `$XDG_CACHE_HOME/hermes/agent-facts.json`,
/// else under `$HOME/.cache` (a backup leaves `.cache` out); `None` without either.
pub fn cache_file(var: impl Fn(&str) -> Option<String>) -> Option<std::path::PathBuf> {
    let base = match var("XDG_CACHE_HOME").filter(|v| v.starts_with('/')) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            std::path::PathBuf::from(var("HOME").filter(|v| v.starts_with('/'))?).join(".cache")
        }
    };
    Some(base.join("hermes").join("agent-facts.json"))
}

/// One answer of an agent as remembered, under the [`fingerprint`] it was given with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Remembered {
    fingerprint: String,
    question: String,
    answer: serde_json::Value,
}

/// What identifies an installed agent's files: its console script and interpreter (path,
/// inode, size, modification time — `pip install` rewrites the script), its version and where
/// it came from. `None` for an editable install, whose source can change under the same files:
/// it is asked every time.
fn fingerprint(agent: &Agent) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    if agent
        .source
        .as_deref()
        .is_some_and(|s| s.starts_with("editable "))
    {
        return None;
    }
    let stamp = |path: &Path| -> Option<String> {
        let meta = std::fs::metadata(path).ok()?;
        Some(format!(
            "{}:{}:{}:{}.{}",
            path.display(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec()
        ))
    };
    Some(format!(
        "{}|{}|{}|{}",
        stamp(&agent.cli)?,
        stamp(&agent.python)?,
        agent.version.as_deref().unwrap_or("-"),
        agent.source.as_deref().unwrap_or("-")
    ))
}

/// Whether the cache directory of `file` is ours all the way up (owned by us, or root above
/// us, and writable by nobody else), created then: a process that wrote where someone else
/// can plant a link — root under a `HOME` on the service user's volume — could be led to write
/// anywhere, and could read answers someone else wrote. Elsewhere the agent is simply asked.
fn private_cache(file: &Path) -> bool {
    let Some(dir) = file.parent() else {
        return false;
    };
    // The deepest directory that exists is checked before anything is created below it.
    let Some(existing) = dir.ancestors().find(|a| a.is_dir()) else {
        return false;
    };
    hermes_privilege::SafeDir::create_private(existing, 0o700).is_ok()
        && hermes_privilege::SafeDir::create_private(dir, 0o700).is_ok()
}

/// The answer `ask` gives to `question` about `agent`, remembered between processes in the
/// cache `file` (the caller's [`cache_file`]) for as long as the agent's files are the same:
/// the agent's answers about itself (its facts, its platform catalogue) cost an interpreter
/// start of 1 to 6 s, and do not change until it is reinstalled. Failures are not kept. A
/// missing or unreadable file is no memory; one that cannot be written costs only the next
/// caller's time; one in a directory that is not ours is not used ([`private_cache`]).
///
/// # Errors
/// What `ask` returns, when nothing is remembered.
pub fn ask_remembered(
    agent: &Agent,
    question: &str,
    file: Option<&Path>,
    ask: impl FnOnce() -> Result<serde_json::Value, ProbeError>,
) -> Result<serde_json::Value, ProbeError> {
    let file = file.filter(|f| private_cache(f));
    let print = fingerprint(agent);
    let known = |file: Option<&Path>| -> Vec<Remembered> {
        file.and_then(|f| std::fs::read(f).ok())
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default()
    };
    if let Some(print) = &print
        && let Some(hit) = known(file)
            .into_iter()
            .find(|r| &r.fingerprint == print && r.question == question)
    {
        return Ok(hit.answer);
    }
    let answer = ask()?;
    if let (Some(file), Some(print)) = (file, print) {
        // Read again: another question may have been answered meanwhile. One answer per
        // console script and question: an upgraded agent's replaces its old one.
        let mut all = known(Some(file));
        let cli = format!("{}:", agent.cli.display());
        all.retain(|r| !(r.fingerprint.starts_with(&cli) && r.question == question));
        all.push(Remembered {
            fingerprint: print,
            question: question.to_owned(),
            answer: answer.clone(),
        });
        if let Ok(text) = serde_json::to_vec(&all) {
            let _ = hermes_home::atomic::write_atomic(file, &text, 0o600);
        }
    }
    Ok(answer)
}

/// Runs `script` with the agent's interpreter (isolated, stdin closed, `env` added, in `cwd`,
/// as `identity` when given and this process is root, killed after [`PROBE_TIMEOUT`]) and
/// returns the JSON it printed after [`ANSWER`] — the script's contract.
///
/// # Errors
/// [`ProbeError`] when it cannot be run, times out, or prints no answer.
pub fn run_agent_python(
    agent: &Agent,
    script: &str,
    env: &[(&str, &str)],
    cwd: Option<&Path>,
    identity: Option<&Identity>,
) -> Result<serde_json::Value, ProbeError> {
    let python = agent.python.display().to_string();
    let mut command = Command::new(&agent.python);
    command
        .args(["-I", "-B", "-c", script])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    if let Some(id) = identity.filter(|_| nix::unistd::geteuid().is_root()) {
        hermes_privilege::configure_command(&mut command, id);
    }
    let mut child = command.spawn().map_err(|e| ProbeError::Spawn {
        python: python.clone(),
        reason: e.to_string(),
    })?;
    // Read both pipes on threads so a chatty child never blocks on a full pipe.
    let stdout = child.stdout.take().map(drain);
    let stderr = child.stderr.take().map(drain);
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= PROBE_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ProbeError::Timeout { python });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                return Err(ProbeError::Spawn {
                    python,
                    reason: e.to_string(),
                });
            }
        }
    };
    let out = stdout.and_then(|t| t.join().ok()).unwrap_or_default();
    let err = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    let answer = out.lines().rev().find_map(|l| l.strip_prefix(ANSWER));
    match answer {
        Some(json) if status.success() => {
            serde_json::from_str(json).map_err(|_| ProbeError::BadAnswer {
                python,
                answer: json.chars().take(200).collect(),
            })
        }
        _ => Err(ProbeError::NoAnswer {
            python,
            status: status.to_string(),
            last_line: err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("(nothing on stderr)")
                .chars()
                .take(300)
                .collect(),
        }),
    }
}

/// Who a script about the files at `dir` runs as: `None` (this process's own user) unless
/// this process is root and `dir` (itself, a symlink not followed) belongs to another user,
/// then that user (from `/etc/passwd`, or by number when it has no entry). A root dashboard or CLI thus never
/// leaves the agent's files owned by root, which the agent's gateway, running as the service
/// user, could then no longer write.
pub fn owner_identity(dir: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let meta = std::fs::symlink_metadata(dir).ok()?;
    if meta.uid() == 0 {
        return None;
    }
    let files = hermes_privilege::SystemFiles::system();
    match Identity::lookup_uid(&files, meta.uid()) {
        Ok(Some(identity)) => Some(identity),
        _ => Some(Identity {
            name: meta.uid().to_string(),
            uid: meta.uid(),
            gid: meta.gid(),
            groups: vec![meta.gid()],
            home: dir.to_path_buf(),
            shell: "/bin/sh".into(),
        }),
    }
}

/// Reads a pipe to its end on a thread, keeping at most its last 1 MiB (an answer is one short
/// line, printed last): a child that writes more never blocks on a full pipe, and never grows
/// this process's memory.
fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    const KEEP: usize = 1 << 20;
    std::thread::spawn(move || {
        let mut kept: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            kept.extend_from_slice(&chunk[..n]);
            if kept.len() > 2 * KEEP {
                kept.drain(..kept.len() - KEEP);
            }
        }
        let start = kept.len().saturating_sub(KEEP);
        String::from_utf8_lossy(&kept[start..]).into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in agent whose `bin/python` is a shell script: it prints `out` and exits `code`.
    fn fake_agent(dir: &Path, out: &str, code: i32) -> Agent {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let python = bin.join("python");
        std::fs::write(
            &python,
            format!("#!/bin/sh\nprintf '%s\\n' '{out}'\necho 'Traceback: boom' >&2\nexit {code}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
        Agent {
            cli: bin.join("hermes"),
            python,
            version: Some("9.9.9".into()),
            source: None,
        }
    }

    #[test]
    fn the_answer_is_the_prefixed_line_among_others() {
        let dir = tempfile::tempdir().unwrap();
        let agent = fake_agent(
            dir.path(),
            "noise\nHERMES_ANSWER {\"config_version\": 44, \"multiplex_default\": true}",
            0,
        );
        assert_eq!(
            probe(&agent, None),
            Ok(AgentFacts {
                config_version: 44,
                multiplex_default: Some(true)
            })
        );
    }

    #[test]
    fn facts_are_remembered_between_processes_until_the_agent_changes() {
        let dir = tempfile::tempdir().unwrap();
        let mut agent = fake_agent(dir.path(), "x", 0);
        std::fs::write(&agent.cli, "#!/bin/sh\n").unwrap();
        // Each run of the interpreter is counted in `runs`.
        let runs = dir.path().join("runs");
        let script = |version: u64| {
            format!(
                "#!/bin/sh\necho run >>'{}'\necho 'HERMES_ANSWER {{\"config_version\": {version}}}'\n",
                runs.display()
            )
        };
        std::fs::write(&agent.python, script(40)).unwrap();
        let file = dir.path().join("cache/hermes/agent-facts.json");
        let count = || {
            std::fs::read_to_string(&runs)
                .unwrap_or_default()
                .lines()
                .count()
        };

        let first = probe_remembered(&agent, None, Some(&file)).unwrap();
        assert_eq!(first.config_version, 40);
        let again = probe_remembered(&agent, None, Some(&file)).unwrap();
        assert_eq!(
            (again, count()),
            (first, 1),
            "the second process is answered from the file"
        );

        // An upgrade rewrites the console script: asked again, and the new answer kept.
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&agent.python, script(41)).unwrap();
        std::fs::write(&agent.cli, "#!/bin/sh\n# 9.9.10\n").unwrap();
        agent.version = Some("9.9.10".into());
        assert_eq!(
            probe_remembered(&agent, None, Some(&file))
                .unwrap()
                .config_version,
            41
        );
        assert_eq!(
            probe_remembered(&agent, None, Some(&file))
                .unwrap()
                .config_version,
            41
        );
        assert_eq!(count(), 2);

        // An editable install is asked every time; a damaged file is no memory.
        agent.source = Some("editable /src".into());
        probe_remembered(&agent, None, Some(&file)).unwrap();
        assert_eq!(count(), 3);
        agent.source = None;
        std::fs::write(&file, "{not json").unwrap();
        assert_eq!(
            probe_remembered(&agent, None, Some(&file))
                .unwrap()
                .config_version,
            41
        );
        assert_eq!(count(), 4);
    }

    #[test]
    fn answers_to_different_questions_are_remembered_side_by_side() {
        let dir = tempfile::tempdir().unwrap();
        let agent = fake_agent(dir.path(), "HERMES_ANSWER {\"config_version\": 40}", 0);
        std::fs::write(&agent.cli, "#!/bin/sh\n").unwrap();
        let file = dir.path().join("cache/hermes/agent-facts.json");
        let asked = std::cell::Cell::new(0);
        let catalogue = || {
            asked.set(asked.get() + 1);
            Ok(serde_json::json!({"platforms": ["telegram"]}))
        };
        assert_eq!(
            ask_remembered(&agent, "catalogue", Some(&file), catalogue).unwrap()["platforms"][0],
            "telegram"
        );
        assert_eq!(
            probe_remembered(&agent, None, Some(&file))
                .unwrap()
                .config_version,
            40
        );
        // Both are kept: neither question is asked again.
        ask_remembered(&agent, "catalogue", Some(&file), catalogue).unwrap();
        assert_eq!(asked.get(), 1);
        let refused = || Err(ProbeError::Timeout { python: "x".into() });
        assert_eq!(
            ask_remembered(&agent, "facts", Some(&file), refused).unwrap()["config_version"],
            40
        );
        // A failure is not kept.
        assert!(ask_remembered(&agent, "other", Some(&file), refused).is_err());
        assert!(ask_remembered(&agent, "other", Some(&file), refused).is_err());
    }

    #[test]
    fn a_cache_in_a_directory_others_can_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        // Writable by everyone, not sticky: anyone could plant `.cache` as a link.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        let agent = fake_agent(dir.path(), "HERMES_ANSWER {\"config_version\": 40}", 0);
        std::fs::write(&agent.cli, "#!/bin/sh\n").unwrap();
        let file = shared.join(".cache/hermes/agent-facts.json");
        assert_eq!(
            probe_remembered(&agent, None, Some(&file))
                .unwrap()
                .config_version,
            40
        );
        assert!(!shared.join(".cache").exists(), "nothing created there");
    }

    #[test]
    fn the_cache_is_the_users() {
        let var = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            cache_file(var(&[("HOME", "/home/a")])),
            Some("/home/a/.cache/hermes/agent-facts.json".into())
        );
        assert_eq!(
            cache_file(var(&[("HOME", "/home/a"), ("XDG_CACHE_HOME", "/c")])),
            Some("/c/hermes/agent-facts.json".into())
        );
        assert_eq!(cache_file(var(&[("HOME", "relative")])), None);
    }

    #[test]
    fn a_chatty_agent_neither_blocks_nor_hides_its_answer() {
        let dir = tempfile::tempdir().unwrap();
        let agent = fake_agent(dir.path(), "x", 0);
        // 3 MiB of noise, more than a pipe holds and more than is kept, then the answer.
        std::fs::write(
            &agent.python,
            "#!/bin/sh\nhead -c 3145728 /dev/zero | tr '\\0' x\necho\necho 'HERMES_ANSWER {\"config_version\": 40}'\n",
        )
        .unwrap();
        let started = Instant::now();
        assert_eq!(probe(&agent, None).unwrap().config_version, 40);
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn a_broken_agent_says_why_in_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let agent = fake_agent(dir.path(), "nothing useful", 1);
        let err = probe(&agent, None).unwrap_err();
        assert!(matches!(err, ProbeError::NoAnswer { .. }), "{err:?}");
        assert!(err.to_string().contains("Traceback: boom"), "{err}");

        let agent = fake_agent(dir.path(), "HERMES_ANSWER {\"config_version\": \"x\"}", 0);
        let err = probe(&agent, None).unwrap_err();
        assert!(matches!(err, ProbeError::BadAnswer { .. }), "{err:?}");

        let missing = Agent {
            python: dir.path().join("nope/python"),
            ..agent
        };
        assert!(matches!(
            probe(&missing, None),
            Err(ProbeError::Spawn { .. })
        ));
    }

    /// As root, a script about another user's files runs as that user (by number when the
    /// account files do not know it); about root's own files, or when not root, as itself.
    #[test]
    fn scripts_about_another_users_files_run_as_that_user() {
        if hermes_test_support::skip_unless_root("switching to the files' owner needs root") {
            return;
        }
        use std::os::unix::fs::chown;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(owner_identity(dir.path()), None, "root's own directory");
        // Ids no account file holds (the host's users never matter).
        chown(dir.path(), Some(3_900_000_001), Some(3_900_000_002)).unwrap();
        let id = owner_identity(dir.path()).unwrap();
        assert_eq!(
            (id.uid, id.gid, id.groups.clone()),
            (3_900_000_001, 3_900_000_002, vec![3_900_000_002])
        );
        assert_eq!(id.name, "3900000001");
        assert_eq!(owner_identity(&dir.path().join("missing")), None);
    }

    /// The real agents answer for themselves — 0.19.0 from PyPI (schema 33) and the 0.20.1
    /// source tree (35, multiplexing off by default) — and write nothing in the `HERMES_HOME`
    /// they were started with.
    #[test]
    fn the_original_agents_answer_for_themselves() {
        for (original, schema) in [
            (hermes_test_support::original_agent(), 33),
            (hermes_test_support::fixture_agent(), 35),
        ] {
            let Some(original) = original else { return };
            let agent = Agent::at(&original.hermes).unwrap();
            let home = tempfile::tempdir().unwrap();
            let answer = run_agent_python(
                &agent,
                PROBE_SCRIPT,
                &[("HERMES_HOME", home.path().to_str().unwrap())],
                None,
                None,
            )
            .unwrap();
            assert_eq!(answer["config_version"], schema, "{answer}");
            assert_eq!(
                std::fs::read_dir(home.path()).unwrap().count(),
                0,
                "the probe wrote into HERMES_HOME"
            );
            let facts = probe(&agent, None).unwrap();
            assert_eq!(facts.config_version, schema);
            assert_eq!(facts.multiplex_default, Some(false));
        }
    }
}
