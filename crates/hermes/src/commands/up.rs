//! `hermes up`: the supervisor in the foreground on a normal machine, as the current user.
//!
//! It supervises one gateway per profile — reconciled like a container boot: started when its
//! recorded state is `running`, registered `down` otherwise, and on a fresh home the default
//! profile's gateway starts — plus the services declared under `services:` in the root's
//! `config.yaml`. Bad entries are reported with the service name and key, and the valid ones
//! still run. Ctrl-C or
//! SIGTERM stops everything in reverse start order and exits 0; a second `hermes up` on the
//! same home finds the lock and says which pid holds it.
//!
//! The dashboard runs as the `dashboard` service unless `--no-dashboard` or
//! `HERMES_DASHBOARD=0` switches it off; it is then listed `disabled`
//! (`hermes_services::dashboard`). Scheduled backups run as the `backup` service when
//! `backup.schedule` is set (`hermes_services::backup_schedule`).

use hermes_settings::VolumeFiles;
use hermes_supervisor::{Desired, Hooks, Options, ServiceSpec, Supervisor};

use hermes_services::backup_schedule;
use hermes_services::dashboard::{
    DASHBOARD_VAR, Host, add_unless_declared, dashboard_enabled, dashboard_spec,
};

use crate::cli::UpArgs;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;
use hermes_errors::text::printable;

/// Runs `hermes up`.
pub fn run(ctx: &Context, args: &UpArgs) -> CommandResult {
    let root = ctx.root()?;
    // Every profile's files, read once: every service below is built from this read.
    let volume = VolumeFiles::read(&root, &hermes_settings::process_env());
    let root_files = volume.root().files.as_ref().map_err(|why| {
        Failure::new(
            why.to_string(),
            Some("fix the file, then run `hermes up` again".into()),
        )
    })?;
    let config = root_files.config();
    let declared = hermes_services::declared::declared_services(config, None);
    let mut specs = declared.specs;
    let exe = std::env::current_exe()?;
    let mut notes = Vec::new();
    let multiplex = hermes_services::multiplex::resolve(
        volume.root(),
        &Context::var,
        hermes_services::multiplex::agent_default,
    );
    let (gateways, actions) =
        hermes_services::reconcile(&root, &exe, None, true, &multiplex, &volume, &mut notes);
    let mut lines = String::from_utf8_lossy(&notes).into_owned();
    for action in &actions {
        lines.push_str(&format!("hermes up: {}\n", describe(action)));
    }
    specs.extend(gateways);
    if root_files.model().default.is_none() {
        lines.push_str(NO_MODEL_NOTICE);
    }
    let dashboard =
        !args.no_dashboard && dashboard_enabled(Host::Up, Context::var(DASHBOARD_VAR).as_deref());
    if let Some(note) = add_unless_declared(&mut specs, dashboard_spec(&exe, dashboard, None)) {
        lines.push_str(&format!("hermes up: {note}\n"));
    }
    // Scheduled snapshots, when `backup.schedule` (or `HERMES_BACKUP_SCHEDULE`) is set.
    if let Some(backup) = backup_schedule::backup_service(config, &exe, &Context::var, None)
        && let Some(note) = backup_schedule::add_unless_declared(&mut specs, backup)
    {
        lines.push_str(&format!("hermes up: {note}\n"));
    }
    for line in hermes_services::stop_budget::describe_needs(
        specs.iter().map(|s| s.stop_grace),
        Context::var(hermes_services::stop_budget::CONTAINER_STOP_TIMEOUT_VAR).as_deref(),
    ) {
        lines.push_str(&format!("hermes up: {line}\n"));
    }
    let sign_in = hermes_services::sign_in::prepare(&mut specs, &exe, Context::var)?;
    let runtime_dir =
        hermes_services::choose_runtime_dir(&hermes_services::runtime_dirs(&root, Context::var))?;
    let options = Options::new(&runtime_dir, hermes_home::layout::logs_dir(&root));
    // Taking the lock comes first: a second `hermes up` says who runs, nothing else.
    let supervisor = Supervisor::new(options, specs)?;
    // Ours alone now, and no gateway has started: a damaged database is restored or said,
    // never served silently.
    for line in check_databases(&root) {
        lines.push_str(&format!("hermes up: {}\n", printable(&line)));
    }
    if let Some(line) = resolve_plugins(ctx) {
        lines.push_str(&format!("hermes up: {}\n", printable(&line)));
    }
    if let Some(token) = &sign_in {
        lines.push_str(&sign_in_notice(&root, &runtime_dir, token));
    }
    for note in supervisor.notes() {
        output::stderr(&format!("warning: {note}\n"));
    }
    for problem in &declared.problems {
        output::stderr(&format!("warning: {problem}\n"));
    }
    output::stderr(&lines);
    output::stderr(&format!(
        "hermes up: supervising `{}` (control socket `{}`); Ctrl-C stops everything\n",
        root.display(),
        supervisor.socket_path().display()
    ));
    // An operator's start/stop is written to the profile's `gateway_state.json` as
    // `desired_state` (the hooks PID 1 wraps), and once the loop has settled the pages only
    // the start-up used are given back, as PID 1 does (`hermes_init::pages`).
    let mut stderr = std::io::stderr();
    let mut hooks = UpHooks(hermes_services::DesiredStateHooks {
        home: root,
        log: &mut stderr,
    });
    let ran = supervisor.run(&mut hooks, &mut std::io::stdout());
    if sign_in.is_some() {
        hermes_services::sign_in::forget(&runtime_dir);
    }
    ran?;
    output::stderr("hermes up: every service has stopped; done\n");
    Ok(ExitStatus::Success)
}

