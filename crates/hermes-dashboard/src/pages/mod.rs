//! The pages: one module per page, each owning its HTML, its JSON API under `/api` and its
//! part of the OpenAPI document. Pages are server-rendered inside one [`shell`] (navigation,
//! the session token for POSTs, a `<base>` for a reverse-proxy sub-path); style and scripts are
//! files under `/assets` (the CSP allows nothing inline).
//!
//! Every page lives at the top level (`/`, `/logs`, …) and links relatively, so the whole
//! dashboard works unchanged under a sub-path: the `<base href>` carries the prefix.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

use crate::server::App;
use request::{Step, refuse};

pub mod backups;
pub mod channels;
pub mod config;
pub mod cron;
pub mod diagnostics;
pub mod logs;
pub mod original_api;
pub mod overview;
pub mod plugins;
pub mod profiles;
pub mod request;
pub mod sessions;

/// The pages in navigation order.
pub const ALL: [Page; 10] = [
    Page::Overview,
    Page::Logs,
    Page::Config,
    Page::Channels,
    Page::Profiles,
    Page::Plugins,
    Page::Sessions,
    Page::Cron,
    Page::Backups,
    Page::Diagnostics,
];

/// One page of the dashboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Page {
    /// Services and gateways, with actions.
    Overview,
    /// A service's log, live.
    Logs,
    /// A profile's `config.yaml`: the whole text, and a form for the settings changed most.
    Config,
    /// The agent's messaging platforms of a profile: credentials, enabled, state.
    Channels,
    /// Profiles: create, delete, SOUL.md, model, `.env`.
    Profiles,
    /// Memory providers: dependencies and activation.
    Plugins,
    /// Conversations of a profile (read-only).
    Sessions,
    /// The agent's scheduled jobs of a profile: pause, resume, run now.
    Cron,
    /// Archives of the volume: create, download, upload, restore.
    Backups,
    /// `dump` and `doctor`.
    Diagnostics,
}

impl Page {
    /// The page's path relative to the dashboard's base (`""` is the Overview).
    pub fn href(self) -> &'static str {
        match self {
            Page::Overview => "./",
            Page::Logs => "logs",
            Page::Config => "config",
            Page::Channels => "channels",
            Page::Profiles => "profiles",
            Page::Plugins => "plugins",
            Page::Sessions => "sessions",
            Page::Cron => "cron",
            Page::Backups => "backups",
            Page::Diagnostics => "diagnostics",
        }
    }

    /// The name in the navigation and the title.
    pub fn title(self) -> &'static str {
        match self {
            Page::Overview => "Overview",
            Page::Logs => "Logs",
            Page::Config => "Config",
            Page::Channels => "Channels",
            Page::Profiles => "Profiles",
            Page::Plugins => "Plugins",
            Page::Sessions => "Sessions",
            Page::Cron => "Cron",
            Page::Backups => "Backups",
            Page::Diagnostics => "Diagnostics",
        }
    }

    /// Its script under `/assets`.
    fn script(self) -> &'static str {
        match self {
            Page::Overview => "overview.js",
            Page::Logs => "logs.js",
            Page::Config => "config.js",
            Page::Channels => "channels.js",
            Page::Profiles => "profiles.js",
            Page::Plugins => "plugins.js",
            Page::Sessions => "sessions.js",
            Page::Cron => "cron.js",
            Page::Backups => "backups.js",
            Page::Diagnostics => "diagnostics.js",
        }
    }
}

/// The routes of every page (pages and their `/api` endpoints).
pub fn routes() -> Router<App> {
    Router::new()
        .merge(overview::routes())
        .merge(logs::routes())
        .merge(config::routes())
        .merge(channels::routes())
        .merge(profiles::routes())
        .merge(plugins::routes())
        .merge(sessions::routes())
        .merge(cron::routes())
        .merge(backups::routes())
        .merge(diagnostics::routes())
        .merge(original_api::routes())
}

/// The OpenAPI `paths` of every page's API.
pub fn api_paths() -> Map<String, Value> {
    let mut paths = Map::new();
    for part in [
        overview::api_paths(),
        logs::api_paths(),
        config::api_paths(),
        channels::api_paths(),
        profiles::api_paths(),
        plugins::api_paths(),
        sessions::api_paths(),
        cron::api_paths(),
        backups::api_paths(),
        diagnostics::api_paths(),
        original_api::api_paths(),
    ] {
        if let Value::Object(map) = part {
            paths.extend(map);
        }
    }
    paths
}

