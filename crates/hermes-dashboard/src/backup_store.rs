//! The backups directory as the page sees it: where it is, which names in it are archives a
//! request may name, listing them, the schedule's state file, and writing an upload under a
//! temporary name.
//!
//! A name a request gives is checked before any file is touched ([`archive_name`]): letters,
//! digits, `.`, `_` and `-` only (so it can go into a `Content-Disposition` header as it is),
//! not starting with a dot (partial files and `.schedule.json` are not archives), ending in
//! `.zip`. Opening it never follows a symlink ([`open_archive`]) and it must be a regular file.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// The longest archive name accepted.
pub const MAX_NAME: usize = 200;

/// Creates the directory (mode 0700: archives hold the volume's secrets), and any missing
/// parent, when missing; what it creates is owned like the nearest directory that was there
/// (the volume's root, as `hermes backup create` does when root makes it; for anyone else the
/// `chown` is to themselves, or refused and ignored).
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    let mut missing = vec![dir.to_path_buf()];
    let mut at = dir.parent();
    let owner = loop {
        match at {
            Some(p) if !p.as_os_str().is_empty() => match fs::metadata(p) {
                Ok(meta) => break Some((meta.uid(), meta.gid())),
                Err(_) => {
                    missing.push(p.to_path_buf());
                    at = p.parent();
                }
            },
            _ => break None,
        }
    };
    for d in missing.iter().rev() {
        match fs::DirBuilder::new().mode(0o700).create(d) {
            Ok(()) => {
                if let Some((uid, gid)) = owner {
                    let _ = std::os::unix::fs::chown(d, Some(uid), Some(gid));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Why a name is not one of an archive, for the 400's detail.
pub fn archive_name(name: &str) -> Result<&str, String> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(format!("an archive name has 1 to {MAX_NAME} characters"));
    }
    if name.contains('/') || name.contains("..") {
        return Err(format!("`{name}` is not a plain file name"));
    }
    if name.starts_with('.') {
        return Err(format!("`{name}` is not an archive (it starts with a dot)"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(format!(
            "`{name}` has characters other than letters, digits, `.`, `_` and `-`"
        ));
    }
    if !name.ends_with(".zip") || name.len() == ".zip".len() {
        return Err(format!("`{name}` is not a `.zip` archive"));
    }
    Ok(name)
}

/// An uploaded file's name made into an archive name: characters outside the rule become
/// `-`, a leading dot goes, `.zip` is added when missing; `None` when nothing is left.
pub fn sanitize(given: &str) -> Option<String> {
    let base = given.rsplit(['/', '\\']).next().unwrap_or(given);
    let mut name: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    while name.contains("..") {
        name = name.replace("..", ".");
    }
    let stem = name.strip_suffix(".zip").unwrap_or(&name);
    let stem = stem.trim_start_matches(['.', '-']);
    let mut stem: String = stem.chars().take(MAX_NAME - ".zip".len()).collect();
    while stem.ends_with('.') {
        stem.pop();
    }
    (!stem.is_empty()).then(|| format!("{stem}.zip"))
}

/// The name an upload called `given` is stored under: [`sanitize`]d, and prefixed with
/// `uploaded-` when it has a scheduled archive's name (pruning would delete it otherwise).
pub fn upload_name(given: &str) -> Option<String> {
    let name = sanitize(given)?;
    Some(if is_scheduled(&name) {
        format!("uploaded-{name}")
    } else {
        name
    })
}

/// Whether `name` is a scheduled archive (`hermes-backup-YYYYmmdd-HHMMSS.zip`), the names the
/// scheduled backups write and prune: their own rule.
pub fn is_scheduled(name: &str) -> bool {
    hermes_backup::schedule::is_archive_name(name)
}

/// The name of an archive the dashboard makes now: `hermes-dashboard-YYYYmmdd-HHMMSS.zip`
/// (never a scheduled one's name, so pruning never takes it), with `-2`, `-3`, … when taken.
pub fn new_name(dir: &Path) -> String {
    let now = OffsetDateTime::now_utc();
    let stem = format!(
        "hermes-dashboard-{:04}{:02}{:02}-{:02}{:02}{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    free_name(dir, &stem)
}

/// `<stem>.zip`, or `<stem>-N.zip` with the first N not taken in `dir`.
pub fn free_name(dir: &Path, stem: &str) -> String {
    let mut name = format!("{stem}.zip");
    let mut n = 2;
    while fs::symlink_metadata(dir.join(&name)).is_ok() {
        name = format!("{stem}-{n}.zip");
        n += 1;
    }
    name
}

/// Opens the archive `name` (already checked by [`archive_name`]) in `dir` without following
/// a symlink; `Ok(None)` when there is none, an error line when it is not a regular file.
pub fn open_archive(dir: &Path, name: &str) -> Result<Option<(File, u64)>, String> {
    let path = dir.join(name);
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(format!("`{name}` is a symlink, not an archive"));
        }
        Err(e) => return Err(format!("cannot open `{}`: {e}", path.display())),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("`{name}` is not a regular file"));
    }
    Ok(Some((file, meta.len())))
}

/// Whether `name` is what the original's `hermes backup` names an archive when not told
/// otherwise: `hermes-backup-YYYY-MM-DD-HHMMSS.zip` (its local time).
pub fn is_original_name(name: &str) -> bool {
    let Some(stamp) = name
        .strip_prefix("hermes-backup-")
        .and_then(|rest| rest.strip_suffix(".zip"))
    else {
        return false;
    };
    let shape = "dddd-dd-dd-dddddd";
    stamp.len() == shape.len()
        && stamp.chars().zip(shape.chars()).all(|(c, s)| match s {
            'd' => c.is_ascii_digit(),
            _ => c == s,
        })
}

/// Where the original's `hermes backup` leaves its archives when not told otherwise: its home
/// (`Path.home()`). In its image that is the volume's root (`HOME=/opt/data`); on a machine,
/// the user's home, `home` here (the dashboard's `$HOME`). Each directory once, the backups
/// directory left out (its archives are listed as ours).
pub fn original_dirs(root: &Path, home: Option<&Path>, backups: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for dir in std::iter::once(root).chain(home) {
        if dir != backups && !dirs.iter().any(|d| d == dir) {
            dirs.push(dir.to_path_buf());
        }
    }
    dirs
}

/// The original's archives ([`is_original_name`]) in each of `dirs`, newest first, as
/// `{dir, archives}` for each directory that has any.
pub fn list_original(dirs: &[PathBuf]) -> Vec<Value> {
    dirs.iter()
        .filter_map(|dir| {
            let archives: Vec<Entry> = list(dir)
                .ok()?
                .into_iter()
                .filter(|e| is_original_name(&e.name))
                .collect();
            (!archives.is_empty()).then(|| json!({ "dir": dir, "archives": archives }))
        })
        .collect()
}

/// Copies the original's archive `name` of `from` (one of [`original_dirs`]) into `to`, under
/// the same name, so the page's actions apply to it; never over an archive already there,
/// never through a symlink (either side), written under a temporary name and renamed.
///
/// # Errors
/// What is wrong, in words: not such an archive, one of that name already in `to`, the copy
/// failing.
pub fn copy_in(from: &Path, name: &str, to: &Path) -> Result<u64, String> {
    if !is_original_name(name) {
        return Err(format!(
            "`{name}` is not named as the original's archives are"
        ));
    }
    let Some((mut source, _)) = open_archive(from, name)? else {
        return Err(format!("no archive `{name}` in `{}`", from.display()));
    };
    ensure_dir(to).map_err(|e| format!("cannot create `{}`: {e}", to.display()))?;
    let target = to.join(name);
    if fs::symlink_metadata(&target).is_ok() {
        return Err(format!("`{name}` is already in the backups directory"));
    }
    let partial = to.join(format!(".{name}.partial"));
    let _ = fs::remove_file(&partial);
    let copied = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&partial)
        .and_then(|mut out| {
            let n = io::copy(&mut source, &mut out)?;
            out.sync_all()?;
            Ok(n)
        })
        .and_then(|n| fs::hard_link(&partial, &target).map(|()| n));
    let _ = fs::remove_file(&partial);
    copied.map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => format!("`{name}` is already in the backups directory"),
        _ => format!("cannot copy `{name}` into `{}`: {e}", to.display()),
    })
}

