//! `hermes config`: read and change a profile's `config.yaml` as hermes-agent's `hermes
//! config` does, so scripts written for the original keep working.
//!
//! * `get KEY [--json]`, `set KEY VALUE [--force]`, `unset KEY`, `path`, `env-path` and `edit`
//!   are ours; `show` (and bare `hermes config`), `check` and `migrate` describe the
//!   original's schema and defaults and are handed over to it (`commands::handoff`).
//! * Keys are dotted paths (`model.default`); a key without a dot that names a secret
//!   (`OPENROUTER_API_KEY`, `*_API_KEY`, `*_TOKEN`, `TERMINAL_SSH*`) lives in `.env`, as in the
//!   original. A variable the gateway reads (`API_SERVER_KEY`, `API_SERVER_PORT`, …:
//!   `hermes_settings::GATEWAY_VARIABLES`) is read where the gateway reads it — `.env`, the
//!   environment, the top level of `config.yaml` — and shown with where it came from (a
//!   secret masked); `set` writes it where the value in force is, else to `.env`.
//! * `set` reads VALUE as the original does: `true|yes|on` and `false|no|off` are booleans,
//!   digits an integer, digits with one dot a float, anything else a string — except where the
//!   file already holds a string there, which stays a string (`approvals.mode off`).
//! * Every write goes through the byte-preserving editor under `config.yaml.lock`
//!   (`hermes_home::config::Config::edit`): only the key changes, the mode and the owner stay.
//! * `edit` works like `visudo`: the editor gets a copy; only a copy that parses replaces the
//!   file (and only if nobody changed the file meanwhile); a broken copy is reported with its
//!   line, and on a terminal the editor is offered again, otherwise it is kept next to the file.

use std::path::{Path, PathBuf};

use hermes_home::Home;
use hermes_home::config::Config;
use hermes_home::config_file::{self, Replaced};
use hermes_home::dotenv::DotEnv;
use hermes_home::yaml_edit;
use hermes_settings::{ProfileFiles, Scope, Source};
use yaml_serde::Value;

use crate::cli::ConfigCommand;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

use super::{handoff, prompt};

/// `hermes config <sub>`; `None` is bare `hermes config`, the original's `show`.
pub fn run(ctx: &Context, command: Option<ConfigCommand>) -> CommandResult {
    let Some(command) = command else {
        return Err(hand_over("hermes config"));
    };
    let home = ctx.home()?;
    match command {
        ConfigCommand::Path => path_line(&home.config_path()),
        ConfigCommand::EnvPath => path_line(&home.env_path()),
        ConfigCommand::Get { key, json } => get(&home, &key, json),
        ConfigCommand::Set { key, value, .. } => set(&home, &key, &value),
        ConfigCommand::Unset { key } => unset(&home, &key),
        ConfigCommand::Edit => edit(&home.config_path()),
    }
}

/// Hands this invocation over to hermes-agent (exec; returns only on failure).
fn hand_over(what: &str) -> Failure {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    handoff::hand_over(&args, what)
}

fn path_line(path: &Path) -> CommandResult {
    output::stdout(&format!("{}\n", path.display()))?;
    Ok(ExitStatus::Success)
}

/// Whether `key` is one the original keeps in `.env` (its `_is_env_config_key`).
fn is_env_key(key: &str) -> bool {
    const LISTED: &[&str] = &[
        "OPENROUTER_API_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "VOICE_TOOLS_OPENAI_KEY",
        "EXA_API_KEY",
        "PARALLEL_API_KEY",
        "FIRECRAWL_API_KEY",
        "FIRECRAWL_API_URL",
        "FIRECRAWL_GATEWAY_URL",
        "TOOL_GATEWAY_DOMAIN",
        "TOOL_GATEWAY_SCHEME",
        "TOOL_GATEWAY_USER_TOKEN",
        "TAVILY_API_KEY",
        "BROWSERBASE_API_KEY",
        "BROWSERBASE_PROJECT_ID",
        "BROWSER_USE_API_KEY",
        "FAL_KEY",
        "TELEGRAM_BOT_TOKEN",
        "DISCORD_BOT_TOKEN",
        "SUDO_PASSWORD",
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "GITHUB_TOKEN",
        "HONCHO_API_KEY",
    ];
    if key.contains('.') {
        return false;
    }
    let upper = key.to_ascii_uppercase();
    LISTED.contains(&upper.as_str())
        || upper.ends_with("_API_KEY")
        || upper.ends_with("_TOKEN")
        || upper.starts_with("TERMINAL_SSH")
}

