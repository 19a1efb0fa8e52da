//! The Logs page's API over real HTTP on loopback, against log files the test writes where
//! the supervisor would (`<home>/logs/<service>/current`): the last lines, the event stream
//! resumed by `Last-Event-ID` (exactly what follows, across a rotation), names that try to
//! leave the log directory, the download.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Dashboard, local, token_header, token_mode};
use serde_json::Value;

impl Dashboard {
    /// The log file of `service` (created with its directory when missing).
    fn log(&self, service: &str) -> PathBuf {
        let dir = self.home.path().join("logs").join(service);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("current")
    }

    /// Sends a signed-in GET with `headers` (complete lines); the open connection.
    fn send(&self, path: &str, headers: &[String]) -> TcpStream {
        let mut all = vec![token_header()];
        all.extend_from_slice(headers);
        common::open(self, "GET", path, &local(self), &all, "")
    }

    /// A complete GET: status, head, body (chunked bodies decoded).
    fn get(&self, path: &str) -> Answer {
        let mut raw = Vec::new();
        self.send(path, &[]).read_to_end(&mut raw).unwrap();
        let split = find(&raw, b"\r\n\r\n").unwrap();
        let head = String::from_utf8(raw[..split].to_vec()).unwrap();
        let mut body = raw[split + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = Chunked::default().decode(&body);
        }
        Answer {
            status: head.split(' ').nth(1).unwrap().parse().unwrap(),
            head,
            body,
        }
    }

    fn json(&self, path: &str) -> (u16, Value) {
        let a = self.get(path);
        (a.status, serde_json::from_slice(&a.body).unwrap())
    }
}

struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn append(path: &Path, text: &str) {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
}

/// An incremental decoder of a chunked body: what is complete is decoded, the rest kept.
#[derive(Default)]
struct Chunked {
    pending: Vec<u8>,
}

impl Chunked {
    fn decode(&mut self, more: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(more);
        let mut out = Vec::new();
        while let Some(eol) = find(&self.pending, b"\r\n") {
            let size_text = String::from_utf8_lossy(&self.pending[..eol]).to_string();
            let size = usize::from_str_radix(size_text.trim(), 16).unwrap();
            if self.pending.len() < eol + 2 + size + 2 {
                break;
            }
            out.extend_from_slice(&self.pending[eol + 2..eol + 2 + size]);
            self.pending.drain(..eol + 2 + size + 2);
            if size == 0 {
                break;
            }
        }
        out
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
struct Sse {
    event: String,
    id: Option<String>,
    data: Value,
}

/// A live event stream over one connection.
struct Stream {
    conn: TcpStream,
    chunked: Chunked,
    text: String,
    head_seen: bool,
    status: u16,
}

impl Stream {
    /// Opens `path` (an events URL) with `headers`; waits for the answer's head.
    fn open(d: &Dashboard, path: &str, headers: &[String]) -> Stream {
        let conn = d.send(path, headers);
        conn.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut s = Stream {
            conn,
            chunked: Chunked::default(),
            text: String::new(),
            head_seen: false,
            status: 0,
        };
        let mut raw = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while find(&raw, b"\r\n\r\n").is_none() {
            assert!(Instant::now() < deadline, "no answer head");
            s.read_into(&mut raw);
        }
        let split = find(&raw, b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        s.status = head.split(' ').nth(1).unwrap().parse().unwrap();
        s.head_seen = true;
        let body = s.chunked.decode(&raw[split + 4..]);
        s.text.push_str(&String::from_utf8_lossy(&body));
        s
    }

    fn read_into(&mut self, raw: &mut Vec<u8>) {
        let mut buf = [0u8; 8192];
        match self.conn.read(&mut buf) {
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("reading the stream: {e}"),
        }
    }

    /// The next event (keepalive comments skipped), waiting up to 10 s.
    fn next(&mut self) -> Sse {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                if let Some(event) = parse_event(&block) {
                    return event;
                }
                continue;
            }
            assert!(
                Instant::now() < deadline,
                "no event; so far: {:?}",
                self.text
            );
            let mut raw = Vec::new();
            self.read_into(&mut raw);
            let body = self.chunked.decode(&raw);
            self.text.push_str(&String::from_utf8_lossy(&body));
        }
    }

    /// The events of the next `lines` event on, merging batches until `want` lines came.
    fn lines(&mut self, want: usize) -> (Vec<String>, String) {
        let mut got = Vec::new();
        let mut last_id = String::new();
        while got.len() < want {
            let e = self.next();
            assert_eq!(e.event, "lines", "{e:?}");
            got.extend(
                e.data["lines"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap().to_string()),
            );
            last_id = e.id.unwrap();
        }
        (got, last_id)
    }
}

fn parse_event(block: &str) -> Option<Sse> {
    let mut event = None;
    let mut id = None;
    let mut data = String::new();
    for line in block.lines() {
        if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        }
    }
    Some(Sse {
        event: event?,
        id,
        data: serde_json::from_str(&data).unwrap(),
    })
}

