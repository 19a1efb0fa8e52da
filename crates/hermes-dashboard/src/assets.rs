//! The static files under `/assets`, compiled into the binary: one stylesheet, the page icon,
//! the script every page shares (`common.js`) and one script per page.

/// `(name, content type, body)` of every asset.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.css", CSS_TYPE, include_str!("../assets/app.css")),
    // The page's icon: without one the browser asks for `/favicon.ico` and logs the 404.
    ("icon.svg", SVG_TYPE, include_str!("../assets/icon.svg")),
    ("common.js", JS_TYPE, include_str!("../assets/common.js")),
    (
        "overview.js",
        JS_TYPE,
        include_str!("../assets/overview.js"),
    ),
    ("logs.js", JS_TYPE, include_str!("../assets/logs.js")),
    ("config.js", JS_TYPE, include_str!("../assets/config.js")),
    (
        "channels.js",
        JS_TYPE,
        include_str!("../assets/channels.js"),
    ),
    ("cron.js", JS_TYPE, include_str!("../assets/cron.js")),
    (
        "profiles.js",
        JS_TYPE,
        include_str!("../assets/profiles.js"),
    ),
    ("plugins.js", JS_TYPE, include_str!("../assets/plugins.js")),
    (
        "sessions.js",
        JS_TYPE,
        include_str!("../assets/sessions.js"),
    ),
    ("backups.js", JS_TYPE, include_str!("../assets/backups.js")),
    (
        "diagnostics.js",
        JS_TYPE,
        include_str!("../assets/diagnostics.js"),
    ),
];

const CSS_TYPE: &str = "text/css; charset=utf-8";
const JS_TYPE: &str = "text/javascript; charset=utf-8";
const SVG_TYPE: &str = "image/svg+xml";

/// The asset called `name`: its content type and body.
pub fn get(name: &str) -> Option<(&'static str, &'static str)> {
    ASSETS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, kind, body)| (*kind, *body))
}
