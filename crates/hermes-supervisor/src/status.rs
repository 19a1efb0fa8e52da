//! What the supervisor reports: [`ServiceStatus`] rows, [`ExitStatus`], and the human table.
//!
//! Words defined here:
//! * **last exit** — how the previous process of a service ended: a code or a signal.
//! * **uptime** — seconds since the current process was spawned (only while it has one).
//! * **resources** — what a service's processes use, sampled by the supervisor: resident memory
//!   (summed over its process group), CPU seconds, and a
//!   short history ([`Resources`]).
//! * **memory limit** — a service's `memory_max`, enforced by its own cgroup's `memory.max`
//!   where the supervisor can create cgroups, else by sampling ([`MemoryLimit`]).

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a process ended. A signal is recorded as a signal, never as a made-up code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
}

impl ExitStatus {
    /// The shell convention: the code, or 128 + signal number.
    pub fn exit_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ExitStatus::Code(c) => write!(f, "code {c}"),
            ExitStatus::Signal(s) => match nix::sys::signal::Signal::try_from(s) {
                Ok(sig) => write!(f, "signal {}", sig.as_str()),
                Err(_) => write!(f, "signal {s}"),
            },
        }
    }
}

/// The state names, as shown and as sent over the control socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateName {
    /// Switched off by configuration; never started at boot.
    Disabled,
    /// Not running, and not meant to be right now (stopped or exited cleanly).
    Down,
    /// Spawned, waiting for readiness or the settle time.
    Starting,
    /// Running and ready.
    Up,
    /// Waiting to be restarted after a failure.
    Backoff,
    /// Stop signal sent, waiting for the process to exit.
    Stopping,
    /// Parked after a failure that restarting will not fix.
    Failed,
}

impl StateName {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            StateName::Disabled => "disabled",
            StateName::Down => "down",
            StateName::Starting => "starting",
            StateName::Up => "up",
            StateName::Backoff => "backoff",
            StateName::Stopping => "stopping",
            StateName::Failed => "failed",
        }
    }
}

impl fmt::Display for StateName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One service as the supervisor sees it right now (a snapshot, plain data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceStatus {
    /// Service name.
    pub name: String,
    /// Current state.
    pub state: StateName,
    /// Pid (= process group id) of the current process, if any.
    pub pid: Option<i32>,
    /// Seconds since the current process was spawned, if any.
    pub uptime_secs: Option<f64>,
    /// Seconds spent in the current state.
    pub since_secs: f64,
    /// Number of times the service was spawned again after its first start.
    pub restarts: u32,
    /// How the previous process ended.
    pub last_exit: Option<ExitStatus>,
    /// Whether that end was asked for: the process exited after the supervisor's own stop
    /// signal (an operator's stop or restart, a shutdown), whatever its code — an agent that
    /// exits 1 on SIGTERM was stopped, it did not fail.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last_exit_planned: bool,
    /// Why the service is in this state, in words ("" when there is nothing to say).
    pub reason: String,
    /// Profile label from the spec.
    #[serde(default)]
    pub profile: Option<String>,
    /// Old processes of a hand-over still finishing their work (sent the stop signal).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub draining: Vec<i32>,
    /// The latest hand-over restart, if there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<HandOverStatus>,
    /// The local addresses of the sockets the supervisor holds for the service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listening: Vec<String>,
    /// What its processes use (while it has a process, or a history from earlier ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Its memory limit and how it is enforced, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max: Option<MemoryLimit>,
    /// Its process limit, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
    /// Who enforces its process limit: its cgroup's `pids.max` (a fork past it fails) or
    /// sampling its tree (the service is killed over it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_enforced_by: Option<Enforcement>,
    /// Why its latest restart after a failure happened (`memory limit: 1.3 GiB > 1 GiB`,
    /// `exited with code 1`): a service replaced at once is `up` again before anyone reads its
    /// backoff reason, so this keeps it. `None` when it never failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
}

impl ServiceStatus {
    /// How the previous process ended, in words: `code 3`, `signal SIGKILL`, or `stopped (code
    /// 1)` when the supervisor had asked it to stop; `None` before any process ended.
    pub fn last_exit_text(&self) -> Option<String> {
        let exit = self.last_exit?;
        Some(if self.last_exit_planned {
            format!("stopped ({exit})")
        } else {
            exit.to_string()
        })
    }

    /// A row of `name` in `state` with nothing else to say (no process, no restarts, no
    /// reason): what a caller fills in, and what tests start from.
    pub fn new(name: impl Into<String>, state: StateName) -> Self {
        Self {
            name: name.into(),
            state,
            pid: None,
            uptime_secs: None,
            since_secs: 0.0,
            restarts: 0,
            last_exit: None,
            last_exit_planned: false,
            reason: String::new(),
            profile: None,
            draining: Vec::new(),
            handover: None,
            listening: Vec::new(),
            resources: None,
            memory_max: None,
            pids_max: None,
            pids_enforced_by: None,
            last_failure: None,
        }
    }
}

/// What a service's processes use, as the supervisor last sampled it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// Resident memory of the service's processes, bytes (0 when it has none now).
    pub memory_bytes: u64,
    /// CPU time its current processes (and the children they reaped) have used, seconds.
    pub cpu_seconds: f64,
    /// CPU use between the last two samples, percent of one core; `None` before two samples.
    pub cpu_percent: Option<f64>,
    /// How many processes were counted.
    pub processes: u32,
    /// Earlier samples, oldest first (at most [`HISTORY_LEN`], one per [`HISTORY_STEP_SECS`]),
    /// kept across restarts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<ResourceSample>,
}

