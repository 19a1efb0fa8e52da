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

/// The view of every profile gateway among `rows`, in their order.
pub fn of_rows(
    root: &Path,
    rows: &[ServiceStatus],
    multiplex: &Multiplexing,
    var: &dyn Fn(&str) -> Option<String>,
) -> Vec<GatewayEngine> {
    rows.iter()
        .filter_map(|row| {
            Some(of_home(
                row.name.clone(),
                row_home(root, row)?,
                multiplex,
                var,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
