//! `hermes-supervisor`: the service model, the supervision loop, restart policy, log capture
//! and the control socket (server and client) of Hermes.
//!
//! * [`spec`] — what a service is ([`ServiceSpec`]).
//! * [`config`] — the `services:` section of `config.yaml` into specs.
//! * [`machine`] — the pure state machine: `handle(event, now) -> Vec<Action>`.
//! * [`supervisor`] — the one event loop that executes it ([`Supervisor::run`]), and beside it
//!   spawning services, capturing their output and the control server.
//! * [`groups`] — process groups of services, and left-overs of a killed supervisor.
//! * [`tree`] — a service's whole process tree: what left its group (`setsid`) is still its.
//! * [`logs`] — line capture, timestamps, rotation.
//! * [`mirror`] — service output on the supervisor's stdout, never blocking the loop.
//! * [`protocol`] / [`client`] — the control socket and its blocking client.
//! * [`status`] — status rows and the human table.
//!
//! ```no_run
//! use hermes_supervisor::{Options, ServiceSpec, Supervisor, NoHooks};
//! let opts = Options::new("/run/hermes", "/opt/data/logs");
//! let sup = Supervisor::new(opts, vec![ServiceSpec::shell("hello", "echo hi; sleep 60")])?;
//! let outcome = sup.run(&mut NoHooks, &mut std::io::stdout())?;
//! std::process::exit(outcome.exit_code());
//! # Ok::<(), hermes_supervisor::Error>(())
//! ```

pub mod client;
pub mod config;
mod error;
pub mod groups;
pub mod logs;
pub mod machine;
pub mod mirror;
pub mod protocol;
pub mod spec;
pub mod status;
pub mod supervisor;
pub mod tree;
pub mod usage;

pub use client::Client;
pub use config::{ConfigError, SAMPLE_CONFIG, parse_config_yaml, parse_services};
pub use error::Error;
pub use logs::Rotation;
pub use machine::{Machine, Outcome, ServiceState, Timing};
pub use mirror::Mirror;
pub use protocol::ErrorCode;
pub use spec::{Desired, Listen, LogTarget, RestartPolicy, RunAs, ServiceSpec};
pub use status::{
    Enforcement, ExitStatus, HandOverStatus, MemoryLimit, ResourceSample, Resources, ServiceStatus,
    StateName, render_status_table,
};
pub use supervisor::{Hooks, LOOP_SIGNALS, NoHooks, Options, Supervisor, confine_run_as};
