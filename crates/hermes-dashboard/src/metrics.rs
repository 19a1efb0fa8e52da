//! `GET /metrics`: the whole container in the Prometheus text exposition (format 0.0.4), on the
//! dashboard's listener — the supervisor's view of every service (state, restarts, last exit,
//! memory and its limit, CPU, uptime), the volume's space, and what each running native
//! gateway exports on its own `/metrics`, passed through.
//!
//! Words:
//! * *family* — one metric name with its `# HELP`/`# TYPE` lines and every sample of it; the
//!   format wants each family once, in one group, so the gateways' texts are merged by family
//!   ([`Families`]) rather than appended one after another.
//! * *pass-through* — a gateway's samples as it wrote them (its own labels kept), with a
//!   `profile` label added where a sample has none, so two profiles' gateways never make the
//!   same series.
//!
//! Asked afresh on every scrape, as the Overview: the snapshot of [`crate::status`] (one
//! control-socket call) and one request per running native gateway, all at once, each
//! bounded by [`GATEWAY_TIMEOUT`]: a hung gateway costs its own series (its
//! `hermes_gateway_metrics_up` says 0), never the scrape. Who may scrape is the guard's
//! business (`crate::guard`: its own token or an address allowlist, 404 when neither is set).

use hermes_http::prometheus::{escape_label, header};
use std::fmt::Write as _;
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use hermes_supervisor::{ServiceStatus, StateName};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::server::App;
use crate::status;

/// Where the endpoint is (below the dashboard's base path, as every route).
pub const PATH: &str = "/metrics";

/// The exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How long one gateway's `/metrics` may take (connect, send, read) before it counts as down
/// for this scrape.
pub const GATEWAY_TIMEOUT: Duration = Duration::from_millis(1500);

/// The most read of one gateway's answer (its exposition is a few kilobytes).
const GATEWAY_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// Every state, for the one-hot `hermes_service_state`.
const STATES: [StateName; 7] = [
    StateName::Disabled,
    StateName::Down,
    StateName::Starting,
    StateName::Up,
    StateName::Backoff,
    StateName::Stopping,
    StateName::Failed,
];

/// `GET /metrics`.
pub async fn scrape(State(app): State<App>) -> Response {
    let (root, vars) = (app.root.clone(), app.vars.clone());
    let asked = crate::server::blocking(move || {
        let boot = hermes_services::boot_record::read(&root, &*vars);
        let plugins = vars(hermes_deps::env::TARGET_VAR)
            .filter(|t| !t.trim().is_empty())
            .map(|t| hermes_deps::generations::overview(std::path::Path::new(t.trim())));
        (status::snapshot(&root, &*vars), boot, plugins)
    });
    let (snapshot, boot, plugins) = match asked.await {
        Ok(s) => s,
        Err(answer) => return answer,
    };
    let rows = rows_of(&snapshot);
    let gateways: Vec<(String, String, u16)> = rows
        .iter()
        .filter_map(|(row, port, engine)| {
            let scraped = row.state == StateName::Up && engine.as_deref() == Some("native");
            Some((row.name.clone(), row.profile.clone()?, (*port)?)).filter(|_| scraped)
        })
        .collect();
    let fetched = futures_util::future::join_all(
        gateways
            .iter()
            .map(|(_, _, port)| gateway_metrics(*port, GATEWAY_TIMEOUT)),
    )
    .await;
    let mut out = String::with_capacity(16 * 1024);
    render_container(&mut out, &snapshot, &rows);
    render_boot(&mut out, boot);
    render_plugins(&mut out, plugins.as_ref());
    let mut families = Families::default();
    header(
        &mut out,
        "hermes_gateway_metrics_up",
        "1 when a running native gateway's own /metrics answered this scrape (its series follow), 0 when it did not in time.",
        "gauge",
    );
    for ((service, profile, _), text) in gateways.iter().zip(&fetched) {
        let labels = format!(
            "service=\"{}\",profile=\"{}\"",
            escape_label(service),
            escape_label(profile)
        );
        let _ = writeln!(
            out,
            "hermes_gateway_metrics_up{{{labels}}} {}",
            u8::from(text.is_some())
        );
        if let Some(text) = text {
            families.add(text, profile);
        }
    }
    families.write(&mut out);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], out).into_response()
}

