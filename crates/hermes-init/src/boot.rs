//! Boot stages 1–6, run by PID 1 before anything is supervised.
//!
//! | # | stage | as | on failure |
//! |---|---|---|---|
//! | 1 | user guard (`--user` other than root or the service uid) | — | **stop** (exit 1, `HERMES_UID` remedy) |
//! | 2 | UID/GID remap from `HERMES_UID`/`HERMES_GID` (`PUID`/`PGID`) | root | warn, keep old ids |
//! | 3 | device/socket groups (Docker socket, `/dev/dri`) join the drop | root | skip the device |
//! | 3b | roll back a restore a kill interrupted (`hermes backup recover`, run only when a `.restore-*` staging directory is there) | as init runs | warn |
//! | 4 | targeted, symlink-proof ownership repair of the data volume | root | warn per path |
//! | 5 | skeleton dirs and first-boot seeds (`.env` + `API_SERVER_KEY`, `config.yaml` and `SOUL.md` — from `HERMES_SEED_DIR` when it has them —, `gateway_state.json`, `auth.json`) | service user | warn |
//! | 6 | remove a stale `docker` install stamp from the volume | service user | warn |
//! | 6b | the installed agent against the volume's config schema ([`crate::migrate`]) | service user | warn; park the agent's gateways |
//!
//! Words: a **stage** is one row above; it is *contained*: its failure becomes `[init]`
//! warning lines and boot goes on, unless running would be unsafe (stage 1, or no service
//! user inside the image, where the only alternative would be running everything as root).
//! Stage 7 (gateways) lives in [`crate::gateways`].

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use hermes_home::dotenv::DotEnv;
use hermes_home::random::random_hex;
use hermes_home::seeds::{KeySeed, Seeded, seed_file};
use hermes_home::volume;
use hermes_home::{gateway_state, layout};
use hermes_privilege::{
    FileRule, IdRequest, Identity, InitMode, RemapReport, RepairPlan, SERVICE_USER, device_gids,
    init_user_guard, remap, repair_ownership,
};

use hermes_settings::{ProfileFiles, Scope};

use crate::{Error, Settings};
use hermes_privilege::AsUser;

/// Directories seeded under `HERMES_HOME` besides the profile skeleton.
pub const EXTRA_DIRS: &[&str] = &[
    "backups",
    "hooks",
    "skins",
    "logs/gateways",
    "pairing",
    "platforms/pairing",
];

/// `.env` variable holding the loopback API server key.
pub use hermes_home::seeds::API_SERVER_KEY;
/// Seeds `gateway_state.json` on first boot when exactly `running`.
pub const GATEWAY_BOOTSTRAP_VAR: &str = "HERMES_GATEWAY_BOOTSTRAP_STATE";
/// Seeds `auth.json` (JSON text, verbatim) on first boot.
pub const AUTH_BOOTSTRAP_VAR: &str = "HERMES_AUTH_JSON_BOOTSTRAP";
/// A directory (a Kubernetes ConfigMap's mount) whose `config.yaml` and `SOUL.md` replace the
/// built-in seeds on first boot; a file already on the volume still wins.
pub const SEED_DIR_VAR: &str = "HERMES_SEED_DIR";
/// The files [`SEED_DIR_VAR`] may provide, with the mode a seeded one gets (the skeleton's).
const SEED_DIR_FILES: [(&str, u32); 2] = [(layout::CONFIG_FILE, 0o640), (layout::SOUL_FILE, 0o644)];
/// The most a seed file may hold (a ConfigMap holds at most 1 MiB in all).
const SEED_FILE_MAX: u64 = 1 << 20;
/// The install-method stamp that must not live on the volume.
pub const INSTALL_STAMP: &str = ".install_method";

/// Who the boot ended up running things as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Booted {
    /// How init runs (root with drops, or already the service user).
    pub mode: InitMode,
    /// The identity services and the main program drop to; `None` when there is nothing to
    /// drop to (not root, or no service user outside the image).
    pub identity: Option<Identity>,
}

/// Writes one `[init]` line (best effort: boot never fails because the log is closed).
pub(crate) fn say(out: &mut dyn Write, line: impl std::fmt::Display) {
    let _ = writeln!(out, "[init] {line}");
}

/// A writer that starts every line with `[init] `: PID 1 hands it to the parts it shares
/// with `hermes up` (gateway reconciliation, the desired-state hooks), which write plain
/// lines.
pub struct InitLog<'a> {
    out: &'a mut dyn Write,
    at_line_start: bool,
}

