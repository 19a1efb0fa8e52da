//! Backups taken while 20 writers are busy, as an operator takes them on a live volume: the
//! native gateway in front of a stub upstream, [`CHATS`] clients chatting through its HTTP API
//! (each in its own session, so every answered turn is two rows of `state.db`'s `messages`,
//! stored before the answer is sent) and [`CONFIG_WRITERS`] loops of `hermes config set` on
//! `config.yaml`. [`BACKUPS`] backups are taken one after another mid-load, what every writer
//! had committed recorded just before each `hermes backup create` starts; each must succeed,
//! `hermes backup verify` must pass it, and `hermes backup restore --yes` into a fresh volume
//! must give databases that pass `integrity_check` and hold every turn committed before that
//! backup started, and a `config.yaml` that parses with every value set before it (or a later
//! one). The restored databases are read with Python's `sqlite3`, not with our code.
//!
//! Several backups, because what goes wrong under load is a race: a file that a writer renames
//! away between the backup's walk and its read (the `.config.yaml.tmp.<pid>.<n>` of an atomic
//! write) failed the backup, before `create` learnt to leave such files out, only when the walk
//! happened to list it (one run in three to five with five backups).

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_test_support::poll;

use crate::load::StubUpstream;
use crate::util::{Running, TEST_API_KEY, TestContext, api_env, free_port, render};

/// Clients chatting through the gateway.
const CHATS: usize = 14;
/// Loops of `hermes config set`.
const CONFIG_WRITERS: usize = 6;
/// Backups taken one after another while they write, each checked.
const BACKUPS: usize = 5;

/// One backup taken under load: its archive, what the writers had committed when it started
/// and when it ended (turns per chat client, last value per config writer), and how long it took.
struct Taken {
    archive: std::path::PathBuf,
    before: (Vec<usize>, Vec<usize>),
    after: (Vec<usize>, Vec<usize>),
    took: Duration,
}

/// One plain chat in `session` on a new connection; `Err` says what went wrong.
fn chat(port: u16, session: &str, text: &str) -> Result<(), String> {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|e| e.to_string())?;
    let body = serde_json::json!({
        "model": "stub",
        "messages": [{"role": "user", "content": text}],
    })
    .to_string();
    write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {TEST_API_KEY}\r\nx-hermes-session-id: {session}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| e.to_string())?;
    let mut answer = String::new();
    conn.read_to_string(&mut answer)
        .map_err(|e| e.to_string())?;
    if answer.starts_with("HTTP/1.1 200") && answer.contains("pong") {
        Ok(())
    } else {
        Err(format!(
            "{text}: {:?}",
            answer.chars().take(300).collect::<String>()
        ))
    }
}

/// The writers and what each has committed so far.
struct Writers {
    stop: Arc<AtomicBool>,
    /// Turns answered, per chat client: turns `0..n` are in its session.
    answered: Arc<Vec<AtomicUsize>>,
    /// The last value each config writer set (`0`: none yet).
    set: Arc<Vec<AtomicUsize>>,
    failures: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Writers {
    fn start(t: &Arc<TestContext>, port: u16) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let answered: Arc<Vec<AtomicUsize>> =
            Arc::new((0..CHATS).map(|_| AtomicUsize::new(0)).collect());
        let set: Arc<Vec<AtomicUsize>> =
            Arc::new((0..CONFIG_WRITERS).map(|_| AtomicUsize::new(0)).collect());
        let failures = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        for k in 0..CHATS {
            let (stop, answered, failures) = (stop.clone(), answered.clone(), failures.clone());
            threads.push(std::thread::spawn(move || {
                let session = format!("load-{k}");
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    match chat(port, &session, &turn_text(k, n)) {
                        Ok(()) => {
                            n += 1;
                            answered[k].store(n, Ordering::SeqCst);
                        }
                        Err(e) => {
                            failures
                                .lock()
                                .unwrap()
                                .push(format!("chat {session}: {e}"));
                            return;
                        }
                    }
                }
            }));
        }
        for k in 0..CONFIG_WRITERS {
            let (stop, set, failures, t) = (stop.clone(), set.clone(), failures.clone(), t.clone());
            threads.push(std::thread::spawn(move || {
                let key = format!("load.writer{k}");
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    n += 1;
                    let out = t
                        .cmd(&["config", "set", &key, &n.to_string()])
                        .stdin(Stdio::null())
                        .output()
                        .unwrap();
                    if !out.status.success() {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("config set {key} {n}:\n{}", render(&out)));
                        return;
                    }
                    set[k].store(n, Ordering::SeqCst);
                }
            }));
        }
        Writers {
            stop,
            answered,
            set,
            failures,
            threads,
        }
    }

    /// What every writer has committed by now.
    fn committed(&self) -> (Vec<usize>, Vec<usize>) {
        let read = |v: &[AtomicUsize]| v.iter().map(|a| a.load(Ordering::SeqCst)).collect();
        (read(&self.answered), read(&self.set))
    }

    /// Stops them once their current writes are done; the failures they met.
    fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.failures.lock().unwrap())
    }
}

