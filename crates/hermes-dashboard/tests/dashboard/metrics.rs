//! `GET /metrics` over real HTTP on loopback: closed (404) unless a metrics token or an address
//! allowlist is configured; the token as a bearer, or an allowlisted address, opens it, a wrong
//! token (or a session) does not; the text is the exposition format throughout; the
//! supervisor's rows (from a stand-in control socket, [`FakeSupervisor`]) become series, and a
//! running gateway's own `/metrics` is passed through with its profile. The figures of a real
//! supervisor against `/proc` are in `overview_resources`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use hermes_supervisor::status::{
    Enforcement, MemoryLimit, ResourceSample, Resources, ServiceStatus, StateName,
};
use hermes_supervisor::{ExitStatus, protocol::Response};

use crate::common::{self, Dashboard, TOKEN, TOKEN_ENV, local, request};

/// A metrics token for the tests (not the session token: each opens only its own door).
pub const METRICS_TOKEN: &str = "metrics-0123456789abcdef";

/// A control socket that answers every request with the rows it holds, as the supervisor
/// answers `status`: the dashboard's code is the real one, only the rows are the test's.
pub struct FakeSupervisor {
    /// The rows answered: a test may change them while the dashboard runs.
    pub rows: Arc<Mutex<Vec<ServiceStatus>>>,
}

impl FakeSupervisor {
    /// Listens where the dashboard of `home` looks (`HERMES_RUNTIME_DIR` = `<home>/run`, as
    /// `common::start_in` sets it).
    pub fn serve(home: &Path, rows: Vec<ServiceStatus>) -> FakeSupervisor {
        let run = home.join("run");
        std::fs::create_dir_all(&run).unwrap();
        let listener =
            UnixListener::bind(run.join(hermes_supervisor::client::SOCKET_NAME)).unwrap();
        let rows = Arc::new(Mutex::new(rows));
        let shared = rows.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let rows = shared.clone();
                std::thread::spawn(move || {
                    let mut writer = stream.try_clone().unwrap();
                    for line in BufReader::new(stream).lines() {
                        if line.is_err() {
                            return;
                        }
                        let answer = Response::services(rows.lock().unwrap().clone());
                        if writer.write_all(&answer.to_frame()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        FakeSupervisor { rows }
    }
}

/// A service row in `state` with what the tests vary; no resources.
pub fn row(name: &str, state: StateName, profile: Option<&str>) -> ServiceStatus {
    let up = state == StateName::Up;
    ServiceStatus {
        pid: up.then_some(4242),
        uptime_secs: up.then_some(75.5),
        since_secs: 75.5,
        profile: profile.map(str::to_string),
        ..ServiceStatus::new(name, state)
    }
}

/// Resources of 212 MiB and 12.5 CPU seconds, with `points` history samples 10 s apart
/// ending now, memory rising and CPU going up and down.
pub fn resources(points: u64) -> Resources {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    Resources {
        memory_bytes: 212 << 20,
        cpu_seconds: 12.5,
        cpu_percent: Some(3.2),
        processes: 2,
        history: (0..points)
            .map(|i| ResourceSample {
                at: now - (points - 1 - i) * 10,
                memory_bytes: (150 + i) << 20,
                cpu_percent: (i % 5) as f64 * 4.0,
            })
            .collect(),
    }
}

/// A dashboard in token mode with the metrics settings `extra`, for `home`.
fn dashboard(home: tempfile::TempDir, extra: &[(&str, &str)]) -> Dashboard {
    let mut env: Vec<(&str, &str)> = TOKEN_ENV.to_vec();
    env.extend_from_slice(extra);
    common::start_in(home, "127.0.0.1", &env)
}

fn scrape(d: &Dashboard, headers: &[String]) -> common::Answer {
    request(d, "GET", "/metrics", &local(d), headers)
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}")
}

/// Every line is a comment or `name{labels} value` with a number, every family's samples
/// are in one group after its own `# TYPE`, and no family is announced twice: the samples.
pub fn parse(text: &str) -> Vec<(String, String, f64)> {
    let mut samples = Vec::new();
    let mut typed: Vec<String> = Vec::new();
    let mut done: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap().to_string();
            assert!(!typed.contains(&name), "{name} announced twice:\n{text}");
            if let Some(last) = typed.last() {
                done.push(last.clone());
            }
            typed.push(name);
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "stray line {line:?}"
        );
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number in {line:?}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => {
                assert!(l.ends_with('}'), "{line}");
                let l = &l[..l.len() - 1];
                for pair in split_labels(l) {
                    let (k, v) = pair.split_once('=').unwrap_or_else(|| panic!("{line}"));
                    assert!(
                        k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                        "{line}"
                    );
                    assert!(
                        v.starts_with('"') && v.ends_with('"') && v.len() >= 2,
                        "{line}"
                    );
                }
                (n, l)
            }
            None => (series, ""),
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line}"
        );
        let family = typed
            .last()
            .unwrap_or_else(|| panic!("{name} before any # TYPE"));
        assert!(
            name == family
                || ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| name.strip_suffix(s) == Some(family)),
            "{name} is not in the family announced last ({family}): one group per family"
        );
        assert!(!done.contains(&family.to_string()));
        samples.push((name.to_string(), labels.to_string(), value));
    }
    samples
}

