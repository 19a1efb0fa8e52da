//! `hermes doctor`: checks that each print ✓, ⚠ or ✗ with a one-line fix.
//!
//! A [`Check`] is data (from `hermes-report`, so the crates below this one can produce rows);
//! [`home_checks`] produces the foundation's checks and other crates add their own rows
//! ([`crate::report::doctor`] puts them together, for the CLI and the dashboard alike), so a new
//! area of Hermes adds checks without touching this module. The command exits 1 when any check
//! is [`Status::Fail`].
//!
//! File checks look at two users: the one running `doctor` (can *I* read it?) and the owner of
//! the profile directory — the user the services run as. A credential file the service user
//! cannot read (the classic: `auth.json` left `root:root 0600` by a `docker exec` as root) is a
//! failure even when `doctor` itself runs as root and could read it.
//!
//! Readable is not healthy: `auth.json`, `.env` and `config.yaml` each get a row saying whether
//! they decode and parse, with the same rules the readers use (`AuthStore::parse`,
//! `DotEnv::load`, `Config::load`). Doctor only reads: it never makes a corrupt copy.

use hermes_settings::{ProfileFiles, Scope};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use hermes_gateway_settings::GatewaySettings;
use hermes_home::Home;
use hermes_home::auth::{AuthStore, describe_uid};
use hermes_home::config::Config;
use hermes_home::dotenv::DotEnv;
pub use hermes_report::{Check, Status};

use crate::identity::BuildIdentity;

