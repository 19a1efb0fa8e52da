//! A headless Chromium driven over the W3C WebDriver protocol, for tests of web pages.
//!
//! [`Browser::start_or_skip`] starts Debian's `chromedriver` on a free loopback port, and through
//! it a headless `chromium` with a profile of its own and a fixed window size (so screenshots
//! are comparable between runs). When either program is missing the test is skipped with the
//! reason ([`crate::skip`]: a failure in strict mode); `scripts/install-test-deps.sh` installs
//! both. Dropping the [`Browser`] ends the session and kills the driver and every browser
//! process it started.
//!
//! The client is a few lines of HTTP/1.1 over `std::net::TcpStream`, blocking: the driver listens
//! on loopback only, and a blocking client without a runtime of its own can be called from a
//! plain `#[test]` as well as from inside a `#[tokio::test]` (where a blocking `reqwest` client
//! would panic), while the test's server runs on any runtime it likes.
//!
//! Every step that fails panics with a message naming the step and the page's URL, since a test
//! can do nothing better with a browser that misbehaves than stop and say where.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The size of the page's viewport in CSS pixels (device scale factor 1), which is the size of
/// every screenshot: fixed so that screenshots compare between runs and machines.
pub const WINDOW_SIZE: (u32, u32) = (1280, 800);

/// How long the driver may take to answer its first `/status`.
const DRIVER_START: Duration = Duration::from_secs(20);
/// The longest any one WebDriver command may take (a page load is bounded by the session's own
/// page-load timeout, below this).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How often `wait_for` and `wait_until` look again.
const POLL: Duration = Duration::from_millis(50);
/// The key of an element reference in WebDriver's JSON (fixed by the W3C specification).
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Why a WebDriver exchange failed (the panic messages render it).
#[derive(Debug, thiserror::Error)]
pub enum WebDriverError {
    /// The driver could not be reached or the connection broke.
    #[error("cannot talk to chromedriver: {0}")]
    Io(#[from] std::io::Error),
    /// The driver answered something that is not an HTTP response with a JSON body.
    #[error("chromedriver answered malformed HTTP: {0}")]
    Malformed(String),
    /// The driver answered with a WebDriver error (`no such element`, `timeout`, …).
    #[error("{error} (HTTP {status}): {message}")]
    Command {
        /// The W3C error code (`no such element`).
        error: String,
        /// The HTTP status it came with.
        status: u16,
        /// The driver's explanation (its first line).
        message: String,
    },
}

/// A cookie as WebDriver reports and accepts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cookie {
    /// The cookie's name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Its path (`/` when unset by whoever added it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Its domain (the page's host when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Whether scripts cannot read it.
    #[serde(default)]
    pub http_only: bool,
    /// Whether it is sent over HTTPS only.
    #[serde(default)]
    pub secure: bool,
    /// Its `SameSite` attribute (`Strict`, `Lax`, `None`), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_site: Option<String>,
}

impl Cookie {
    /// A cookie for the current page's host and path `/`, with no other attribute.
    pub fn new(name: &str, value: &str) -> Self {
        Cookie {
            name: name.to_owned(),
            value: value.to_owned(),
            path: Some("/".to_owned()),
            domain: None,
            http_only: false,
            secure: false,
            same_site: None,
        }
    }
}

/// A running headless Chromium and its `chromedriver`, killed on drop.
#[derive(Debug)]
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    /// Chromium's profile and the driver's log; removed on drop, after the processes.
    dir: tempfile::TempDir,
}

/// An element of the current page, found by [`Browser::find`] or [`Browser::wait_for`].
#[derive(Debug, Clone)]
pub struct Element<'b> {
    browser: &'b Browser,
    id: String,
    /// The selector it was found by, for failure messages.
    css: String,
}

impl Browser {
    /// Starts the browser, or returns `None` after [`crate::skip`]ping when `chromium` or
    /// `chromedriver` is not installed.
    ///
    /// # Panics
    /// When both are installed but do not start: that is a broken installation, not a reason
    /// to skip.
    pub fn start_or_skip() -> Option<Browser> {
        let missing = ["chromedriver", "chromium"]
            .into_iter()
            .find(|program| crate::find_on_path(program).is_none());
        if let Some(program) = missing {
            crate::skip(&format!(
                "`{program}` is not on PATH, so the browser tests cannot run \
                 (scripts/install-test-deps.sh installs Debian's chromium and chromium-driver)"
            ));
            return None;
        }
        match Browser::start() {
            Ok(browser) => Some(browser),
            Err(reason) => panic!("browser: cannot start headless Chromium: {reason}"),
        }
    }