fn get(home: &Home, key: &str, json: bool) -> CommandResult {
    if let Some(name) = hermes_settings::gateway_variable(key) {
        return get_variable(home, name, json);
    }
    let files = profile_files(home)?;
    let var = files.lookup();
    let value = if is_env_key(key) {
        var(&key.to_ascii_uppercase()).map(Value::from)
    } else {
        files.config().raw(key).map(|value| expanded(value, &var))
    };
    // Not in the file, or a section: hermes-agent knows the defaults that apply (its `get`
    // prints a section merged with them).
    if matches!(value, None | Some(Value::Mapping(_))) && handoff::installed().is_some() {
        return Err(hand_over("hermes config get"));
    }
    let Some(value) = value else {
        return Err(not_set(home, key));
    };
    if json {
        output::json(&value)?;
    } else {
        output::stdout(&format!("{}\n", display_get(&value)))?;
    }
    Ok(ExitStatus::Success)
}

/// The profile's files, as its gateway reads them with this process's environment.
fn profile_files(home: &Home) -> Result<ProfileFiles, Failure> {
    let scope = Scope::of(home.profile().name());
    Ok(ProfileFiles::read(
        home.dir(),
        scope,
        hermes_settings::process_env(),
    )?)
}

/// `config get` of a variable the gateway reads ([`hermes_settings::GATEWAY_VARIABLES`]): the
/// value in force, wherever it is set, with where (a secret masked).
fn get_variable(home: &Home, name: &str, json: bool) -> CommandResult {
    let Some(setting) = profile_files(home)?.var_or_default(name, home.profile().name()) else {
        return Err(Failure::new(
            format!("`{name}` is not set for this profile"),
            Some(format!(
                "set it with `hermes config set {name} VALUE` (written to `{}`, which the gateway reads first)",
                home.env_path().display()
            )),
        ));
    };
    let shown = if hermes_settings::is_secret(name) {
        hermes_home::auth::mask_secret(&setting.value)
    } else {
        setting.value
    };
    if json {
        output::json(&serde_json::json!({"value": shown, "source": setting.source.to_string()}))?;
    } else {
        output::stdout(&format!("{shown}   (from {})\n", setting.source))?;
    }
    Ok(ExitStatus::Success)
}

/// `config set` of a variable the gateway reads: written where the value in force is (`.env`,
/// or the top level of `config.yaml` where the original's `config set` put it), else to
/// `.env`; says so when another place still wins.
fn set_variable(home: &Home, name: &str, raw: &str) -> CommandResult {
    let path = if profile_files(home)?.write_place(name) == Source::ConfigTopLevel {
        let path = home.config_path();
        Config::edit(&path, |config| {
            config.set(name, Value::from(raw));
            Ok(())
        })?;
        path
    } else {
        hermes_home::dotenv::set_var(&home.env_path(), name, raw)?
    };
    let shown = if hermes_settings::is_secret(name) {
        hermes_home::auth::mask_secret(raw)
    } else {
        raw.to_string()
    };
    output::stdout(&format!("✓ Set {name} = {shown} in {}\n", path.display()))?;
    if let Some(winner) = profile_files(home)?
        .var(name)
        .filter(|s| s.value != raw.trim())
    {
        output::stderr(&format!(
            "warning: {name} from {} is still the one in force\n",
            winner.source
        ));
    }
    Ok(ExitStatus::Success)
}

