//! Resolved gateway settings, and the pure function that builds them from the profile's
//! already-loaded `config.yaml` and environment.
//!
//! Words:
//! * *settings* — everything one gateway (or one `chat_once`) needs, already resolved: no file
//!   is read and no environment variable is looked up after [`GatewaySettings::resolve`].
//! * *config* — the profile's `config.yaml` as `hermes_home` reads it (its typed view of the
//!   `model` section, `${VAR}` expanded from the env map).
//! * *env map* — the profile's `.env` merged over the process environment by hermes-home's one
//!   rule ([`hermes_home::dotenv::DotEnv::overlay`]: a `.env` assignment wins even when empty, and an empty value
//!   counts as unset), which [`crate::source::read_profile`] applies and `doctor` and `dump`
//!   share.
//!
//! Precedence, per setting: env map, then config, then the built-in default — except the
//! provider's model, base URL and key, where `config.yaml` wins over `.env` (the original's
//! "config.yaml > .env" rule for model settings).
//!
//! Provider: `model.provider` names one of the [`known_providers`] (its key variable and base
//! URL are the defaults), or any other name whose `model.base_url` must be set and whose key is
//! its variable in [`hermes_home::providers`] (`GEMINI_API_KEY`), else `<NAME>_API_KEY`;
//! `auto` (or nothing) takes the first known provider whose key is set, else OpenAI without a
//! key (fine for a local server given by `model.base_url`). The known providers are the rows of
//! hermes-home's provider table that have an endpoint (`hermes dump` lists the same table).
//!
//! Key routing ([`choose_provider_key`]): a key goes only where it belongs.
//! * `model.api_key` is the key configured for the endpoint: it is sent to `base_url`,
//!   wherever that is.
//! * A known provider's variable (`OPENAI_API_KEY`, `OPENROUTER_API_KEY`, `DEEPSEEK_API_KEY`)
//!   is sent only over `https` to that provider's own domain (or a subdomain of it). With a
//!   `base_url` elsewhere — a local server, a proxy, another vendor — it is *withheld*: no
//!   `Authorization` header, and one warning naming the variable.
//! * `auto` with a `base_url` takes the key of the known provider serving that URL, if any;
//!   `auto` with a `base_url` on any other host sends only `model.api_key`.
//! * `custom` (and the original's aliases for it: `ollama`, `vllm`, `llamacpp`, `llama.cpp`,
//!   `llama-cpp`) is the OpenAI-compatible endpoint at `model.base_url`, as in the original: it
//!   gets `model.api_key`, else only the key of a known provider whose own address `base_url`
//!   is (like `auto`); no `CUSTOM_API_KEY` is read.
//! * Another provider name's `<NAME>_API_KEY` is that endpoint's own key and is sent to its
//!   `base_url`.
//! * Anthropic (`provider: anthropic`, [`ANTHROPIC`]) is confined like the known providers:
//!   `ANTHROPIC_API_KEY` goes only to `anthropic.com`; its OAuth variables are never sent.
//!
//! Credentials ([`GatewaySettings::resolve_with_auth`]): without `model.api_key`, an endpoint's
//! keys are its provider's credential pool in `auth.json` (`credential_pool.<id>`, the
//! original's `openai-api` for `openai`): its API keys in priority order that may go to the
//! endpoint ([`pooled_key_may_go`]: a known provider's only to its domain, another's only to
//! the origin it was stored for), then the variable above unless an `env:` entry stands for
//! it. A Nous Portal login's inference key counts while valid; other OAuth logins are listed
//! in [`ProviderSettings::unusable`]. `auto` without a key variable takes the first known
//! provider whose pool has a key. How the keys are used: [`hermes_provider::credentials`].
//!
//! Fallbacks: `fallback_providers` ([`hermes_provider::fallback`]) become
//! [`ProviderSettings::fallbacks`], each resolved like the primary.
//!
//! Where the API server listens and how long it drains (`API_SERVER_HOST`, `API_SERVER_PORT`,
//! [`default_port`], `gateway.drain_timeout`) is [`hermes_home::api_server`]'s rule, shared
//! with the supervisor that binds the socket. A real port collision is reported at bind time.

use std::collections::BTreeMap;
use std::net::IpAddr;

use hermes_home::api_server;
use hermes_home::config::{Config, expand_vars};
use hermes_home::dotenv;
use hermes_home::providers;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hermes_home::auth::AuthStore;
use serde_json::{Map, Value};

use crate::limits::ConnectionLimits;

mod routing;

pub use routing::{
    ANTHROPIC, ANTHROPIC_OAUTH_VARS, CUSTOM_PROVIDER_NAMES, KnownProvider, ProviderKey, api_kind,
    choose_provider_key, is_custom, key_owner, known_provider, known_providers, pooled_key_may_go,
};
use routing::{anthropic_url_ok, gated_providers};

use crate::provider::ProviderSettings;
use crate::provider::fallback::{self, FallbackSpec};
use crate::provider::keys::{PoolStore, PooledKey, Strategy, invoke_token_use_until};

use crate::error::Error;

// The default ports are the volume's rule (the supervisor binds them too).
pub use hermes_home::api_server::{DEFAULT_PORT, NAMED_PORT_BASE, NAMED_PORT_SLOTS, default_port};
/// Provider base URL when none is configured (OpenAI's).
pub const DEFAULT_BASE_URL: &str = providers::OPENAI_BASE_URL;

/// Everything one profile's gateway needs, resolved.
#[non_exhaustive]
#[derive(Clone)]
pub struct GatewaySettings {
    /// Profile name (`default` for `HERMES_HOME` itself).
    pub profile: String,
    /// The profile's home directory (holds `SOUL.md`, `config.yaml`, `.env`, `state.db`).
    pub home: PathBuf,
    /// Text of `SOUL.md`: the system message when the profile has no prompt source
    /// ([`crate::source::Profile::prompt`]: settings built in code). `None` or blank: no soul
    /// message.
    pub soul: Option<String>,
    /// Bind host (`API_SERVER_HOST`, default `127.0.0.1`).
    pub host: String,
    /// Bind port (`API_SERVER_PORT`, default from [`default_port`]); 0 picks a free port.
    pub port: u16,
    /// Key clients must present as `Authorization: Bearer <key>` (`API_SERVER_KEY`).
    pub api_key: Option<String>,
    /// Whether the API server runs ([`crate::api_server`]: `API_SERVER_ENABLED`, the key).
    pub api_server: crate::api_server::ApiServer,
    /// The provider; `None` when no model is configured (the gateway still serves `/health`).
    pub provider: Option<ProviderSettings>,
    /// SQLite session store (`<home>/state.db`).
    pub state_db: PathBuf,
    /// Single-instance lock (`<home>/gateway.lock`).
    pub lock_path: PathBuf,
    /// Take over from a running gateway instead of refusing to start (`--replace`).
    pub replace: bool,
    /// How long `--replace` waits after SIGTERM before it sends SIGKILL.
    pub replace_timeout: Duration,
    /// The gateway this one takes over from in a supervisor's hand-over
    /// (`HERMES_HANDOVER_FROM`, set by the caller): while that process holds the lock, this
    /// one serves beside it and takes the lock when it lets go, instead of being refused.
    pub handover_from: Option<u32>,
    /// How long in-flight requests may run after shutdown is requested.
    pub drain_timeout: Duration,
    /// Connection cap and timeouts of the HTTP server.
    pub connection_limits: ConnectionLimits,
    /// `NOTIFY_SOCKET` (sd_notify datagram socket; `@name` is abstract).
    pub notify_socket: Option<String>,
    /// Command line written into the lock record.
    pub argv: Vec<String>,
    /// Serve every profile of the volume (`multiplex`): `home` is then the volume's
    /// root (the default profile) and each named profile is served at `/p/<profile>/`. Set
    /// by the caller from `hermes_home::multiplex` for the default profile; never read from
    /// the profile's files here.
    pub multiplex: bool,
}