/// One archive of the list.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    /// Its file name.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written (UTC, RFC 3339).
    pub modified: Option<String>,
    /// Whether the scheduled backups made it (and will prune it).
    pub scheduled: bool,
}

/// The archives in `dir`, newest first; a missing directory is an empty list. Symlinks,
/// directories and names that are not archives are left out.
pub fn list(dir: &Path) -> io::Result<Vec<Entry>> {
    let read = match fs::read_dir(dir) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut entries = Vec::new();
    for item in read {
        let item = item?;
        let Some(name) = item.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if archive_name(&name).is_err() {
            continue;
        }
        // `DirEntry::metadata` does not follow symlinks.
        let Ok(meta) = item.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().ok();
        entries.push((
            modified,
            Entry {
                scheduled: is_scheduled(&name),
                modified: modified.and_then(rfc3339),
                size: meta.len(),
                name,
            },
        ));
    }
    entries.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.name.cmp(&a.1.name)));
    Ok(entries.into_iter().map(|(_, e)| e).collect())
}

/// A time as RFC 3339 UTC with seconds.
fn rfc3339(t: SystemTime) -> Option<String> {
    let t = OffsetDateTime::from(t).replace_nanosecond(0).ok()?;
    t.format(&Rfc3339).ok()
}

/// The schedule's state (`.schedule.json`, read by the scheduled backups' own reader) as the
/// page shows it: `{schedule, last_run, ok, error, file, size, duration_ms, next_run,
/// last_success}` (`last_run` is when it started, `error` its result when it failed, `file`
/// the archive's name; each `null` when there is none), `None` when there is no state yet; a
/// file that cannot be read is `{"unreadable": "…"}`, so the page says so instead of hiding it.
pub fn schedule(dir: &Path) -> Option<Value> {
    let state = match hermes_backup::schedule::read_state(dir) {
        Ok(state) => state?,
        Err(e) => return Some(json!({ "unreadable": hermes_errors::one_line(&e) })),
    };
    let run = state.last_run.as_ref();
    Some(json!({
        "schedule": state.schedule,
        "last_run": run.map(|r| &r.started),
        "ok": run.map(|r| r.ok),
        "error": run.filter(|r| !r.ok).map(|r| &r.result),
        "file": run
            .and_then(|r| r.file.as_ref())
            .and_then(|f| f.file_name())
            .map(|n| n.to_string_lossy()),
        "size": run.and_then(|r| r.size),
        "duration_ms": run.map(|r| r.duration_ms),
        "next_run": state.next_run,
        "last_success": state.last_success,
    }))
}