impl<'a> InitLog<'a> {
    /// Wraps `out`.
    pub fn new(out: &'a mut dyn Write) -> Self {
        InitLog {
            out,
            at_line_start: true,
        }
    }
}

impl Write for InitLog<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for piece in buf.split_inclusive(|b| *b == b'\n') {
            if self.at_line_start {
                self.out.write_all(b"[init] ")?;
            }
            self.out.write_all(piece)?;
            self.at_line_start = piece.ends_with(b"\n");
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Runs stages 1–6 (module doc).
///
/// # Errors
/// [`Error::Privilege`] for a foreign `--user` (exit 1); [`Error::NoServiceUser`] when the
/// image marker is present but the service user is missing.
pub fn run_stages(settings: &Settings, out: &mut dyn Write) -> Result<Booted, Error> {
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let in_image = hermes_privilege::image_marker_present(&settings.image_marker);

    // Stage 1: the user guard.
    let looked_up = Identity::lookup(&settings.accounts, SERVICE_USER);
    let service_uid = looked_up.as_ref().ok().map(|i| i.uid);
    let mode = init_user_guard(uid, gid, SERVICE_USER, service_uid)?;
    let mut identity = match looked_up {
        Ok(id) => Some(id),
        Err(source) if in_image => {
            return Err(Error::NoServiceUser {
                user: SERVICE_USER.to_owned(),
                passwd: settings.accounts.passwd.clone(),
                source,
            });
        }
        Err(e) => {
            say(
                out,
                format!(
                    "warning: no `{SERVICE_USER}` user ({e}); outside the image, so services \
                     and the main program run as uid {uid}"
                ),
            );
            None
        }
    };

    let caps = hermes_privilege::Capabilities::current();
    if mode == InitMode::Root && identity.is_some() && !caps.can_switch_user() {
        // Root without CAP_SETUID/CAP_SETGID (`--cap-drop ALL`) cannot become the service
        // user, and without CAP_DAC_OVERRIDE it cannot write the service user's volume
        // either: nothing would work, so say what does.
        return Err(Error::CannotSwitchUser {
            user: SERVICE_USER.to_owned(),
        });
    }
    if mode == InitMode::Root {
        if let Err(e) = fs::create_dir_all(&settings.home) {
            say(
                out,
                format!("warning: cannot create `{}`: {e}", settings.home.display()),
            );
        }
        if identity.is_some() {
            identity = stage_remap(settings, identity, out);
        }
    }
    // Stage 3: device groups (also useful to a remapped user; never gid 0).
    if let Some(id) = identity.as_mut() {
        let gids = device_gids(&settings.device_paths);
        if !gids.is_empty() {
            say(out, format!("joining device groups {gids:?}"));
            // Also in the group file, so `docker exec -u hermes` sessions have them as the
            // services do (only root may write it; a read-only image says so once).
            if mode == InitMode::Root {
                match hermes_privilege::record_device_groups(&settings.accounts, &id.name, &gids) {
                    Ok(changes) => changes.into_iter().for_each(|c| say(out, c)),
                    Err(e) => say(
                        out,
                        format!(
                            "warning: device groups not recorded: {}",
                            hermes_errors::one_line(&e)
                        ),
                    ),
                }
            }
        }
        id.add_groups(gids);
    }
    // Stage 3b: before anything reads the volume, and as root where possible (a root `docker
    // exec` restore leaves a root-only staging directory).
    stage_recover_restore(settings, out);
    // Stage 4: ownership repair.
    if mode == InitMode::Root
        && let Some(id) = &identity
    {
        if caps.can_chown() {
            stage_repair(settings, id, out);
        } else {
            say(
                out,
                "warning: no CAP_CHOWN (`--cap-drop CHOWN`?): ownership repair skipped; files \
                 on the volume keep their owners",
            );
        }
    }
    // When already the service user there is nothing to drop to: run children as we are.
    let identity = if mode == InitMode::ServiceUser {
        None
    } else {
        identity
    };
    // Stages 5–6, with the service user's ids.
    match AsUser::enter(identity.as_ref()) {
        Ok(_scope) => {
            // Nothing can be saved on a volume the service user cannot write: running on
            // would lose every change in silence, so the boot stops here and says what to fix.
            volume_writable(&settings.home)?;
            stage_seed(settings, out);
            stage_stamp(settings, out);
        }
        Err(e) => say(
            out,
            format!("warning: cannot act as `{SERVICE_USER}` ({e}); skipping first-boot seeds"),
        ),
    }
    Ok(Booted { mode, identity })
}

/// Whether the current (effective) user can create a file in `home`: a probe file is created
/// exclusively and removed.
///
/// # Errors
/// [`Error::VolumeNotWritable`] with the errno (read-only file system, permission denied).
fn volume_writable(home: &Path) -> Result<(), Error> {
    // A missing home is created first (as the user who will own it); a failure shows below.
    let _ = fs::create_dir_all(home);
    let probe = home.join(format!(".hermes-write-probe-{}", std::process::id()));
    let created = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    match created {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Ok(())
        }
        Err(source) => Err(Error::VolumeNotWritable {
            path: home.to_path_buf(),
            uid: nix::unistd::geteuid().as_raw(),
            source,
        }),
    }
}