/// The snapshot's service rows, typed again, each with its gateway's port and engine.
fn rows_of(snapshot: &Value) -> Vec<(ServiceStatus, Option<u16>, Option<String>)> {
    snapshot["services"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            let row: ServiceStatus = serde_json::from_value(v.clone()).ok()?;
            let port = v["port"].as_u64().and_then(|p| u16::try_from(p).ok());
            let engine = v["engine"].as_str().map(str::to_string);
            Some((row, port, engine))
        })
        .collect()
}

/// The container's own families: the supervisor, every service, the volume.
fn render_container(
    out: &mut String,
    snapshot: &Value,
    rows: &[(ServiceStatus, Option<u16>, Option<String>)],
) {
    let reachable = snapshot["supervisor"]["reachable"].as_bool() == Some(true);
    header(
        out,
        "hermes_supervisor_up",
        "1 when the supervisor answered on its control socket for this scrape (else every hermes_service_* series is absent).",
        "gauge",
    );
    let _ = writeln!(out, "hermes_supervisor_up {}", u8::from(reachable));
    let labels: Vec<String> = rows.iter().map(|(r, _, _)| service_labels(r)).collect();
    let each = |out: &mut String,
                name: &str,
                help: &str,
                kind: &str,
                value: &dyn Fn(&ServiceStatus) -> Option<String>| {
        header(out, name, help, kind);
        for ((row, _, _), labels) in rows.iter().zip(&labels) {
            if let Some(v) = value(row) {
                let _ = writeln!(out, "{name}{{{labels}}} {v}");
            }
        }
    };
    each(
        out,
        "hermes_service_up",
        "1 when the service is up (running and ready), else 0.",
        "gauge",
        &|r| Some(u8::from(r.state == StateName::Up).to_string()),
    );
    header(
        out,
        "hermes_service_state",
        "The service's state, one-hot: 1 for the state it is in, 0 for the others (disabled, down, starting, up, backoff, stopping, failed).",
        "gauge",
    );
    for ((row, _, _), labels) in rows.iter().zip(&labels) {
        for state in STATES {
            let _ = writeln!(
                out,
                "hermes_service_state{{{labels},state=\"{state}\"}} {}",
                u8::from(row.state == state)
            );
        }
    }
    each(
        out,
        "hermes_service_restarts_total",
        "Times the supervisor spawned the service again after its first start.",
        "counter",
        &|r| Some(r.restarts.to_string()),
    );
    each(
        out,
        "hermes_service_last_exit_code",
        "How the service's previous process ended: its exit code, or 128 + the signal number (absent before a first exit).",
        "gauge",
        &|r| r.last_exit.map(|e| e.exit_code().to_string()),
    );
    each(
        out,
        "hermes_service_uptime_seconds",
        "Seconds since the service's current process was spawned (absent without one).",
        "gauge",
        &|r| r.uptime_secs.map(|s| s.to_string()),
    );
    each(
        out,
        "hermes_service_memory_bytes",
        "Resident memory of the service's processes as the supervisor last sampled it (summed over its process group).",
        "gauge",
        &|r| r.resources.as_ref().map(|x| x.memory_bytes.to_string()),
    );
    header(
        out,
        "hermes_service_memory_limit_bytes",
        "The service's memory limit (memory_max), labelled with who enforces it: cgroup (the kernel) or sampling (the supervisor).",
        "gauge",
    );
    for ((row, _, _), labels) in rows.iter().zip(&labels) {
        if let Some(limit) = row.memory_max {
            let _ = writeln!(
                out,
                "hermes_service_memory_limit_bytes{{{labels},enforced_by=\"{}\"}} {}",
                limit.enforced_by.as_str(),
                limit.bytes
            );
        }
    }
    each(
        out,
        "hermes_service_cpu_seconds_total",
        "CPU time (user and system) the service's current processes and the children they reaped have used.",
        "counter",
        &|r| r.resources.as_ref().map(|x| x.cpu_seconds.to_string()),
    );
    each(
        out,
        "hermes_service_processes",
        "Processes counted in the service's last sample.",
        "gauge",
        &|r| r.resources.as_ref().map(|x| x.processes.to_string()),
    );
    render_volume(out, &snapshot["volume"]);
    render_databases(out, snapshot);
}

