//! One profile of the volume: what it holds and how each part carries over.

use hermes_settings::{ProfileFiles, Scope, Source};
use std::fs;
use std::path::{Path, PathBuf};

use hermes_gateway_settings::api_server::ApiServer;
use hermes_home::auth::AuthStore;
use hermes_home::config::Config;
use hermes_home::dotenv::{self, DotEnv};
use hermes_home::layout;
use hermes_sessions::browse::{self, Reader};
use serde::Serialize;

use super::inside::{Located, Volume};
use super::platforms::{self, ConfiguredPlatform};
use super::{Finding, Image};

/// The port the original's API server listens on when nothing sets one (every profile alike).
pub const ORIGINAL_API_PORT: u16 = 8642;

/// Directories walked at most this deep, and at most this many entries counted, so a huge or
/// looping tree cannot stall the report.
const MAX_DEPTH: usize = 16;
const MAX_ENTRIES: usize = 100_000;

/// `config.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigFacts {
    /// The file exists (and is inside the volume).
    pub present: bool,
    /// Its `_config_version`.
    pub schema: Option<u64>,
    /// Why it could not be read or parsed.
    pub error: Option<String>,
}

/// Credentials, by name only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Credentials {
    /// Variables `.env` sets to a non-blank value.
    pub env_keys: Vec<String>,
    /// Providers with stored state in `auth.json`.
    pub auth_providers: Vec<String>,
    /// Credential pools in `auth.json`.
    pub credential_pools: Vec<String>,
    /// Why `.env` or `auth.json` could not be read.
    pub errors: Vec<String>,
}

/// `state.db`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SessionFacts {
    /// The file exists.
    pub present: bool,
    /// Its schema marker.
    pub schema_version: Option<i64>,
    /// Sessions stored.
    pub sessions: Option<i64>,
    /// Messages stored.
    pub messages: Option<i64>,
    /// Why it could not be read.
    pub error: Option<String>,
}

/// Files found under a directory (`memories/`, `skills/`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FileCount {
    /// Files counted (`skills/`: `SKILL.md` files, i.e. skills).
    pub count: usize,
    /// Symlinks that lead out of the volume (not followed).
    pub links_out: Vec<PathBuf>,
    /// Why (part of) it could not be read.
    pub error: Option<String>,
}

/// `cron/jobs.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CronFacts {
    /// Jobs stored.
    pub jobs: usize,
    /// Why it could not be read.
    pub error: Option<String>,
}

/// The API server of the profile's gateway, by the original's rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiServerFacts {
    /// It is switched on (`API_SERVER_ENABLED`, `API_SERVER_KEY` or
    /// `platforms.api_server.enabled`).
    pub enabled: bool,
    /// The port it listens on.
    pub port: u16,
    /// Where the port is set: `API_SERVER_PORT`, `platforms.api_server.extra.port`, or
    /// `default` (with hermes-agent installed 8642, the original's for every profile; without,
    /// the native gateway's: 8642 for `default`, a port of its own for each named profile).
    pub port_source: String,
    /// A problem: a weak key, a port that is not a number.
    pub error: Option<String>,
}

/// The configured memory provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryProviderFacts {
    /// `memory.provider`.
    pub name: String,
    /// This image has a plugin of that name.
    pub known: bool,
    /// Its distributions that are not installed.
    pub missing: Vec<String>,
}

/// One profile of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProfileReport {
    /// `default` or the profile's name.
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// `config.yaml`.
    pub config: ConfigFacts,
    /// `.env` and `auth.json`.
    pub credentials: Credentials,
    /// `state.db`.
    pub sessions: SessionFacts,
    /// `memories/`.
    pub memories: FileCount,
    /// `skills/`.
    pub skills: FileCount,
    /// `cron/jobs.json`.
    pub cron: CronFacts,
    /// Messaging platforms switched on.
    pub platforms: Vec<ConfiguredPlatform>,
    /// The API server.
    pub api_server: ApiServerFacts,
    /// `memory.provider`, when not the built-in memory.
    pub memory_provider: Option<MemoryProviderFacts>,
    /// How each part carries over.
    pub findings: Vec<Finding>,
}

