//! The `services:` section of `config.yaml`, parsed into [`ServiceSpec`]s.
//!
//! ```yaml
//! services:
//!   worker:
//!     command: ["python", "-m", "worker"]   # list = argv; string = `/bin/sh -c <string>`
//!     env: { LOG_LEVEL: debug }             # added to the inherited environment
//!     cwd: /opt/data
//!     restart: on-failure                   # always | on-failure | never
//!     stop_signal: INT                      # TERM, INT, HUP, QUIT, ... (SIG prefix optional)
//!     stop_grace: 10s                       # seconds (number) or "500ms" / "10s" / "2m"
//!     enabled: true
//!     listen: "127.0.0.1:8080"              # held by the supervisor, passed as fd 3 (systemd's
//!                                           # LISTEN_FDS); a list for several, each a string
//!                                           # or {name: NAME, address: HOST:PORT}
//!     handover: false                       # restart: start the new one, then stop the old
//!     memory_max: 512MiB                    # killed and restarted past it (bytes or 1G, 512M)
//!     pids_max: 256                         # its whole tree's processes, killed past it
//! ```
//!
//! One bad service never hides the good ones: [`parse_services`] returns the valid specs *and*
//! every [`ConfigError`], each naming the service and the key.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::spec::{Listen, RestartPolicy, ServiceSpec, parse_signal};

/// A commented example of every key, checked by a test; a CLI can print it.
pub const SAMPLE_CONFIG: &str = include_str!("sample-services.yaml");

/// The keys a service entry may have.
pub const SERVICE_KEYS: &[&str] = &[
    "command",
    "env",
    "cwd",
    "restart",
    "stop_signal",
    "stop_grace",
    "enabled",
    "listen",
    "handover",
    "memory_max",
    "pids_max",
];

/// A problem with one service entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("service `{service}`: {problem}")]
pub struct ConfigError {
    /// The service name (`services` for a problem with the section itself).
    pub service: String,
    /// The offending key, if the problem is with one key.
    pub key: Option<String>,
    /// What is wrong, lowercase, no trailing period.
    pub problem: String,
}

