//! Key routing end to end: settings resolved from a real `config.yaml` text and env map, then
//! a real request to a fake OpenAI-compatible upstream on 127.0.0.1 (a "custom endpoint").
//! What the upstream receives in `Authorization` is the evidence.
//!
//! Contents: a provider's well-known key (`OPENAI_API_KEY`, `OPENROUTER_API_KEY`) never
//! reaches a loopback `base_url` (HTTP gateway and `chat_once`); the key configured for the
//! endpoint (`model.api_key`) is sent; a 401 from the endpoint names the withheld variable.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;

use crate::support::{Upstream, client, echo_of, start};
use hermes_gateway::{Error, GatewaySettings, ShutdownRequest, chat_once};
use hermes_home::config::Config;
use serde_json::json;

/// Settings resolved the way `hermes gateway run` does it, on port 0 with a client key long enough for any key rule.
fn resolved(home: &Path, yaml: &str, env: &[(&str, &str)]) -> GatewaySettings {
    let config = Config::parse(Path::new("config.yaml"), yaml).unwrap();
    let mut env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.insert("API_SERVER_PORT".into(), "0".into());
    env.insert("API_SERVER_KEY".into(), "gw-key-0123456789abcdef".into());
    GatewaySettings::resolve("work", home, None, &config, &env).unwrap()
}

#[tokio::test]
async fn openai_key_is_not_sent_to_a_local_base_url_through_the_gateway() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let yaml = format!(
        "model:\n  default: local-model\n  base_url: {}\n",
        up.base_url()
    );
    let s = resolved(
        home.path(),
        &yaml,
        &[("OPENAI_API_KEY", "sk-openai-must-not-leak")],
    );
    let gw = start(s).await;
    let r = client()
        .post(gw.url("/v1/chat/completions"))
        .header("authorization", "Bearer gw-key-0123456789abcdef")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].authorization, None,
        "the local endpoint must not receive OPENAI_API_KEY"
    );
    gw.stop(ShutdownRequest::Stop).await.unwrap();
}

#[tokio::test]
async fn no_well_known_key_reaches_a_local_base_url_whatever_the_provider_says() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = [
        ("OPENAI_API_KEY", "sk-openai-must-not-leak"),
        ("OPENROUTER_API_KEY", "sk-or-must-not-leak"),
        ("DEEPSEEK_API_KEY", "sk-ds-must-not-leak"),
    ];
    for provider in ["auto", "openai", "openrouter", "deepseek", "custom"] {
        let yaml = format!(
            "model:\n  default: m\n  provider: {provider}\n  base_url: {}\n",
            up.base_url()
        );
        let s = resolved(home.path(), &yaml, &env);
        let answer = chat_once(&s.clone().into(), "q", None, |_| {})
            .await
            .unwrap();
        assert_eq!(answer.text, echo_of("q"));
        let seen = up.seen();
        assert_eq!(
            seen.last().unwrap().authorization,
            None,
            "provider `{provider}` sent a foreign key to {}",
            up.base_url()
        );
    }
    // `OPENAI_BASE_URL` pointing at the local server is no different.
    let base = up.base_url();
    let env = [
        ("OPENAI_API_KEY", "sk-openai-must-not-leak"),
        ("OPENAI_BASE_URL", base.as_str()),
    ];
    let s = resolved(home.path(), "model: m\n", &env);
    chat_once(&s.clone().into(), "q", None, |_| {})
        .await
        .unwrap();
    assert_eq!(up.seen().last().unwrap().authorization, None);
}

#[tokio::test]
async fn the_key_configured_for_the_endpoint_is_sent() {
    let up = Upstream::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = [
        ("OPENAI_API_KEY", "sk-openai"),
        ("LOCAL_LLM_KEY", "sk-local"),
        ("TOGETHER_API_KEY", "sk-together"),
    ];
    let cases = [
        // `model.api_key` by reference, with and without a provider name.
        ("  api_key: ${LOCAL_LLM_KEY}\n", "Bearer sk-local"),
        (
            "  provider: custom\n  api_key: ${LOCAL_LLM_KEY}\n",
            "Bearer sk-local",
        ),
        ("  api_key: literal-key\n", "Bearer literal-key"),
        // Sending OPENAI_API_KEY here is allowed when the user says so.
        ("  api_key: ${OPENAI_API_KEY}\n", "Bearer sk-openai"),
        // Another provider's own `<NAME>_API_KEY` goes to the address given for it.
        ("  provider: together\n", "Bearer sk-together"),
    ];
    for (extra, want) in cases {
        let yaml = format!(
            "model:\n  default: m\n  base_url: {}\n{extra}",
            up.base_url()
        );
        let s = resolved(home.path(), &yaml, &env);
        chat_once(&s.clone().into(), "q", None, |_| {})
            .await
            .unwrap();
        assert_eq!(
            up.seen().last().unwrap().authorization.as_deref(),
            Some(want),
            "{extra}"
        );
    }
}

#[tokio::test]
async fn a_401_from_the_endpoint_names_the_withheld_key() {
    let up = Upstream::start().await;
    *up.state.required_key.lock().unwrap() = Some("sk-openai".into());
    let home = tempfile::tempdir().unwrap();
    let yaml = format!("model:\n  default: m\n  base_url: {}\n", up.base_url());
    let s = resolved(home.path(), &yaml, &[("OPENAI_API_KEY", "sk-openai")]);
    let err = chat_once(&s.clone().into(), "q", None, |_| {})
        .await
        .unwrap_err();
    match &err {
        Error::Provider(hermes_provider::Error::ProviderAuth {
            status: 401,
            withheld_key,
            ..
        }) => assert_eq!(withheld_key.as_deref(), Some("OPENAI_API_KEY")),
        other => panic!("expected ProviderAuth, got {other:?}"),
    }
    let hint = err.hint().unwrap();
    assert!(
        hint.contains("OPENAI_API_KEY") && hint.contains("model.api_key"),
        "{hint}"
    );
    assert_eq!(up.seen()[0].authorization, None);
}
