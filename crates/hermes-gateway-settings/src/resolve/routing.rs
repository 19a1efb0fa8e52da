//! Key routing: which provider key may go where ([`choose_provider_key`], the settings
//! module's "Key routing"), which keys are withheld and why, and whose key a variable is
//! ([`key_owner`]). The policy alone: the settings resolution applies it to each endpoint.

use hermes_home::providers::{self, ModelProvider};

use crate::provider::{ApiKind, WithheldKey};

use super::redact;

/// An OpenAI-compatible provider the gateway reaches by name: a row of
/// [`hermes_home::providers::MODEL_PROVIDERS`] that has an endpoint.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownProvider {
    /// `model.provider` value (`openai`).
    pub name: &'static str,
    /// The variable holding its key (`OPENAI_API_KEY`).
    pub key_var: &'static str,
    /// Its default base URL.
    pub base_url: &'static str,
    /// The domain its key may be sent to (over `https`, the domain or a subdomain of it).
    pub domain: &'static str,
}

/// The known providers, in the order `auto` tries them (`openai`, `openrouter`, `deepseek`).
pub fn known_providers() -> impl Iterator<Item = KnownProvider> {
    providers::auto_order().filter_map(KnownProvider::of)
}

impl KnownProvider {
    fn of(p: &ModelProvider) -> Option<KnownProvider> {
        p.endpoint.map(|e| KnownProvider {
            name: p.name,
            key_var: p.key_var,
            base_url: e.base_url,
            domain: e.key_domain,
        })
    }

    /// True when `base_url` is `https` on this provider's domain (or a subdomain of it): the
    /// only addresses its key variable is sent to.
    pub fn serves(&self, base_url: &str) -> bool {
        let Ok(url) = url::Url::parse(base_url) else {
            return false;
        };
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        url.scheme() == "https"
            && (host == self.domain
                || host
                    .strip_suffix(self.domain)
                    .is_some_and(|rest| rest.ends_with('.')))
    }
}

/// The known provider by `model.provider` name (case-insensitive).
pub fn known_provider(name: &str) -> Option<KnownProvider> {
    providers::find(name).and_then(KnownProvider::of)
}

/// The key a provider request carries, where it came from, and what was withheld.
#[non_exhaustive]
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ProviderKey {
    /// The key to send as `Authorization: Bearer`; `None`: no header.
    pub key: Option<String>,
    /// Where the key came from: `model.api_key` or a variable's name.
    pub source: Option<String>,
    /// A key that was set but must not go to this address.
    pub withheld: Option<WithheldKey>,
}

impl std::fmt::Debug for ProviderKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderKey")
            .field("key", &redact(self.key.as_ref()))
            .field("source", &self.source)
            .field("withheld", &self.withheld)
            .finish()
    }
}

/// Decides which key may be sent to `base_url` (the module doc's key-routing rule).
///
/// `provider` is `model.provider` as configured (`None`, `auto`, a known name or another
/// name), `configured` is `model.api_key`, `get_env` looks a variable up (empty = unset).
pub fn choose_provider_key<'a>(
    provider: Option<&str>,
    base_url: &str,
    configured: Option<&str>,
    get_env: &dyn Fn(&str) -> Option<&'a str>,
) -> ProviderKey {
    if let Some(key) = configured.map(str::trim).filter(|k| !k.is_empty()) {
        return ProviderKey {
            key: Some(key.to_string()),
            source: Some("model.api_key".into()),
            withheld: None,
        };
    }
    let from_var = |var: &str| ProviderKey {
        key: get_env(var).map(str::to_string),
        source: get_env(var).map(|_| var.to_string()),
        withheld: None,
    };
    let withhold = |p: &KnownProvider| {
        get_env(p.key_var).map(|_| ProviderKey {
            key: None,
            source: None,
            withheld: Some(WithheldKey::new(
                p.key_var,
                format!(
                    "`{}` is {}'s key and is only sent over https to {}; the provider URL `{base_url}` is elsewhere, so no key is sent: set `model.api_key` in config.yaml to that endpoint's own key (`${{{}}}` sends this one on purpose)",
                    p.key_var, p.name, p.domain, p.key_var
                ),
            )),
        })
    };
    let name = provider.map(str::trim).filter(|p| !p.is_empty());
    match name {
        None => auto_key(base_url, &from_var, &withhold),
        Some(p) if p.eq_ignore_ascii_case("auto") => auto_key(base_url, &from_var, &withhold),
        // The original's custom endpoint: `model.api_key` (above), else only the key of a
        // provider whose own address `base_url` is — never a `CUSTOM_API_KEY`.
        Some(p) if is_custom(p) => auto_key(base_url, &from_var, &withhold),
        Some(p) => match key_owner(p) {
            Some(known) if known.serves(base_url) => from_var(known.key_var),
            Some(known) => withhold(&known).unwrap_or_default(),
            None => {
                let var = other_key_var(p);
                // Never true for a valid name (known names match first), but a known key
                // must not reach a foreign host through another spelling.
                match known_providers().find(|k| k.key_var == var) {
                    Some(known) if !known.serves(base_url) => withhold(&known).unwrap_or_default(),
                    _ => from_var(&var),
                }
            }
        },
    }
}