/// An upload being written: `.upload-<random>.partial` in the directory, mode 0600, removed
/// when dropped unless [`Upload::keep_as`] moved it to its name.
pub struct Upload {
    /// The temporary file's path.
    pub path: PathBuf,
    /// The open file.
    pub file: Option<File>,
}

impl Upload {
    /// A new temporary file in `dir`.
    pub fn create(dir: &Path) -> io::Result<Upload> {
        let suffix = hermes_home::random::random_hex(8)?;
        let path = dir.join(format!(".upload-{suffix}.partial"));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        Ok(Upload {
            path,
            file: Some(file),
        })
    }

    /// Gives the written file the name `name` in the same directory, never replacing a file
    /// there (a link then the temporary name's removal: `AlreadyExists` when taken).
    pub fn keep_as(mut self, name: &str) -> io::Result<PathBuf> {
        self.file = None;
        let target = self
            .path
            .parent()
            .map_or_else(|| PathBuf::from(name), |d| d.join(name));
        fs::hard_link(&self.path, &target)?;
        let _ = fs::remove_file(&self.path);
        if let Some(dir) = target.parent()
            && let Ok(d) = File::open(dir)
        {
            let _ = d.sync_all();
        }
        // Nothing left to remove on drop.
        self.path = PathBuf::new();
        Ok(target)
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_originals_archives_are_found_in_its_home_and_copied_in_without_clobbering() {
        assert!(is_original_name("hermes-backup-2026-08-01-120000.zip"));
        for not in [
            "hermes-backup-20260801-120000.zip",
            "hermes-backup-2026-08-01-12000.zip",
            "hermes-backup-2026-08-01-120000.zip.partial",
            "other.zip",
        ] {
            assert!(!is_original_name(not), "{not}");
        }
        let tmp = tempfile::tempdir().unwrap();
        let (root, home, backups) = (
            tmp.path().join("data"),
            tmp.path().join("home"),
            tmp.path().join("data/backups"),
        );
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&home).unwrap();
        let name = "hermes-backup-2026-08-01-120000.zip";
        fs::write(root.join(name), "zip bytes").unwrap();
        fs::write(root.join("unrelated.zip"), "x").unwrap();
        std::os::unix::fs::symlink(
            "/etc/passwd",
            home.join("hermes-backup-2026-08-02-120000.zip"),
        )
        .unwrap();
        let dirs = original_dirs(&root, Some(&home), &backups);
        assert_eq!(dirs, [root.clone(), home.clone()]);
        let found = list_original(&dirs);
        assert_eq!(found.len(), 1, "a symlink is not an archive: {found:?}");
        assert_eq!(found[0]["archives"][0]["name"], name);

        assert_eq!(copy_in(&root, name, &backups), Ok(9));
        assert_eq!(fs::read(backups.join(name)).unwrap(), b"zip bytes");
        let again = copy_in(&root, name, &backups).unwrap_err();
        assert!(
            again.contains("already in the backups directory"),
            "{again}"
        );
        assert!(copy_in(&home, "hermes-backup-2026-08-02-120000.zip", &backups).is_err());
        assert!(copy_in(&root, "unrelated.zip", &backups).is_err());
        assert!(!backups.join("hermes-backup-2026-08-02-120000.zip").exists());
    }
    use hermes_backup::schedule::STATE_FILE as SCHEDULE_FILE;