/// Stage 2: remap, then look the (possibly changed) user up again.
fn stage_remap(
    settings: &Settings,
    identity: Option<Identity>,
    out: &mut dyn Write,
) -> Option<Identity> {
    let request = IdRequest::from_env(&settings.env);
    for w in &request.warnings {
        say(out, format!("warning: {w}"));
    }
    if request.uid.is_none() && request.gid.is_none() {
        return identity;
    }
    match remap(&settings.accounts, SERVICE_USER, SERVICE_USER, &request) {
        Ok(report) => {
            describe_remap(&report, out);
            match Identity::lookup(&settings.accounts, SERVICE_USER) {
                Ok(id) => Some(id),
                Err(e) => {
                    say(
                        out,
                        format!(
                            "warning: cannot read `{SERVICE_USER}` after the remap: {}",
                            hermes_errors::one_line(&e)
                        ),
                    );
                    identity
                }
            }
        }
        Err(e) => {
            say(
                out,
                format!(
                    "warning: cannot remap `{SERVICE_USER}`: {}",
                    hermes_errors::one_line(&e)
                ),
            );
            if let Some(h) = e.hint() {
                say(out, format!("hint: {h}"));
            }
            identity
        }
    }
}

fn describe_remap(report: &RemapReport, out: &mut dyn Write) {
    use hermes_privilege::IdChange;
    if let IdChange::Changed { from, to } = report.uid {
        say(out, format!("changed `{SERVICE_USER}` uid {from} -> {to}"));
    }
    if let IdChange::Changed { from, to } = report.gid {
        say(out, format!("changed `{SERVICE_USER}` gid {from} -> {to}"));
    }
}

/// Stage 3b: a restore that a kill or power cut interrupted is rolled back from its journal
/// before any service reads a half-restored volume. PID 1 does not link the backup code (SQLite
/// and zip would join its footprint), so it runs `hermes backup recover`, and only when a
/// staging directory is there.
fn stage_recover_restore(settings: &Settings, out: &mut dyn Write) {
    let interrupted = fs::read_dir(&settings.home).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(layout::RESTORE_STAGING_PREFIX)
        })
    });
    if !interrupted {
        return;
    }
    let ran = std::process::Command::new(&settings.hermes_exe)
        .args(["backup", "recover"])
        .env("HERMES_HOME", &settings.home)
        .stdin(std::process::Stdio::null())
        .output();
    match ran {
        Ok(done) => {
            let said = String::from_utf8_lossy(&done.stderr).into_owned()
                + &String::from_utf8_lossy(&done.stdout);
            for line in said.lines().filter(|l| !l.trim().is_empty()) {
                say(out, line);
            }
            if !done.status.success() {
                say(
                    out,
                    "warning: an interrupted restore could not be rolled back; the volume may \
                     hold some of its files (run `hermes backup recover`)",
                );
            }
        }
        Err(e) => say(
            out,
            format!(
                "warning: cannot run `{} backup recover` ({e}): an interrupted restore is still \
                 on the volume",
                settings.hermes_exe.display()
            ),
        ),
    }
}

/// What stage 4 repairs: the data volume's owned files and subtrees, as `hermes-home` names
/// them (`hermes_home::volume`).
pub fn data_volume_plan(home: &Path) -> RepairPlan {
    let files = volume::OWNED_FILES.iter().map(|f| match f.mode {
        Some(mode) => FileRule::with_mode(f.name, mode),
        None => FileRule::owned(f.name),
    });
    RepairPlan::data_volume(home, files, volume::OWNED_SUBTREES.iter().copied())
        .with_links(volume::OWNED_LINKS.iter().copied())
}