impl ConfigError {
    fn new(service: &str, key: Option<&str>, problem: impl Into<String>) -> Self {
        Self {
            service: service.into(),
            key: key.map(String::from),
            problem: problem.into(),
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        Some(match self.key.as_deref() {
            Some("restart") => "use one of `always`, `on-failure`, `never`".into(),
            Some("command") => "give a shell string or a non-empty list of arguments".into(),
            Some("stop_grace") => "use seconds, e.g. `10` or `\"10s\"` or `\"500ms\"`".into(),
            Some("stop_signal") => "use a signal name such as `TERM` or `INT`".into(),
            Some("listen") => {
                "use `host:port`, a list of them, or a list of `{name: NAME, address: HOST:PORT}`"
                    .into()
            }
            Some("memory_max") => {
                "use bytes or a size with a unit, e.g. `512MiB` or `1G` (powers of 1024)".into()
            }
            Some(_) => format!("valid keys are: {}", SERVICE_KEYS.join(", ")),
            None => return None,
        })
    }
}

/// Parses a whole `config.yaml` document and reads its `services:` mapping (absent = none).
pub fn parse_config_yaml(doc: &yaml_serde::Value) -> (Vec<ServiceSpec>, Vec<ConfigError>) {
    match serde_json::to_value(doc) {
        Ok(v) => match v.get("services") {
            Some(s) => parse_services(s),
            None => (Vec::new(), Vec::new()),
        },
        Err(e) => (
            Vec::new(),
            vec![ConfigError::new(
                "services",
                None,
                format!("cannot read the configuration: {e}"),
            )],
        ),
    }
}

/// Parses the `services:` mapping (as a JSON value; YAML converts losslessly for this shape).
pub fn parse_services(services: &Value) -> (Vec<ServiceSpec>, Vec<ConfigError>) {
    let mut specs = Vec::new();
    let mut errors = Vec::new();
    match services {
        Value::Null => {}
        Value::Object(map) => {
            for (name, entry) in map {
                match parse_service(name, entry) {
                    Ok(s) => specs.push(s),
                    Err(mut e) => errors.append(&mut e),
                }
            }
        }
        _ => errors.push(ConfigError::new(
            "services",
            None,
            "`services` must be a mapping of name to service",
        )),
    }
    (specs, errors)
}

/// Parses one service entry; every problem with it is reported, not just the first.
pub fn parse_service(name: &str, entry: &Value) -> Result<ServiceSpec, Vec<ConfigError>> {
    let mut errs = Vec::new();
    if let Err(e) = ServiceSpec::new(name, vec!["x".into()]).validate() {
        errs.push(ConfigError::new(name, None, e));
    }
    let Value::Object(map) = entry else {
        errs.push(ConfigError::new(name, None, "the entry must be a mapping"));
        return Err(errs);
    };
    let mut spec = ServiceSpec::new(name, Vec::new());
    for key in map.keys() {
        if !SERVICE_KEYS.contains(&key.as_str()) {
            errs.push(ConfigError::new(
                name,
                Some(key),
                format!("unknown key `{key}`"),
            ));
        }
    }
    let bad = |key: &str, problem: String| ConfigError::new(name, Some(key), problem);
    match map.get("command") {
        Some(Value::String(s)) if !s.trim().is_empty() => {
            spec.argv = vec!["/bin/sh".into(), "-c".into(), s.clone()];
        }
        Some(Value::Array(items)) if !items.is_empty() => {
            let argv: Option<Vec<String>> = items.iter().map(scalar_string).collect();
            match argv {
                Some(a) if !a[0].is_empty() => spec.argv = a,
                _ => errs.push(bad(
                    "command",
                    "every argument must be a string, and the first non-empty".into(),
                )),
            }
        }
        Some(_) => errs.push(bad("command", "the command is empty".into())),
        None => errs.push(bad("command", "the command is missing".into())),
    }
    if let Some(v) = map.get("env") {
        match v {
            Value::Object(m) => {
                let mut env = BTreeMap::new();
                for (k, v) in m {
                    match scalar_string(v) {
                        Some(s) if !k.is_empty() && !k.contains(['=', '\0']) => {
                            env.insert(k.clone(), s);
                        }
                        _ => errs.push(bad(
                            "env",
                            format!("`{k}` must be a valid name with a scalar value"),
                        )),
                    }
                }
                spec.env = env;
            }
            Value::Null => {}
            _ => errs.push(bad("env", "`env` must be a mapping".into())),
        }
    }
    match map.get("cwd") {
        Some(Value::String(s)) if !s.is_empty() => spec.cwd = Some(s.into()),
        Some(Value::Null) | None => {}
        Some(_) => errs.push(bad("cwd", "`cwd` must be a path".into())),
    }
    if let Some(v) = map.get("restart") {
        match v.as_str().and_then(RestartPolicy::parse) {
            Some(p) => spec.restart = p,
            None => errs.push(bad("restart", format!("bad restart policy {v}"))),
        }
    }
    if let Some(v) = map.get("stop_signal") {
        let sig = match v {
            Value::String(s) => parse_signal(s),
            Value::Number(n) => n
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .and_then(|n| parse_signal(&n.to_string())),
            _ => None,
        };
        match sig {
            Some(s) => spec.stop_signal = s,
            None => errs.push(bad("stop_signal", format!("unknown signal {v}"))),
        }
    }
    if let Some(v) = map.get("stop_grace") {
        match parse_duration(v) {
            Some(d) => spec.stop_grace = d,
            None => errs.push(bad("stop_grace", format!("bad duration {v}"))),
        }
    }
    for key in ["enabled", "handover"] {
        match map.get(key) {
            Some(Value::Bool(b)) if key == "enabled" => spec.enabled = *b,
            Some(Value::Bool(b)) => spec.handover = *b,
            None => {}
            Some(v) => errs.push(bad(key, format!("`{key}` must be true or false, not {v}"))),
        }
    }
    match map.get("listen").map(|v| parse_listen(name, v)) {
        Some(Ok(listen)) => spec.listen = listen,
        Some(Err(problem)) => errs.push(bad("listen", problem)),
        None => {}
    }
    match map.get("memory_max") {
        Some(Value::Null) | None => {}
        Some(v) => match scalar_string(v).map(|s| hermes_errors::bytes::parse(&s)) {
            Some(Ok(bytes)) => spec.memory_max = Some(bytes),
            Some(Err(problem)) => errs.push(bad("memory_max", problem)),
            None => errs.push(bad("memory_max", format!("{v} is not a size"))),
        },
    }
    match map.get("pids_max") {
        Some(Value::Null) | None => {}
        Some(v) => match scalar_string(v).and_then(|s| s.trim().parse::<u64>().ok()) {
            Some(n) => spec.pids_max = Some(n),
            None => errs.push(bad("pids_max", format!("{v} is not a number of processes"))),
        },
    }
    if errs.is_empty()
        && let Err(problem) = spec.validate()
    {
        let key = if problem.contains("pids_max") {
            "pids_max"
        } else if problem.contains("memory_max") {
            "memory_max"
        } else {
            "listen"
        };
        errs.push(bad(key, problem));
    }
    if errs.is_empty() { Ok(spec) } else { Err(errs) }
}

/// `listen:` — one `host:port`, or a list of them and `{name, address}` maps. A socket given
/// as a plain address is named after the service (`<service>-<n>` from the second on).
fn parse_listen(service: &str, v: &Value) -> Result<Vec<Listen>, String> {
    let items = match v {
        Value::Array(items) => items.as_slice(),
        Value::Null => &[],
        single => std::slice::from_ref(single),
    };
    let default_name = |k: usize| {
        if k == 0 {
            service.to_string()
        } else {
            format!("{service}-{}", k + 1)
        }
    };
    items
        .iter()
        .enumerate()
        .map(|(k, item)| match item {
            Value::String(address) => Ok(Listen::new(default_name(k), address.trim())),
            Value::Object(m) => {
                let address = m
                    .get("address")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("socket {} has no `address`", k + 1))?;
                let name = match m.get("name") {
                    Some(Value::String(n)) => n.clone(),
                    None => default_name(k),
                    Some(other) => return Err(format!("socket name {other} is not a string")),
                };
                Ok(Listen::new(name, address.trim()))
            }
            other => Err(format!("{other} is not an address")),
        })
        .collect()
}

fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `10`, `2.5`, `"10"`, `"10s"`, `"500ms"`, `"2m"`, `"1h"`.
pub fn parse_duration(v: &Value) -> Option<Duration> {
    let secs =
        |f: f64| (f.is_finite() && (0.0..1e9).contains(&f)).then(|| Duration::from_secs_f64(f));
    match v {
        Value::Number(n) => n.as_f64().and_then(secs),
        Value::String(s) => {
            let s = s.trim();
            let (num, mult) = if let Some(n) = s.strip_suffix("ms") {
                (n, 0.001)
            } else if let Some(n) = s.strip_suffix('s') {
                (n, 1.0)
            } else if let Some(n) = s.strip_suffix('m') {
                (n, 60.0)
            } else if let Some(n) = s.strip_suffix('h') {
                (n, 3600.0)
            } else {
                (s, 1.0)
            };
            num.trim().parse::<f64>().ok().and_then(|f| secs(f * mult))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::signal::Signal;

    const SAMPLE: &str = r#"
model: whatever
services:
  worker:
    command: ["python3", "-m", "worker", 8080]
    env: { LOG_LEVEL: debug, WORKERS: 4 }
    cwd: /tmp
    restart: on-failure
    stop_signal: INT
    stop_grace: 2.5
  shell:
    command: "echo hi && sleep 10"
    stop_grace: "500ms"
    enabled: false
  typo:
    comand: "x"
  badrestart:
    command: "x"
    restart: sometimes
  empty:
    command: []
  web:
    command: "serve"
    listen: ["127.0.0.1:8080", {name: admin, address: "[::1]:9090"}]
    handover: true
  badlisten:
    command: "x"
    listen: "nowhere"
"#;

    fn find_listen_error(errs: &[ConfigError]) -> String {
        let e = errs
            .iter()
            .find(|e| e.service == "badlisten" && e.key.as_deref() == Some("listen"))
            .unwrap_or_else(|| panic!("badlisten.listen in {errs:?}"));
        assert!(e.hint().unwrap().contains("host:port"));
        e.to_string()
    }

    #[test]
    fn valid_services_parse_and_bad_ones_are_reported() {
        let doc: yaml_serde::Value = yaml_serde::from_str(SAMPLE).unwrap();
        let (specs, errs) = parse_config_yaml(&doc);
        let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["worker", "shell", "web"]);
        let web = &specs[2];
        assert_eq!(
            web.listen,
            [
                Listen::new("web", "127.0.0.1:8080"),
                Listen::new("admin", "[::1]:9090")
            ]
        );
        assert!(web.handover && !specs[0].handover);
        assert!(find_listen_error(&errs).contains("`nowhere` is not `host:port`"));
        let w = &specs[0];
        assert_eq!(w.argv, ["python3", "-m", "worker", "8080"]);
        assert_eq!(w.env.get("WORKERS").map(String::as_str), Some("4"));
        assert_eq!(w.restart, RestartPolicy::OnFailure);
        assert_eq!(w.stop_signal, Signal::SIGINT);
        assert_eq!(w.stop_grace, Duration::from_millis(2500));
        let s = &specs[1];
        assert_eq!(s.argv[..2], ["/bin/sh", "-c"]);
        assert!(!s.enabled);
        assert_eq!(s.stop_grace, Duration::from_millis(500));

        let find = |svc: &str, key: &str| {
            errs.iter()
                .find(|e| e.service == svc && e.key.as_deref() == Some(key))
                .unwrap_or_else(|| panic!("{svc}.{key} in {errs:?}"))
        };
        assert!(
            find("typo", "comand")
                .to_string()
                .contains("unknown key `comand`")
        );
        find("typo", "command");
        assert!(
            find("badrestart", "restart")
                .hint()
                .unwrap()
                .contains("on-failure")
        );
        find("empty", "command");
        for e in &errs {
            let m = e.to_string();
            assert!(m.starts_with("service `"), "{m}");
            assert!(!m.ends_with('.'));
        }
    }

    #[test]
    fn the_sample_config_is_valid() {
        let doc: yaml_serde::Value = yaml_serde::from_str(SAMPLE_CONFIG).unwrap();
        let (specs, errs) = parse_config_yaml(&doc);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].stop_grace, Duration::from_secs(5));
        assert!(!specs[1].enabled);
    }

    #[test]
    fn process_limits_parse_and_bad_ones_are_reported() {
        use serde_json::json;
        let ok = parse_service("forky", &json!({"command": "x", "pids_max": 64})).unwrap();
        assert_eq!(ok.pids_max, Some(64));
        let text = parse_service("forky", &json!({"command": "x", "pids_max": "64"})).unwrap();
        assert_eq!(text.pids_max, Some(64));
        for (bad, says) in [
            (json!("many"), "is not a number of processes"),
            (json!(-1), "is not a number of processes"),
            (json!(2), "must be at least 8"),
        ] {
            let errs =
                parse_service("forky", &json!({"command": "x", "pids_max": bad})).unwrap_err();
            assert_eq!(errs[0].key.as_deref(), Some("pids_max"), "{errs:?}");
            assert!(errs[0].to_string().contains(says), "{}", errs[0]);
        }
    }

    #[test]
    fn memory_limits_parse_and_bad_ones_are_reported() {
        use serde_json::json;
        let ok = parse_service("leaky", &json!({"command": "x", "memory_max": "64MiB"})).unwrap();
        assert_eq!(ok.memory_max, Some(64 << 20));
        let bytes =
            parse_service("leaky", &json!({"command": "x", "memory_max": 8388608})).unwrap();
        assert_eq!(bytes.memory_max, Some(8 << 20));
        for (bad, says) in [
            (json!("lots"), "is not a size"),
            (json!("1K"), "at least 4 MiB"),
            (json!([1]), "is not a size"),
        ] {
            let errs =
                parse_service("leaky", &json!({"command": "x", "memory_max": bad})).unwrap_err();
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert_eq!(errs[0].key.as_deref(), Some("memory_max"));
            assert!(errs[0].to_string().contains(says), "{}", errs[0]);
            assert!(errs[0].hint().unwrap().contains("512MiB"));
        }
    }

    #[test]
    fn durations() {
        use serde_json::json;
        assert_eq!(parse_duration(&json!("10s")), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration(&json!("2m")), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration(&json!(3)), Some(Duration::from_secs(3)));
        assert_eq!(parse_duration(&json!("-1")), None);
        assert_eq!(parse_duration(&json!("soon")), None);
    }

    #[test]
    fn missing_or_odd_sections() {
        let doc: yaml_serde::Value = yaml_serde::from_str("a: 1").unwrap();
        assert_eq!(parse_config_yaml(&doc), (vec![], vec![]));
        let (s, e) = parse_services(&serde_json::json!([1, 2]));
        assert!(s.is_empty() && e.len() == 1);
    }
}