impl GatewaySettings {
    /// Settings with every default for `profile` living in `home`, and no provider.
    pub fn new(profile: impl Into<String>, home: impl Into<PathBuf>) -> Self {
        let profile = profile.into();
        let home = home.into();
        GatewaySettings {
            port: default_port(&profile),
            state_db: hermes_home::layout::state_db_path(&home),
            lock_path: home.join("gateway.lock"),
            profile,
            home,
            soul: None,
            host: hermes_home::api_server::DEFAULT_HOST.into(),
            api_key: None,
            api_server: crate::api_server::ApiServer::On,
            provider: None,
            replace: false,
            // Long enough for the old gateway's own drain, so a takeover cuts no stream.
            replace_timeout: Duration::from_secs(35),
            handover_from: None,
            drain_timeout: hermes_home::api_server::DEFAULT_DRAIN_TIMEOUT,
            connection_limits: ConnectionLimits::default(),
            notify_socket: None,
            argv: std::env::args().collect(),
            multiplex: false,
        }
    }

    /// Builds settings from a flattened `config.yaml` view and an env map (see the module doc
    /// for keys and precedence). Pure: reads no file and no process state besides `argv`.
    ///
    /// Keys read — env: `API_SERVER_HOST`, `API_SERVER_PORT`, `API_SERVER_KEY`,
    /// `OPENAI_API_KEY`, `OPENROUTER_API_KEY`, `DEEPSEEK_API_KEY`, `ANTHROPIC_API_KEY`,
    /// `<NAME>_API_KEY`, `OPENAI_BASE_URL`, `NOUS_INFERENCE_BASE_URL`, `NOTIFY_SOCKET`,
    /// `HERMES_GATEWAY_DRAIN_TIMEOUT`, the
    /// variables of `env:` pool entries and `key_env`; config: `model.provider`, `model` /
    /// `model.default` (also `model.model`, `model.name`), `model.base_url`, `model.api_key`,
    /// `model.timeout`, `agent.api_max_retries`, `platforms.api_server.extra.{host,port,key}`,
    /// `gateway.{max_connections,header_timeout,idle_timeout,drain_timeout}`,
    /// `fallback_providers`,
    /// `fallback_model`, `credential_pool_strategies.<id>`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidSetting`] for an unparsable number, and the checks of
    /// [`GatewaySettings::validate`].
    pub fn resolve(
        profile: &str,
        home: &Path,
        soul: Option<String>,
        config: &Config,
        env: &BTreeMap<String, String>,
    ) -> Result<GatewaySettings, Error> {
        let auth = AuthStore::default();
        GatewaySettings::resolve_with_auth(profile, home, soul, config, env, &auth)
    }

    /// [`GatewaySettings::resolve`] with the profile's `auth.json` (`<home>/auth.json`): its
    /// credential pools join each endpoint's keys (module doc, "Credentials"). Pure like
    /// `resolve`: the store is already loaded.
    ///
    /// # Errors
    ///
    /// Those of [`GatewaySettings::resolve`].
    pub fn resolve_with_auth(
        profile: &str,
        home: &Path,
        soul: Option<String>,
        config: &Config,
        env: &BTreeMap<String, String>,
        auth: &AuthStore,
    ) -> Result<GatewaySettings, Error> {
        let get_env = |k: &str| env.get(k).and_then(|v| dotenv::nonblank(v));
        let lookup = |k: &str| env.get(k).cloned();
        let get_cfg = |k: &str| config.string(k, &lookup);

        let mut s = GatewaySettings::new(profile, home);
        s.soul = soul;
        s.host = api_server::host(env, config);
        s.port = api_server::port(profile, env, config)?;
        s.drain_timeout = api_server::drain_timeout(env, config)?;
        s.api_key = get_env("API_SERVER_KEY")
            .map(str::to_string)
            .or_else(|| get_cfg("platforms.api_server.extra.key"));
        s.api_server = crate::api_server::ApiServer::decide(
            &|k: &str| get_env(k).map(str::to_string),
            api_server::config_switch(env, config),
            s.api_key.as_deref(),
        )?;
        s.notify_socket = get_env("NOTIFY_SOCKET").map(str::to_string);
        if let Some(v) = get_cfg("gateway.max_connections") {
            s.connection_limits.max_connections =
                parse_at_least_one("gateway.max_connections", &v)?;
        }
        if let Some(v) = get_cfg("gateway.header_timeout") {
            s.connection_limits.header_timeout =
                Duration::from_secs(parse_at_least_one("gateway.header_timeout", &v)?);
        }
        if let Some(v) = get_cfg("gateway.idle_timeout") {
            s.connection_limits.idle_timeout =
                Duration::from_secs(parse_at_least_one("gateway.idle_timeout", &v)?);
        }

        let model = config.model(&lookup);
        if let Some(name) = model.default {
            let resolver = Resolver {
                get_env: &get_env,
                config,
                lookup: &lookup,
                auth,
                auth_path: hermes_home::layout::auth_path(home),
            };
            let mut primary = FallbackSpec::new(model.provider.clone().unwrap_or_default(), name);
            primary.base_url = model.base_url.clone();
            primary.api_key = model.api_key.clone();
            let mut p = resolver.endpoint(&primary, "model")?;
            if let Some(t) = get_cfg("model.timeout") {
                let secs: u64 = parse_num("model.timeout", &t)?;
                if secs == 0 {
                    return Err(Error::InvalidSetting {
                        key: "model.timeout".into(),
                        value: t,
                        reason: "must be at least 1 second".into(),
                    });
                }
                p.request_timeout = Duration::from_secs(secs);
            }
            if let Some(r) = get_cfg("agent.api_max_retries") {
                p.max_retries = parse_num("agent.api_max_retries", &r)?;
            }
            p.fallbacks = resolver.fallbacks(&p);
            s.provider = Some(p);
        }
        s.validate()?;
        Ok(s)
    }

    /// Checks the rules that make a gateway unsafe or impossible to run: a non-loopback bind
    /// needs an API key (fail closed), and the provider URL must be http(s).
    ///
    /// # Errors
    ///
    /// [`Error::UnauthenticatedPublicBind`] or [`Error::InvalidSetting`]; all are
    /// configuration errors (exit 78).
    pub fn validate(&self) -> Result<(), Error> {
        if self.host.trim().is_empty() {
            return Err(Error::InvalidSetting {
                key: "API_SERVER_HOST".into(),
                value: self.host.clone(),
                reason: "must not be empty".into(),
            });
        }
        let has_key = self.api_key.as_deref().is_some_and(|k| !k.is_empty());
        if !has_key && !is_loopback_host(&self.host) {
            return Err(Error::UnauthenticatedPublicBind {
                host: self.host.clone(),
            });
        }
        if let Some(p) = &self.provider
            && !(p.base_url.starts_with("http://") || p.base_url.starts_with("https://"))
        {
            return Err(Error::InvalidSetting {
                key: "model.base_url".into(),
                value: p.base_url.clone(),
                reason: "must start with `http://` or `https://`".into(),
            });
        }
        Ok(())
    }