/// Stage 4.
fn stage_repair(settings: &Settings, id: &Identity, out: &mut dyn Write) {
    match repair_ownership(&data_volume_plan(&settings.home), id.uid, id.gid) {
        Ok(report) => {
            if report.changed > 0 || settings.flags.verbose > 0 {
                say(
                    out,
                    format!(
                        "ownership of `{}`: {} changed, {} already right",
                        settings.home.display(),
                        report.changed,
                        report.unchanged
                    ),
                );
            }
            for w in &report.warnings {
                say(out, format!("warning: {w}"));
            }
            if report.warnings_not_listed > 0 {
                say(
                    out,
                    format!("warning: {} more not listed", report.warnings_not_listed),
                );
            }
        }
        Err(e) => say(
            out,
            format!(
                "warning: ownership repair skipped: {}",
                hermes_errors::one_line(&e)
            ),
        ),
    }
}

/// Stage 5: skeleton, seeds, API key, bootstrap files.
fn stage_seed(settings: &Settings, out: &mut dyn Write) {
    let home = &settings.home;
    // Before the skeleton, which would seed the built-in files in their place.
    if let Some(dir) = settings.env.get(SEED_DIR_VAR).filter(|v| !v.is_empty()) {
        seed_from_dir(Path::new(dir), home, out);
        seed_profiles_from_dir(Path::new(dir), home, &settings.env, out);
    }
    // Read before the skeleton seeds `.env`: a key the operator set anywhere the original
    // reads one (the environment, `.env`, the top level of `config.yaml`, the nested key) is
    // never shadowed by a generated one.
    let key_seed = ProfileFiles::key_seed_for(home, Scope::Default, settings.env.vars());
    match hermes_home::layout::ensure_skeleton(home, true, &key_seed) {
        Ok(report) => {
            for p in report.seeded {
                say(out, format!("seeded `{}`", p.display()));
            }
        }
        Err(e) => say(out, format!("warning: {}", hermes_errors::one_line(&e))),
    }
    for dir in EXTRA_DIRS {
        let p = home.join(dir);
        if let Err(e) = fs::create_dir_all(&p) {
            say(
                out,
                format!("warning: cannot create `{}`: {e}", p.display()),
            );
        }
    }
    // A key the operator set is theirs: a generated one in `.env` would win over it. A key
    // that another place shadows (a Secret's, under a `.env` written before it) is said.
    if key_seed == KeySeed::Generate {
        seed_api_key(&layout::env_path(home), out);
    }
    if settings.env.get(GATEWAY_BOOTSTRAP_VAR) == Some("running") {
        let path = gateway_state::path(home);
        seed_once(&path, || gateway_state::bootstrap_running(&path), out);
    }
    if let Some(auth) = settings
        .env
        .get(AUTH_BOOTSTRAP_VAR)
        .filter(|v| !v.is_empty())
    {
        let path = layout::auth_path(home);
        seed_once(&path, || seed_file(&path, auth, 0o600), out);
    }
}

/// Seeds `config.yaml` and `SOUL.md` from the operator's seed directory where the volume has
/// none. A file the directory lacks is left to the skeleton's built-in seed; one that cannot
/// be read is a warning, and then the built-in seed too (boot goes on, as for any seed).
fn seed_from_dir(dir: &Path, home: &Path, out: &mut dyn Write) {
    if let Err(e) = fs::create_dir_all(home) {
        say(
            out,
            format!("warning: cannot create `{}`: {e}", home.display()),
        );
        return;
    }
    for (name, mode) in SEED_DIR_FILES {
        let source = dir.join(name);
        let contents = match read_seed(&source) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(why) => {
                say(
                    out,
                    format!("warning: not seeding from `{}`: {why}", source.display()),
                );
                continue;
            }
        };
        let path = home.join(name);
        seed_once(&path, || seed_file(&path, &contents, mode), out);
    }
}

/// Seeds the named profiles of the seed directory's `profiles/<name>/` (the Helm chart's
/// multiplexed layout, where one volume holds every profile): each gets that directory's
/// `config.yaml` and `SOUL.md` where it has none, then its skeleton (a `.env` with its own
/// key, unless the environment gives one). A profile already on the volume keeps its files;
/// a directory whose name is not a valid profile name is a warning and is skipped.
fn seed_profiles_from_dir(
    dir: &Path,
    home: &Path,
    settings_env: &hermes_privilege::Env,
    out: &mut dyn Write,
) {
    let Ok(entries) = fs::read_dir(layout::profiles_dir(dir)) else {
        return;
    };
    for entry in entries.flatten() {
        let raw = entry.file_name().to_string_lossy().into_owned();
        // ConfigMap volumes keep their files in hidden `..data` directories.
        if raw.starts_with('.') || !entry.path().is_dir() {
            continue;
        }
        let Some(name) = hermes_home::ProfileName::parse(&raw)
            .ok()
            .filter(|n| n.as_str() == raw)
        else {
            say(
                out,
                format!("warning: not seeding profile `{raw}`: not a valid profile name"),
            );
            continue;
        };
        let target = hermes_home::profile::profile_dir(home, &name);
        seed_from_dir(&entry.path(), &target, out);
        let key_seed = ProfileFiles::key_seed_for(&target, Scope::Named, settings_env.vars());
        match hermes_home::layout::ensure_skeleton(&target, false, &key_seed) {
            Ok(report) => {
                for p in report.seeded {
                    say(out, format!("seeded `{}`", p.display()));
                }
            }
            Err(e) => say(out, format!("warning: {}", hermes_errors::one_line(&e))),
        }
    }
}

