//! `GET|PUT /api/config/raw`: the whole `config.yaml` as text, as the original serves it
//! (`{yaml, path}`; a write `{yaml_text, profile?}`), with what ours adds: the `version` of the
//! text (its SHA-256) so a write based on an older text is a conflict, never a silent
//! overwrite, and a parse error's `line` and `column`.
//!
//! The write is `config_file::replace_in_file`: checked as the gateway parses the file
//! (`Config::parse`), then, under the config lock, only when the file is still the text the
//! version names; atomic, mode and owner kept. A refusal leaves the file untouched.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hermes_home::Home;
use hermes_home::config_file::{self, Replaced};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::pages::request::edit_problem;
use crate::pages::request::{Step, refuse};

/// The version of a file's text: the SHA-256 of its bytes in hex (a missing file is `""`'s).
pub fn version(text: Option<&str>) -> String {
    hermes_backup::manifest::hex(&Sha256::digest(text.unwrap_or("").as_bytes()))
}

/// The file's text (`""` when it does not exist) with its version.
pub fn read(home: &Home) -> Step<(Option<String>, String)> {
    let text = config_file::read_text(&home.config_path()).map_err(|e| edit_problem(&e))?;
    let version = version(text.as_deref());
    Ok((text, version))
}

/// `GET`'s answer.
pub fn show(home: &Home) -> Step<Value> {
    let (text, version) = read(home)?;
    Ok(json!({
        "yaml": text.unwrap_or_default(),
        "path": home.config_path(),
        "version": version,
        "profile": home.profile().name(),
    }))
}

/// `PUT`'s body.
#[derive(Deserialize)]
pub struct Update {
    /// The new text.
    pub yaml_text: String,
    /// The original's: the profile, over `?profile=`.
    #[serde(default)]
    pub profile: Option<String>,
    /// Ours: the `version` the text was edited from. Without it (the original's clients) the
    /// text replaces whatever the file holds, as the original does.
    #[serde(default)]
    pub version: Option<String>,
}

/// Writes `update.yaml_text` over the profile's `config.yaml`: whether it wrote, and the new
/// version. Nothing is written when the text does not parse (400 with `line` and `column`),
/// is not a mapping (400, the original's "YAML must be a mapping"), or the file is no longer
/// the text `update.version` names (409 with the file's `version`).
pub fn replace(home: &Home, update: &Update) -> Step<(bool, String)> {
    let path = home.config_path();
    let new = update.yaml_text.as_str();
    if let Err(e) = hermes_settings::parse_config(&path, new) {
        return Err(parse_refusal(&e));
    }
    // The original's check: an empty document (comments only) is no mapping either.
    if yaml_serde::from_str::<yaml_serde::Value>(new).is_ok_and(|v| v.is_null()) {
        return Err(not_a_mapping());
    }
    let (current, current_version) = read(home)?;
    if update
        .version
        .as_ref()
        .is_some_and(|asked| *asked != current_version)
    {
        return Err(conflict(&current_version));
    }
    match config_file::replace_in_file(&path, current.as_deref(), new) {
        Ok(Replaced::ChangedMeanwhile) => {
            let (_, now) = read(home)?;
            Err(conflict(&now))
        }
        Ok(done) => Ok((done == Replaced::Written, version(Some(new)))),
        Err(e) => Err(parse_refusal(&e)),
    }
}

/// A text that is not a config: its line and column when the parser gives them.
fn parse_refusal(e: &hermes_home::Error) -> Box<Response> {
    match e {
        hermes_home::Error::ConfigParse {
            line,
            column,
            message,
            ..
        } => Box::new(
            (
                StatusCode::BAD_REQUEST,
                Json(json!({
                    "detail": format!("Invalid YAML at line {line}, column {column}: {message}"),
                    "hint": "fix the text and save again; the file was not changed",
                    "line": line,
                    "column": column,
                })),
            )
                .into_response(),
        ),
        hermes_home::Error::ConfigNotMapping { .. } => not_a_mapping(),
        other => edit_problem(other),
    }
}

fn not_a_mapping() -> Box<Response> {
    refuse(
        StatusCode::BAD_REQUEST,
        "YAML must be a mapping",
        Some(
            "config.yaml is a mapping of settings (`key: value` lines); the file was not changed"
                .into(),
        ),
    )
}

fn conflict(current: &str) -> Box<Response> {
    Box::new(
        (
            StatusCode::CONFLICT,
            Json(json!({
                "detail": "config.yaml changed since this text was loaded; nothing was written",
                "hint": "reload to see the file as it is now, then make the change again",
                "version": current,
            })),
        )
            .into_response(),
    )
}