    /// `host:port` as passed to the listener (IPv6 literals bracketed).
    pub fn bind_addr(&self) -> String {
        api_server::bind_addr(&self.host, self.port)
    }

    /// Where clients reach the API (`host:port`), or `None` when the API server is off.
    pub fn api_addr(&self) -> Option<String> {
        self.api_server.is_on().then(|| self.bind_addr())
    }
}

/// `model.provider` unset or `auto`.
fn is_auto(configured: Option<&str>) -> bool {
    configured.is_none_or(|c| c.trim().is_empty() || c.trim().eq_ignore_ascii_case("auto"))
}

/// The Nous Portal: its logins (`providers.nous`, pool `nous`) carry a short-lived
/// inference key the gateway can use.
pub const NOUS: &str = "nous";

/// The Portal's inference address when the login names none (the original's
/// `DEFAULT_NOUS_INFERENCE_URL`).
pub const NOUS_INFERENCE_URL: &str = "https://inference-api.nousresearch.com/v1";

/// A Nous login's `inference_base_url`, else the default.
fn nous_inference_url(state: &Map<String, Value>) -> String {
    state
        .get("inference_base_url")
        .and_then(Value::as_str)
        .map(|u| u.trim().trim_end_matches('/'))
        .filter(|u| !u.is_empty())
        .unwrap_or(NOUS_INFERENCE_URL)
        .to_string()
}

/// The `credential_pool` ids the original keeps a provider's keys under: the provider's name
/// and its name in the original (`openai` is `openai-api` there).
fn pool_ids(name: &str) -> Vec<String> {
    let name = name.trim().to_ascii_lowercase();
    let mut ids = vec![name.clone()];
    if let Some(original) = providers::original_name(&name) {
        ids.push(original.to_string());
    }
    if let Some(p) = providers::find(&name)
        && p.name != name
    {
        ids.push(p.name.to_string());
    }
    ids
}

/// What one resolution of endpoints needs besides an endpoint's own entry.
struct Resolver<'a, 'e> {
    get_env: &'a dyn Fn(&str) -> Option<&'e str>,
    config: &'a Config,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    auth: &'a AuthStore,
    auth_path: PathBuf,
}

impl Resolver<'_, '_> {
    /// The endpoint of `spec` (the `model` section, or a fallback entry, named by `origin`
    /// in errors): its address, API and keys.
    fn endpoint(&self, spec: &FallbackSpec, origin: &str) -> Result<ProviderSettings, Error> {
        let configured = Some(spec.provider.as_str()).filter(|p| !p.trim().is_empty());
        let provider = match provider_kind(configured, self.get_env)? {
            // `auto` found no key variable: a key stored only in a pool counts too (the
            // original's `resolve_provider` checks OpenRouter's pool here, issue #42130).
            Some(k)
                if is_auto(configured)
                    && spec.base_url.is_none()
                    && (self.get_env)(k.key_var).is_none() =>
            {
                Some(self.auto_from_pools().unwrap_or(k))
            }
            other => other,
        };
        let is_nous = configured.is_some_and(|c| c.trim().eq_ignore_ascii_case(NOUS));
        let base_url = match &spec.base_url {
            Some(url) if provider == Some(ANTHROPIC) && !anthropic_url_ok(url) => {
                ANTHROPIC.base_url.to_string()
            }
            Some(url) => url.clone(),
            None if is_nous => self.nous_base_url(),
            None => match provider {
                Some(known) if known.name == "openai" => (self.get_env)("OPENAI_BASE_URL")
                    .unwrap_or(known.base_url)
                    .to_string(),
                Some(known) => known.base_url.to_string(),
                None => {
                    return Err(Error::InvalidSetting {
                        key: format!("{origin}.base_url"),
                        value: String::new(),
                        reason: match configured {
                            Some(p) if is_custom(p) => format!(
                                "provider `{p}` is the OpenAI-compatible endpoint at `{origin}.base_url`: set it (e.g. `http://127.0.0.1:11434/v1`)"
                            ),
                            p => format!(
                                "provider `{}` has no known address: set its OpenAI-compatible URL",
                                p.unwrap_or_default()
                            ),
                        },
                    });
                }
            },
        };
        let base_url = base_url.trim_end_matches('/');
        // An unset variable stays as written (`expand_vars`): sending it would put the text
        // `Bearer ${NAME}` on the wire and earn a confusing 401, so the endpoint is refused.
        if let Some(name) = spec.api_key.as_deref().and_then(unexpanded_var) {
            return Err(Error::InvalidSetting {
                key: format!("{origin}.api_key"),
                value: format!("${{{name}}}"),
                reason: format!(
                    "the variable `{name}` is not set, so there is no key to send: set `{name}` in the profile's `.env`, or write the key itself"
                ),
            });
        }
        let key = choose_provider_key(configured, base_url, spec.api_key.as_deref(), self.get_env);
        let mut p = ProviderSettings::new(base_url, spec.model.clone());
        p.name = configured.map_or_else(|| "auto".into(), |n| n.trim().to_string());
        p.api = api_kind(&p.name, base_url);
        p.api_key = key.key.clone();
        p.withheld_key = key.withheld.clone();
        if key.source.as_deref() != Some("model.api_key") {
            self.add_pool(&mut p, configured, provider, &key);
        }
        if provider == Some(ANTHROPIC) {
            for var in ANTHROPIC_OAUTH_VARS {
                if (self.get_env)(var).is_some() {
                    p.unusable.push(format!(
                        "`{var}` (an Anthropic OAuth token: use an API key, `ANTHROPIC_API_KEY`)"
                    ));
                }
            }
        }
        Ok(p)
    }

    /// Adds the provider's credential pool from `auth.json` to `p`: its API keys allowed to
    /// go to `p.base_url`, then the provider's variable unless an entry stands for it.
    fn add_pool(
        &self,
        p: &mut ProviderSettings,
        configured: Option<&str>,
        provider: Option<KnownProvider>,
        key: &ProviderKey,
    ) {
        // The pool is the provider's whose address this is: `auto` and `custom` use only the
        // pool of a known provider serving `base_url` (the original keys custom endpoints'
        // pools by their `custom_providers` name, which the gateway does not read).
        let is_auto = is_auto(configured);
        let owner = if is_auto || configured.is_some_and(is_custom) {
            gated_providers().find(|g| g.serves(&p.base_url))
        } else {
            provider
        };
        let name = match (owner, configured) {
            (Some(o), _) => o.name.to_string(),
            (None, Some(c)) if !is_auto && !is_custom(c) => c.trim().to_string(),
            _ => String::new(),
        };
        let mut keys = Vec::new();
        if !name.is_empty() {
            for id in pool_ids(&name) {
                let entries = self.auth.pool(&id);
                if entries.is_empty() {
                    continue;
                }
                for entry in entries {
                    match self.pooled_key(&id, entry, owner.as_ref(), &p.base_url) {
                        Ok(k) => keys.push(k),
                        Err(Some(why)) => p.unusable.push(why),
                        Err(None) => {}
                    }
                }
                p.pool_store = Some(PoolStore::new(&self.auth_path, &id));
                p.strategy = self
                    .config
                    .string(&format!("credential_pool_strategies.{id}"), self.lookup)
                    .and_then(|s| Strategy::parse(&s))
                    .unwrap_or_default();
                break;
            }
            // A login kept outside the pool (`providers.<id>`): used when the pool has no
            // key (the original seeds its pool from it), else reported when unusable.
            for id in pool_ids(&name) {
                let Some(state) = self.auth.provider(&id).and_then(Value::as_object) else {
                    continue;
                };
                if state.get("access_token").is_none() && state.get("agent_key").is_none() {
                    continue;
                }
                match self.login_key(&id, state, &format!("providers.{id}"), &p.base_url) {
                    Ok(k) if keys.is_empty() => keys.push(k),
                    Ok(_) => {}
                    Err(why) => p
                        .unusable
                        .push(format!("the `{id}` login in auth.json: {why}")),
                }
            }
        }
        if let (Some(k), Some(var)) = (&key.key, &key.source) {
            let source = format!("env:{var}");
            if !keys.iter().any(|pk: &PooledKey| pk.source == source) {
                keys.push(PooledKey::new(var.clone(), source, k.clone()));
            }
        }
        if let Some(first) = keys.first() {
            p.api_key = Some(first.key.clone());
            p.withheld_key = None;
        }
        p.credentials = keys;
    }

