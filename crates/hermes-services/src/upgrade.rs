//! The volume never goes backwards, and goes forwards safely: the installed agent's config
//! schema against the one the volume was written with.
//!
//! Words:
//! * **volume schema** — the newest `_config_version` of any profile's `config.yaml`
//!   ([`hermes_home::schema::VolumeSchema::newest`]): the release that last migrated the volume.
//! * **agent schema** — the installed agent's own (`agent_probe`), e.g. 33 for 0.19.0.
//! * **downgrade** — an agent schema below the volume schema ([`check`]): the older agent would
//!   misread the newer keys and its next write would drop them. Its gateway does not start
//!   (exit 78, nothing written) unless [`ALLOW_DOWNGRADE_VAR`] says so, and then with a warning.
//! * **migration** — a profile whose file is older than the agent is migrated by the agent's
//!   own `migrate_config` (as the original's container boot does), after its `config.yaml` and
//!   `.env` were copied aside ([`Backup`]); a migration that fails or does not reach the
//!   agent's schema is undone from those copies ([`Backup::restore`]).
//!
//! The boot (PID 1) does the migrations; `hermes gateway run` of the agent engine checks
//! before it starts the agent ([`gate_agent_start`]), so a supervisor start, a restart or an
//! operator's `gateway start` is refused in the same words.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hermes_home::schema::VolumeSchema;
use hermes_privilege::Identity;

use crate::agent::Agent;
use crate::agent_probe::{self, AgentFacts, ProbeError};

/// Set to a truthy word: run an agent older than the volume anyway (with a warning).
pub const ALLOW_DOWNGRADE_VAR: &str = "HERMES_ALLOW_AGENT_DOWNGRADE";

/// Set to a truthy word: the boot migrates no config (the original's switch).
pub const SKIP_MIGRATION_VAR: &str = "HERMES_SKIP_CONFIG_MIGRATION";

/// Set by the boot in a gateway service's environment when its profile's migration failed:
/// the reason. The agent's gateway then stays parked (exit 78) while the profile's file is
/// still older than the agent.
pub const MIGRATION_FAILED_VAR: &str = "HERMES_CONFIG_MIGRATION_FAILED";

/// Why an agent's gateway must not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpgradeProblem {
    /// The agent is older than the volume.
    #[error(
        "the volume was written with config schema {volume} (`{}`), newer than this image's \
         hermes-agent {} (schema {agent}): an older agent would misread and rewrite it",
        file.display(), agent_version.as_deref().unwrap_or("(unknown version)")
    )]
    Downgrade {
        /// The volume schema.
        volume: u64,
        /// The file that carries it.
        file: PathBuf,
        /// The agent's version.
        agent_version: Option<String>,
        /// The agent schema.
        agent: u64,
    },
    /// The boot's migration of this profile failed and its file is still old.
    #[error("the boot could not migrate `{}` to the agent's schema {agent}: {reason}", file.display())]
    MigrationFailed {
        /// The profile's `config.yaml`.
        file: PathBuf,
        /// The agent schema.
        agent: u64,
        /// What the boot said.
        reason: String,
    },
}

impl UpgradeProblem {
    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        Some(match self {
            UpgradeProblem::Downgrade { .. } => format!(
                "run an image whose hermes-agent is at least the release that wrote the volume \
                 (docs/docker.md: HERMES_AGENT_SOURCE), restore a backup made before the \
                 upgrade, or set {ALLOW_DOWNGRADE_VAR}=1 to run this agent anyway"
            ),
            UpgradeProblem::MigrationFailed { .. } => "the original files are restored; see \
                 `logs/container-boot.log`, fix the file (or migrate it with the agent's `hermes \
                 config migrate`), then start the gateway again"
                .into(),
        })
    }
}