    fn start() -> Result<Browser, String> {
        let dir = tempfile::Builder::new()
            .prefix("hermes-browser-")
            .tempdir()
            .map_err(|e| format!("cannot make a profile directory: {e}"))?;
        // A free port can be taken by someone else between our probe and the driver's bind:
        // a few attempts make that race harmless.
        let mut last = String::new();
        for _ in 0..3 {
            match spawn_driver(dir.path()) {
                Ok((driver, port)) => return Browser::open_session(driver, port, dir),
                Err(reason) => last = reason,
            }
        }
        Err(last)
    }

    fn open_session(driver: Child, port: u16, dir: tempfile::TempDir) -> Result<Browser, String> {
        let mut browser = Browser {
            driver,
            port,
            session: String::new(),
            dir,
        };
        let capabilities = session_capabilities(&browser.dir.path().join("profile"));
        let created = send(port, "POST", "/session", Some(&capabilities)).map_err(|e| {
            format!(
                "chromedriver refused a new session: {e}{}",
                browser.log_tail()
            )
        })?;
        browser.session = created
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| format!("the new session has no id: {created}"))?
            .to_owned();
        browser.fit_viewport()?;
        Ok(browser)
    }

    /// Resizes the window so that the page's viewport (what a screenshot shows) is exactly
    /// [`WINDOW_SIZE`]: `--window-size` sizes the window, and headless Chromium still takes
    /// the height of a toolbar off it.
    fn fit_viewport(&self) -> Result<(), String> {
        let path = |end: &str| format!("/session/{}/{end}", self.session);
        let script = json!({ "script": "return [window.innerWidth, window.innerHeight, \
            window.outerWidth, window.outerHeight];", "args": [] });
        let sizes = send(self.port, "POST", &path("execute/sync"), Some(&script))
            .map_err(|e| format!("cannot measure the window: {e}"))?;
        let size = |i: usize| sizes.get(i).and_then(Value::as_i64).unwrap_or_default();
        let (width, height) = WINDOW_SIZE;
        let rect = json!({
            "width": i64::from(width) + size(2) - size(0),
            "height": i64::from(height) + size(3) - size(1),
        });
        send(self.port, "POST", &path("window/rect"), Some(&rect))
            .map_err(|e| format!("cannot resize the window to {rect}: {e}"))?;
        Ok(())
    }

    /// The process id of `chromedriver`; it leads a process group holding the browser's
    /// processes too (what a test checks is empty after drop).
    pub fn driver_pid(&self) -> u32 {
        self.driver.id()
    }

    /// Chromium's profile directory (every browser process names it on its command line).
    pub fn profile_dir(&self) -> PathBuf {
        self.dir.path().join("profile")
    }

    /// Loads `url` and waits for the page to have loaded.
    pub fn goto(&self, url: &str) {
        self.command(
            &format!("go to {url}"),
            "POST",
            "url",
            Some(json!({ "url": url })),
        );
    }

    /// The URL of the current page.
    pub fn current_url(&self) -> String {
        let url = self.command("read the current URL", "GET", "url", None);
        as_string(&url, "the current URL")
    }

    /// The current page's title.
    pub fn title(&self) -> String {
        let title = self.command("read the title", "GET", "title", None);
        as_string(&title, "the title")
    }

    /// The first element matching `css`.
    ///
    /// # Panics
    /// When there is none (use [`Browser::wait_for`] for one that is still to come).
    pub fn find(&self, css: &str) -> Element<'_> {
        let step = format!("find `{css}`");
        let found = self.command(&step, "POST", "element", Some(by_css(css)));
        self.element(found, css)
    }

    /// Every element matching `css`, in document order.
    pub fn find_all(&self, css: &str) -> Vec<Element<'_>> {
        let step = format!("find all `{css}`");
        let found = self.command(&step, "POST", "elements", Some(by_css(css)));
        match found {
            Value::Array(items) => items.into_iter().map(|e| self.element(e, css)).collect(),
            other => self.fail(&step, &format!("expected a list of elements, got {other}")),
        }
    }

    /// The first element matching `css`, waiting up to `timeout` for it to appear.
    pub fn wait_for(&self, css: &str, timeout: Duration) -> Element<'_> {
        let mut found = None;
        self.wait_until(&format!("`{css}` to appear"), timeout, |_| {
            found = self.try_find(css);
            found.is_some()
        });
        match found {
            Some(element) => element,
            None => self.fail(&format!("wait for `{css}`"), "it vanished while found"),
        }
    }

    /// Waits up to `timeout` for `ready` to hold, asking it again every 50 ms.
    ///
    /// # Panics
    /// When it still does not hold after `timeout`; the message names `what` was awaited.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut ready: impl FnMut(&Browser) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        loop {
            if ready(self) {
                return;
            }
            if Instant::now() >= deadline {
                self.fail(
                    &format!("wait for {what}"),
                    &format!("not after {timeout:?}"),
                );
            }
            std::thread::sleep(POLL);
        }
    }

    /// Runs `script` as the body of a function in the page and returns what it returns
    /// (`return document.title;`), as JSON.
    pub fn execute(&self, script: &str) -> Value {
        let body = json!({ "script": script, "args": [] });
        self.command("run a script", "POST", "execute/sync", Some(body))
    }

    /// The cookies visible to the current page.
    pub fn cookies(&self) -> Vec<Cookie> {
        let all = self.command("read the cookies", "GET", "cookie", None);
        serde_json::from_value(all)
            .unwrap_or_else(|e| self.fail("read the cookies", &format!("not cookies: {e}")))
    }

    /// The cookie named `name` visible to the current page, if any.
    pub fn cookie(&self, name: &str) -> Option<Cookie> {
        self.cookies().into_iter().find(|c| c.name == name)
    }

    /// Adds `cookie` for the current page's host (a page of that host must be loaded).
    pub fn add_cookie(&self, cookie: &Cookie) {
        let step = format!("add the cookie `{}`", cookie.name);
        self.command(&step, "POST", "cookie", Some(json!({ "cookie": cookie })));
    }

    /// The errors the pages wrote to the browser's console since the last call (a script
    /// error, a refused Content-Security-Policy, a failed load), as `level: message` lines.
    /// Chromium keeps them from the page's first byte, before any script of ours could listen.
    pub fn console_errors(&self) -> Vec<String> {
        let entries = self.command(
            "read the console",
            "POST",
            "se/log",
            Some(json!({ "type": "browser" })),
        );
        entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e.get("level").and_then(Value::as_str) == Some("SEVERE"))
            .map(|e| {
                format!(
                    "SEVERE: {}",
                    e.get("message").and_then(Value::as_str).unwrap_or_default()
                )
            })
            .collect()
    }

    /// Saves a PNG screenshot of the window ([`WINDOW_SIZE`]) to `path`.
    pub fn screenshot(&self, path: &Path) {
        let step = format!("take a screenshot into {}", path.display());
        let encoded = self.command(&step, "GET", "screenshot", None);
        let png = decode_base64(&as_string(&encoded, "the screenshot"))
            .unwrap_or_else(|e| self.fail(&step, &format!("not base64: {e}")));
        std::fs::write(path, png).unwrap_or_else(|e| self.fail(&step, &e.to_string()));
    }

    /// Sends a command of this session; panics naming `step` when it fails.
    fn command(&self, step: &str, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}/{path}", self.session);
        send(self.port, method, &path, body.as_ref())
            .unwrap_or_else(|e| self.fail(step, &e.to_string()))
    }

    /// The first element matching `css`, or `None` (no panic: what `wait_for` polls).
    fn try_find(&self, css: &str) -> Option<Element<'_>> {
        let path = format!("/session/{}/element", self.session);
        match send(self.port, "POST", &path, Some(&by_css(css))) {
            Ok(found) => Some(self.element(found, css)),
            Err(WebDriverError::Command { error, .. }) if error == "no such element" => None,
            Err(e) => self.fail(&format!("find `{css}`"), &e.to_string()),
        }
    }

    fn element(&self, reference: Value, css: &str) -> Element<'_> {
        match reference.get(ELEMENT_KEY).and_then(Value::as_str) {
            Some(id) => Element {
                browser: self,
                id: id.to_owned(),
                css: css.to_owned(),
            },
            None => self.fail(
                &format!("find `{css}`"),
                &format!("not an element: {reference}"),
            ),
        }
    }

    /// Panics with the step, the page's URL (when the browser can still tell it) and the cause.
    fn fail(&self, step: &str, cause: &str) -> ! {
        let url_path = format!("/session/{}/url", self.session);
        let url = match send(self.port, "GET", &url_path, None) {
            Ok(Value::String(url)) => url,
            _ => "(unknown: the browser does not answer)".to_owned(),
        };
        panic!("browser: cannot {step} on {url}: {cause}");
    }

    fn log_tail(&self) -> String {
        driver_log_tail(self.dir.path())
    }
}