/// `a="1",b="x,y"` → `a="1"`, `b="x,y"` (commas inside quoted values kept).
fn split_labels(labels: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut cur, mut quoted, mut escaped) = (String::new(), false, false);
    for c in labels.chars() {
        match c {
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            '"' if !escaped => {
                quoted = !quoted;
                cur.push(c);
            }
            _ => cur.push(c),
        }
        escaped = c == '\\' && !escaped;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The value of the one sample called `name` whose labels contain every `labels` pair.
pub fn value(samples: &[(String, String, f64)], name: &str, labels: &[&str]) -> Option<f64> {
    let found: Vec<f64> = samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|p| split_labels(l).iter().any(|x| x == p))
        })
        .map(|(_, _, v)| *v)
        .collect();
    assert!(
        found.len() <= 1,
        "{name} {labels:?} is more than one series: {found:?}"
    );
    found.first().copied()
}

#[test]
fn unconfigured_it_is_not_there() {
    let d = common::token_mode();
    let a = scrape(&d, &[common::token_header()]);
    assert_eq!(a.status, 404, "{}", a.body);
    let a = scrape(&d, &[bearer(TOKEN)]);
    assert_eq!(a.status, 404, "even with the session token: {}", a.body);
}

#[test]
fn the_token_opens_it_and_nothing_else_does() {
    let d = dashboard(
        tempfile::tempdir().unwrap(),
        &[("HERMES_METRICS_TOKEN", METRICS_TOKEN)],
    );
    let a = scrape(&d, &[bearer(METRICS_TOKEN)]);
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.header("content-type").as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let samples = parse(&a.body);
    assert_eq!(value(&samples, "hermes_supervisor_up", &[]), Some(0.0));
    assert!(value(&samples, "hermes_volume_total_bytes", &[]).unwrap() > 0.0);
    assert!(value(&samples, "hermes_volume_available_bytes", &[]).is_some());

    for (why, headers) in [
        ("a wrong token", vec![bearer("metrics-0123456789abcdeX")]),
        ("no token", vec![]),
        ("the session token", vec![bearer(TOKEN)]),
        ("a session", vec![common::token_header()]),
    ] {
        let a = scrape(&d, &headers);
        assert_eq!(a.status, 401, "{why}: {}", a.body);
        assert!(!a.body.contains("hermes_"), "{why}: {}", a.body);
    }
    let a = scrape(&d, &[]);
    assert_eq!(
        a.header("www-authenticate").as_deref(),
        Some("Bearer realm=\"hermes metrics\"")
    );
    // The metrics token is no session: the API stays closed to it.
    let a = request(
        &d,
        "GET",
        "/api/status",
        &local(&d),
        &[bearer(METRICS_TOKEN)],
    );
    assert_eq!(a.status, 401, "{}", a.body);
    // A scraper names the pod by its address: the token passes whatever the Host.
    let a = request(
        &d,
        "GET",
        "/metrics",
        "10.42.0.7:9119",
        &[bearer(METRICS_TOKEN)],
    );
    assert_eq!(a.status, 200, "{}", a.body);
}

