//! `hermes dump`: a plain-text support summary to paste into a bug report.
//!
//! It names the exact build (`[sha8]` or `[(unknown)]`), the platform, the profile and home,
//! the model, which API keys are set (names only — a variable's value is never printed), the
//! credentials stored in `auth.json` (label, source, status, the key masked as the original
//! masks it: first 4 and last 4 characters), the memory provider, the profiles, the supervisor and gateway status, and the install method. The
//! format is pinned by a snapshot test in the binary crate; change it deliberately.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use hermes_home::auth::{AuthStore, CredentialView};
use hermes_home::config::Config;
use hermes_home::dotenv::{self, DotEnv};
use hermes_home::{Home, profile, providers};
pub use hermes_report::{AgentView, InvalidService, ServiceLine, SupervisorView};
use hermes_settings::{ProfileFiles, Scope};
use serde::Serialize;

use crate::identity::BuildIdentity;
use crate::install::Install;

/// Keys `dump` reports besides the model providers' (which come from
/// [`hermes_home::providers::MODEL_PROVIDERS`]): (environment variable, label).
pub const OTHER_KEYS: &[(&str, &str)] = &[
    ("HF_TOKEN", "huggingface"),
    ("API_SERVER_KEY", "api_server"),
    ("HONCHO_API_KEY", "honcho"),
    ("MEM0_API_KEY", "mem0"),
    ("FIRECRAWL_API_KEY", "firecrawl"),
    ("TAVILY_API_KEY", "tavily"),
    ("GITHUB_TOKEN", "github"),
];

/// Every key `dump` reports, in its order: (environment variable, label). The model providers
/// (the one table, shared with the gateway) first, then [`OTHER_KEYS`].
pub fn api_keys() -> impl Iterator<Item = (&'static str, &'static str)> {
    providers::MODEL_PROVIDERS
        .iter()
        .map(|p| (p.key_var, p.name))
        .chain(OTHER_KEYS.iter().copied())
}

/// One API key row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyRow {
    /// Environment variable name.
    pub env: String,
    /// Short label.
    pub label: String,
    /// Whether it is set (in the profile's `.env` or the environment).
    pub set: bool,
    /// Not set as a variable, but the provider's credential pool in `auth.json` has a key
    /// (the original's dump says `set (auth pool)`).
    pub in_pool: bool,
}

/// One credential pool of `auth.json`: its keys as `hermes auth list` shows them (masked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolView {
    /// The pool's id (`openrouter`, `openai-api`).
    pub pool: String,
    /// It is the file's `active_provider`.
    pub active: bool,
    /// Its keys, in priority order.
    pub credentials: Vec<CredentialView>,
}

/// Everything `dump` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DumpReport {
    /// Package version.
    pub version: String,
    /// Commit, 8 characters, or `(unknown)`.
    pub build: String,
    /// The original agent, whose commands are handed over.
    pub agent: AgentView,
    /// OS, kernel release and architecture.
    pub os: String,
    /// Selected profile.
    pub profile: String,
    /// The profile's directory, `~`-abbreviated.
    pub hermes_home: String,
    /// Configured model, or `(not set)`.
    pub model: String,
    /// Configured provider, or `(auto)`.
    pub provider: String,
    /// Configured base URL, or `(not set)`.
    pub base_url: String,
    /// API keys, set or not.
    pub api_keys: Vec<KeyRow>,
    /// The credential pools of `auth.json`.
    pub credentials: Vec<PoolView>,
    /// Memory provider, `built-in` when none.
    pub memory_provider: String,
    /// All profile names.
    pub profiles: Vec<String>,
    /// Supervisor and gateways.
    pub supervisor: SupervisorView,
    /// Declared services left out as invalid (the caller finds them; none is not listed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid_services: Vec<InvalidService>,
    /// Install method.
    pub install_method: String,
    /// Install directory.
    pub install_dir: String,
    /// Problems met while collecting (a config that does not parse, an unreadable `.env`).
    pub warnings: Vec<String>,
}

