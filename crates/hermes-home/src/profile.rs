//! Profiles: their names, and creating, cloning, listing, selecting and deleting them.
//!
//! A *profile* is an agent persona with its own `SOUL.md`, `config.yaml`, `.env`, credentials
//! and history. The root of `HERMES_HOME` is the `default` profile; named profiles live in
//! `profiles/<name>/`, and a directory there counts as a profile iff it holds `SOUL.md`.
//!
//! Creation is all-or-nothing: the profile is built in a hidden staging directory
//! (`profiles/.<name>.staging-<pid>`) and renamed into place, so a crash never leaves half a
//! profile. Deletion moves the profile to `profiles/.trash/<name>-<timestamp>` (recoverable)
//! unless the caller asks to purge.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::atomic::{sync_dir, write_atomic};
use crate::layout::{ensure_skeleton, read_active_profile};
use crate::lock;
use crate::names::ProfileRef;
// Defined in `names`, the module `layout` and this one both build on; kept reachable here.
pub use crate::names::{DEFAULT_PROFILE, ProfileName, RESERVED_NAMES};

/// Options of [`create`].
#[derive(Debug, Default, Clone)]
pub struct CreateOptions {
    /// Copy config, `.env`, `SOUL.md`, skills and memories from this profile.
    pub clone_from: Option<ProfileRef>,
    /// A one-line description stored in `profile.yaml`.
    pub description: Option<String>,
}

/// The directory of a named profile (whether or not it exists).
pub fn profile_dir(root: &Path, name: &ProfileName) -> PathBuf {
    root.join("profiles").join(name.as_str())
}

fn home_dir_of(root: &Path, profile: &ProfileRef) -> PathBuf {
    match profile {
        ProfileRef::Default => root.to_path_buf(),
        ProfileRef::Named(name) => profile_dir(root, name),
    }
}

/// Creates the named profile under `root` and returns its directory.
pub fn create(root: &Path, name: &ProfileName, options: &CreateOptions) -> Result<PathBuf, Error> {
    let profiles = root.join("profiles");
    fs::create_dir_all(&profiles).map_err(|e| Error::io("create directory", &profiles, e))?;
    let target = profile_dir(root, name);
    if target.exists() {
        return Err(Error::ProfileExists {
            name: name.to_string(),
            path: target,
        });
    }
    let source = match &options.clone_from {
        Some(from) => {
            let dir = home_dir_of(root, from);
            if !dir.join("SOUL.md").is_file() {
                return Err(Error::ProfileNotFound {
                    name: from.name().to_string(),
                    path: dir,
                });
            }
            Some(dir)
        }
        None => None,
    };
    let staging = profiles.join(format!(".{name}.staging-{}", std::process::id()));
    if staging.exists() {
        // Left over by a crashed run with our pid (pids are reused); it was never published.
        fs::remove_dir_all(&staging).map_err(|e| Error::io("remove", &staging, e))?;
    }
    let built = build_profile(&staging, source.as_deref(), options);
    let published = built.and_then(|()| {
        // `rename` onto an existing directory fails unless it is empty; a profile that
        // appeared meanwhile is reported, not merged.
        match fs::rename(&staging, &target) {
            Ok(()) => sync_dir(&profiles).map_err(|e| Error::io("sync", &profiles, e)),
            Err(e) if target.exists() => {
                let _ = e;
                Err(Error::ProfileExists {
                    name: name.to_string(),
                    path: target.clone(),
                })
            }
            Err(e) => Err(Error::io("rename", &staging, e)),
        }
    });
    if published.is_err() {
        let _ = fs::remove_dir_all(&staging);
    }
    published.map(|()| target)
}