/// The bytes of `path` when it is a file inside the volume; `None` when there is none.
///
/// # Errors
///
/// One line: a link out of the volume, or an unreadable file.
fn read_bytes(volume: &Volume, path: &Path) -> Result<Option<Vec<u8>>, String> {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    match volume.locate(path) {
        Located::Missing => Ok(None),
        Located::Outside { target } => Err(format!(
            "`{name}` is a symlink out of the volume (to `{}`): not read",
            target.display()
        )),
        Located::Unreadable(reason) => Err(format!("`{name}`: {reason}")),
        Located::Inside(real) => fs::read(&real)
            .map(Some)
            .map_err(|e| format!("`{name}`: {e}")),
    }
}

/// `config.yaml` at `path`, read through [`Config::parse`].
pub(super) fn read_config(volume: &Volume, path: &Path) -> Result<Option<Config>, String> {
    let Some(bytes) = read_bytes(volume, path)? else {
        return Ok(None);
    };
    let text = std::str::from_utf8(&bytes)
        .map_err(|e| format!("`config.yaml` is not UTF-8 text ({e})"))?;
    hermes_settings::parse_config(path, text)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// `.env` at `path`, read through [`DotEnv::parse`].
pub(super) fn read_dotenv(volume: &Volume, path: &Path) -> Result<Option<DotEnv>, String> {
    let Some(bytes) = read_bytes(volume, path)? else {
        return Ok(None);
    };
    let text =
        std::str::from_utf8(&bytes).map_err(|e| format!("`.env` is not UTF-8 text ({e})"))?;
    Ok(Some(DotEnv::parse(text)))
}

/// Collects one profile.
pub(super) fn collect(
    volume: &Volume,
    name: &str,
    dir: &Path,
    image: &Image,
    multiplexed: bool,
) -> ProfileReport {
    let mut findings = Vec::new();
    if let Located::Outside { target } = volume.locate(dir) {
        findings.push(Finding::attention(
            "volume",
            format!(
                "the profile's directory is a symlink out of the volume (to `{}`): nothing of \
                 it comes with the volume",
                target.display()
            ),
            "move the directory into the volume (replace the link with the files)",
        ));
        return empty(name, dir, findings);
    }

    let (config, config_facts) = config_part(volume, dir, &mut findings);
    let (dotenv, credentials) = credentials_part(volume, dir, &mut findings);
    let sessions = sessions_part(volume, dir, &mut findings);
    let memories = files_part(
        volume,
        &layout::memories_dir(dir),
        None,
        "memories",
        &mut findings,
    );
    let skills = files_part(
        volume,
        &layout::skills_dir(dir),
        Some("SKILL.md"),
        "skills",
        &mut findings,
    );
    let cron = cron_part(volume, name, dir, image, multiplexed, &mut findings);
    let platforms = platforms_part(&dotenv, &config, image, &mut findings);
    let api_server = api_part(name, &dotenv, &config, image, multiplexed, &mut findings);
    let memory_provider = plugins_part(&config, image, &mut findings);
    ProfileReport {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        config: config_facts,
        credentials,
        sessions,
        memories,
        skills,
        cron,
        platforms,
        api_server,
        memory_provider,
        findings,
    }
}

/// A profile none of whose parts could be read.
fn empty(name: &str, dir: &Path, findings: Vec<Finding>) -> ProfileReport {
    ProfileReport {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        config: ConfigFacts {
            present: false,
            schema: None,
            error: None,
        },
        credentials: Credentials::default(),
        sessions: SessionFacts::default(),
        memories: FileCount::default(),
        skills: FileCount::default(),
        cron: CronFacts::default(),
        platforms: Vec::new(),
        api_server: ApiServerFacts {
            enabled: false,
            port: ORIGINAL_API_PORT,
            port_source: "default".into(),
            error: None,
        },
        memory_provider: None,
        findings,
    }
}

fn config_part(volume: &Volume, dir: &Path, findings: &mut Vec<Finding>) -> (Config, ConfigFacts) {
    let path = layout::config_path(dir);
    match read_config(volume, &path) {
        Ok(None) => {
            findings.push(Finding::ok("config", "no config.yaml: the defaults apply"));
            let facts = ConfigFacts {
                present: false,
                schema: None,
                error: None,
            };
            (Config::empty(&path), facts)
        }
        Ok(Some(config)) => {
            let schema = hermes_home::schema::stamp_in(&config);
            findings.push(Finding::ok(
                "config",
                match schema {
                    Some(v) => format!("config.yaml at schema {v}"),
                    None => "config.yaml without `_config_version` (the agent reads it as \
                             outdated and migrates it)"
                        .to_string(),
                },
            ));
            let facts = ConfigFacts {
                present: true,
                schema,
                error: None,
            };
            (config, facts)
        }
        Err(reason) => {
            findings.push(Finding::attention(
                "config",
                format!("config.yaml cannot be used: {reason}"),
                "fix the file (the original refuses it too); until then every default applies \
                 and nothing rewrites it",
            ));
            let facts = ConfigFacts {
                present: true,
                schema: None,
                error: Some(reason),
            };
            (Config::empty(&path), facts)
        }
    }
}

fn credentials_part(
    volume: &Volume,
    dir: &Path,
    findings: &mut Vec<Finding>,
) -> (DotEnv, Credentials) {
    let mut creds = Credentials::default();
    let dotenv = match read_dotenv(volume, &layout::env_path(dir)) {
        Ok(found) => found.unwrap_or_default(),
        Err(reason) => {
            creds.errors.push(reason);
            DotEnv::default()
        }
    };
    let mut keys: Vec<String> = dotenv
        .vars()
        .filter(|(_, v)| dotenv::nonblank(v).is_some())
        .map(|(k, _)| k.to_string())
        .collect();
    keys.sort();
    keys.dedup();
    creds.env_keys = keys;
    // Parsed from bytes read here: `AuthStore::load` would copy a damaged file aside, and this
    // report writes nothing.
    match read_bytes(volume, &layout::auth_path(dir)) {
        Ok(None) => {}
        Ok(Some(bytes)) => match AuthStore::parse(&bytes) {
            Ok(store) => {
                creds.auth_providers = store.providers();
                creds.credential_pools = store.pool_ids();
            }
            Err(reason) => creds
                .errors
                .push(format!("`auth.json` is damaged: {reason}")),
        },
        Err(reason) => creds.errors.push(reason),
    }
    if creds.errors.is_empty() {
        let list = |names: &[String]| {
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        };
        findings.push(Finding::ok(
            "credentials",
            format!(
                ".env keys: {}; auth.json providers: {}; credential pools: {}",
                list(&creds.env_keys),
                list(&creds.auth_providers),
                list(&creds.credential_pools)
            ),
        ));
    }
    for reason in &creds.errors {
        findings.push(Finding::attention(
            "credentials",
            reason.clone(),
            "restore the file from a backup or fix its owner and mode (`hermes doctor`); a \
             credential that cannot be read does not carry over",
        ));
    }
    (dotenv, creds)
}

fn sessions_part(volume: &Volume, dir: &Path, findings: &mut Vec<Finding>) -> SessionFacts {
    let path = layout::state_db_path(dir);
    let mut facts = SessionFacts::default();
    let real = match volume.locate(&path) {
        Located::Missing => {
            findings.push(Finding::ok("sessions", "no state.db: no conversations yet"));
            return facts;
        }
        Located::Inside(real) => real,
        Located::Outside { target } => {
            facts.error = Some(format!(
                "a symlink out of the volume (to `{}`)",
                target.display()
            ));
            PathBuf::new()
        }
        Located::Unreadable(reason) => {
            facts.error = Some(reason);
            PathBuf::new()
        }
    };
    facts.present = true;
    if facts.error.is_none() {
        match Reader::open_untouched(&real).and_then(|r| r.map(|r| r.overview()).transpose()) {
            Ok(Some(o)) => {
                facts.schema_version = o.schema_version;
                facts.sessions = Some(o.sessions);
                facts.messages = Some(o.messages);
            }
            Ok(None) => {}
            Err(e) if browse::is_busy(&e) => {
                facts.error = Some(format!("{e} (another process holds it)"));
            }
            Err(e) => facts.error = Some(e.to_string()),
        }
    }
    match &facts.error {
        None => findings.push(Finding::ok(
            "sessions",
            format!(
                "state.db: {} sessions, {} messages (schema {})",
                facts.sessions.unwrap_or(0),
                facts.messages.unwrap_or(0),
                facts
                    .schema_version
                    .map_or_else(|| "unmarked".to_string(), |v| v.to_string())
            ),
        )),
        Some(reason) => findings.push(Finding::attention(
            "sessions",
            format!("state.db cannot be read: {reason}"),
            "stop what holds it and run this again; if it is damaged, restore it from a \
             backup (copy a live database with SQLite's backup, not `cp`)",
        )),
    }
    facts
}

/// Counts files under `dir` (only those named `only`, when given), never following a symlink
/// out of the volume.
fn files_part(
    volume: &Volume,
    dir: &Path,
    only: Option<&str>,
    area: &'static str,
    findings: &mut Vec<Finding>,
) -> FileCount {
    let mut count = FileCount::default();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((path, depth)) = stack.pop() {
        let real = match volume.locate(&path) {
            Located::Missing => continue,
            Located::Inside(real) => real,
            Located::Outside { .. } => {
                count.links_out.push(path);
                continue;
            }
            Located::Unreadable(reason) => {
                count.error.get_or_insert(reason);
                continue;
            }
        };
        if real.is_dir() {
            if depth >= MAX_DEPTH {
                continue;
            }
            match fs::read_dir(&real) {
                Ok(entries) => {
                    for entry in entries.flatten() {
                        seen += 1;
                        if seen > MAX_ENTRIES {
                            break;
                        }
                        // Walked by the name under `path`, so a link is judged where it is.
                        stack.push((path.join(entry.file_name()), depth + 1));
                    }
                }
                Err(e) => {
                    count.error.get_or_insert(e.to_string());
                }
            }
        } else if only.is_none_or(|name| path.file_name().is_some_and(|n| n == name)) {
            count.count += 1;
        }
    }
    count.links_out.sort();
    let what = if only.is_some() { "skills" } else { "files" };
    let shown = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    findings.push(Finding::ok(
        area,
        format!("{shown}/: {} {what}", count.count),
    ));
    for link in &count.links_out {
        findings.push(Finding::attention(
            area,
            format!("`{}` is a symlink out of the volume: not read, and it does not move with the volume", link.display()),
            "copy what it points at into the volume, in place of the link",
        ));
    }
    if let Some(reason) = &count.error {
        findings.push(Finding::attention(
            area,
            format!("{shown}/ cannot be read completely: {reason}"),
            "fix the owner and mode (`hermes doctor`)",
        ));
    }
    count
}

fn cron_part(
    volume: &Volume,
    name: &str,
    dir: &Path,
    image: &Image,
    multiplexed: bool,
    findings: &mut Vec<Finding>,
) -> CronFacts {
    let mut facts = CronFacts::default();
    match read_bytes(volume, &layout::cron_jobs_path(dir)) {
        Ok(None) => {}
        Ok(Some(bytes)) => {
            let text = String::from_utf8_lossy(&bytes);
            let text: &str = text.strip_prefix('\u{feff}').unwrap_or(&text);
            // The original's shapes: `{"jobs": [...]}`, or a bare list it repairs.
            match serde_json::from_str::<serde_json::Value>(text) {
                Ok(serde_json::Value::Array(jobs)) => facts.jobs = jobs.len(),
                Ok(doc) => match doc.get("jobs") {
                    Some(serde_json::Value::Array(jobs)) => facts.jobs = jobs.len(),
                    None if doc.is_object() => {}
                    _ => facts.error = Some("`cron/jobs.json` has no list of jobs".into()),
                },
                Err(e) => facts.error = Some(format!("`cron/jobs.json` is not JSON: {e}")),
            }
        }
        Err(reason) => facts.error = Some(reason),
    }
    let finding = match (&facts.error, facts.jobs, image.agent_installed) {
        (Some(reason), _, _) => Finding::attention(
            "cron",
            reason.clone(),
            "fix or restore the file; the agent refuses a damaged one",
        ),
        (None, 0, _) => Finding::ok("cron", "no cron jobs"),
        (None, n, true) => match gateway_left_down(volume, name, dir, multiplexed) {
            // A named profile's jobs run only while its own gateway runs.
            Some(why) => Finding::attention(
                "cron",
                format!(
                    "{n} cron job(s), but gateway-{name} does not start with the container \
                     ({why}): its jobs run only while it runs"
                ),
                format!(
                    "start it once (`hermes -p {name} gateway start`): it then starts at every \
                     boot; or switch multiplexing on (`hermes config set \
                     gateway.multiplex_profiles true`), so the default profile's gateway runs \
                     every profile's jobs"
                ),
            ),
            None => Finding::ok(
                "cron",
                format!("{n} cron job(s): run by hermes-agent's gateway (the agent engine)"),
            ),
        },
        (None, n, false) => {
            let place = hermes_services::agent::Place::current();
            Finding::attention(
                "cron",
                format!(
                    "{n} cron job(s), and there is no hermes-agent {} to run them",
                    place.here()
                ),
                format!("{} (its gateway runs them)", place.get_the_agent()),
            )
        }
    };
    findings.push(finding);
    facts
}

/// Why a named profile's own gateway would not start at boot (`reconcile`: only a recorded
/// `running` starts it), or `None` when it would — or when it need not: the default profile
/// (a container boot starts it as `HERMES_GATEWAY_BOOTSTRAP_STATE` asks), or multiplexing
/// (the default profile's gateway serves every profile).
fn gateway_left_down(volume: &Volume, name: &str, dir: &Path, multiplexed: bool) -> Option<String> {
    if multiplexed || name == hermes_home::DEFAULT_PROFILE {
        return None;
    }
    let recorded = read_bytes(volume, &hermes_home::gateway_state::path(dir))
        .ok()
        .flatten()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Map<_, _>>(&bytes).ok())
        .map(hermes_home::gateway_state::GatewayState::from_fields);
    let intent = recorded.as_ref().and_then(|s| s.run_intent());
    match intent {
        Some("running") => None,
        Some(state) => Some(format!("its last recorded state is `{state}`")),
        None => Some("it has no recorded state".into()),
    }
}

