//! The one entry point: [`install_specs`].
//!
//! Order of work, each step able to stop the install before anything runs:
//!
//! 1. trim specs and drop blank ones; none left is an error
//!    ([`Error::NoSpecs`]) → *blocked*, never "installed";
//! 2. spec safety ([`crate::spec::check_spec`]) on EVERY spec → *blocked*: a
//!    spec names a package on the index, never a local file, path, URL or option;
//! 3. routing ([`crate::route::route`]) → *blocked* by the kill switch or a
//!    sealed image without durable target;
//! 4. prepare: the core venv's interpreter (a managed venv is created here),
//!    and in target mode the ABI stamp and the core constraints file;
//! 5. the *installer ladder*: `uv pip install` when uv is available (managed
//!    `$HERMES_HOME/bin/uv`, else `uv` on `PATH`), else `python -m pip install`
//!    (bootstrapping pip with `ensurepip` when missing). A uv failure is final:
//!    falling back to pip would bypass the constraints;
//! 6. re-check availability in a fresh interpreter with the Hermes path order,
//!    so a "missing dependencies" state clears without a restart.
//!
//! Every child of steps 4 and 5 (venv creation, pip probe, `ensurepip`, uv,
//! pip) runs in a *private working directory*: a fresh directory created mode
//! 0700 by the installing user and removed afterwards, never the caller's
//! current directory. Even a spec that slipped through could not name a file
//! there, and `python -m` cannot import a module from the caller's directory.
//! Paths handed to the children (core venv, target, `--find-links`) are made
//! absolute first, so relative ones still mean what the caller meant.
//!
//! Nothing here panics or returns an OS error to the caller: every failure is
//! folded into an [`InstallOutcome`] with a `reason` and a `hint`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::generations::Requester;
use crate::process::{Captured, run_captured, tail};
use crate::python::{Interpreter, venv_python};
use crate::route::{BlockReason, Route, route};
use crate::spec::check_spec;
use crate::target::{constraint_lines, installed_distributions, write_constraints};
use crate::{Environment, Error, pipconf};

/// Default time limit for one installer run.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);
/// How much of the installer's stderr is passed through on failure.
pub const STDERR_TAIL: usize = 2000;

/// Something the installer is doing, for progress display.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstallEvent {
    /// The install was refused; nothing will run.
    Blocked {
        /// The reason.
        reason: String,
    },
    /// Creating the Hermes-managed venv.
    CreatingVenv {
        /// Where.
        path: PathBuf,
    },
    /// A flat durable target from before generations became the first generation.
    Adopted {
        /// The target.
        path: PathBuf,
        /// Its generation number.
        generation: u64,
    },
    /// Installing into a new generation beside the active one.
    BuildingGeneration {
        /// Its number.
        generation: u64,
        /// Its directory.
        path: PathBuf,
    },
    /// Importing what the new generation holds before switching to it.
    CheckingImports {
        /// Its number.
        generation: u64,
    },
    /// The durable target now names the new generation.
    Switched {
        /// The generation active before, if any.
        from: Option<u64>,
        /// The one active now.
        to: u64,
    },
    /// pip was missing and is being bootstrapped with `ensurepip`.
    BootstrappingPip,
    /// Running the installer.
    Running {
        /// The command, for display.
        command: String,
    },
    /// Re-checking availability in a fresh interpreter.
    Rechecking,
    /// Done.
    Finished {
        /// Whether it succeeded.
        ok: bool,
    },
}

/// A progress callback.
pub type Progress = Arc<dyn Fn(&InstallEvent) + Send + Sync>;

/// Which installer to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InstallerChoice {
    /// uv when available, else pip.
    #[default]
    Auto,
    /// Always `python -m pip`.
    Pip,
}