/// Each gateway's databases the last check found damaged (`hermes_home::db_check`): still
/// served, and restored from an archive.
fn render_databases(out: &mut String, snapshot: &Value) {
    let gateways: Vec<(&str, &str, &Vec<Value>)> = snapshot["services"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| {
            Some((
                v["name"].as_str()?,
                v["profile"].as_str()?,
                v["damaged_databases"].as_array()?,
            ))
        })
        .collect();
    for (name, help, served) in [
        (
            "hermes_database_damaged",
            "Databases of the profile the last check found damaged and still served (restore one with `hermes backup check --repair`).",
            true,
        ),
        (
            "hermes_database_restored",
            "Databases of the profile the last check found damaged and restored from an archive (the damaged copy set aside).",
            false,
        ),
    ] {
        header(out, name, help, "gauge");
        for (service, profile, damaged) in &gateways {
            let count = damaged
                .iter()
                .filter(|d| d["still_served"].as_bool() == Some(served))
                .count();
            let _ = writeln!(
                out,
                "{name}{{service=\"{}\",profile=\"{}\"}} {count}",
                escape_label(service),
                escape_label(profile)
            );
        }
    }
}

/// The durable target's install generations, when there is a target: the active one and how
/// many packages asked for are unavailable with this image (`hermes plugins repair`).
fn render_plugins(out: &mut String, overview: Option<&hermes_deps::generations::Overview>) {
    let Some(overview) = overview else {
        return;
    };
    header(
        out,
        "hermes_plugin_generation",
        "The active install generation of the plugin packages (0: none).",
        "gauge",
    );
    let active = overview.generations.iter().find(|g| g.active);
    let _ = writeln!(
        out,
        "hermes_plugin_generation {}",
        active.map_or(0, |g| g.id)
    );
    header(
        out,
        "hermes_plugin_packages_unavailable",
        "Plugin packages asked for that the last check found unavailable with this image (run `hermes plugins repair`).",
        "gauge",
    );
    let unavailable = match overview.last_resolution.as_ref().map(|r| &r.resolution) {
        Some(hermes_deps::generations::Resolution::Unavailable { packages, .. }) => packages.len(),
        _ => 0,
    };
    let _ = writeln!(out, "hermes_plugin_packages_unavailable {unavailable}");
}

/// PID 1's boot, when it recorded one (`hermes up` has no boot stages).
fn render_boot(out: &mut String, boot: Option<hermes_services::boot_record::BootRecord>) {
    let Some(boot) = boot else {
        return;
    };
    header(
        out,
        "hermes_boot_duration_seconds",
        "How long PID 1's boot stages took, from its start to starting the services.",
        "gauge",
    );
    let _ = writeln!(out, "hermes_boot_duration_seconds {}", boot.boot_seconds);
    header(
        out,
        "hermes_boot_start_time_seconds",
        "When PID 1 started, seconds since the Unix epoch.",
        "gauge",
    );
    let _ = writeln!(out, "hermes_boot_start_time_seconds {}", boot.started_at);
}

/// The volume's space (`HERMES_HOME`'s filesystem), when it could be read.
fn render_volume(out: &mut String, volume: &Value) {
    for (name, key, help) in [
        (
            "hermes_volume_total_bytes",
            "total_bytes",
            "Size of the filesystem HERMES_HOME is on.",
        ),
        (
            "hermes_volume_available_bytes",
            "available_bytes",
            "Bytes of that filesystem the service user can still write (f_bavail, as df's Avail).",
        ),
        (
            "hermes_volume_used_bytes",
            "used_bytes",
            "Bytes of that filesystem in use (df's Used).",
        ),
    ] {
        if let Some(v) = volume[key].as_u64() {
            header(out, name, help, "gauge");
            let _ = writeln!(out, "{name} {v}");
        }
    }
}