impl Element<'_> {
    /// Clicks the element (scrolling it into view first, as a person would).
    pub fn click(&self) {
        self.command("click", "POST", "click", Some(json!({})));
    }

    /// Its rendered text.
    pub fn text(&self) -> String {
        let text = self.command("read the text of", "GET", "text", None);
        as_string(&text, "the element's text")
    }

    /// Its current `value` (what an input holds now, typed or set by script).
    pub fn value(&self) -> String {
        self.property("value").unwrap_or_default()
    }

    /// Its DOM property `name` as a string, `None` when unset (null or undefined).
    pub fn property(&self, name: &str) -> Option<String> {
        let step = format!("read the property `{name}` of");
        match self.command(&step, "GET", &format!("property/{name}"), None) {
            Value::Null => None,
            Value::String(s) => Some(s),
            other => Some(other.to_string()),
        }
    }

    /// Its HTML attribute `name`, `None` when absent.
    pub fn attribute(&self, name: &str) -> Option<String> {
        let step = format!("read the attribute `{name}` of");
        match self.command(&step, "GET", &format!("attribute/{name}"), None) {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Types `text` into the element, after what it already holds.
    pub fn send_keys(&self, text: &str) {
        self.command("type into", "POST", "value", Some(json!({ "text": text })));
    }

    /// Empties an input or text area.
    pub fn clear(&self) {
        self.command("clear", "POST", "clear", Some(json!({})));
    }

    fn command(&self, verb: &str, method: &str, path: &str, body: Option<Value>) -> Value {
        let step = format!("{verb} `{}`", self.css);
        let path = format!("element/{}/{path}", self.id);
        self.browser.command(&step, method, &path, body)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session lets chromedriver close Chromium the orderly way; whatever is left
        // (it failed, or the driver hangs) dies with the driver's process group below.
        if !self.session.is_empty() {
            let _ended = send(
                self.port,
                "DELETE",
                &format!("/session/{}", self.session),
                None,
            );
        }
        kill_group(&mut self.driver);
    }
}

/// Starts `chromedriver` on a free loopback port and waits for it to be ready.
fn spawn_driver(dir: &Path) -> Result<(Child, u16), String> {
    let port = free_port().map_err(|e| format!("no free loopback port: {e}"))?;
    let log = std::fs::File::create(dir.join("chromedriver.log"))
        .map_err(|e| format!("cannot create the driver's log: {e}"))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("cannot share the driver's log: {e}"))?;
    let mut command = Command::new("chromedriver");
    command
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    // Its own process group, which Chromium's processes inherit: killing the group on drop
    // leaves no orphan even when the driver cannot close the browser itself.
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut driver = command
        .spawn()
        .map_err(|e| format!("cannot run chromedriver: {e}"))?;
    match wait_ready(&mut driver, port) {
        Ok(()) => Ok((driver, port)),
        Err(reason) => {
            kill_group(&mut driver);
            Err(format!("{reason}{}", driver_log_tail(dir)))
        }
    }
}