/// Everything the installer needs from its caller.
#[derive(Clone)]
pub struct InstallOptions {
    /// `$HERMES_HOME` (managed venv and managed uv live under it).
    pub hermes_home: PathBuf,
    /// `security.allow_lazy_installs` from config.yaml (default true).
    pub allow_lazy_installs: bool,
    /// The environment snapshot.
    pub env: Environment,
    /// Time limit for the installer run.
    pub timeout: Duration,
    /// Resolve only (`--dry-run`); nothing is installed.
    pub dry_run: bool,
    /// Extra constraint lines (`name>=x,<y`), passed with `--constraint`.
    pub constraints: Vec<String>,
    /// Local wheel directories (`--find-links`), for air-gapped installs.
    pub find_links: Vec<PathBuf>,
    /// Do not contact any index (`--no-index`); use with `find_links`.
    pub no_index: bool,
    /// Which installer to use.
    pub installer: InstallerChoice,
    /// Progress callback.
    pub progress: Option<Progress>,
    /// Who asks, recorded with each request in the new generation.
    pub requested_by: Requester,
}

impl std::fmt::Debug for InstallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstallOptions")
            .field("hermes_home", &self.hermes_home)
            .field("allow_lazy_installs", &self.allow_lazy_installs)
            .field("timeout", &self.timeout)
            .field("dry_run", &self.dry_run)
            .field("installer", &self.installer)
            .finish_non_exhaustive()
    }
}

impl InstallOptions {
    /// Options with defaults: 300 s timeout, no dry run, auto installer.
    pub fn new(
        hermes_home: impl Into<PathBuf>,
        allow_lazy_installs: bool,
        env: Environment,
    ) -> Self {
        Self {
            hermes_home: hermes_home.into(),
            allow_lazy_installs,
            env,
            timeout: DEFAULT_TIMEOUT,
            dry_run: false,
            constraints: Vec::new(),
            find_links: Vec::new(),
            no_index: false,
            installer: InstallerChoice::Auto,
            progress: None,
            requested_by: Requester::Cli,
        }
    }

    /// Where installs would go right now.
    pub fn route(&self) -> Route {
        route(self.allow_lazy_installs, &self.env, &self.hermes_home)
    }

    /// The uv binary to use: Hermes-managed (`$HERMES_HOME/bin/uv`) first, then `PATH` —
    /// never the `uv` shim, which is this program (it would install by calling itself).
    pub fn uv(&self) -> Option<PathBuf> {
        if self.installer == InstallerChoice::Pip {
            return None;
        }
        let managed = self.hermes_home.join("bin").join("uv");
        if crate::env::is_executable(&managed) && !crate::env::is_this_program(&managed) {
            return Some(managed);
        }
        self.env.which_not("uv", crate::env::is_this_program)
    }

    /// The interpreter for availability checks (core venv + durable target),
    /// or `None` when the core venv does not exist yet (nothing is installed).
    pub fn interpreter(&self) -> Option<Interpreter> {
        let (venv, _) = crate::route::core_venv(&self.env, &self.hermes_home);
        let python = venv_python(&venv)?;
        Some(Interpreter::new(
            python,
            self.env.durable_target(),
            self.env.clone(),
        ))
    }

    pub(crate) fn emit(&self, event: InstallEvent) {
        if let Some(p) = &self.progress {
            p(&event);
        }
    }
}

/// The result of [`install_specs`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct InstallOutcome {
    /// The install succeeded (or there was nothing to do).
    pub ok: bool,
    /// Nothing was run: kill switch, sealed without target, an unsafe spec, or no spec at all.
    pub blocked: bool,
    /// Why it failed or was blocked; empty on success.
    pub reason: String,
    /// What to do about it.
    pub hint: Option<String>,
    /// What was (or would be) run, for display.
    pub command: String,
    /// The installer's standard output.
    pub stdout: String,
    /// The last [`STDERR_TAIL`] characters of the installer's standard error.
    pub stderr: String,
    /// Specs still unsatisfied in a fresh interpreter after a successful install.
    pub still_missing: Vec<String>,
    /// Why the post-install re-check could not run, if it could not.
    pub recheck_error: Option<String>,
    /// The installer ran with `--dry-run`: it only resolved, nothing was installed.
    pub dry_run: bool,
    /// A dry run's plan in the installer's own words (`Would install 1 package`, ` + six==1.17.0`).
    pub would: Vec<String>,
    /// The generation of the durable target the install made active, if it made one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