/// Collects the report. `var` reads the process environment.
pub fn collect(
    home: &Home,
    var: &dyn Fn(&str) -> Option<String>,
    identity: &BuildIdentity,
    install: &Install,
    supervisor: SupervisorView,
    agent: AgentView,
) -> DumpReport {
    let mut warnings = Vec::new();
    let dotenv = DotEnv::load(&home.env_path()).unwrap_or_else(|e| {
        warnings.push(format!("{e}"));
        DotEnv::default()
    });
    let config = hermes_settings::config_of(home.dir()).unwrap_or_else(|e| {
        warnings.push(format!("{e}"));
        Config::empty(&home.config_path())
    });
    // The profile's environment as its gateway sees it (`hermes_settings`: `.env` over the
    // shell, then the top level of `config.yaml`; a blank value reads as not set).
    let files = ProfileFiles::from_parts(
        dotenv,
        config,
        Scope::of(home.profile().name()),
        hermes_settings::process_through(var),
    );
    let lookup = files.lookup_with(var);
    let config = files.config();
    let model = config.model(&lookup);
    let credentials = pools(home, &lookup, &mut warnings);
    let api_keys = api_keys()
        .map(|(env, label)| KeyRow {
            env: env.to_string(),
            label: label.to_string(),
            set: lookup(env).as_deref().and_then(dotenv::nonblank).is_some(),
            in_pool: credentials.iter().any(|p| {
                is_pool_of(&p.pool, label) && p.credentials.iter().any(|c| !c.key.is_empty())
            }),
        })
        .collect();
    let profiles = match profile::list(home.root()) {
        Ok(list) => list.iter().map(|p| p.profile.name().to_string()).collect(),
        Err(e) => {
            warnings.push(format!("{e}"));
            Vec::new()
        }
    };
    DumpReport {
        version: identity.version.clone(),
        build: identity.short_sha().to_string(),
        agent,
        os: os_description(),
        profile: home.profile().name().to_string(),
        hermes_home: abbreviate_home(home.dir(), var("HOME").as_deref()),
        model: model.default.unwrap_or_else(|| "(not set)".into()),
        provider: model.provider.unwrap_or_else(|| "(auto)".into()),
        base_url: model.base_url.unwrap_or_else(|| "(not set)".into()),
        api_keys,
        credentials,
        memory_provider: config
            .memory_provider()
            .unwrap_or_else(|| "built-in".into()),
        profiles,
        supervisor,
        invalid_services: Vec::new(),
        install_method: install.method.as_str().to_string(),
        install_dir: install
            .dir
            .as_ref()
            .map_or_else(|| "(unknown)".into(), |d| d.display().to_string()),
        warnings,
    }
}

/// The credential pools of the profile's `auth.json`, keys masked. An unreadable file is a
/// warning; a damaged one is copied aside (as every reader of it does) and read as empty.
fn pools(
    home: &Home,
    lookup: &dyn Fn(&str) -> Option<String>,
    warnings: &mut Vec<String>,
) -> Vec<PoolView> {
    let loaded = match AuthStore::load(&home.auth_path()) {
        Ok(loaded) => loaded,
        Err(e) => {
            warnings.push(format!("{e}"));
            return Vec::new();
        }
    };
    if let Some(c) = &loaded.corrupt {
        warnings.push(format!(
            "`{}` could not be parsed ({}); read as empty",
            c.path.display(),
            c.reason
        ));
    }
    let store = loaded.store;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    store
        .pool_ids()
        .into_iter()
        .map(|pool| PoolView {
            active: store.active_provider() == Some(pool.as_str()),
            credentials: store.credential_views(&pool, lookup, now),
            pool,
        })
        .collect()
}

/// Whether pool `pool` holds the keys of provider row `label`: the same name, or the
/// original's name for it (`openai-api` for `openai`).
fn is_pool_of(pool: &str, label: &str) -> bool {
    pool == label || providers::original_name(label) == Some(pool)
}

