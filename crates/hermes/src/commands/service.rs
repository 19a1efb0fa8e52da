//! `hermes service ...`: talk to the running supervisor over its control socket, and read
//! service logs. Finding the supervisor and reading logs are `hermes-services`'s; this module
//! prints.

use std::path::Path;
use std::time::Duration;

use hermes_services::declared::{Invalid, declared_in};
use hermes_services::readiness::{self, Outcome, Request};
use hermes_supervisor::status::{render_table_rows, status_cells};
use hermes_supervisor::{Client, ErrorCode, ServiceStatus, StateName};
use serde_json::json;

use crate::cli::{ServiceCommand, WaitArgs};
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus, Failure};
use crate::output;
use hermes_services::status_view::StatusView;

/// How long a CLI command waits for the supervisor to answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to the supervisor of `root` (`hermes_services::connect`); "not running" is one
/// line with what to run.
pub fn connect(root: &Path) -> Result<Client, Failure> {
    Ok(hermes_services::connect(
        root,
        Context::var,
        CLIENT_TIMEOUT,
    )?)
}

/// Dispatches `hermes service <sub>`.
pub fn run(ctx: &Context, command: ServiceCommand) -> CommandResult {
    let root = ctx.root()?;
    match command {
        ServiceCommand::List(flag) => {
            let rows = connect(&root)?.status(None)?;
            // The supervisor's services, then the declared entries it never got (invalid).
            let names: Vec<(String, String)> = rows
                .iter()
                .map(|r| (r.name.clone(), r.state.to_string()))
                .chain(
                    invalid_entries(&root)
                        .into_iter()
                        .map(|entry| (entry.name, "invalid".to_string())),
                )
                .collect();
            if flag.json {
                let list: Vec<_> = names
                    .iter()
                    .map(|(name, state)| json!({ "name": name, "state": state }))
                    .collect();
                output::json(&list)?;
            } else {
                let width = names.iter().map(|(n, _)| n.len()).max().unwrap_or(4).max(4);
                let text: String = names
                    .iter()
                    .map(|(name, state)| format!("{name:<width$}  {state}\n"))
                    .collect();
                output::stdout(&text)?;
            }
        }
        ServiceCommand::Status { name, json } => {
            let mut client = connect(&root)?;
            let invalid: Vec<Invalid> = invalid_entries(&root)
                .into_iter()
                .filter(|entry| name.as_ref().is_none_or(|name| entry.name == *name))
                .collect();
            // A name only the configuration knows (as an invalid entry) is shown as such.
            let rows = match client.status(name.as_deref()) {
                Err(hermes_supervisor::Error::Refused {
                    code: ErrorCode::UnknownService,
                    ..
                }) if !invalid.is_empty() => Vec::new(),
                rows => rows?,
            };
            if let Some(name) = &name
                && rows.is_empty()
                && invalid.is_empty()
            {
                return Err(Failure::new(
                    format!("the supervisor has no service `{name}`"),
                    Some("list services with `hermes service list`".into()),
                ));
            }
            // The view the dashboard's Overview shows too (`hermes_services::status_view`).
            let view = StatusView::of_rows(&root, rows, &Context::var);
            // The `backup` service's last run and next run, from its `.schedule.json`.
            let backups: Vec<Option<hermes_backup::schedule::State>> = view
                .services
                .iter()
                .map(|s| backup_state(&root, &s.status))
                .collect();
            if json {
                let mut values: Vec<serde_json::Value> = view
                    .services
                    .iter()
                    .zip(&backups)
                    .map(|(service, backup)| {
                        let mut value = service.to_json();
                        if let Some(state) = backup {
                            value["backup"] = json!(state);
                        }
                        value
                    })
                    .collect();
                values.extend(invalid.iter().map(invalid_json));
                output::json(&values)?;
            } else {
                let table = render_table_rows(
                    view.services
                        .iter()
                        .map(|s| status_cells(&s.status))
                        .chain(invalid.iter().map(invalid_cells)),
                );
                let notes: Vec<Vec<String>> = view
                    .services
                    .iter()
                    .zip(&backups)
                    .map(|(service, backup)| {
                        service
                            .last_error
                            .iter()
                            .map(|e| format!("last error: {e}"))
                            .chain(
                                service
                                    .damaged_databases
                                    .iter()
                                    .map(|d| format!("database: {}", d.describe())),
                            )
                            .chain(backup.iter().flat_map(backup_lines))
                            .collect()
                    })
                    .collect();
                output::stdout(&with_notes(&table, &notes))?;
                output::stdout(&super::gateway::engines::engines_line(&view))?;
                if let Some(report) = plugins_report() {
                    output::stdout(&format!("plugins: {}\n", report.summary()))?;
                }
            }
        }
        ServiceCommand::Start { name, wait } => {
            let outcome = readiness::start_and_wait(
                &mut connect_to_start(&root, &name)?,
                &root,
                &name,
                Request::Start,
                wait_for(&wait),
            )?;
            output::stdout(&report(&name, Request::Start, outcome, None)?)?;
        }
        ServiceCommand::Stop { name } => {
            connect(&root)?.stop(&name)?;
            output::stdout(&format!("Stopping `{name}`\n"))?;
        }
        ServiceCommand::Restart { name, wait } => {
            let mut client = connect_to_start(&root, &name)?;
            let serving = serving_pid(&mut client, &name);
            let outcome = readiness::start_and_wait(
                &mut client,
                &root,
                &name,
                Request::Restart,
                wait_for(&wait),
            )?;
            let handed_over = match (&outcome, serving) {
                (readiness::Outcome::Ready { row, .. }, Some(old)) => {
                    hermes_services::handover::handed_over_from(row, old).then_some(old)
                }
                _ => None,
            };
            output::stdout(&report(&name, Request::Restart, outcome, None)?)?;
            if let Some(old) = handed_over {
                report_handover(&mut client, &root, &name, old)?;
            }
        }
        ServiceCommand::Logs {
            name,
            lines,
            follow,
        } => logs(&root, &name, lines, follow)?,
    }
    Ok(ExitStatus::Success)
}

