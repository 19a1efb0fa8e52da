//! `gateway install|uninstall`: a profile's gateway as a systemd user unit
//! (`hermes_services::unit`), and what to run next.

use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus};
use crate::output;

/// `gateway install|uninstall` (`hermes_services::unit`).
pub(super) fn install(ctx: &Context, install: bool) -> CommandResult {
    use hermes_services::unit::{self, UnitChange};
    let home = ctx.home()?;
    let change = if install {
        unit::install(&home, &std::env::current_exe()?, &Context::var)?
    } else {
        unit::uninstall(&home, &Context::var)?
    };
    match change {
        UnitChange::InContainer => output::stdout(
            "In the container, gateways are managed automatically: every profile gets one, started at boot when it was running before. Use `hermes gateway start|stop` instead.\n",
        )?,
        UnitChange::Written {
            unit,
            unit_name,
            exe,
            build_only,
            socket,
        } => {
            if build_only {
                output::stderr(&format!(
                    "warning: the unit runs the build `{}`, which `cargo clean` removes\n\
                     hint: install hermes (e.g. `cargo install --path crates/hermes`) and run \
                     `hermes gateway install` again\n",
                    exe.display()
                ));
            }
            match socket {
                Some((socket, socket_name)) => output::stdout(&format!(
                    "Wrote `{}` and `{}` (its API port, which systemd holds across restarts); \
                     enable them with `systemctl --user daemon-reload && systemctl --user enable \
                     --now {socket_name} {unit_name}`\n",
                    unit.display(),
                    socket.display()
                ))?,
                None => output::stdout(&format!(
                    "Wrote `{}`; enable it with `systemctl --user daemon-reload && systemctl --user enable --now {unit_name}`\n",
                    unit.display()
                ))?,
            }
        }
        UnitChange::Absent { unit } => output::stdout(&format!(
            "No unit at `{}`; nothing to remove\n",
            unit.display()
        ))?,
        UnitChange::Removed {
            unit,
            unit_name,
            socket,
        } => {
            let also = socket.map_or_else(String::new, |s| format!(" and `{}`", s.display()));
            output::stdout(&format!(
                "Removed `{}`{also}; if the gateway still runs, stop it with `systemctl --user stop {unit_name}`, \
                 then run `systemctl --user daemon-reload`\n",
                unit.display()
            ))?;
        }
    }
    Ok(ExitStatus::Success)
}
