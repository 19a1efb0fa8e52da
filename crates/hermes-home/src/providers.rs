//! The model providers Hermes knows by name: the one table.
//!
//! Each row is a `model.provider` value and the variable that holds its key (`hermes dump`
//! lists them all, set or not). A row with an [`Endpoint`] is one the gateway can reach by name
//! alone: it knows the provider's OpenAI-compatible address and the domain its key is confined
//! to. A provider without one is still accepted by the gateway, as any other name is: its key
//! is that same variable, and `model.base_url` must say where to send it.
//!
//! The key-routing rule that reads `key_domain` lives with the code that sends keys
//! (`hermes_gateway_settings::choose_provider_key`): a provider's variable goes only over
//! `https` to its `key_domain` or a subdomain of it. Giving a row an endpoint therefore makes
//! its variable one the gateway withholds from every other address, and adds it to the
//! providers `model.provider: auto` tries (see [`auto_order`]).

/// Where the gateway reaches a provider by name, and where its key may go.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// Its OpenAI-compatible base URL (`/chat/completions` is appended).
    pub base_url: &'static str,
    /// The domain its key variable may be sent to: over `https`, this domain or a subdomain.
    pub key_domain: &'static str,
}

/// A model provider Hermes knows by name.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelProvider {
    /// `model.provider` value, lower case (`openai`); also its label in `hermes dump`.
    pub name: &'static str,
    /// The variable holding its key (`OPENAI_API_KEY`).
    pub key_var: &'static str,
    /// Its address and key domain when the gateway can reach it by name alone.
    pub endpoint: Option<Endpoint>,
}

/// The provider used when none is configured and `auto` finds no key.
pub const DEFAULT_PROVIDER: &str = "openai";

/// OpenAI's base URL: the address used when nothing else is configured.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

const fn row(name: &'static str, key_var: &'static str) -> ModelProvider {
    ModelProvider {
        name,
        key_var,
        endpoint: None,
    }
}

const fn reachable(
    name: &'static str,
    key_var: &'static str,
    base_url: &'static str,
    key_domain: &'static str,
) -> ModelProvider {
    ModelProvider {
        name,
        key_var,
        endpoint: Some(Endpoint {
            base_url,
            key_domain,
        }),
    }
}

/// Every model provider, in the order `hermes dump` lists them (the original's order).
pub const MODEL_PROVIDERS: &[ModelProvider] = &[
    reachable(
        "openrouter",
        "OPENROUTER_API_KEY",
        "https://openrouter.ai/api/v1",
        "openrouter.ai",
    ),
    reachable("openai", "OPENAI_API_KEY", OPENAI_BASE_URL, "openai.com"),
    row("anthropic", "ANTHROPIC_API_KEY"),
    row("nous", "NOUS_API_KEY"),
    row("google", "GOOGLE_API_KEY"),
    row("gemini", "GEMINI_API_KEY"),
    reachable(
        "deepseek",
        "DEEPSEEK_API_KEY",
        "https://api.deepseek.com/v1",
        "deepseek.com",
    ),
    row("minimax", "MINIMAX_API_KEY"),
    row("kimi", "KIMI_API_KEY"),
    row("zai", "ZAI_API_KEY"),
];

/// Names the original (hermes-agent 0.19.0) uses for a row of [`MODEL_PROVIDERS`] under
/// another name, as `(original's name, row name)`. Its `resolve_provider`
/// (`hermes_cli/auth.py`) refuses `openai` ("Unknown provider"): OpenAI's API is `openai-api`
/// in its `PROVIDER_REGISTRY` (key `OPENAI_API_KEY`, `https://api.openai.com/v1`).
pub const ORIGINAL_NAMES: &[(&str, &str)] = &[("openai-api", "openai")];

/// The provider named `name` (case-insensitive, surrounding blanks ignored), by its row name
/// or by the original's name for it ([`ORIGINAL_NAMES`]).
pub fn find(name: &str) -> Option<&'static ModelProvider> {
    let name = name.trim();
    let name = ORIGINAL_NAMES
        .iter()
        .find(|(original, _)| original.eq_ignore_ascii_case(name))
        .map_or(name, |(_, row)| row);
    MODEL_PROVIDERS
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
}

/// The name to write instead of `name` so that the original accepts it (`openai` →
/// `openai-api`); `None` when the original accepts `name` as it is.
pub fn original_name(name: &str) -> Option<&'static str> {
    let name = name.trim();
    ORIGINAL_NAMES
        .iter()
        .find(|(_, row)| row.eq_ignore_ascii_case(name))
        .map(|(original, _)| *original)
}

/// [`DEFAULT_PROVIDER`]'s row.
pub fn default_provider() -> &'static ModelProvider {
    MODEL_PROVIDERS
        .iter()
        .find(|p| p.name == DEFAULT_PROVIDER)
        .unwrap_or(&MODEL_PROVIDERS[0])
}

/// The providers with an [`Endpoint`], in the order `model.provider: auto` tries them: the
/// default provider first, then table order (`openai`, `openrouter`, `deepseek`).
pub fn auto_order() -> impl Iterator<Item = &'static ModelProvider> {
    let default = default_provider();
    std::iter::once(default)
        .chain(
            MODEL_PROVIDERS
                .iter()
                .filter(move |p| p.name != default.name),
        )
        .filter(|p| p.endpoint.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_well_formed() {
        for (i, p) in MODEL_PROVIDERS.iter().enumerate() {
            assert!(
                p.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                p.name
            );
            assert!(
                p.key_var
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                p.key_var
            );
            let later = &MODEL_PROVIDERS[i + 1..];
            assert!(later.iter().all(|q| q.name != p.name), "{} twice", p.name);
            assert!(
                later.iter().all(|q| q.key_var != p.key_var),
                "{} twice",
                p.key_var
            );
            if let Some(e) = p.endpoint {
                let host = e
                    .base_url
                    .strip_prefix("https://")
                    .unwrap()
                    .split('/')
                    .next();
                let host = host.unwrap();
                assert!(
                    host == e.key_domain || host.ends_with(&format!(".{}", e.key_domain)),
                    "{}: {} is not on {}",
                    p.name,
                    e.base_url,
                    e.key_domain
                );
            }
        }
        assert_eq!(
            default_provider().endpoint.unwrap().base_url,
            OPENAI_BASE_URL
        );
    }

    #[test]
    fn auto_tries_the_default_first_then_table_order() {
        let names: Vec<&str> = auto_order().map(|p| p.name).collect();
        assert_eq!(names, ["openai", "openrouter", "deepseek"]);
        assert_eq!(find(" OpenRouter ").unwrap().key_var, "OPENROUTER_API_KEY");
        assert!(find("gemini").unwrap().endpoint.is_none());
        assert!(find("together").is_none());
    }

    #[test]
    fn the_originals_name_for_openai_is_accepted_and_suggested() {
        assert_eq!(find("openai-api").unwrap().name, "openai");
        assert_eq!(find(" OpenAI-API ").unwrap().key_var, "OPENAI_API_KEY");
        assert_eq!(original_name("OpenAI"), Some("openai-api"));
        assert_eq!(original_name("openrouter"), None);
        assert_eq!(original_name("openai-api"), None);
    }
}
