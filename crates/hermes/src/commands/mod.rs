//! One module per command group; each exposes `run_*` functions returning a `CommandResult`.

pub mod auth;
pub mod background;
pub mod backup;
pub mod chat;
pub mod completions;
pub mod config;
pub mod dashboard;
pub mod gateway;
pub mod handoff;
pub mod health;
pub mod info;
pub mod init;
pub mod migrate;
pub mod plugins;
pub mod profile;
pub mod prompt;
pub mod service;
pub mod up;
pub mod uv_shim;
