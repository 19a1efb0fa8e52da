//! `hermes auth list`: the credentials stored in `auth.json` — each pool's keys (label, type,
//! source, status, the key masked as the original masks it) and the logins, marking the
//! active provider and the key a request would take next (`←`, as the original's list does).

use std::time::{SystemTime, UNIX_EPOCH};

use hermes_home::auth::{AuthStore, CredentialView};
use serde_json::{Map, Value, json};

use crate::cli::AuthCommand;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus};
use crate::output;

/// Dispatches `hermes auth <sub>`.
pub fn run(ctx: &Context, command: AuthCommand) -> CommandResult {
    match command {
        AuthCommand::List(flag) => list(ctx, flag.json),
    }
}

fn list(ctx: &Context, json_output: bool) -> CommandResult {
    let home = ctx.home()?;
    let path = home.auth_path();
    let loaded = AuthStore::load(&path)?;
    if let Some(corrupt) = &loaded.corrupt {
        let kept = match &corrupt.preserved_at {
            Some(copy) => format!("a copy is preserved at `{}`", copy.display()),
            None => "a copy could NOT be preserved".into(),
        };
        output::stderr(&format!(
            "warning: `{}` could not be parsed ({}); reading it as empty, {kept}\n",
            corrupt.path.display(),
            corrupt.reason
        ));
    }
    // `env:` entries hold no key: it is the variable's, read as the gateway reads it
    // (`hermes_settings`). Files that cannot be read only hide those keys.
    let scope = hermes_settings::Scope::of(home.profile().name());
    let env =
        hermes_settings::ProfileFiles::read(home.dir(), scope, hermes_settings::process_env())
            .map(|files| files.environment())
            .unwrap_or_default();
    let lookup = |k: &str| env.get(k).filter(|v| !v.trim().is_empty()).cloned();
    let store = &loaded.store;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let pools: Vec<(String, Vec<CredentialView>)> = store
        .pool_ids()
        .into_iter()
        .map(|id| {
            let views = store.credential_views(&id, &lookup, now);
            (id, views)
        })
        .collect();
    let logins = store.providers();
    if json_output {
        let pools: Map<String, Value> = pools
            .iter()
            .map(|(id, views)| (id.clone(), json!(views)))
            .collect();
        output::json(&json!({
            "path": path,
            "active_provider": store.active_provider(),
            "providers": logins,
            "credential_pool": pools,
        }))?;
    } else if pools.is_empty() && logins.is_empty() {
        output::stdout(&format!("No stored credentials in `{}`\n", path.display()))?;
    } else {
        output::stdout(&render(store.active_provider(), &pools, &logins))?;
    }
    Ok(ExitStatus::Success)
}

/// The text list: one block per pool (the original's `hermes auth list` lines, plus the
/// masked key), then the logins, `*` marking the active provider.
fn render(
    active: Option<&str>,
    pools: &[(String, Vec<CredentialView>)],
    logins: &[String],
) -> String {
    let mut text = String::new();
    for (id, views) in pools {
        let marker = if active == Some(id.as_str()) {
            " (active)"
        } else {
            ""
        };
        text.push_str(&format!("{id} ({} credentials){marker}:\n", views.len()));
        for v in views {
            let key = if v.key.is_empty() {
                "(not set)"
            } else {
                v.key.as_str()
            };
            let line = format!(
                "  #{}  {:<20} {:<7} {}  {key}{}{}",
                v.index,
                v.label,
                v.auth_type,
                display_source(&v.source),
                status_text(v),
                if v.current { " ←" } else { "" }
            );
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text.push('\n');
    }
    if !logins.is_empty() {
        text.push_str("logins:\n");
        for provider in logins {
            let marker = if active == Some(provider.as_str()) {
                "*"
            } else {
                " "
            };
            text.push_str(&format!("{marker} {provider}\n"));
        }
    }
    text
}

/// `manual:device_code` shows as `device_code`, as in the original.
fn display_source(source: &str) -> &str {
    source.strip_prefix("manual:").unwrap_or(source)
}

/// A key's status as the original's list words it: nothing when fine; `rate-limited` (429),
/// `auth failed` (401/403: re-auth may be required) or `exhausted`, with the wait left.
fn status_text(v: &CredentialView) -> String {
    match v.status.as_str() {
        "exhausted" => {}
        "dead" => return " dead (re-auth required)".into(),
        _ => return String::new(),
    }
    let code = v
        .last_error_code
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    if matches!(v.last_error_code, Some(401 | 403)) {
        return format!(" auth failed{code} (re-auth may be required)");
    }
    let label = if v.last_error_code == Some(429) {
        "rate-limited"
    } else {
        "exhausted"
    };
    match v.retry_in_secs {
        Some(0) => format!(" {label}{code} (ready to retry)"),
        Some(secs) => format!(" {label}{code} ({} left)", wait_text(secs)),
        None => format!(" {label}{code}"),
    }
}

/// `1h 5m`, `4m 10s`, `9s` (the original's wording).
fn wait_text(secs: u64) -> String {
    let (days, hours, minutes, seconds) =
        (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {minutes}m")
    } else if minutes > 0 {
        format!("{minutes}m {seconds}s")
    } else {
        format!("{seconds}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_are_worded_as_the_original_words_them() {
        assert_eq!(wait_text(9), "9s");
        assert_eq!(wait_text(250), "4m 10s");
        assert_eq!(wait_text(3900), "1h 5m");
        assert_eq!(wait_text(90_000), "1d 1h");
    }

    #[test]
    fn the_list_shows_masked_keys_status_and_the_next_key() {
        let text = r#"{"active_provider": "openrouter", "providers": {"nous": {"access_token": "t"}},
          "credential_pool": {"openrouter": [
            {"id": "a", "label": "work", "source": "manual", "priority": 0, "auth_type": "api_key",
             "access_token": "sk-or-v1-abcdefghijklmnop1234", "last_status": "exhausted",
             "last_status_at": 1000, "last_error_code": 429},
            {"id": "b", "label": "OPENROUTER_API_KEY", "source": "env:OPENROUTER_API_KEY",
             "priority": 1, "auth_type": "api_key"},
            {"id": "c", "label": "spare", "source": "manual:device_code", "priority": 2,
             "auth_type": "api_key", "access_token": "sk-or-v1-zzzzzzzzzzzzzzzz9999",
             "last_status": "exhausted", "last_status_at": 1000, "last_error_code": 401}]}}"#;
        let store = AuthStore::parse(text.as_bytes()).unwrap();
        let env = |_: &str| None;
        let pools = vec![(
            "openrouter".to_string(),
            store.credential_views("openrouter", &env, 1100.0),
        )];
        let out = render(store.active_provider(), &pools, &store.providers());
        assert_eq!(
            out,
            "openrouter (3 credentials) (active):\n\
             \x20 #1  work                 api_key manual  sk-o...1234 rate-limited (429) (58m 20s left)\n\
             \x20 #2  OPENROUTER_API_KEY   api_key env:OPENROUTER_API_KEY  (not set)\n\
             \x20 #3  spare                api_key device_code  sk-o...9999 auth failed (401) (re-auth may be required)\n\
             \n\
             logins:\n\
             \x20 nous\n"
        );
        assert!(!out.contains("abcdefghijklmnop"));
        // The cooldown over, the first key is the next one again.
        let pools = vec![(
            "openrouter".to_string(),
            store.credential_views("openrouter", &env, 1000.0 + 3600.0),
        )];
        let out = render(None, &pools, &[]);
        assert!(
            out.contains("sk-o...1234 rate-limited (429) (ready to retry) ←"),
            "{out}"
        );
    }
}