#[test]
fn an_allowlisted_address_scrapes_without_a_token() {
    let home = tempfile::tempdir().unwrap();
    let d = dashboard(
        home,
        &[("HERMES_METRICS_ALLOW", "10.0.0.0/8, 127.0.0.1/32")],
    );
    let a = scrape(&d, &[]);
    assert_eq!(a.status, 200, "{}", a.body);
    parse(&a.body);
    // A bearer when no token is configured: the address decides, as without one.
    let a = scrape(&d, &[bearer("whatever-the-scraper-sends")]);
    assert_eq!(a.status, 200, "{}", a.body);
    // From an allowlisted address, a Host the dashboard does not answer to is still refused
    // (DNS rebinding: a page could make the request, from the browser's address).
    let a = request(&d, "GET", "/metrics", "evil.example", &[]);
    assert_eq!(a.status, 401, "{}", a.body);

    let d = dashboard(
        tempfile::tempdir().unwrap(),
        &[("HERMES_METRICS_ALLOW", "10.0.0.0/8")],
    );
    let a = scrape(&d, &[]);
    assert_eq!(a.status, 401, "loopback is not in 10/8: {}", a.body);
}

/// A gateway's `/metrics` stand-in on a free port: answers `body` to every request.
fn fake_gateway(body: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let mut head = [0u8; 1024];
            let _ = s.read(&mut head);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

const GATEWAY_TEXT: &str =
    "# HELP hermes_gateway_build_info The gateway's version and profile (always 1).
# TYPE hermes_gateway_build_info gauge
hermes_gateway_build_info{version=\"0.1.0\",profile=\"default\"} 1
# HELP hermes_gateway_ready 1 when /ready answers 200.
# TYPE hermes_gateway_ready gauge
hermes_gateway_ready 1
# HELP hermes_gateway_requests_total HTTP requests answered, by route and status class.
# TYPE hermes_gateway_requests_total counter
hermes_gateway_requests_total{route=\"/health\",code=\"2xx\"} 7
";

#[test]
fn services_become_series_and_a_gateways_own_metrics_pass_through() {
    let home = tempfile::tempdir().unwrap();
    let port = fake_gateway(GATEWAY_TEXT);
    // The default profile's gateway listens on that port (as the gateway resolves it).
    std::fs::write(home.path().join("SOUL.md"), "soul\n").unwrap();
    std::fs::write(
        home.path().join(".env"),
        format!(
            "API_SERVER_ENABLED=true\nAPI_SERVER_PORT={port}\nAPI_SERVER_KEY=k-0123456789abcdef\n"
        ),
    )
    .unwrap();
    let mut gateway = row("gateway-default", StateName::Up, Some("default"));
    gateway.resources = Some(resources(3));
    gateway.memory_max = Some(MemoryLimit {
        bytes: 1 << 30,
        enforced_by: Enforcement::Sampling,
    });
    gateway.restarts = 2;
    gateway.last_exit = Some(ExitStatus::Signal(9));
    let mut worker = row("worker", StateName::Backoff, None);
    worker.last_exit = Some(ExitStatus::Code(3));
    let _sup = FakeSupervisor::serve(home.path(), vec![gateway, worker]);
    let d = dashboard(home, &[("HERMES_METRICS_TOKEN", METRICS_TOKEN)]);

    let a = scrape(&d, &[bearer(METRICS_TOKEN)]);
    assert_eq!(a.status, 200, "{}", a.body);
    let s = parse(&a.body);
    let gw = "service=\"gateway-default\"";
    let wk = "service=\"worker\"";
    assert_eq!(value(&s, "hermes_supervisor_up", &[]), Some(1.0));
    assert_eq!(
        value(&s, "hermes_service_up", &[gw, "profile=\"default\""]),
        Some(1.0)
    );
    assert_eq!(value(&s, "hermes_service_up", &[wk]), Some(0.0));
    assert_eq!(
        value(&s, "hermes_service_state", &[wk, "state=\"backoff\""]),
        Some(1.0)
    );
    assert_eq!(
        value(&s, "hermes_service_state", &[wk, "state=\"up\""]),
        Some(0.0)
    );
    let one_hot: f64 = s
        .iter()
        .filter(|(n, l, _)| n == "hermes_service_state" && l.contains(wk))
        .map(|(_, _, v)| v)
        .sum();
    assert_eq!(one_hot, 1.0);
    assert_eq!(value(&s, "hermes_service_restarts_total", &[gw]), Some(2.0));
    assert_eq!(
        value(&s, "hermes_service_last_exit_code", &[gw]),
        Some(137.0)
    );
    assert_eq!(value(&s, "hermes_service_last_exit_code", &[wk]), Some(3.0));
    assert_eq!(
        value(&s, "hermes_service_memory_bytes", &[gw]),
        Some((212u64 << 20) as f64)
    );
    assert_eq!(value(&s, "hermes_service_memory_bytes", &[wk]), None);
    assert_eq!(
        value(
            &s,
            "hermes_service_memory_limit_bytes",
            &[gw, "enforced_by=\"sampling\""]
        ),
        Some((1u64 << 30) as f64)
    );
    assert_eq!(
        value(&s, "hermes_service_cpu_seconds_total", &[gw]),
        Some(12.5)
    );
    assert_eq!(
        value(&s, "hermes_service_uptime_seconds", &[gw]),
        Some(75.5)
    );
    assert_eq!(value(&s, "hermes_service_uptime_seconds", &[wk]), None);

    // Passed through: its own labels, and the profile where it had none.
    assert_eq!(
        value(
            &s,
            "hermes_gateway_metrics_up",
            &[gw, "profile=\"default\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(&s, "hermes_gateway_ready", &["profile=\"default\""]),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "hermes_gateway_requests_total",
            &["profile=\"default\"", "route=\"/health\"", "code=\"2xx\""]
        ),
        Some(7.0)
    );
    assert!(
        a.body
            .contains("hermes_gateway_build_info{version=\"0.1.0\",profile=\"default\"} 1\n"),
        "{}",
        a.body
    );
}

#[test]
fn a_gateway_that_does_not_answer_costs_only_its_own_series() {
    let home = tempfile::tempdir().unwrap();
    // A port that accepts and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    std::fs::write(home.path().join("SOUL.md"), "soul\n").unwrap();
    std::fs::write(
        home.path().join(".env"),
        format!(
            "API_SERVER_ENABLED=true\nAPI_SERVER_PORT={port}\nAPI_SERVER_KEY=k-0123456789abcdef\n"
        ),
    )
    .unwrap();
    let _sup = FakeSupervisor::serve(
        home.path(),
        vec![row("gateway-default", StateName::Up, Some("default"))],
    );
    let d = dashboard(home, &[("HERMES_METRICS_TOKEN", METRICS_TOKEN)]);
    let started = std::time::Instant::now();
    let a = scrape(&d, &[bearer(METRICS_TOKEN)]);
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let s = parse(&a.body);
    assert_eq!(
        value(
            &s,
            "hermes_gateway_metrics_up",
            &["service=\"gateway-default\""]
        ),
        Some(0.0)
    );
    assert_eq!(
        value(&s, "hermes_service_up", &["service=\"gateway-default\""]),
        Some(1.0)
    );
    drop(silent);
}

/// This machine's address on its default route (no packet is sent), unless it is loopback.
fn own_address() -> Option<std::net::IpAddr> {
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    probe.connect("10.255.255.255:9").ok()?;
    let ip = probe.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn on_every_address_for_metrics_alone_the_pages_stay_on_loopback() {
    let Some(ip) = own_address() else {
        hermes_test_support::skip("this machine has no address besides loopback");
        return;
    };
    let env = [
        ("HERMES_DASHBOARD_SESSION_TOKEN", TOKEN),
        ("HERMES_METRICS_TOKEN", METRICS_TOKEN),
    ];
    let home = tempfile::tempdir().unwrap();
    let run = home.path().join("run").to_string_lossy().into_owned();
    let lookup = move |k: &str| {
        env.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
            .or_else(|| (k == "HERMES_RUNTIME_DIR").then(|| run.clone()))
    };
    let settings = hermes_dashboard::Settings::resolve(Some("0.0.0.0".into()), Some(0), &lookup)
        .expect("a public host is allowed for /metrics alone");
    let root = home.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let app = hermes_dashboard::router(root, settings, Arc::new(lookup));
            hermes_dashboard::serve(listener, app).await.unwrap();
        });
    });
    let d = Dashboard {
        addr: rx.recv().unwrap(),
        home,
    };
    let host = d.addr.to_string();
    let a = request(&d, "GET", "/metrics", &host, &[bearer(METRICS_TOKEN)]);
    assert_eq!(a.status, 200, "{}", a.body);
    for path in ["/", "/api/status"] {
        let a = request(&d, "GET", path, &host, &[common::token_header()]);
        assert_eq!(a.status, 403, "{path} from {ip}: {}", a.body);
        assert!(a.body.contains("loopback only"), "{}", a.body);
    }
    let a = request(&d, "GET", "/api/health", &host, &[]);
    assert_eq!(a.status, 200, "the probe stays public: {}", a.body);
}