    /// The key of one stored pool entry, or why it is not used (`Err(None)`: nothing to say,
    /// e.g. an `env:` entry whose variable is not set here).
    fn pooled_key(
        &self,
        pool: &str,
        entry: &Map<String, Value>,
        owner: Option<&KnownProvider>,
        dest: &str,
    ) -> Result<PooledKey, Option<String>> {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).map(str::trim);
        let label = text("label").or(text("id")).unwrap_or("?");
        let source = text("source").unwrap_or("manual");
        let token = match source.strip_prefix("env:") {
            Some(var) => (self.get_env)(var).map(str::to_string),
            None => text("access_token").map(str::to_string),
        }
        .filter(|t| !t.is_empty())
        .ok_or(None)?;
        let oauth_token = pool == ANTHROPIC.name && token.starts_with("sk-ant-oat");
        let auth_type = text("auth_type").unwrap_or("api_key");
        if auth_type != "api_key" && pool == NOUS {
            return self
                .login_key(pool, entry, source, dest)
                .map(|mut k| {
                    k.id = text("id").map(str::to_string);
                    k.label = label.to_string();
                    k
                })
                .map_err(|why| Some(format!("`{pool}` credential `{label}` ({source}): {why}")));
        }
        if auth_type != "api_key" || oauth_token {
            return Err(Some(format!(
                "`{pool}` credential `{label}` ({source}, an OAuth login, which needs a refresh flow the gateway does not run)"
            )));
        }
        if !pooled_key_may_go(owner, text("base_url"), dest) {
            return Err(Some(format!(
                "`{pool}` credential `{label}` ({source}): it belongs to {} and is not sent to `{dest}`",
                owner.map_or_else(
                    || text("base_url").unwrap_or("?").to_string(),
                    |o| o.domain.to_string()
                )
            )));
        }
        Ok(PooledKey::from_entry(entry, token))
    }

    /// For `auto` without any key variable: the first known provider whose pool holds an API
    /// key, OpenRouter first (the only pool the original's `auto` looks at), then `auto`'s
    /// order.
    fn auto_from_pools(&self) -> Option<KnownProvider> {
        let openrouter = known_providers().filter(|k| k.name == "openrouter");
        openrouter.chain(known_providers()).find(|k| {
            pool_ids(k.name).iter().any(|id| {
                self.auth.pool(id).iter().any(|e| {
                    let text = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or("");
                    text("auth_type") != "oauth" && !text("access_token").trim().is_empty()
                })
            })
        })
    }

    /// The inference key of a login (`providers.<id>`, or a pool entry seeded from it): the
    /// Nous Portal's `agent_key` while it is valid (see
    /// [`hermes_provider::credentials::invoke_token_use_until`]), sent only to the login's own
    /// `inference_base_url`. Any other login needs a refresh flow or request shape the
    /// gateway does not have: `Err` says so.
    fn login_key(
        &self,
        id: &str,
        state: &Map<String, Value>,
        source: &str,
        dest: &str,
    ) -> Result<PooledKey, String> {
        if id != NOUS {
            return Err(
                "an OAuth login, which needs a refresh flow the gateway does not run: add an API key (`hermes auth add <provider> --type api-key`)"
                    .into(),
            );
        }
        let token = state
            .get("agent_key")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or("it holds no inference key (`agent_key`): run the original once to mint one")?;
        let until = invoke_token_use_until(token, state.get("scope"), SystemTime::now())
            .map_err(|why| format!("its inference key is not usable: {why}"))?;
        let home = nous_inference_url(state);
        if !pooled_key_may_go(None, Some(&home), dest) {
            return Err(format!(
                "its key belongs to `{home}` and is not sent to `{dest}`"
            ));
        }
        let mut key = PooledKey::from_entry(state, token.to_string());
        key.id = None;
        key.label = id.to_string();
        key.source = source.to_string();
        key.expires_at = Some(until);
        Ok(key)
    }

    /// Where `provider: nous` sends requests without `model.base_url`: `NOUS_INFERENCE_BASE_URL`,
    /// else the login's `inference_base_url` (a pool entry's, then `providers.nous`'s), else
    /// the Portal's default — the original's order.
    fn nous_base_url(&self) -> String {
        if let Some(url) = (self.get_env)("NOUS_INFERENCE_BASE_URL") {
            return url.trim_end_matches('/').to_string();
        }
        let pooled = self
            .auth
            .pool(NOUS)
            .into_iter()
            .find(|e| e.get("inference_base_url").is_some())
            .cloned();
        let login = self.auth.provider(NOUS).and_then(Value::as_object).cloned();
        pooled.or(login).map_or_else(
            || NOUS_INFERENCE_URL.to_string(),
            |s| nous_inference_url(&s),
        )
    }

    /// The `fallback_providers` chain for `primary`: each entry resolved like the primary
    /// (its own keys by the same rules), with the primary's timeouts and retries. An entry
    /// that cannot be resolved is logged and skipped, as the original skips it.
    fn fallbacks(&self, primary: &ProviderSettings) -> Vec<ProviderSettings> {
        fallback::chain(self.config, self.lookup)
            .iter()
            .enumerate()
            .filter_map(|(i, spec)| {
                let origin = format!("fallback_providers[{i}]");
                match self.endpoint(spec, &origin) {
                    Ok(mut f) => {
                        f.connect_timeout = primary.connect_timeout;
                        f.request_timeout = primary.request_timeout;
                        f.idle_timeout = primary.idle_timeout;
                        f.max_retries = primary.max_retries;
                        f.retry_base_delay = primary.retry_base_delay;
                        Some(f)
                    }
                    Err(e) => {
                        tracing::warn!(
                            "{origin} ({} {}) is skipped: {}",
                            spec.provider,
                            spec.model,
                            hermes_errors::one_line(&e)
                        );
                        None
                    }
                }
            })
            .filter(|f| f.base_url.starts_with("http://") || f.base_url.starts_with("https://"))
            .collect()
    }
}

/// The known provider `model.provider` names: `Some` for a known name and for `auto` (the
/// first known provider whose key is set, else OpenAI), `None` for another valid name.
fn provider_kind<'a>(
    provider: Option<&str>,
    get_env: &dyn Fn(&str) -> Option<&'a str>,
) -> Result<Option<KnownProvider>, Error> {
    match provider.map(str::trim).filter(|p| !p.is_empty()) {
        None => Ok(auto_provider(get_env)),
        Some(p) if p.eq_ignore_ascii_case("auto") => Ok(auto_provider(get_env)),
        // Its address is `model.base_url`, which is then required.
        Some(p) if is_custom(p) => Ok(None),
        Some(p) => match key_owner(p) {
            Some(known) => Ok(Some(known)),
            None if p
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
            {
                Ok(None)
            }
            None => Err(Error::InvalidSetting {
                key: "model.provider".into(),
                value: p.into(),
                reason: "use a provider name such as `openai` or `openrouter`".into(),
            }),
        },
    }
}

