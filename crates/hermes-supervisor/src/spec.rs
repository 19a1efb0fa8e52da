//! What a service *is*: [`ServiceSpec`] and its parts.
//!
//! Words defined here:
//! * **service** — a named long-running program the supervisor owns, described by a spec.
//! * **restart policy** — what an exit means: [`RestartPolicy`].
//! * **run-as identity** — uid, gid and supplementary groups applied before `exec`: [`RunAs`].
//! * **desired state** — what an operator asked for (`running` / `stopped`): [`Desired`].
//! * **held socket** — a listening socket the supervisor binds for a service and keeps across
//!   its restarts and crashes, passed to each of its processes with systemd's protocol:
//!   [`Listen`].
//! * **hand-over** — a restart that starts the new process first and stops the old one only
//!   once the new one is ready: [`ServiceSpec::handover`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

/// The smallest `pids_max` a spec may have.
pub const MIN_PIDS_MAX: u64 = 8;

/// The smallest `memory_max` a spec may have: below it, a program is killed before it has
/// started, and a typo (`memory_max: 1` meant as 1 GiB) would look like a crash loop.
pub const MIN_MEMORY_MAX: u64 = 4 << 20;

/// Default grace between the stop signal and `SIGKILL`.
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(10);

/// How an exit is answered. Exit 78 (configuration error) always parks the service as
/// `failed` and exit 75 always restarts at once, whatever the policy (see `machine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// Restart after every exit, including exit 0.
    #[default]
    Always,
    /// Restart after a failure; exit 0 parks the service as `down`.
    OnFailure,
    /// Never restart: exit 0 is `down`, anything else `failed`.
    Never,
}

impl RestartPolicy {
    /// Parses the config spelling (`always`, `on-failure`, `never`; `_` accepted for `-`).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "always" => Some(Self::Always),
            "on-failure" => Some(Self::OnFailure),
            "never" | "no" => Some(Self::Never),
            _ => None,
        }
    }

    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "always",
            Self::OnFailure => "on-failure",
            Self::Never => "never",
        }
    }
}

/// The identity a service runs as, applied in the child before `exec` in the order
/// setgroups, setgid, setuid (the only order that works once uid 0 is gone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAs {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups (empty clears root's groups, which is what we want).
    #[serde(default)]
    pub groups: Vec<u32>,
}

/// Where a service's stdout/stderr go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LogTarget {
    /// Captured into `<log dir>/<service>/current` and mirrored as `[service] line`.
    #[default]
    Default,
    /// Captured into `<dir>/current` (rotated there) and mirrored.
    Dir(PathBuf),
    /// Only mirrored to the supervisor's output, no file.
    MirrorOnly,
    /// Not captured: the child inherits the supervisor's stdin/stdout/stderr (the main
    /// program in PID 1, which owns the TTY).
    Inherit,
}

/// What an operator asked a service to be; persisted by the caller through
/// [`crate::Hooks::desired_state_changed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Desired {
    /// Keep it running.
    Running,
    /// Keep it stopped.
    Stopped,
}

/// A listening TCP socket the supervisor holds for a service: bound once (or taken from
/// systemd), kept across every restart and crash, and passed to each new process as fd
/// `3 + index` with `LISTEN_FDS`, `LISTEN_PID` and `LISTEN_FDNAMES`, as systemd's socket
/// activation does. Between two processes a client's connection waits in the backlog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listen {
    /// The descriptor's name in `LISTEN_FDNAMES` (a gateway's API socket is `api`).
    pub name: String,
    /// `host:port` to bind (`[::1]:80` for IPv6; port 0 picks a free port once).
    pub address: String,
}

impl Listen {
    /// A socket named `name` on `address`.
    pub fn new(name: impl Into<String>, address: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            address: address.into(),
        }
    }

    fn validate(&self, service: &str) -> Result<(), String> {
        if let Err(e) = hermes_listen::passing_env(&[&self.name]) {
            return Err(format!("service `{service}`: {e}"));
        }
        let port = self.address.rsplit_once(':').map(|(_, port)| port);
        if port.is_none_or(|p| p.parse::<u16>().is_err()) {
            return Err(format!(
                "service `{service}`: `listen` address `{}` is not `host:port`",
                self.address
            ));
        }
        Ok(())
    }
}

