//! Where Hermes keeps its data: resolving `HERMES_HOME`, selecting a profile, and the directory
//! skeleton.
//!
//! ```text
//! $HERMES_HOME/                 the root, and also the "default" profile
//! ├── SOUL.md  config.yaml  .env  auth.json  gateway_state.json
//! ├── active_profile            sticky profile chosen by `hermes profile use`
//! ├── logs/ sessions/ memories/ skills/ cron/ plans/ workspace/ home/
//! └── profiles/
//!     ├── <name>/               a named profile: same files, same skeleton
//!     ├── .<name>.staging-<pid> a profile being created (renamed into place when complete)
//!     └── .trash/<name>-<ts>    a deleted profile, recoverable by moving it back
//! ```
//!
//! Words: the *root* is the resolved `HERMES_HOME`; a *profile home* is the directory of one
//! profile (the root for `default`); a directory under `profiles/` *is a profile* iff it holds
//! `SOUL.md`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::Error;
pub use crate::names::ProfileRef;
use crate::seeds::{self, Seeded};

/// `config.yaml`: a profile's settings.
pub const CONFIG_FILE: &str = "config.yaml";
/// `.env`: a profile's secrets.
pub const ENV_FILE: &str = ".env";
/// `SOUL.md`: a profile's persona; a directory under `profiles/` holding it is a profile.
pub const SOUL_FILE: &str = "SOUL.md";
/// `auth.json`: a profile's provider credentials.
pub const AUTH_FILE: &str = "auth.json";
/// `state.db`: a profile's conversations (SQLite, the original's schema).
pub const STATE_DB_FILE: &str = "state.db";
/// `active_profile` under the root: the sticky profile.
pub const ACTIVE_PROFILE_FILE: &str = "active_profile";
/// `logs/` under the root: every service's log.
pub const LOGS_DIR: &str = "logs";
/// `profiles/` under the root: the named profiles.
pub const PROFILES_DIR: &str = "profiles";
/// `plugins/` under the root: the plugins every profile sees.
pub const PLUGINS_DIR: &str = "plugins";
/// `memories/` of a profile: `MEMORY.md` and `USER.md`.
pub const MEMORIES_DIR: &str = "memories";
/// `skills/` of a profile.
pub const SKILLS_DIR: &str = "skills";
/// `cron/jobs.json` of a profile: its scheduled jobs.
pub const CRON_JOBS_FILE: &str = "cron/jobs.json";
/// `.restore-<time>-<pid>/` at the top of the volume: a restore's staging directory, rolled
/// back by `hermes backup recover` (and so by the boot) when a kill left it.
pub const RESTORE_STAGING_PREFIX: &str = ".restore-";
/// `.backup-tmp-<pid>/` at the top of the volume: where a backup stages database snapshots.
pub const BACKUP_SCRATCH_PREFIX: &str = ".backup-tmp-";

/// The paths of a profile home given as a directory (the root for `default`), for code that
/// holds a directory rather than a [`Home`]; [`Home`]'s accessors are these for the selected
/// profile. Each joins one of the names above, so a name is spelled once.
pub fn config_path(dir: &Path) -> PathBuf {
    dir.join(CONFIG_FILE)
}
/// `.env` of the profile home `dir` (see [`config_path`]).
pub fn env_path(dir: &Path) -> PathBuf {
    dir.join(ENV_FILE)
}
/// `SOUL.md` of the profile home `dir`.
pub fn soul_path(dir: &Path) -> PathBuf {
    dir.join(SOUL_FILE)
}
/// `auth.json` of the profile home `dir`.
pub fn auth_path(dir: &Path) -> PathBuf {
    dir.join(AUTH_FILE)
}
/// `state.db` of the profile home `dir`.
pub fn state_db_path(dir: &Path) -> PathBuf {
    dir.join(STATE_DB_FILE)
}
/// `memories/` of the profile home `dir`.
pub fn memories_dir(dir: &Path) -> PathBuf {
    dir.join(MEMORIES_DIR)
}
/// `skills/` of the profile home `dir`.
pub fn skills_dir(dir: &Path) -> PathBuf {
    dir.join(SKILLS_DIR)
}
/// `cron/jobs.json` of the profile home `dir`.
pub fn cron_jobs_path(dir: &Path) -> PathBuf {
    dir.join(CRON_JOBS_FILE)
}
/// `logs/` under `root`.
pub fn logs_dir(root: &Path) -> PathBuf {
    root.join(LOGS_DIR)
}
/// `profiles/` under `root`.
pub fn profiles_dir(root: &Path) -> PathBuf {
    root.join(PROFILES_DIR)
}
/// `plugins/` under `root`.
pub fn plugins_dir(root: &Path) -> PathBuf {
    root.join(PLUGINS_DIR)
}
/// `run/` under `root`: the supervisor's runtime directory of last resort ([`runtime_dirs`]).
pub fn run_dir(root: &Path) -> PathBuf {
    root.join("run")
}

