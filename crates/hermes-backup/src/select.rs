//! Which files of the volume a backup holds, and which archive paths a restore may write.
//!
//! The rules are the original's (`hermes_cli/backup.py`), so an archive of either holds the
//! same files: everything under `HERMES_HOME`, paths relative to it, except the code and caches
//! ([`EXCLUDED_DIRS`], `hermes-agent/` at the top), SQLite's side files and compiled Python
//! ([`EXCLUDED_SUFFIXES`]) and symlinks (never followed: a link could point anywhere). To
//! those we add the **runtime files** ([`is_runtime`]): what a running gateway or supervisor
//! keeps about itself (`gateway_state.json`, pid files, locks, `processes.json`), which
//! describe processes, not data, and which a restore must never write back (upstream #48243).
//!
//! A **scope** narrows the walk to some profiles (the root's files are the `default`
//! profile's, `profiles/<name>/` a named one's) and, for a quick backup, to the files that
//! hold state ([`QUICK_FILES`]): settings, secrets, databases, cron and pairing.

use std::fs;
use std::path::{Component, Path, PathBuf};

use hermes_home::ProfileRef;
use hermes_home::layout::{BACKUP_SCRATCH_PREFIX, PROFILES_DIR, RESTORE_STAGING_PREFIX};

use crate::Error;

/// Directory names never backed up, at any depth (the original's list).
pub const EXCLUDED_DIRS: &[&str] = &[
    "__pycache__",
    ".git",
    "node_modules",
    "backups",
    "checkpoints",
    ".venv",
    "venv",
    "site-packages",
    ".cache",
    ".tox",
    ".nox",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
];

/// File name endings never backed up (the original's list: SQLite side files, compiled Python).
pub const EXCLUDED_SUFFIXES: &[&str] = &[".pyc", ".pyo", ".db-wal", ".db-shm", ".db-journal"];

/// Runtime files, by name, at any depth: never backed up, never restored.
const RUNTIME_NAMES: &[&str] = &[
    "gateway_state.json",
    "gateway.pid",
    "cron.pid",
    "gateway.lock",
    "processes.json",
    "gateway_drains.json",
    "gateway.lifecycle.json",
];

/// Directories at the top of the volume that are this runtime's own scratch space: the
/// supervisor's sockets (`run/`) and the staging of creates and restores.
const RUNTIME_TOP_PREFIXES: &[&str] = &["run", RESTORE_STAGING_PREFIX, BACKUP_SCRATCH_PREFIX];

/// The files and directories of a profile home a quick backup holds (the original's
/// `_QUICK_STATE_FILES`, with `SOUL.md` and `memories/`, which are a persona's state too).
pub const QUICK_FILES: &[&str] = &[
    "state.db",
    "config.yaml",
    ".env",
    "auth.json",
    "SOUL.md",
    "memories",
    "cron/jobs.json",
    "cron/executions.db",
    "channel_directory.json",
    "channel_aliases.json",
    "gateway/discord_message_recovery.db",
    "projects.db",
    "response_store.db",
    "memory_store.db",
    "verification_evidence.db",
    "kanban.db",
    "kanban/boards",
    "pairing",
    "platforms/pairing",
    "feishu_comment_pairing.json",
];

/// What a backup covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// Only these profiles (`None`: the whole volume, the root's shared files included).
    pub profiles: Option<Vec<ProfileRef>>,
    /// Only the files that hold state ([`QUICK_FILES`]) of each profile.
    pub quick: bool,
}

impl Scope {
    /// Whether the archive path `rel` (already checked by [`archive_path`]) is in this scope.
    pub fn contains(&self, rel: &str) -> bool {
        let (profile, within) = split_profile(rel);
        if let Some(profiles) = &self.profiles {
            let wanted = profiles.iter().any(|p| match (&profile, p) {
                (None, ProfileRef::Default) => true,
                (Some(name), ProfileRef::Named(n)) => *name == n.as_str(),
                _ => false,
            });
            if !wanted {
                return false;
            }
        }
        if self.quick {
            return QUICK_FILES
                .iter()
                .any(|q| within == *q || within.starts_with(&format!("{q}/")));
        }
        true
    }

    /// The scope in words, for messages (`the whole volume`, `profiles default, work`).
    pub fn describe(&self) -> String {
        let what = match &self.profiles {
            None => "the whole volume".to_owned(),
            Some(p) => {
                let names: Vec<&str> = p.iter().map(ProfileRef::name).collect();
                format!(
                    "profile{} {}",
                    if names.len() == 1 { "" } else { "s" },
                    names.join(", ")
                )
            }
        };
        if self.quick {
            format!("{what} (quick)")
        } else {
            what
        }
    }
}