/// The last check of the volume's plugin packages against this image, when it is worth a
/// line (a re-resolution, a generation kept offline, packages unavailable).
fn plugins_report() -> Option<hermes_deps::generations::ResolutionReport> {
    let target = hermes_deps::Environment::from_process().durable_target()?;
    hermes_deps::generations::ResolutionReport::read(&target).filter(|r| r.notable())
}

/// The entries of `services:` in the root's `config.yaml` left out as invalid
/// (`hermes_services::declared`, the supervisors' own parser); none when it cannot be read.
fn invalid_entries(root: &Path) -> Vec<Invalid> {
    declared_in(root).map(|d| d.invalid).unwrap_or_default()
}

/// An invalid entry as a status row: state `invalid`, what is wrong as its reason.
fn invalid_cells(entry: &Invalid) -> [String; hermes_supervisor::status::COLUMNS] {
    let mut cells = std::array::from_fn(|_| "-".to_string());
    cells[0] = entry.name.clone();
    cells[1] = "invalid".into();
    cells[hermes_supervisor::status::COLUMNS - 1] = entry.reason();
    cells
}

/// An invalid entry as a `status --json` row: the keys of a supervised one (empty), the
/// reason, the fix, and each problem with its key.
fn invalid_json(entry: &Invalid) -> serde_json::Value {
    let problems: Vec<serde_json::Value> = entry
        .flaws
        .iter()
        .map(|f| json!({ "key": f.key, "problem": f.problem, "fix": f.fix }))
        .collect();
    json!({
        "name": entry.name,
        "state": "invalid",
        "pid": null,
        "uptime_secs": null,
        "since_secs": null,
        "restarts": 0,
        "last_exit": null,
        "reason": entry.reason(),
        "profile": null,
        "last_error": null,
        "fix": entry.fix(),
        "problems": problems,
    })
}

/// Connects to start or restart `name`. An entry of `services:` left out as invalid is the
/// error (what is wrong and how to fix it) unless the supervisor runs a service of that name
/// (a gateway, or one started from an earlier `config.yaml`): no supervisor would run it.
fn connect_to_start(root: &Path, name: &str) -> Result<Client, Failure> {
    let Some(entry) = invalid_entries(root)
        .into_iter()
        .find(|entry| entry.name == name)
    else {
        return connect(root);
    };
    if let Ok(mut client) = connect(root)
        && client.status(Some(name)).is_ok_and(|rows| !rows.is_empty())
    {
        return Ok(client);
    }
    let config = hermes_home::layout::config_path(root);
    Err(Failure::new(
        format!(
            "service `{name}` in `{}` is invalid, so no supervisor runs it: {}",
            config.display(),
            entry.reason()
        ),
        Some(format!(
            "{}; then restart `hermes up` (in the container: the container) to run it",
            entry.fix()
        )),
    ))
}

