//! The service status view: the supervisor's rows with what the front ends show beside each —
//! a failing service's last error, a gateway's engine, port and the gateway serving it under
//! multiplexing, its memory as people read it. Built once here; `hermes service status` renders
//! it as a table and JSON, the dashboard's Overview as JSON, so the two cannot disagree.

use std::path::Path;

use hermes_settings::{ProfileFiles, Scope};
use hermes_supervisor::ServiceStatus;
use serde_json::{Value, json};

use crate::engines::{self, GatewayEngine};
use crate::multiplex::Multiplexing;

/// One service of the view.
#[derive(Debug, Clone)]
pub struct ServiceView {
    /// The supervisor's row.
    pub status: ServiceStatus,
    /// The service's last error while it is failing ([`crate::last_error::of_failing`]).
    pub last_error: Option<String>,
    /// For a profile's gateway: its engine and who serves it.
    pub gateway: Option<GatewayEngine>,
    /// For a profile's gateway: the port its API listens on — the socket the supervisor holds
    /// when it holds one (what was bound), else the native gateway's address as its settings
    /// give it; `None` when its API server is off or its settings cannot be read.
    pub port: Option<u16>,
    /// For a row naming a profile: the multiplexing gateway that serves it in its place (also
    /// when the profile is gone).
    pub served_by: Option<String>,
    /// For a profile's gateway: where its API server's key is set (`` `.env` ``, `the top level
    /// of `config.yaml``, …), never the key; `None` without a key.
    pub key_source: Option<String>,
    /// For a profile's gateway: each of its databases the last check found damaged
    /// (`hermes_home::db_check`): restored, or still served and why.
    pub damaged_databases: Vec<hermes_home::db_check::Damaged>,
}

/// Every service of a supervisor, and the multiplexing mode they were viewed under.
#[derive(Debug, Clone)]
pub struct StatusView {
    /// The services, in the supervisor's order.
    pub services: Vec<ServiceView>,
    /// The volume's multiplexing mode.
    pub multiplex: Multiplexing,
}

impl StatusView {
    /// The view of `rows`, a supervisor's answer, for the volume at `root`; `var` is the process
    /// environment.
    pub fn of_rows(
        root: &Path,
        rows: Vec<ServiceStatus>,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> StatusView {
        let multiplex = crate::multiplex::resolve_asking_agent(root, var);
        let mut gateways = engines::of_rows(root, &rows, &multiplex, var);
        let services = rows
            .into_iter()
            .map(|status| {
                let gateway = gateways
                    .iter()
                    .position(|g| g.service == status.name)
                    .map(|i| gateways.swap_remove(i));
                // A gateway's profile, read once for its address and where its key is set.
                let files = gateway.as_ref().and_then(|g| {
                    let scope = Scope::of(g.home.profile().name());
                    ProfileFiles::read(g.home.dir(), scope, hermes_settings::process_env()).ok()
                });
                let port = gateway.as_ref().and_then(|g| {
                    bound_port(&status).or_else(|| {
                        let files = files.as_ref()?;
                        let profile = g.home.profile().name();
                        let address = hermes_home::api_server::listen_address(
                            profile,
                            &files.environment(),
                            files.config(),
                        )
                        .ok()??;
                        address.rsplit_once(':')?.1.parse().ok()
                    })
                });
                let key_source = files
                    .as_ref()
                    .and_then(ProfileFiles::api_server_key)
                    .map(|key| key.source.to_string());
                let served_by = status
                    .profile
                    .as_deref()
                    .and_then(|p| multiplex.served_by(p));
                let damaged_databases = gateway
                    .as_ref()
                    .and_then(|g| hermes_home::db_check::read(g.home.dir()))
                    .map(|record| record.damaged)
                    .unwrap_or_default();
                ServiceView {
                    last_error: crate::last_error::of_failing(root, &status).map(|e| e.message),
                    damaged_databases,
                    gateway,
                    port,
                    served_by,
                    key_source,
                    status,
                }
            })
            .collect();
        StatusView {
            services,
            multiplex,
        }
    }

    /// The view's gateways (the rows that are a profile's gateway).
    pub fn gateways(&self) -> impl Iterator<Item = &GatewayEngine> {
        self.services.iter().filter_map(|s| s.gateway.as_ref())
    }
}

impl ServiceView {
    /// The memory as people read it, with its limit (`212 MiB / 1 GiB`), by the one byte-size
    /// rule (`hermes_errors::bytes::human`). The memory counts while the service has a process;
    /// `None` without memory or limit to show.
    pub fn memory_text(&self) -> Option<String> {
        let used = self
            .status
            .pid
            .and(self.status.resources.as_ref())
            .map(|r| r.memory_bytes);
        let limit = self.status.memory_max.map(|m| m.bytes);
        let human = hermes_errors::bytes::human;
        match (used, limit) {
            (Some(u), Some(l)) => Some(format!("{} / {}", human(u), human(l))),
            (Some(u), None) => Some(human(u)),
            (None, Some(l)) => Some(format!("- / {}", human(l))),
            (None, None) => None,
        }
    }

