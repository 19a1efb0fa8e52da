//! The dashboard's integration tests, one test binary: each module was a `tests/*.rs` of its
//! own, and each of those relinked the crate's whole stack.
//!
//! Modules:
//! * `backups` — The Backups API over real HTTP: create, list, download, upload, plan, restore
//! * `backups_ui` — The Backups page in headless Chromium: create → list → plan → restore, and a
//!   schema refusal restored only when forced
//! * `channels` — The Channels API over real HTTP, with the real agents' catalogues
//! * `channels_ui` — The Channels page in headless Chromium, with the real agent's catalogue
//! * `config_page` — The Config API (`config.yaml` text and form) over real HTTP
//! * `config_ui` — The Config page in headless Chromium
//! * `cron` — The Cron API over real HTTP, changes made by the real agents
//! * `cron_ui` — The Cron page in headless Chromium
//! * `diagnostics` — The Diagnostics API over real HTTP
//! * `health` — `/api/health` and `/api/status`'s component rollup, as the original's since 0.20
//! * `http` — The dashboard over real HTTP on loopback
//! * `logs` — The Logs page's API over real HTTP on loopback, against log files the test
//!   writes where the supervisor would (`<home>/logs/<service>/current`)
//! * `metrics` — `GET /metrics` over real HTTP: closed unless configured, its own token or
//!   an address allowlist, the exposition format, services as series, gateways passed through
//! * `overview_resources` — what services use on the Overview (headless Chromium), and a real
//!   supervisor's figures against `/proc`
//! * `original_api` — The original dashboard's API where its clients call it, over real HTTP
//! * `plugins` — The Plugins page's API over real HTTP on loopback
//! * `profiles` — The Profiles page's API over real HTTP on loopback, without a supervisor
//! * `proxies` — The dashboard behind a reverse proxy, over real HTTP on loopback
//! * `sessions` — The Sessions API over real HTTP
//! * `system` — The Overview's System view: versions, config schema, backups, services' use
//!
//! Shared helpers live in `common`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

mod backups;
mod backups_ui;
mod channels;
mod channels_ui;
mod common;
mod config_page;
mod config_ui;
mod cron;
mod cron_ui;
mod diagnostics;
mod health;
mod http;
mod logs;
mod metrics;
mod original_api;
mod overview_resources;
mod plugins;
mod profiles;
mod proxies;
mod sessions;
mod system;