/// `rel` split into its profile (`None` for the root's files) and the path within that
/// profile's home. `profiles` itself and the root's files are the default profile's.
pub fn split_profile(rel: &str) -> (Option<&str>, &str) {
    if let Some(rest) = rel.strip_prefix(&format!("{PROFILES_DIR}/"))
        && let Some((name, within)) = rest.split_once('/')
    {
        return (Some(name), within);
    }
    (None, rel)
}

/// A runtime file (module doc): never in an archive, never restored.
pub fn is_runtime(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let top = rel.split('/').next().unwrap_or(rel);
    RUNTIME_NAMES.contains(&name)
        || hermes_home::atomic::is_temporary(name)
        || name.ends_with(".lock")
        || name.ends_with(".partial")
        || RUNTIME_TOP_PREFIXES
            .iter()
            .any(|p| top == *p || (p.ends_with('-') && top.starts_with(p)))
}

/// Whether the original's rules leave `rel` out (module doc).
fn is_excluded(rel: &str) -> bool {
    let mut parts = rel.split('/').peekable();
    if rel == "hermes-agent" || rel.starts_with("hermes-agent/") {
        return true;
    }
    while let Some(part) = parts.next() {
        let is_last = parts.peek().is_none();
        if !is_last && EXCLUDED_DIRS.contains(&part) {
            return true;
        }
        if is_last && EXCLUDED_SUFFIXES.iter().any(|s| part.ends_with(s)) {
            return true;
        }
    }
    // Profiles being created (`.<name>.staging-<pid>`) and the deleted ones (`.trash/`) are
    // not profiles.
    matches!(split_profile(rel), (Some(name), _) if name.starts_with('.'))
}

/// Whether a file at `rel` belongs in a backup: not excluded, not a runtime file.
pub fn is_backed_up(rel: &str) -> bool {
    !is_excluded(rel) && !is_runtime(rel)
}

/// One file a backup will hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    /// Its archive path, relative to the root, `/`-separated.
    pub rel: String,
    /// Where it is.
    pub path: PathBuf,
    /// Its size when listed (a live file may have grown since).
    pub size: u64,
}

/// Every file under `root` in `scope`, in path order (directories before their files).
///
/// # Errors
/// A directory that cannot be listed: its files would be missing, so the walk fails naming it.
pub fn walk(root: &Path, scope: &Scope) -> Result<Vec<Selected>, Error> {
    let mut found = Vec::new();
    walk_dir(root, "", scope, &mut found)?;
    found.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(found)
}

fn walk_dir(
    dir: &Path,
    prefix: &str,
    scope: &Scope,
    found: &mut Vec<Selected>,
) -> Result<(), Error> {
    let entries = fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            // A name that is not UTF-8 cannot be a zip path the original reads back.
            return Err(Error::NotIncluded {
                path: entry.path(),
                source: Box::new(Error::io(
                    "name",
                    entry.path(),
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "the file name is not UTF-8",
                    ),
                )),
            });
        };
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let kind = entry
            .file_type()
            .map_err(|e| Error::io("inspect", entry.path(), e))?;
        if kind.is_dir() {
            let as_dir = format!("{rel}/x");
            if is_excluded(&as_dir) || is_runtime(&as_dir) || !scope_may_hold(scope, &rel) {
                continue;
            }
            walk_dir(&entry.path(), &rel, scope, found)?;
        } else if kind.is_file() && is_backed_up(&rel) && scope.contains(&rel) {
            let size = entry
                .metadata()
                .map_err(|e| Error::io("inspect", entry.path(), e))?
                .len();
            found.push(Selected {
                rel,
                path: entry.path(),
                size,
            });
        }
        // Symlinks, sockets and FIFOs are not data of the volume: skipped, as the original does.
    }
    Ok(())
}

/// Whether the directory `rel` can hold anything in `scope` (so the walk need not enter it).
fn scope_may_hold(scope: &Scope, rel: &str) -> bool {
    let Some(profiles) = &scope.profiles else {
        return true;
    };
    if rel == PROFILES_DIR {
        return profiles.iter().any(|p| matches!(p, ProfileRef::Named(_)))
            || profiles.contains(&ProfileRef::Default) && !scope.quick;
    }
    match split_profile(&format!("{rel}/x")) {
        (Some(name), _) => profiles
            .iter()
            .any(|p| matches!(p, ProfileRef::Named(n) if n.as_str() == name)),
        (None, _) => profiles.contains(&ProfileRef::Default),
    }
}