#[test]
fn pid_1s_boot_is_a_series_once_it_recorded_one() {
    let home = tempfile::tempdir().unwrap();
    let _sup = FakeSupervisor::serve(home.path(), vec![row("worker", StateName::Up, None)]);
    let run = home.path().join("run");
    let d = dashboard(home, &[("HERMES_METRICS_TOKEN", METRICS_TOKEN)]);
    let before = parse(&scrape(&d, &[bearer(METRICS_TOKEN)]).body);
    assert_eq!(
        value(&before, "hermes_boot_duration_seconds", &[]),
        None,
        "`hermes up` has no boot"
    );
    let started = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_760_000_000);
    let record = hermes_services::boot_record::BootRecord::new(
        started,
        std::time::Duration::from_millis(1250),
    );
    hermes_services::boot_record::write(&run, &record).unwrap();
    let after = parse(&scrape(&d, &[bearer(METRICS_TOKEN)]).body);
    assert_eq!(
        value(&after, "hermes_boot_duration_seconds", &[]),
        Some(1.25)
    );
    assert_eq!(
        value(&after, "hermes_boot_start_time_seconds", &[]),
        Some(1_760_000_000.0)
    );
}

#[test]
fn wrong_metrics_tokens_and_wrong_sign_ins_are_limited_apart() {
    let fresh = || {
        let home = tempfile::tempdir().unwrap();
        dashboard(home, &[("HERMES_METRICS_TOKEN", METRICS_TOKEN)])
    };
    let ui = |d: &Dashboard| {
        request(
            d,
            "GET",
            "/api/status",
            &local(d),
            &[common::token_header()],
        )
        .status
    };
    // A scraper with a stale token uses up the metrics door's failures, and the UI at the same
    // address stays open to its session.
    let d = fresh();
    for _ in 0..5 {
        assert_eq!(
            scrape(&d, &[bearer("metrics-0123456789abcdeX")]).status,
            401
        );
    }
    assert_eq!(scrape(&d, &[bearer(METRICS_TOKEN)]).status, 429);
    assert_eq!(ui(&d), 200);
    // Wrong sign-ins use up the UI's, and leave the metrics door as it was.
    let d = fresh();
    for _ in 0..5 {
        let _ = request(&d, "GET", "/?token=wrong", &local(&d), &[]);
    }
    assert_eq!(ui(&d), 429);
    assert_eq!(scrape(&d, &[bearer(METRICS_TOKEN)]).status, 200);
}

#[test]
fn unavailable_plugin_packages_are_counted() {
    let home = tempfile::tempdir().unwrap();
    let target = home.path().join("lazy-packages");
    common::plant_unavailable_plugins(&target);
    let target_text = target.to_string_lossy().into_owned();
    let _sup = FakeSupervisor::serve(home.path(), vec![]);
    let d = dashboard(
        home,
        &[
            ("HERMES_METRICS_TOKEN", METRICS_TOKEN),
            ("HERMES_LAZY_INSTALL_TARGET", &target_text),
        ],
    );
    let a = scrape(&d, &[bearer(METRICS_TOKEN)]);
    assert_eq!(a.status, 200, "{}", a.body);
    let s = parse(&a.body);
    assert_eq!(value(&s, "hermes_plugin_generation", &[]), Some(2.0));
    assert_eq!(
        value(&s, "hermes_plugin_packages_unavailable", &[]),
        Some(1.0)
    );
}