/// `hermes backup check --at-start`'s lines; a check that cannot run is a warning, the
/// gateways start all the same.
fn check_databases(root: &std::path::Path) -> Vec<String> {
    use crate::commands::backup::check;
    match check::check(root, check::Asked::AtStart) {
        Ok(found) => check::lines(&found, true),
        Err(e) => vec![format!(
            "warning: the databases were not checked: {}",
            e.one_line()
        )],
    }
}

/// The plugin packages resolved again when this Python or its core packages changed since
/// they were installed (PID 1's boot stage 6d); a failure is a warning, the gateways start.
fn resolve_plugins(ctx: &Context) -> Option<String> {
    let resolved = ctx
        .home()
        .and_then(|home| crate::commands::plugins::resolve_before_start(&home));
    match resolved {
        Ok(line) => line,
        Err(e) => Some(format!(
            "warning: the plugin packages were not checked against this Python: {}",
            e.one_line()
        )),
    }
}

/// Where to sign in to the dashboard, once the token is kept: on a terminal, the link itself
/// (the operator who started `hermes up` is the one to sign in); otherwise — a log, a journal —
/// only the command that prints it, so the token is not written into a log.
fn sign_in_notice(root: &std::path::Path, runtime_dir: &std::path::Path, token: &str) -> String {
    let kept = hermes_services::sign_in::Kept::new(token, Context::var);
    if let Err(e) = hermes_services::sign_in::keep(runtime_dir, &kept) {
        return format!(
            "warning: cannot keep the dashboard's sign-in token ({}); `hermes dashboard link` will not find it\n",
            hermes_errors::one_line(&e)
        );
    }
    if std::io::IsTerminal::is_terminal(&std::io::stderr())
        && let Ok(link) = super::dashboard::sign_in_link(root, &kept)
    {
        return format!("hermes up: sign in to the dashboard: {link}\n");
    }
    "hermes up: `hermes dashboard link` prints the dashboard's sign-in link\n".to_string()
}

/// What `hermes up` says when the default profile has no model: its gateway starts and
/// answers `/health`, but every chat gets 503 `model_not_configured`, which a new user would
/// only find in a client's error. Files that cannot be read are said before (their gateway
/// says so too).
const NO_MODEL_NOTICE: &str = "hermes up: the default profile has no model, so its gateway \
     answers chat with 503; set one with `hermes config set model.default MODEL` \
     (docs/gateway.md#configuration)\n";

/// What `hermes up` does with a profile's gateway, in words (the boot log keeps the
/// original's `profile=… prior_state=… action=… prior_exit=…` line,
/// `GatewayAction::describe`).
fn describe(action: &hermes_services::GatewayAction) -> String {
    let service = hermes_services::service_name(&action.profile);
    let mut recorded = match action.prior_state.as_deref() {
        Some(state) => format!("its recorded state is `{state}`"),
        None => "it has no recorded state".to_string(),
    };
    // The boot log's `prior_exit=unclean`: worth a word, the last run was killed.
    if action.prior_exit == hermes_home::lifecycle_ledger::PriorExit::Unclean {
        recorded.push_str("; its last run ended without a clean exit");
    }
    if action.started {
        format!("starting `{service}` ({recorded})")
    } else {
        format!(
            "`{service}` is registered, not started ({recorded}; start it with `hermes -p {} gateway start`)",
            action.profile
        )
    }
}

/// The desired-state hooks (`hermes_services::DesiredStateHooks`), the boot-only pages given
/// back once the loop has settled (as PID 1's hooks do), and the operator told on stderr what
/// a Ctrl-C or SIGTERM stops.
struct UpHooks<'a>(hermes_services::DesiredStateHooks<'a>);

impl Hooks for UpHooks<'_> {
    /// `hermes up` runs as long as the machine is up: the start-up's code (argument parsing,
    /// YAML, reconciling, spawning) is not needed again.
    fn settled(&mut self) {
        hermes_init::pages::release_boot_memory();
    }

    fn desired_state_changed(&mut self, service: &ServiceSpec, desired: Desired) {
        self.0.desired_state_changed(service, desired);
    }

    fn shutting_down(&mut self, stopping: &[String]) {
        let text = if stopping.is_empty() {
            "hermes up: stopping; no service is running\n".to_string()
        } else {
            let names: Vec<String> = stopping.iter().map(|name| format!("`{name}`")).collect();
            format!(
                "hermes up: stopping {} (in this order; a second Ctrl-C kills them)\n",
                names.join(", ")
            )
        };
        output::stderr(&text);
    }
}
