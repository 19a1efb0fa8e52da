//! `hermes` invoked as `uv`: the shim the images put on `PATH` so that the original agent's
//! runtime installer lands its installs into the durable target in a new install generation
//! (`hermes_deps::generations::uv_shim` says what it reads). Everything else asked of `uv` is
//! handed to a real `uv` further down `PATH`, or refused with exit 127 when there is none.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;

use hermes_deps::Requester;
use hermes_deps::env::{VENV_VAR, is_this_program};
use hermes_deps::generations::uv_shim::{UvCall, parse};

use crate::context::Context;
use crate::failure::Failure;
use crate::output;

/// Whether this process was started as `uv`.
pub fn invoked_as_uv() -> bool {
    std::env::args_os()
        .next()
        .map(std::path::PathBuf::from)
        .is_some_and(|argv0| argv0.file_name().is_some_and(|name| name == "uv"))
}

/// Runs the shim with the full command line (`args[0]` is `uv`).
pub fn run(args: &[OsString]) -> ExitCode {
    let words: Option<Vec<String>> = args
        .iter()
        .skip(1)
        .map(|a| a.clone().into_string().ok())
        .collect();
    let call = words.as_deref().map_or(UvCall::Other, parse);
    match call {
        UvCall::InstallInto { target, specs } if is_the_durable_target(&target) => {
            match install(&specs) {
                Ok(code) => code,
                Err(failure) => {
                    output::stderr(&failure.render());
                    ExitCode::from(failure.code)
                }
            }
        }
        _ => hand_to_real_uv(args),
    }
}

/// Whether `dir` names `HERMES_LAZY_INSTALL_TARGET` (the same file, or the same path).
fn is_the_durable_target(dir: &Path) -> bool {
    let Some(target) = hermes_deps::Environment::from_process().durable_target() else {
        return false;
    };
    match (std::fs::canonicalize(dir), std::fs::canonicalize(&target)) {
        (Ok(a), Ok(b)) => a == b,
        _ => std::path::absolute(dir).ok() == std::path::absolute(&target).ok(),
    }
}

fn install(specs: &[String]) -> Result<ExitCode, Failure> {
    let home = Context { profile_flag: None }.home()?;
    let mut options = super::plugins::install_options(&home)?;
    options.requested_by = Requester::Agent;
    // The agent names its own venv (the core to pin against) in VIRTUAL_ENV; the images
    // name it in HERMES_VENV, which wins.
    if options.env.core_venv().is_none()
        && let Some(venv) = options.env.get_nonempty("VIRTUAL_ENV").map(str::to_owned)
    {
        options.env = options.env.clone().with(VENV_VAR, &venv);
    }
    let _owner = super::plugins::as_volume_owner(&options)?;
    let outcome = hermes_deps::install_specs(specs, &options);
    let mut text = Vec::new();
    outcome.render(&mut text)?;
    output::stdout(&String::from_utf8_lossy(&text))?;
    Ok(if outcome.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Execs the first `uv` on `PATH` that is not this program; 127 (as a shell's "not found")
/// when there is none.
fn hand_to_real_uv(args: &[OsString]) -> ExitCode {
    let env = hermes_deps::Environment::from_process();
    let Some(real) = env.which_not("uv", is_this_program) else {
        output::stderr(
            "uv: not installed here; this `uv` only installs packages into the durable target \
             (HERMES_LAZY_INSTALL_TARGET) as a new install generation\n",
        );
        return ExitCode::from(127);
    };
    let err = std::process::Command::new(&real)
        .arg0("uv")
        .args(args.iter().skip(1))
        .exec();
    output::stderr(&format!("uv: cannot run `{}`: {err}\n", real.display()));
    ExitCode::from(126)
}
