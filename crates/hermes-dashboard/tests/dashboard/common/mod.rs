//! Shared by the dashboard's HTTP tests: a dashboard started in-process on loopback for an
//! empty (or test-prepared) home, no supervisor, with settings from a fixed environment, and
//! requests written by hand so every header (Host included) is the test's.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test; each test file uses a part"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hermes_dashboard::{Settings, router, serve};
use serde_json::Value;

pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";

pub struct Dashboard {
    pub addr: SocketAddr,
    pub home: tempfile::TempDir,
}

impl Dashboard {
    /// `HERMES_HOME`.
    pub fn root(&self) -> &Path {
        self.home.path()
    }
}

/// Starts a dashboard for an empty home with no supervisor, configured by `env`.
pub fn start(host: &str, env: &[(&str, &str)]) -> Dashboard {
    start_in(tempfile::tempdir().unwrap(), host, env)
}

/// [`start`] for a `home` the test prepared (files written before the dashboard runs).
/// `HERMES_RUNTIME_DIR` and `HOME` are inside it unless `env` names them, so no socket or
/// file of the host's user is ever looked at.
pub fn start_in(home: tempfile::TempDir, host: &str, env: &[(&str, &str)]) -> Dashboard {
    let inside = |name: &str| home.path().join(name).to_string_lossy().into_owned();
    let mut env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Looked up first match first: the test's own values win.
    env.push(("HERMES_RUNTIME_DIR".into(), inside("run")));
    env.push(("HOME".into(), inside("user")));
    let lookup = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let settings = Settings::resolve(Some(host.into()), Some(0), &lookup).unwrap();
    let root: PathBuf = home.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // Always loopback: a test never listens beyond this machine, whatever host the
            // settings name (the guard's rules follow the settings).
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = router(root, settings, Arc::new(lookup));
            serve(listener, app).await.unwrap();
        });
    });
    Dashboard {
        addr: rx.recv().unwrap(),
        home,
    }
}

pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    /// The body as JSON (a body that is not JSON fails the test, showing it).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// One request with `Connection: close`; `headers` are complete lines (`Name: value`).
pub fn request(d: &Dashboard, method: &str, path: &str, host: &str, headers: &[String]) -> Answer {
    send(d, method, path, host, headers, "")
}