/// The first `${NAME}` (or `${env:NAME}`) left in an expanded value: `expand_vars` keeps a
/// reference to an unset variable as written, so what remains names one that is not set.
fn unexpanded_var(expanded: &str) -> Option<String> {
    let first = std::cell::RefCell::new(None::<String>);
    expand_vars(expanded, &|name| {
        first.borrow_mut().get_or_insert_with(|| name.to_string());
        None
    });
    first.into_inner()
}

/// `auto`: the first known provider whose key is set, else the first known one (OpenAI).
fn auto_provider<'a>(get_env: &dyn Fn(&str) -> Option<&'a str>) -> Option<KnownProvider> {
    known_providers()
        .find(|p| get_env(p.key_var).is_some())
        .or_else(|| known_providers().next())
}

/// Secrets show as `<redacted>` so settings can be logged with `{:?}`.
fn redact(key: Option<&String>) -> Option<&'static str> {
    key.map(|_| "<redacted>")
}

impl std::fmt::Debug for GatewaySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewaySettings")
            .field("profile", &self.profile)
            .field("home", &self.home)
            .field(
                "soul",
                &self.soul.as_ref().map(|s| format!("<{} bytes>", s.len())),
            )
            .field("host", &self.host)
            .field("port", &self.port)
            .field("api_key", &redact(self.api_key.as_ref()))
            .field("api_server", &self.api_server)
            .field("provider", &self.provider)
            .field("state_db", &self.state_db)
            .field("lock_path", &self.lock_path)
            .field("replace", &self.replace)
            .field("replace_timeout", &self.replace_timeout)
            .field("handover_from", &self.handover_from)
            .field("drain_timeout", &self.drain_timeout)
            .field("connection_limits", &self.connection_limits)
            .field("notify_socket", &self.notify_socket)
            .field("argv", &self.argv)
            .field("multiplex", &self.multiplex)
            .finish()
    }
}

