//! What `gateway run` records as the gateway goes (`gateway_state.json`, through
//! `hermes_gateway::StateFileRecorder`) and what it tells the terminal meanwhile.

use hermes_gateway::{Phase, StateRecorder};
use hermes_home::Home;

use crate::output;

/// The gateway's state file recorder, plus the terminal's part: where it listens, and any
/// failure to write the state file.
pub(super) struct CliRecorder(hermes_gateway::StateFileRecorder);

impl CliRecorder {
    /// The recorder of `home`'s gateway, stamped with this build and this process's argv.
    pub(super) fn new(home: &Home) -> Self {
        let identity =
            hermes_diag::BuildIdentity::current(hermes_diag::Install::current().dir.as_deref());
        CliRecorder(hermes_gateway::StateFileRecorder::new(
            home.dir(),
            std::env::args().collect(),
            identity.sha,
            &identity.version,
        ))
    }
}

impl StateRecorder for CliRecorder {
    fn record(&self, phase: Phase, exit_reason: Option<&str>) {
        self.0.record(phase, exit_reason);
        self.print_warnings();
    }

    fn listening(&self, addr: std::net::SocketAddr) {
        output::stderr(&format!("hermes gateway: listening on http://{addr}\n"));
    }

    fn api_server(&self, state: &str, message: Option<&str>) {
        self.0.api_server(state, message);
        self.print_warnings();
    }

    fn exited(&self, exit_code: u8, reason: &str) {
        self.0.exited(exit_code, reason);
        self.print_warnings();
    }
}

impl CliRecorder {
    /// Failures to write the state file or the ledger: said, never fatal to the gateway.
    fn print_warnings(&self) {
        for warning in self.0.take_warnings() {
            output::stderr(&format!("warning: {warning}\n"));
        }
    }
}