/// Prints the last `lines` lines of `service`'s log and, with `follow`, what is appended to
/// it until interrupted (`hermes_services::open_service_log`; lines that are not UTF-8 are
/// shown lossily).
pub fn logs(root: &Path, service: &str, lines: usize, follow: bool) -> Result<(), Failure> {
    let (tail, follower) = hermes_services::open_service_log(root, service, lines)?;
    let mut shown = tail.join("\n");
    if !shown.is_empty() {
        shown.push('\n');
    }
    output::stdout(&shown)?;
    if follow {
        for line in follower {
            output::stdout(&format!("{}\n", line?))?;
        }
    }
    Ok(())
}

/// How long a start waits for readiness (`None`: `--no-wait`).
pub fn wait_for(args: &WaitArgs) -> Option<Duration> {
    (!args.no_wait).then(|| Duration::from_secs(args.timeout))
}

/// The line that reports a start or restart that came to `outcome`
/// (`hermes_services::readiness`), or the failure to return: the supervisor's reason, the
/// service's own last error and hint, and where to look next. `detail` is said beside the pid
/// of a ready service (a gateway's address).
pub fn report(
    name: &str,
    request: Request,
    outcome: Outcome,
    detail: Option<&str>,
) -> Result<String, Failure> {
    let (done, verb) = match request {
        Request::Start => ("Started", "start"),
        Request::Restart => ("Restarted", "restart"),
    };
    let about = |row: &ServiceStatus| {
        let pid = row.pid.map(|p| format!("pid {p}"));
        let parts: Vec<String> = pid.into_iter().chain(detail.map(str::to_owned)).collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    };
    match outcome {
        Outcome::Ready { row, already: true } => {
            Ok(format!("`{name}` is already running{}\n", about(&row)))
        }
        Outcome::Ready { row, .. } => Ok(format!("{done} `{name}`{}\n", about(&row))),
        Outcome::Requested => Ok(format!(
            "Asked the supervisor to {verb} `{name}` (not waiting: see `hermes service status \
             {name}`)\n"
        )),
        Outcome::Failed { row, cause } if handover_failed(&row).is_some() => {
            let (why, old) = handover_failed(&row).unwrap_or_default();
            let mut message = format!(
                "`{name}` did not {verb}: the new instance {why}; pid {old} goes on serving"
            );
            if let Some(cause) = cause {
                message.push_str(&format!(": {}", cause.message));
            }
            Err(Failure::new(
                message,
                Some(format!("its log: `hermes service logs {name}`")),
            ))
        }
        Outcome::Failed { row, cause } => {
            let mut message = format!("`{name}` did not {verb}: {}", what_happened(&row));
            let mut hints = Vec::new();
            if let Some(cause) = cause {
                message.push_str(&format!(": {}", cause.message));
                hints.extend(cause.hint);
            }
            hints.push(match row.state {
                StateName::Failed => format!(
                    "it stays stopped until started again; its log: `hermes service logs {name}`"
                ),
                StateName::Backoff | StateName::Starting | StateName::Up => format!(
                    "the supervisor keeps retrying it (`{}` stops it); its log: `hermes service \
                     logs {name}`",
                    stop_command(name)
                ),
                _ => format!("its log: `hermes service logs {name}`"),
            });
            Err(Failure::new(message, Some(hints.join("; "))))
        }
        Outcome::TimedOut { row } => {
            let state = match (row.state, row.reason.as_str()) {
                (StateName::Up, _) if name.starts_with(hermes_services::GATEWAY_PREFIX) => {
                    "up, but the gateway has not recorded that it serves".to_string()
                }
                (state, "") => state.to_string(),
                (state, reason) => format!("{state}: {reason}"),
            };
            Err(Failure::new(
                format!("`{name}` is not ready yet ({state})"),
                Some(format!(
                    "it may still be starting: see `hermes service status {name}` and `hermes \
                     service logs {name}`, or wait longer with `--timeout SECS`"
                )),
            ))
        }
    }
}