/// The installed agent, or the `409` a request that needs it gets without one: `what` says
/// whose the feature is ("changing a job", "pairing"), the hint how to get an agent.
pub fn installed_agent(app: &App, what: &str) -> Step<hermes_services::agent::Agent> {
    hermes_services::agent::locate(&*app.vars).ok_or_else(|| {
        let place = hermes_services::agent::Place::current();
        refuse(
            StatusCode::CONFLICT,
            &format!("no agent is installed {}", place.here()),
            Some(format!(
                "{what} is the agent's own code: {}",
                place.get_the_agent()
            )),
        )
    })
}

/// One agent change at a time, whoever asks (a cron job's pause, a pairing approval): a burst
/// of clicks or requests starts one interpreter after another (each about 50 MB), never one per
/// request side by side, and two changes never race for the agent's locks. Held while the
/// agent runs.
pub fn agent_turn() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `page` inside the common frame: `base` is the prefix the browser sees (`""` at the root,
/// `/hermes` under a proxy's sub-path), `token` is for the scripts' POSTs (the page is only
/// served to an authenticated request), `main` is the page's own HTML (already escaped).
pub fn shell(page: Page, base: &str, token: &str, main: &str) -> Response {
    let nav: String = ALL
        .iter()
        .map(|p| {
            let current = if *p == page {
                " aria-current=\"page\""
            } else {
                ""
            };
            format!("<a href=\"{}\"{current}>{}</a>", p.href(), p.title())
        })
        .collect();
    let html = format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<base href="{base}/">
<meta name="hermes-token" content="{token}">
<title>Hermes — {title}</title>
<link rel="stylesheet" href="assets/app.css"><link rel="icon" href="assets/icon.svg">
</head><body data-page="{script}">
<header><h1>Hermes</h1><nav>{nav}</nav><span id="live" class="muted"></span></header>
<main>
<div id="banner" class="banner" hidden></div>
{main}
</main>
<script src="assets/common.js"></script>
<script src="assets/{script}"></script>
</body></html>
"#,
        base = escape(base),
        token = escape(token),
        title = page.title(),
        script = page.script(),
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response()
}

/// The page answered with 401: how to get in for `auth`, never the token.
pub fn login(base: &str, auth: &crate::Auth) -> String {
    let how = match auth {
        crate::Auth::Basic { .. } => {
            "Sign in with the dashboard's user name and password (HERMES_DASHBOARD_BASIC_AUTH_USERNAME and _PASSWORD or _PASSWORD_HASH)."
        }
        crate::Auth::Proxy { .. } => {
            "This dashboard signs users in through its reverse proxy: open it through the proxy's address."
        }
        crate::Auth::Token => {
            "Open the link that <code>hermes dashboard</code> printed when it started (it carries this start's token), or send the token in the X-Hermes-Session-Token header."
        }
    };
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Hermes — sign in</title>
<base href="{base}/">
<link rel="stylesheet" href="assets/app.css"></head>
<body><header><h1>Hermes</h1></header><main><p id="sign-in">{how}</p></main></body></html>
"#,
        base = escape(base)
    )
}

/// `<option>`s for every profile, the active one selected. A home whose profiles cannot be
/// listed still offers `default`.
pub fn profile_options(root: &std::path::Path) -> String {
    let active = hermes_home::Home::select(root.to_path_buf(), None)
        .map(|h| h.profile().name().to_string())
        .unwrap_or_else(|_| "default".into());
    profile_names(root)
        .iter()
        .map(|n| {
            let selected = if *n == active { " selected" } else { "" };
            format!(
                "<option value=\"{v}\"{selected}>{v}</option>",
                v = escape(n)
            )
        })
        .collect()
}

/// Every profile's name, `default` first even before its directory has a profile's files (a
/// volume's listing cannot fail a page: an unreadable one is just `default`).
pub fn profile_names(root: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = hermes_home::profile::list(root)
        .map(|list| list.iter().map(|p| p.profile.name().to_string()).collect())
        .unwrap_or_default();
    if !names.iter().any(|n| n == "default") {
        names.insert(0, "default".into());
    }
    names
}

/// HTML-escapes `text` for an attribute or element.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_and_base_are_escaped() {
        assert_eq!(escape("a\"<b>&'"), "a&quot;&lt;b&gt;&amp;&#39;");
        let page = login("/x\"y", &crate::Auth::Token);
        assert!(page.contains("<base href=\"/x&quot;y/\">"), "{page}");
    }

    #[test]
    fn every_page_has_its_own_script_and_link() {
        let mut scripts: Vec<_> = ALL.iter().map(|p| p.script()).collect();
        scripts.dedup();
        assert_eq!(scripts.len(), ALL.len());
        for p in ALL {
            assert!(crate::assets::get(p.script()).is_some(), "{p:?}");
        }
    }
}