fn platforms_part(
    dotenv: &DotEnv,
    config: &Config,
    image: &Image,
    findings: &mut Vec<Finding>,
) -> Vec<ConfiguredPlatform> {
    let configured = platforms::configured(dotenv, config);
    if configured.is_empty() {
        findings.push(Finding::ok("platforms", "no messaging platform configured"));
    }
    configured
        .into_iter()
        .map(|(spec, set_in)| {
            let installed_in = spec.package.and_then(|p| image.installed_in(p));
            let set = set_in.join(", ");
            let finding = match (image.agent_installed, spec.package, installed_in) {
                (false, _, _) => {
                    let place = hermes_services::agent::Place::current();
                    Finding::attention(
                        "platforms",
                        format!(
                            "{} is configured ({set}), and there is no hermes-agent {} to connect it",
                            spec.name,
                            place.here()
                        ),
                        place.get_the_agent(),
                    )
                }
                (true, None, _) => Finding::ok(
                    "platforms",
                    format!("{} ({set}): needs no extra package", spec.name),
                ),
                (true, Some(package), Some(place)) => Finding::ok(
                    "platforms",
                    format!("{} ({set}): {package} installed ({place})", spec.name),
                ),
                (true, Some(package), None) => Finding::attention(
                    "platforms",
                    format!(
                        "{} is configured ({set}) but its package {package} is not installed in \
                         this image",
                        spec.name
                    ),
                    format!(
                        "`hermes deps install {package}` (into the volume's lazy-packages), or \
                         use an image that ships it"
                    ),
                ),
            };
            findings.push(finding);
            ConfiguredPlatform {
                name: spec.name.to_string(),
                set_in,
                package: spec.package.map(str::to_string),
                installed_in: installed_in.map(str::to_string),
            }
        })
        .collect()
}