/// The command that stops `name`: a profile's gateway through `gateway stop` (which tells the
/// gateway the stop is planned), any other service through `service stop`.
fn stop_command(name: &str) -> String {
    match name.strip_prefix(hermes_services::GATEWAY_PREFIX) {
        Some(profile) => format!("hermes -p {profile} gateway stop"),
        None => format!("hermes service stop {name}"),
    }
}

/// What ended the start, in the supervisor's words: its reason up to the retry schedule
/// (`exited with code 1`, `configuration error (exit 78)`, `cannot start: …`), or how the
/// watched run ended when another has begun since.
/// The pid of the service's process when it is `up` (what a hand-over would replace).
pub(crate) fn serving_pid(client: &mut hermes_supervisor::Client, name: &str) -> Option<i32> {
    let row = client.status(Some(name)).ok()?.into_iter().next()?;
    (row.state == hermes_supervisor::StateName::Up).then_some(row.pid)?
}

/// After a hand-over: waits for the replaced gateway to finish its work, then says what came of
/// it (`  handed over from pid 5 to pid 9, the port stayed open; pid 5 finished 3 requests in
/// 1.2 s`). A drain that takes more than a moment is announced first.
pub(crate) fn report_handover(
    client: &mut hermes_supervisor::Client,
    root: &Path,
    name: &str,
    old: i32,
) -> Result<(), Failure> {
    // A gateway records how many requests its drain finished and cut.
    let gateway = hermes_services::gateway::home_of_service(root, name);
    let drains = |pid| {
        let home = gateway.as_ref()?;
        hermes_services::handover::gateway_drain(home.dir(), pid)
    };
    let follow = |client: &mut hermes_supervisor::Client, wait| {
        hermes_services::handover::follow(client, name, old, wait, &drains)
    };
    let mut report = follow(client, Duration::from_secs(1))?;
    if report.as_ref().is_some_and(|r| r.drained_secs.is_none()) {
        output::stderr(&format!(
            "hermes: pid {old} is finishing the requests it has in flight (up to its drain timeout)\n"
        ));
        report = follow(client, DRAIN_FOLLOW_LIMIT)?;
    }
    if let Some(report) = report {
        output::stdout(&format!("  {}\n", report.describe()))?;
    }
    Ok(())
}

/// The longest `gateway restart` follows a replaced gateway's drain (the supervisor SIGKILLs it
/// at its stop grace anyway, which ends the wait sooner).
const DRAIN_FOLLOW_LIMIT: Duration = Duration::from_secs(600);

/// A hand-over whose new instance failed, leaving the old one serving: why, and the old pid.
fn handover_failed(row: &ServiceStatus) -> Option<(String, i32)> {
    let h = row.handover.as_ref()?;
    (row.pid == Some(h.from_pid)).then(|| h.failed.clone().map(|why| (why, h.from_pid)))?
}