/// The text of one seed file: `None` when there is none, `Err` with why it is unusable.
/// Follows symlinks on purpose: a ConfigMap's files are links into its current version.
fn read_seed(path: &Path) -> Result<Option<String>, String> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > SEED_FILE_MAX {
        return Err(format!("larger than {SEED_FILE_MAX} bytes"));
    }
    fs::read_to_string(path)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Creates `path` with `seed` only on first boot; a symlink there is refused (with a
/// warning), never followed.
fn seed_once(
    path: &Path,
    seed: impl FnOnce() -> Result<Seeded, hermes_home::Error>,
    out: &mut dyn Write,
) {
    match fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            say(
                out,
                format!(
                    "warning: refusing seed through symlinked path `{}`",
                    path.display()
                ),
            );
            return;
        }
        Ok(_) => return,
        Err(_) => {}
    }
    match seed() {
        Ok(Seeded::Created) => say(out, format!("seeded `{}`", path.display())),
        Ok(Seeded::Kept) => {}
        Err(e) => say(out, format!("warning: {}", hermes_errors::one_line(&e))),
    }
}

/// Appends an `API_SERVER_KEY` of 64 hex characters when `.env` has no non-empty one.
fn seed_api_key(env_path: &Path, out: &mut dyn Write) {
    match fs::symlink_metadata(env_path) {
        Ok(m) if m.file_type().is_symlink() => {
            say(
                out,
                format!(
                    "warning: refusing append through symlinked path `{}`",
                    env_path.display()
                ),
            );
            return;
        }
        Ok(_) => {}
        Err(_) => return,
    }
    // Check and add under `.env.lock` (`DotEnv::edit`), so a key written meanwhile is kept.
    let mut no_random = None;
    let edited = DotEnv::edit(env_path, |dotenv| {
        if dotenv.get(API_SERVER_KEY).is_some_and(|v| !v.is_empty()) {
            return Ok(false);
        }
        match random_hex(32) {
            Ok(key) => dotenv.set(API_SERVER_KEY, &key).map(|()| true),
            Err(e) => {
                no_random = Some(e);
                Ok(false)
            }
        }
    });
    match (edited, no_random) {
        (_, Some(e)) => say(
            out,
            format!(
                "warning: cannot read `/dev/urandom`: {}",
                hermes_errors::one_line(&e)
            ),
        ),
        (Ok(true), None) => say(
            out,
            format!("generated {API_SERVER_KEY} for the loopback API server"),
        ),
        (Ok(false), None) => {}
        (Err(e), None) => say(out, format!("warning: {}", hermes_errors::one_line(&e))),
    }
}

