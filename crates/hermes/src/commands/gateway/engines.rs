//! The gateways' engines beside `hermes service status`: each gateway row's `engine` in its
//! JSON, and the `gateway engines:` and `gateway mode:` lines under its table
//! (`hermes_services::engines`).

use std::path::Path;

use serde_json::{Value, json};

use crate::context::Context;
use crate::failure::Failure;

/// The engines view of a supervisor's `rows` (`hermes_services::engines`).
fn service_engines(
    root: &Path,
    rows: &[hermes_supervisor::ServiceStatus],
) -> (
    Vec<hermes_services::engines::GatewayEngine>,
    hermes_services::multiplex::Multiplexing,
) {
    let multiplex = hermes_services::multiplex::resolve_asking_agent(root, &Context::var);
    let engines = hermes_services::engines::of_rows(root, rows, &multiplex, &Context::var);
    (engines, multiplex)
}

/// `hermes service status --json`: the supervisor's rows, a gateway's with its `engine`.
pub fn with_engines(
    root: &Path,
    rows: &[hermes_supervisor::ServiceStatus],
) -> Result<Value, Failure> {
    let (engines, _) = service_engines(root, rows);
    let mut values = serde_json::to_value(rows).map_err(std::io::Error::other)?;
    for item in values.as_array_mut().into_iter().flatten() {
        let engine = engines.iter().find(|g| item["name"] == g.service.as_str());
        if let (Some(row), Some(gateway)) = (item.as_object_mut(), engine) {
            row.insert("engine".into(), json!(gateway.engine));
        }
    }
    Ok(values)
}

/// `hermes service status`, under the table: `gateway engines: gateway-default native, …`
/// (nothing when no row is a gateway).
pub fn engines_line(root: &Path, rows: &[hermes_supervisor::ServiceStatus]) -> String {
    let (engines, multiplex) = service_engines(root, rows);
    if engines.is_empty() {
        return String::new();
    }
    let list: Vec<String> = engines
        .iter()
        .map(|g| format!("{} {}", g.service, g.engine))
        .collect();
    let mut text = format!("\ngateway engines: {}\n", list.join(", "));
    if multiplex.on {
        let names: Vec<&str> = engines.iter().map(|g| g.home.profile().name()).collect();
        text.push_str(&format!("gateway mode: {}\n", multiplex.summary(&names)));
    }
    text
}
