//! The engines view: which engine serves each profile gateway among the supervisor's rows,
//! and which gateway serves it under multiplexing. One computation for `hermes service
//! status`, `hermes gateway status` and the dashboard's Overview, which render it.

use std::path::Path;

use hermes_home::{Home, ProfileRef};
use hermes_supervisor::ServiceStatus;

use crate::multiplex::Multiplexing;

/// One profile gateway of the view.
#[derive(Debug, Clone)]
pub struct GatewayEngine {
    /// Its service (`gateway-<profile>`), as the supervisor names it.
    pub service: String,
    /// Its profile.
    pub home: Home,
    /// `native`, `agent`, or `invalid` for a setting that cannot be honoured
    /// ([`crate::agent::engine_label`]).
    pub engine: &'static str,
    /// The multiplexing gateway that serves this profile in its place (`None` when it serves
    /// itself).
    pub served_by: Option<String>,
}

/// The profile whose gateway a supervisor row is (`None` for another service, or a profile
/// that no longer exists).
pub fn row_home(root: &Path, row: &ServiceStatus) -> Option<Home> {
    let profile = ProfileRef::parse(row.profile.as_deref()?).ok()?;
    Home::for_profile(root.to_path_buf(), profile).ok()
}

/// The engine of `home`'s gateway and who serves it under `multiplex`.
pub fn of_home(
    service: String,
    home: Home,
    multiplex: &Multiplexing,
    var: &dyn Fn(&str) -> Option<String>,
) -> GatewayEngine {
    GatewayEngine {
        engine: crate::agent::engine_label(home.dir(), var),
        served_by: multiplex.served_by(home.profile().name()),
        service,
        home,
    }
}

/// The view of every profile gateway among `rows`, in their order. A running gateway's
/// engine is what its process is ([`running_engine`]); only one that does not run is told
/// from its settings — the caller's environment (where it finds the agent) may not be the
/// supervisor's.
pub fn of_rows(
    root: &Path,
    rows: &[ServiceStatus],
    multiplex: &Multiplexing,
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<GatewayEngine> {
    rows.iter()
        .filter_map(|row| {
            let mut view = of_home(row.name.clone(), row_home(root, row)?, multiplex, var);
            if let Some(engine) = row.pid.and_then(running_engine) {
                view.engine = engine;
            }
            Some(view)
        })
        .collect()
}

/// The engine of the running gateway `pid`: `gateway run` execs the agent's interpreter, so a
/// Python process is the agent's gateway and this binary is ours. `None` for anything else
/// (an operator's own `gateway.command`) or a process that cannot be read.
pub fn running_engine(pid: i32) -> Option<&'static str> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let exe = exe.to_string_lossy();
    // A binary replaced while it runs (an upgrade) reads `… (deleted)`.
    let exe = exe.strip_suffix(" (deleted)").unwrap_or(&exe);
    let ours = std::env::current_exe().ok()?;
    let name = Path::new(exe).file_name()?.to_string_lossy();
    if Path::new(exe) == ours {
        Some("native")
    } else if name.starts_with("python") {
        Some("agent")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_gateway_is_the_engine_its_process_is() {
        // The binary asking is the one a native gateway runs.
        assert_eq!(running_engine(std::process::id() as i32), Some("native"));
        assert_eq!(running_engine(i32::MAX), None, "no such process");
        // An operator's own program: nothing is claimed of it.
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let engine = running_engine(other.id() as i32);
        let _ = other.kill();
        let _ = other.wait();
        assert_eq!(engine, None);
        let Some(python) = ["/usr/bin/python3", "/bin/python3"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
        else {
            return hermes_test_support::skip("no python3 to run as the agent's gateway");
        };
        let mut agent = std::process::Command::new(python)
            .args(["-c", "import time; time.sleep(30)"])
            .spawn()
            .unwrap();
        let engine = running_engine(agent.id() as i32);
        let _ = agent.kill();
        let _ = agent.wait();
        assert_eq!(engine, Some("agent"));
    }

    #[test]
    fn only_rows_naming_an_existing_profile_are_gateways() {
        let root = tempfile::tempdir().unwrap();
        let name = hermes_home::ProfileName::parse("work").unwrap();
        hermes_home::profile::create(root.path(), &name, &Default::default()).unwrap();
        let row = |name: &str, profile: Option<&str>| {
            let mut value = serde_json::json!({
                "name": name, "state": "up", "pid": null, "uptime_secs": 0.0, "since_secs": 0.0,
                "restarts": 0, "last_exit": null, "reason": "",
            });
            if let Some(p) = profile {
                value["profile"] = serde_json::json!(p);
            }
            serde_json::from_value::<ServiceStatus>(value).unwrap()
        };
        let rows = [
            row("dashboard", None),
            row("gateway-work", Some("work")),
            row("gateway-gone", Some("gone")),
        ];
        let var = |_: &str| None;
        let multiplex = crate::multiplex::resolve(
            &hermes_settings::ProfileRead::read("default", root.path(), Vec::new()),
            &var,
            |_| None,
        );
        let view = of_rows(root.path(), &rows, &multiplex, &var);
        assert_eq!(view.len(), 1);
        assert_eq!(view[0].service, "gateway-work");
        assert_eq!(view[0].engine, "native");
        assert_eq!(view[0].served_by, None);
    }
}