    #[test]
    fn names_are_plain_archive_names() {
        for ok in ["a.zip", "hermes-backup-20261202-101500.zip", "x_y-1.2.zip"] {
            assert_eq!(archive_name(ok), Ok(ok));
        }
        for bad in [
            "",
            ".zip",
            "../x.zip",
            "a/b.zip",
            "..zip",
            "a..zip",
            ".schedule.json",
            ".upload-1.partial",
            "a.tar",
            "a b.zip",
            "a\"b.zip",
            "a\r\nX: y.zip",
            "ü.zip",
        ] {
            assert!(archive_name(bad).is_err(), "{bad:?}");
        }
        assert!(archive_name(&format!("{}.zip", "a".repeat(MAX_NAME))).is_err());
    }

    #[test]
    fn uploaded_names_are_made_plain() {
        assert_eq!(sanitize("my backup.zip").as_deref(), Some("my-backup.zip"));
        assert_eq!(sanitize("C:\\x\\y.zip").as_deref(), Some("y.zip"));
        assert_eq!(sanitize("../../etc/passwd").as_deref(), Some("passwd.zip"));
        assert_eq!(sanitize(".hidden").as_deref(), Some("hidden.zip"));
        assert_eq!(sanitize("a..b.zip").as_deref(), Some("a.b.zip"));
        assert_eq!(sanitize(".zip"), None);
        assert_eq!(sanitize("..."), None);
        for given in ["x", "my backup.zip", "..a", "ü.zip", &"z".repeat(500)] {
            if let Some(name) = sanitize(given) {
                assert_eq!(archive_name(&name), Ok(name.as_str()), "{given:?}");
            }
        }
    }

    #[test]
    fn an_upload_never_takes_a_scheduled_name() {
        assert_eq!(
            upload_name("hermes-backup-20261202-101500.zip").as_deref(),
            Some("uploaded-hermes-backup-20261202-101500.zip")
        );
        assert_eq!(upload_name("mine.zip").as_deref(), Some("mine.zip"));
        assert!(!is_scheduled(
            &upload_name("hermes-backup-20261202-101500").unwrap()
        ));
    }

