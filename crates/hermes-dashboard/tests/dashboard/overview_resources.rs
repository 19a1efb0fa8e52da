//! What services use, on the Overview and in `/metrics`:
//! * in headless Chromium, a running service's row shows its memory with its limit and a
//!   sparkline of its history, and the page says the volume's space (the rows from a stand-in
//!   control socket, `metrics::FakeSupervisor`, so the figures are known);
//! * the first screen (the Overview with everything it loads) stays under 20 kB;
//! * against a real supervisor (run in a process of its own, [`child_supervisor`]) sampling a
//!   Python service that holds 48 MiB, `/metrics` says the memory `/proc/<pid>/status` says
//!   (`VmRSS`) and the CPU time `/proc/<pid>/stat` says, within 10 %.
//!
//! Screenshots: with `HERMES_DASHBOARD_SCREENSHOTS=<dir>`, `dashboard-overview-resources.png`
//! is saved there (`HERMES_DASHBOARD_SCREENSHOTS=$PWD/docs/images cargo test -p
//! hermes-dashboard --test dashboard overview_resources`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hermes_supervisor::{
    Client, Enforcement, MemoryLimit, NoHooks, Options, ServiceSpec, StateName, Supervisor,
};
use hermes_test_support::browser::Browser;
use hermes_test_support::poll;

use crate::common::page_text as text;
use crate::common::{self, TOKEN, TOKEN_ENV, local, request};
use crate::metrics::{FakeSupervisor, METRICS_TOKEN, parse, resources, row, value};

/// How long a page or a sample may take (a loaded 2-core runner).
const WAIT: Duration = Duration::from_secs(30);

/// The budget of the first screen: the Overview's HTML and every asset it loads.
const FIRST_SCREEN_BUDGET: usize = 20_000;

#[test]
fn the_overview_shows_memory_a_sparkline_and_the_volume() {
    let home = tempfile::tempdir().unwrap();
    let mut worker = row("worker", StateName::Up, None);
    worker.resources = Some(resources(30));
    worker.memory_max = Some(MemoryLimit {
        bytes: 1 << 30,
        enforced_by: Enforcement::Cgroup,
    });
    let idle = row("idle", StateName::Down, None);
    let sup = FakeSupervisor::serve(home.path(), vec![worker, idle]);
    let Some(browser) = Browser::start_or_skip() else {
        return;
    };
    let d = common::start_in(home, "127.0.0.1", &TOKEN_ENV);
    browser.goto(&format!(
        "http://127.0.0.1:{}/?token={TOKEN}",
        d.addr.port()
    ));
    let memory = "tr[data-service='worker'] td.memory";
    browser.wait_for(memory, WAIT);
    assert_eq!(
        text(&browser, &format!("{memory} .figure")),
        "212 MiB / 1 GiB"
    );
    assert_eq!(
        text(&browser, &format!("{memory} svg.spark title")),
        "memory and CPU, last 5 min"
    );
    let lines = browser.execute(&format!(
        "return document.querySelectorAll(\"{memory} svg.spark polyline\").length;"
    ));
    assert_eq!(lines, 2, "a memory and a CPU line");
    // 30 points across the sparkline, the memory line rising (y falls) left to right.
    let points = browser.execute(&format!(
        "return document.querySelector(\"{memory} svg.spark .spark-mem\").getAttribute('points');"
    ));
    let ys: Vec<f64> = points
        .as_str()
        .unwrap()
        .split(' ')
        .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(ys.len(), 30);
    assert!(ys.first() > ys.last(), "{ys:?}");
    assert_eq!(
        text(&browser, "tr[data-service='worker'] td.cpu"),
        "3.2 % · 12.5 s"
    );
    // A service without measurements says so plainly.
    assert_eq!(
        text(&browser, "tr[data-service='idle'] td:nth-child(5)"),
        "-"
    );
    let volume = text(&browser, "#volume");
    assert!(
        volume.starts_with(&format!("Volume {}: ", d.root().display()))
            && volume.contains("% used, ")
            && volume.contains(" free of "),
        "{volume}"
    );
    if let Some(dir) = std::env::var_os("HERMES_DASHBOARD_SCREENSHOTS") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        browser.screenshot(&dir.join("dashboard-overview-resources.png"));
    }

    // The next history point reaches the open page by itself, figures included.
    {
        let mut rows = sup.rows.lock().unwrap();
        let r = rows[0].resources.as_mut().unwrap();
        r.memory_bytes = 300 << 20;
        let mut next = *r.history.last().unwrap();
        next.at += 10;
        r.history.push(next);
    }
    browser.wait_until("the new figure on the page", WAIT, |b| {
        text(b, &format!("{memory} .figure")) == "300 MiB / 1 GiB"
    });
}

#[test]
fn the_first_screen_stays_under_20_kb() {
    let d = common::token_mode();
    let page = common::get(&d, "/");
    assert_eq!(page.status, 200);
    let mut total = page.body.len();
    for asset in ["assets/app.css", "assets/common.js", "assets/overview.js"] {
        assert!(page.body.contains(asset), "the Overview loads {asset}");
        let a = common::get(&d, &format!("/{asset}"));
        assert_eq!(a.status, 200, "{asset}");
        total += a.body.len();
    }
    println!("the first screen weighs {total} bytes");
    assert!(
        total < FIRST_SCREEN_BUDGET,
        "the first screen weighs {total} bytes"
    );
}