/// Samples kept in a service's history.
pub const HISTORY_LEN: usize = 90;
/// Seconds between two samples of a service's history (90 of them: the last 15 minutes).
pub const HISTORY_STEP_SECS: u64 = 10;

/// One point of a service's history.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ResourceSample {
    /// When, seconds since the Unix epoch.
    pub at: u64,
    /// Resident memory, bytes.
    pub memory_bytes: u64,
    /// CPU use since the previous point, percent of one core.
    pub cpu_percent: f64,
}

/// A service's memory limit and how the supervisor enforces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryLimit {
    /// The limit, bytes.
    pub bytes: u64,
    /// Who enforces it.
    pub enforced_by: Enforcement,
}

/// Who enforces a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// The kernel: the service runs in its own cgroup with the limit (`memory.max` or v1's
    /// `memory.limit_in_bytes`: past it the cgroup is OOM-killed, never a neighbour;
    /// `pids.max`: a fork past it fails).
    Cgroup,
    /// The supervisor: it samples the service's process tree (resident memory, process count)
    /// and kills all of it when it is over the limit.
    Sampling,
}

impl Enforcement {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::Cgroup => "cgroup",
            Enforcement::Sampling => "sampling",
        }
    }
}

/// The reason of a service killed at its process limit: `process limit: 310 processes > 256`.
pub fn over_pids_reason(processes: u64, limit: u64) -> String {
    format!("process limit: {processes} processes > {limit}")
}

/// The reason of a service killed for its memory: `memory limit: 1.3 GiB > 1 GiB`.
pub fn over_limit_reason(used: u64, limit: u64) -> String {
    format!(
        "memory limit: {} > {}",
        hermes_errors::bytes::human(used),
        hermes_errors::bytes::human(limit)
    )
}

/// How the latest hand-over of a service went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HandOverStatus {
    /// The process that was replaced.
    pub from_pid: i32,
    /// Its successor, once spawned.
    pub to_pid: Option<i32>,
    /// Seconds from the restart request to the successor's readiness.
    pub ready_secs: Option<f64>,
    /// Seconds the replaced process took to finish its work and exit after the successor was
    /// ready; `None` while it is still draining.
    pub drained_secs: Option<f64>,
    /// Why the successor failed, when it did (the old process then went on serving).
    pub failed: Option<String>,
}

/// Formats seconds as `45s`, `3m12s`, `2h05m`, `3d04h`.
pub fn human_duration(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86400 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86400, (s % 86400) / 3600),
    }
}

/// How many columns the status table has.
pub const COLUMNS: usize = 9;

/// The columns of the status table.
pub const STATUS_COLUMNS: [&str; COLUMNS] = [
    "NAME",
    "STATE",
    "PID",
    "UPTIME",
    "MEMORY",
    "CPU",
    "RESTARTS",
    "LAST EXIT",
    "REASON",
];

/// Renders the aligned status table: `NAME STATE PID UPTIME MEMORY CPU RESTARTS LAST EXIT
/// REASON`.
pub fn render_status_table(rows: &[ServiceStatus]) -> String {
    render_table_rows(rows.iter().map(status_cells))
}