/// Whether `agent` may serve `volume`: an agent schema at least the volume's, or a downgrade
/// the operator allowed (`Ok(Some(warning))`).
///
/// # Errors
/// [`UpgradeProblem::Downgrade`].
pub fn check(
    volume: &VolumeSchema,
    agent: &Agent,
    facts: AgentFacts,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, UpgradeProblem> {
    let Some((newest, file)) = volume.newest() else {
        return Ok(None);
    };
    if newest <= facts.config_version {
        return Ok(None);
    }
    let problem = UpgradeProblem::Downgrade {
        volume: newest,
        file: file.to_path_buf(),
        agent_version: agent.version.clone(),
        agent: facts.config_version,
    };
    if var(ALLOW_DOWNGRADE_VAR).is_some_and(|v| hermes_errors::switch::is_truthy(&v)) {
        return Ok(Some(format!(
            "warning: {problem}; running it anyway because {ALLOW_DOWNGRADE_VAR} is set"
        )));
    }
    Err(problem)
}

/// The check `hermes gateway run` makes before it hands a profile to the agent: the volume
/// under `root` against the agent ([`check`]), then a failed boot migration of the profile in
/// `dir` ([`MIGRATION_FAILED_VAR`]) while its file is still older than the agent. Warnings (an
/// allowed downgrade, an agent that cannot say its schema) are returned for the log: a probe
/// failure lets the agent start, since it then fails in its own words.
///
/// # Errors
/// [`UpgradeProblem`]: the gateway exits 78.
pub fn gate_agent_start(
    root: &Path,
    dir: &Path,
    agent: &Agent,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, UpgradeProblem> {
    let facts = match agent_probe::probe_cached(agent, None) {
        Ok(facts) => facts,
        Err(e) => {
            return Ok(vec![format!(
                "warning: cannot read hermes-agent's config schema ({e}); the volume's is not \
                 checked"
            )]);
        }
    };
    let mut warnings = Vec::new();
    warnings.extend(check(&VolumeSchema::read(root), agent, facts, var)?);
    if let Some(reason) = var(MIGRATION_FAILED_VAR).filter(|r| !r.trim().is_empty()) {
        let file = hermes_home::layout::config_path(dir);
        let still_old = hermes_home::schema::stamp_of(&file)
            .ok()
            .flatten()
            .is_some_and(|v| v < facts.config_version);
        if still_old {
            return Err(UpgradeProblem::MigrationFailed {
                file,
                agent: facts.config_version,
                reason,
            });
        }
    }
    Ok(warnings)
}

/// Copies of a profile's `config.yaml` and `.env`, taken before a migration, beside them as
/// `<name>.bak-<stamp>` (the original's names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backup {
    /// Each original file and its copy.
    pub copies: Vec<(PathBuf, PathBuf)>,
}

/// The files of a profile a migration may change.
const MIGRATED_FILES: [&str; 2] = [
    hermes_home::layout::CONFIG_FILE,
    hermes_home::layout::ENV_FILE,
];

impl Backup {
    /// Copies the migrated files of the profile in `dir` that exist, stamped `stamp` (e.g.
    /// `20261201T101500Z`). A symlink is never followed (it is refused: the migration would
    /// write through it); a copy never replaces a file (`.1`, `.2`, … when the name is taken).
    ///
    /// # Errors
    /// One line naming the file that could not be copied; copies already made are removed.
    pub fn take(dir: &Path, stamp: &str) -> Result<Backup, String> {
        let mut backup = Backup { copies: Vec::new() };
        for name in MIGRATED_FILES {
            let original = dir.join(name);
            match copy_aside(&original, stamp) {
                Ok(Some(copy)) => backup.copies.push((original, copy)),
                Ok(None) => {}
                Err(e) => {
                    backup.discard();
                    return Err(format!("cannot copy `{}` aside: {e}", original.display()));
                }
            }
        }
        Ok(backup)
    }

    /// Puts every copy back over its original (atomically, with the original's mode); the
    /// copies stay. Returns the files restored.
    ///
    /// # Errors
    /// One line per file that could not be restored (the copy is still there).
    pub fn restore(&self) -> Result<Vec<PathBuf>, String> {
        let mut restored = Vec::new();
        let mut failed = Vec::new();
        for (original, copy) in &self.copies {
            let put_back = fs::read(copy).map_err(|e| e.to_string()).and_then(|bytes| {
                let mode = fs::metadata(copy)
                    .map(|m| m.mode() & 0o7777)
                    .unwrap_or(0o600);
                hermes_home::atomic::write_atomic(original, &bytes, mode)
                    .map_err(|e| hermes_errors::one_line(&e))
            });
            match put_back {
                Ok(()) => restored.push(original.clone()),
                Err(e) => failed.push(format!(
                    "cannot restore `{}` from `{}`: {e}",
                    original.display(),
                    copy.display()
                )),
            }
        }
        if failed.is_empty() {
            Ok(restored)
        } else {
            Err(failed.join("; "))
        }
    }

    /// Removes the copies (a backup that was never needed because nothing ran).
    fn discard(&self) {
        for (_, copy) in &self.copies {
            let _ = fs::remove_file(copy);
        }
    }

    /// The copies' paths, for the log.
    pub fn describe(&self) -> String {
        if self.copies.is_empty() {
            return "none".into();
        }
        self.copies
            .iter()
            .map(|(_, c)| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Copies `original` (if it is a regular file) to a new `<name>.bak-<stamp>[.N]` beside it,
/// with its mode, without following a symlink at either end.
fn copy_aside(original: &Path, stamp: &str) -> io::Result<Option<PathBuf>> {
    let mut source = match fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(original)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(io::Error::other("it is a symlink"));
        }
        Err(e) => return Err(e),
    };
    let meta = source.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    let mut bytes = Vec::new();
    source.read_to_end(&mut bytes)?;
    let name = original
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    for n in 0..1000 {
        let suffix = if n == 0 {
            String::new()
        } else {
            format!(".{n}")
        };
        let copy = original.with_file_name(format!("{name}.bak-{stamp}{suffix}"));
        let created = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(meta.mode() & 0o777)
            .open(&copy);
        match created {
            Ok(mut f) => {
                f.write_all(&bytes)?;
                f.sync_all()?;
                return Ok(Some(copy));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free backup name"))
}

/// Whether this process (its *effective* ids) may replace `path`: a read-only file, a
/// read-only mount (a Kubernetes ConfigMap) or a directory it cannot write is not migrated.
pub fn replaceable(path: &Path) -> bool {
    use nix::unistd::{AccessFlags, faccessat};
    let effective = nix::fcntl::AtFlags::AT_EACCESS;
    let dir = path.parent().unwrap_or(Path::new("."));
    faccessat(nix::fcntl::AT_FDCWD, path, AccessFlags::W_OK, effective).is_ok()
        && faccessat(nix::fcntl::AT_FDCWD, dir, AccessFlags::W_OK, effective).is_ok()
}

/// Runs the agent's own migration of the profile in `dir` (`HERMES_HOME` = `dir`, as the
/// agent sees a profile) and returns the schema before and after. Takes no backup: callers
/// take a [`Backup`] first and restore it when this fails.
const MIGRATE_SCRIPT: &str = r#"
import json
from hermes_cli.config import check_config_version, migrate_config
before, latest = check_config_version()
if before < latest:
    migrate_config(interactive=False, quiet=True)
after, latest = check_config_version()
print("HERMES_ANSWER " + json.dumps({"before": before, "after": after, "latest": latest}), flush=True)
"#;

/// What one profile's migration did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// The file's schema before.
    pub before: u64,
    /// After.
    pub after: u64,
}

/// Runs the agent's migration of the profile in `dir` as `identity` (module doc).
///
/// # Errors
/// One line: the agent failed, or the file did not reach the agent's schema.
pub fn migrate_profile(
    agent: &Agent,
    dir: &Path,
    identity: Option<&Identity>,
) -> Result<Migrated, String> {
    let home = dir.to_string_lossy();
    let answer = agent_probe::run_agent_python(
        agent,
        MIGRATE_SCRIPT,
        &[("HERMES_HOME", home.as_ref())],
        Some(dir),
        identity,
    )
    .map_err(|e: ProbeError| e.to_string())?;
    let field = |k: &str| answer.get(k).and_then(serde_json::Value::as_u64);
    let (Some(before), Some(after), Some(latest)) =
        (field("before"), field("after"), field("latest"))
    else {
        return Err(format!("the migration answered `{answer}`"));
    };
    if after < latest {
        return Err(format!(
            "the migration left the file at schema {after}, not the agent's {latest}"
        ));
    }
    Ok(Migrated { before, after })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn agent() -> Agent {
        Agent {
            cli: "/a/bin/hermes".into(),
            python: "/a/bin/python".into(),
            version: Some("0.19.0".into()),
            source: None,
        }
    }

    fn volume(root: &Path, root_schema: &str, work_schema: Option<&str>) -> VolumeSchema {
        fs::write(root.join("SOUL.md"), "s").unwrap();
        fs::write(root.join("config.yaml"), root_schema).unwrap();
        if let Some(text) = work_schema {
            let work = root.join("profiles/work");
            fs::create_dir_all(&work).unwrap();
            fs::write(work.join("SOUL.md"), "s").unwrap();
            fs::write(work.join("config.yaml"), text).unwrap();
        }
        VolumeSchema::read(root)
    }

    #[test]
    fn an_older_agent_is_refused_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let v = volume(
            dir.path(),
            "_config_version: 33\n",
            Some("_config_version: 35\n"),
        );
        let facts = AgentFacts {
            config_version: 33,
            multiplex_default: None,
        };
        let none = |_: &str| None;
        let err = check(&v, &agent(), facts, &none).unwrap_err();
        let line = err.to_string();
        assert!(line.contains("schema 35"), "{line}");
        assert!(line.contains("profiles/work/config.yaml"), "{line}");
        assert!(line.contains("hermes-agent 0.19.0 (schema 33)"), "{line}");
        assert!(err.hint().unwrap().contains(ALLOW_DOWNGRADE_VAR));
        let allow = |k: &str| (k == ALLOW_DOWNGRADE_VAR).then(|| "yes".to_owned());
        let warning = check(&v, &agent(), facts, &allow).unwrap().unwrap();
        assert!(warning.starts_with("warning: "), "{warning}");
        let no = |k: &str| (k == ALLOW_DOWNGRADE_VAR).then(|| "0".to_owned());
        assert!(check(&v, &agent(), facts, &no).is_err());
        // The same or a newer agent is fine.
        for schema in [35, 44] {
            let facts = AgentFacts {
                config_version: schema,
                multiplex_default: None,
            };
            assert_eq!(check(&v, &agent(), facts, &none), Ok(None));
        }
    }

    #[test]
    fn a_backup_copies_aside_and_restores_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("config.yaml"), "_config_version: 33\n# mine\n").unwrap();
        fs::write(d.join(".env"), "KEY=v\n").unwrap();
        fs::set_permissions(d.join(".env"), fs::Permissions::from_mode(0o600)).unwrap();
        let backup = Backup::take(d, "20261201T000000Z").unwrap();
        assert_eq!(backup.copies.len(), 2);
        assert!(d.join("config.yaml.bak-20261201T000000Z").is_file());
        let env_copy = d.join(".env.bak-20261201T000000Z");
        assert_eq!(fs::metadata(&env_copy).unwrap().mode() & 0o777, 0o600);
        // A second backup in the same second gets a new name.
        let again = Backup::take(d, "20261201T000000Z").unwrap();
        assert!(
            again
                .describe()
                .contains("config.yaml.bak-20261201T000000Z.1")
        );

        fs::write(d.join("config.yaml"), "broken: [").unwrap();
        fs::write(d.join(".env"), "").unwrap();
        let restored = backup.restore().unwrap();
        assert_eq!(restored.len(), 2);
        assert_eq!(
            fs::read_to_string(d.join("config.yaml")).unwrap(),
            "_config_version: 33\n# mine\n"
        );
        assert_eq!(fs::read_to_string(d.join(".env")).unwrap(), "KEY=v\n");
        assert_eq!(fs::metadata(d.join(".env")).unwrap().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_symlinked_file_is_not_backed_up_or_followed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "x").unwrap();
        fs::write(d.join("config.yaml"), "a: 1\n").unwrap();
        symlink(outside.path().join("secret"), d.join(".env")).unwrap();
        let err = Backup::take(d, "s").unwrap_err();
        assert!(err.contains(".env") && err.contains("symlink"), "{err}");
        // The copy already made is removed again.
        assert!(!d.join("config.yaml.bak-s").exists());
    }

    #[test]
    fn a_read_only_file_is_not_replaceable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.yaml");
        fs::write(&file, "a: 1\n").unwrap();
        assert!(replaceable(&file));
        if nix::unistd::geteuid().is_root() {
            // Root may write anything; a read-only mount is what stops it (tested in Docker).
            return;
        }
        fs::set_permissions(&file, fs::Permissions::from_mode(0o444)).unwrap();
        assert!(!replaceable(&file));
    }

    /// The real agents' migration: a 0.19.0 volume (schema 33) migrated by 0.20.1 reaches 35,
    /// keeps its settings, and the backup holds the file as it was.
    #[test]
    fn the_fixture_agent_migrates_a_volume_of_0_19() {
        let (Some(old), Some(new)) = (
            hermes_test_support::original_agent(),
            hermes_test_support::fixture_agent(),
        ) else {
            return;
        };
        let home = tempfile::tempdir().unwrap();
        let run = |hermes: &Path, args: &[&str]| {
            let out = std::process::Command::new(hermes)
                .args(args)
                .env("HERMES_HOME", home.path())
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
        };
        // As 0.19.0 leaves a volume it set up (`hermes setup` stamps its schema; `config set`
        // keeps the stamp).
        fs::write(home.path().join("config.yaml"), "_config_version: 33\n").unwrap();
        run(
            &old.hermes,
            &["config", "set", "model.default", "kept-model"],
        );
        let before = fs::read(home.path().join("config.yaml")).unwrap();
        assert_eq!(
            hermes_home::schema::stamp_of(&home.path().join("config.yaml")),
            Ok(Some(33))
        );
        let agent = Agent::at(&new.hermes).unwrap();
        let backup = Backup::take(home.path(), "t").unwrap();
        let migrated = migrate_profile(&agent, home.path(), None).unwrap();
        assert_eq!(
            migrated,
            Migrated {
                before: 33,
                after: 35
            }
        );
        let text = fs::read_to_string(home.path().join("config.yaml")).unwrap();
        assert!(text.contains("kept-model"), "{text}");
        assert_eq!(
            fs::read(home.path().join("config.yaml.bak-t")).unwrap(),
            before
        );
        // The older agent is now refused on this volume.
        let old_agent = Agent::at(&old.hermes).unwrap();
        let err = gate_agent_start(home.path(), home.path(), &old_agent, &|_| None).unwrap_err();
        assert!(
            matches!(err, UpgradeProblem::Downgrade { volume: 35, .. }),
            "{err}"
        );
        drop(backup);
    }
}
