//! The crash-consistency torture run, short (CI) or long (`bench/torture/run.sh`): a profile's
//! gateway in front of a stub model, clients writing sessions all along (plain turns and
//! streams, each turn's words unique), while the harness, at random from a fixed seed: SIGKILLs
//! the gateway, SIGKILLs everything at once (a container killed; half the time a few ms into a
//! gateway restart) and starts it again, restarts the gateway, stops everything and starts it
//! again, backs up, and — as root, on a volume of its own — fills the volume for a moment.
//!
//! The same load and the same events, from the same seed, against three deployments
//! ([`Deployment`]): `hermes up` with the native gateway ([`ours`]), `hermes up` with the
//! original agent's gateway (hermes-agent 0.19.0 and the 0.20.1 fixture), and the original
//! agent under its own image's stop sequence ([`s6`]: real `s6-supervise`, the original's
//! `finish`, SIGTERM then SIGKILL after s6-overlay's grace), so the bench can put the figures
//! side by side. The agent's volumes also hold a cron job it runs every minute, so its
//! scheduler writes sessions beside the clients.
//!
//! After every event: `PRAGMA integrity_check` is `ok` on every SQLite file of the volume, the
//! gateway holds no `-wal`/`-shm` that was removed under it, and it serves again within its
//! deadline (else it counts as left down), a turn getting through before the next event. At the
//! end: every turn a client saw acknowledged (a plain 200 answer, or a stream that ended with
//! `[DONE]` and no error event) is in `state.db`. `HERMES_TORTURE_EVENTS` sets how many events
//! (CI: 40 for the native gateway, 6 for each agent run), `HERMES_TORTURE_SEED` the seed; each
//! run's tally is printed as one JSON line (`torture: {...}`), which the bench collects.

mod ours;
mod s6;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_test_support::disk::SmallDisk;
use hermes_test_support::{OriginalAgent, poll};

use crate::load::StubUpstream;
use crate::util::{TEST_API_KEY, TestContext, free_port};

/// What the harness does to a deployment; each does it its own way.
pub(crate) trait Deployment {
    /// The run's name in the tally.
    fn name(&self) -> String;
    /// The gateway's process, while its supervisor counts it up.
    fn gateway_pid(&self) -> Option<i32>;
    /// What the supervisor says of the gateway, in its words (for a gateway left down).
    fn gateway_state(&self) -> String;
    /// Every process SIGKILLed at once (a killed container) and everything started again;
    /// `mid_restart`: first ask for a gateway restart and kill that long after.
    fn kill_everything(&mut self, mid_restart: Option<Duration>);
    /// A gateway restart, as an operator asks for one.
    fn restart(&mut self);
    /// The container stopped, as its runtime stops it, and started again.
    fn stop_and_start(&mut self);
    /// A backup of the live volume; `Err` with what the command said when it failed.
    fn backup(&mut self) -> Result<(), String>;
    /// Brings a gateway left down back up (the harness has counted it).
    fn revive(&mut self);
    /// Stops everything for good, cleanly.
    fn shut_down(&mut self);
    /// How long a start may take before the gateway counts as left down.
    fn start_deadline(&self) -> Duration;
    /// The supervisor has given up on the gateway (no wait for the deadline then).
    fn given_up(&self) -> bool;
}

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

/// How one turn ended, as its client saw it.
#[derive(PartialEq)]
enum Turn {
    /// A plain 200 with an answer, or a stream that ended with `[DONE]` and no error event.
    Acknowledged,
    /// The gateway said it could not store the turn (`session_not_stored`).
    NotStored,
    /// Refused, cut or answered with another error: which, in a few words.
    Failed(String),
}

/// One turn in session `session` with the unique `words`.
fn turn(port: u16, session: &str, words: &str, stream: bool) -> Turn {
    let Ok(mut conn) = TcpStream::connect(("127.0.0.1", port)) else {
        return Turn::Failed("refused".to_owned());
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
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
        return Turn::Failed("cut".to_owned());
    }
    if answer.contains("session_not_stored") {
        return Turn::NotStored;
    }
    let acknowledged = answer.starts_with("HTTP/1.1 200")
        && !answer.contains("\"error\"")
        && if stream {
            answer.contains("data: [DONE]")
        } else {
            answer.contains("\"choices\"")
        };
    if acknowledged {
        return Turn::Acknowledged;
    }
    let status = answer.lines().next().unwrap_or("no answer").trim();
    let error = answer
        .split("\"error\"")
        .nth(1)
        .map(|rest| rest.chars().take(60).collect::<String>());
    Turn::Failed(match error {
        Some(error) => format!("{status}: error{error}"),
        None if answer.is_empty() => "cut".to_owned(),
        None if stream => format!("{status}: stream cut before [DONE]"),
        None => format!("{status}: body cut short"),
    })
}