/// A whole number of at least 1 (a count or seconds).
fn parse_at_least_one<T: std::str::FromStr + From<u8> + PartialOrd>(
    key: &str,
    value: &str,
) -> Result<T, Error> {
    let n: T = parse_num(key, value)?;
    if n < T::from(1) {
        return Err(Error::InvalidSetting {
            key: key.into(),
            value: value.into(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(n)
}

fn parse_num<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, Error> {
    value.parse().map_err(|_| Error::InvalidSetting {
        key: key.into(),
        value: value.into(),
        reason: "not a valid number in range".into(),
    })
}

/// True for `localhost` and loopback IP literals (`127.0.0.0/8`, `::1`). Everything else,
/// including `0.0.0.0` and host names, counts as reachable from outside.
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim().trim_start_matches('[').trim_end_matches(']');
    if h.eq_ignore_ascii_case("localhost") {
        return true;
    }
    h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn cfg(yaml: &str) -> Config {
        Config::parse(Path::new("config.yaml"), yaml).unwrap()
    }

    fn none() -> Config {
        cfg("")
    }

    #[test]
    fn an_api_key_naming_an_unset_variable_is_refused_not_sent_as_text() {
        let config = cfg(
            "model:\n  default: m\n  base_url: http://127.0.0.1:1/v1\n  api_key: ${LOCAL_KEY}\nfallback_providers:\n  - provider: custom\n    model: f\n    base_url: http://127.0.0.1:2/v1\n    api_key: ${env:FALLBACK_KEY}\n",
        );
        let err =
            GatewaySettings::resolve("p", Path::new("/h"), None, &config, &map(&[])).unwrap_err();
        let Error::InvalidSetting { key, value, reason } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(
            (key.as_str(), value.as_str()),
            ("model.api_key", "${LOCAL_KEY}")
        );
        assert!(
            reason.contains("set `LOCAL_KEY` in the profile's `.env`"),
            "{reason}"
        );
        assert!(matches!(err, Error::InvalidSetting { .. }), "{err}");

        // Set, it is the key; the fallback whose variable is unset is skipped, never sent.
        let s = GatewaySettings::resolve(
            "p",
            Path::new("/h"),
            None,
            &config,
            &map(&[("LOCAL_KEY", "sk-local")]),
        )
        .unwrap();
        let p = s.provider.unwrap();
        assert_eq!(p.api_key.as_deref(), Some("sk-local"));
        assert!(p.fallbacks.is_empty(), "{:?}", p.fallbacks);
        assert_eq!(unexpanded_var("sk-${A}-${B}").as_deref(), Some("A"));
        assert_eq!(unexpanded_var("sk-plain $A ${open"), None);
    }

    #[test]
    fn resolve_defaults() {
        let s =
            GatewaySettings::resolve("work", Path::new("/h"), None, &none(), &map(&[])).unwrap();
        assert_eq!(s.host, "127.0.0.1");
        assert_eq!(s.port, default_port("work"));
        assert!(s.provider.is_none());
        assert_eq!(s.state_db, Path::new("/h/state.db"));
        assert_eq!(s.lock_path, Path::new("/h/gateway.lock"));
    }

    #[test]
    fn resolve_reads_env_and_config() {
        let config = cfg(
            "model:\n  default: gpt-x\n  base_url: http://127.0.0.1:1/v1/\n  timeout: 7\nagent:\n  api_max_retries: 1\ngateway:\n  drain_timeout: 4\n",
        );
        let env = map(&[
            ("API_SERVER_PORT", "9999"),
            ("API_SERVER_KEY", "k-0123456789abcdef"),
            ("API_SERVER_HOST", "0.0.0.0"),
            ("OPENAI_API_KEY", "sk-1"),
        ]);
        let s = GatewaySettings::resolve("p", Path::new("/h"), Some("soul".into()), &config, &env)
            .unwrap();
        assert_eq!(s.port, 9999);
        assert_eq!(s.host, "0.0.0.0");
        assert_eq!(s.drain_timeout, Duration::from_secs(4));
        let p = s.provider.unwrap();
        assert_eq!(p.model, "gpt-x");
        assert_eq!(p.base_url, "http://127.0.0.1:1/v1");
        assert_eq!(
            p.api_key, None,
            "OPENAI_API_KEY never goes to a local server"
        );
        assert_eq!(
            p.withheld_key.map(|w| w.var).as_deref(),
            Some("OPENAI_API_KEY")
        );
        assert_eq!(p.request_timeout, Duration::from_secs(7));
        assert_eq!(p.max_retries, 1);
    }

    #[test]
    fn precedence_env_for_server_config_for_model() {
        let config = cfg(
            "model:\n  default: m\n  api_key: from-config\n  base_url: http://config\nplatforms:\n  api_server:\n    extra:\n      port: 9001\n",
        );
        let env = map(&[
            ("OPENAI_API_KEY", "from-env"),
            ("OPENAI_BASE_URL", "http://env"),
            ("API_SERVER_PORT", "9002"),
            ("NOTIFY_SOCKET", "@n"),
        ]);
        let s = GatewaySettings::resolve("p", Path::new("/h"), None, &config, &env).unwrap();
        assert_eq!(s.port, 9002, "env wins for the server's own settings");
        assert_eq!(s.notify_socket.as_deref(), Some("@n"));
        let p = s.provider.unwrap();
        assert_eq!(
            p.api_key.as_deref(),
            Some("from-config"),
            "config.yaml wins for the model"
        );
        assert_eq!(p.base_url, "http://config");
        let s =
            GatewaySettings::resolve("p", Path::new("/h"), None, &cfg("model: m\n"), &env).unwrap();
        let p = s.provider.unwrap();
        assert_eq!(p.base_url, "http://env");
        assert_eq!(p.api_key, None, "OPENAI_API_KEY is only sent to OpenAI");
        let env = map(&[
            ("OPENAI_API_KEY", "from-env"),
            ("OPENAI_BASE_URL", "https://eu.api.openai.com/v1"),
        ]);
        let s =
            GatewaySettings::resolve("p", Path::new("/h"), None, &cfg("model: m\n"), &env).unwrap();
        let p = s.provider.unwrap();
        assert_eq!(p.base_url, "https://eu.api.openai.com/v1");
        assert_eq!(p.api_key.as_deref(), Some("from-env"));
        let port = GatewaySettings::resolve(
            "p",
            Path::new("/h"),
            None,
            &cfg("platforms: {api_server: {extra: {port: 9001}}}\n"),
            &map(&[]),
        )
        .unwrap();
        assert_eq!(
            port.port, 9001,
            "the config's port when the environment has none"
        );
    }

    #[test]
    fn var_references_in_config_come_from_the_env_map() {
        let config = cfg("model:\n  default: m\n  api_key: ${MY_KEY}\n");
        let s = GatewaySettings::resolve(
            "p",
            Path::new("/h"),
            None,
            &config,
            &map(&[("MY_KEY", "sk-ref")]),
        )
        .unwrap();
        assert_eq!(s.provider.unwrap().api_key.as_deref(), Some("sk-ref"));
    }

    #[test]
    fn the_provider_decides_the_key_variable_and_address() {
        let env = map(&[
            ("OPENROUTER_API_KEY", "or-key"),
            ("TOGETHER_API_KEY", "tg-key"),
        ]);
        let resolve =
            |yaml: &str| GatewaySettings::resolve("p", Path::new("/h"), None, &cfg(yaml), &env);
        let p = resolve("model: {default: m, provider: openrouter}\n")
            .unwrap()
            .provider
            .unwrap();
        assert_eq!(
            (p.api_key.as_deref(), p.base_url.as_str()),
            (Some("or-key"), "https://openrouter.ai/api/v1")
        );
        // `auto` picks the first known provider whose key is set.
        let p = resolve("model: {default: m, provider: auto}\n")
            .unwrap()
            .provider
            .unwrap();
        assert_eq!(p.base_url, "https://openrouter.ai/api/v1");
        // Another provider: `<NAME>_API_KEY`, and its address must be given.
        let p = resolve("model: {default: m, provider: together, base_url: 'http://t/v1'}\n")
            .unwrap()
            .provider
            .unwrap();
        assert_eq!(p.api_key.as_deref(), Some("tg-key"));
        let err = resolve("model: {default: m, provider: together}\n").unwrap_err();
        assert!(
            matches!(err, Error::InvalidSetting { .. })
                && err.to_string().contains("model.base_url"),
            "{err}"
        );
        assert!(matches!(
            resolve("model: {default: m, provider: 'a b'}\n").unwrap_err(),
            Error::InvalidSetting { .. }
        ));
    }

    /// (key sent, where it came from, variable withheld).
    type Chosen = (Option<String>, Option<String>, Option<String>);

    /// `choose_provider_key` with `env`, no `model.api_key`.
    fn choose(provider: Option<&str>, base_url: &str, env: &[(&str, &str)]) -> Chosen {
        let env = map(env);
        let get = |k: &str| env.get(k).map(String::as_str).filter(|v| !v.is_empty());
        let k = choose_provider_key(provider, base_url, None, &get);
        (k.key, k.source, k.withheld.map(|w| w.var))
    }

    fn sent(key: &str, var: &str) -> Chosen {
        (Some(key.into()), Some(var.into()), None)
    }

    fn withheld(var: &str) -> Chosen {
        (None, None, Some(var.into()))
    }

    const ALL_KEYS: &[(&str, &str)] = &[
        ("OPENAI_API_KEY", "sk-oa"),
        ("OPENROUTER_API_KEY", "sk-or"),
        ("DEEPSEEK_API_KEY", "sk-ds"),
        ("TOGETHER_API_KEY", "sk-tg"),
    ];

    #[test]
    fn known_keys_go_only_to_their_own_https_hosts() {
        let cases: &[(&str, &str, Chosen)] = &[
            (
                "openai",
                "https://api.openai.com/v1",
                sent("sk-oa", "OPENAI_API_KEY"),
            ),
            (
                "openai",
                "https://eu.api.openai.com/v1",
                sent("sk-oa", "OPENAI_API_KEY"),
            ),
            (
                "openai",
                "https://API.OpenAI.com:443/v1",
                sent("sk-oa", "OPENAI_API_KEY"),
            ),
            (
                "openai",
                "http://api.openai.com/v1",
                withheld("OPENAI_API_KEY"),
            ),
            (
                "openai",
                "http://127.0.0.1:8080/v1",
                withheld("OPENAI_API_KEY"),
            ),
            (
                "openai",
                "https://api.openai.com.evil.test/v1",
                withheld("OPENAI_API_KEY"),
            ),
            (
                "openai",
                "https://evilopenai.com/v1",
                withheld("OPENAI_API_KEY"),
            ),
            (
                "openai",
                "https://evil.test/api.openai.com/v1",
                withheld("OPENAI_API_KEY"),
            ),
            (
                "openai",
                "https://api.openai.com@evil.test/v1",
                withheld("OPENAI_API_KEY"),
            ),
            (
                "openai",
                "https://openrouter.ai/api/v1",
                withheld("OPENAI_API_KEY"),
            ),
            (
                "openrouter",
                "https://openrouter.ai/api/v1",
                sent("sk-or", "OPENROUTER_API_KEY"),
            ),
            (
                "openrouter",
                "https://proxy.example/v1",
                withheld("OPENROUTER_API_KEY"),
            ),
            (
                "deepseek",
                "https://api.deepseek.com/v1",
                sent("sk-ds", "DEEPSEEK_API_KEY"),
            ),
            (
                "deepseek",
                "https://api.openai.com/v1",
                withheld("DEEPSEEK_API_KEY"),
            ),
            (
                "DeepSeek",
                "http://localhost:11434/v1",
                withheld("DEEPSEEK_API_KEY"),
            ),
            // Another name: its own `<NAME>_API_KEY`, at the address given for it.
            (
                "together",
                "https://api.together.xyz/v1",
                sent("sk-tg", "TOGETHER_API_KEY"),
            ),
            (
                "together",
                "http://127.0.0.1:9/v1",
                sent("sk-tg", "TOGETHER_API_KEY"),
            ),
            // `custom`: the endpoint at `base_url`, like `auto` there.
            (
                "custom",
                "http://127.0.0.1:9/v1",
                withheld("OPENAI_API_KEY"),
            ),
        ];
        for (provider, url, want) in cases {
            assert_eq!(
                &choose(Some(provider), url, ALL_KEYS),
                want,
                "{provider} -> {url}"
            );
        }
    }

    /// The keys the routing rule confines are exactly those of hermes-home's provider rows
    /// with an endpoint, in `auto`'s order; giving another row an endpoint is a change of this
    /// rule and must show up here.
    #[test]
    fn the_known_providers_are_the_provider_tables_rows_with_an_endpoint() {
        let known: Vec<_> = known_providers()
            .map(|p| (p.name, p.key_var, p.base_url, p.domain))
            .collect();
        assert_eq!(
            known,
            [
                (
                    "openai",
                    "OPENAI_API_KEY",
                    "https://api.openai.com/v1",
                    "openai.com"
                ),
                (
                    "openrouter",
                    "OPENROUTER_API_KEY",
                    "https://openrouter.ai/api/v1",
                    "openrouter.ai"
                ),
                (
                    "deepseek",
                    "DEEPSEEK_API_KEY",
                    "https://api.deepseek.com/v1",
                    "deepseek.com"
                ),
            ]
        );
        // A row without an endpoint is another name: its variable, at the address given.
        let env = [("GEMINI_API_KEY", "sk-gm"), ("OPENAI_API_KEY", "sk-oa")];
        assert_eq!(
            choose(Some("gemini"), "http://127.0.0.1:9/v1", &env),
            sent("sk-gm", "GEMINI_API_KEY")
        );
        assert!(known_provider("gemini").is_none());
        assert_eq!(known_provider("DeepSeek").unwrap().domain, "deepseek.com");
    }

    #[test]
    fn auto_takes_the_key_of_the_host_it_talks_to() {
        for provider in [None, Some("auto"), Some("AUTO"), Some("  ")] {
            let c = |url: &str| choose(provider, url, ALL_KEYS);
            assert_eq!(
                c("https://api.openai.com/v1"),
                sent("sk-oa", "OPENAI_API_KEY")
            );
            assert_eq!(
                c("https://openrouter.ai/api/v1"),
                sent("sk-or", "OPENROUTER_API_KEY")
            );
            assert_eq!(
                c("https://api.deepseek.com/v1"),
                sent("sk-ds", "DEEPSEEK_API_KEY")
            );
            // Anywhere else: nothing, and the first known key that was set is named.
            assert_eq!(c("http://127.0.0.1:11434/v1"), withheld("OPENAI_API_KEY"));
            assert_eq!(
                c("https://llm.internal.example/v1"),
                withheld("OPENAI_API_KEY")
            );
            assert_eq!(c("https://api.together.xyz/v1"), withheld("OPENAI_API_KEY"));
        }
        // The host's provider has no key: another provider's key is still not sent.
        let env = [("OPENAI_API_KEY", "sk-oa")];
        assert_eq!(
            choose(None, "https://openrouter.ai/api/v1", &env),
            withheld("OPENAI_API_KEY")
        );
        let env = [("OPENROUTER_API_KEY", "sk-or")];
        assert_eq!(
            choose(None, "http://127.0.0.1:1/v1", &env),
            withheld("OPENROUTER_API_KEY")
        );
        // No key at all: nothing sent, nothing to warn about.
        assert_eq!(
            choose(None, "http://127.0.0.1:1/v1", &[]),
            (None, None, None)
        );
    }

    /// `provider: custom` is what it is to the original (hermes_cli/runtime_provider.py,
    /// `_resolve_openrouter_runtime`): the OpenAI-compatible endpoint at `model.base_url`,
    /// with `model.api_key`, else only a key gated on the endpoint's own host; its local
    /// aliases (`ollama`, `llama.cpp`, ...) mean the same (hermes_cli/auth.py).
    #[test]
    fn custom_is_the_openai_compatible_endpoint_at_base_url() {
        let env = [("CUSTOM_API_KEY", "sk-custom"), ("OPENAI_API_KEY", "sk-oa")];
        // No `CUSTOM_API_KEY`: the original has no such variable.
        assert_eq!(
            choose(Some("custom"), "https://llm.example/v1", &env),
            withheld("OPENAI_API_KEY")
        );
        assert_eq!(
            choose(
                Some("llama.cpp"),
                "http://127.0.0.1:8080/v1",
                &[("CUSTOM_API_KEY", "k")]
            ),
            (None, None, None)
        );
        // At OpenAI's own address, OpenAI's key (the original's host gate does the same).
        assert_eq!(
            choose(Some("custom"), "https://api.openai.com/v1", &env),
            sent("sk-oa", "OPENAI_API_KEY")
        );
        for provider in [
            "custom",
            "Custom",
            "ollama",
            "vllm",
            "llamacpp",
            "llama.cpp",
            "llama-cpp",
        ] {
            let s = GatewaySettings::resolve(
                "p",
                Path::new("/h"),
                None,
                &cfg(&format!(
                    "model:\n  default: m\n  provider: {provider}\n  base_url: http://127.0.0.1:8080/v1/\n  api_key: sk-mine\n"
                )),
                &map(&env),
            )
            .unwrap();
            let p = s.provider.unwrap();
            assert_eq!(
                (p.base_url.as_str(), p.api_key.as_deref(), p.withheld_key),
                ("http://127.0.0.1:8080/v1", Some("sk-mine"), None),
                "{provider}"
            );
        }
        // Without `base_url` there is no endpoint: a configuration error naming the key.
        let err = match GatewaySettings::resolve(
            "p",
            Path::new("/h"),
            None,
            &cfg("model:\n  default: m\n  provider: custom\n"),
            &map(&env),
        ) {
            Err(e) => e,
            Ok(_) => panic!("custom without base_url resolved"),
        };
        assert!(
            matches!(&err, Error::InvalidSetting { key, .. } if key == "model.base_url"),
            "{err:?}"
        );
    }

    #[test]
    fn the_configured_key_goes_to_the_configured_endpoint() {
        let env = map(ALL_KEYS);
        let get = |k: &str| env.get(k).map(String::as_str);
        for (provider, url) in [
            (None, "http://127.0.0.1:1/v1"),
            (Some("openai"), "http://127.0.0.1:1/v1"),
            (Some("openai"), "https://api.openai.com/v1"),
            (Some("custom"), "https://llm.example/v1"),
        ] {
            let k = choose_provider_key(provider, url, Some("sk-mine"), &get);
            assert_eq!(k.key.as_deref(), Some("sk-mine"), "{provider:?} {url}");
            assert_eq!(k.source.as_deref(), Some("model.api_key"));
            assert_eq!(k.withheld, None);
        }
        // A blank `model.api_key` counts as unset.
        let k = choose_provider_key(None, "http://127.0.0.1:1/v1", Some("  "), &get);
        assert_eq!(
            (k.key, k.withheld.map(|w| w.var)),
            (None, Some("OPENAI_API_KEY".into()))
        );
    }

    #[test]
    fn resolve_routes_keys_by_destination() {
        let resolve = |yaml: &str, env: &[(&str, &str)]| {
            GatewaySettings::resolve("p", Path::new("/h"), None, &cfg(yaml), &map(env))
                .unwrap()
                .provider
                .unwrap()
        };
        // auto + a local base_url: OPENAI_API_KEY is withheld, with a reason naming the fix.
        let p = resolve(
            "model: {default: m, base_url: 'http://127.0.0.1:8080/v1'}\n",
            &[("OPENAI_API_KEY", "sk-oa")],
        );
        assert_eq!(p.api_key, None);
        let w = p.withheld_key.unwrap();
        assert_eq!(w.var, "OPENAI_API_KEY");
        assert!(
            w.reason.contains("model.api_key") && w.reason.contains("127.0.0.1:8080"),
            "{}",
            w.reason
        );
        assert!(
            !w.reason.contains("sk-oa"),
            "the reason never shows the key"
        );
        // The endpoint's own key, by reference.
        let p = resolve(
            "model: {default: m, base_url: 'http://127.0.0.1:8080/v1', api_key: '${LOCAL_KEY}'}\n",
            &[("OPENAI_API_KEY", "sk-oa"), ("LOCAL_KEY", "sk-local")],
        );
        assert_eq!(
            (p.api_key.as_deref(), p.withheld_key),
            (Some("sk-local"), None)
        );
        // auto + OpenRouter's address: OpenRouter's key, although OPENAI_API_KEY comes first.
        let p = resolve(
            "model: {default: m, base_url: 'https://openrouter.ai/api/v1'}\n",
            &[("OPENAI_API_KEY", "sk-oa"), ("OPENROUTER_API_KEY", "sk-or")],
        );
        assert_eq!(p.api_key.as_deref(), Some("sk-or"));
        // A known provider without base_url: its own address and key.
        let p = resolve(
            "model: {default: m, provider: deepseek}\n",
            &[("OPENAI_API_KEY", "sk-oa"), ("DEEPSEEK_API_KEY", "sk-ds")],
        );
        assert_eq!(
            (p.base_url.as_str(), p.api_key.as_deref()),
            ("https://api.deepseek.com/v1", Some("sk-ds"))
        );
    }

    #[test]
    fn anthropic_is_recognised_by_name_host_or_proxy_path() {
        use crate::provider::ApiKind::*;
        for (provider, url, want) in [
            ("anthropic", "https://api.anthropic.com", AnthropicMessages),
            (
                "Anthropic",
                "http://127.0.0.1:1/anthropic",
                AnthropicMessages,
            ),
            ("custom", "https://api.anthropic.com/v1", AnthropicMessages),
            ("custom", "https://gw.example/anthropic/", AnthropicMessages),
            (
                "custom",
                "https://api.anthropic.com.evil.test/v1",
                ChatCompletions,
            ),
            (
                "openrouter",
                "https://openrouter.ai/api/v1",
                ChatCompletions,
            ),
        ] {
            assert_eq!(api_kind(provider, url), want, "{provider} {url}");
        }
        for (url, ok) in [
            ("https://api.anthropic.com", true),
            ("https://eu.claude.com/v1", true),
            ("https://x.services.ai.azure.com/anthropic", true),
            ("http://127.0.0.1:9/anthropic", true),
            ("https://openrouter.ai/api/v1", false),
            ("not a url", false),
        ] {
            assert_eq!(anthropic_url_ok(url), ok, "{url}");
        }
    }

    #[test]
    fn a_pooled_key_goes_to_its_providers_domain_or_the_origin_it_was_stored_for() {
        let openai = known_provider("openai").unwrap();
        assert!(pooled_key_may_go(
            Some(&openai),
            None,
            "https://api.openai.com/v1"
        ));
        assert!(!pooled_key_may_go(
            Some(&openai),
            Some("http://127.0.0.1:9/v1"),
            "http://127.0.0.1:9/v1"
        ));
        let stored = Some("https://api.together.xyz/v1");
        assert!(pooled_key_may_go(
            None,
            stored,
            "https://api.together.xyz/v2/"
        ));
        assert!(!pooled_key_may_go(
            None,
            stored,
            "http://api.together.xyz/v1"
        ));
        assert!(!pooled_key_may_go(
            None,
            stored,
            "https://api.together.xyz:8443/v1"
        ));
        assert!(!pooled_key_may_go(None, stored, "https://evil.test/v1"));
        assert!(pooled_key_may_go(
            None,
            Some(" "),
            "https://anywhere.test/v1"
        ));
        assert!(pooled_key_may_go(None, None, "https://anywhere.test/v1"));
    }

    #[test]
    fn connection_limits_default_and_come_from_the_gateway_section() {
        let s = GatewaySettings::resolve("p", Path::new("/h"), None, &none(), &map(&[])).unwrap();
        assert_eq!(s.connection_limits, ConnectionLimits::default());
        assert_eq!(s.connection_limits.max_connections, 512);
        assert_eq!(s.connection_limits.header_timeout, Duration::from_secs(10));
        assert_eq!(s.connection_limits.idle_timeout, Duration::from_secs(60));
        let config = cfg("gateway: {max_connections: 64, header_timeout: 5, idle_timeout: 30}\n");
        let s = GatewaySettings::resolve("p", Path::new("/h"), None, &config, &map(&[])).unwrap();
        assert_eq!(
            s.connection_limits,
            ConnectionLimits::new(64, Duration::from_secs(5), Duration::from_secs(30))
        );
        for bad in [
            "gateway: {max_connections: 0}\n",
            "gateway: {max_connections: lots}\n",
            "gateway: {header_timeout: 0}\n",
            "gateway: {idle_timeout: -1}\n",
        ] {
            let err = GatewaySettings::resolve("p", Path::new("/h"), None, &cfg(bad), &map(&[]))
                .unwrap_err();
            assert!(
                matches!(err, Error::InvalidSetting { .. }) && err.to_string().contains("gateway."),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn empty_values_count_as_unset() {
        let env = map(&[("API_SERVER_KEY", ""), ("API_SERVER_HOST", "0.0.0.0")]);
        let err = GatewaySettings::resolve("p", Path::new("/h"), None, &none(), &env);
        assert!(matches!(err, Err(Error::UnauthenticatedPublicBind { .. })));
        let s = GatewaySettings::resolve(
            "p",
            Path::new("/h"),
            None,
            &cfg("model: {default: ''}\n"),
            &map(&[]),
        )
        .unwrap();
        assert!(s.provider.is_none());
    }

    #[test]
    fn scalar_model_key_is_accepted() {
        let s = GatewaySettings::resolve("p", Path::new("/h"), None, &cfg("model: m\n"), &map(&[]))
            .unwrap();
        assert_eq!(s.provider.unwrap().base_url, DEFAULT_BASE_URL);
    }

    #[test]
    fn non_loopback_without_key_fails_closed() {
        for host in ["0.0.0.0", "::", "example.org", "192.168.1.2"] {
            let err = GatewaySettings::resolve(
                "p",
                Path::new("/h"),
                None,
                &none(),
                &map(&[("API_SERVER_HOST", host)]),
            )
            .unwrap_err();
            assert!(
                matches!(err, Error::UnauthenticatedPublicBind { .. }),
                "{host}"
            );
        }
        for host in ["127.0.0.1", "::1", "localhost", "127.1.2.3"] {
            let env = map(&[("API_SERVER_HOST", host)]);
            assert!(GatewaySettings::resolve("p", Path::new("/h"), None, &none(), &env).is_ok());
        }
    }

    #[test]
    fn bad_port_is_a_config_error() {
        let err = GatewaySettings::resolve(
            "p",
            Path::new("/h"),
            None,
            &none(),
            &map(&[("API_SERVER_PORT", "70000")]),
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidSetting { .. }), "{err}");
        assert!(err.to_string().contains("API_SERVER_PORT"));
    }

    #[test]
    fn debug_output_hides_secrets() {
        let mut s = GatewaySettings::new("p", "/h");
        s.api_key = Some("gw-secret".into());
        let mut p = ProviderSettings::new("http://x", "m");
        p.api_key = Some("sk-secret".into());
        s.provider = Some(p);
        let text = format!("{s:?}");
        assert!(!text.contains("secret"), "{text}");
        assert!(text.contains("<redacted>"));
    }

    #[test]
    fn ipv6_bind_addr_is_bracketed() {
        let mut s = GatewaySettings::new("p", "/h");
        s.host = "::1".into();
        s.port = 5;
        assert_eq!(s.bind_addr(), "[::1]:5");
    }
}
