//! Gateway overhead benchmark: the same streaming chat load sent straight to a local
//! OpenAI-compatible upstream and through a gateway (a separate process) in front of it.
//!
//! Reports p50/p99 latency of a whole streamed answer, p50 time to first byte, requests per
//! second at a fixed concurrency, and the gateway process's RSS (idle and peak). The upstream
//! is the fake one the tests use (`tests/support`), answering instantly, so the difference
//! between the two runs is the gateway's own cost.
//!
//! ```text
//! cargo run --release -p hermes-gateway --example gateway_bench -- [concurrency] [seconds]
//! ```

#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hermes_gateway::{GatewaySettings, Phase, StateRecorder};
use serde_json::json;

const KEY: &str = "bench-key";

struct PrintAddr;

impl StateRecorder for PrintAddr {
    fn record(&self, _phase: Phase, _reason: Option<&str>) {}
    fn listening(&self, addr: std::net::SocketAddr) {
        println!("LISTENING {addr}");
        let _ = std::io::stdout().flush();
    }
}

/// The gateway child: serve until SIGTERM.
fn serve_gateway(home: &str, base_url: &str) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut s = GatewaySettings::new("bench", home);
        s.port = 0;
        s.api_key = Some(KEY.into());
        s.soul = Some("You are the benchmark soul.".into());
        let mut p = hermes_gateway::ProviderSettings::new(base_url, "bench-model");
        p.api_key = Some("upstream".into());
        s.provider = Some(p);
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("signal");
        let shutdown = async move {
            term.recv().await;
        };
        if let Err(e) = hermes_gateway::run(s, &PrintAddr, shutdown).await {
            eprintln!("gateway failed: {e}");
        }
    });
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

struct Stats {
    requests: usize,
    rps: f64,
    p50: Duration,
    p99: Duration,
    ttfb_p50: Duration,
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

async fn load(url: &str, concurrency: usize, seconds: u64) -> Stats {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency * 2)
        .build()
        .expect("client");
    let body = json!({"model": "x", "stream": true,
                      "messages": [{"role": "user", "content": "a benchmark question with some words"}]});
    // Warm up connections and code paths.
    let warm_until = Instant::now() + Duration::from_secs(1);
    let run = |until: Instant| {
        let mut tasks = Vec::new();
        for _ in 0..concurrency {
            let (c, url, body) = (client.clone(), url.to_string(), body.clone());
            tasks.push(tokio::spawn(async move {
                let mut out = Vec::new();
                while Instant::now() < until {
                    let t = Instant::now();
                    let mut r = c
                        .post(&url)
                        .header("authorization", format!("Bearer {KEY}"))
                        .json(&body)
                        .send()
                        .await
                        .expect("request");
                    assert!(r.status().is_success(), "status {}", r.status());
                    let mut first = None;
                    while let Some(_chunk) = r.chunk().await.expect("chunk") {
                        first.get_or_insert_with(|| t.elapsed());
                    }
                    out.push((t.elapsed(), first.unwrap_or_default()));
                }
                out
            }));
        }
        tasks
    };
    for t in run(warm_until) {
        t.await.expect("warmup");
    }
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let mut all = Vec::new();
    for t in run(until) {
        all.extend(t.await.expect("worker"));
    }
    let elapsed = started.elapsed();
    let mut total: Vec<Duration> = all.iter().map(|(d, _)| *d).collect();
    let mut ttfb: Vec<Duration> = all.iter().map(|(_, f)| *f).collect();
    total.sort();
    ttfb.sort();
    Stats {
        requests: total.len(),
        rps: total.len() as f64 / elapsed.as_secs_f64(),
        p50: pct(&total, 0.50),
        p99: pct(&total, 0.99),
        ttfb_p50: pct(&ttfb, 0.50),
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--serve-gateway") && args.len() == 4 {
        serve_gateway(&args[2], &args[3]);
        return;
    }
    let concurrency: usize = args.get(1).and_then(|v| v.parse().ok()).unwrap_or(32);
    let seconds: u64 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(10);

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async move {
        let up = support::Upstream::start().await;
        let home = tempfile::tempdir().expect("tempdir");
        let exe = std::env::current_exe().expect("current exe");
        let mut child = Command::new(exe)
            .args([
                "--serve-gateway",
                &home.path().display().to_string(),
                &up.base_url(),
            ])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn gateway");
        let pid = child.id();
        let stdout = child.stdout.take().expect("stdout");
        let addr = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(stdout).read_line(&mut line).expect("read");
            line.trim()
                .strip_prefix("LISTENING ")
                .map(String::from)
                .expect("listening line")
        })
        .await
        .expect("join");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let idle_rss = rss_kib(pid, "VmRSS:");

        let direct = load(
            &format!("{}/chat/completions", up.base_url()),
            concurrency,
            seconds,
        )
        .await;
        let via = load(
            &format!("http://{addr}/v1/chat/completions"),
            concurrency,
            seconds,
        )
        .await;
        let peak_rss = rss_kib(pid, "VmHWM:");
        let busy_rss = rss_kib(pid, "VmRSS:");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = child.wait();

        println!("concurrency {concurrency}, {seconds} s per run, streamed answers of ~8 chunks\n");
        println!("| path | requests | req/s | p50 | p99 | p50 first byte |");
        println!("|------|---------:|------:|----:|----:|---------------:|");
        for (name, s) in [("direct to upstream", &direct), ("through gateway", &via)] {
            println!(
                "| {name} | {} | {:.0} | {} | {} | {} |",
                s.requests,
                s.rps,
                ms(s.p50),
                ms(s.p99),
                ms(s.ttfb_p50)
            );
        }
        println!(
            "\nratios (gateway / direct): req/s {:.2}, p50 {:.2}, p99 {:.2}",
            via.rps / direct.rps,
            via.p50.as_secs_f64() / direct.p50.as_secs_f64(),
            via.p99.as_secs_f64() / direct.p99.as_secs_f64()
        );
        println!(
            "gateway RSS: idle {} KiB, after load {} KiB, peak {} KiB",
            idle_rss, busy_rss, peak_rss
        );
    });
}