    /// The row as the JSON documents carry it: the supervisor's fields, `last_error`,
    /// `memory_text`, `last_exit_text` (`code 3`, `signal SIGKILL`, `stopped (code 1)`: as the
    /// CLI's table words it), and for a gateway `engine`, `port`, `key_source`,
    /// `damaged_databases` (`{file, still_served, text}` each) and `served_by` (`served_by` also
    /// for a row whose profile is gone).
    pub fn to_json(&self) -> Value {
        let mut value = serde_json::to_value(&self.status).unwrap_or(Value::Null);
        if let Some(map) = value.as_object_mut() {
            map.insert("last_error".into(), json!(self.last_error));
            map.insert("memory_text".into(), json!(self.memory_text()));
            map.insert("last_exit_text".into(), json!(self.status.last_exit_text()));
            if let Some(gateway) = &self.gateway {
                map.insert("engine".into(), json!(gateway.engine));
                map.insert("port".into(), json!(self.port));
                map.insert("key_source".into(), json!(self.key_source));
                let damaged: Vec<Value> = self
                    .damaged_databases
                    .iter()
                    .map(|d| json!({"file": d.file, "still_served": d.still_served(), "text": d.describe()}))
                    .collect();
                map.insert("damaged_databases".into(), json!(damaged));
            }
            if self.gateway.is_some() || self.status.profile.is_some() {
                map.insert("served_by".into(), json!(self.served_by));
            }
        }
        value
    }
}

/// The port of the API socket the supervisor holds for the service (what it bound), if any.
pub fn bound_port(status: &ServiceStatus) -> Option<u16> {
    let address = status.listening.first()?;
    address.rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(status: &ServiceStatus) -> ServiceView {
        ServiceView {
            status: status.clone(),
            last_error: None,
            gateway: None,
            port: None,
            served_by: None,
            key_source: None,
            damaged_databases: Vec::new(),
        }
    }

    #[test]
    fn the_port_is_the_one_the_supervisor_bound() {
        let mut status = ServiceStatus::new("gateway-default", hermes_supervisor::StateName::Up);
        assert_eq!(bound_port(&status), None);
        status.listening = vec!["127.0.0.1:9574".into()];
        assert_eq!(bound_port(&status), Some(9574));
        status.listening = vec!["[::1]:8650".into()];
        assert_eq!(bound_port(&status), Some(8650));
    }

    #[test]
    fn memory_reads_with_its_limit_in_the_one_byte_rule() {
        let mut row = hermes_supervisor::ServiceStatus::new("x", hermes_supervisor::StateName::Up);
        row.pid = Some(1);
        assert_eq!(view(&row).memory_text(), None);
        row.resources = Some(hermes_supervisor::status::Resources {
            memory_bytes: 212 << 20,
            cpu_seconds: 1.5,
            cpu_percent: None,
            processes: 1,
            history: Vec::new(),
        });
        assert_eq!(view(&row).memory_text().as_deref(), Some("212 MiB"));
        row.memory_max = Some(hermes_supervisor::status::MemoryLimit {
            bytes: 1 << 30,
            enforced_by: hermes_supervisor::status::Enforcement::Cgroup,
        });
        assert_eq!(view(&row).memory_text().as_deref(), Some("212 MiB / 1 GiB"));
        // Stopped: the limit, no figure (the history is still there for the sparkline).
        row.pid = None;
        assert_eq!(view(&row).memory_text().as_deref(), Some("- / 1 GiB"));
        // Serialized with the row, for the page's sparkline and the limit.
        let v = view(&row).to_json();
        assert_eq!(v["memory_text"], "- / 1 GiB");
        assert_eq!(v["last_exit_text"], serde_json::Value::Null);
        row.last_exit = Some(hermes_supervisor::status::ExitStatus::Signal(9));
        assert_eq!(view(&row).to_json()["last_exit_text"], "signal SIGKILL");
        row.last_exit = Some(hermes_supervisor::status::ExitStatus::Code(1));
        assert_eq!(view(&row).to_json()["last_exit_text"], "code 1");
        // After the supervisor's own stop: stopped, whatever the code.
        row.last_exit_planned = true;
        assert_eq!(view(&row).to_json()["last_exit_text"], "stopped (code 1)");
        assert_eq!(v["memory_max"]["enforced_by"], "cgroup");
        assert_eq!(v["resources"]["memory_bytes"], 212u64 << 20);
    }
}