fn build_profile(
    staging: &Path,
    source: Option<&Path>,
    options: &CreateOptions,
) -> Result<(), Error> {
    fs::create_dir_all(staging).map_err(|e| Error::io("create directory", staging, e))?;
    if let Some(source) = source {
        for file in ["config.yaml", ".env", "SOUL.md"] {
            let from = source.join(file);
            if from.is_file() {
                let to = staging.join(file);
                fs::copy(&from, &to).map_err(|e| Error::io("copy", &from, e))?;
                if file == ".env" {
                    fs::set_permissions(&to, fs::Permissions::from_mode(0o600))
                        .map_err(|e| Error::io("set the mode of", &to, e))?;
                }
            }
        }
        for dir in ["skills", "memories"] {
            let from = source.join(dir);
            if from.is_dir() {
                copy_tree(&from, &staging.join(dir))?;
            }
        }
    }
    // A new profile gets a key of its own; a clone too (below), whatever it copied.
    ensure_skeleton(staging, false, &crate::seeds::KeySeed::Generate)?;
    if source.is_some() {
        // A clone's copied key is its source's: clients of one would open the other. It gets
        // a key of its own (a new profile has one from its seeded `.env`).
        let env = staging.join(".env");
        let key = crate::random::random_hex(32)
            .map_err(|e| Error::io("read", Path::new("/dev/urandom"), e))?;
        crate::dotenv::DotEnv::edit(&env, |dotenv| {
            dotenv.set(crate::seeds::API_SERVER_KEY, &key)
        })?;
    }
    if let Some(description) = &options.description {
        let description = description.replace(['\r', '\n'], " ");
        let doc = yaml_serde::to_string(&yaml_serde::Mapping::from_iter([(
            yaml_serde::Value::from("description"),
            yaml_serde::Value::from(description.trim()),
        )]))
        .unwrap_or_default();
        write_atomic(&staging.join("profile.yaml"), doc.as_bytes(), 0o644)?;
    }
    Ok(())
}

/// Copies a directory tree; symlinks are recreated as symlinks, never followed.
fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    fs::create_dir_all(to).map_err(|e| Error::io("create directory", to, e))?;
    let entries = fs::read_dir(from).map_err(|e| Error::io("read directory", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", from, e))?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| Error::io("inspect", &src, e))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            let link = fs::read_link(&src).map_err(|e| Error::io("read link", &src, e))?;
            std::os::unix::fs::symlink(&link, &dst)
                .map_err(|e| Error::io("create link", &dst, e))?;
        } else {
            fs::copy(&src, &dst).map_err(|e| Error::io("copy", &src, e))?;
        }
    }
    Ok(())
}

/// How [`delete`] disposes of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposal {
    /// Move to `profiles/.trash/` (recoverable).
    Trash,
    /// Remove for good.
    Purge,
}

/// What [`delete`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    /// Where the profile went (`None` when purged).
    pub trashed_to: Option<PathBuf>,
    /// Whether the sticky `active_profile` pointed at it and was reset to `default`.
    pub active_reset: bool,
}

/// Deletes a named profile. The default profile cannot be deleted.
pub fn delete(root: &Path, profile: &ProfileRef, disposal: Disposal) -> Result<Deleted, Error> {
    let ProfileRef::Named(name) = profile else {
        return Err(Error::DefaultProfileUndeletable);
    };
    let dir = profile_dir(root, name);
    if !dir.join("SOUL.md").is_file() {
        return Err(Error::ProfileNotFound {
            name: name.to_string(),
            path: dir,
        });
    }
    let trashed_to = match disposal {
        Disposal::Purge => {
            fs::remove_dir_all(&dir).map_err(|e| Error::io("remove", &dir, e))?;
            None
        }
        Disposal::Trash => {
            let trash = root.join("profiles").join(".trash");
            fs::create_dir_all(&trash).map_err(|e| Error::io("create directory", &trash, e))?;
            let stamp = crate::time::compact_utc_now();
            let mut dest = trash.join(format!("{name}-{stamp}"));
            let mut n = 1;
            while dest.exists() {
                dest = trash.join(format!("{name}-{stamp}-{n}"));
                n += 1;
            }
            fs::rename(&dir, &dest).map_err(|e| Error::io("move", &dir, e))?;
            Some(dest)
        }
    };
    // Check and reset under the lock: a `profile use` of another profile in between must win.
    let active_reset = with_active_locked(root, || {
        let reset = read_active_profile(root).ok().as_ref() == Some(profile);
        if reset {
            write_active(root, &ProfileRef::Default)?;
        }
        Ok(reset)
    })?;
    Ok(Deleted {
        trashed_to,
        active_reset,
    })
}