fn turn_text(client: usize, turn: usize) -> String {
    format!("client {client} turn {turn}")
}

/// Every SQLite database under `root` with its `integrity_check`, and the user messages of
/// each session in its `state.db`, read by Python's `sqlite3`.
const INSPECT: &str = r#"
import json, os, sqlite3, sys
root = sys.argv[1]
out = {"integrity": {}, "user_messages": {}}
for dirpath, _, names in os.walk(root):
    for name in names:
        path = os.path.join(dirpath, name)
        with open(path, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                continue
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        out["integrity"][os.path.relpath(path, root)] = [r[0] for r in db.execute("PRAGMA integrity_check")]
        db.close()
db = sqlite3.connect(f"file:{os.path.join(root, 'state.db')}?mode=ro", uri=True)
for session, content in db.execute("SELECT session_id, content FROM messages WHERE role = 'user'"):
    out["user_messages"].setdefault(session, []).append(content)
print(json.dumps(out))
"#;

fn python() -> Option<&'static str> {
    ["/usr/bin/python3", "/bin/python3"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
}

#[test]
fn backups_under_twenty_busy_writers_restore_everything_committed_before_them() {
    let Some(python) = python() else {
        hermes_test_support::skip("no python3 in /usr/bin or /bin (reads the restored databases)");
        return;
    };
    let t = Arc::new(TestContext::new());
    let upstream = StubUpstream::start();
    let port = free_port();
    fs::create_dir_all(t.root()).unwrap();
    fs::write(
        t.root().join("config.yaml"),
        format!(
            "model:\n  default: stub\n  base_url: http://127.0.0.1:{}/v1\n  api_key: upstream-key\n",
            upstream.port
        ),
    )
    .unwrap();
    fs::write(t.root().join(".env"), api_env(port)).unwrap();
    let _gateway = Running(
        t.cmd(&["gateway", "run", "--no-supervise"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    poll::until_true(
        "the gateway answers a chat",
        Duration::from_secs(30),
        || chat(port, "warm-up", "hello").is_ok(),
    );

    let writers = Writers::start(&t, port);
    // Rows to copy, and every writer in its stride.
    std::thread::sleep(Duration::from_secs(2));
    let mut backups = Vec::new();
    for round in 0..BACKUPS {
        let before = writers.committed();
        let archive = t.dir.path().join(format!("under-load-{round}.zip"));
        let started = Instant::now();
        let out = t
            .cmd(&[
                "backup",
                "create",
                "-o",
                archive.to_str().unwrap(),
                "--json",
            ])
            .output()
            .unwrap();
        let took = started.elapsed();
        let after = writers.committed();
        if !out.status.success() {
            let failures = writers.finish();
            panic!(
                "backup create {round} under load:\n{}\nwriters' failures: {failures:?}",
                render(&out)
            );
        }
        backups.push(Taken {
            archive,
            before,
            after,
            took,
        });
        std::thread::sleep(Duration::from_millis(300));
    }
    let failures = writers.finish();
    assert!(
        failures.is_empty(),
        "writers failed while the backups ran:\n{}",
        failures.join("\n")
    );
    for (round, taken) in backups.iter().enumerate() {
        check_restore(python, round, taken);
    }
}

/// Whether `taken`'s archive verifies and restores into a fresh volume with everything its
/// writers had committed before it started.
#[allow(
    clippy::print_stderr,
    reason = "what each backup saw, for the test's output"
)]
fn check_restore(python: &str, round: usize, taken: &Taken) {
    let Taken {
        archive,
        before: (chats_before, sets_before),
        after: (chats_after, sets_after),
        took,
    } = taken;
    let turns_before: usize = chats_before.iter().sum();
    let turns_during = chats_after.iter().sum::<usize>() - turns_before;
    let sets_during = sets_after.iter().sum::<usize>() - sets_before.iter().sum::<usize>();
    eprintln!(
        "backup {round} of {turns_before} committed turns took {:.2}s; meanwhile {turns_during} \
         turns and {sets_during} config sets were committed",
        took.as_secs_f64()
    );
    assert!(
        chats_before.iter().all(|n| *n > 0) && sets_before.iter().all(|n| *n > 0),
        "every writer was busy before backup {round}: {chats_before:?} {sets_before:?}"
    );
    assert!(
        turns_during + sets_during > 0,
        "backup {round} was taken while the writers wrote"
    );

    // The archive verifies (on another machine's volume: `hermes backup` needs one to exist).
    let t = TestContext::new();
    fs::create_dir_all(t.root()).unwrap();
    let verify = t.run(&["backup", "verify", archive.to_str().unwrap(), "--json"]);
    let verified: serde_json::Value = serde_json::from_slice(&verify.stdout)
        .unwrap_or_else(|e| panic!("{e}:\n{}", render(&verify)));
    assert_eq!(verified["ok"], true, "backup {round}: {verified:#}");
    assert!(verify.status.success(), "{}", render(&verify));

    // Restored into a fresh volume.
    let fresh = TestContext::new();
    fs::create_dir_all(fresh.root()).unwrap();
    let restore = fresh.run(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
    assert!(restore.status.success(), "{}", render(&restore));

    let inspect = Command::new(python)
        .args(["-c", INSPECT])
        .arg(fresh.root())
        .output()
        .unwrap();
    assert!(inspect.status.success(), "{}", render(&inspect));
    let found: serde_json::Value = serde_json::from_slice(&inspect.stdout).unwrap();
    let integrity = found["integrity"].as_object().unwrap();
    assert!(integrity.contains_key("state.db"), "{found:#}");
    for (db, result) in integrity {
        assert_eq!(
            result,
            &serde_json::json!(["ok"]),
            "backup {round}: integrity_check of the restored {db}"
        );
    }
    let messages: BTreeMap<String, Vec<String>> =
        serde_json::from_value(found["user_messages"].clone()).unwrap();
    for (k, &before) in chats_before.iter().enumerate() {
        let stored = messages
            .get(&format!("load-{k}"))
            .cloned()
            .unwrap_or_default();
        let missing: Vec<String> = (0..before)
            .map(|n| turn_text(k, n))
            .filter(|text| !stored.contains(text))
            .collect();
        assert!(
            missing.is_empty(),
            "backup {round}, session load-{k}: {} of the {before} turns answered before the \
             backup started are not in the restored state.db: {missing:?}",
            missing.len()
        );
        assert!(
            stored.len() <= chats_after[k] + 1,
            "session load-{k} holds more turns than were ever sent"
        );
    }

    let config = fs::read_to_string(fresh.root().join("config.yaml")).unwrap();
    let config: yaml_serde::Value = yaml_serde::from_str(&config)
        .unwrap_or_else(|e| panic!("the restored config.yaml does not parse: {e}\n{config}"));
    assert_eq!(config["model"]["default"].as_str(), Some("stub"));
    for (k, &before) in sets_before.iter().enumerate() {
        let value = config["load"][format!("writer{k}").as_str()]
            .as_u64()
            .unwrap_or(0) as usize;
        assert!(
            value >= before && value <= sets_after[k] + 1,
            "backup {round}: load.writer{k} is {value} in the restored config.yaml; {before} was \
             set before the backup started"
        );
    }
}