/// Clients writing their own sessions until stopped: the words of every acknowledged turn, with
/// when its acknowledgement came.
struct Writers {
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<BTreeMap<String, Instant>>>,
    sent: Arc<AtomicUsize>,
    not_stored: Arc<AtomicUsize>,
    failures: Arc<Mutex<BTreeMap<String, usize>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Writers {
    fn start(port: u16, clients: usize) -> Writers {
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(Mutex::new(BTreeMap::new()));
        let sent = Arc::new(AtomicUsize::new(0));
        let not_stored = Arc::new(AtomicUsize::new(0));
        let failures = Arc::new(Mutex::new(BTreeMap::new()));
        let threads = (0..clients)
            .map(|k| {
                let (stop, acked) = (stop.clone(), acked.clone());
                let (sent, not_stored) = (sent.clone(), not_stored.clone());
                let failures = failures.clone();
                std::thread::spawn(move || {
                    let mut n = 0;
                    while !stop.load(Ordering::SeqCst) {
                        n += 1;
                        let words = format!("client{k}-turn{n}");
                        let said = turn(port, &format!("torture-{k}"), &words, n % 3 == 0);
                        sent.fetch_add(1, Ordering::SeqCst);
                        match said {
                            Turn::Acknowledged => {
                                acked.lock().unwrap().insert(words, Instant::now());
                            }
                            Turn::NotStored => {
                                not_stored.fetch_add(1, Ordering::SeqCst);
                            }
                            Turn::Failed(what) => {
                                *failures.lock().unwrap().entry(what).or_default() += 1;
                                std::thread::sleep(Duration::from_millis(50));
                            }
                        }
                    }
                })
            })
            .collect();
        Writers {
            stop,
            acked,
            sent,
            not_stored,
            failures,
            threads,
        }
    }

    /// How many turns have been acknowledged so far.
    fn acknowledged(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// Stops the clients: the acknowledged words, the turns sent, the turns refused as not
    /// stored, and the other failures by kind.
    fn finish(
        self,
    ) -> (
        BTreeMap<String, Instant>,
        usize,
        usize,
        BTreeMap<String, usize>,
    ) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
        let acked = std::mem::take(&mut *self.acked.lock().unwrap());
        (
            acked,
            self.sent.load(Ordering::SeqCst),
            self.not_stored.load(Ordering::SeqCst),
            std::mem::take(&mut *self.failures.lock().unwrap()),
        )
    }
}

/// Every SQLite file of the volume, by its header (archives aside).
fn databases(root: &Path) -> Vec<PathBuf> {
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

/// The user turns `state.db` holds (none when it cannot be read: every acknowledged turn lost).
fn stored(root: &Path) -> BTreeSet<String> {
    let Ok(conn) = rusqlite::Connection::open(root.join("state.db")) else {
        return BTreeSet::new();
    };
    let Ok(mut stmt) = conn.prepare("SELECT content FROM messages WHERE role = 'user'") else {
        return BTreeSet::new();
    };
    stmt.query_map([], |r| r.get::<_, String>(0))
        .map(|rows| rows.flatten().collect())
        .unwrap_or_default()
}

pub(crate) fn kill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The `-wal` and `-shm` files process `pid` holds open that are no longer on disk: removed
/// under a live writer (the original's #101064, #110497), which loses what its log held.
fn unlinked_sidecars(pid: i32) -> Vec<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .map(|target| target.to_string_lossy().into_owned())
        .filter(|target| target.ends_with("-wal (deleted)") || target.ends_with("-shm (deleted)"))
        .collect()
}

/// `GET /health` on `port` answers 200.
fn healthy(port: u16) -> bool {
    crate::gateway::http_get(port, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200"))
}

/// What a run counted.
pub(crate) struct Tally {
    pub lost: Vec<String>,
    pub damaged: Vec<String>,
    pub problems: Vec<String>,
    pub left_down: Vec<String>,
    /// Events after which no turn got through within [`SETTLE`].
    pub quiet: Vec<String>,
    /// A `-wal` or `-shm` the gateway still held, found removed.
    pub unlinked: Vec<String>,
    pub acknowledged: usize,
}

/// How long the harness waits, after an event, for a turn to get through before the next.
const SETTLE: Duration = Duration::from_secs(15);

/// The events a run may draw, in the order the generator indexes them.
const EVENTS: [&str; 6] = [
    "kill-gateway",
    "kill-everything",
    "restart",
    "stop-start",
    "backup",
    "full-volume",
];

/// `events` events from `seed` against `target`, whose volume is `root` (on `disk` when the run
/// may fill it) and whose gateway serves `port`; prints the tally line and returns it.
#[allow(clippy::print_stdout, reason = "the tally line the bench collects")]
pub(crate) fn torture(
    target: &mut dyn Deployment,
    root: &Path,
    disk: Option<&SmallDisk>,
    port: u16,
    events: usize,
    seed: u64,
) -> Tally {
    let serving = |target: &dyn Deployment| {
        let mut given_up = false;
        let up = poll::within(target.start_deadline(), || {
            given_up = target.given_up();
            given_up || (target.gateway_pid().is_some() && healthy(port))
        });
        up && !given_up
    };
    assert!(serving(target), "{} never served", target.name());
    let writers = Writers::start(port, 4);
    let mut rng = Rng(seed | 1);
    let mut by_kind = BTreeMap::<&str, usize>::new();
    let (mut problems, mut damaged) = (Vec::new(), Vec::new());
    let (mut left_down, mut quiet, mut unlinked) = (Vec::new(), Vec::new(), Vec::new());
    let kinds = if disk.is_some() {
        &EVENTS[..]
    } else {
        &EVENTS[..5]
    };
    let started = Instant::now();
    let mut happened: Vec<(Instant, usize, &str)> = Vec::new();
    for event in 0..events {
        std::thread::sleep(Duration::from_millis(200 + rng.below(600)));
        let kind = kinds[rng.below(kinds.len() as u64) as usize];
        *by_kind.entry(kind).or_default() += 1;
        happened.push((Instant::now(), event, kind));
        match kind {
            "kill-gateway" => {
                if let Some(pid) = target.gateway_pid() {
                    kill(pid);
                }
            }
            "kill-everything" => {
                let mid_restart = (rng.below(2) == 0).then(|| Duration::from_millis(rng.below(50)));
                target.kill_everything(mid_restart);
            }
            "restart" => target.restart(),
            "stop-start" => target.stop_and_start(),
            "backup" => {
                if let Err(said) = target.backup() {
                    // A full volume fails a backup, saying so; anything else is a problem.
                    if !said.to_lowercase().contains("no space") {
                        problems.push(format!("event {event}: backup failed: {said}"));
                    }
                }
            }
            "full-volume" => {
                let disk = disk.unwrap();
                disk.fill("ballast", 0);
                std::thread::sleep(Duration::from_millis(300 + rng.below(700)));
                let _ = std::fs::remove_file(disk.path().join("ballast"));
            }
            _ => unreachable!(),
        }
        if !serving(target) {
            left_down.push(format!(
                "event {event} ({kind}): {}",
                target.gateway_state()
            ));
            target.revive();
            assert!(serving(target), "{} could not be revived", target.name());
        }
        for bad in corrupt(root) {
            damaged.push(format!("event {event} ({kind}): {bad}"));
        }
        if let Some(pid) = target.gateway_pid() {
            for file in unlinked_sidecars(pid) {
                unlinked.push(format!("event {event} ({kind}): {file}"));
            }
        }
        // The next event only once a turn got through again (or after a while): every
        // deployment gets the same chance to serve between events, however fast its own
        // commands return.
        let before = writers.acknowledged();
        if !poll::within(SETTLE, || writers.acknowledged() > before) {
            quiet.push(format!("event {event} ({kind})"));
        }
    }
    let (acked, sent, not_stored, failures) = writers.finish();
    target.shut_down();
    for bad in corrupt(root) {
        damaged.push(format!("at the end: {bad}"));
    }
    let stored = stored(root);
    let lost: Vec<String> = acked
        .keys()
        .filter(|words| !stored.contains(*words))
        .cloned()
        .collect();
    let lost_at: Vec<String> = lost
        .iter()
        .map(|words| around(words, acked[words], started, &happened))
        .collect();
    println!(
        "torture: {}",
        serde_json::json!({
            "target": target.name(), "events": events, "seed": seed, "by_kind": by_kind,
            "seconds": started.elapsed().as_secs(), "turns_sent": sent,
            "turns_acknowledged": acked.len(), "turns_not_stored": not_stored,
            "lost": lost.len(), "corrupt": damaged.len(), "left_down": left_down.len(),
            "no_turn_after": quiet.len(), "sidecars_unlinked": unlinked.len(),
            "other_problems": problems.len(), "full_volume": disk.is_some(),
            "failed_turns": failures, "left_down_at": left_down, "lost_at": &lost_at,
        })
    );
    Tally {
        // Each with where it fell among the events, for the failure's message.
        lost: lost_at,
        damaged,
        problems,
        left_down,
        quiet,
        unlinked,
        acknowledged: acked.len(),
    }
}

/// Where a lost turn's acknowledgement fell among the events: the last one started before it
/// and the next one (`client0-turn7: acknowledged at 12.3 s, after event 40 (full-volume) at
/// 12.1 s, before event 41 (restart) at 12.9 s`), to tell which event took it.
fn around(
    words: &str,
    at: Instant,
    started: Instant,
    happened: &[(Instant, usize, &str)],
) -> String {
    let secs = |t: Instant| t.duration_since(started).as_secs_f64();
    let mut said = format!("{words}: acknowledged at {:.1} s", secs(at));
    if let Some((t, n, kind)) = happened.iter().rev().find(|(t, _, _)| *t <= at) {
        said.push_str(&format!(", after event {n} ({kind}) at {:.1} s", secs(*t)));
    }
    if let Some((t, n, kind)) = happened.iter().find(|(t, _, _)| *t > at) {
        said.push_str(&format!(", before event {n} ({kind}) at {:.1} s", secs(*t)));
    }
    said
}

#[test]
fn a_lost_turn_is_placed_among_the_events() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let happened = [(t0 + s(1), 0, "restart"), (t0 + s(3), 1, "full-volume")];
    assert_eq!(
        around("client0-turn7", t0 + s(2), t0, &happened),
        "client0-turn7: acknowledged at 2.0 s, after event 0 (restart) at 1.0 s, before event 1 \
         (full-volume) at 3.0 s"
    );
    assert_eq!(
        around("client1-turn1", t0, t0, &happened),
        "client1-turn1: acknowledged at 0.0 s, before event 0 (restart) at 1.0 s"
    );
}

/// `HERMES_TORTURE_EVENTS`, else `default`; `HERMES_TORTURE_SEED`, else the fixed one.
fn events_and_seed(default: usize) -> (usize, u64) {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    (
        var("HERMES_TORTURE_EVENTS").map_or(default, |n: u64| n as usize),
        var("HERMES_TORTURE_SEED").unwrap_or(0x5eed_cafe),
    )
}

/// As root, the volume is a small file system of its own, which the run fills at times.
fn small_disk(root: &Path) -> Option<SmallDisk> {
    nix::unistd::geteuid()
        .is_root()
        .then(|| SmallDisk::mount(root, "256m"))
}

/// Ours must come through whole: nothing corrupt, nothing lost, no sidecar removed under the
/// gateway, never left down, serving a turn again soon after every event.
fn assert_whole(tally: &Tally, events: usize) {
    assert!(tally.damaged.is_empty(), "{:#?}", tally.damaged);
    assert!(tally.problems.is_empty(), "{:#?}", tally.problems);
    assert!(
        tally.lost.is_empty(),
        "{} acknowledged turns lost: {:?}",
        tally.lost.len(),
        tally.lost
    );
    assert!(
        tally.left_down.is_empty(),
        "the gateway was left down: {:#?}",
        tally.left_down
    );
    assert!(
        tally.unlinked.is_empty(),
        "sidecars removed under the gateway: {:#?}",
        tally.unlinked
    );
    assert!(
        tally.quiet.is_empty(),
        "no turn got through within {SETTLE:?} after: {:#?}",
        tally.quiet
    );
    assert!(
        tally.acknowledged >= events,
        "the clients got through: {} acknowledged",
        tally.acknowledged
    );
}

#[test]
fn a_sidecar_removed_under_its_writer_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("state.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
        .unwrap();
    // Other tests of this process hold databases too: only this one's files count.
    let mine = || {
        let wal = db.with_file_name("state.db-wal");
        unlinked_sidecars(std::process::id() as i32)
            .into_iter()
            .filter(|f| f.starts_with(&*wal.to_string_lossy()))
            .collect::<Vec<_>>()
    };
    assert!(mine().is_empty());
    std::fs::remove_file(dir.path().join("state.db-wal")).unwrap();
    assert_eq!(
        mine(),
        [format!("{}-wal (deleted)", db.display())],
        "the removed log, still held"
    );
    drop(conn);
}

/// A run's fresh volume: its small disk (as root; listed first, so it is unmounted before the
/// test's directory goes), the test's context, the stub model and the gateway's port.
struct Volume {
    disk: Option<SmallDisk>,
    t: TestContext,
    _model: StubUpstream,
    port: u16,
}

impl Volume {
    /// The volume written for the gateway `engine` (`native` or `agent`).
    fn new(engine: &str) -> Volume {
        let t = TestContext::new();
        let disk = small_disk(&t.root());
        let model = StubUpstream::start();
        let port = free_port();
        crate::engine::gateway_profile(&t.root(), port, model.port, engine);
        Volume {
            disk,
            t,
            _model: model,
            port,
        }
    }