fn what_happened(row: &ServiceStatus) -> String {
    let head = || {
        row.reason
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    match (row.state, row.last_exit) {
        (StateName::Starting | StateName::Up, Some(exit)) => format!("exited with {exit}"),
        (StateName::Stopping, _) => "it was stopped meanwhile".to_string(),
        _ if row.reason.is_empty() => row.state.to_string(),
        _ => head(),
    }
}

/// The status table with its notes indented under each row (`  last error: …` under a failing
/// service, the last and next run under `backup`): `table` is a header line then one line per
/// row, in the order of `notes`.
fn with_notes(table: &str, notes: &[Vec<String>]) -> String {
    let mut text = String::new();
    let none = Vec::new();
    let mut notes = std::iter::once(&none).chain(notes);
    for line in table.lines() {
        text.push_str(line);
        text.push('\n');
        for note in notes.next().into_iter().flatten() {
            text.push_str(&format!("  {note}\n"));
        }
    }
    text
}

/// The state of scheduled backups (`hermes_backup::schedule`) for the `backup` service's row;
/// `None` for every other row, and when there is none to read (a declared service of that
/// name, settings that do not read: its last error says why).
fn backup_state(root: &Path, row: &ServiceStatus) -> Option<hermes_backup::schedule::State> {
    if row.name != hermes_services::backup_schedule::BACKUP_SERVICE {
        return None;
    }
    let settings = hermes_backup::schedule::BackupSettings::load(root, &Context::var).ok()?;
    hermes_backup::schedule::read_state(&settings.dir)
        .ok()
        .flatten()
}

/// The last and the next scheduled backup, as lines under the `backup` row.
fn backup_lines(state: &hermes_backup::schedule::State) -> Vec<String> {
    let last = match &state.last_run {
        None => "last backup: none yet".to_owned(),
        Some(run) if run.ok => format!(
            "last backup: ok at {}: {}",
            run.started,
            super::backup::scheduled::describe(run)
        ),
        Some(run) => {
            let good = state
                .last_success
                .as_ref()
                .map_or_else(String::new, |at| format!(" (the last good one: {at})"));
            format!(
                "last backup: failed at {}: {}{good}",
                run.started, run.result
            )
        }
    };
    let next = match &state.next_run {
        Some(at) => format!("next backup: {at} (schedule `{}`, UTC)", state.schedule),
        None => format!("next backup: none (schedule `{}`, UTC)", state.schedule),
    };
    vec![last, next]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-over whose new instance failed says the old one goes on, not that it retries.
    #[test]
    fn a_failed_hand_over_says_the_old_process_goes_on_serving() {
        let row = ServiceStatus {
            name: "gateway-work".into(),
            state: StateName::Up,
            pid: Some(41),
            uptime_secs: Some(9.0),
            since_secs: 9.0,
            restarts: 1,
            last_exit: Some(hermes_supervisor::ExitStatus::Code(78)),
            last_exit_planned: false,
            reason: "ready (notified)".into(),
            profile: Some("work".into()),
            draining: Vec::new(),
            handover: Some(hermes_supervisor::HandOverStatus {
                from_pid: 41,
                to_pid: Some(42),
                ready_secs: None,
                drained_secs: None,
                failed: Some("exited with code 78 before it was ready".into()),
            }),
            listening: vec!["127.0.0.1:9574".into()],
            resources: None,
            memory_max: None,
            pids_max: None,
            pids_enforced_by: None,
            last_failure: None,
        };
        let failure = report(
            "gateway-work",
            Request::Restart,
            Outcome::Failed { row, cause: None },
            None,
        )
        .unwrap_err();
        assert_eq!(
            failure.message,
            "`gateway-work` did not restart: the new instance exited with code 78 before it was \
             ready; pid 41 goes on serving"
        );
        assert!(
            failure
                .hint
                .unwrap()
                .contains("hermes service logs gateway-work")
        );
    }

    /// Notes go under their own row, each indented, in order; a row without notes has none.
    #[test]
    fn notes_go_under_their_rows() {
        let table = "NAME  STATE\na     up\nb     failed\nc     up\n";
        let notes = vec![
            Vec::new(),
            vec!["last error: it broke".to_owned()],
            vec![
                "last backup: none yet".to_owned(),
                "next backup: soon".to_owned(),
            ],
        ];
        assert_eq!(
            with_notes(table, &notes),
            "NAME  STATE\na     up\nb     failed\n  last error: it broke\nc     up\n  last backup: \
             none yet\n  next backup: soon\n"
        );
    }

    #[test]
    fn the_backup_row_says_the_last_and_the_next_run() {
        use hermes_backup::schedule::{LastRun, State};
        let mut state = State {
            schedule: "daily".into(),
            next_run: Some("2026-12-03T00:00:00Z".into()),
            last_run: None,
            last_success: None,
        };
        assert_eq!(
            backup_lines(&state),
            [
                "last backup: none yet",
                "next backup: 2026-12-03T00:00:00Z (schedule `daily`, UTC)"
            ]
        );
        state.last_run = Some(LastRun {
            started: "2026-12-02T00:00:00Z".into(),
            ok: false,
            result: "another backup or restore is running on this volume".into(),
            file: None,
            size: None,
            duration_ms: 12,
            pruned: Vec::new(),
        });
        state.last_success = Some("2026-12-01T00:00:00Z".into());
        state.next_run = None;
        assert_eq!(
            backup_lines(&state),
            [
                "last backup: failed at 2026-12-02T00:00:00Z: another backup or restore is running \
                 on this volume (the last good one: 2026-12-01T00:00:00Z)",
                "next backup: none (schedule `daily`, UTC)"
            ]
        );
    }
}
