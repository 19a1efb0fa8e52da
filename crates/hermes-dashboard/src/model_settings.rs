//! The model settings of the Profiles page: `model.default`, `model.provider`,
//! `model.base_url`, checked by the gateway's rules before they are written, and the
//! gateway's own settings check of the result.

use hermes_gateway_settings::resolve::{is_custom, key_owner};
use hermes_home::Home;
use hermes_home::config::Config;
use hermes_home::providers;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The form's body: a field left out is left as it is.
#[derive(Debug, Deserialize)]
pub struct ModelBody {
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
}

/// A refused field, with the reason shown next to it.
#[derive(Debug, Serialize)]
pub struct FieldError {
    /// `default`, `provider` or `base_url`.
    pub field: &'static str,
    /// What is wrong, in the gateway's words where it has them.
    pub message: String,
}

/// The three keys as written in `config.yaml` (unexpanded; `model: NAME` is the model).
pub fn current(home: &Home) -> Value {
    match hermes_settings::config_of(home.dir()) {
        Ok(config) => {
            // As written: `${VAR}` is shown, never expanded into the form (and so never
            // written back as the secret it may stand for).
            let text = |key: &str| config.string(key, &|_| None);
            let shorthand = text("model");
            json!({
                "default": shorthand.clone().or_else(|| text("model.default")),
                "provider": text("model.provider"),
                "base_url": text("model.base_url"),
                "shorthand": shorthand.is_some(),
            })
        }
        Err(e) => json!({ "error": hermes_errors::one_line(&e), "hint": e.hint() }),
    }
}

/// The names offered in the provider field: `auto`, `custom`, then every provider Hermes
/// knows (the original's name where it calls one differently).
pub fn provider_names() -> Vec<String> {
    let mut names = vec!["auto".to_string(), "custom".to_string()];
    for p in providers::MODEL_PROVIDERS {
        names.push(
            providers::original_name(p.name)
                .unwrap_or(p.name)
                .to_string(),
        );
    }
    names
}

/// What the gateway says of the profile's settings as they are on disk: the endpoint it
/// would use, or its refusal (which a running gateway logs, keeping its previous settings).
pub fn gateway_check(home: &Home) -> Value {
    match hermes_gateway_settings::read_from_process(home) {
        Ok(settings) => json!({
            "ok": true,
            "endpoint": settings.provider.as_ref().map(|p| p.describe()),
        }),
        Err(e) => json!({
            "ok": false,
            "detail": hermes_errors::one_line(&e),
            "hint": e.hint(),
        }),
    }
}

/// The number of `SOUL.md` characters the gateway sends (its context-file limit for this
/// profile's `config.yaml`; the defaults when the file does not read).
pub fn gateway_soul_limit(home: &Home) -> usize {
    let config = hermes_settings::config_of(home.dir())
        .unwrap_or_else(|_| Config::empty(&home.config_path()));
    hermes_gateway_settings::prompt::context_file_max_chars(&config)
}

/// Checks the form as the gateway reads these keys (`hermes_gateway_settings::resolve`): a provider
/// is `auto`, a known name, `custom` (or a local-server alias) or another plain name, and all
/// but `auto` and the known ones need `model.base_url`; a base URL is `http(s)://…`. Returns
/// the `(key, value)` pairs to write, values trimmed, a known provider under the name the
/// original also accepts (`openai` → `openai-api`).
pub fn validate(home: &Home, body: &ModelBody) -> Result<Vec<(String, String)>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut changes = Vec::new();
    let on_disk = current(home);
    let trimmed = |v: &Option<String>| v.as_deref().map(str::trim).map(str::to_string);
    let default = trimmed(&body.default);
    let provider = trimmed(&body.provider);
    let base_url = trimmed(&body.base_url);
    let effective_url = base_url
        .clone()
        .or_else(|| on_disk["base_url"].as_str().map(|s| s.trim().to_string()));
    if let Some(name) = &default {
        if name.chars().any(char::is_control) {
            errors.push(FieldError {
                field: "default",
                message: "the model name must be one line of text".into(),
            });
        }
        changes.push(("model.default".to_string(), name.clone()));
    }
    if let Some(name) = &provider {
        match provider_rule(name, effective_url.as_deref().unwrap_or("")) {
            Ok(written) => changes.push(("model.provider".to_string(), written)),
            Err(e) => errors.push(e),
        }
    }
    if let Some(url) = &base_url {
        if !url.is_empty()
            && (!(url.starts_with("http://") || url.starts_with("https://"))
                || url.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            errors.push(FieldError {
                field: "base_url",
                message: format!(
                    "`{url}` is not a URL: `model.base_url` must start with `http://` or `https://`"
                ),
            });
        }
        changes.push(("model.base_url".to_string(), url.clone()));
    }
    if errors.is_empty() {
        Ok(changes)
    } else {
        Err(errors)
    }
}

/// The provider value to write, or why the gateway would refuse it.
fn provider_rule(name: &str, base_url: &str) -> Result<String, FieldError> {
    if name.is_empty() || name.eq_ignore_ascii_case("auto") {
        return Ok(name.to_string());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(FieldError {
            field: "provider",
            message: format!(
                "`{name}` is not a provider name: use a provider name such as `openai` or `openrouter`"
            ),
        });
    }
    if !is_custom(name) && key_owner(name).is_some() {
        let written = providers::original_name(name).unwrap_or(name);
        return Ok(written.to_string());
    }
    if base_url.is_empty() {
        return Err(FieldError {
            field: "base_url",
            message: format!(
                "provider `{name}` has no address Hermes knows: set `model.base_url` to its OpenAI-compatible endpoint"
            ),
        });
    }
    Ok(name.to_string())
}

/// `changes` less those that would add an empty key the file does not have (an absent key
/// and an empty one read the same).
pub fn effective_changes(
    home: &Home,
    changes: Vec<(String, String)>,
) -> Result<Vec<(String, String)>, hermes_home::Error> {
    let config = hermes_settings::config_of(home.dir())?;
    Ok(changes
        .into_iter()
        .filter(|(key, value)| !(value.is_empty() && config.raw(key).is_none()))
        .collect())
}
