//! The socket the supervisor holds for a profile's gateway, and how the gateway restarts.
//!
//! * The **native** engine: its API address (`hermes_home::api_server::listen_address`, the
//!   rule the gateway itself resolves) is held as the socket `api`, and a restart is a
//!   hand-over (the new gateway ready before the old one stops accepting). Its stop grace is
//!   the profile's [`crate::stop_budget`], set by the caller.
//! * The **agent** engine: its API address is held too when the listen hook is installed in
//!   the agent's venv ([`crate::agent_hook`]): without it the agent binds the port itself
//!   and would find it taken. Never a hand-over: two agents on one profile would both own its
//!   messaging platforms. A restart stops the old one first; the port, held meanwhile, refuses
//!   nothing (connections wait in the backlog).
//! * A `gateway.command` of the operator's own, a switched-off API server, or settings that
//!   cannot be read: nothing held, restarts as before (the gateway says what is wrong itself).

use std::path::Path;

use hermes_home::api_server;
use hermes_settings::{ProfileFiles, ProfileRead, Scope};
use hermes_supervisor::{Listen, ServiceSpec};

use crate::agent::{self, Engine};

/// Gives `spec` (the gateway of the profile `read`) its held socket and restart mode, as the
/// module doc says. `custom_command` is whether the operator's `gateway.command` replaces ours.
pub(crate) fn apply(spec: &mut ServiceSpec, read: &ProfileRead, custom_command: bool) {
    if custom_command {
        return;
    }
    let Ok(files) = &read.files else {
        return;
    };
    let (profile, env, config) = (read.name.as_str(), files.environment(), files.config());
    let var = |k: &str| env.get(k).cloned();
    let Ok((engine, agent)) = agent::engine_of(read, var) else {
        return;
    };
    // The agent's API server defaults to 8642 in every profile (the default profile's port):
    // the hook serves the socket only on the port the agent itself would bind.
    let port_rule = match engine {
        Engine::Native => profile,
        Engine::Agent => hermes_home::DEFAULT_PROFILE,
    };
    let Ok(Some(address)) = api_server::listen_address(port_rule, &env, config) else {
        return;
    };
    let drain = api_server::drain_timeout(&env, config).ok();
    match engine {
        Engine::Native => spec.handover = true,
        Engine::Agent => {
            if !agent.as_ref().is_some_and(crate::agent_hook::is_installed) {
                return;
            }
            // The hook reads the drain timeout from the environment only.
            if let Some(drain) = drain {
                spec.env.insert(
                    api_server::DRAIN_TIMEOUT_VAR.into(),
                    drain.as_secs().to_string(),
                );
            }
        }
    }
    spec.listen = vec![Listen::new(hermes_listen::API_SOCKET_NAME, address)];
}

/// The address the native gateway of `profile` (in `dir`) listens on, for a systemd socket
/// unit; `None` when its API server is off or its settings cannot be read.
pub(crate) fn native_address(profile: &str, dir: &Path) -> Option<String> {
    let files = ProfileFiles::read(dir, Scope::of(profile), hermes_settings::process_env()).ok()?;
    api_server::listen_address(profile, &files.environment(), files.config()).ok()?
}
