//! `gateway run` for a profile whose engine is hermes-agent: this process becomes the agent's
//! own gateway.

use hermes_home::Home;

use crate::context::Context;
use crate::failure::Failure;
use crate::output;

/// Replaces this process with the agent's own gateway for the profile
/// (`hermes_services::agent::gateway_command`). `exec`, not a child: the supervisor's pid is
/// the agent's, so its signals (SIGTERM to stop, SIGUSR1 to restart) and its exit code (75 to
/// be restarted, 78 for bad configuration, 1 after a crash) reach the supervisor untouched.
/// Returns only when the exec failed: an install that cannot run is not fixed by restarting
/// it, so that is exit 78.
pub(super) fn exec_agent(home: &Home, agent: &hermes_services::agent::Agent) -> Failure {
    use std::os::unix::process::CommandExt;
    let (argv, env) = hermes_services::agent::gateway_command(
        agent,
        home.root(),
        home.profile().name(),
        hermes_services::gateway::restarted_on_tempfail(Context::var),
    );
    output::stderr(&format!(
        "hermes: profile `{}`: the gateway engine is hermes-agent {} (`{}`)\n",
        home.profile().name(),
        agent.version.as_deref().unwrap_or("(unknown version)"),
        agent.cli.display()
    ));
    let mut command = std::process::Command::new(&argv[0]);
    command.args(&argv[1..]).envs(env).current_dir(home.dir());
    let error = command.exec();
    let mut failure = Failure::new(
        format!(
            "cannot run hermes-agent's gateway `{}`",
            agent.cli.display()
        ),
        Some(format!(
            "check that `{}` is hermes-agent's console script (`{}` names another), or set \
             `gateway.engine: native` in the profile's config.yaml",
            agent.cli.display(),
            hermes_services::agent::AGENT_CLI_VAR
        )),
    );
    failure.causes.push(error.to_string());
    failure.code = hermes_errors::exit::CONFIG;
    failure
}