fn free_port() -> std::io::Result<u16> {
    let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    Ok(probe.local_addr()?.port())
}

/// Polls the driver's `/status` until it says it is ready, it exits, or [`DRIVER_START`] passes.
fn wait_ready(driver: &mut Child, port: u16) -> Result<(), String> {
    let deadline = Instant::now() + DRIVER_START;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = driver.try_wait() {
            return Err(format!("chromedriver exited at start ({status})"));
        }
        let ready = send(port, "GET", "/status", None)
            .is_ok_and(|status| status.get("ready") == Some(&Value::Bool(true)));
        if ready {
            return Ok(());
        }
        std::thread::sleep(POLL);
    }
    Err(format!(
        "chromedriver was not ready on port {port} after {DRIVER_START:?}"
    ))
}

/// What the session asks for: headless Chromium with its own profile and a fixed window, and
/// none of the background traffic a desktop browser makes (tests use loopback only).
fn session_capabilities(profile: &Path) -> Value {
    let (width, height) = WINDOW_SIZE;
    let mut args = vec![
        "--headless=new".to_owned(),
        format!("--user-data-dir={}", profile.display()),
        format!("--window-size={width},{height}"),
        "--force-device-scale-factor=1".to_owned(),
        "--hide-scrollbars".to_owned(),
        // Containers often have a 64 MiB /dev/shm, too small for a renderer.
        "--disable-dev-shm-usage".to_owned(),
        "--no-first-run".to_owned(),
        "--no-default-browser-check".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        "--disable-extensions".to_owned(),
    ];
    // Chromium's sandbox refuses to run as root; as any other user it stays on.
    if is_root() {
        args.push("--no-sandbox".to_owned());
    }
    json!({
        "capabilities": {
            "alwaysMatch": {
                "browserName": "chrome",
                "pageLoadStrategy": "normal",
                "timeouts": { "implicit": 0, "pageLoad": 30_000, "script": 30_000 },
                "goog:chromeOptions": { "args": args },
                // What `console_errors` reads.
                "goog:loggingPrefs": { "browser": "ALL" },
            }
        }
    })
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let euid = unsafe { libc::geteuid() };
    euid == 0
}

