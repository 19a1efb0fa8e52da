//! `hermes doctor`: checks that each print ✓, ⚠ or ✗ with a one-line fix.
//!
//! A [`Check`] is data; [`home_checks`] produces the foundation's checks and other crates add
//! their own rows (the binary concatenates them), so a new area of Hermes adds checks without
//! touching this module. The command exits 1 when any check is [`Status::Fail`].
//!
//! File checks look at two users: the one running `doctor` (can *I* read it?) and the owner of
//! the profile directory — the user the services run as. A credential file the service user
//! cannot read (the classic: `auth.json` left `root:root 0600` by a `docker exec` as root) is a
//! failure even when `doctor` itself runs as root and could read it.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use hermes_home::Home;
use hermes_home::auth::describe_uid;
use hermes_home::config::Config;
use serde::Serialize;

use crate::identity::BuildIdentity;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, but something should be looked at.
    Warn,
    /// Broken; `doctor` exits 1.
    Fail,
}

impl Status {
    /// ✓, ⚠ or ✗.
    pub fn symbol(self) -> &'static str {
        match self {
            Status::Ok => "✓",
            Status::Warn => "⚠",
            Status::Fail => "✗",
        }
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Outcome.
    pub status: Status,
    /// What was found, one line.
    pub message: String,
    /// What to do about it, one line (for ⚠ and ✗).
    pub fix: Option<String>,
}

impl Check {
    /// A passing check.
    pub fn ok(message: impl Into<String>) -> Self {
        Check {
            status: Status::Ok,
            message: message.into(),
            fix: None,
        }
    }
    /// A warning with its fix.
    pub fn warn(message: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            status: Status::Warn,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }
    /// A failure with its fix.
    pub fn fail(message: impl Into<String>, fix: impl Into<String>) -> Self {
        Check {
            status: Status::Fail,
            message: message.into(),
            fix: Some(fix.into()),
        }
    }
}

/// The foundation's checks for one profile home.
pub fn home_checks(
    home: &Home,
    identity: &BuildIdentity,
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<Check> {
    let dir = home.dir();
    let mut checks = vec![check_home_writable(dir)];
    let service_uid = fs::metadata(dir).ok().map(|m| m.uid());
    checks.push(check_readable(
        &home.auth_path(),
        service_uid,
        Missing::Fine,
    ));
    let env = check_readable(&home.env_path(), service_uid, Missing::Warn);
    let env_ok = env.status == Status::Ok;
    checks.push(env);
    if env_ok {
        checks.push(check_env_mode(&home.env_path()));
    }
    let config = check_readable(&home.config_path(), service_uid, Missing::Warn);
    let config_ok = config.status == Status::Ok;
    checks.push(config);
    let mut model_check = Check::warn(
        "no model configured",
        "set `model.default` and `model.base_url` in `config.yaml`",
    );
    if config_ok {
        match Config::load(&home.config_path()) {
            Ok(config) => {
                checks.push(Check::ok("`config.yaml` parses"));
                let dotenv =
                    hermes_home::dotenv::DotEnv::load(&home.env_path()).unwrap_or_default();
                let lookup = dotenv.over(var);
                if let Some(model) = config.model(&lookup).default {
                    model_check = Check::ok(format!("model configured: `{model}`"));
                }
            }
            Err(e) => checks.push(Check::fail(
                e.to_string(),
                "fix the file by hand; Hermes never rewrites a config it cannot parse",
            )),
        }
    }
    checks.push(if home.soul_path().is_file() {
        Check::ok("`SOUL.md` present")
    } else {
        Check::warn(
            "`SOUL.md` is missing",
            "run any `hermes` command to seed a default persona, or write your own",
        )
    });
    checks.push(model_check);
    checks.push(match identity.sha {
        Some(_) => Check::ok(format!("build identity known: {}", identity.label())),
        None => Check::warn(
            "build identity unknown: this binary does not know its commit",
            "build from a git checkout, or pass `HERMES_GIT_SHA` when building the image",
        ),
    });
    checks
}

fn check_home_writable(dir: &Path) -> Check {
    if !dir.is_dir() {
        return Check::fail(
            format!("home `{}` does not exist", dir.display()),
            "run `hermes profile list` to create it, or set `HERMES_HOME`",
        );
    }
    let probe = dir.join(format!(".doctor-probe-{}", std::process::id()));
    match File::create(&probe) {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            Check::ok(format!("home `{}` exists and is writable", dir.display()))
        }
        Err(e) => Check::fail(
            format!(
                "home `{}` is not writable by {}: {}",
                dir.display(),
                me(),
                short_io(&e)
            ),
            owner_fix(dir),
        ),
    }
}

#[derive(Clone, Copy)]
enum Missing {
    Fine,
    Warn,
}