    /// The volume for the agent's gateway, with a cron job the agent runs every minute (a
    /// session of its own, written while the clients write theirs), made by its own command.
    fn with_cron_tick(agent: &OriginalAgent) -> Volume {
        let volume = Volume::new("agent");
        let tick = ["cron", "create", "every 1m", "Say tick", "--name", "tick"];
        crate::migrate::original(&volume.t, agent, &tick);
        volume
    }

    fn torture(&self, target: &mut dyn Deployment, events: usize, seed: u64) -> Tally {
        torture(
            target,
            &self.t.root(),
            self.disk.as_ref(),
            self.port,
            events,
            seed,
        )
    }
}

#[test]
fn the_native_gateway_loses_nothing_to_kills_stops_backups_and_a_full_volume() {
    let (events, seed) = events_and_seed(40);
    let volume = Volume::new("native");
    let mut target = ours::Ours::start(&volume.t, "native", Vec::new());
    assert_whole(&volume.torture(&mut target, events, seed), events);
}

/// `hermes up` running `agent`'s own gateway: as whole as the native one.
fn agent_engine(agent: &OriginalAgent, version: &str) {
    let (events, seed) = events_and_seed(6);
    let overlay = crate::engine::aiohttp_overlay(&agent.python);
    ours::install_listen_hook(agent);
    let volume = Volume::with_cron_tick(agent);
    let env = ours::agent_env(agent, &overlay);
    let mut target = ours::Ours::start(&volume.t, &format!("ours-agent-{version}"), env);
    assert_whole(&volume.torture(&mut target, events, seed), events);
}

#[test]
fn the_agents_gateway_under_hermes_up_loses_nothing_0_19() {
    if let Some(agent) = hermes_test_support::original_agent() {
        agent_engine(&agent, "0.19.0");
    }
}

#[test]
fn the_agents_gateway_under_hermes_up_loses_nothing_0_20() {
    if let Some(agent) = hermes_test_support::fixture_agent() {
        agent_engine(&agent, "0.20.1");
    }
}

/// The original under its own stop sequence, for the bench's comparison: whatever it loses is
/// its figure, so only the harness itself is checked (the clients got through).
fn original_under_s6(agent: &OriginalAgent, version: &str) {
    if hermes_test_support::skip_unless_on_path("s6-supervise") {
        return;
    }
    let (events, seed) = events_and_seed(6);
    let overlay = crate::engine::aiohttp_overlay(&agent.python);
    let volume = Volume::with_cron_tick(agent);
    let mut target = s6::OriginalUnderS6::start(&volume.t, agent, &overlay, version);
    let tally = volume.torture(&mut target, events, seed);
    assert!(
        tally.acknowledged > 0,
        "the clients got through to the original"
    );
}

#[test]
fn the_original_under_s6_stop_sequence_0_19() {
    if let Some(agent) = hermes_test_support::original_agent() {
        original_under_s6(&agent, "0.19.0");
    }
}

#[test]
fn the_original_under_s6_stop_sequence_0_20() {
    if let Some(agent) = hermes_test_support::fixture_agent() {
        original_under_s6(&agent, "0.20.1");
    }
}