fn api_part(
    profile: &str,
    dotenv: &DotEnv,
    config: &Config,
    image: &Image,
    multiplexed: bool,
    findings: &mut Vec<Finding>,
) -> ApiServerFacts {
    // The profile's variables as its gateway will see them from the volume (`hermes_settings`:
    // `.env`, then the top level of `config.yaml`), each with where it is set. The report is
    // on the volume, which goes from one container to another: no process environment.
    let scope = Scope::of(profile);
    let files = ProfileFiles::from_parts(dotenv.clone(), config.clone(), scope, Vec::new());
    let env = |k: &str| files.var(k).map(|s| s.value);
    shadowed_key(&files, findings);
    let cfg = |k: &str| config.string(k, &|name: &str| env(name));
    let key = env("API_SERVER_KEY").or_else(|| cfg("platforms.api_server.extra.key"));
    let (enabled, mut error) = match ApiServer::decide(
        &env,
        hermes_home::api_server::config_switch(&files.environment(), config),
        key.as_deref(),
    ) {
        Ok(decision) => (decision.is_on(), None),
        Err(e) => (true, Some(e.to_string())),
    };
    let (raw, port_source) = match env("API_SERVER_PORT") {
        Some(v) => (Some(v), "API_SERVER_PORT"),
        None => match cfg("platforms.api_server.extra.port") {
            Some(v) => (Some(v), "platforms.api_server.extra.port"),
            None => (None, "default"),
        },
    };
    // Unset, the agent's gateway (the engine wherever the agent is installed) listens on the
    // original's 8642 in every profile; the native gateway gives a named profile its own.
    let default_port = if image.agent_installed {
        ORIGINAL_API_PORT
    } else {
        hermes_gateway_settings::default_port(profile)
    };
    let port = match raw.as_deref().map(|v| v.trim().parse::<u16>()) {
        None => default_port,
        Some(Ok(port)) => port,
        Some(Err(_)) => {
            error.get_or_insert(format!("`{port_source}` is not a port number"));
            default_port
        }
    };
    let facts = ApiServerFacts {
        enabled,
        port,
        port_source: port_source.to_string(),
        error,
    };
    let served_by_default = multiplexed && profile != hermes_home::DEFAULT_PROFILE;
    findings.push(match (&facts.error, facts.enabled) {
        (Some(reason), _) => Finding::attention(
            "api_server",
            format!("the API server cannot start: {reason}"),
            "set a usable API_SERVER_KEY (16 characters or more) and a numeric API_SERVER_PORT \
             in the profile's .env",
        ),
        (None, false) => Finding::ok("api_server", "API server off"),
        (None, true) if served_by_default => Finding::ok(
            "api_server",
            "API server on, served by the default profile's gateway at /p/<profile>/v1 \
             (multiplexed)",
        ),
        (None, true) => Finding::ok(
            "api_server",
            format!("API server on port {port} ({port_source})"),
        ),
    });
    if multiplexed && image.agent_installed {
        agent_multiplexing_reads_dot_env(profile, image, &files, findings);
    }
    facts
}