/// `service="…"` and, for a profile's gateway, `,profile="…"`.
fn service_labels(row: &ServiceStatus) -> String {
    let mut labels = format!("service=\"{}\"", escape_label(&row.name));
    if let Some(p) = &row.profile {
        let _ = write!(labels, ",profile=\"{}\"", escape_label(p));
    }
    labels
}

/// One gateway's exposition from `127.0.0.1:<port>/metrics` (the gateway serves it without
/// credentials), or `None` when it does not answer 200 within `timeout`.
async fn gateway_metrics(port: u16, timeout: Duration) -> Option<String> {
    let ask = async move {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        // HTTP/1.0: the answer is the whole body up to the close, never chunked.
        let request = format!(
            "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut raw = Vec::new();
        stream
            .take(GATEWAY_MAX_BYTES)
            .read_to_end(&mut raw)
            .await
            .ok()?;
        let text = String::from_utf8(raw).ok()?;
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split(' ').nth(1)?;
        (status == "200").then(|| body.to_string())
    };
    tokio::time::timeout(timeout, ask).await.ok().flatten()
}

/// Families gathered from several expositions, in the order first seen.
#[derive(Default)]
struct Families {
    list: Vec<Family>,
}

/// One family: its `# HELP` and `# TYPE` lines (the first exposition's) and its samples.
struct Family {
    name: String,
    help: Option<String>,
    kind: Option<String>,
    samples: Vec<String>,
}

impl Families {
    /// Adds `text`'s families and samples, with `profile` added to samples without one.
    fn add(&mut self, text: &str, profile: &str) {
        let mut current: Option<usize> = None;
        for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                let i = self.family(name);
                self.list[i].help.get_or_insert_with(|| help.to_string());
                current = Some(i);
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
                let i = self.family(name);
                self.list[i].kind.get_or_insert_with(|| kind.to_string());
                current = Some(i);
            } else if line.starts_with('#') {
                continue;
            } else {
                let name = sample_name(line);
                // A histogram's `_bucket`/`_sum`/`_count` belong to the family announced
                // last; a sample of another name starts (or finds) a family of its own.
                let i = match current {
                    Some(i) if belongs(name, &self.list[i].name) => i,
                    _ => self.family(name),
                };
                current = Some(i);
                self.list[i].samples.push(with_profile(line, profile));
            }
        }
    }

    fn family(&mut self, name: &str) -> usize {
        if let Some(i) = self.list.iter().position(|f| f.name == name) {
            return i;
        }
        self.list.push(Family {
            name: name.to_string(),
            help: None,
            kind: None,
            samples: Vec::new(),
        });
        self.list.len() - 1
    }

    fn write(&self, out: &mut String) {
        for f in &self.list {
            if let Some(help) = &f.help {
                let _ = writeln!(out, "# HELP {} {help}", f.name);
            }
            if let Some(kind) = &f.kind {
                let _ = writeln!(out, "# TYPE {} {kind}", f.name);
            }
            for s in &f.samples {
                out.push_str(s);
                out.push('\n');
            }
        }
    }
}

/// The metric name of a sample line (`name{…} v` or `name v`).
fn sample_name(line: &str) -> &str {
    let end = line.find(['{', ' ']).unwrap_or(line.len());
    &line[..end]
}

/// Whether a sample called `name` is of family `family` (itself, or a histogram's or
/// summary's parts).
fn belongs(name: &str, family: &str) -> bool {
    name == family
        || name
            .strip_prefix(family)
            .is_some_and(|rest| matches!(rest, "_bucket" | "_sum" | "_count"))
}

