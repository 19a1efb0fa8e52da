//! The pages: server-rendered HTML; style and script are files served by the binary (the CSP
//! allows nothing inline).

/// `/assets/app.css`.
pub const CSS: &str = include_str!("../assets/app.css");
/// `/assets/app.js`.
pub const JS: &str = include_str!("../assets/app.js");

/// The Overview page; `token` is embedded for the script's POSTs (the page itself is only
/// served to an authenticated request).
pub fn overview(token: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="hermes-token" content="{token}">
<title>Hermes — Overview</title>
<link rel="stylesheet" href="assets/app.css">
</head><body>
<header><h1>Hermes</h1><span>Overview</span><span id="live" class="muted">connecting…</span></header>
<main>
<div id="banner" class="banner" hidden></div>
<table><thead><tr><th>Service</th><th>State</th><th>PID</th><th>Uptime</th><th>Restarts</th><th>Last exit</th><th>Reason</th><th>Port</th><th>Engine</th><th>Actions</th></tr></thead>
<tbody id="rows"></tbody></table>
</main>
<script src="assets/app.js"></script>
</body></html>
"#,
        token = escape(token)
    )
}

/// The page answered with 401: how to get in, never the token.
pub fn login(basic: bool) -> String {
    let how = if basic {
        "Sign in with the dashboard's user name and password (HERMES_DASHBOARD_BASIC_AUTH_USERNAME / _PASSWORD)."
    } else {
        "Open the link that <code>hermes dashboard</code> printed when it started (it carries this start's token), or send the token in the X-Hermes-Session-Token header."
    };
    format!(
        r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Hermes — sign in</title>
<link rel="stylesheet" href="assets/app.css"></head>
<body><header><h1>Hermes</h1></header><main><p>{how}</p></main></body></html>
"#
    )
}

/// HTML-escapes `text` for an attribute or element.
fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&#39;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_token_is_escaped_in_the_page() {
        let page = super::overview("a\"<b");
        assert!(page.contains("content=\"a&quot;&lt;b\""));
    }
}