    #[test]
    fn scheduled_names_are_recognised() {
        assert!(is_scheduled("hermes-backup-20261202-101500.zip"));
        assert!(!is_scheduled("hermes-backup-20261202-1015.zip"));
        assert!(!is_scheduled("hermes-dashboard-20261202-101500.zip"));
        assert!(!is_scheduled("hermes-backup-2026120x-101500.zip"));
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_scheduled(&new_name(dir.path())));
        assert!(archive_name(&new_name(dir.path())).is_ok());
    }

    #[test]
    fn the_directory_and_its_missing_parents_are_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("backups/nightly");
        ensure_dir(&dir).unwrap();
        for d in [root.path().join("backups"), dir.clone()] {
            assert_eq!(
                fs::metadata(&d).unwrap().permissions().mode() & 0o777,
                0o700
            );
        }
        ensure_dir(&dir).unwrap();
        fs::write(root.path().join("file"), "").unwrap();
        assert!(ensure_dir(&root.path().join("file/x")).is_err());
    }

    #[test]
    fn a_taken_name_gets_a_number() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.zip"), "").unwrap();
        fs::write(dir.path().join("a-2.zip"), "").unwrap();
        assert_eq!(free_name(dir.path(), "a"), "a-3.zip");
    }

    #[test]
    fn the_list_has_archives_only_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("old.zip"), "1").unwrap();
        let past = SystemTime::now() - std::time::Duration::from_secs(3600);
        File::options()
            .write(true)
            .open(d.join("old.zip"))
            .unwrap()
            .set_modified(past)
            .unwrap();
        fs::write(d.join("hermes-backup-20261202-101500.zip"), "22").unwrap();
        fs::write(d.join(".upload-x.partial"), "").unwrap();
        fs::write(d.join(SCHEDULE_FILE), "{}").unwrap();
        fs::write(d.join("notes.txt"), "").unwrap();
        fs::create_dir(d.join("dir.zip")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.join("link.zip")).unwrap();
        let names: Vec<(String, u64, bool)> = list(d)
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.size, e.scheduled))
            .collect();
        assert_eq!(
            names,
            [
                ("hermes-backup-20261202-101500.zip".into(), 2, true),
                ("old.zip".into(), 1, false),
            ]
        );
        assert!(list(&d.join("none")).unwrap().is_empty());
    }

    #[test]
    fn a_symlink_or_directory_is_never_opened_as_an_archive() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(d.join("real.zip"), "abc").unwrap();
        std::os::unix::fs::symlink(d.join("real.zip"), d.join("link.zip")).unwrap();
        fs::create_dir(d.join("dir.zip")).unwrap();
        assert_eq!(open_archive(d, "real.zip").unwrap().unwrap().1, 3);
        assert!(open_archive(d, "link.zip").unwrap_err().contains("symlink"));
        assert!(open_archive(d, "dir.zip").is_err());
        assert!(open_archive(d, "none.zip").unwrap().is_none());
    }

    #[test]
    fn the_schedule_file_is_read_or_said_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        assert!(schedule(dir.path()).is_none());
        // As the scheduled backups write it: a failed run, after a good one.
        fs::write(
            dir.path().join(SCHEDULE_FILE),
            r#"{"schedule": "daily", "next_run": "2026-12-03T00:00:00Z",
                "last_run": {"started": "2026-12-02T00:00:00Z", "ok": false,
                             "result": "could not include `state.db`", "file": null,
                             "size": null, "duration_ms": 12, "pruned": []},
                "last_success": "2026-12-01T00:00:00Z"}"#,
        )
        .unwrap();
        let failed = schedule(dir.path()).unwrap();
        assert_eq!(failed["schedule"], "daily");
        assert_eq!(failed["last_run"], "2026-12-02T00:00:00Z");
        assert_eq!(failed["ok"], false);
        assert_eq!(failed["error"], "could not include `state.db`");
        assert_eq!(failed["next_run"], "2026-12-03T00:00:00Z");
        assert_eq!(failed["last_success"], "2026-12-01T00:00:00Z");
        fs::write(
            dir.path().join(SCHEDULE_FILE),
            r#"{"schedule": "hourly", "next_run": null, "last_run": {"started": "2026-12-02T01:00:00Z",
                "ok": true, "result": "ok", "file": "/opt/data/backups/hermes-backup-20261202-010000.zip",
                "size": 99, "duration_ms": 5, "pruned": []}}"#,
        )
        .unwrap();
        let good = schedule(dir.path()).unwrap();
        assert_eq!(good["ok"], true);
        assert_eq!(good["error"], Value::Null);
        assert_eq!(good["file"], "hermes-backup-20261202-010000.zip");
        assert_eq!(good["size"], 99);
        fs::write(
            dir.path().join(SCHEDULE_FILE),
            r#"{"schedule": "daily", "next_run": null, "last_run": null}"#,
        )
        .unwrap();
        let never = schedule(dir.path()).unwrap();
        assert_eq!(never["last_run"], Value::Null);
        assert_eq!(never["ok"], Value::Null);
        fs::write(dir.path().join(SCHEDULE_FILE), "{ not json").unwrap();
        assert!(schedule(dir.path()).unwrap()["unreadable"].is_string());
    }

    #[test]
    fn an_upload_is_0600_and_never_replaces_a_file() {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut up = Upload::create(d).unwrap();
        up.file.as_mut().unwrap().write_all(b"zip").unwrap();
        let mode = fs::metadata(&up.path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let kept = up.keep_as("u.zip").unwrap();
        assert_eq!(fs::read(kept).unwrap(), b"zip");

        let up = Upload::create(d).unwrap();
        let temp = up.path.clone();
        assert_eq!(
            up.keep_as("u.zip").unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert!(!temp.exists(), "the temporary file was removed");
        assert_eq!(fs::read(d.join("u.zip")).unwrap(), b"zip");
        let left: Vec<_> = fs::read_dir(d).unwrap().collect();
        assert_eq!(left.len(), 1);
    }
}