#[test]
fn the_last_lines_come_with_the_cursor_of_their_end() {
    let d = token_mode();
    let log = d.log("ticker");
    std::fs::write(&log, "one\ntwo\nthree\n").unwrap();
    let (status, v) = d.json("/api/logs/ticker?lines=2");
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["lines"], serde_json::json!(["two", "three"]));
    assert_eq!(v["offset"], 14);
    let inode = std::fs::metadata(&log).unwrap().ino();
    assert_eq!(v["cursor"], format!("{inode}:14"));
    // A huge number is capped, not refused; the default shows everything here.
    let (status, v) = d.json("/api/logs/ticker?lines=99999999");
    assert_eq!((status, v["lines"].as_array().unwrap().len()), (200, 3));
    let (status, v) = d.json("/api/logs/ticker?lines=lots");
    assert_eq!(status, 400);
    assert!(v["detail"].as_str().unwrap().contains("lines"), "{v}");
    assert!(v["hint"].is_string(), "{v}");
}

#[test]
fn the_list_has_the_services_with_a_log_even_without_a_supervisor() {
    let d = token_mode();
    std::fs::write(d.log("ticker"), "x\n").unwrap();
    let gw = d.home.path().join("logs/gateways/work");
    std::fs::create_dir_all(&gw).unwrap();
    std::fs::write(gw.join("current"), "y\n").unwrap();
    let (status, v) = d.json("/api/logs");
    assert_eq!(status, 200);
    assert_eq!(v["supervisor"]["reachable"], false);
    let names: Vec<&str> = v["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["gateway-work", "ticker"]);
    // And the gateway's log is read from the gateways' directory.
    let (_, v) = d.json("/api/logs/gateway-work");
    assert_eq!(v["lines"], serde_json::json!(["y"]));
}

#[test]
fn names_that_leave_the_log_directory_are_refused_with_a_hint() {
    let d = token_mode();
    // Something a traversal would reach: `<home>/logs/current` and `<home>/secret/current`.
    std::fs::create_dir_all(d.home.path().join("logs")).unwrap();
    std::fs::write(d.home.path().join("logs/current"), "not a service's\n").unwrap();
    std::fs::create_dir_all(d.home.path().join("secret")).unwrap();
    std::fs::write(d.home.path().join("secret/current"), "secret\n").unwrap();
    for name in [
        "..%2Fsecret",
        "..",
        "gateway-..",
        "a%2Fb",
        "%00",
        "x%00y",
        ".hidden",
    ] {
        for tail in ["", "/events", "/download"] {
            let a = d.get(&format!("/api/logs/{name}{tail}"));
            assert_eq!(a.status, 400, "{name}{tail}");
            let v: Value = serde_json::from_slice(&a.body).unwrap();
            assert!(
                v["detail"]
                    .as_str()
                    .unwrap()
                    .contains("invalid service name"),
                "{name}{tail}: {v}"
            );
            assert!(v["hint"].is_string(), "{v}");
        }
    }
    let (status, v) = d.json("/api/logs/ghost");
    assert_eq!(status, 404);
    assert!(
        v["detail"].as_str().unwrap().contains("no log for `ghost`"),
        "{v}"
    );
    assert!(v["hint"].is_string());
    let a = d.get("/api/logs/ghost/events");
    assert_eq!(a.status, 404);
}

#[test]
fn the_stream_resumes_from_last_event_id_with_exactly_what_follows() {
    let d = token_mode();
    let log = d.log("ticker");
    std::fs::write(&log, "a\nb\n").unwrap();
    let (_, tail) = d.json("/api/logs/ticker?lines=10");
    let cursor = tail["cursor"].as_str().unwrap().to_string();
    // Written while no one listened: given on resuming from the tail's cursor.
    append(&log, "c\nd\n");
    let mut s = Stream::open(
        &d,
        "/api/logs/ticker/events",
        &[format!("Last-Event-ID: {cursor}")],
    );
    assert_eq!(s.status, 200);
    let start = s.next();
    assert_eq!(start.event, "start");
    assert_eq!(start.id.as_deref(), Some(cursor.as_str()));
    assert_eq!(start.data["restarted"], false);
    assert_eq!(s.lines(2).0, ["c", "d"]);
    // Live: appended while connected, an unfinished line only once it is complete.
    append(&log, "e\nhal");
    let (lines, _) = s.lines(1);
    assert_eq!(lines, ["e"]);
    append(&log, "f done\n");
    let (lines, last_id) = s.lines(1);
    assert_eq!(lines, ["half done"]);
    drop(s);
    // Gone, then back with the last id: exactly the lines written meanwhile.
    append(&log, "g\nh\n");
    let mut s = Stream::open(
        &d,
        "/api/logs/ticker/events",
        &[format!("Last-Event-ID: {last_id}")],
    );
    assert_eq!(s.next().event, "start");
    assert_eq!(s.lines(2).0, ["g", "h"]);
    // `?from=` does the same for a first connection, and Last-Event-ID wins over it.
    let mut s = Stream::open(
        &d,
        &format!(
            "/api/logs/ticker/events?from={}",
            cursor.replace(':', "%3A")
        ),
        &[format!("Last-Event-ID: {last_id}")],
    );
    assert_eq!(s.next().id.as_deref(), Some(last_id.as_str()));
    assert_eq!(s.lines(2).0, ["g", "h"]);
    let mut s = Stream::open(
        &d,
        &format!(
            "/api/logs/ticker/events?from={}",
            cursor.replace(':', "%3A")
        ),
        &[],
    );
    assert_eq!(s.next().event, "start");
    assert_eq!(s.lines(6).0, ["c", "d", "e", "half done", "g", "h"]);
}

#[test]
fn a_stream_without_a_cursor_starts_at_the_end_and_a_bad_cursor_is_refused() {
    let d = token_mode();
    let log = d.log("ticker");
    std::fs::write(&log, "old\n").unwrap();
    let mut s = Stream::open(&d, "/api/logs/ticker/events", &[]);
    assert_eq!(s.next().event, "start");
    append(&log, "new\n");
    assert_eq!(s.lines(1).0, ["new"]);
    let a = d.get("/api/logs/ticker/events?from=yesterday");
    assert_eq!(a.status, 400);
    let v: Value = serde_json::from_slice(&a.body).unwrap();
    assert!(v["detail"].as_str().unwrap().contains("cursor"), "{v}");
}

#[test]
fn rotation_and_truncation_are_said_and_followed() {
    let d = token_mode();
    let log = d.log("ticker");
    std::fs::write(&log, "a\n").unwrap();
    let mut s = Stream::open(&d, "/api/logs/ticker/events", &[]);
    assert_eq!(s.next().event, "start");
    append(&log, "b\n");
    let (_, before_rotation) = s.lines(1);
    // The supervisor's rotation: `current` renamed to `current.1`, a new `current`.
    append(&log, "last of old\n");
    std::fs::rename(&log, log.with_file_name("current.1")).unwrap();
    std::fs::write(&log, "first of new\n").unwrap();
    let mut events = Vec::new();
    while !events
        .iter()
        .any(|e: &Sse| e.data["lines"] == serde_json::json!(["first of new"]))
    {
        events.push(s.next());
    }
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["lines", "rotated", "lines"], "{events:?}");
    assert_eq!(events[0].data["lines"], serde_json::json!(["last of old"]));
    assert_eq!(events[1].data["truncated"], false);
    drop(s);
    // Resuming from before the rotation: the rest of the archive, then the new file.
    let mut s = Stream::open(
        &d,
        "/api/logs/ticker/events",
        &[format!("Last-Event-ID: {before_rotation}")],
    );
    assert_eq!(s.next().data["restarted"], false);
    assert_eq!(s.next().data["lines"], serde_json::json!(["last of old"]));
    assert_eq!(s.next().event, "rotated");
    assert_eq!(s.lines(1).0, ["first of new"]);
    // Truncated in place while followed: said, then read from the beginning.
    std::fs::write(&log, "x\n").unwrap();
    let e = s.next();
    assert_eq!(
        (e.event.as_str(), &e.data["truncated"]),
        ("rotated", &Value::Bool(true))
    );
    assert_eq!(s.lines(1).0, ["x"]);
    drop(s);
    // A cursor in a file that is gone: from the beginning of the current one, and said.
    let mut s = Stream::open(&d, "/api/logs/ticker/events?from=1%3A999", &[]);
    assert_eq!(s.next().data["restarted"], true);
    assert_eq!(s.lines(1).0, ["x"]);
}

