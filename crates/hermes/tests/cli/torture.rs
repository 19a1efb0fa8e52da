//! The crash-consistency torture run, short (CI) or long (`bench/torture/run.sh`): `hermes up
//! -d` and the native gateway in front of a stub model, clients writing sessions all along
//! (plain turns and streams, each turn's words unique), while the harness, at random from a
//! fixed seed: SIGKILLs the gateway, SIGKILLs everything at once (the supervisor and every
//! service: a container killed) and starts it again, restarts the gateway, stops everything
//! cleanly and starts it again, backs up, and — as root, on a volume of its own — fills the
//! volume for a moment.
//!
//! After every event: `PRAGMA integrity_check` is `ok` on every SQLite file of the volume, and
//! the gateway serves again within its deadline. At the end: every turn a client saw
//! acknowledged (a plain 200, or a stream that ended with `[DONE]` and no error event) is in
//! `state.db`. `HERMES_TORTURE_EVENTS` sets how many events (CI: 40), `HERMES_TORTURE_SEED` the
//! seed; the tally is printed as one JSON line (`torture: {...}`), which the bench collects.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_test_support::disk::SmallDisk;
use hermes_test_support::poll;

use crate::load::StubUpstream;
use crate::util::{Detached, TEST_API_KEY, TestContext, free_port};

/// A small deterministic generator (xorshift64*): the same seed, the same run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One turn in session `session` with the unique `words`; `Ok(true)` when the client saw it
/// acknowledged, `Ok(false)` when it was refused or broken (never counted as stored).
fn turn(port: u16, session: &str, words: &str, stream: bool) -> bool {
    let Ok(mut conn) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let body = format!(
        r#"{{"model":"stub","stream":{stream},"messages":[{{"role":"user","content":"{words}"}}]}}"#
    );
    let sent = write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {TEST_API_KEY}\r\nx-hermes-session-id: {session}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut answer = String::new();
    if sent.is_err() || conn.read_to_string(&mut answer).is_err() {
        return false;
    }
    if !answer.starts_with("HTTP/1.1 200") {
        return false;
    }
    if stream {
        answer.contains("data: [DONE]") && !answer.contains("\"error\"")
    } else {
        answer.contains("pong")
    }
}

/// Clients writing their own sessions until stopped: the words of every acknowledged turn.
struct Writers {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeSet<String>>>,
    sent: Arc<Mutex<usize>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Writers {
    fn start(port: u16, clients: usize) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(BTreeSet::new()));
        let sent = Arc::new(Mutex::new(0));
        let threads = (0..clients)
            .map(|k| {
                let (stop, acked, sent) = (stop.clone(), acked.clone(), sent.clone());
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        n += 1;
                        let words = format!("client{k}-turn{n}");
                        let ok = turn(port, &format!("torture-{k}"), &words, n % 3 == 0);
                        *sent.lock().unwrap() += 1;
                        if ok {
                            acked.lock().unwrap().insert(words);
                        } else {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                })
            })
            .collect();
        Writers {
            stop,
            acked,
            sent,
            threads,
        }
    }

    fn finish(self) -> (BTreeSet<String>, usize) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
        let acked = std::mem::take(&mut *self.acked.lock().unwrap());
        let sent = *self.sent.lock().unwrap();
        (acked, sent)
    }
}

/// Every SQLite file of the volume, by its header.
fn databases(root: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() && entry.file_name() != "backups" {
                dirs.push(path);
            } else if kind.is_file() {
                let mut head = [0u8; 16];
                let is_db = std::fs::File::open(&path)
                    .and_then(|mut f| f.read_exact(&mut head))
                    .is_ok()
                    && &head == b"SQLite format 3\0";
                if is_db {
                    found.push(path);
                }
            }
        }
    }
    found
}