/// The API server's variables the agent's gateway reads through `getenv`.
const API_SERVER_VARIABLES: [&str; 4] = [
    "API_SERVER_ENABLED",
    "API_SERVER_KEY",
    "API_SERVER_PORT",
    "API_SERVER_HOST",
];

/// Multiplexed, the agent's gateway reads a profile's variables in that profile's secret
/// scope — its `.env` — so the top-level keys of `config.yaml`, which its single-profile
/// gateway bridges into its environment, are not read. Which profile that costs depends on the
/// release, as seen running both on such a volume (`tests/cli/switch.rs`):
/// * 0.19.0: the default profile's, whose API server then stays off (its own `hermes gateway
///   run` says "No messaging platforms enabled"). A named profile has no API server of its own
///   there: `/p/<profile>/v1` takes the default profile's key (one in its `.env` gets the
///   profile skipped), so nothing is said for it.
/// * 0.20.1: a named profile's, whose `/p/<profile>/v1` then refuses its key.
fn agent_multiplexing_reads_dot_env(
    profile: &str,
    image: &Image,
    files: &ProfileFiles,
    findings: &mut Vec<Finding>,
) {
    let release_0_19 = image
        .agent_version
        .as_deref()
        .is_some_and(|v| v == "0.19" || v.starts_with("0.19."));
    if (profile == hermes_home::DEFAULT_PROFILE) != release_0_19 {
        return;
    }
    let bridged: Vec<&str> = API_SERVER_VARIABLES
        .into_iter()
        .filter(|k| {
            files
                .var(k)
                .is_some_and(|v| v.source == Source::ConfigTopLevel)
        })
        .collect();
    if bridged.is_empty() {
        return;
    }
    let names = bridged.join(", ");
    let env = if profile == hermes_home::DEFAULT_PROFILE {
        "`.env`".to_string()
    } else {
        format!("`profiles/{profile}/.env`")
    };
    findings.push(Finding::attention(
        "api_server",
        format!(
            "multiplexed, the agent's gateway does not read {names} from the top level of              `config.yaml` (it reads a profile's variables from its .env): its API server              would be off or on another port"
        ),
        format!(
            "move {names} from the top level of `config.yaml` into {env} (or switch              multiplexing off)"
        ),
    ));
}

