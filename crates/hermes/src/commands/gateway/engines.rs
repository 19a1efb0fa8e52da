//! The gateways' engines beside `hermes service status`'s table: the `gateway engines:` and
//! `gateway mode:` lines, from the status view (`hermes_services::status_view`).

use hermes_services::engines::GatewayEngine;
use hermes_services::status_view::StatusView;

/// `hermes service status`, under the table: `gateway engines: gateway-default native, …`
/// (nothing when no row is a gateway), and the mode when multiplexing is on.
pub fn engines_line(view: &StatusView) -> String {
    let engines: Vec<&GatewayEngine> = view.gateways().collect();
    if engines.is_empty() {
        return String::new();
    }
    let list: Vec<String> = engines
        .iter()
        .map(|g| format!("{} {}", g.service, g.engine))
        .collect();
    let mut text = format!("\ngateway engines: {}\n", list.join(", "));
    if view.multiplex.on {
        let names: Vec<&str> = engines.iter().map(|g| g.home.profile().name()).collect();
        text.push_str(&format!(
            "gateway mode: {}\n",
            view.multiplex.summary(&names)
        ));
    }
    text
}