/// Sub-directories every profile home has.
pub const SKELETON_DIRS: &[&str] = &[
    "logs",
    "sessions",
    "memories",
    "skills",
    "cron",
    "plans",
    "workspace",
    "home",
];

/// The variable naming the volume's root.
pub const HERMES_HOME_VAR: &str = "HERMES_HOME";

/// Resolves the root: `HERMES_HOME` (trimmed, `~` expanded; empty means unset), else
/// `~/.hermes`. `var` looks a variable up (the process environment, or a test's map).
pub fn resolve_root(var: impl Fn(&str) -> Option<String>) -> Result<PathBuf, Error> {
    let home = var("HOME").filter(|h| !h.trim().is_empty());
    if let Some(raw) = var(HERMES_HOME_VAR) {
        let raw = raw.trim();
        if !raw.is_empty() {
            return expand_tilde(raw, home.as_deref());
        }
    }
    match home {
        Some(home) => Ok(PathBuf::from(home).join(".hermes")),
        None => Err(Error::NoHome),
    }
}

fn expand_tilde(raw: &str, home: Option<&str>) -> Result<PathBuf, Error> {
    if raw == "~" || raw.starts_with("~/") {
        let home = home.ok_or(Error::NoHome)?;
        Ok(PathBuf::from(home).join(raw.trim_start_matches('~').trim_start_matches('/')))
    } else {
        Ok(PathBuf::from(raw))
    }
}

/// The variable that names the supervisor's runtime directory outright.
pub const RUNTIME_DIR_VAR: &str = "HERMES_RUNTIME_DIR";

/// Where the supervisor of `root` may keep its lock, control socket and readiness sockets, in
/// order of preference. The one rule for server and clients alike: the supervisor takes the
/// first it can make private, a client talks to the first that holds a control socket.
///
/// * `HERMES_RUNTIME_DIR` when set: only that.
/// * inside the image (`in_image`): `/run/hermes`; then `/tmp/hermes` (a `--read-only`
///   container with a tmpfs `/tmp`); then `/dev/shm/hermes` (a Kubernetes pod: its emptyDir
///   `/tmp` is 0777 without the sticky bit, so nothing under it can be private, while the
///   runtime mounts `/dev/shm` 1777); then `<root>/run` (a container run as the service user
///   with only its volume writable).
/// * otherwise (`hermes up` on a host): `<root>/run`.
pub fn runtime_dirs(
    root: &Path,
    var: impl Fn(&str) -> Option<String>,
    in_image: bool,
) -> Vec<PathBuf> {
    if let Some(dir) = var(RUNTIME_DIR_VAR)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
    {
        return vec![PathBuf::from(dir)];
    }
    if in_image {
        vec![
            PathBuf::from("/run/hermes"),
            PathBuf::from("/tmp/hermes"),
            PathBuf::from("/dev/shm/hermes"),
            run_dir(root),
        ]
    } else {
        vec![run_dir(root)]
    }
}