/// [`request`] with a body (sent with its `Content-Length`; add a `Content-Type` header).
pub fn send(
    d: &Dashboard,
    method: &str,
    path: &str,
    host: &str,
    headers: &[String],
    body: &str,
) -> Answer {
    let mut raw = Vec::new();
    let read = open(d, method, path, host, headers, body).read_to_end(&mut raw);
    // A server that refuses a body too large answers before reading it all and closes; the
    // unread rest can turn the close into a reset after the answer arrived.
    match read {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset && !raw.is_empty() => {}
        Err(e) => panic!("reading the answer to {method} {path}: {e}"),
    }
    // Lossy: a test about bytes that are not UTF-8 still gets the answer to look at.
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// Writes the request of [`send`] and leaves the connection open for the answer (a stream
/// is read as it comes).
pub fn open(
    d: &Dashboard,
    method: &str,
    path: &str,
    host: &str,
    headers: &[String],
    body: &str,
) -> TcpStream {
    let mut s = TcpStream::connect(d.addr).unwrap();
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    if method != "GET" || !body.is_empty() {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    text.push_str(body);
    // Refused early (a body over a limit), the server may close before the body is all
    // written: the answer is still there to read.
    if let Err(e) = s.write_all(text.as_bytes()) {
        assert!(
            matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ),
            "writing {method} {path}: {e}"
        );
    }
    s
}

pub fn local(d: &Dashboard) -> String {
    format!("127.0.0.1:{}", d.addr.port())
}

/// The environment of [`token_mode`].
pub const TOKEN_ENV: [(&str, &str); 1] = [("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN)];

/// A dashboard on loopback in token mode (the usual `hermes dashboard`).
pub fn token_mode() -> Dashboard {
    start("127.0.0.1", &TOKEN_ENV)
}

/// The session token as a request header (authentication and CSRF).
pub fn token_header() -> String {
    format!("X-Hermes-Session-Token: {TOKEN}")
}

/// A signed-in GET with the dashboard's own Host.
pub fn get(d: &Dashboard, path: &str) -> Answer {
    request(d, "GET", path, &local(d), &[token_header()])
}

/// A signed-in POST without a body, with the dashboard's own Host.
pub fn post(d: &Dashboard, path: &str) -> Answer {
    request(d, "POST", path, &local(d), &[token_header()])
}

/// [`get`] that must answer `status` with JSON: the JSON.
pub fn get_json(d: &Dashboard, path: &str, status: u16) -> Value {
    let a = get(d, path);
    assert_eq!(a.status, status, "{path}: {}", a.body);
    a.json()
}

/// An answer whose body is bytes (an archive), not text.
pub struct RawAnswer {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl RawAnswer {
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }

    /// The body as JSON (a body that is not JSON fails the test, showing it).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// One request with a body of bytes (`Content-Length` set from it), the answer as bytes; with
/// the dashboard's own Host.
pub fn send_bytes(
    d: &Dashboard,
    method: &str,
    path: &str,
    headers: &[String],
    body: &[u8],
) -> RawAnswer {
    let mut s = TcpStream::connect(d.addr).unwrap();
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
        local(d)
    );
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    if method != "GET" || !body.is_empty() {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    s.write_all(text.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_raw(s)
}

/// Reads a whole answer (`Connection: close`) as head and body bytes.
pub fn read_raw(mut s: TcpStream) -> RawAnswer {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP head");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    RawAnswer {
        status,
        head,
        body: raw[split + 4..].to_vec(),
    }
}

/// The ids of a session list's rows (`GET /api/sessions`).
pub fn session_ids(list: &serde_json::Value) -> Vec<String> {
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect()
}

/// The text of `css` in the browser's page, or "" (read in one script: rows are re-rendered
/// between two WebDriver calls).
pub fn page_text(browser: &hermes_test_support::browser::Browser, css: &str) -> String {
    let script =
        format!("var e = document.querySelector(\"{css}\"); return e ? e.textContent : '';");
    browser.execute(&script).as_str().unwrap_or("").to_string()
}

/// Whether `css` is in the browser's page and shown.
pub fn page_visible(browser: &hermes_test_support::browser::Browser, css: &str) -> bool {
    let script = format!(
        "var e = document.querySelector(\"{css}\"); return !!e && !e.hidden && e.offsetParent !== null;"
    );
    browser.execute(&script).as_bool().unwrap_or(false)
}

/// Runs `code` with the agent's interpreter on the profile at `dir` (`HERMES_HOME`) and returns
/// what it printed; a failure fails the test with the agent's stderr.
pub fn agent_python(agent: &hermes_test_support::OriginalAgent, dir: &Path, code: &str) -> String {
    let out = std::process::Command::new(&agent.python)
        .args(["-c", code])
        .env("HERMES_HOME", dir)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Plants what a boot leaves when a new image could resolve none of the plugin packages
/// (`hermes_deps::generations::resolve`): an empty generation 2 active that keeps the request
/// `honcho-ai==2.2.0`, and the report naming it unavailable.
pub fn plant_unavailable_plugins(target: &Path) {
    use hermes_deps::generations::{
        GenerationRecord, Origin, Request, Requester, Resolution, ResolutionReport, Store,
        Unavailable, resolve::REPORT_FILE,
    };
    let store = Store::for_target(target);
    store.create().unwrap();
    let dir = store.path_of(2);
    std::fs::create_dir_all(&dir).unwrap();
    let spec = "honcho-ai==2.2.0".to_string();
    let missing = Unavailable {
        spec: spec.clone(),
        why: "no package index reachable".into(),
    };
    GenerationRecord {
        format: 1,
        id: 2,
        parent: Some(1),
        origin: Origin::Unresolved,
        created_at: 0,
        abi: "3.11:.cpython-311-x86_64-linux-gnu.so".into(),
        core_lock: "0123456789abcdef".into(),
        requests: vec![Request {
            spec,
            by: Requester::Dashboard,
            at: 0,
        }],
        resolved: Vec::new(),
        unavailable: vec![missing.clone()],
    }
    .write(&dir)
    .unwrap();
    store.point_to(2).unwrap();
    let report = ResolutionReport {
        at: 0,
        resolution: Resolution::Unavailable {
            from: 1,
            to: 2,
            packages: vec![missing],
        },
        reason: "the interpreter changed: 3.13 → 3.11".into(),
        fix: "hermes plugins repair".into(),
    };
    std::fs::write(
        store.root().join(REPORT_FILE),
        serde_json::to_string(&report).unwrap(),
    )
    .unwrap();
}