/// Renders the plain-text report (no colour: it is meant to be pasted).
pub fn render(report: &DumpReport) -> String {
    let mut out = String::from("--- hermes dump ---\n");
    let mut row =
        |key: &str, value: &str| out.push_str(&format!("{:<18}{value}\n", format!("{key}:")));
    row("version", &format!("{} [{}]", report.version, report.build));
    row("hermes_agent", &report.agent.label());
    row("os", &report.os);
    row(
        "install",
        &format!("{} ({})", report.install_method, report.install_dir),
    );
    row("profile", &report.profile);
    row("hermes_home", &report.hermes_home);
    row("model", &report.model);
    row("provider", &report.provider);
    row("base_url", &report.base_url);
    row("memory_provider", &report.memory_provider);
    row(
        "profiles",
        &format!("{} ({})", report.profiles.join(", "), report.profiles.len()),
    );
    out.push_str("\napi_keys:\n");
    for key in &report.api_keys {
        out.push_str(&format!(
            "  {:<20}{}\n",
            key.label,
            match (key.set, key.in_pool) {
                (true, _) => "set",
                (false, true) => "set (auth pool)",
                (false, false) => "not set",
            }
        ));
    }
    if !report.credentials.is_empty() {
        out.push_str("\ncredentials:\n");
        for pool in &report.credentials {
            let active = if pool.active { " (active)" } else { "" };
            out.push_str(&format!("  {}{active}\n", pool.pool));
            for c in &pool.credentials {
                let key = if c.key.is_empty() {
                    "(not set)"
                } else {
                    &c.key
                };
                out.push_str(&format!(
                    "    #{} {} {} {} {key} {}{}\n",
                    c.index,
                    c.label,
                    c.auth_type,
                    c.source,
                    c.status,
                    if c.current { " ←" } else { "" }
                ));
            }
        }
    }
    out.push('\n');
    match &report.supervisor {
        SupervisorView::NotRunning => out.push_str("supervisor:       not running\n"),
        SupervisorView::Unreachable { reason } => {
            out.push_str(&format!("supervisor:       unreachable ({reason})\n"))
        }
        SupervisorView::Running { services } => {
            out.push_str("supervisor:       running\nservices:\n");
            for service in services {
                let pid = service
                    .pid
                    .map(|p| format!(" (pid {p})"))
                    .unwrap_or_default();
                out.push_str(&format!("  {:<20}{}{pid}\n", service.name, service.state));
            }
        }
    }
    if !report.invalid_services.is_empty()
        && !matches!(report.supervisor, SupervisorView::Running { .. })
    {
        out.push_str("services:\n");
    }
    for service in &report.invalid_services {
        out.push_str(&format!(
            "  {:<20}invalid: {}\n",
            service.name, service.reason
        ));
    }
    for warning in &report.warnings {
        out.push_str(&format!("warning:          {warning}\n"));
    }
    out.push_str("--- end dump ---\n");
    out
}

/// `~/x` when `path` is under `home`.
pub fn abbreviate_home(path: &Path, home: Option<&str>) -> String {
    if let Some(home) = home.filter(|h| !h.is_empty() && *h != "/")
        && let Ok(rest) = path.strip_prefix(home)
    {
        return if rest.as_os_str().is_empty() {
            "~".into()
        } else {
            format!("~/{}", rest.display())
        };
    }
    path.display().to_string()
}