impl InstallOutcome {
    fn blocked(reason: &BlockReason, command: String) -> Self {
        Self {
            ok: false,
            blocked: true,
            reason: reason.to_string(),
            hint: Some(reason.hint()),
            command,
            ..Self::default()
        }
    }

    fn refused(err: &Error) -> Self {
        Self {
            ok: false,
            blocked: true,
            reason: hermes_errors::one_line(err),
            hint: err.hint(),
            ..Self::default()
        }
    }

    fn failed(err: &Error, command: String) -> Self {
        Self {
            ok: false,
            reason: hermes_errors::one_line(err),
            hint: err.hint(),
            command,
            ..Self::default()
        }
    }

    /// Plain-text rendering: the command, then `error:`/`hint:` lines and the
    /// installer's stderr on failure. A dry run says what would run, the installer's plan and
    /// that nothing changed — never `ran:` or `installed`.
    pub fn render(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        if !self.command.is_empty() {
            writeln!(
                out,
                "{} {}",
                if self.blocked || self.dry_run {
                    "would run:"
                } else {
                    "ran:"
                },
                self.command
            )?;
        }
        if self.ok && self.dry_run {
            for line in &self.would {
                writeln!(out, "  {line}")?;
            }
            return writeln!(out, "dry run: nothing was installed or changed");
        }
        if self.ok {
            if self.still_missing.is_empty() {
                writeln!(out, "installed")?;
            } else {
                writeln!(
                    out,
                    "installed, but still missing: {}",
                    self.still_missing.join(", ")
                )?;
            }
            return Ok(());
        }
        writeln!(out, "error: {}", self.reason)?;
        if let Some(h) = &self.hint {
            writeln!(out, "hint: {h}")?;
        }
        if !self.stderr.trim().is_empty() {
            writeln!(out, "installer output:\n{}", self.stderr.trim_end())?;
        }
        Ok(())
    }
}

/// Quotes a spec for display when a shell would mangle it.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.-=+,/:".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The display command: `uv pip install [--target D] specs` or
/// `<python> -m pip install [--target D] specs`.
pub fn display_command(installer: &str, target: Option<&Path>, specs: &[String]) -> String {
    let mut parts = vec![installer.to_string()];
    if let Some(t) = target {
        parts.push("--target".into());
        parts.push(shell_word(&t.to_string_lossy()));
    }
    parts.extend(specs.iter().map(|s| shell_word(s)));
    parts.join(" ")
}