/// Says so when one of the API server's settings (its key, port, …) is set in more than one
/// place with different values (where each is, never a value).
fn shadowed_key(files: &ProfileFiles, findings: &mut Vec<Finding>) {
    for shadowed in files.shadowed() {
        findings.push(Finding::attention(
            "api_server",
            shadowed.to_string(),
            shadowed.fix(),
        ));
    }
}

fn plugins_part(
    config: &Config,
    image: &Image,
    findings: &mut Vec<Finding>,
) -> Option<MemoryProviderFacts> {
    let Some(name) = config.memory_provider() else {
        findings.push(Finding::ok("plugins", "memory: built-in (no provider)"));
        return None;
    };
    let Some(packages) = image.memory_providers.get(&name) else {
        findings.push(Finding::attention(
            "plugins",
            format!("memory provider `{name}` is not a plugin this image knows"),
            format!(
                "put its plugin in the volume's plugins/{name}/, or choose another with \
                 `hermes memory setup`"
            ),
        ));
        return Some(MemoryProviderFacts {
            name,
            known: false,
            missing: Vec::new(),
        });
    };
    let missing: Vec<String> = packages
        .iter()
        .filter(|p| image.installed_in(p).is_none())
        .cloned()
        .collect();
    findings.push(if missing.is_empty() {
        let places: Vec<&str> = packages
            .iter()
            .filter_map(|p| image.installed_in(p))
            .collect();
        Finding::ok(
            "plugins",
            format!(
                "memory provider {name}: installed{}",
                if places.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", places.join(", "))
                }
            ),
        )
    } else {
        Finding::attention(
            "plugins",
            format!(
                "memory provider {name}: {} not installed",
                missing.join(", ")
            ),
            format!("`hermes memory setup {name}` installs it into the volume's lazy-packages"),
        )
    });
    Some(MemoryProviderFacts {
        name,
        known: true,
        missing,
    })
}
