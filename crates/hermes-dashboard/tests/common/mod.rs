//! Shared by the dashboard's HTTP tests: a dashboard started in-process on loopback for an
//! empty home (no supervisor) with settings from a fixed environment, and requests written by
//! hand so every header (Host included) is the test's.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test; each test file uses a part"
)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;

use hermes_dashboard::{Settings, router, serve};

pub const TOKEN: &str = "0123456789abcdef0123456789abcdef";

pub struct Dashboard {
    pub addr: SocketAddr,
    pub home: tempfile::TempDir,
}

/// Starts a dashboard for an empty home with no supervisor, configured by `env`.
pub fn start(host: &str, env: &[(&str, &str)]) -> Dashboard {
    let home = tempfile::tempdir().unwrap();
    let run_dir = home.path().join("run").to_string_lossy().into_owned();
    let mut env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.push(("HERMES_RUNTIME_DIR".into(), run_dir));
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
    s.write_all(text.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}

pub fn local(d: &Dashboard) -> String {
    format!("127.0.0.1:{}", d.addr.port())
}

pub fn token_mode() -> Dashboard {
    start("127.0.0.1", &[("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN)])
}
