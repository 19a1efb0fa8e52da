//! Constant load on a gateway for the restart tests: a stub upstream that answers chats (plain
//! and slowly streamed), and clients that send them the way a new user's would — each plain
//! request on a new connection, each stream read to its `[DONE]` — recording every failure.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Chunks in a streamed answer, one every [`CHUNK_EVERY`]: a stream lasts about 2 s, so every
/// restart has streams in flight.
pub const CHUNKS: usize = 20;
/// The pause between two streamed chunks.
pub const CHUNK_EVERY: Duration = Duration::from_millis(100);

/// An OpenAI-compatible upstream on loopback: `POST /v1/chat/completions` answers a plain
/// request after 20 ms, and a streamed one with [`CHUNKS`] chunks.
pub struct StubUpstream {
    pub port: u16,
}

impl StubUpstream {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let _ = answer(conn);
                });
            }
        });
        Self { port }
    }
}

fn answer(conn: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    // Python's clients (the agent's) write `"stream": true`, ours `"stream":true`.
    let stream = serde_json::from_slice::<serde_json::Value>(&body)
        .is_ok_and(|request| request["stream"] == true);
    let mut conn = conn;
    if !stream {
        std::thread::sleep(Duration::from_millis(20));
        let json = r#"{"id":"c1","object":"chat.completion","created":1,"model":"stub","choices":[{"index":0,"message":{"role":"assistant","content":"pong"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;
        write!(
            conn,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{json}",
            json.len()
        )?;
        return Ok(());
    }
    write!(
        conn,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
    )?;
    for k in 0..CHUNKS {
        std::thread::sleep(CHUNK_EVERY);
        write!(
            conn,
            "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"stub\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{k} \"}},\"finish_reason\":null}}]}}\n\n"
        )?;
        conn.flush()?;
    }
    write!(
        conn,
        "data: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"stub\",\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\ndata: [DONE]\n\n"
    )?;
    Ok(())
}

/// What went wrong with one request.
#[derive(Debug, Clone)]
pub struct Failure {
    /// When, since the load started.
    pub at: Duration,
    /// The connection was refused (nobody held the port).
    pub refused: bool,
    /// In words.
    pub what: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {:.2}s: {}", self.at.as_secs_f64(), self.what)
    }
}

/// Every failure, a line each.
pub fn lines(failures: &[&Failure]) -> String {
    failures.iter().map(|f| format!("\n  {f}")).collect()
}

/// What the clients saw.
#[derive(Debug, Default)]
pub struct Tally {
    pub plain_ok: usize,
    pub streams_ok: usize,
    pub failures: Vec<Failure>,
}

/// Clients sending chats until [`Load::finish`].
pub struct Load {
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    /// `plain` clients sending plain chats back to back, `streams` clients reading streams, to
    /// the gateway at `127.0.0.1:port` with `key`.
    pub fn start(port: u16, key: &str, plain: usize, streams: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Mutex::new(Tally::default()));
        let started = Instant::now();
        let threads = (0..plain + streams)
            .map(|k| {
                let (stop, tally, key) = (Arc::clone(&stop), Arc::clone(&tally), key.to_string());
                let stream = k >= plain;
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let result = chat(port, &key, stream);
                        let mut tally = tally.lock().unwrap();
                        match result {
                            Ok(()) if stream => tally.streams_ok += 1,
                            Ok(()) => tally.plain_ok += 1,
                            Err((refused, what)) => tally.failures.push(Failure {
                                at: started.elapsed(),
                                refused,
                                what: format!(
                                    "{}: {what}",
                                    if stream { "stream" } else { "plain" }
                                ),
                            }),
                        }
                    }
                })
            })
            .collect();
        Self {
            stop,
            tally,
            threads,
        }
    }

    /// Stops the clients once their current requests are done; what they saw.
    pub fn finish(self) -> Tally {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.tally.lock().unwrap())
    }
}

/// One chat on a new connection; `Err((refused, what))`.
fn chat(port: u16, key: &str, stream: bool) -> Result<(), (bool, String)> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).map_err(|e| {
        (
            e.kind() == std::io::ErrorKind::ConnectionRefused,
            e.to_string(),
        )
    })?;
    let broken = |e: std::io::Error| (false, e.to_string());
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(broken)?;
    let body = format!(
        r#"{{"model":"stub","stream":{stream},"messages":[{{"role":"user","content":"ping"}}]}}"#
    );
    write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(broken)?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer).map_err(broken)?;
    let status_ok = answer.starts_with("HTTP/1.1 200");
    let complete = if stream {
        (0..CHUNKS).all(|k| answer.contains(&format!("t{k} "))) && answer.contains("data: [DONE]")
    } else {
        answer.contains("pong")
    };
    if status_ok && complete {
        Ok(())
    } else {
        let head: String = answer.chars().take(300).collect();
        Err((
            false,
            format!("incomplete answer ({} bytes): {head:?}", answer.len()),
        ))
    }
}