/// The foundation's checks for one profile home.
pub fn home_checks(
    home: &Home,
    identity: &BuildIdentity,
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<Check> {
    let dir = home.dir();
    let mut checks = vec![check_home_writable(dir)];
    let service_uid = fs::metadata(dir).ok().map(|m| m.uid());
    // Readable is not healthy: a file that is readable but does not decode or parse is
    // reported by its own row, so it is never shown as ✓.
    let auth = check_readable(&home.auth_path(), service_uid, Missing::Fine);
    let auth_ok = auth.status == Status::Ok;
    checks.push(auth);
    if auth_ok && home.auth_path().exists() {
        checks.push(check_private_mode(&home.auth_path(), "credentials"));
        checks.extend(check_auth_parses(&home.auth_path()));
    }
    let env = match check_readable(&home.env_path(), service_uid, Missing::Warn) {
        missing if missing.status == Status::Warn => missing_env(home),
        env => env,
    };
    let env_ok = env.status == Status::Ok;
    checks.push(env);
    if env_ok {
        checks.push(check_private_mode(&home.env_path(), "secrets"));
        checks.push(check_env_parses(&home.env_path()));
        checks.extend(check_key_not_shadowed(home, var));
    }
    let config = check_readable(&home.config_path(), service_uid, Missing::Warn);
    let config_ok = config.status == Status::Ok;
    checks.push(config);
    let mut model_check = Check::warn(
        "no model configured",
        "set `model.default` and `model.base_url` in `config.yaml`",
    );
    if config_ok {
        match hermes_settings::config_of(home.dir()) {
            Ok(config) => {
                checks.push(Check::ok("`config.yaml` parses"));
                checks.extend(config.duplicate_keys().iter().map(duplicate_key_check));
                // A `.env` that does not parse has its own ✗ above; the model is read without
                // it, and the gateway's reading of it would only repeat that ✗.
                let dotenv = DotEnv::load(&home.env_path());
                let env_parses = dotenv.is_ok();
                let files = ProfileFiles::from_parts(
                    dotenv.unwrap_or_default(),
                    config,
                    Scope::of(home.profile().name()),
                    hermes_settings::process_through(var),
                );
                let model = files.config().model(&files.lookup_with(var));
                if let Some(name) = model.default {
                    model_check = Check::ok(format!("model configured: `{name}`"));
                }
                if let Some(provider) = model.provider.as_deref() {
                    checks.extend(original_provider_check(provider));
                }
                if env_parses {
                    checks.extend(check_gateway_settings(home, &files));
                }
            }
            Err(e) => checks.push(Check::fail(
                e.to_string(),
                e.hint().unwrap_or_else(|| owner_fix(&home.config_path())),
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
    checks.extend(check_databases(home));
    checks.push(match identity.sha {
        Some(_) => Check::ok(format!("build identity known: {}", identity.label())),
        None => Check::warn(
            "build identity unknown: this binary does not know its commit",
            "build from a git checkout, or pass `HERMES_GIT_SHA` when building the image",
        ),
    });
    checks
}

/// ⚠ for a key written twice in one mapping of `config.yaml`: the last value is used (as the
/// original's PyYAML loader does), the earlier ones are silently ignored.
fn duplicate_key_check(dup: &hermes_home::config::DuplicateKey) -> Check {
    let key = &dup.key;
    let leaf = key.rsplit('.').next().unwrap_or(key);
    let fix = format!("keep one `{leaf}:` in that mapping and delete the others");
    match dup.lines.last() {
        Some(last) if dup.lines.len() > 1 => {
            let lines: Vec<String> = dup.lines.iter().map(usize::to_string).collect();
            Check::warn(
                format!(
                    "`config.yaml`: `{key}` is set more than once (lines {}); the last one (line {last}) is used",
                    lines.join(", ")
                ),
                fix,
            )
        }
        _ => Check::warn(
            format!("`config.yaml`: `{key}` is set more than once; the last value is used"),
            fix,
        ),
    }
}

/// ⚠ for a `model.provider` Hermes reads but the original refuses (`openai`: its
/// `resolve_provider` says "Unknown provider"), so the volume stays usable by both.
fn original_provider_check(provider: &str) -> Option<Check> {
    let original = hermes_home::providers::original_name(provider)?;
    Some(Check::warn(
        format!(
            "`config.yaml`: `model.provider: {provider}` is refused by the original hermes-agent, which calls this provider `{original}`"
        ),
        format!("write `provider: {original}` in `config.yaml`; Hermes reads both"),
    ))
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

/// ⚠ for a file of secrets (`.env`, `auth.json`) that group or other users can read: chat
/// still works, but the keys are exposed. The original writes both 0600.
fn check_private_mode(path: &Path, what: &str) -> Check {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match fs::metadata(path) {
        Ok(meta) if meta.mode() & 0o077 == 0 => Check::ok(format!("`{name}` mode is 0600")),
        Ok(meta) => Check::warn(
            format!(
                "`{name}` mode is {:04o}: other users can read your {what}",
                meta.mode() & 0o7777
            ),
            format!("run `chmod 600 {}`", path.display()),
        ),
        Err(e) => Check::fail(
            format!("cannot inspect `{name}`: {}", short_io(&e)),
            owner_fix(path),
        ),
    }
}

/// The row for a missing `.env`. The root's is seeded again by any `hermes` command; a named
/// profile's never is, so its fix is the command that writes one, private, with the key of
/// the profile's provider.
fn missing_env(home: &Home) -> Check {
    let path = home.env_path();
    if matches!(home.profile(), hermes_home::ProfileRef::Default) {
        return Check::warn("`.env` is missing", "run any `hermes` command to seed it");
    }
    let key_var = hermes_settings::config_of(home.dir())
        .ok()
        .and_then(|config| config.model(&|_| None).provider)
        .and_then(|name| hermes_home::providers::find(&name))
        .unwrap_or_else(|| hermes_home::providers::default_provider())
        .key_var;
    Check::warn(
        format!(
            "`.env` is missing: profile `{}` has no keys of its own",
            home.profile().name()
        ),
        format!(
            "create it with your key: `(umask 077 && printf '%s\\n' '{key_var}=<your key>' > {})`",
            shell_quote(&path.display().to_string())
        ),
    )
}

/// `text` as one word for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// What the gateway would say of this profile's settings, asked through its own resolution
/// (`GatewaySettings::resolve_with_auth`, as `gateway run` and `chat` use it) with what
/// doctor has read, so doctor refuses exactly what the gateway refuses: a provider without
/// the `base_url` it needs, a `${VAR}` in a key that is not set, a public bind without a
/// key. ✗ with the gateway's own reason and hint.
///
/// The gateway's environment is `.env` over the process environment; the process's is
/// read through `var` (the names of this process's variables, their values as `var` gives
/// them), so a caller that controls `var` controls what is seen.
fn check_gateway_settings(home: &Home, files: &ProfileFiles) -> Vec<Check> {
    let env = files.environment();
    // `parse`, not the gateway's `load_auth`: that one copies a damaged file aside, and
    // doctor only looks (a damaged `auth.json` has its own row).
    let auth = fs::read(home.auth_path())
        .ok()
        .and_then(|bytes| AuthStore::parse(&bytes).ok())
        .unwrap_or_default();
    let resolved = GatewaySettings::resolve_with_auth(
        home.profile().name(),
        home.dir(),
        None,
        files.config(),
        &env,
        &auth,
    );
    match resolved {
        Ok(settings) => match settings.provider {
            Some(provider) => {
                let accepted = Check::ok(format!(
                    "the gateway accepts the model settings: {}",
                    provider.describe()
                ));
                std::iter::once(accepted)
                    .chain(check_local_provider_answers(&provider.base_url))
                    .collect()
            }
            None => vec![Check::ok("the gateway accepts the settings")],
        },
        Err(e) => vec![Check::fail(
            format!("the gateway refuses the settings: {e}"),
            e.hint().unwrap_or_else(|| owner_fix(&home.config_path())),
        )],
    }
}

/// How long doctor waits for a local model server's port.
const PROVIDER_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// For a model server on this machine or an address given as an IP (a local Ollama, vLLM,
/// llama.cpp): ✓ when its port takes a connection, ⚠ with the reason when not — every chat
/// would fail with 502 otherwise while the rest of doctor passes. `None` for a provider named
/// by a host name (no name lookup from doctor: a remote API's reachability is not the volume's
/// to check) or an address that does not parse.
fn check_local_provider_answers(base_url: &str) -> Option<Check> {
    let url = url::Url::parse(base_url).ok()?;
    let host = url.host()?;
    let ip: std::net::IpAddr = match host {
        url::Host::Ipv4(ip) => ip.into(),
        url::Host::Ipv6(ip) => ip.into(),
        url::Host::Domain("localhost") => std::net::Ipv4Addr::LOCALHOST.into(),
        url::Host::Domain(_) => return None,
    };
    let port = url.port_or_known_default()?;
    let address = std::net::SocketAddr::new(ip, port);
    Some(
        match std::net::TcpStream::connect_timeout(&address, PROVIDER_CONNECT_TIMEOUT) {
            Ok(_) => Check::ok(format!("the model server at {address} takes connections")),
            Err(e) => Check::warn(
                format!(
                    "the model server at {address} does not answer ({e}): every chat would fail with 502"
                ),
                format!("start the model server, or fix `model.base_url` (now `{base_url}`)"),
            ),
        },
    )
}

/// ⚠ for each of the API server's settings set in more than one place with different values
/// (the environment, `.env`, the top level of `config.yaml`, the key's nested key): one wins —
/// for the key, clients given another (a Kubernetes Secret, a compose file, the original's
/// `config set`) get 401; for the port, they knock at the wrong one.
fn check_key_not_shadowed(home: &Home, var: &dyn Fn(&str) -> Option<String>) -> Vec<Check> {
    let Ok(dotenv) = DotEnv::load(&home.env_path()) else {
        return Vec::new();
    };
    // A `config.yaml` that does not parse has its own ✗; the other places are still compared.
    let config = hermes_settings::config_of(home.dir())
        .unwrap_or_else(|_| Config::empty(&home.config_path()));
    let scope = Scope::of(home.profile().name());
    let files =
        ProfileFiles::from_parts(dotenv, config, scope, hermes_settings::process_through(var));
    files
        .shadowed()
        .into_iter()
        .map(|shadowed| Check::warn(shadowed.to_string(), shadowed.fix()))
        .collect()
}

/// `auth.json` decodes and has the store's shape; `None` when there is no file.
fn check_auth_parses(path: &Path) -> Option<Check> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            return Some(Check::fail(
                format!("cannot read `{}`: {}", path.display(), short_io(&e)),
                owner_fix(path),
            ));
        }
    };
    // `AuthStore::parse`, not `load`: doctor only looks, it never makes a corrupt copy.
    Some(match AuthStore::parse(&bytes) {
        Ok(_) => Check::ok("`auth.json` parses"),
        Err(reason) => Check::fail(
            format!("`{}` is damaged: {reason}", path.display()),
            format!(
                "repair it by hand, or move it aside (`mv {p} {p}.bad`) and log in again; the next \
                 credential write copies it to `auth.json.corrupt.<time>` and starts empty",
                p = path.display()
            ),
        ),
    })
}

/// `.env` decodes (✗ otherwise: every command that reads it fails) and every line is an
/// assignment, a comment or blank (⚠ otherwise: those lines are ignored).
fn check_env_parses(path: &Path) -> Check {
    let env = match DotEnv::load(path) {
        Ok(env) => env,
        Err(e) => {
            return Check::fail(e.to_string(), e.hint().unwrap_or_else(|| owner_fix(path)));
        }
    };
    // Line numbers only: an unparsed line may be a pasted secret.
    let lines = env.unparsed_lines();
    let numbers = lines
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    match lines.len() {
        0 => Check::ok("`.env` parses"),
        1 => Check::warn(
            format!("`.env` line {numbers} is not `KEY=value` and is ignored"),
            "fix that line, or comment it out with `#`",
        ),
        _ => Check::warn(
            format!("`.env` lines {numbers} are not `KEY=value` and are ignored"),
            "fix those lines, or comment them out with `#`",
        ),
    }
}

/// How long doctor's check of one database may take.
const DATABASE_CHECK_BUDGET: std::time::Duration = std::time::Duration::from_secs(10);

/// The profile's databases: each through `quick_check` now (✗ for a damaged one), and what the
/// last check at a start did (⚠ for one it restored: the damaged copy is kept for the
/// operator). Checked only by their owner (the user the services run as): anyone else opening
/// a database could leave side files SQLite creates in that user's way.
fn check_databases(home: &Home) -> Vec<Check> {
    use hermes_home::db_check::{self, Repair};
    use hermes_sessions::integrity::{Verdict, quick_check};
    let dir = home.dir();
    let mut checks = Vec::new();
    let profile_flag = match home.profile().name() {
        hermes_home::DEFAULT_PROFILE => String::new(),
        name => format!(" -p {name}"),
    };
    let euid = nix::unistd::geteuid().as_raw();
    let mut sound = Vec::new();
    for rel in db_check::DATABASES {
        let db = dir.join(rel);
        let Ok(meta) = fs::symlink_metadata(&db) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        if meta.uid() != euid {
            checks.push(Check::warn(
                format!("`{rel}` not checked: it is {}'s", describe_uid(meta.uid())),
                "run `hermes doctor` as that user, or `hermes backup check`",
            ));
            continue;
        }
        match quick_check(&db, DATABASE_CHECK_BUDGET) {
            Verdict::Sound => sound.push(*rel),
            Verdict::Damaged(said) => checks.push(Check::fail(
                format!("`{rel}` is damaged ({said})"),
                format!(
                    "stop its gateway (`hermes{profile_flag} gateway stop`), then `hermes backup \
                     check --repair` restores it from the newest archive with a sound copy, \
                     the damaged one set aside"
                ),
            )),
            Verdict::Unchecked(why) => checks.push(Check::warn(
                format!("`{rel}` {why}"),
                "`hermes backup check` checks it without a time limit".to_owned(),
            )),
        }
    }
    if !sound.is_empty() {
        checks.push(Check::ok(format!(
            "databases sound (`quick_check`): {}",
            sound.join(", ")
        )));
    }
    for damaged in db_check::read(dir).map(|r| r.damaged).unwrap_or_default() {
        if let Repair::Restored { set_aside, .. } = &damaged.repair {
            checks.push(Check::warn(
                format!("at the last start, {}", damaged.describe()),
                format!(
                    "keep `{}` until you are sure nothing in it is missed, then delete it",
                    set_aside.display()
                ),
            ));
        }
    }
    checks
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
        hermes_home::layout::ensure_skeleton(
            dir.path(),
            true,
            &hermes_home::seeds::KeySeed::Generate,
        )
        .unwrap();
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
    fn duplicate_config_keys_warn_with_their_lines() {
        let (dir, home) = fresh_home();
        fs::write(
            dir.path().join("config.yaml"),
            "model: a\nmemory:\n  provider: honcho\nmodel: b\n",
        )
        .unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        assert!(!has_failures(&checks), "{checks:#?}");
        let dup = find(&checks, "`model` is set more than once");
        assert_eq!(dup.status, Status::Warn);
        assert!(dup.message.contains("lines 1, 4"), "{dup:?}");
        assert!(dup.message.contains("line 4) is used"), "{dup:?}");
        assert_eq!(
            dup.fix.as_deref(),
            Some("keep one `model:` in that mapping and delete the others")
        );
        assert!(find(&checks, "model configured").message.contains("`b`"));
    }

    #[test]
    fn a_provider_name_the_original_refuses_warns() {
        let (dir, home) = fresh_home();
        let path = dir.path().join("config.yaml");
        fs::write(&path, "model:\n  default: m\n  provider: openai\n").unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        let row = find(&checks, "`model.provider: openai`");
        assert_eq!(row.status, Status::Warn);
        assert_eq!(
            row.fix.as_deref(),
            Some("write `provider: openai-api` in `config.yaml`; Hermes reads both")
        );
        fs::write(&path, "model:\n  default: m\n  provider: openai-api\n").unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        assert!(
            !checks.iter().any(|c| c.message.contains("refused")),
            "{checks:#?}"
        );
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

    #[test]
    fn auth_json_others_can_read_warns_and_chmod_mends_it() {
        let (dir, home) = fresh_home();
        let auth = dir.path().join("auth.json");
        fs::write(&auth, "{\"providers\": {}}").unwrap();
        fs::set_permissions(&auth, fs::Permissions::from_mode(0o644)).unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        let row = find(&checks, "`auth.json` mode is 0644");
        assert_eq!(row.status, Status::Warn, "{row:?}");
        assert!(row.message.contains("credentials"), "{row:?}");
        assert_eq!(
            row.fix.as_deref(),
            Some(format!("run `chmod 600 {}`", auth.display()).as_str())
        );
        // The fix, followed.
        fs::set_permissions(&auth, fs::Permissions::from_mode(0o600)).unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        assert_eq!(find(&checks, "`auth.json` mode is 0600").status, Status::Ok);
    }

    #[test]
    fn settings_the_gateway_refuses_fail_with_its_reason() {
        let (dir, home) = fresh_home();
        let config = dir.path().join("config.yaml");
        let doctor = || home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        let gateway_row = |checks: &[Check]| find(checks, "the gateway").clone();

        // A provider the gateway cannot reach by name needs `model.base_url`.
        fs::write(&config, "model:\n  default: m\n  provider: together\n").unwrap();
        let row = gateway_row(&doctor());
        assert_eq!(row.status, Status::Fail, "{row:?}");
        assert!(
            row.message.contains("`model.base_url`") && row.message.contains("together"),
            "{row:?}"
        );
        assert!(
            row.fix
                .as_deref()
                .is_some_and(|f| f.contains("model.base_url"))
        );

        // With it, a key naming an unset variable is refused rather than sent as text.
        fs::write(
            &config,
            "model:\n  default: m\n  provider: together\n  base_url: https://api.together.xyz/v1\n  api_key: ${TOGETHER_KEY}\n",
        )
        .unwrap();
        let row = gateway_row(&doctor());
        assert_eq!(row.status, Status::Fail, "{row:?}");
        assert!(row.message.contains("`TOGETHER_KEY` is not set"), "{row:?}");

        // Following the fix (the variable set in `.env`) passes.
        fs::write(dir.path().join(".env"), "TOGETHER_KEY=tk-123\n").unwrap();
        let checks = doctor();
        let row = gateway_row(&checks);
        assert_eq!(row.status, Status::Ok, "{row:?}");
        assert!(
            row.message.contains("https://api.together.xyz/v1"),
            "{row:?}"
        );
        assert!(!has_failures(&checks), "{checks:#?}");
        let text = render("doctor", &checks, false);
        assert!(!text.contains("tk-123"), "no key in the report: {text}");
    }

    fn find<'a>(checks: &'a [Check], needle: &str) -> &'a Check {
        checks
            .iter()
            .find(|c| c.message.contains(needle))
            .unwrap_or_else(|| panic!("no check mentions {needle:?}: {checks:#?}"))
    }

    #[test]
    fn a_key_in_env_that_shadows_the_environments_warns_with_the_fix() {
        let (dir, home) = fresh_home();
        fs::write(
            dir.path().join(".env"),
            "API_SERVER_KEY=file-key-0123456789ab\n",
        )
        .unwrap();
        let env =
            |key: &str| (key == "API_SERVER_KEY").then(|| "secret-key-0123456789ab".to_string());
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &env);
        let shadowed = find(
            &checks,
            "key in `.env` is in force; the different one in the container's environment is not used",
        );
        assert_eq!(shadowed.status, Status::Warn, "{shadowed:?}");
        assert!(
            shadowed
                .fix
                .as_deref()
                .is_some_and(|f| f.contains("delete the `API_SERVER_KEY=` line"))
        );
        // The same key in both, or none in the environment: nothing to say.
        for value in ["file-key-0123456789ab", "  "] {
            let env = |key: &str| (key == "API_SERVER_KEY").then(|| value.to_string());
            let checks = home_checks(&home, &BuildIdentity::resolve("", None), &env);
            assert!(
                !checks.iter().any(|c| c.message.contains("is not used")),
                "{checks:#?}"
            );
        }
    }

    #[test]
    fn env_that_is_not_utf8_fails() {
        let (dir, home) = fresh_home();
        fs::write(dir.path().join(".env"), b"OPENAI_API_KEY=sk-\xff\xfe\n").unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        let env = find(&checks, "UTF-8");
        assert_eq!(env.status, Status::Fail, "{env:?}");
        assert!(
            env.message.contains(".env") && env.message.contains("line 1"),
            "{env:?}"
        );
        assert!(env.fix.as_deref().is_some_and(|f| !f.is_empty()), "{env:?}");
        assert!(has_failures(&checks));
    }

    #[test]
    fn env_lines_that_are_not_assignments_warn_without_printing_them() {
        let (dir, home) = fresh_home();
        fs::write(
            dir.path().join(".env"),
            "# comment\nA=1\nsk-pasted-secret-without-a-name\n\nB=2\n",
        )
        .unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        let env = find(&checks, "not `KEY=value`");
        assert_eq!(env.status, Status::Warn, "{env:?}");
        assert!(env.message.contains("line 3"), "{env:?}");
        let text = render("doctor", &checks, false);
        assert!(
            !text.contains("sk-pasted"),
            "a malformed line may be a secret: {text}"
        );
    }

    #[test]
    fn corrupt_auth_json_fails_and_is_not_touched() {
        let (dir, home) = fresh_home();
        let auth = dir.path().join("auth.json");
        for damaged in [
            &b"{\"providers\": "[..],
            b"[1, 2]",
            b"{\"providers\": [\"nous\"]}",
            b"{\"providers\": {\"nous\": {\"access_token\": \"t\xff\"}}}",
        ] {
            fs::write(&auth, damaged).unwrap();
            let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
            let row = checks
                .iter()
                .find(|c| c.message.contains("auth.json") && c.status == Status::Fail)
                .unwrap_or_else(|| panic!("{}: {checks:#?}", String::from_utf8_lossy(damaged)));
            assert!(
                row.fix.as_deref().is_some_and(|f| f.contains("auth.json")),
                "{row:?}"
            );
            assert_eq!(fs::read(&auth).unwrap(), damaged, "doctor only looks");
        }
        let copies = fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("corrupt"))
            .count();
        assert_eq!(copies, 0, "doctor makes no corrupt copies");
        fs::write(&auth, "{\"providers\": {\"nous\": {}}}").unwrap();
        let checks = home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
        assert!(!has_failures(&checks), "{checks:#?}");
    }
}