/// `model.provider` values that mean "the OpenAI-compatible endpoint at `model.base_url`": the
/// original's `custom` and the local-server aliases its `resolve_provider`
/// (hermes-agent 0.19.0, `hermes_cli/auth.py`) maps to `custom`.
pub const CUSTOM_PROVIDER_NAMES: [&str; 6] = [
    "custom",
    "ollama",
    "vllm",
    "llamacpp",
    "llama.cpp",
    "llama-cpp",
];

/// Whether `name` is `custom` or one of its aliases ([`CUSTOM_PROVIDER_NAMES`]).
pub fn is_custom(name: &str) -> bool {
    let name = name.trim();
    CUSTOM_PROVIDER_NAMES
        .iter()
        .any(|c| c.eq_ignore_ascii_case(name))
}

/// `auto`: the key of the known provider serving `base_url`; anywhere else none, and the first
/// known key that is set is reported as withheld.
pub(super) fn auto_key(
    base_url: &str,
    from_var: &dyn Fn(&str) -> ProviderKey,
    withhold: &dyn Fn(&KnownProvider) -> Option<ProviderKey>,
) -> ProviderKey {
    if let Some(known) = gated_providers().find(|p| p.serves(base_url)) {
        let key = from_var(known.key_var);
        if key.key.is_some() {
            return key;
        }
    }
    gated_providers()
        .filter(|p| !p.serves(base_url))
        .find_map(|p| withhold(&p))
        .unwrap_or_default()
}

/// The key variable of a provider the gateway cannot reach by name alone: its variable in
/// hermes-home's provider table (`GEMINI_API_KEY`), else `<NAME>_API_KEY`.
pub(super) fn other_key_var(name: &str) -> String {
    match providers::find(name) {
        Some(p) => p.key_var.to_string(),
        None => format!("{}_API_KEY", name.to_ascii_uppercase().replace('-', "_")),
    }
}

/// Anthropic's Messages API: its key variable is sent only over `https` to `anthropic.com`
/// (or a subdomain), as the other known providers' keys are.
pub const ANTHROPIC: KnownProvider = KnownProvider {
    name: "anthropic",
    key_var: "ANTHROPIC_API_KEY",
    base_url: "https://api.anthropic.com",
    domain: "anthropic.com",
};

/// Anthropic's variables that hold OAuth tokens (a Claude subscription), which need the
/// original's OAuth request shape: the gateway does not send them, and says so.
pub const ANTHROPIC_OAUTH_VARS: [&str; 2] = ["ANTHROPIC_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"];

/// The provider whose key a name stands for: a [`known_provider`], or [`ANTHROPIC`].
pub fn key_owner(name: &str) -> Option<KnownProvider> {
    known_provider(name).or_else(|| {
        name.trim()
            .eq_ignore_ascii_case(ANTHROPIC.name)
            .then_some(ANTHROPIC)
    })
}

/// Every provider whose key is confined to its own domain: the known providers, then
/// Anthropic.
pub(super) fn gated_providers() -> impl Iterator<Item = KnownProvider> {
    known_providers().chain(std::iter::once(ANTHROPIC))
}

/// The API an endpoint speaks: Anthropic's Messages API for `provider: anthropic`, a base URL
/// on `anthropic.com`, or one ending in `/anthropic` (how Anthropic-compatible proxies expose
/// it, the original's `_detect_api_mode_for_url`); chat completions otherwise.
pub fn api_kind(provider: &str, base_url: &str) -> ApiKind {
    let anthropic = provider.trim().eq_ignore_ascii_case(ANTHROPIC.name)
        || host_of(base_url)
            .is_some_and(|h| h == ANTHROPIC.domain || h.ends_with(".anthropic.com"))
        || base_url.trim_end_matches('/').ends_with("/anthropic");
    if anthropic {
        ApiKind::AnthropicMessages
    } else {
        ApiKind::ChatCompletions
    }
}

/// Whether `provider: anthropic` may use the configured `base_url`: an Anthropic or Claude
/// host, Azure, or a `/anthropic` proxy; any other URL is a stale one left from another
/// provider and Anthropic's own address is used (the original's
/// `_anthropic_base_url_override_ok`).
pub(super) fn anthropic_url_ok(base_url: &str) -> bool {
    let Some(host) = host_of(base_url) else {
        return false;
    };
    host == ANTHROPIC.domain
        || [".anthropic.com", ".claude.com", ".azure.com"]
            .iter()
            .any(|d| host.ends_with(d))
        || base_url.trim_end_matches('/').ends_with("/anthropic")
}

pub(super) fn host_of(url: &str) -> Option<String> {
    url::Url::parse(url)
        .ok()?
        .host_str()
        .map(str::to_ascii_lowercase)
}

/// `scheme://host:port` of a URL, to compare where two URLs send a key.
pub(super) fn origin_of(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    Some(format!(
        "{}://{}:{}",
        u.scheme(),
        u.host_str()?.to_ascii_lowercase(),
        u.port_or_known_default()?
    ))
}

/// Whether a pooled key may go to `dest`: a gated provider's key only to its own domain over
/// `https` (as its variable); another provider's stored key only to the origin it was stored
/// for (its entry's `base_url`), or, when it names none, to the address configured for that
/// provider.
pub fn pooled_key_may_go(
    owner: Option<&KnownProvider>,
    stored_url: Option<&str>,
    dest: &str,
) -> bool {
    if let Some(owner) = owner {
        return owner.serves(dest);
    }
    match stored_url.map(str::trim).filter(|u| !u.is_empty()) {
        Some(u) => origin_of(u).is_some_and(|o| Some(o) == origin_of(dest)),
        None => true,
    }
}
