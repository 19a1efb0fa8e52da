//! `gateway status|list`: one row per profile's gateway — its supervisor row, its recorded
//! state, where it serves, its last error — as a table or as JSON.

use hermes_gateway_settings::api_server::ApiServer;
use hermes_home::{Home, gateway_state, profile};
use hermes_supervisor::status::status_cells;
use serde_json::{Value, json};

use super::settings;
use crate::commands::service;
use crate::context::Context;
use crate::failure::{CommandResult, ExitStatus};
use crate::output;

/// `gateway status` (`detailed`) and `gateway list`: one row per profile's gateway, with the
/// last error of a failing one on a line of its own below it
/// (`hermes_services::last_error`): its supervisor row failing, or — with no supervisor —
/// its record saying its last start failed.
pub(super) fn status(ctx: &Context, json_output: bool, detailed: bool) -> CommandResult {
    let root = ctx.root()?;
    let supervised = service::connect(&root)
        .ok()
        .and_then(|mut c| c.status(None).ok());
    let mut rows = Vec::new();
    let mut last_errors = Vec::new();
    // Uptime, memory and CPU as `service status` shows them, per row.
    let mut figures: Vec<Vec<String>> = Vec::new();
    let multiplex = hermes_services::multiplex::resolve_asking_agent(&root, &Context::var);
    let profiles = profile::list(&root)?;
    let names: Vec<&str> = profiles.iter().map(|e| e.profile.name()).collect();
    let mode = multiplex.to_json(&names);
    let summary = multiplex.summary(&names);
    for entry in profiles.clone() {
        let Ok(home) = Home::for_profile(root.clone(), entry.profile) else {
            continue;
        };
        let name = hermes_services::service_name(home.profile().name());
        let service = supervised
            .as_ref()
            .and_then(|all| all.iter().find(|s| s.name == name));
        let last_error = match service {
            Some(row) => hermes_services::last_error::of_failing(&root, row),
            None => hermes_services::last_error::recorded(&root, &name),
        };
        let recorded = gateway_state::recorded_state(&home.gateway_state_path());
        let resolved = settings::resolve(&home).map(|p| p.settings);
        let api_server = match resolved.as_ref().map(|s| &s.api_server) {
            Ok(ApiServer::On) => json!({"enabled": true}),
            Ok(ApiServer::Off { reason }) => json!({"enabled": false, "reason": reason}),
            Err(_) => Value::Null,
        };
        let view = hermes_services::engines::of_home(
            name.clone(),
            home.clone(),
            &multiplex,
            &Context::var,
        );
        rows.push(json!({
            "profile": home.profile().name(),
            "service": name,
            "engine": view.engine,
            "state": service.map(|s| s.state.to_string()),
            "pid": service.and_then(|s| s.pid),
            "uptime_secs": service.and_then(|s| s.uptime_secs),
            "resources": service.and_then(|s| s.resources.as_ref()),
            "memory_max": service.and_then(|s| s.memory_max),
            "reason": service.map(|s| s.reason.clone()),
            "recorded": recorded,
            // The address the supervisor holds for it, when it runs one: what it bound, not
            // what this process's environment would make it.
            "address": service
                .and_then(|s| s.listening.first())
                .map(|addr| format!("http://{addr}"))
                .unwrap_or_else(|| {
                    settings::address_of(resolved.as_ref().map_err(|e| e.message.as_str()))
                }),
            "key_source": settings::key_source(&home),
            "api_server": api_server,
            "last_error": last_error.as_ref().map(|e| e.message.clone()),
            "served_by": view.served_by,
            "multiplex": mode,
        }));
        last_errors.push(last_error);
        figures.push(service.map_or_else(
            || vec!["-".to_string(); 3],
            |row| status_cells(row)[3..6].to_vec(),
        ));
    }
    if json_output {
        if detailed {
            output::json(&rows)?;
        } else {
            output::json(&list_rows(&rows))?;
        }
        return Ok(ExitStatus::Success);
    }
    let cell = |v: &Value| {
        v.as_str().map_or_else(
            || {
                if v.is_null() {
                    "-".to_string()
                } else {
                    v.to_string()
                }
            },
            str::to_string,
        )
    };
    let mut table: Vec<Vec<String>> = Vec::new();
    if detailed {
        table.push(
            [
                "SERVICE", "ENGINE", "STATE", "PID", "UPTIME", "MEMORY", "CPU", "RECORDED",
                "ADDRESS", "REASON",
            ]
            .map(String::from)
            .to_vec(),
        );
    }
    for (r, figures) in rows.iter().zip(&figures) {
        table.push(if detailed {
            let state = if supervised.is_some() {
                cell(&r["state"])
            } else {
                "-".into()
            };
            let reason = match (cell(&r["reason"]), r["served_by"].as_str()) {
                (_, Some(by)) => format!("served by {by}"),
                (empty, None) if empty.is_empty() => "-".to_string(),
                (reason, None) => reason,
            };
            let mut cells = vec![
                cell(&r["service"]),
                cell(&r["engine"]),
                state,
                cell(&r["pid"]),
            ];
            cells.extend(figures.iter().cloned());
            cells.extend([cell(&r["recorded"]), cell(&r["address"]), reason]);
            cells
        } else {
            vec![cell(&r["service"]), cell(&r["address"])]
        });
    }
    let header = usize::from(detailed);
    let mut text = String::new();
    for (i, line) in aligned(&table).iter().enumerate() {
        text.push_str(line);
        text.push('\n');
        if let Some(Some(error)) = i.checked_sub(header).and_then(|row| last_errors.get(row)) {
            text.push_str(&format!("  last error: {}\n", error.message));
        }
    }
    if detailed && multiplex.on {
        text.push_str(&format!("{summary}\n"));
    }
    if detailed && supervised.is_none() {
        text.push_str("(no supervisor is running: start one with `hermes up`)\n");
    }
    output::stdout(&text)?;
    Ok(ExitStatus::Success)
}

/// `table`'s rows as lines whose columns line up: each column as wide as its widest cell, two
/// spaces between columns, the last one unpadded — so a long cell never runs into the next.
fn aligned(table: &[Vec<String>]) -> Vec<String> {
    let columns = table.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            table
                .iter()
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    table
        .iter()
        .map(|row| {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                line.push_str(cell);
                if c + 1 < row.len() {
                    let pad = widths[c] - cell.chars().count() + 2;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// `hermes gateway list --json`: what the profiles declare — each profile's gateway service
/// and address — without the live state that is `gateway status`'s.
fn list_rows(rows: &[Value]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            json!({
                "profile": r["profile"],
                "service": r["service"],
                "address": r["address"],
                "api_server": r["api_server"],
                "served_by": r["served_by"],
            })
        })
        .collect()
}