/// Makes `profile` sticky (`hermes profile use`). It must exist.
pub fn set_active(root: &Path, profile: &ProfileRef) -> Result<(), Error> {
    with_active_locked(root, || {
        if let ProfileRef::Named(name) = profile {
            let dir = profile_dir(root, name);
            if !dir.join("SOUL.md").is_file() {
                return Err(Error::ProfileNotFound {
                    name: name.to_string(),
                    path: dir,
                });
            }
        }
        write_active(root, profile)
    })
}

/// Runs `cycle` holding `active_profile.lock`: every change of `active_profile` goes through
/// here, so a [`delete`] that resets it and a [`set_active`] never undo each other.
fn with_active_locked<T>(
    root: &Path,
    cycle: impl FnOnce() -> Result<T, Error>,
) -> Result<T, Error> {
    lock::with_locked(&lock::sidecar(&root.join("active_profile")), 0o644, cycle)
}

/// Writes `active_profile` (removes it for the default profile). Call with the lock held.
fn write_active(root: &Path, profile: &ProfileRef) -> Result<(), Error> {
    let path = root.join("active_profile");
    match profile {
        ProfileRef::Default => match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("remove", &path, e)),
        },
        ProfileRef::Named(name) => write_atomic(&path, format!("{name}\n").as_bytes(), 0o644),
    }
}

/// One profile as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileEntry {
    /// Which profile.
    pub profile: ProfileRef,
    /// Its directory.
    pub dir: PathBuf,
    /// Its `profile.yaml` description, if any.
    pub description: Option<String>,
}

/// Lists the default profile, then every named profile sorted by name. Directories under
/// `profiles/` without `SOUL.md`, hidden ones, and ones whose name is invalid are skipped.
pub fn list(root: &Path) -> Result<Vec<ProfileEntry>, Error> {
    let mut out = vec![ProfileEntry {
        profile: ProfileRef::Default,
        dir: root.to_path_buf(),
        description: read_description(root),
    }];
    let profiles = root.join("profiles");
    let entries = match fs::read_dir(&profiles) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io("read directory", &profiles, e)),
    };
    let mut named = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(raw) = file_name.to_str() else {
            continue;
        };
        let Ok(name) = ProfileName::parse(raw) else {
            continue;
        };
        if name.as_str() != raw {
            continue;
        }
        let dir = entry.path();
        if dir.join("SOUL.md").is_file() {
            named.push(ProfileEntry {
                description: read_description(&dir),
                profile: ProfileRef::Named(name),
                dir,
            });
        }
    }
    named.sort_by(|a, b| a.profile.name().cmp(b.profile.name()));
    out.extend(named);
    Ok(out)
}

/// Every profile's name and directory, the default one first; when `profiles/` cannot be
/// listed, the default profile alone and why (one line): what reads the whole volume
/// (boot's one read of it, the schema stamps) still reads the root.
pub fn dirs_or_default(root: &Path) -> (Vec<(String, PathBuf)>, Option<String>) {
    match list(root) {
        Ok(list) => (
            list.into_iter()
                .map(|e| (e.profile.name().to_owned(), e.dir))
                .collect(),
            None,
        ),
        Err(e) => (
            vec![(crate::DEFAULT_PROFILE.to_owned(), root.to_path_buf())],
            Some(hermes_errors::one_line(&e)),
        ),
    }
}

fn read_description(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(dir.join("profile.yaml")).ok()?;
    let value: yaml_serde::Value = yaml_serde::from_str(&text).ok()?;
    value.get("description")?.as_str().map(str::to_string)
}

/// The alias wrapper of a profile: a tiny script in `~/.local/bin` running `hermes -p NAME`.
pub mod alias {
    use super::*;