/// `integrity_check` of every database: the ones that are not `ok`, with what it said.
fn corrupt(root: &Path) -> Vec<String> {
    databases(root)
        .into_iter()
        .filter_map(|db| {
            let conn = rusqlite::Connection::open_with_flags(
                &db,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .ok()?;
            let _ = conn.busy_timeout(Duration::from_secs(10));
            let said: String = conn
                .query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap_or_else(|e| e.to_string());
            (said != "ok").then(|| format!("{}: {said}", db.display()))
        })
        .collect()
}

/// The user turns `state.db` holds.
fn stored(root: &Path) -> BTreeSet<String> {
    let conn = rusqlite::Connection::open(root.join("state.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT content FROM messages WHERE role = 'user'")
        .unwrap();
    stmt.query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .flatten()
        .collect()
}

fn gateway_pid(t: &TestContext) -> Option<i32> {
    let row = t.service("gateway-default");
    (row["state"] == "up")
        .then(|| row["pid"].as_i64())
        .flatten()
        .map(|p| p as i32)
}

fn kill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// Every process of the supervisor's services and the supervisor itself, SIGKILLed at once.
fn kill_everything(t: &TestContext, up: &mut Detached) {
    let out = t.run(&["service", "status", "--json"]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    kill(up.pid());
    for row in rows.as_array().into_iter().flatten() {
        if let Some(pid) = row["pid"].as_i64() {
            kill(pid as i32);
        }
    }
    up.stopped();
    // Until the kernel has let go of the supervisor's lock.
    poll::until_true("the supervisor gone", Duration::from_secs(30), || {
        !t.run(&["service", "status"]).status.success()
    });
}

fn serving(t: &TestContext, deadline: Duration) {
    poll::until_true("the gateway serving again", deadline, || {
        gateway_pid(t).is_some()
    });
}

#[test]
fn kills_stops_backups_and_a_full_volume_corrupt_nothing_and_lose_no_acknowledged_turn() {
    let events: usize = std::env::var("HERMES_TORTURE_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let seed: u64 = std::env::var("HERMES_TORTURE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_cafe);
    let t = TestContext::new();
    // As root, the volume is a small file system of its own, which the run fills at times.
    let root_user = nix::unistd::geteuid().is_root();
    let disk = root_user.then(|| SmallDisk::mount(&t.root(), "256m"));
    let upstream = StubUpstream::start();
    let port = free_port();
    std::fs::create_dir_all(t.root()).unwrap();
    std::fs::write(
        t.root().join("config.yaml"),
        format!(
            "model:\n  default: stub\n  base_url: http://127.0.0.1:{}/v1\n  api_key: upstream-key\n",
            upstream.port
        ),
    )
    .unwrap();
    std::fs::write(
        t.root().join(".env"),
        format!("API_SERVER_PORT={port}\nAPI_SERVER_KEY={TEST_API_KEY}\n"),
    )
    .unwrap();
    let (mut up, _) = t.up_detached(&[]);
    serving(&t, Duration::from_secs(60));
    let writers = Writers::start(port, 4);
    let mut rng = Rng(seed | 1);
    let mut tally = std::collections::BTreeMap::<&str, usize>::new();
    let mut problems = Vec::new();
    let mut damaged = Vec::new();
    let started = Instant::now();
    for event in 0..events {
        std::thread::sleep(Duration::from_millis(200 + rng.below(600)));
        let kinds: &[&str] = if disk.is_some() {
            &[
                "kill-gateway",
                "kill-everything",
                "restart",
                "stop-start",
                "backup",
                "full-volume",
            ]
        } else {
            &[
                "kill-gateway",
                "kill-everything",
                "restart",
                "stop-start",
                "backup",
            ]
        };
        let kind = kinds[rng.below(kinds.len() as u64) as usize];
        *tally.entry(kind).or_default() += 1;
        match kind {
            "kill-gateway" => {
                if let Some(pid) = gateway_pid(&t) {
                    kill(pid);
                }
            }
            "kill-everything" => {
                // A few ms into a restart, at times: a kill during start-up.
                if rng.below(2) == 0 {
                    let _ = t.cmd(&["gateway", "restart", "--no-wait"]).output();
                    std::thread::sleep(Duration::from_millis(rng.below(50)));
                }
                kill_everything(&t, &mut up);
                up = t.up_detached(&[]).0;
            }
            "restart" => {
                let _ = t.run(&["gateway", "restart"]);
            }
            "stop-start" => {
                let _ = t.run(&["down"]);
                up.stopped();
                up = t.up_detached(&[]).0;
            }
            "backup" => {
                let out = t.run(&["backup", "create", "--keep", "2"]);
                if !out.status.success() {
                    let said = String::from_utf8_lossy(&out.stderr);
                    // A full volume fails a backup, saying so; anything else is a problem.
                    if !said.contains("No space") && !said.contains("no space") {
                        problems.push(format!("event {event}: backup failed: {said}"));
                    }
                }
            }
            "full-volume" => {
                let disk = disk.as_ref().unwrap();
                disk.fill("ballast", 0);
                std::thread::sleep(Duration::from_millis(300 + rng.below(700)));
                let _ = std::fs::remove_file(disk.path().join("ballast"));
            }
            _ => unreachable!(),
        }
        serving(&t, Duration::from_secs(60));
        for bad in corrupt(&t.root()) {
            damaged.push(format!("event {event} ({kind}): {bad}"));
        }
    }
    let (acked, sent) = writers.finish();
    let _ = t.run(&["down"]);
    up.stopped();
    for bad in corrupt(&t.root()) {
        damaged.push(format!("at the end: {bad}"));
    }
    let stored = stored(&t.root());
    let lost: Vec<&String> = acked.difference(&stored).collect();
    println!(
        "torture: {}",
        serde_json::json!({
            "events": events, "seed": seed, "by_kind": tally, "seconds": started.elapsed().as_secs(),
            "turns_sent": sent, "turns_acknowledged": acked.len(), "lost": lost.len(),
            "corrupt": damaged.len(), "other_problems": problems.len(), "full_volume": disk.is_some(),
        })
    );
    assert!(damaged.is_empty(), "{damaged:#?}");
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        lost.is_empty(),
        "{} acknowledged turns lost: {lost:?}",
        lost.len()
    );
    assert!(
        acked.len() > events,
        "the clients got through: {} acknowledged",
        acked.len()
    );
}