/// The volume path an archive entry names, as a `/`-separated relative path, or why it is
/// refused. As the original's `hermes import` does, a leading `.hermes/` or `hermes/` (an
/// archive of the directory rather than of its contents) is dropped.
///
/// # Errors
/// One line: the entry is absolute, climbs out with `..`, or is empty.
pub fn archive_path(name: &str) -> Result<String, String> {
    let name = name.replace('\\', "/");
    let trimmed = name
        .strip_prefix(".hermes/")
        .or_else(|| name.strip_prefix("hermes/"))
        .unwrap_or(&name);
    let path = Path::new(trimmed);
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str().unwrap_or_default().to_owned()),
            Component::CurDir => {}
            Component::ParentDir => return Err(format!("`{name}` climbs out of the volume")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!("`{name}` is an absolute path"));
            }
        }
    }
    if parts.is_empty() || parts.iter().any(String::is_empty) {
        return Err(format!("`{name}` names no file"));
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    /// The databases a start checks are each held by a quick backup too: the two lists are of
    /// the same files, kept in two crates (`hermes-home` knows no backups).
    #[test]
    fn every_checked_database_is_in_a_quick_backup() {
        for db in hermes_home::db_check::DATABASES {
            assert!(super::QUICK_FILES.contains(db), "{db}");
        }
    }

    use super::*;

    fn named(name: &str) -> ProfileRef {
        ProfileRef::parse(name).unwrap()
    }

    #[test]
    fn the_originals_exclusions_and_the_runtime_files_are_left_out() {
        for rel in [
            "hermes-agent/run_agent.py",
            "skills/x/__pycache__/a.pyc",
            "state.db-wal",
            "profiles/work/state.db-shm",
            "backups/old.zip",
            "plugins/mem/node_modules/a/index.js",
            "gateway_state.json",
            "profiles/work/gateway.pid",
            "config.yaml.lock",
            "auth.lock",
            ".backup.lock",
            "run/control.sock",
            ".restore-20261202-1-2/new/state.db",
            "profiles/.trash/old-1/SOUL.md",
            "profiles/.work.staging-42/SOUL.md",
            "gateway_drains.json",
            ".config.yaml.tmp.4242.3",
            "profiles/work/.env.tmp.17.0",
        ] {
            assert!(!is_backed_up(rel), "{rel} must be left out");
        }
        for rel in [
            "state.db",
            "config.yaml",
            ".env",
            "profiles/work/kanban.db",
            "skills/web/hermes-agent/SKILL.md",
            "logs/gateway.log",
            "state-snapshots/20260101-000000/state.db",
        ] {
            assert!(is_backed_up(rel), "{rel} must be kept");
        }
    }

    #[test]
    fn a_scope_picks_profiles_and_quick_files() {
        let all = Scope::default();
        assert!(all.contains("logs/gateway.log") && all.contains("profiles/w/SOUL.md"));
        let work = Scope {
            profiles: Some(vec![named("work")]),
            quick: false,
        };
        assert!(work.contains("profiles/work/skills/a.md"));
        assert!(!work.contains("profiles/other/SOUL.md") && !work.contains("state.db"));
        let default_quick = Scope {
            profiles: Some(vec![ProfileRef::Default]),
            quick: true,
        };
        assert!(default_quick.contains("state.db") && default_quick.contains("memories/MEMORY.md"));
        assert!(!default_quick.contains("logs/gateway.log"));
        assert!(!default_quick.contains("profiles/work/state.db"));
        assert_eq!(default_quick.describe(), "profile default (quick)");
    }

    #[test]
    fn archive_paths_are_relative_and_stay_inside() {
        assert_eq!(archive_path("state.db").unwrap(), "state.db");
        assert_eq!(archive_path(".hermes/config.yaml").unwrap(), "config.yaml");
        assert_eq!(
            archive_path("./profiles/w/SOUL.md").unwrap(),
            "profiles/w/SOUL.md"
        );
        for bad in ["../etc/passwd", "/etc/passwd", "a/../../b", "", "hermes/"] {
            assert!(archive_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_walk_skips_symlinks_and_runtime_files_and_sorts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("profiles/work/cron")).unwrap();
        fs::create_dir_all(root.join("backups")).unwrap();
        for f in [
            "config.yaml",
            "gateway_state.json",
            "backups/a.zip",
            "profiles/work/SOUL.md",
            "profiles/work/cron/jobs.json",
        ] {
            fs::write(root.join(f), "x").unwrap();
        }
        std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
        let rels: Vec<String> = walk(root, &Scope::default())
            .unwrap()
            .into_iter()
            .map(|s| s.rel)
            .collect();
        assert_eq!(
            rels,
            [
                "config.yaml",
                "profiles/work/SOUL.md",
                "profiles/work/cron/jobs.json"
            ]
        );
        let only_default = Scope {
            profiles: Some(vec![ProfileRef::Default]),
            quick: false,
        };
        let rels: Vec<String> = walk(root, &only_default)
            .unwrap()
            .into_iter()
            .map(|s| s.rel)
            .collect();
        assert_eq!(rels, ["config.yaml"]);
    }
}