/// `line` with `profile="…"` first among its labels, unless it has a profile label already.
fn with_profile(line: &str, profile: &str) -> String {
    let name = sample_name(line);
    let rest = &line[name.len()..];
    let label = format!("profile=\"{}\"", escape_label(profile));
    match rest.strip_prefix('{') {
        Some(labels) if labels.starts_with("profile=\"") || labels.contains(",profile=\"") => {
            line.to_string()
        }
        Some(labels) if labels.starts_with('}') => format!("{name}{{{label}{labels}"),
        Some(labels) => format!("{name}{{{label},{labels}"),
        None => format!("{name}{{{label}}}{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GATEWAY: &str = "# HELP hermes_gateway_build_info Build.\n# TYPE hermes_gateway_build_info gauge\nhermes_gateway_build_info{version=\"1\",profile=\"work\"} 1\n# HELP hermes_gateway_ready Ready.\n# TYPE hermes_gateway_ready gauge\nhermes_gateway_ready 1\n# HELP x_seconds Lat.\n# TYPE x_seconds histogram\nx_seconds_bucket{le=\"1\"} 2\nx_seconds_bucket{le=\"+Inf\"} 3\nx_seconds_sum 4.5\nx_seconds_count 3\n";

    #[test]
    fn two_gateways_merge_by_family_with_their_profiles() {
        let mut f = Families::default();
        f.add(GATEWAY, "work");
        f.add(&GATEWAY.replace("\"work\"", "\"home\""), "home");
        let mut out = String::new();
        f.write(&mut out);
        assert_eq!(
            out.matches("# TYPE hermes_gateway_ready gauge").count(),
            1,
            "{out}"
        );
        assert_eq!(out.matches("# HELP x_seconds ").count(), 1, "{out}");
        let ready: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("hermes_gateway_ready"))
            .collect();
        assert_eq!(
            ready,
            [
                "hermes_gateway_ready{profile=\"work\"} 1",
                "hermes_gateway_ready{profile=\"home\"} 1"
            ]
        );
        // One group per family: the second gateway's buckets follow the first's.
        let lines: Vec<&str> = out.lines().collect();
        let first = lines
            .iter()
            .position(|l| l.starts_with("x_seconds_bucket"))
            .unwrap();
        assert!(
            lines[first..first + 8]
                .iter()
                .all(|l| l.starts_with("x_seconds_")),
            "{out}"
        );
        assert!(
            out.contains("x_seconds_bucket{profile=\"home\",le=\"+Inf\"} 3\n"),
            "{out}"
        );
        // A profile label already there is kept as it is.
        assert!(out.contains("hermes_gateway_build_info{version=\"1\",profile=\"work\"} 1\n"));
        assert!(!out.contains("profile=\"work\",version"), "{out}");
    }

    #[test]
    fn damaged_databases_are_counted_per_gateway_still_served_or_restored() {
        let snapshot = serde_json::json!({"services": [
            {"name": "gateway-default", "profile": "default", "damaged_databases": [
                {"file": "state.db", "still_served": true, "text": "…"},
                {"file": "kanban.db", "still_served": false, "text": "…"},
                {"file": "memory_store.db", "still_served": true, "text": "…"},
            ]},
            {"name": "gateway-work", "profile": "work", "damaged_databases": []},
            {"name": "dashboard"},
        ]});
        let mut out = String::new();
        render_databases(&mut out, &snapshot);
        for line in [
            "hermes_database_damaged{service=\"gateway-default\",profile=\"default\"} 2",
            "hermes_database_damaged{service=\"gateway-work\",profile=\"work\"} 0",
            "hermes_database_restored{service=\"gateway-default\",profile=\"default\"} 1",
            "hermes_database_restored{service=\"gateway-work\",profile=\"work\"} 0",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} in:\n{out}");
        }
        assert!(!out.contains("dashboard\""), "{out}");
    }

    #[test]
    fn labels_are_added_to_every_shape_of_sample() {
        assert_eq!(with_profile("a 1", "p"), "a{profile=\"p\"} 1");
        assert_eq!(with_profile("a{} 1", "p"), "a{profile=\"p\"} 1");
        assert_eq!(
            with_profile("a{b=\"c\"} 1", "p\""),
            "a{profile=\"p\\\"\",b=\"c\"} 1"
        );
        assert!(belongs("h_bucket", "h") && belongs("h", "h") && !belongs("hx", "h"));
    }
}