/// A resolved Hermes home: the root plus the selected profile.
#[derive(Debug, Clone)]
pub struct Home {
    root: PathBuf,
    profile: ProfileRef,
    dir: PathBuf,
}

impl Home {
    /// Selects a profile under `root`: the explicit `flag` (`-p NAME`), else the sticky
    /// `active_profile` file, else `default`. A named profile must exist (hold `SOUL.md`):
    /// selecting a missing one is an error, never a silently created directory.
    pub fn select(root: PathBuf, flag: Option<&str>) -> Result<Self, Error> {
        let profile = match flag {
            Some(name) => ProfileRef::parse(name)?,
            None => read_active_profile(&root)?,
        };
        Self::for_profile(root, profile)
    }

    /// The home of one given profile, which must exist unless it is `default`.
    pub fn for_profile(root: PathBuf, profile: ProfileRef) -> Result<Self, Error> {
        let dir = match &profile {
            ProfileRef::Default => root.clone(),
            ProfileRef::Named(name) => {
                let dir = profiles_dir(&root).join(name.as_str());
                if !soul_path(&dir).is_file() {
                    return Err(Error::ProfileNotFound {
                        name: name.to_string(),
                        path: dir,
                    });
                }
                dir
            }
        };
        Ok(Home { root, profile, dir })
    }

    /// The root (`HERMES_HOME`).
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The selected profile.
    pub fn profile(&self) -> &ProfileRef {
        &self.profile
    }
    /// The selected profile's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    /// `config.yaml` of the selected profile.
    pub fn config_path(&self) -> PathBuf {
        config_path(&self.dir)
    }
    /// `.env` of the selected profile.
    pub fn env_path(&self) -> PathBuf {
        env_path(&self.dir)
    }
    /// `SOUL.md` of the selected profile.
    pub fn soul_path(&self) -> PathBuf {
        soul_path(&self.dir)
    }
    /// `auth.json` of the selected profile.
    pub fn auth_path(&self) -> PathBuf {
        auth_path(&self.dir)
    }
    /// `gateway_state.json` of the selected profile.
    pub fn gateway_state_path(&self) -> PathBuf {
        crate::gateway_state::path(&self.dir)
    }
    /// `state.db` (the conversations) of the selected profile.
    pub fn state_db_path(&self) -> PathBuf {
        state_db_path(&self.dir)
    }
    /// `logs/` under the root (shared by all profiles' services).
    pub fn logs_dir(&self) -> PathBuf {
        logs_dir(&self.root)
    }
    /// `profiles/` under the root.
    pub fn profiles_dir(&self) -> PathBuf {
        profiles_dir(&self.root)
    }
    /// `plugins/` under the root (the plugins every profile sees).
    pub fn plugins_dir(&self) -> PathBuf {
        plugins_dir(&self.root)
    }
}

/// Reads the sticky profile. Missing, empty or `default` means the root.
pub fn read_active_profile(root: &Path) -> Result<ProfileRef, Error> {
    let path = root.join(ACTIVE_PROFILE_FILE);
    match fs::read_to_string(&path) {
        Ok(text) if text.trim().is_empty() => Ok(ProfileRef::Default),
        Ok(text) => ProfileRef::parse(text.trim()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(ProfileRef::Default),
        Err(e) => Err(Error::io("read", &path, e)),
    }
}

/// What [`ensure_skeleton`] created.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SkeletonReport {
    /// Files that were absent and have been seeded (`.env`, `config.yaml`, `SOUL.md`).
    pub seeded: Vec<PathBuf>,
}