fn not_set(home: &Home, key: &str) -> Failure {
    Failure::new(
        format!(
            "config key not set: `{key}` (not in `{}`)",
            home.config_path().display()
        ),
        Some(format!(
            "set it with `hermes config set {key} VALUE`; without it hermes-agent's default applies"
        )),
    )
}

/// `value` with `${VAR}` in its strings expanded through `var` (the profile's `.env` over the
/// process environment), as the original's loader does; an unset variable stays as written.
fn expanded(value: &Value, var: &dyn Fn(&str) -> Option<String>) -> Value {
    match value {
        Value::String(s) => Value::from(hermes_home::config::expand_vars(s, var)),
        Value::Sequence(items) => Value::Sequence(items.iter().map(|v| expanded(v, var)).collect()),
        Value::Mapping(map) => Value::Mapping(
            map.iter()
                .map(|(k, v)| (k.clone(), expanded(v, var)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The `.env` variable the original mirrors a `terminal.*` key into (its terminal tool reads
/// the environment); `terminal.cwd` is not mirrored on `set`/`unset`.
fn terminal_env_var(key: &str) -> Option<&'static str> {
    const MAP: &[(&str, &str)] = &[
        ("backend", "TERMINAL_ENV"),
        ("modal_mode", "TERMINAL_MODAL_MODE"),
        ("timeout", "TERMINAL_TIMEOUT"),
        ("lifetime_seconds", "TERMINAL_LIFETIME_SECONDS"),
        ("docker_image", "TERMINAL_DOCKER_IMAGE"),
        ("docker_forward_env", "TERMINAL_DOCKER_FORWARD_ENV"),
        ("singularity_image", "TERMINAL_SINGULARITY_IMAGE"),
        ("modal_image", "TERMINAL_MODAL_IMAGE"),
        ("daytona_image", "TERMINAL_DAYTONA_IMAGE"),
        ("ssh_host", "TERMINAL_SSH_HOST"),
        ("ssh_user", "TERMINAL_SSH_USER"),
        ("ssh_port", "TERMINAL_SSH_PORT"),
        ("ssh_key", "TERMINAL_SSH_KEY"),
        ("container_cpu", "TERMINAL_CONTAINER_CPU"),
        ("container_memory", "TERMINAL_CONTAINER_MEMORY"),
        ("container_disk", "TERMINAL_CONTAINER_DISK"),
        ("container_persistent", "TERMINAL_CONTAINER_PERSISTENT"),
        ("docker_volumes", "TERMINAL_DOCKER_VOLUMES"),
        ("docker_env", "TERMINAL_DOCKER_ENV"),
        (
            "docker_mount_cwd_to_workspace",
            "TERMINAL_DOCKER_MOUNT_CWD_TO_WORKSPACE",
        ),
        ("docker_network", "TERMINAL_DOCKER_NETWORK"),
        ("docker_extra_args", "TERMINAL_DOCKER_EXTRA_ARGS"),
        (
            "docker_run_as_host_user",
            "TERMINAL_DOCKER_RUN_AS_HOST_USER",
        ),
        (
            "docker_persist_across_processes",
            "TERMINAL_DOCKER_PERSIST_ACROSS_PROCESSES",
        ),
        ("docker_orphan_reaper", "TERMINAL_DOCKER_ORPHAN_REAPER"),
        ("sandbox_dir", "TERMINAL_SANDBOX_DIR"),
        ("persistent_shell", "TERMINAL_PERSISTENT_SHELL"),
    ];
    let field = key.strip_prefix("terminal.")?;
    MAP.iter()
        .find(|(name, _)| *name == field)
        .map(|(_, var)| *var)
}

/// `model.api_base` (or `api_base`) is the original's alias of `model.base_url`.
fn canonical_key(key: &str) -> Option<&'static str> {
    matches!(
        key.trim().to_ascii_lowercase().as_str(),
        "model.api_base" | "api_base"
    )
    .then_some("model.base_url")
}

/// A value as the original's `hermes config get` prints it: booleans `true`/`false`, null
/// `null`, a mapping or a list as YAML, anything else as its text.
fn display_get(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Number(n) => n.to_string(),
        other => yaml_serde::to_string(other)
            .unwrap_or_default()
            .trim_end()
            .to_string(),
    }
}

/// VALUE as the original's `hermes config set` reads it (module doc).
fn parse_value(raw: &str, current: Option<&Value>) -> Value {
    if matches!(current, Some(Value::String(_))) {
        return Value::from(raw);
    }
    let lower = raw.to_ascii_lowercase();
    if ["true", "yes", "on"].contains(&lower.as_str()) {
        return Value::Bool(true);
    }
    if ["false", "no", "off"].contains(&lower.as_str()) {
        return Value::Bool(false);
    }
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    if digits(raw)
        && let Ok(n) = raw.parse::<u64>()
    {
        return Value::from(n);
    }
    if let Some((int, frac)) = raw.split_once('.')
        && (digits(int) || int.is_empty())
        && (digits(frac) || frac.is_empty())
        && !(int.is_empty() && frac.is_empty())
        && let Ok(f) = raw.parse::<f64>()
    {
        return Value::from(f);
    }
    Value::from(raw)
}

/// The value as the original echoes it after `✓ Set` (Python's `str`), secrets masked.
fn display_set(key: &str, value: &Value) -> String {
    const SECRET_LEAVES: &[&str] = &[
        "api_key",
        "apikey",
        "key",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "secret",
    ];
    let leaf = key.rsplit('.').next().unwrap_or(key).to_ascii_lowercase();
    match value {
        Value::String(s) if SECRET_LEAVES.contains(&leaf.as_str()) && !s.is_empty() => {
            hermes_home::auth::mask_secret(s)
        }
        other => python_str(other),
    }
}

/// A dotted key that goes through a list (`custom_providers.0.api_key`): the editor changes
/// mappings only, so such a key is refused rather than turning the list into a mapping.
fn through_a_list(config: &Config, key: &str) -> Option<String> {
    let parts: Vec<&str> = key.split('.').collect();
    (1..parts.len()).find_map(|n| {
        let prefix = parts[..n].join(".");
        matches!(config.raw(&prefix), Some(Value::Sequence(_))).then_some(prefix)
    })
}

fn check_key(key: &str) -> Result<(), Failure> {
    if key.is_empty() || key.split('.').any(|k| k.is_empty() || k.trim() != k) {
        return Err(Failure::new(
            format!("`{key}` is not a configuration key"),
            Some("give a dotted path of names, e.g. `model.default` or `agent.max_turns`".into()),
        ));
    }
    Ok(())
}

fn set(home: &Home, key: &str, raw: &str) -> CommandResult {
    check_key(key)?;
    if let Some(name) = hermes_settings::gateway_variable(key) {
        return set_variable(home, name, raw);
    }
    if is_env_key(key) {
        let env = home.env_path();
        let path = hermes_home::dotenv::set_var(&env, &key.to_ascii_uppercase(), raw)?;
        output::stdout(&format!("✓ Set {key} in {}\n", path.display()))?;
        return Ok(ExitStatus::Success);
    }
    let key = match canonical_key(key) {
        Some(canonical) => {
            output::stdout(&format!(
                "  (note: 'api_base' is an alias — saved as {canonical})\n"
            ))?;
            canonical
        }
        None => key,
    };
    let path = home.config_path();
    let value = Config::edit(&path, |config| {
        if let Some(list) = through_a_list(config, key) {
            return Ok(Err(list));
        }
        let value = parse_value(raw, config.raw(key));
        config.set(key, value.clone());
        Ok(Ok(value))
    })?
    .map_err(|list| {
        Failure::new(
            format!(
                "`{key}` goes into the list `{list}`, which `hermes config set` does not change"
            ),
            Some("change it with `hermes config edit`".into()),
        )
    })?;
    if let Some(var) = terminal_env_var(key) {
        let env = home.env_path();
        hermes_home::dotenv::set_var(&env, var, &python_str(&value))?;
    }
    output::stdout(&format!(
        "✓ Set {key} = {} in {}\n",
        display_set(key, &value),
        path.display()
    ))?;
    Ok(ExitStatus::Success)
}

/// A scalar as Python's `str` writes it (booleans `True`/`False`, null `None`).
fn python_str(value: &Value) -> String {
    match value {
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        other => display_get(other),
    }
}

fn unset(home: &Home, key: &str) -> CommandResult {
    check_key(key)?;
    if is_env_key(key) {
        let path = home.env_path();
        let removed = DotEnv::edit(&path, |env| Ok(env.unset(&key.to_ascii_uppercase())))?;
        if !removed {
            return Err(not_set(home, key));
        }
        output::stdout(&format!("✓ Unset {key} from {}\n", path.display()))?;
        return Ok(ExitStatus::Success);
    }
    let path = home.config_path();
    let mut removed = Config::edit(&path, |config| Ok(config.unset(key)))?;
    if let Some(var) = terminal_env_var(key) {
        let env = home.env_path();
        removed |= DotEnv::edit(&env, |e| Ok(e.unset(var)))?;
    }
    if !removed {
        return Err(not_set(home, key));
    }
    output::stdout(&format!("✓ Unset {key} from {}\n", path.display()))?;
    Ok(ExitStatus::Success)
}

/// The editor command: `$EDITOR`, else `$VISUAL`, else `vi` (run by `sh`, so it may carry
/// arguments such as `code -w`).
fn editor() -> String {
    ["EDITOR", "VISUAL"]
        .iter()
        .filter_map(|name| Context::var(name))
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "vi".into())
}

fn edit(path: &Path) -> CommandResult {
    let started_from = config_file::read_text(path)?;
    let copy = Copy::create(path, &yaml_edit::base_text(started_from.as_deref()))?;
    let text = loop {
        run_editor(&copy.0)?;
        let text = std::fs::read_to_string(&copy.0).map_err(|e| io_failure("read", &copy.0, e))?;
        let Some(problem) = edit_problem(path, &text) else {
            break text;
        };
        // As `visudo` and `crontab -e`: on a terminal, offer the editor again.
        if prompt::interactive() {
            output::stderr(&format!("error: {problem}\n"));
            if ask_again()? {
                continue;
            }
        }
        let kept = keep_copy(copy, path)?;
        let mut failure = Failure::new(
            format!(
                "your edit does not parse, so `{}` was left unchanged",
                path.display()
            ),
            Some(format!(
                "your edit is in `{}`: fix it there and copy it over, or run `hermes config edit` again",
                kept.display()
            )),
        );
        failure.causes.push(problem);
        return Err(failure);
    };
    match config_file::replace_in_file(path, started_from.as_deref(), &text)? {
        Replaced::Written => output::stdout(&format!("✓ Saved {}\n", path.display()))?,
        Replaced::Unchanged => output::stdout(&format!("No changes to {}\n", path.display()))?,
        Replaced::ChangedMeanwhile => {
            let kept = keep_copy(copy, path)?;
            return Err(Failure::new(
                format!(
                    "`{}` changed while you edited it; it was left as it is now",
                    path.display()
                ),
                Some(format!(
                    "your version is in `{}`: merge it with `hermes config edit`",
                    kept.display()
                )),
            ));
        }
    }
    Ok(ExitStatus::Success)
}

/// What is wrong with the edited `text` (for `path`), in words about the edit; `None` when it
/// reads as a config.
fn edit_problem(path: &Path, text: &str) -> Option<String> {
    match hermes_settings::parse_config(path, text) {
        Ok(_) => None,
        Err(hermes_home::Error::ConfigParse {
            line,
            column,
            message,
            ..
        }) => Some(format!(
            "your edit is not valid YAML (line {line}, column {column}): {message}"
        )),
        Err(hermes_home::Error::ConfigNotMapping { .. }) => {
            Some("your edit is not a mapping of settings at the top level".into())
        }
        Err(other) => Some(hermes_errors::one_line(&other)),
    }
}

/// Asks whether to open the editor again: Enter or `y` is yes; `n` or the end of input (a
/// closed terminal) is no, so a script never loops.
fn ask_again() -> Result<bool, Failure> {
    use std::io::{BufRead, Write};
    let mut err = std::io::stderr().lock();
    write!(err, "Edit again? [Y/n] ")?;
    err.flush()?;
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer)? == 0 {
        writeln!(err)?;
        return Ok(false);
    }
    Ok(!answer.trim().to_ascii_lowercase().starts_with('n'))
}

/// Runs the editor on `file` and waits for it.
fn run_editor(file: &Path) -> Result<(), Failure> {
    let editor = editor();
    let status = std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(file)
        .status()
        .map_err(|e| io_failure("run the editor for", file, e))?;
    if status.success() {
        return Ok(());
    }
    Err(Failure::new(
        format!("the editor `{editor}` failed ({status}); nothing was saved"),
        Some("set `EDITOR` (or `VISUAL`) to an editor that works here, e.g. `EDITOR=nano`".into()),
    ))
}

/// The copy the editor gets, next to the file (same filesystem, private mode); removed when
/// dropped unless kept.
struct Copy(PathBuf);

impl Copy {
    fn create(path: &Path, text: &str) -> Result<Copy, Failure> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let copy = path.with_file_name(format!(".config.yaml.edit-{}.yaml", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&copy)
            .map_err(|e| io_failure("create a copy to edit in", &copy, e))?;
        let copy = Copy(copy);
        file.write_all(text.as_bytes())
            .map_err(|e| io_failure("write", &copy.0, e))?;
        Ok(copy)
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Keeps the edited copy next to the file as `config.yaml.rejected` and says where.
fn keep_copy(copy: Copy, path: &Path) -> Result<PathBuf, Failure> {
    let kept = path.with_file_name("config.yaml.rejected");
    std::fs::rename(&copy.0, &kept).map_err(|e| io_failure("keep your edit in", &kept, e))?;
    Ok(kept)
}

fn io_failure(what: &str, path: &Path, error: std::io::Error) -> Failure {
    let mut failure = Failure::new(
        format!("cannot {what} `{}`", path.display()),
        Some("check the directory's permissions and free space".into()),
    );
    failure.causes.push(error.to_string());
    failure
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_as_the_original_reads_them() {
        assert_eq!(parse_value("64", None), Value::from(64u64));
        assert_eq!(parse_value("0.5", None), Value::from(0.5));
        assert_eq!(parse_value("Yes", None), Value::Bool(true));
        assert_eq!(parse_value("off", None), Value::Bool(false));
        assert_eq!(parse_value("x/y", None), Value::from("x/y"));
        assert_eq!(parse_value("1.2.3", None), Value::from("1.2.3"));
        assert_eq!(parse_value("-1", None), Value::from("-1"));
        // Where the file holds a string, a string stays.
        assert_eq!(
            parse_value("off", Some(&Value::from("manual"))),
            Value::from("off")
        );
    }

    #[test]
    fn env_keys_and_masking_follow_the_original() {
        assert!(is_env_key("openrouter_api_key"));
        assert!(is_env_key("MY_TOKEN"));
        assert!(!is_env_key("model.api_key"));
        assert!(!is_env_key("model"));
        assert_eq!(
            display_set("model.api_key", &Value::from("sk-1234567890abcd")),
            "sk-1...abcd"
        );
        assert_eq!(display_set("agent.verbose", &Value::Bool(true)), "True");
    }
}