#[test]
fn the_download_is_the_whole_file_as_an_attachment() {
    let d = token_mode();
    let log = d.log("ticker");
    // Larger than one chunk of the stream, with bytes that are not UTF-8 kept as they are.
    let mut content: Vec<u8> = (0..20_000)
        .flat_map(|i| format!("2026-11-30T10:00:00Z line {i}\n").into_bytes())
        .collect();
    content.extend_from_slice(b"raw \xff\xfe bytes\n");
    std::fs::write(&log, &content).unwrap();
    let a = d.get("/api/logs/ticker/download");
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("content-type").as_deref(),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(
        a.header("content-disposition").as_deref(),
        Some("attachment; filename=\"ticker.log\"")
    );
    assert_eq!(a.body.len(), content.len());
    assert!(a.body == content, "the download differs from the file");
    assert_eq!(d.get("/api/logs/ghost/download").status, 404);
}

/// How many of this process's descriptors are open on `path` (the in-process dashboard's
/// followers hold one each).
fn open_on(path: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
        .count()
}

#[test]
fn a_stream_stops_following_when_its_client_goes() {
    let d = token_mode();
    let log = d.log("ticker");
    std::fs::write(&log, "a\n").unwrap();
    let mut s = Stream::open(&d, "/api/logs/ticker/events", &[]);
    assert_eq!(s.next().event, "start");
    assert_eq!(open_on(&log), 1, "the stream's follower holds the log open");
    let gone = Instant::now();
    drop(s);
    while open_on(&log) > 0 {
        assert!(
            gone.elapsed() < Duration::from_secs(5),
            "the follower outlived its client"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_page_and_its_endpoints_are_described() {
    let d = token_mode();
    let page = d.get("/logs?service=ticker");
    assert_eq!(page.status, 200);
    let html = String::from_utf8(page.body).unwrap();
    for id in [
        "log-service",
        "log-filter",
        "log-download",
        "log-paused",
        "\"log\"",
    ] {
        assert!(html.contains(id), "{id}");
    }
    assert!(html.contains("assets/logs.js"));
    let (_, doc) = d.json("/api/openapi.json");
    for path in [
        "/api/logs",
        "/api/logs/{service}",
        "/api/logs/{service}/events",
        "/api/logs/{service}/download",
    ] {
        assert!(doc["paths"][path]["get"].is_object(), "{path}");
    }
}