/// The environment variable that makes [`child_supervisor`] run: the home it supervises in.
const CHILD: &str = "HERMES_TEST_OVERVIEW_SUPERVISOR";

/// Holds 48 MiB (touched) after burning a second of CPU time (not of the clock: a loaded
/// runner gives it less than a core), then sleeps.
const HOLD: &str = "import time\nwhile time.process_time() < 1.0:\n    pass\nheld = b'x' * (48 << 20)\ntime.sleep(600)\n";

/// Helper process: a real supervisor of one Python service, for
/// [`a_real_supervisors_figures_match_proc`]. A process of its own because the supervisor
/// reaps any child (`waitpid(-1)`) and takes signals; it runs until killed.
#[test]
fn child_supervisor() {
    let Some(home) = std::env::var_os(CHILD) else {
        return;
    };
    let home = PathBuf::from(home);
    let mut spec = ServiceSpec::new("holder", vec!["python3".into(), "-c".into(), HOLD.into()]);
    spec.memory_max = Some(1 << 30);
    let opts = Options::new(home.join("run"), home.join("logs"));
    let supervisor = Supervisor::new(opts, vec![spec]).unwrap();
    let _ = supervisor.run(&mut NoHooks, &mut std::io::stdout());
}

/// The child supervisor and its service, killed when dropped.
struct RealSupervisor {
    child: Child,
    runtime: PathBuf,
}

impl RealSupervisor {
    fn start(home: &Path) -> RealSupervisor {
        let module = module_path!().split_once("::").map_or("", |(_, m)| m);
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &format!("{module}::child_supervisor")])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD, home)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        RealSupervisor {
            child,
            runtime: home.join("run"),
        }
    }

    fn client(&self) -> Option<Client> {
        Client::connect(&self.runtime, Duration::from_secs(2)).ok()
    }
}

impl Drop for RealSupervisor {
    fn drop(&mut self) {
        // Its service first (a group of its own, which the supervisor's death would orphan).
        let pid = self
            .client()
            .and_then(|mut c| c.status(Some("holder")).ok())
            .and_then(|rows| rows.first().and_then(|r| r.pid));
        if let Some(pid) = pid {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `/proc/<pid>/status`'s VmRSS, bytes.
fn vm_rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kib * 1024
}

/// `/proc/<pid>/stat`'s utime + stime + cutime + cstime (its own CPU time and that of the
/// children it reaped, as the supervisor counts a service's), seconds.
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let fields: Vec<u64> = rest
        .split_ascii_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse().unwrap())
        .collect();
    fields.iter().sum::<u64>() as f64 / clock_ticks()
}

/// Clock ticks per second (`getconf CLK_TCK`, as `ps` reads them).
fn clock_ticks() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn within_ten_percent(ours: f64, theirs: f64) -> bool {
    (ours - theirs).abs() <= theirs.abs() * 0.10
}

#[test]
fn a_real_supervisors_figures_match_proc() {
    if hermes_test_support::skip_unless_on_path("python3") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let sup = RealSupervisor::start(home.path());
    let pid = poll::until("the holder up with its 48 MiB sampled", WAIT, || {
        let row = sup.client()?.status(Some("holder")).ok()?.pop()?;
        let r = row.resources.as_ref()?;
        (row.state == StateName::Up && r.memory_bytes > 40 << 20).then_some(row.pid?)
    });
    // Idle: its CPU time no longer moves (the second of burning is over), so the sampler's
    // last figure and /proc's are of the same moment.
    let mut before = cpu_seconds(pid);
    poll::until_true("the holder idle", WAIT, || {
        std::thread::sleep(Duration::from_millis(1500));
        let now = cpu_seconds(pid);
        std::mem::replace(&mut before, now) == now
    });
    // One more sample after that.
    std::thread::sleep(Duration::from_millis(1500));
    let d = common::start_in(
        home,
        "127.0.0.1",
        &[TOKEN_ENV[0], ("HERMES_METRICS_TOKEN", METRICS_TOKEN)],
    );
    let a = request(
        &d,
        "GET",
        "/metrics",
        &local(&d),
        &[format!("Authorization: Bearer {METRICS_TOKEN}")],
    );
    assert_eq!(a.status, 200, "{}", a.body);
    let s = parse(&a.body);
    let holder = ["service=\"holder\""];
    let memory = value(&s, "hermes_service_memory_bytes", &holder).expect("memory sampled");
    let cpu = value(&s, "hermes_service_cpu_seconds_total", &holder).expect("cpu sampled");
    let (rss, proc_cpu) = (vm_rss(pid) as f64, cpu_seconds(pid));
    assert!(
        within_ten_percent(memory, rss),
        "memory: /metrics {memory}, VmRSS {rss}"
    );
    assert!(
        within_ten_percent(cpu, proc_cpu),
        "cpu: /metrics {cpu} s, /proc {proc_cpu} s"
    );
    assert!(proc_cpu > 0.5, "the holder burnt its second: {proc_cpu}");
    assert_eq!(
        value(&s, "hermes_service_memory_limit_bytes", &holder),
        Some((1u64 << 30) as f64)
    );
    assert_eq!(value(&s, "hermes_service_up", &holder), Some(1.0));
    assert_eq!(value(&s, "hermes_supervisor_up", &[]), Some(1.0));
}