fn check_readable(path: &Path, service_uid: Option<u32>, missing: Missing) -> Check {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return match missing {
                Missing::Fine => Check::ok(format!("`{name}` not present (nothing to read)")),
                Missing::Warn => Check::warn(
                    format!("`{name}` is missing"),
                    "run any `hermes` command to seed it",
                ),
            };
        }
        Err(e) => {
            return Check::fail(
                format!("cannot inspect `{}`: {}", path.display(), short_io(&e)),
                owner_fix(path),
            );
        }
    };
    let detail = format!(
        "owner {}, mode {:04o}",
        describe_uid(meta.uid()),
        meta.mode() & 0o7777
    );
    if let Err(e) = File::open(path) {
        return Check::fail(
            format!(
                "`{}` is not readable by {} ({detail}): {}",
                path.display(),
                me(),
                short_io(&e)
            ),
            chown_fix(path, nix::unistd::geteuid().as_raw()),
        );
    }
    if let Some(service) = service_uid {
        let readable_by_service = meta.uid() == service || meta.mode() & 0o004 != 0;
        if !readable_by_service {
            return Check::fail(
                format!(
                    "`{}` is not readable by the home's owner {} ({detail})",
                    path.display(),
                    describe_uid(service)
                ),
                chown_fix(path, service),
            );
        }
    }
    Check::ok(format!("`{name}` readable ({detail})"))
}

fn check_env_mode(path: &Path) -> Check {
    match fs::metadata(path) {
        Ok(meta) if meta.mode() & 0o077 == 0 => Check::ok("`.env` mode is 0600"),
        Ok(meta) => Check::warn(
            format!(
                "`.env` mode is {:04o}: other users can read your secrets",
                meta.mode() & 0o7777
            ),
            format!("run `chmod 600 {}`", path.display()),
        ),
        Err(e) => Check::fail(
            format!("cannot inspect `.env`: {}", short_io(&e)),
            owner_fix(path),
        ),
    }
}

fn chown_fix(path: &Path, uid: u32) -> String {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map_or_else(|| uid.to_string(), |u| u.name);
    format!(
        "as root, run `chown {user}: {}` (in a container: `docker exec -u root <container> chown {user}: {}`)",
        path.display(),
        path.display()
    )
}

fn owner_fix(path: &Path) -> String {
    format!(
        "check the owner and mode of `{}` with `ls -ld`",
        path.display()
    )
}

fn me() -> String {
    describe_uid(nix::unistd::geteuid().as_raw())
}

fn short_io(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string(),
    }
}

/// Whether any check failed.
pub fn has_failures(checks: &[Check]) -> bool {
    checks.iter().any(|c| c.status == Status::Fail)
}

/// Renders the checks, one per line plus an indented fix, then a summary line.
pub fn render(title: &str, checks: &[Check], color: bool) -> String {
    let paint = |status: Status, text: &str| {
        if !color {
            return text.to_string();
        }
        let code = match status {
            Status::Ok => "32",
            Status::Warn => "33",
            Status::Fail => "31",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    };
    let mut out = format!("{title}\n");
    for check in checks {
        out.push_str(&format!(
            "  {} {}\n",
            paint(check.status, check.status.symbol()),
            check.message
        ));
        if let Some(fix) = &check.fix {
            out.push_str(&format!("      fix: {fix}\n"));
        }
    }
    let fails = checks.iter().filter(|c| c.status == Status::Fail).count();
    let warns = checks.iter().filter(|c| c.status == Status::Warn).count();
    out.push_str(&match (fails, warns) {
        (0, 0) => "all checks passed\n".to_string(),
        (f, w) => format!("{f} failed, {w} warning{}\n", if w == 1 { "" } else { "s" }),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn fresh_home() -> (tempfile::TempDir, Home) {
        let dir = tempfile::tempdir().unwrap();
        hermes_home::layout::ensure_skeleton(dir.path(), true).unwrap();
        let home = Home::select(dir.path().to_path_buf(), None).unwrap();
        (dir, home)
    }

    #[test]
    fn fresh_home_only_warns_about_the_model() {
        let (_dir, home) = fresh_home();
        let identity = BuildIdentity::resolve("0123456789abcdef0123456789abcdef01234567", None);
        let checks = home_checks(&home, &identity, &|_| None);
        assert!(!has_failures(&checks), "{checks:#?}");
        let warns: Vec<_> = checks.iter().filter(|c| c.status == Status::Warn).collect();
        assert_eq!(warns.len(), 1, "{warns:#?}");
        assert!(warns[0].message.contains("no model"));
    }

    #[test]
    fn loose_env_mode_and_bad_yaml_are_reported() {
        let (dir, home) = fresh_home();
        fs::set_permissions(dir.path().join(".env"), fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(dir.path().join("config.yaml"), "model: [\n").unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        assert!(
            checks
                .iter()
                .any(|c| c.status == Status::Warn && c.message.contains("0644"))
        );
        assert!(
            checks
                .iter()
                .any(|c| c.status == Status::Fail && c.message.contains("line"))
        );
        assert!(has_failures(&checks));
        let text = render("doctor", &checks, false);
        assert!(text.contains("✗"), "{text}");
        assert!(text.contains("chmod 600"));
    }

    #[test]
    fn auth_json_not_owned_by_the_home_owner_fails_with_chown() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipping: needs root to chown the home to another user");
            return;
        }
        let (dir, home) = fresh_home();
        let auth = dir.path().join("auth.json");
        fs::write(&auth, "{}").unwrap();
        fs::set_permissions(&auth, fs::Permissions::from_mode(0o600)).unwrap();
        nix::unistd::chown(dir.path(), Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        let failed = checks
            .iter()
            .find(|c| c.status == Status::Fail)
            .expect("a failure");
        assert!(failed.message.contains("auth.json"), "{failed:?}");
        assert!(
            failed.fix.as_deref().unwrap().contains("chown"),
            "{failed:?}"
        );
    }
}