/// One row's cells, in the order of [`STATUS_COLUMNS`].
pub fn status_cells(r: &ServiceStatus) -> [String; COLUMNS] {
    let running = r.pid.and(r.resources.as_ref());
    [
        r.name.clone(),
        r.state.to_string(),
        r.pid.map_or("-".into(), |p| p.to_string()),
        r.uptime_secs.map_or("-".into(), human_duration),
        memory_cell(running.map(|u| u.memory_bytes), r.memory_max),
        running
            .and_then(|u| u.cpu_percent)
            .map_or("-".into(), |p| format!("{p:.1}%")),
        r.restarts.to_string(),
        r.last_exit_text().unwrap_or_else(|| "-".into()),
        reason_cell(r),
    ]
}

/// The reason; for a service running again after a failure, also why it was restarted (it
/// was in `backoff` too briefly for anyone to read that reason).
fn reason_cell(r: &ServiceStatus) -> String {
    let running = matches!(r.state, StateName::Starting | StateName::Up);
    match (r.reason.as_str(), &r.last_failure) {
        ("", Some(failure)) if running => format!("last restart: {failure}"),
        (reason, Some(failure)) if running => format!("{reason}; last restart: {failure}"),
        ("", _) => "-".into(),
        (reason, _) => reason.into(),
    }
}

/// `212 MiB`, `212 MiB/1 GiB` with a limit, `-/1 GiB` with a limit and no process.
fn memory_cell(used: Option<u64>, limit: Option<MemoryLimit>) -> String {
    let used = used.map_or("-".into(), hermes_errors::bytes::human);
    match limit {
        Some(l) => format!("{used}/{}", hermes_errors::bytes::human(l.bytes)),
        None => used,
    }
}

/// The header and `rows` aligned in columns two spaces apart: rows of [`status_cells`], and
/// rows a caller adds of what no supervisor runs (an invalid declared service).
pub fn render_table_rows(rows: impl IntoIterator<Item = [String; COLUMNS]>) -> String {
    let mut cells: Vec<[String; COLUMNS]> = vec![STATUS_COLUMNS.map(String::from)];
    cells.extend(rows);
    let mut widths = [0usize; COLUMNS];
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in &cells {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(c);
            } else {
                line.push_str(c);
                let pad = widths[i] - c.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_status_shell_codes_and_display() {
        assert_eq!(ExitStatus::Signal(9).exit_code(), 137);
        assert_eq!(ExitStatus::Code(3).exit_code(), 3);
        assert_eq!(ExitStatus::Signal(15).to_string(), "signal SIGTERM");
        assert_eq!(ExitStatus::Code(78).to_string(), "code 78");
    }

    #[test]
    fn table_is_aligned() {
        let rows = vec![
            ServiceStatus {
                pid: Some(1234),
                uptime_secs: Some(75.0),
                since_secs: 75.0,
                resources: Some(Resources {
                    memory_bytes: 48 << 20,
                    cpu_seconds: 1.5,
                    cpu_percent: Some(3.25),
                    processes: 2,
                    history: Vec::new(),
                }),
                memory_max: Some(MemoryLimit {
                    bytes: 1 << 30,
                    enforced_by: Enforcement::Sampling,
                }),
                ..ServiceStatus::new("dashboard", StateName::Up)
            },
            ServiceStatus {
                since_secs: 3.0,
                restarts: 2,
                last_exit: Some(ExitStatus::Code(78)),
                reason: "configuration error".into(),
                profile: Some("work".into()),
                ..ServiceStatus::new("gateway-work", StateName::Failed)
            },
        ];
        let t = render_status_table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        let col = lines[0].find("STATE").unwrap();
        assert_eq!(lines[1].find("up").unwrap(), col);
        assert_eq!(lines[2].find("failed").unwrap(), col);
        let col = lines[0].find("LAST EXIT").unwrap();
        assert_eq!(lines[2].find("code 78").unwrap(), col);
        assert!(lines[1].contains("1m15s"));
        let col = lines[0].find("MEMORY").unwrap();
        assert_eq!(lines[1].find("48 MiB/1 GiB").unwrap(), col);
        assert!(lines[1].contains(" 3.2% "), "{}", lines[1]);
        assert_eq!(&lines[2][col..col + 2], "- ", "no process, no figure");
    }

    #[test]
    fn durations_are_human() {
        assert_eq!(human_duration(5.2), "5s");
        assert_eq!(human_duration(3700.0), "1h01m");
        assert_eq!(human_duration(90000.0), "1d01h");
    }
}
