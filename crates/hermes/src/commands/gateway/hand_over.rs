//! `gateway run` while a supervisor runs: the gateway is the supervisor's to run, and this
//! process only follows its log.

use std::time::Duration;

use hermes_home::Home;

use super::lifecycle;
use crate::commands::service;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus};
use crate::output;

/// A supervisor is running: make sure it runs this profile's gateway, then follow its log.
pub(super) fn hand_over(home: &Home, client: &mut hermes_supervisor::Client) -> CommandResult {
    let name = hermes_services::service_name(home.profile().name());
    lifecycle::ensure_registered(home, client, true)?;
    client.start(&name)?;
    // As PID 1's main program (`docker run IMAGE gateway run`) our console is the
    // supervisor's, which already shows the gateway's lines: following the log too would
    // print each twice. Stay in the foreground until signalled, as the container's program.
    if hermes_services::supervisor_pid(home.root(), Context::var)
        == Some(nix::unistd::getppid().as_raw())
    {
        output::stderr(&format!(
            "hermes: `{name}` runs under the supervisor, whose output shows its log\n"
        ));
        loop {
            nix::unistd::pause();
        }
    }
    output::stderr(&format!(
        "hermes: `{name}` runs under the supervisor; following its log (Ctrl-C stops following)\n"
    ));
    let log = hermes_services::log_file(home.root(), &name)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !log.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    service::logs(home.root(), &name, 20, true)?;
    Ok(ExitStatus::Success)
}
