//! End-to-end tests of the `hermes` binary, each in a fresh temporary home.
//!
//! Table of contents:
//! * `agent_installs` — the agent's own installer through the `uv` shim, as install generations;
//!   a killed install; `plugins generations|gc|repair`
//! * `binary` — how the binary is linked (packed relocations)
//! * `config_cmd` — `hermes config` and byte-preserving `config.yaml` writes
//! * `profiles` — create / clone / list / show / use / delete, names, aliases
//! * `dashboard` — `hermes dashboard`: the fail-closed bind, the Overview's API against `hermes up`
//! * `descriptors` — the gateway under a 256 open-file limit with 300 silent connections
//! * `declared` — invalid `services:` entries in status, start, dump and doctor; a start's real cause
//! * `conventions` — completions, man page, colour, where `-p` applies, aliases, the systemd unit
//! * `backup` — `hermes backup`: archives, verify, restores killed at every step, full disks
//! * `backup_interop` — backups both ways between ours and hermes-agent 0.19.0 / the 0.20.1 fixture
//! * `backup_load` — backups taken while 20 writers are busy verify and restore whole
//! * `backup_root` — root's backups on the service user's volume, raced and planted by that user
//! * `auth` — `auth list` and `dump` on stored credentials (masked keys)
//! * `backup_schedule` — the `backup` service of scheduled snapshots under `hermes up`
//! * `formats`  — malformed and hostile files: config.yaml, auth.json, gateway_state.json
//! * `diagnostics` — version, dump (snapshot), doctor
//! * `docs_examples` — the shell examples of README.md and docs/*.md run as written
//! * `dry_run` — `deps install --dry-run` says what would run and that nothing changed
//! * `engine` — the gateway engine: unusable settings, the original agent's gateway under `hermes up`
//! * `health` — `hermes dashboard`'s READY line, `hermes health` degraded on a volume over 90 %
//! * `handoff` — what our CLI does not implement goes to hermes-agent's CLI (a fake one, then the original)
//! * `gateway` — gateway run, exit codes, lock, lifecycle under `hermes up`, chat
//! * `input_checks` — empty chat messages, mistyped `--session`, `-p` naming no profile
//! * `gateway_clients` — the `openai` SDK and `hermes-agent-api-client` against `gateway run`
//! * `migrate` — `migrate check` on volumes written by hermes-agent 0.19.0 and the 0.20.1 fixture
//! * `original_keys` — the API server's key and port the originals' `config set` wrote, under our gateway
//! * `json_errors` — `--json` failures as one JSON object on stdout; `gateway list` vs `status`
//! * `plugins` — deps, plugins and memory setup refusals
//! * `services` — `hermes up` and `hermes service` with real processes
//! * `ui` and `ui_<page>` — the dashboard's pages in headless Chromium
//!
//! Shared helpers live in `util`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

mod agent_installs;
mod auth;
mod background;
mod backup;
mod backup_interop;
mod backup_load;
mod backup_root;
mod backup_schedule;
mod binary;
mod config_cmd;
mod conventions;
mod damaged_db;
mod dashboard;
mod declared;
mod descriptors;
mod diagnostics;
mod docs_examples;
mod dry_run;
mod engine;
mod first_hour;
mod formats;
mod gateway;
mod gateway_clients;
mod handoff;
mod health;
mod input_checks;
mod json_errors;
mod load;
mod memory_limits;
mod migrate;
mod multiplex;
mod original_keys;
mod plugins;
mod profiles;
mod restarts;
mod services;
mod sidecars;
mod switch;
mod torture;
mod ui;
mod ui_diagnostics;
mod ui_logs;
mod ui_overview;
mod ui_plugins;
mod ui_profiles;
mod ui_sessions;
mod util;
