//! The `dashboard` service: `hermes dashboard` under a supervisor, as PID 1 and `hermes up`
//! register it. Always registered, so `hermes service status` tells the truth either way:
//! switched off it is `disabled` (never a fake up); on, it is restarted after a crash like any
//! service, and a configuration refusal (a public bind without credentials, exit 78) parks it
//! `failed` with that reason.
//!
//! When it is on (`HERMES_DASHBOARD`, the original's variable):
//! * in the container, only when truthy (`1`, `true`, `yes`, `on`), as the original's image;
//! * under `hermes up`, unless it is set to something else (`0`, `false`, …) or `hermes up
//!   --no-dashboard` is given.

use std::path::Path;

use hermes_privilege::Identity;
use hermes_supervisor::ServiceSpec;

use crate::gateway::run_as_identity;

/// The service's name.
pub const DASHBOARD_SERVICE: &str = "dashboard";
/// The original's switch.
pub const DASHBOARD_VAR: &str = "HERMES_DASHBOARD";

/// glibc's `MALLOC_ARENA_MAX` for the dashboard.
const MALLOC_ARENAS: &str = "1";

/// Where the supervisor runs, which decides the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    /// PID 1 in the container: off unless `HERMES_DASHBOARD` is truthy.
    Container,
    /// `hermes up` on a machine: on unless `HERMES_DASHBOARD` is set and not truthy.
    Up,
}

/// Whether the dashboard runs, from `HERMES_DASHBOARD`'s value (`None` when unset or empty).
pub fn dashboard_enabled(host: Host, value: Option<&str>) -> bool {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        Some(v) => hermes_errors::switch::is_truthy(v),
        None => host == Host::Up,
    }
}

/// The spec: `<exe> dashboard` (host, port and credentials come from the environment the
/// supervisor passes on), `disabled` unless `enabled`, as `identity` when given.
pub fn dashboard_spec(exe: &Path, enabled: bool, identity: Option<&Identity>) -> ServiceSpec {
    let mut spec = ServiceSpec::new(
        DASHBOARD_SERVICE,
        vec![exe.to_string_lossy().into_owned(), "dashboard".into()],
    );
    spec.enabled = enabled;
    // One malloc arena: the dashboard's few threads do not contend, and each extra arena
    // keeps pages after a burst of clients (measured: RSS after 32 clients 16.0 → 14.3 MiB,
    // bench/dashboard). An operator's own setting wins: the supervisor passes its whole
    // environment on, and `env` would override it.
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        spec.env
            .insert("MALLOC_ARENA_MAX".into(), MALLOC_ARENAS.into());
    }
    if let Some(id) = identity {
        run_as_identity(&mut spec, id);
    }
    spec
}

/// Adds the dashboard `spec` to `specs` unless a service of its name is already there — one
/// the operator declared in `config.yaml` (the agent's own dashboard, `docs/docker.md`): theirs
/// runs, and the returned note says ours was left out.
pub fn add_unless_declared(specs: &mut Vec<ServiceSpec>, spec: ServiceSpec) -> Option<String> {
    crate::declared::add_unless_declared(specs, spec, "the built-in dashboard")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_container_needs_it_asked_for_and_hermes_up_needs_it_refused() {
        assert!(!dashboard_enabled(Host::Container, None));
        assert!(!dashboard_enabled(Host::Container, Some("")));
        assert!(dashboard_enabled(Host::Container, Some("yes")));
        assert!(!dashboard_enabled(Host::Container, Some("0")));
        assert!(dashboard_enabled(Host::Up, None));
        assert!(dashboard_enabled(Host::Up, Some("TRUE")));
        assert!(!dashboard_enabled(Host::Up, Some("0")));
        assert!(!dashboard_enabled(Host::Up, Some("false")));
    }

    #[test]
    fn a_declared_dashboard_wins_and_is_noted() {
        let exe = Path::new("/usr/bin/hermes");
        let mut specs = vec![ServiceSpec::new("web", vec!["sleep".into()])];
        assert_eq!(
            add_unless_declared(&mut specs, dashboard_spec(exe, true, None)),
            None
        );
        assert_eq!(specs.len(), 2);
        let mut declared = vec![ServiceSpec::new("dashboard", vec!["agent".into()])];
        let note = add_unless_declared(&mut declared, dashboard_spec(exe, true, None));
        assert!(note.unwrap().contains("declared in config.yaml"));
        assert_eq!(declared.len(), 1);
        assert_eq!(declared[0].argv, ["agent"]);
    }

    #[test]
    fn the_spec_runs_our_dashboard_disabled_when_off_and_as_the_service_user() {
        let off = dashboard_spec(Path::new("/usr/bin/hermes"), false, None);
        assert_eq!(off.name, "dashboard");
        assert_eq!(off.argv, ["/usr/bin/hermes", "dashboard"]);
        assert!(!off.enabled);
        assert!(off.run_as.is_none());
        let id = Identity {
            name: "hermes".into(),
            uid: 10000,
            gid: 10000,
            groups: vec![10000],
            home: "/opt/data/home".into(),
            shell: "/bin/sh".into(),
        };
        let on = dashboard_spec(Path::new("/usr/bin/hermes"), true, Some(&id));
        assert!(on.enabled);
        assert_eq!(on.run_as.as_ref().map(|r| r.uid), Some(10000));
    }
}