/// Stage 6: the install method belongs to the image, never to the volume.
fn stage_stamp(settings: &Settings, out: &mut dyn Write) {
    let path = settings.home.join(INSTALL_STAMP);
    let Ok(meta) = fs::symlink_metadata(&path) else {
        return;
    };
    if !meta.is_file() {
        return;
    }
    let Ok(text) = fs::read_to_string(&path) else {
        return;
    };
    let squeezed: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if squeezed == "docker" {
        match fs::remove_file(&path) {
            Ok(()) => say(
                out,
                format!("removed the stale install stamp `{}`", path.display()),
            ),
            Err(e) => say(
                out,
                format!("warning: cannot remove `{}`: {e}", path.display()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_log_prefixes_every_line_once() {
        let mut out = Vec::new();
        let mut log = InitLog::new(&mut out);
        write!(log, "warning: a").unwrap();
        writeln!(log, "nd more").unwrap();
        log.write_all(b"two\nlines\n").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[init] warning: and more\n[init] two\n[init] lines\n"
        );
    }

    fn settings(home: &Path) -> Settings {
        let mut s = Settings::from_process(vec![], vec![], "/bin/true".into(), Default::default());
        s.home = home.to_path_buf();
        s
    }

    #[test]
    fn api_key_is_added_once_and_an_existing_one_kept() {
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join(".env");
        fs::write(&env, "# header\nAPI_SERVER_KEY=\nOTHER=1\n").unwrap();
        let mut out = Vec::new();
        seed_api_key(&env, &mut out);
        let first = DotEnv::load(&env).unwrap();
        let key = first.get(API_SERVER_KEY).unwrap().to_string();
        assert_eq!(key.len(), 64);
        assert_eq!(first.get("OTHER"), Some("1"));
        seed_api_key(&env, &mut out);
        assert_eq!(
            DotEnv::load(&env).unwrap().get(API_SERVER_KEY),
            Some(key.as_str())
        );
        let text = fs::read_to_string(&env).unwrap();
        assert_eq!(text.matches("API_SERVER_KEY=").count(), 1, "{text}");
    }

    #[test]
    fn as_root_the_seeded_key_leaves_env_its_owners() {
        use std::os::unix::fs::{MetadataExt, chown};
        if hermes_test_support::skip_unless_root("only root can give a file away") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join(".env");
        fs::write(&env, "# header\n").unwrap();
        chown(&env, Some(12345), Some(12346)).unwrap();
        seed_api_key(&env, &mut Vec::new());
        assert!(DotEnv::load(&env).unwrap().get(API_SERVER_KEY).is_some());
        let meta = fs::metadata(&env).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (12345, 12346));
    }

    #[test]
    fn a_key_from_the_environment_is_not_shadowed_by_a_generated_one() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("data");
        fs::create_dir_all(&home).unwrap();
        let env_file = home.join(".env");
        // Boots with `.env` holding `text` and the environment's key `key`: the boot's output.
        let boot = |text: &str, key: &str| {
            fs::write(&env_file, text).unwrap();
            let mut s = settings(&home);
            s.env = [(API_SERVER_KEY, key)].into_iter().collect();
            let mut out = Vec::new();
            stage_seed(&s, &mut out);
            // The warning comes from the one read of the volume that follows.
            let booted = Booted {
                mode: hermes_privilege::shim::InitMode::ServiceUser,
                identity: None,
            };
            crate::gateways::stage_read_volume(&s, &booted, &mut out);
            String::from_utf8(out).unwrap()
        };
        let operator = "operator-chosen-key-0123456789";
        // A volume's `.env` without a key (written by hand, or by an older image).
        let log = boot("# mine\nOTHER=1\n", operator);
        assert_eq!(
            fs::read_to_string(&env_file).unwrap(),
            "# mine\nOTHER=1\n",
            "{log}"
        );
        // A different key already in `.env` wins over the environment's: the boot says so.
        let log = boot("API_SERVER_KEY=file-key-0123456789abcdef\n", operator);
        assert!(
            log.contains(
                "warning: the API server's key in `.env` is in force; the different one in the \
                 container's environment is not used"
            ),
            "{log}"
        );
        let log = boot(&format!("API_SERVER_KEY={operator}\n"), operator);
        assert!(!log.contains("warning"), "{log}");
        // Without one in the environment, the first boot makes one, as before.
        boot("# mine\nOTHER=1\n", "  ");
        let key = DotEnv::load(&env_file)
            .unwrap()
            .get(API_SERVER_KEY)
            .map(str::len);
        assert_eq!(key, Some(64));
    }

    /// A volume of the original whose key its `hermes config set API_SERVER_KEY` wrote at the
    /// top of `config.yaml` (or one under `platforms.api_server.extra.key`): the first boot on
    /// it generates no key, with `.env` there or not, for the root and a seeded profile alike.
    #[test]
    fn a_key_in_config_yaml_is_not_shadowed_by_a_generated_one() {
        let operator = "operator-chosen-key-0123456789";
        let configs = [
            format!("model: gpt-4o\nAPI_SERVER_KEY: {operator}\n"),
            format!("platforms:\n  api_server:\n    extra:\n      key: {operator}\n"),
        ];
        for config in &configs {
            for env_text in [None, Some("# mine\nOTHER=1\n")] {
                let dir = tempfile::tempdir().unwrap();
                let home = dir.path().join("data");
                fs::create_dir_all(&home).unwrap();
                fs::write(home.join("config.yaml"), config).unwrap();
                if let Some(text) = env_text {
                    fs::write(home.join(".env"), text).unwrap();
                }
                let mut out = Vec::new();
                stage_seed(&settings(&home), &mut out);
                let log = String::from_utf8(out).unwrap();
                let dotenv = DotEnv::load(&home.join(".env")).unwrap();
                assert_eq!(
                    dotenv.get(API_SERVER_KEY),
                    None,
                    "no key to shadow the operator's ({config:?}, {env_text:?}): {log}"
                );
                assert!(!log.contains("generated API_SERVER_KEY"), "{log}");
                if env_text.is_none() {
                    let text = fs::read_to_string(home.join(".env")).unwrap();
                    assert!(text.contains("API_SERVER_KEY comes from"), "{text}");
                }
            }
        }
        // A profile seeded from `HERMES_SEED_DIR` with its key in its `config.yaml`.
        let dir = tempfile::tempdir().unwrap();
        let (home, seeds) = (dir.path().join("data"), dir.path().join("seeds"));
        fs::create_dir_all(seeds.join("profiles/work")).unwrap();
        fs::write(
            seeds.join("profiles/work/config.yaml"),
            format!("API_SERVER_KEY: {operator}\n"),
        )
        .unwrap();
        let mut s = settings(&home);
        s.env = [(SEED_DIR_VAR, seeds.to_str().unwrap())]
            .into_iter()
            .collect();
        stage_seed(&s, &mut Vec::new());
        let work = DotEnv::load(&home.join("profiles/work/.env")).unwrap();
        assert_eq!(work.get(API_SERVER_KEY), None);
        // The root, with no key anywhere, gets one.
        let root = DotEnv::load(&home.join(".env")).unwrap();
        assert_eq!(root.get(API_SERVER_KEY).map(str::len), Some(64));
    }

    #[test]
    fn bootstrap_seeds_only_on_first_boot_and_refuse_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("data");
        let mut s = settings(&home);
        s.env = [
            (GATEWAY_BOOTSTRAP_VAR, "running"),
            (AUTH_BOOTSTRAP_VAR, "{\"providers\":{}}"),
        ]
        .into_iter()
        .collect();
        fs::create_dir_all(&home).unwrap();
        let outside = dir.path().join("outside.json");
        fs::write(&outside, "keep").unwrap();
        std::os::unix::fs::symlink(&outside, home.join("auth.json")).unwrap();
        let mut out = Vec::new();
        stage_seed(&s, &mut out);
        let log = String::from_utf8(out).unwrap();
        assert_eq!(
            fs::read_to_string(home.join("gateway_state.json")).unwrap(),
            "{\"gateway_state\":\"running\"}\n"
        );
        assert!(
            log.contains("refusing seed through symlinked path") && log.contains("auth.json"),
            "{log}"
        );
        assert_eq!(fs::read_to_string(&outside).unwrap(), "keep");
        assert!(
            fs::symlink_metadata(home.join("auth.json"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        // Second boot: an existing state is never overwritten.
        fs::write(
            home.join("gateway_state.json"),
            "{\"gateway_state\":\"stopped\"}",
        )
        .unwrap();
        stage_seed(&s, &mut Vec::new());
        assert!(
            fs::read_to_string(home.join("gateway_state.json"))
                .unwrap()
                .contains("stopped")
        );
        assert!(home.join("logs/gateways").is_dir() && home.join("profiles").is_dir());
    }

    #[test]
    fn the_seed_dir_seeds_only_absent_files_and_the_rest_stay_built_in() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("data");
        let seeds = dir.path().join("seed");
        fs::create_dir_all(&seeds).unwrap();
        fs::write(seeds.join("config.yaml"), "model:\n  default: from-seed\n").unwrap();
        let mut s = settings(&home);
        s.env = [(SEED_DIR_VAR, seeds.to_str().unwrap())]
            .into_iter()
            .collect();
        let mut out = Vec::new();
        stage_seed(&s, &mut out);
        let config = home.join("config.yaml");
        assert_eq!(
            fs::read_to_string(&config).unwrap(),
            "model:\n  default: from-seed\n"
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&config).unwrap().permissions().mode() & 0o777,
            0o640
        );
        // No SOUL.md in the seed dir: the built-in one.
        assert_eq!(
            fs::read_to_string(home.join("SOUL.md")).unwrap(),
            hermes_home::seeds::DEFAULT_SOUL_MD
        );
        let log = String::from_utf8(out).unwrap();
        assert!(
            log.contains("seeded") && log.contains("config.yaml"),
            "{log}"
        );
        // The operator edits the file, the seed changes, the pod restarts: the edit stays.
        fs::write(&config, "model:\n  default: edited\n").unwrap();
        fs::write(seeds.join("config.yaml"), "model:\n  default: seed-v2\n").unwrap();
        fs::write(seeds.join("SOUL.md"), "new soul").unwrap();
        stage_seed(&s, &mut Vec::new());
        assert_eq!(
            fs::read_to_string(&config).unwrap(),
            "model:\n  default: edited\n"
        );
        assert_eq!(
            fs::read_to_string(home.join("SOUL.md")).unwrap(),
            hermes_home::seeds::DEFAULT_SOUL_MD
        );
    }

    #[test]
    fn the_seed_dir_seeds_named_profiles_of_a_multiplexed_volume() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("data");
        let seeds = dir.path().join("seed");
        fs::create_dir_all(seeds.join("profiles/work")).unwrap();
        fs::create_dir_all(seeds.join("profiles/Bad_Name")).unwrap();
        fs::create_dir_all(seeds.join("profiles/..data")).unwrap();
        fs::write(seeds.join("profiles/work/SOUL.md"), "the work soul").unwrap();
        let mut s = settings(&home);
        s.env = [(SEED_DIR_VAR, seeds.to_str().unwrap())]
            .into_iter()
            .collect();
        let mut out = Vec::new();
        stage_seed(&s, &mut out);
        let work = home.join("profiles/work");
        assert_eq!(
            fs::read_to_string(work.join("SOUL.md")).unwrap(),
            "the work soul"
        );
        assert_eq!(
            fs::read_to_string(work.join("config.yaml")).unwrap(),
            hermes_home::seeds::DEFAULT_CONFIG_YAML,
            "no config.yaml in its seeds: the built-in one"
        );
        let env = fs::read_to_string(work.join(".env")).unwrap();
        let root_env = fs::read_to_string(home.join(".env")).unwrap();
        let key = |text: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix("API_SERVER_KEY=").map(str::to_owned))
        };
        assert!(key(&env).is_some(), "its own key: {env}");
        assert_ne!(key(&env), key(&root_env), "not the default profile's key");
        let log = String::from_utf8(out).unwrap();
        assert!(log.contains("not seeding profile `Bad_Name`"), "{log}");
        assert!(!home.join("profiles/Bad_Name").exists());
        assert!(!home.join("profiles/..data").exists());
        // Already there: its own files stay.
        fs::write(work.join("SOUL.md"), "edited").unwrap();
        stage_seed(&s, &mut Vec::new());
        assert_eq!(fs::read_to_string(work.join("SOUL.md")).unwrap(), "edited");
    }

    #[test]
    fn an_unusable_seed_is_a_warning_and_the_built_in_seed_is_used() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("data");
        let seeds = dir.path().join("seed");
        fs::create_dir_all(seeds.join("config.yaml")).unwrap();
        let mut s = settings(&home);
        s.env = [(SEED_DIR_VAR, seeds.to_str().unwrap())]
            .into_iter()
            .collect();
        let mut out = Vec::new();
        stage_seed(&s, &mut out);
        let log = String::from_utf8(out).unwrap();
        assert!(
            log.contains("warning: not seeding from") && log.contains("not a regular file"),
            "{log}"
        );
        assert_eq!(
            fs::read_to_string(home.join("config.yaml")).unwrap(),
            hermes_home::seeds::DEFAULT_CONFIG_YAML
        );
    }

    #[test]
    fn bootstrap_state_must_be_exactly_running() {
        for v in ["Running", "1", "true", "starting", "stopped"] {
            let dir = tempfile::tempdir().unwrap();
            let mut s = settings(dir.path());
            s.env = [(GATEWAY_BOOTSTRAP_VAR, v)].into_iter().collect();
            stage_seed(&s, &mut Vec::new());
            assert!(!dir.path().join("gateway_state.json").exists(), "{v}");
        }
    }

    #[test]
    fn only_a_docker_stamp_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let s = settings(dir.path());
        let stamp = dir.path().join(INSTALL_STAMP);
        fs::write(&stamp, " docker\n").unwrap();
        stage_stamp(&s, &mut Vec::new());
        assert!(!stamp.exists());
        fs::write(&stamp, "pip\n").unwrap();
        stage_stamp(&s, &mut Vec::new());
        assert!(stamp.exists());
    }

    #[test]
    fn the_repair_plan_is_the_volumes_lists() {
        let plan = data_volume_plan(Path::new("/opt/data"));
        assert!(plan.chown_root);
        assert_eq!(plan.files.len(), volume::OWNED_FILES.len());
        assert!(plan.files.contains(&FileRule::with_mode(".env", 0o600)));
        assert!(plan.files.contains(&FileRule::owned("auth.json")));
        assert_eq!(plan.subtrees.len(), volume::OWNED_SUBTREES.len());
        assert!(plan.subtrees.contains(&"platforms/pairing".into()));
        assert!(plan.subtrees.contains(&"lazy-packages.generations".into()));
        assert_eq!(plan.links, [Path::new("lazy-packages")]);
    }
}