/// Kills the driver's process group (driver and browser) and reaps the driver, then waits a
/// little for the group's other members to be gone, so a caller that looks finds none.
fn kill_group(driver: &mut Child) {
    let Ok(group) = libc::pid_t::try_from(driver.id()) else {
        return;
    };
    // SAFETY: kill has no memory preconditions; a negative pid names the process group
    // `spawn_driver` made, which only the driver and its descendants are in.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
    let _reaped = driver.wait();
    let deadline = Instant::now() + Duration::from_secs(5);
    while group_has_members(group) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
}

/// Whether a live (not zombie) process is still in process group `group`, per `/proc`.
fn group_has_members(group: libc::pid_t) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|stat| stat_group(&stat))
            .is_some_and(|(state, pgrp)| pgrp == group && state != 'Z')
    })
}

/// The state and process group of a `/proc/PID/stat` line. The command name in parentheses
/// may hold spaces and parentheses, so the fields are counted after its last `)`.
fn stat_group(stat: &str) -> Option<(char, libc::pid_t)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

fn driver_log_tail(dir: &Path) -> String {
    let log = std::fs::read_to_string(dir.join("chromedriver.log")).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(10)..].join("\n");
    if tail.is_empty() {
        String::new()
    } else {
        format!("\nchromedriver's log ends with:\n{tail}")
    }
}

fn by_css(css: &str) -> Value {
    json!({ "using": "css selector", "value": css })
}

fn as_string(value: &Value, what: &str) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => panic!("browser: expected {what} as a string, got {other}"),
    }
}

fn decode_base64(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text)
}

/// One WebDriver request: HTTP/1.1 on a fresh loopback connection, closed after the answer.
/// Returns the response's `value`, or its error when the status is not 2xx.
fn send(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Value, WebDriverError> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    stream.set_read_timeout(Some(COMMAND_TIMEOUT))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    parse_response(&read_message(&mut BufReader::new(stream))?)
}

/// The bytes of one HTTP response, read up to its end as its headers tell it: chromedriver
/// says `Connection: close` but keeps the connection open, so reading to EOF would hang.
fn read_message(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut raw = Vec::new();
    let mut length = None;
    let mut chunked = false;
    loop {
        let start = raw.len();
        if reader.read_until(b'\n', &mut raw)? == 0 {
            return Ok(raw); // EOF before the end of the headers: parse_response says so
        }
        let line = String::from_utf8_lossy(&raw[start..]).to_ascii_lowercase();
        let line = line.trim();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim() {
                "content-length" => length = value.trim().parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.contains("chunked"),
                _ => {}
            }
        }
    }
    if chunked {
        read_chunks(reader, &mut raw)?;
    } else if let Some(length) = length {
        let start = raw.len();
        raw.resize(start + length, 0);
        reader.read_exact(&mut raw[start..])?;
    } else {
        reader.read_to_end(&mut raw)?;
    }
    Ok(raw)
}

