//! Hand-edited `config.yaml` files that the original (PyYAML's `safe_load`) accepts must start
//! the gateway the same way: a key written twice keeps its last value, merge keys
//! (`<<: *anchor`) are resolved.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;
use std::path::Path;

use hermes_gateway::source::read_profile;
use hermes_home::Home;

fn home(dir: &Path, config: &str) -> Home {
    hermes_home::layout::ensure_skeleton(dir, true, &hermes_home::seeds::KeySeed::Generate)
        .unwrap();
    fs::write(dir.join("config.yaml"), config).unwrap();
    Home::select(dir.to_path_buf(), None).unwrap()
}

#[test]
fn a_duplicate_key_is_not_fatal_and_the_last_value_wins() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(
        dir.path(),
        "model:\n  default: first\n  base_url: http://127.0.0.1:9/v1\nmodel:\n  default: last\n  base_url: http://127.0.0.1:8/v1\n",
    );
    let p = read_profile(&home, Vec::new())
        .unwrap()
        .settings
        .provider
        .unwrap();
    assert_eq!(p.model, "last");
    assert_eq!(p.base_url, "http://127.0.0.1:8/v1");
}

#[test]
fn a_merge_key_supplies_the_model_section() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(
        dir.path(),
        "x-local: &local\n  default: llama3\n  base_url: http://127.0.0.1:11434/v1\n  api_key: sk-local\nmodel:\n  <<: *local\n  default: qwen\n",
    );
    let p = read_profile(&home, Vec::new())
        .unwrap()
        .settings
        .provider
        .unwrap();
    assert_eq!(p.model, "qwen");
    assert_eq!(p.base_url, "http://127.0.0.1:11434/v1");
    assert_eq!(p.api_key.as_deref(), Some("sk-local"));
}

/// The original's name for OpenAI's API (`openai-api`; it refuses `openai`) reaches OpenAI
/// with `OPENAI_API_KEY`, as `openai` does.
#[test]
fn the_originals_openai_api_name_is_openai() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path(), "model:\n  default: m\n  provider: openai-api\n");
    let p = read_profile(
        &home,
        vec![("OPENAI_API_KEY".to_string(), "sk-oa".to_string())],
    )
    .unwrap()
    .settings
    .provider
    .unwrap();
    assert_eq!(p.base_url, "https://api.openai.com/v1");
    assert_eq!(p.api_key.as_deref(), Some("sk-oa"));
}