/// Everything the supervisor needs to run one service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceSpec {
    /// Unique name (`dashboard`, `gateway-work`); also the log directory name.
    pub name: String,
    /// Program and arguments; `argv[0]` is looked up in `PATH`.
    pub argv: Vec<String>,
    /// Overrides on top of the supervisor's full environment (never a scrubbed one).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory; the supervisor's own when `None`.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Identity to drop to (only meaningful when the supervisor runs as root).
    #[serde(default)]
    pub run_as: Option<RunAs>,
    /// Restart policy.
    #[serde(default)]
    pub restart: RestartPolicy,
    /// Signal sent to the process group to ask for a stop.
    #[serde(default = "default_stop_signal", with = "signal_name")]
    pub stop_signal: Signal,
    /// How long to wait after the stop signal before `SIGKILL` to the group.
    #[serde(default = "default_grace", with = "duration_ms")]
    pub stop_grace: Duration,
    /// Whether the service is started at boot; `false` reports `disabled`.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Whether an enabled service is started when the supervisor boots or registers it.
    /// `false` registers it `down` (a profile gateway whose desired state is not `running`):
    /// it is switched on, just not wanted yet, and `start` brings it up.
    #[serde(default = "yes")]
    pub autostart: bool,
    /// Log destination.
    #[serde(default)]
    pub log: LogTarget,
    /// Opaque label naming the profile this service belongs to (gateways), passed back in
    /// hooks so the caller can persist `desired_state`.
    #[serde(default)]
    pub profile: Option<String>,
    /// Sockets the supervisor holds for the service ([`Listen`]), in fd order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listen: Vec<Listen>,
    /// Restart by hand-over: start the new process while the old one runs (with
    /// `HERMES_HANDOVER_FROM=<old pid>`), and send the old one the stop signal only once the
    /// new one is ready; if the new one fails first, the old one goes on. For a service that
    /// shares its held sockets between two instances safely (the native gateway); never for
    /// one whose work must have a single owner (the agent's messaging platforms).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handover: bool,
    /// The most resident memory its processes may use together, bytes: past it the service is
    /// killed and restarted (with backoff), its reason `memory limit: 1.3 GiB > 1 GiB`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_max: Option<u64>,
    /// The most processes its tree may hold at once: past it the service is killed and
    /// restarted (with backoff), its reason `process limit: 310 processes > 256`. Counted over
    /// the whole tree (`crate::tree`) at each sample, so a fork bomb is stopped at the next one
    /// and every process it made dies with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
}

fn default_stop_signal() -> Signal {
    Signal::SIGTERM
}
fn default_grace() -> Duration {
    DEFAULT_STOP_GRACE
}
fn yes() -> bool {
    true
}

impl ServiceSpec {
    /// A spec with defaults: restart `always`, `SIGTERM`, 10 s grace, enabled, default logs.
    pub fn new(name: impl Into<String>, argv: Vec<String>) -> Self {
        Self {
            name: name.into(),
            argv,
            env: BTreeMap::new(),
            cwd: None,
            run_as: None,
            restart: RestartPolicy::Always,
            stop_signal: Signal::SIGTERM,
            stop_grace: DEFAULT_STOP_GRACE,
            enabled: true,
            autostart: true,
            log: LogTarget::Default,
            profile: None,
            listen: Vec::new(),
            handover: false,
            memory_max: None,
            pids_max: None,
        }
    }

    /// Checks what the supervisor relies on: a name usable as a file name (letters, digits,
    /// `-_.@`, at most 64, not starting with `.`) and a non-empty `argv[0]`.
    ///
    /// # Errors
    /// The problem, in words (lowercase, no trailing period).
    pub fn validate(&self) -> Result<(), String> {
        let n = &self.name;
        if !is_valid_name(n) {
            return Err(format!(
                "bad service name `{n}` (letters, digits, `-_.@`, at most 64, not starting with `.`)"
            ));
        }
        if self.argv.first().is_none_or(|a| a.is_empty()) {
            return Err(format!("service `{n}`: the command is empty"));
        }
        if self.listen.len() > hermes_listen::MAX_PASSED {
            return Err(format!(
                "service `{n}`: at most {} sockets can be passed to a process",
                hermes_listen::MAX_PASSED
            ));
        }
        for (i, listen) in self.listen.iter().enumerate() {
            listen.validate(n)?;
            if self.listen[..i].iter().any(|l| l.name == listen.name) {
                return Err(format!(
                    "service `{n}`: two sockets are named `{}`",
                    listen.name
                ));
            }
        }
        if self.pids_max.is_some_and(|p| p < MIN_PIDS_MAX) {
            return Err(format!(
                "service `{n}`: `pids_max` must be at least {MIN_PIDS_MAX} (a shell and its command are two)"
            ));
        }
        if self.memory_max.is_some_and(|m| m < MIN_MEMORY_MAX) {
            return Err(format!(
                "service `{n}`: `memory_max` must be at least {} (no program starts in less)",
                hermes_errors::bytes::human(MIN_MEMORY_MAX)
            ));
        }
        Ok(())
    }

