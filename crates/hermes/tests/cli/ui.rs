//! The dashboard in a real browser: `Ui::open` starts `hermes dashboard` for the test's home
//! and a headless Chromium signed in through the printed token link. Each page's browser test
//! lives in its own `ui_<page>` module and uses this.
//!
//! Screenshots: with `HERMES_DASHBOARD_SCREENSHOTS=<dir>`, [`Ui::screenshot`] saves
//! `<dir>/dashboard-<name>.png` (how `docs/images/` is made:
//! `HERMES_DASHBOARD_SCREENSHOTS=$PWD/docs/images cargo test -p hermes --test cli ui_`).

use std::net::TcpStream;
use std::time::Duration;

use hermes_test_support::browser::Browser;

use crate::util::{Running, TestContext, free_port};
use hermes_test_support::poll;

/// The fixed session token of the tests' dashboards.
pub const UI_TOKEN: &str = "ui-dashboard-token-0123456789abcdef";
/// How long a page may take to show what a test waits for.
pub const WAIT: Duration = Duration::from_secs(20);

/// A dashboard and a browser signed in to it.
pub struct Ui {
    /// The signed-in browser (dropped before the dashboard).
    pub browser: Browser,
    /// The dashboard's port on 127.0.0.1.
    pub port: u16,
    _dashboard: Running,
}

impl Ui {
    /// Starts the dashboard for `t` (with `env` added to its environment) and signs a
    /// browser in; `None` (after a printed skip, a failure in strict mode) without Chromium.
    pub fn open(t: &TestContext, env: &[(&str, &str)]) -> Option<Ui> {
        let browser = Browser::start_or_skip()?;
        let port = free_port();
        let mut cmd = t.cmd(&["dashboard", "--port", &port.to_string()]);
        cmd.env("HERMES_DASHBOARD_SESSION_TOKEN", UI_TOKEN)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        // Drain stderr on a thread so the dashboard never blocks on a full pipe.
        let mut stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let dashboard = Running(child);
        poll::until_true("the dashboard", WAIT, || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        browser.goto(&format!("http://127.0.0.1:{port}/?token={UI_TOKEN}"));
        browser.wait_for("nav a[aria-current=page]", WAIT);
        Some(Ui {
            browser,
            port,
            _dashboard: dashboard,
        })
    }

    /// Opens the page at `path` (relative to the dashboard: `logs`, `profiles?x=y`).
    pub fn goto(&self, path: &str) {
        self.browser
            .goto(&format!("http://127.0.0.1:{}/{path}", self.port));
    }

    /// Saves a screenshot as `dashboard-<name>.png` when `HERMES_DASHBOARD_SCREENSHOTS`
    /// names a directory (see the module documentation); otherwise does nothing.
    pub fn screenshot(&self, name: &str) {
        if let Some(dir) = std::env::var_os("HERMES_DASHBOARD_SCREENSHOTS") {
            let dir = std::path::PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            self.browser
                .screenshot(&dir.join(format!("dashboard-{name}.png")));
        }
    }
}