/// Appends a chunked body, as sent, up to and including its last (empty) chunk.
fn read_chunks(reader: &mut impl BufRead, raw: &mut Vec<u8>) -> std::io::Result<()> {
    loop {
        let start = raw.len();
        if reader.read_until(b'\n', raw)? == 0 {
            return Ok(());
        }
        let line = String::from_utf8_lossy(&raw[start..]).to_string();
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16).unwrap_or(0);
        // The chunk and its CRLF; after the last chunk, the blank line that ends the body.
        let start = raw.len();
        raw.resize(start + size + 2, 0);
        reader.read_exact(&mut raw[start..])?;
        if size == 0 {
            return Ok(());
        }
    }
}

/// Splits an HTTP/1.1 response into status and JSON body and maps WebDriver's error shape.
fn parse_response(raw: &[u8]) -> Result<Value, WebDriverError> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| WebDriverError::Malformed("no end of headers".to_owned()))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| WebDriverError::Malformed(format!("no status in `{head}`")))?;
    let chunked = head.lines().any(|line| {
        line.to_ascii_lowercase()
            .replace(' ', "")
            .starts_with("transfer-encoding:chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    let json: Value = serde_json::from_str(&body)
        .map_err(|e| WebDriverError::Malformed(format!("status {status}, body not JSON ({e})")))?;
    let value = json.get("value").cloned().unwrap_or(Value::Null);
    if (200..300).contains(&status) {
        return Ok(value);
    }
    let field = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default();
    Err(WebDriverError::Command {
        error: field("error").to_owned(),
        status,
        message: field("message")
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
    })
}

/// The payload of a `Transfer-Encoding: chunked` body.
fn dechunk(mut body: &str) -> Result<String, WebDriverError> {
    let mut out = String::new();
    loop {
        let (size, rest) = body
            .split_once("\r\n")
            .ok_or_else(|| WebDriverError::Malformed("a chunk without a size line".to_owned()))?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or_default().trim(), 16)
            .map_err(|_| WebDriverError::Malformed(format!("a bad chunk size `{size}`")))?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = rest
            .get(..size)
            .ok_or_else(|| WebDriverError::Malformed("a chunk shorter than its size".to_owned()))?;
        out.push_str(chunk);
        body = rest[size..].trim_start_matches("\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_yields_the_value() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n{\"value\":\"http://a\"}";
        assert_eq!(parse_response(raw).unwrap(), json!("http://a"));
    }

    #[test]
    fn an_error_yields_its_code_and_first_line() {
        let raw = b"HTTP/1.1 404 Not Found\r\n\r\n{\"value\":{\"error\":\"no such element\",\
                    \"message\":\"no such element: Unable to locate\\nStacktrace\"}}";
        match parse_response(raw) {
            Err(WebDriverError::Command {
                error,
                status,
                message,
            }) => {
                assert_eq!(error, "no such element");
                assert_eq!(status, 404);
                assert_eq!(message, "no such element: Unable to locate");
            }
            other => panic!("expected a command error, got {other:?}"),
        }
    }

    #[test]
    fn a_chunked_body_is_joined() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                    6\r\n{\"valu\r\n7\r\ne\":true\r\n1\r\n}\r\n0\r\n\r\n";
        assert_eq!(parse_response(raw).unwrap(), json!(true));
    }

    #[test]
    fn a_response_ends_where_its_headers_say() {
        let sent: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}trailing";
        let raw = read_message(&mut &sent[..]).unwrap();
        assert_eq!(raw, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        let sent: &[u8] = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                            2\r\n{}\r\n0\r\n\r\ntrailing";
        let raw = read_message(&mut &sent[..]).unwrap();
        assert!(
            raw.ends_with(b"{}\r\n0\r\n\r\n"),
            "{:?}",
            String::from_utf8_lossy(&raw)
        );
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(matches!(
            parse_response(b"hello"),
            Err(WebDriverError::Malformed(_))
        ));
        assert!(matches!(
            parse_response(b"HTTP/1.1 200 OK\r\n\r\nnot json"),
            Err(WebDriverError::Malformed(_))
        ));
    }

    #[test]
    fn stat_group_reads_past_a_name_with_parentheses() {
        let stat = "4242 (chrome (x) y) S 1 4200 4200 0 -1 4194560";
        assert_eq!(stat_group(stat), Some(('S', 4200)));
        assert_eq!(stat_group("garbage"), None);
    }
}