    /// A spec running `command` through `/bin/sh -c`.
    pub fn shell(name: impl Into<String>, command: &str) -> Self {
        Self::new(name, vec!["/bin/sh".into(), "-c".into(), command.into()])
    }
}

/// Service names: letters, digits and `-_.@`, at most 64, not starting with `.` — so a name
/// is always a plain file name (it names the service's log directory).
pub fn is_valid_name(name: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "-_.@".contains(c);
    !name.is_empty() && name.len() <= 64 && !name.starts_with('.') && name.chars().all(ok_char)
}

/// Parses `TERM`, `SIGTERM`, `sigterm` or a number into a signal.
pub fn parse_signal(s: &str) -> Option<Signal> {
    let t = s.trim();
    if let Ok(n) = t.parse::<i32>() {
        return Signal::try_from(n).ok();
    }
    let up = t.to_ascii_uppercase();
    let full = if up.starts_with("SIG") {
        up
    } else {
        format!("SIG{up}")
    };
    full.parse().ok()
}

/// Serde for [`Signal`] as its name (`"SIGTERM"`), accepting the short form on input.
pub(crate) mod signal_name {
    use nix::sys::signal::Signal;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(sig: &Signal, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(sig.as_str())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Signal, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_signal(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown signal `{s}`")))
    }
}

/// Serde for [`Duration`] as integer milliseconds (the wire form of a stop grace).
pub mod duration_ms {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_parse_in_every_spelling() {
        assert_eq!(parse_signal("TERM"), Some(Signal::SIGTERM));
        assert_eq!(parse_signal("sigint"), Some(Signal::SIGINT));
        assert_eq!(parse_signal("9"), Some(Signal::SIGKILL));
        assert_eq!(parse_signal("NOPE"), None);
    }

    #[test]
    fn validation_rejects_unsafe_names_and_empty_commands() {
        assert!(ServiceSpec::shell("gateway-work", "x").validate().is_ok());
        for bad in ["", "../etc", "a/b", ".hidden", "has space", &"x".repeat(65)] {
            assert!(ServiceSpec::shell(bad, "x").validate().is_err(), "{bad:?}");
        }
        assert!(ServiceSpec::new("a", vec![]).validate().is_err());
        assert!(
            ServiceSpec::new("a", vec![String::new()])
                .validate()
                .is_err()
        );
    }

    #[test]
    fn held_sockets_need_a_name_and_a_port() {
        let mut s = ServiceSpec::shell("web", "x");
        s.listen = vec![
            Listen::new("http", "127.0.0.1:8080"),
            Listen::new("v6", "[::1]:0"),
        ];
        assert!(s.validate().is_ok());
        for (name, address) in [
            ("a:b", "127.0.0.1:1"),
            ("", "127.0.0.1:1"),
            ("x", "127.0.0.1"),
            ("x", "host:99999"),
        ] {
            s.listen = vec![Listen::new(name, address)];
            assert!(s.validate().is_err(), "{name} {address}");
        }
        s.listen = vec![
            Listen::new("a", "127.0.0.1:1"),
            Listen::new("a", "127.0.0.1:2"),
        ];
        assert!(s.validate().unwrap_err().contains("two sockets"));
    }

    #[test]
    fn restart_policy_spellings() {
        assert_eq!(
            RestartPolicy::parse("on_failure"),
            Some(RestartPolicy::OnFailure)
        );
        assert_eq!(RestartPolicy::parse("Always"), Some(RestartPolicy::Always));
        assert_eq!(RestartPolicy::parse("sometimes"), None);
    }

    #[test]
    fn spec_round_trips_through_json() {
        let mut s = ServiceSpec::shell("web", "exec sleep 5");
        s.stop_signal = Signal::SIGINT;
        s.stop_grace = Duration::from_millis(1500);
        let j = serde_json::to_string(&s).unwrap();
        assert!(j.contains("\"SIGINT\""), "{j}");
        let back: ServiceSpec = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
    }
}
