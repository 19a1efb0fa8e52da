//! `.env` over the process environment: the gateway, `hermes doctor` and `hermes dump` read a
//! profile through one rule (`hermes_home::dotenv`): a `.env` assignment wins even when it is
//! empty, and an empty value counts as unset. So an empty `OPENAI_API_KEY=` in `.env` switches
//! off a key exported in the shell for all three, and `${VAR}` in `config.yaml` expands the
//! same way for all three.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::fs;
use std::path::Path;

use hermes_diag::doctor::{self, Status};
use hermes_diag::dump::{self, SupervisorView};
use hermes_diag::{BuildIdentity, Install};
use hermes_gateway::source::read_profile;
use hermes_home::Home;

/// A default-profile home holding this `.env` and `config.yaml`.
fn home(dir: &Path, env: &str, config: &str) -> Home {
    hermes_home::layout::ensure_skeleton(dir, true, &hermes_home::seeds::KeySeed::Generate)
        .unwrap();
    fs::write(dir.join(".env"), env).unwrap();
    fs::write(dir.join("config.yaml"), config).unwrap();
    Home::select(dir.to_path_buf(), None).unwrap()
}

fn shell(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Whether `dump` reports the variable as set.
fn dump_says_set(home: &Home, process: &[(String, String)], var: &str) -> bool {
    let lookup = |name: &str| {
        process
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let report = dump::collect(
        home,
        &lookup,
        &BuildIdentity::resolve("", None),
        &Install::detect(None),
        SupervisorView::NotRunning,
        dump::AgentView::NotInstalled,
    );
    report.api_keys.iter().find(|k| k.env == var).unwrap().set
}

/// `doctor`'s model row: `Some(name)` when it says a model is configured.
fn doctor_model(home: &Home, process: &[(String, String)]) -> Option<String> {
    let lookup = |name: &str| {
        process
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let checks = doctor::home_checks(home, &BuildIdentity::resolve("", None), &lookup);
    let row = checks
        .iter()
        .find(|c| c.message.contains("model configured"))
        .unwrap();
    (row.status == Status::Ok).then(|| {
        row.message
            .trim_start_matches("model configured: `")
            .trim_end_matches('`')
            .to_string()
    })
}

#[test]
fn an_empty_key_in_env_switches_off_the_shells_key_for_gateway_and_dump() {
    let dir = tempfile::tempdir().unwrap();
    let process = shell(&[("OPENAI_API_KEY", "sk-shell")]);
    let home = home(
        dir.path(),
        "OPENAI_API_KEY=\nOPENROUTER_API_KEY=sk-file\n",
        "model: {default: m}\n",
    );
    let s = read_profile(&home, process.clone()).unwrap().settings;
    let p = s.provider.unwrap();
    // `auto`: OpenAI's key is off, so OpenRouter's is the first one set.
    assert_eq!(
        (p.base_url.as_str(), p.api_key.as_deref()),
        ("https://openrouter.ai/api/v1", Some("sk-file"))
    );
    assert!(!dump_says_set(&home, &process, "OPENAI_API_KEY"));
    assert!(dump_says_set(&home, &process, "OPENROUTER_API_KEY"));

    // Without the empty line, the shell's key is used by both.
    let home = self::home(dir.path(), "", "model: {default: m}\n");
    let p = read_profile(&home, process.clone())
        .unwrap()
        .settings
        .provider
        .unwrap();
    assert_eq!(
        (p.base_url.as_str(), p.api_key.as_deref()),
        ("https://api.openai.com/v1", Some("sk-shell"))
    );
    assert!(dump_says_set(&home, &process, "OPENAI_API_KEY"));
}

#[test]
fn doctor_and_the_gateway_expand_config_variables_alike() {
    let dir = tempfile::tempdir().unwrap();
    let process = shell(&[("MODEL_NAME", "gpt-shell")]);
    let config = "model: {default: '${MODEL_NAME}'}\n";

    // `.env` empties the variable: no model for either.
    let home = home(dir.path(), "MODEL_NAME=\n", config);
    let gateway = read_profile(&home, process.clone()).unwrap().settings;
    assert!(gateway.provider.is_none());
    assert_eq!(doctor_model(&home, &process), None);

    // `.env` sets it: both see the file's value; unset there: both see the shell's.
    for (env, want) in [("MODEL_NAME=gpt-file\n", "gpt-file"), ("", "gpt-shell")] {
        let home = self::home(dir.path(), env, config);
        let gateway = read_profile(&home, process.clone()).unwrap().settings;
        assert_eq!(gateway.provider.unwrap().model, want);
        assert_eq!(doctor_model(&home, &process).as_deref(), Some(want));
    }
}

#[test]
fn a_damaged_env_is_a_configuration_error() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path(), "", "model: {default: m}\n");
    fs::write(dir.path().join(".env"), b"OPENAI_API_KEY=sk-\xff\n").unwrap();
    let err = read_profile(&home, Vec::new()).unwrap_err();
    assert!(err.is_config(), "{err}");
    assert_eq!(err.exit_code(), 78);
    assert!(err.hint().unwrap().contains("line 1"), "{:?}", err.hint());
}

/// The original's `hermes config set API_SERVER_KEY …` writes the key at the top level of
/// `config.yaml`, and its gateway bridges top-level scalars into the environment where nothing
/// sets them: the native gateway takes the same key, below `.env` and the environment, and
/// `doctor` names a key that another place shadows (never its value).
#[test]
fn a_key_at_the_top_of_config_yaml_is_the_gateways_below_env_and_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let top = "API_SERVER_KEY: operator-key-0123456789abcdef\n";
    let key = |env: &str, process: &[(&str, &str)]| {
        let home = home(dir.path(), env, top);
        read_profile(&home, shell(process))
            .unwrap()
            .settings
            .api_key
    };
    assert_eq!(
        key("", &[]).as_deref(),
        Some("operator-key-0123456789abcdef")
    );
    assert_eq!(
        key("", &[("API_SERVER_KEY", "from-the-environment-0123")]).as_deref(),
        Some("from-the-environment-0123")
    );
    assert_eq!(
        key("API_SERVER_KEY=generated-0123456789abcdef\n", &[]).as_deref(),
        Some("generated-0123456789abcdef")
    );
    // Set blank in `.env`: hidden, as the original hides it, and no key at all.
    assert_eq!(key("API_SERVER_KEY=\n", &[]), None);

    let home = home(
        dir.path(),
        "API_SERVER_KEY=generated-0123456789abcdef\n",
        top,
    );
    let checks = doctor::home_checks(&home, &BuildIdentity::resolve("", None), &|_| None);
    let row = checks
        .iter()
        .find(|c| c.message.contains("is not used"))
        .expect("doctor names the shadowed key");
    assert_eq!(row.status, Status::Warn);
    assert!(
        row.message.contains("the top level of `config.yaml`")
            && !row.message.contains("operator-key")
            && !row.message.contains("generated-"),
        "{row:?}"
    );
}
