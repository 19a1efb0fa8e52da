//! `hermes completions SHELL` and `hermes man`: shell completions and manual pages generated
//! from the same clap definitions as the parser (`cli::command()`), so they never drift from
//! what `hermes` accepts.
//!
//! A packager installs them from the built binary (nothing is generated at build time, so a
//! `cargo install` user gets the same):
//!
//! ```text
//! hermes completions bash > /usr/share/bash-completion/completions/hermes
//! hermes completions zsh  > /usr/share/zsh/site-functions/_hermes
//! hermes completions fish > /usr/share/fish/vendor_completions.d/hermes.fish
//! hermes man --dir /usr/share/man/man1     # hermes.1 and hermes-<command>.1 pages
//! ```

use std::path::Path;

use crate::cli::{self, ManArgs, Shell};
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;

/// `hermes completions SHELL`: the completion script on stdout.
pub fn run_completions(shell: Shell) -> CommandResult {
    let mut command = cli::command();
    let mut script = Vec::new();
    match shell {
        Shell::Bash => generate(clap_complete::Shell::Bash, &mut command, &mut script),
        Shell::Zsh => generate(clap_complete::Shell::Zsh, &mut command, &mut script),
        Shell::Fish => generate(clap_complete::Shell::Fish, &mut command, &mut script),
        Shell::Powershell => {
            generate(clap_complete::Shell::PowerShell, &mut command, &mut script);
        }
    }
    output::stdout(&String::from_utf8_lossy(&script))?;
    Ok(ExitStatus::Success)
}

fn generate(shell: clap_complete::Shell, command: &mut clap::Command, out: &mut Vec<u8>) {
    clap_complete::generate(shell, command, "hermes", out);
}

/// `hermes man [--dir DIR]`: `hermes(1)` in roff on stdout, or every page written to `DIR`.
pub fn run_man(args: &ManArgs) -> CommandResult {
    // The version goes in each page's header (the parser itself has no `--version` flag of
    // clap's: `hermes --version` is ours).
    let command = cli::command().version(env!("CARGO_PKG_VERSION"));
    match &args.dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            output::stdout(&String::from_utf8_lossy(&page))?;
        }
        Some(dir) => write_pages(command, dir)?,
    }
    Ok(ExitStatus::Success)
}

/// Writes `hermes.1` and one `hermes-<command>[-<sub>].1` per subcommand into `dir` (which
/// must exist: a packager's staging directory), and says what it wrote.
fn write_pages(command: clap::Command, dir: &Path) -> Result<(), Failure> {
    if !dir.is_dir() {
        return Err(Failure::new(
            format!("`{}` is not a directory", dir.display()),
            Some(format!("create it first: `mkdir -p {}`", dir.display())),
        ));
    }
    clap_mangen::generate_to(command, dir)?;
    output::stderr(&format!("Wrote the manual pages to `{}`\n", dir.display()));
    Ok(())
}