    /// What [`write`] did.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum AliasOutcome {
        /// The wrapper was written.
        Written(PathBuf),
        /// A command of that name already exists, so no wrapper was written.
        Conflict(PathBuf),
    }

    /// Where the wrappers go, `$HOME/.local/bin`, for `HOME`'s value (none when unset or
    /// empty: there is nowhere to write).
    pub fn dir(home: Option<&str>) -> Option<PathBuf> {
        home.filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".local/bin"))
    }

    /// Writes `<bin_dir>/<name>` running `<hermes> -p <name> "$@"`, unless a command of that
    /// name is already on `path_var` or the file exists and is not one of ours.
    pub fn write(
        bin_dir: &Path,
        name: &ProfileName,
        hermes: &Path,
        path_var: Option<&str>,
    ) -> Result<AliasOutcome, Error> {
        let wrapper = bin_dir.join(name.as_str());
        if let Some(existing) = find_on_path(name.as_str(), path_var)
            && !is_ours(&existing)
        {
            return Ok(AliasOutcome::Conflict(existing));
        }
        if wrapper.exists() && !is_ours(&wrapper) {
            return Ok(AliasOutcome::Conflict(wrapper));
        }
        fs::create_dir_all(bin_dir).map_err(|e| Error::io("create directory", bin_dir, e))?;
        let script = format!(
            "#!/bin/sh\nexec {} -p {name} \"$@\"\n",
            shell_quote(&hermes.to_string_lossy())
        );
        write_atomic(&wrapper, script.as_bytes(), 0o755)?;
        Ok(AliasOutcome::Written(wrapper))
    }

    /// The `hermes` a wrapper should run, given this process's executable `current_exe`:
    /// it must keep working after the build that wrote it is gone.
    ///
    /// * `current_exe` resolved (symlinks followed), unless it lies in a cargo build
    ///   directory (`target/debug/hermes`: an ancestor holds cargo's `CACHEDIR.TAG` or
    ///   `.rustc_info.json`), which `cargo clean` or the next build removes;
    /// * then the first `hermes` on `path_var` that is not in a build directory (the
    ///   installed one), resolved;
    /// * else the build's path, with [`Hermes::build_only`] set so the caller can warn.
    pub fn stable_hermes(current_exe: &Path, path_var: Option<&str>) -> Hermes {
        let resolved = fs::canonicalize(current_exe).unwrap_or_else(|_| current_exe.to_owned());
        if !in_cargo_build_dir(&resolved) {
            return Hermes {
                path: resolved,
                build_only: false,
            };
        }
        let installed = executables_on_path("hermes", path_var)
            .map(|p| fs::canonicalize(&p).unwrap_or(p))
            .find(|p| !in_cargo_build_dir(p));
        match installed {
            Some(path) => Hermes {
                path,
                build_only: false,
            },
            None => Hermes {
                path: resolved,
                build_only: true,
            },
        }
    }

    /// What [`stable_hermes`] chose.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Hermes {
        /// The executable the wrapper runs.
        pub path: PathBuf,
        /// It is a cargo build's output and no installed `hermes` was found: the wrapper
        /// breaks at the next `cargo clean`.
        pub build_only: bool,
    }

    /// Whether a directory of `path`'s is a cargo target directory (cargo writes these two
    /// files at its top, whatever `CARGO_TARGET_DIR` names it).
    fn in_cargo_build_dir(path: &Path) -> bool {
        path.ancestors()
            .skip(1)
            .any(|dir| dir.join("CACHEDIR.TAG").is_file() || dir.join(".rustc_info.json").is_file())
    }

    /// Whether `dir` is one of the directories of `path_var` (compared as written and
    /// resolved, so `~/.local/bin/` and a symlinked home still match): when it is not, a
    /// wrapper written there is not found by name.
    pub fn dir_on_path(dir: &Path, path_var: Option<&str>) -> bool {
        let wanted = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
        path_var
            .unwrap_or("")
            .split(':')
            .filter(|entry| !entry.is_empty())
            .map(Path::new)
            .any(|entry| {
                entry.components().eq(dir.components())
                    || fs::canonicalize(entry).is_ok_and(|e| e == wanted)
            })
    }

    /// Removes the wrapper if it is ours; returns its path when it was removed.
    pub fn remove(bin_dir: &Path, name: &ProfileName) -> Result<Option<PathBuf>, Error> {
        let wrapper = bin_dir.join(name.as_str());
        if !is_ours(&wrapper) {
            return Ok(None);
        }
        fs::remove_file(&wrapper).map_err(|e| Error::io("remove", &wrapper, e))?;
        Ok(Some(wrapper))
    }

    /// A wrapper is ours iff its first 8 KiB contain `-p <something>` after a `hermes` word.
    fn is_ours(path: &Path) -> bool {
        use std::io::Read;
        let Ok(file) = fs::File::open(path) else {
            return false;
        };
        let mut head = String::new();
        let _ = file.take(8192).read_to_string(&mut head);
        head.starts_with("#!/bin/sh\nexec ") && head.contains(" -p ")
    }

    fn find_on_path(command: &str, path_var: Option<&str>) -> Option<PathBuf> {
        executables_on_path(command, path_var).next()
    }

    /// Every executable file named `command` in the directories of `path_var`, in order.
    fn executables_on_path<'a>(
        command: &'a str,
        path_var: Option<&'a str>,
    ) -> impl Iterator<Item = PathBuf> + 'a {
        path_var
            .unwrap_or("")
            .split(':')
            .filter(|dir| !dir.is_empty())
            .map(move |dir| Path::new(dir).join(command))
            .filter(|candidate| {
                fs::metadata(candidate)
                    .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                    .unwrap_or(false)
            })
    }

    fn shell_quote(s: &str) -> String {
        if s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
        {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', "'\\''"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> ProfileName {
        ProfileName::parse(s).unwrap()
    }

    #[test]
    fn name_rule() {
        for ok in ["a", "0", "work", "my_bot-2", &"a".repeat(64)] {
            assert!(ProfileName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "_a",
            "Work",
            "a b",
            "a/b",
            "..",
            "é",
            &"a".repeat(65),
        ] {
            assert!(
                matches!(
                    ProfileName::parse(bad),
                    Err(Error::InvalidProfileName { .. })
                ),
                "{bad}"
            );
        }
        for reserved in RESERVED_NAMES {
            assert!(matches!(
                ProfileName::parse(reserved),
                Err(Error::ReservedProfileName { .. })
            ));
        }
    }

    #[test]
    fn create_clone_list_delete_roundtrip() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        ensure_skeleton(root, true, &crate::seeds::KeySeed::Generate).unwrap();
        fs::write(root.join(".env"), "OPENAI_API_KEY=sk-1\n").unwrap();
        fs::write(root.join("skills/note.md"), "skill").unwrap();
        let opts = CreateOptions {
            clone_from: Some(ProfileRef::Default),
            description: Some("Work bot".into()),
        };
        let created = create(root, &name("work"), &opts).unwrap();
        let env = fs::read_to_string(created.join(".env")).unwrap();
        let (copied, own_key) = env.split_once('\n').unwrap();
        assert_eq!(
            copied, "OPENAI_API_KEY=sk-1",
            "the source's secrets are copied"
        );
        let own_key = own_key.trim_end().strip_prefix("API_SERVER_KEY=").unwrap();
        assert_eq!(
            own_key.len(),
            64,
            "and the clone has a client key of its own"
        );
        assert_eq!(
            fs::metadata(created.join(".env"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
        assert_eq!(
            fs::read_to_string(created.join("skills/note.md")).unwrap(),
            "skill"
        );
        let listed = list(root).unwrap();
        assert_eq!(
            listed.iter().map(|e| e.profile.name()).collect::<Vec<_>>(),
            ["default", "work"]
        );
        assert_eq!(listed[1].description.as_deref(), Some("Work bot"));
        assert!(matches!(
            create(root, &name("work"), &CreateOptions::default()),
            Err(Error::ProfileExists { .. })
        ));

        set_active(root, &ProfileRef::Named(name("work"))).unwrap();
        let deleted = delete(root, &ProfileRef::Named(name("work")), Disposal::Trash).unwrap();
        assert!(deleted.active_reset);
        assert!(deleted.trashed_to.unwrap().join("SOUL.md").is_file());
        assert_eq!(list(root).unwrap().len(), 1);
        assert!(matches!(
            delete(root, &ProfileRef::Default, Disposal::Purge),
            Err(Error::DefaultProfileUndeletable)
        ));
    }

    #[test]
    fn failed_creation_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let opts = CreateOptions {
            clone_from: Some(ProfileRef::Named(name("ghost"))),
            description: None,
        };
        assert!(matches!(
            create(root, &name("new"), &opts),
            Err(Error::ProfileNotFound { .. })
        ));
        let leftovers: Vec<_> = fs::read_dir(root.join("profiles")).unwrap().collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn alias_is_written_unless_a_command_exists() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let other = dir.path().join("other");
        fs::create_dir_all(&other).unwrap();
        let taken = other.join("ls");
        fs::write(&taken, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&taken, fs::Permissions::from_mode(0o755)).unwrap();
        let path_var = other.to_string_lossy().to_string();
        let hermes = Path::new("/usr/bin/hermes");
        assert_eq!(
            alias::write(&bin, &name("ls"), hermes, Some(&path_var)).unwrap(),
            alias::AliasOutcome::Conflict(taken)
        );
        let written = alias::write(&bin, &name("work"), hermes, Some(&path_var)).unwrap();
        let alias::AliasOutcome::Written(path) = written else {
            panic!("not written")
        };
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            "#!/bin/sh\nexec /usr/bin/hermes -p work \"$@\"\n"
        );
        assert_eq!(alias::remove(&bin, &name("work")).unwrap(), Some(path));
    }

    fn executable(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_wrapper_runs_the_installed_hermes_rather_than_a_cargo_build() {
        let dir = tempfile::tempdir().unwrap();
        let dir = fs::canonicalize(dir.path()).unwrap();
        // A cargo target directory (its CACHEDIR.TAG) and a build in it.
        let target = dir.join("checkout/target");
        let build = target.join("debug/hermes");
        executable(&build);
        fs::write(
            target.join("CACHEDIR.TAG"),
            "Signature: 8a477f597d28d172789f06886806bc55\n",
        )
        .unwrap();
        let installed = dir.join("home/.cargo/bin/hermes");
        executable(&installed);
        // An installed binary is used as it is, resolved.
        let link = dir.join("usr-local-bin/hermes");
        fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&installed, &link).unwrap();
        let chosen = alias::stable_hermes(&link, None);
        assert_eq!((chosen.path, chosen.build_only), (installed.clone(), false));
        // A build prefers the `hermes` on PATH that is not a build itself.
        let path_var = format!(
            "{}:{}",
            build.parent().unwrap().display(),
            installed.parent().unwrap().display()
        );
        let chosen = alias::stable_hermes(&build, Some(&path_var));
        assert_eq!((chosen.path, chosen.build_only), (installed, false));
        // None installed: the build, said.
        let chosen = alias::stable_hermes(&build, Some("/nonexistent"));
        assert_eq!((chosen.path, chosen.build_only), (build, true));
    }

    #[test]
    fn a_directory_is_on_path_as_written_or_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("home/.local/bin");
        fs::create_dir_all(&bin).unwrap();
        let link = dir.path().join("home-link");
        std::os::unix::fs::symlink(dir.path().join("home"), &link).unwrap();
        assert!(alias::dir_on_path(
            &bin,
            Some(&format!("/usr/bin:{}", bin.display()))
        ));
        assert!(alias::dir_on_path(
            &bin,
            Some(&format!("{}/", bin.display()))
        ));
        assert!(alias::dir_on_path(
            &bin,
            Some(&format!("{}/.local/bin", link.display()))
        ));
        assert!(!alias::dir_on_path(&bin, Some("/usr/bin:/bin")));
        assert!(!alias::dir_on_path(&bin, None));
    }

    #[test]
    fn set_active_waits_for_the_active_profile_lock() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        ensure_skeleton(root, true, &crate::seeds::KeySeed::Generate).unwrap();
        create(root, &name("work"), &CreateOptions::default()).unwrap();
        let held = lock::hold(&root.join("active_profile.lock"));
        lock::test_timeout::set(std::time::Duration::from_millis(100));
        let result = set_active(root, &ProfileRef::Named(name("work")));
        assert!(
            matches!(result, Err(Error::LockTimeout { .. })),
            "a writer must not change `active_profile` while another holds its lock: {result:?}"
        );
        assert!(!root.join("active_profile").exists());
        drop(held);
        set_active(root, &ProfileRef::Named(name("work"))).unwrap();
        assert_eq!(
            fs::read_to_string(root.join("active_profile")).unwrap(),
            "work\n"
        );
    }
}