/// Creates the skeleton of a profile home in `dir` and seeds `.env` (0600, with a new
/// `API_SERVER_KEY` or none, as `key` says: the caller knows whether the profile already has
/// one, `hermes_settings` decides), `config.yaml` and `SOUL.md` when they are absent. Existing
/// files are never touched. For the root, pass `is_root = true` to also create `profiles/`.
pub fn ensure_skeleton(
    dir: &Path,
    is_root: bool,
    key: &seeds::KeySeed,
) -> Result<SkeletonReport, Error> {
    fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    let extra: &[&str] = if is_root { &["profiles"] } else { &[] };
    for sub in SKELETON_DIRS.iter().chain(extra) {
        let path = dir.join(sub);
        fs::create_dir_all(&path).map_err(|e| Error::io("create directory", &path, e))?;
    }
    let mut report = SkeletonReport::default();
    let env = seeds::new_env_file(key);
    let files: [(&str, &str, u32); 3] = [
        (".env", &env, 0o600),
        ("config.yaml", seeds::DEFAULT_CONFIG_YAML, 0o640),
        ("SOUL.md", seeds::DEFAULT_SOUL_MD, 0o644),
    ];
    for (name, contents, mode) in files {
        let path = dir.join(name);
        if seeds::seed_file(&path, contents, mode)? == Seeded::Created {
            report.seeded.push(path);
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn lookup(map: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = map
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn hermes_home_is_trimmed_and_tilde_expanded() {
        let root = resolve_root(lookup(&[("HERMES_HOME", "  ~/data \n"), ("HOME", "/u")])).unwrap();
        assert_eq!(root, PathBuf::from("/u/data"));
    }

    #[test]
    fn empty_hermes_home_falls_back_to_dot_hermes() {
        let root = resolve_root(lookup(&[("HERMES_HOME", "   "), ("HOME", "/u")])).unwrap();
        assert_eq!(root, PathBuf::from("/u/.hermes"));
    }

    #[test]
    fn runtime_dirs_follow_the_variable_the_image_else_the_root() {
        let root = Path::new("/data");
        assert_eq!(
            runtime_dirs(root, lookup(&[]), false),
            [PathBuf::from("/data/run")]
        );
        assert_eq!(
            runtime_dirs(root, lookup(&[]), true),
            ["/run/hermes", "/tmp/hermes", "/dev/shm/hermes", "/data/run"].map(PathBuf::from)
        );
        for in_image in [false, true] {
            assert_eq!(
                runtime_dirs(
                    root,
                    lookup(&[("HERMES_RUNTIME_DIR", " /run/x ")]),
                    in_image
                ),
                [PathBuf::from("/run/x")]
            );
        }
    }

    #[test]
    fn no_home_at_all_is_an_error() {
        assert!(matches!(resolve_root(lookup(&[])), Err(Error::NoHome)));
    }

    #[test]
    fn selecting_a_missing_profile_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let err = Home::select(dir.path().to_path_buf(), Some("ghost")).unwrap_err();
        assert!(matches!(err, Error::ProfileNotFound { .. }));
        assert!(!dir.path().join("profiles").exists());
    }

    #[test]
    fn sticky_profile_is_used_without_flag_and_flag_wins() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        fs::create_dir_all(root.join("profiles/work")).unwrap();
        fs::write(root.join("profiles/work/SOUL.md"), "x").unwrap();
        fs::write(root.join("active_profile"), "work\n").unwrap();
        assert_eq!(
            Home::select(root.clone(), None).unwrap().profile().name(),
            "work"
        );
        assert_eq!(
            Home::select(root, Some("default"))
                .unwrap()
                .profile()
                .name(),
            "default"
        );
    }

    #[test]
    fn skeleton_seeds_once_and_keeps_existing_files() {
        let dir = tempfile::tempdir().unwrap();
        let first = ensure_skeleton(dir.path(), true, &seeds::KeySeed::Generate).unwrap();
        assert_eq!(first.seeded.len(), 3);
        fs::write(dir.path().join("config.yaml"), "model: mine\n").unwrap();
        let second = ensure_skeleton(dir.path(), true, &seeds::KeySeed::Generate).unwrap();
        assert!(second.seeded.is_empty());
        assert_eq!(
            fs::read_to_string(dir.path().join("config.yaml")).unwrap(),
            "model: mine\n"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path().join(".env"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(dir.path().join("profiles").is_dir());
    }
}