fn os_description() -> String {
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        });
    let kernel = nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = format!(
        "{} {} {}",
        std::env::consts::OS,
        kernel,
        std::env::consts::ARCH
    );
    match pretty {
        Some(pretty) => format!("{base} ({pretty})"),
        None => base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviation() {
        assert_eq!(
            abbreviate_home(Path::new("/u/.hermes"), Some("/u")),
            "~/.hermes"
        );
        assert_eq!(
            abbreviate_home(Path::new("/opt/data"), Some("/opt/data")),
            "~"
        );
        assert_eq!(
            abbreviate_home(Path::new("/opt/data"), Some("/")),
            "/opt/data"
        );
        assert_eq!(abbreviate_home(Path::new("/opt/data"), None), "/opt/data");
    }

    /// The rows `hermes dump` prints, pinned (the binary's snapshot pins them too): the model
    /// providers of hermes-home's table, then the other keys.
    #[test]
    fn key_rows_come_from_the_provider_table_then_the_other_keys() {
        let labels: Vec<&str> = api_keys().map(|(_, label)| label).collect();
        assert_eq!(
            labels,
            [
                "openrouter",
                "openai",
                "anthropic",
                "nous",
                "google",
                "gemini",
                "deepseek",
                "minimax",
                "kimi",
                "zai",
                "huggingface",
                "api_server",
                "honcho",
                "mem0",
                "firecrawl",
                "tavily",
                "github"
            ]
        );
        let mut vars: Vec<&str> = api_keys().map(|(var, _)| var).collect();
        vars.sort_unstable();
        vars.dedup();
        assert_eq!(vars.len(), labels.len(), "each variable once");
    }

    #[test]
    fn keys_are_reported_by_name_never_by_value() {
        let dir = tempfile::tempdir().unwrap();
        hermes_home::layout::ensure_skeleton(
            dir.path(),
            true,
            &hermes_home::seeds::KeySeed::Generate,
        )
        .unwrap();
        std::fs::write(dir.path().join(".env"), "OPENAI_API_KEY=sk-secret-value\n").unwrap();
        let home = Home::select(dir.path().to_path_buf(), None).unwrap();
        let identity = BuildIdentity::resolve("", None);
        let report = collect(
            &home,
            &|_| None,
            &identity,
            &Install::detect(None),
            SupervisorView::NotRunning,
            AgentView::NotInstalled,
        );
        let text = render(&report);
        assert!(text.contains("hermes_agent:     not installed\n"), "{text}");
        assert!(text.contains("openai              set\n"), "{text}");
        assert!(text.contains("anthropic           not set\n"), "{text}");
        assert!(!text.contains("sk-secret-value"));
        assert!(
            text.contains("version:          0.1.0 [(unknown)]"),
            "{text}"
        );
        assert!(text.contains("supervisor:       not running"));
    }

    #[test]
    fn stored_credentials_are_listed_masked_and_count_as_set() {
        let dir = tempfile::tempdir().unwrap();
        hermes_home::layout::ensure_skeleton(
            dir.path(),
            true,
            &hermes_home::seeds::KeySeed::Generate,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("auth.json"),
            r#"{"active_provider": "openrouter", "credential_pool": {"openrouter": [
                {"id": "a", "label": "work", "source": "manual", "priority": 0,
                 "auth_type": "api_key", "access_token": "sk-or-v1-secretsecret1234"}]}}"#,
        )
        .unwrap();
        let home = Home::select(dir.path().to_path_buf(), None).unwrap();
        let report = collect(
            &home,
            &|_| None,
            &BuildIdentity::resolve("", None),
            &Install::detect(None),
            SupervisorView::NotRunning,
            AgentView::Installed {
                version: Some("0.19.0".into()),
                cli: "/opt/hermes-agent/bin/hermes".into(),
                source: Some("pypi:0.19.0".into()),
            },
        );
        let text = render(&report);
        assert!(
            text.contains(
                "hermes_agent:     0.19.0 (/opt/hermes-agent/bin/hermes) from pypi:0.19.0\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("openrouter          set (auth pool)\n"),
            "{text}"
        );
        assert!(text.contains("openai              not set\n"), "{text}");
        assert!(
            text.contains(
                "credentials:\n  openrouter (active)\n    #1 work api_key manual sk-o...1234 ok ←\n"
            ),
            "{text}"
        );
        assert!(!text.contains("secretsecret"), "{text}");
        let json = serde_json::to_string(&report).unwrap();
        assert!(!json.contains("secretsecret"), "{json}");
    }
}