/// The command line `cmd` runs, as printed (`ran: …`, the progress line): its program and
/// every argument in order — the real flags (`--python`, `--dry-run`, `--constraint`, …),
/// not a summary — each quoted where a shell would mangle it, so it can be re-run by hand.
/// (The environment it runs with is not part of it.)
pub fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|word| shell_word(&word.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Installs `specs` where the routing says, never panicking and never
/// returning a raw OS error. See the module doc for the order of work.
pub fn install_specs(specs: &[impl AsRef<str>], options: &InstallOptions) -> InstallOutcome {
    let specs: Vec<String> = specs
        .iter()
        .map(|s| s.as_ref().trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    if specs.is_empty() {
        let err = Error::NoSpecs;
        options.emit(InstallEvent::Blocked {
            reason: err.to_string(),
        });
        return InstallOutcome::refused(&err);
    }
    let route = options.route();
    let uv_display = display_command(
        "uv pip install",
        options.env.durable_target().map(absolute).as_deref(),
        &specs,
    );
    for spec in &specs {
        if let Err(why) = check_spec(spec) {
            let reason = BlockReason::UnsafeSpec {
                spec: spec.clone(),
                why,
            };
            options.emit(InstallEvent::Blocked {
                reason: reason.to_string(),
            });
            return InstallOutcome::blocked(&reason, uv_display);
        }
    }
    let (venv, managed, target) = match &route {
        Route::Blocked(reason) => {
            options.emit(InstallEvent::Blocked {
                reason: reason.to_string(),
            });
            return InstallOutcome::blocked(reason, uv_display);
        }
        Route::Venv { venv, managed } => (absolute(venv), *managed, None),
        Route::Target {
            venv,
            managed,
            target,
        } => (absolute(venv), *managed, Some(absolute(target))),
    };
    let mut outcome = match run_install(&specs, options, &venv, managed, target.as_deref()) {
        Ok(o) => o,
        Err((err, command)) => InstallOutcome::failed(&err, command.unwrap_or(uv_display)),
    };
    if options.dry_run {
        outcome.dry_run = true;
        outcome.would = dry_run_plan(&outcome.stdout, &outcome.stderr);
    }
    if outcome.ok && !options.dry_run {
        options.emit(InstallEvent::Rechecking);
        match options.interpreter().map(|i| i.missing(&specs)) {
            Some(Ok(missing)) => outcome.still_missing = missing,
            Some(Err(e)) => {
                outcome.still_missing = specs.clone();
                outcome.recheck_error = Some(hermes_errors::one_line(&e));
            }
            None => outcome.still_missing = specs.clone(),
        }
    }
    options.emit(InstallEvent::Finished { ok: outcome.ok });
    outcome
}

pub(crate) type StepError = (Error, Option<String>);

/// Installs into the core venv, or into the durable target: a dry run straight at it (it
/// writes nothing), a real install as a new generation.
fn run_install(
    specs: &[String],
    options: &InstallOptions,
    venv: &Path,
    managed: bool,
    target: Option<&Path>,
) -> Result<InstallOutcome, StepError> {
    let core = prepare_core(options, venv, managed)?;
    match target {
        Some(t) if !options.dry_run => crate::generations::install(specs, options, &core, t),
        _ => run_installer(specs, options, &core, target),
    }
}

/// `path` made absolute against the caller's current directory (lexically:
/// symlinks are not resolved). Children run elsewhere, in the private
/// working directory, so a relative path would otherwise change meaning.
fn absolute(path: impl AsRef<Path>) -> PathBuf {
    let path = path.as_ref();
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// A program path for a child running in the private working directory: made
/// absolute when it has a directory part, left alone when it is a bare name
/// (looked up on `PATH`, never in a directory).
fn program(path: &Path) -> PathBuf {
    if path.components().count() > 1 {
        absolute(path)
    } else {
        path.to_path_buf()
    }
}

/// The private working directory for installer children: a fresh directory
/// under the temporary directory, created mode 0700 by the installing user
/// (nobody else can enter it or put a file in it), removed when dropped.
fn private_workdir() -> Result<tempfile::TempDir, Error> {
    tempfile::Builder::new()
        .prefix("hermes-install-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|source| Error::WorkDir { source })
}

fn core_python(
    options: &InstallOptions,
    venv: &Path,
    managed: bool,
    workdir: &Path,
) -> Result<PathBuf, Error> {
    if let Some(p) = venv_python(venv) {
        return Ok(p);
    }
    if !managed {
        return Err(Error::PythonNotFound {
            searched: format!("`{}/bin/python3`", venv.display()),
        });
    }
    options.emit(InstallEvent::CreatingVenv {
        path: venv.to_path_buf(),
    });
    let base = options
        .env
        .get_nonempty(crate::env::PYTHON_VAR)
        .map(PathBuf::from)
        .or_else(|| options.env.which("python3"))
        .ok_or_else(|| Error::PythonNotFound {
            searched: "`HERMES_PYTHON`, `python3` on `PATH`".into(),
        })?;
    let mut cmd = Command::new(program(&base));
    cmd.current_dir(workdir)
        .env_clear()
        .envs(options.env.child_vars())
        .arg("-m")
        .arg("venv")
        .arg(venv);
    let out = run_captured(&mut cmd, Duration::from_secs(180))?;
    if !out.success {
        return Err(Error::VenvCreate {
            path: venv.to_path_buf(),
            detail: tail(out.stderr.trim(), 400).to_string(),
        });
    }
    venv_python(venv).ok_or_else(|| Error::VenvCreate {
        path: venv.to_path_buf(),
        detail: "the venv has no `bin/python3`".into(),
    })
}

/// The core interpreter an install works with, and the private directory its children run in
/// (removed when this is dropped, after every child has exited).
pub(crate) struct Core {
    /// The core venv's interpreter.
    pub python: PathBuf,
    /// What it says about itself (ABI, site-packages).
    pub info: crate::python::PythonInfo,
    workdir: tempfile::TempDir,
}

/// Finds (or, for a managed venv, creates) the core interpreter and asks it about itself.
pub(crate) fn prepare_core(
    options: &InstallOptions,
    venv: &Path,
    managed: bool,
) -> Result<Core, StepError> {
    let workdir = private_workdir().map_err(|e| (e, None))?;
    let python = core_python(options, venv, managed, workdir.path()).map_err(|e| (e, None))?;
    // The core interpreter WITHOUT the target: it is the one whose packages we pin.
    let info = Interpreter::new(python.clone(), None, options.env.clone())
        .info()
        .map_err(|e| (e, None))?;
    Ok(Core {
        python,
        info,
        workdir,
    })
}

/// Runs the installer for `specs`, into the core venv or (with `target`) into that
/// directory with every shared dependency pinned to the core's version.
pub(crate) fn run_installer(
    specs: &[String],
    options: &InstallOptions,
    core: &Core,
    target: Option<&Path>,
) -> Result<InstallOutcome, StepError> {
    let workdir = core.workdir.path();
    let python = core.python.clone();
    let info = &core.info;
    let mut lines = options.constraints.clone();
    if target.is_some() {
        // If enumeration finds nothing the install simply runs unconstrained.
        lines.extend(constraint_lines(&installed_distributions(
            &info.site_packages,
        )));
    }
    let constraints = if lines.is_empty() {
        None
    } else {
        let kind = if target.is_some() { "core" } else { "plugin" };
        Some(write_constraints(kind, &lines).map_err(|source| (Error::TempFile { source }, None))?)
    };
    let constraint_path = constraints.as_ref().map(|f| f.path().to_path_buf());
    let mut extra: Vec<String> = Vec::new();
    if options.dry_run {
        extra.push("--dry-run".into());
    }
    if let Some(t) = target {
        extra.push("--target".into());
        extra.push(t.to_string_lossy().into_owned());
    }
    if let Some(c) = &constraint_path {
        extra.push("--constraint".into());
        extra.push(c.to_string_lossy().into_owned());
    }
    if options.no_index {
        extra.push("--no-index".into());
    }
    for d in &options.find_links {
        extra.push("--find-links".into());
        extra.push(absolute(d).to_string_lossy().into_owned());
    }

    if let Some(uv) = options.uv() {
        let mut cmd = Command::new(program(&uv));
        cmd.current_dir(workdir)
            .env_clear()
            .envs(options.env.child_vars());
        if let Some(url) = pipconf::uv_index_bridge(&options.env, Some(&info.prefix)) {
            cmd.env("UV_INDEX_URL", url);
        }
        cmd.args(["pip", "install", "--python"])
            .arg(&python)
            .args(["--compile-bytecode", "--no-config"]);
        cmd.args(&extra).args(specs);
        let command = command_line(&cmd);
        options.emit(InstallEvent::Running {
            command: command.clone(),
        });
        match run_captured(&mut cmd, options.timeout) {
            Ok(out) => return Ok(finish("`uv pip install`", out, command)),
            Err(Error::Spawn { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(Error::Timeout { seconds, .. }) => {
                return Ok(InstallOutcome {
                    reason: format!("`uv pip install` timed out after {seconds}s"),
                    hint: Some(
                        "if your network needs a package mirror, set `index-url` in `pip.conf` \
                         (bridged to uv automatically) or `UV_INDEX_URL`"
                            .into(),
                    ),
                    command,
                    ..InstallOutcome::default()
                });
            }
            Err(e) => return Err((e, Some(command))),
        }
    }

    // What would run, for a failure before pip runs (the real command line is said below).
    let planned = display_command(
        &format!("{} -m pip install", python.display()),
        target,
        specs,
    );
    ensure_pip(options, &python, target.is_some(), workdir).map_err(|e| (e, Some(planned)))?;
    let mut cmd = Command::new(&python);
    cmd.current_dir(workdir)
        .env_clear()
        .envs(options.env.child_vars());
    if target.is_some() {
        // The core venv is sealed: do not even write bytecode for pip's own modules into it.
        cmd.env("PYTHONDONTWRITEBYTECODE", "1");
    }
    cmd.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
    ]);
    if target.is_some() {
        // Without --upgrade pip keeps an older copy already in the target, so a pin bump would not apply.
        cmd.arg("--upgrade");
    }
    cmd.args(&extra).args(specs);
    let command = command_line(&cmd);
    options.emit(InstallEvent::Running {
        command: command.clone(),
    });
    match run_captured(&mut cmd, options.timeout) {
        Ok(out) => Ok(finish("`pip install`", out, command)),
        Err(Error::Timeout { seconds, .. }) => Err((
            Error::Timeout {
                program: "pip install".into(),
                seconds,
            },
            Some(command),
        )),
        Err(e) => Err((e, Some(command))),
    }
}

fn ensure_pip(
    options: &InstallOptions,
    python: &Path,
    sealed_core: bool,
    workdir: &Path,
) -> Result<(), Error> {
    let mut probe = Command::new(python);
    probe
        .current_dir(workdir)
        .env_clear()
        .envs(options.env.child_vars())
        .env("PYTHONDONTWRITEBYTECODE", "1");
    probe.args(["-m", "pip", "--version"]);
    if run_captured(&mut probe, Duration::from_secs(60)).is_ok_and(|o| o.success) {
        return Ok(());
    }
    let pip_missing = |detail: String| Error::PipUnavailable {
        python: python.to_path_buf(),
        detail,
    };
    if sealed_core {
        return Err(pip_missing(
            "the core environment is read-only, so pip cannot be bootstrapped into it".into(),
        ));
    }
    options.emit(InstallEvent::BootstrappingPip);
    let mut boot = Command::new(python);
    boot.current_dir(workdir)
        .env_clear()
        .envs(options.env.child_vars())
        .args(["-m", "ensurepip", "--upgrade", "--default-pip"]);
    match run_captured(&mut boot, Duration::from_secs(120)) {
        Ok(o) if o.success => Ok(()),
        Ok(o) => Err(pip_missing(tail(o.stderr.trim(), 400).to_string())),
        Err(e) => Err(pip_missing(hermes_errors::one_line(&e))),
    }
}

/// A dry run's plan as the installer printed it: pip's `Would install six-1.17.0` (stdout),
/// uv's `Would install 1 package` followed by ` + six==1.17.0` lines, or `Would make no
/// changes` (stderr). Resolution chatter (`Resolved 1 package in 3ms`) is left out.
fn dry_run_plan(stdout: &str, stderr: &str) -> Vec<String> {
    let mut plan = Vec::new();
    let mut in_plan = false;
    for line in stdout.lines().chain(stderr.lines()) {
        let line = line.trim_end();
        if line.starts_with("Would ") {
            in_plan = true;
            plan.push(line.to_string());
        } else if in_plan && (line.starts_with(" + ") || line.starts_with(" - ")) {
            plan.push(line.to_string());
        } else {
            in_plan = false;
        }
    }
    plan
}

fn finish(program: &str, out: Captured, command: String) -> InstallOutcome {
    let stderr = tail(&out.stderr, STDERR_TAIL).to_string();
    if out.success {
        return InstallOutcome {
            ok: true,
            command,
            stdout: out.stdout,
            stderr,
            ..InstallOutcome::default()
        };
    }
    let status = out
        .code
        .map_or_else(|| "a signal".to_string(), |c| format!("exit status {c}"));
    let stderr = if stderr.trim().is_empty() {
        tail(&out.stdout, STDERR_TAIL).to_string()
    } else {
        stderr
    };
    InstallOutcome {
        ok: false,
        reason: format!("{program} failed with {status}"),
        hint: Some("read the installer output below: usually a version that conflicts with the core \
             environment, or no access to the package index (set `index-url` in `pip.conf` or `PIP_INDEX_URL`)"
            .into()),
        command,
        stdout: out.stdout,
        stderr,
        ..InstallOutcome::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{DISABLE_VAR, TARGET_VAR, VENV_VAR};
    use std::sync::Mutex;

    fn opts(allow: bool, env: Environment) -> InstallOptions {
        InstallOptions::new("/nonexistent/hermes-home", allow, env)
    }

    proptest::proptest! {
        #[test]
        fn random_specs_never_panic(specs in proptest::collection::vec(".{0,240}", 0..4)) {
            // Kill switch off: whatever the specs, nothing may run, and nothing may panic.
            let o = install_specs(&specs, &opts(false, Environment::default()));
            proptest::prop_assert!(o.ok || o.blocked);
        }
    }

    #[test]
    fn an_empty_spec_list_is_an_error_not_installed() {
        // Installs allowed and a venv that does not exist: anything that ran would fail, not block.
        let o = opts(
            true,
            Environment::default().with(VENV_VAR, "/nonexistent/venv"),
        );
        let none: &[&str] = &[];
        for specs in [none, &[""], &["", "  ", "\t"]] {
            let out = install_specs(specs, &o);
            assert!(!out.ok, "{specs:?}: {out:?}");
            assert!(out.blocked, "nothing ran: {out:?}");
            assert_eq!(
                out.reason, "nothing to install: no spec was given",
                "{specs:?}"
            );
            assert!(
                out.hint.as_deref().unwrap_or("").contains("honcho-ai"),
                "the hint shows what a spec looks like: {:?}",
                out.hint
            );
            assert!(out.command.is_empty() && out.stdout.is_empty());
            let mut buf = Vec::new();
            out.render(&mut buf).unwrap();
            let text = String::from_utf8(buf).unwrap();
            assert!(!text.lines().any(|l| l.starts_with("installed")), "{text}");
            assert!(text.starts_with("error: nothing to install"), "{text}");
        }
    }

    #[test]
    fn unsafe_specs_are_blocked_before_anything_runs() {
        // The venv does not exist: any attempt to run would fail, not block.
        let env = Environment::default().with(VENV_VAR, "/nonexistent/venv");
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut o = opts(true, env);
        let sink = events.clone();
        o.progress = Some(Arc::new(move |e: &InstallEvent| {
            sink.lock().unwrap().push(e.clone())
        }));
        let long = "a".repeat(201);
        for bad in [
            "x; rm -rf /",
            "--index-url=https://evil/simple",
            "git+https://github.com/a/b",
            "pkg @ file:///tmp/x",
            long.as_str(),
            "pkg\nother",
        ] {
            let out = install_specs(&["honcho-ai", bad], &o);
            assert!(out.blocked && !out.ok, "{bad:?}: {out:?}");
            assert!(
                out.reason.starts_with("refusing to install unsafe spec"),
                "{}",
                out.reason
            );
            assert!(out.stdout.is_empty() && out.stderr.is_empty());
        }
        let ev = events.lock().unwrap();
        assert!(
            ev.iter().all(|e| matches!(e, InstallEvent::Blocked { .. })),
            "{ev:?}"
        );
    }

    #[test]
    fn gating_matrix_through_install_specs() {
        let sealed = Environment::default()
            .with(DISABLE_VAR, "1")
            .with(VENV_VAR, "/nonexistent/venv");
        let o = install_specs(&["honcho-ai"], &opts(true, sealed.clone()));
        assert!(o.blocked);
        assert!(
            o.reason.contains("immutable") && o.reason.contains("HERMES_LAZY_INSTALL_TARGET"),
            "{}",
            o.reason
        );
        assert!(
            o.hint
                .as_deref()
                .unwrap_or("")
                .contains("HERMES_LAZY_INSTALL_TARGET")
        );

        let o = install_specs(&["honcho-ai"], &opts(false, Environment::default()));
        assert!(o.blocked);
        assert_eq!(
            o.reason,
            "runtime installs disabled (security.allow_lazy_installs=false)"
        );

        let o = install_specs(
            &["honcho-ai"],
            &opts(false, sealed.clone().with(TARGET_VAR, "/tmp/t")),
        );
        assert!(o.blocked, "kill switch applies in target mode too");

        // Sealed + target proceeds (past the gate): it fails on the missing venv,
        // not blocked, and the failure is a sentence with a hint.
        let o = install_specs(
            &["honcho-ai"],
            &opts(true, sealed.with(TARGET_VAR, "/tmp/hermes-t")),
        );
        assert!(!o.blocked && !o.ok, "{o:?}");
        assert!(
            o.reason.contains("no Python interpreter found"),
            "{}",
            o.reason
        );
        assert!(o.hint.is_some());
    }

    #[test]
    fn the_command_line_is_every_argument_in_order_quoted_for_a_shell() {
        let mut cmd = Command::new("/opt/data/bin/uv");
        cmd.args([
            "pip",
            "install",
            "--python",
            "/venv/bin/python3",
            "--dry-run",
        ])
        .args(["mem0ai>=2.0.10,<3", "it's"])
        .env("UV_INDEX_URL", "https://example.invalid/simple");
        assert_eq!(
            command_line(&cmd),
            "/opt/data/bin/uv pip install --python /venv/bin/python3 --dry-run \
             'mem0ai>=2.0.10,<3' 'it'\\''s'"
        );
    }

    #[test]
    fn command_display_venv_vs_target() {
        let specs = vec!["honcho-ai".to_string(), "mem0ai>=2.0.10,<3".to_string()];
        assert_eq!(
            display_command("uv pip install", None, &specs),
            "uv pip install honcho-ai 'mem0ai>=2.0.10,<3'"
        );
        assert_eq!(
            display_command(
                "uv pip install",
                Some(Path::new("/opt/data/lazy-packages")),
                &specs
            ),
            "uv pip install --target /opt/data/lazy-packages honcho-ai 'mem0ai>=2.0.10,<3'"
        );
        let env = Environment::default().with(DISABLE_VAR, "1");
        let o = install_specs(
            &specs,
            &opts(false, env.with(TARGET_VAR, "/opt/data/lazy-packages")),
        );
        assert!(
            o.command.contains("--target /opt/data/lazy-packages"),
            "{}",
            o.command
        );
    }

    #[test]
    fn failure_stderr_is_passed_through_and_bounded() {
        let long = format!("{}THE-END", "x".repeat(5000));
        let out = Captured {
            success: false,
            code: Some(1),
            stdout: String::new(),
            stderr: long,
        };
        let o = finish("`pip install`", out, "cmd".into());
        assert!(!o.ok && !o.blocked);
        assert_eq!(o.stderr.chars().count(), STDERR_TAIL);
        assert!(o.stderr.ends_with("THE-END"));
        assert_eq!(o.reason, "`pip install` failed with exit status 1");
        let mut buf = Vec::new();
        o.render(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(
            text.contains("error: `pip install` failed")
                && text.contains("hint: ")
                && text.contains("THE-END")
        );
    }

    #[test]
    fn a_dry_run_says_what_would_run_and_that_nothing_changed() {
        let uv = "Using Python 3.11.7 environment at: v\nResolved 1 package in 3ms\nWould install 1 package\n + six==1.17.0\n";
        let pip = "Collecting six\n  Using cached six-1.17.0.whl\nWould install six-1.17.0\n";
        assert_eq!(
            dry_run_plan("", uv),
            vec!["Would install 1 package", " + six==1.17.0"]
        );
        assert_eq!(dry_run_plan(pip, ""), vec!["Would install six-1.17.0"]);
        let outcome = InstallOutcome {
            ok: true,
            command: "uv pip install six".into(),
            dry_run: true,
            would: dry_run_plan("", uv),
            ..InstallOutcome::default()
        };
        let mut buf = Vec::new();
        outcome.render(&mut buf).unwrap();
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            "would run: uv pip install six\n  Would install 1 package\n   + six==1.17.0\n\
             dry run: nothing was installed or changed\n"
        );
    }
}
