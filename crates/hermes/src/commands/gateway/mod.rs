//! `hermes gateway ...`: each profile's agent over an OpenAI-compatible API.
//!
//! * `gateway run` (`run.rs`) resolves the profile's settings (`SOUL.md`, `.env` over the
//!   environment, `config.yaml` with `${VAR}` expanded) and runs `hermes_gateway::run` on a
//!   tokio runtime — or, when a supervisor is running and this is not the supervised child,
//!   hands the gateway to the supervisor and follows its log (`hand_over.rs`). When the
//!   profile's engine is the agent (`hermes_services::agent::profile_engine`), it execs the
//!   agent's own gateway instead (`agent.rs`).
//! * `start|stop|restart` (`lifecycle.rs`) and `status|list` (`status.rs`) talk to the
//!   supervisor; a missing gateway service is registered first when the profile exists.
//! * `install|uninstall` (`install.rs`) write or remove the systemd user unit.
//! * The gateway service of a profile is described in one place,
//!   `hermes_services::gateway_spec`, shared with PID 1, `hermes up` and the dashboard; so are
//!   registering it and the systemd unit.
//!
//! The words: a profile's *gateway service* is `gateway-<profile>`; its *recorded state* is
//! the effective state of its `gateway_state.json` (desired, else last).
//!
//! This module only dispatches; `hermes chat` is `commands::chat`.

mod agent;
pub mod engines;
mod hand_over;
mod install;
mod lifecycle;
mod recorder;
mod run;
pub mod settings;
mod status;

use crate::cli::GatewayCommand;
use crate::commands::service;
use crate::context::Context;
use crate::failure::CommandResult;

use lifecycle::Lifecycle;

/// Dispatches `hermes gateway <sub>`.
pub fn run(ctx: &Context, command: GatewayCommand) -> CommandResult {
    match command {
        GatewayCommand::Run {
            replace,
            no_supervise,
        } => run::run_gateway(ctx, replace, no_supervise),
        GatewayCommand::Start { target, wait } => {
            lifecycle::lifecycle(ctx, target, Lifecycle::Start, service::wait_for(&wait))
        }
        GatewayCommand::Stop(target) => lifecycle::lifecycle(ctx, target, Lifecycle::Stop, None),
        GatewayCommand::Restart { target, wait } => {
            lifecycle::lifecycle(ctx, target, Lifecycle::Restart, service::wait_for(&wait))
        }
        GatewayCommand::Status(flag) => status::status(ctx, flag.json, true),
        GatewayCommand::List(flag) => status::status(ctx, flag.json, false),
        GatewayCommand::Install => install::install(ctx, true),
        GatewayCommand::Uninstall => install::install(ctx, false),
    }
}
