//! The Backups page: create an archive of the volume and download it, list the archives in the
//! backups directory (the scheduled ones marked, with the schedule's last result and next run),
//! upload one, and restore one — its dry run shown first, the restore only for the plan shown.
//!
//! A client like the CLI: archives are made, verified and planned by the backup library
//! (`hermes-backup`) and restored among the running services by its `supervised` module (the
//! schema check, the affected gateways stopped through the supervisor and started again): the
//! functions `hermes backup create|verify|restore` call, in the scheduled backups' directory
//! (`backup.dir`, default `$HERMES_HOME/backups`; [`store`]). Every piece of heavy work (the archive, a
//! verification, a plan, a restore) runs on the blocking pool, never on the runtime's threads.
//! One create or restore runs at a time per dashboard (409 meanwhile; the library's volume lock
//! also keeps out the CLI's); an upload is streamed to a 0600 temporary file in the directory,
//! at most [`UPLOAD_LIMIT_VAR`] MiB, verified, and only then given its name.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use futures_util::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::backup_store;
use crate::openapi::responses;
use crate::pages::request;
use crate::pages::request::{Step, refuse};
use crate::pages::{Page, shell};
use crate::server::{App, Base, blocking, problem};

pub mod restore;

/// The environment variable that caps an upload, in MiB (default [`UPLOAD_LIMIT_MB`]).
pub const UPLOAD_LIMIT_VAR: &str = "HERMES_DASHBOARD_UPLOAD_MAX_MB";
/// The default cap on an upload, in MiB.
pub const UPLOAD_LIMIT_MB: u64 = 2048;
/// The largest JSON body a restore request may have.
const BODY_LIMIT: usize = 4096;
/// How long an upload may send nothing before it is given up (the server has no limit on a
/// request in flight otherwise).
const UPLOAD_STALL: std::time::Duration = std::time::Duration::from_secs(60);
/// The size of the chunks a download is read in.
const CHUNK: usize = 64 * 1024;

const MAIN: &str = r#"<h2>Backups</h2>
<p class="muted">Archives of the whole volume (settings, secrets, databases, memories; the original's format), kept in <code id="dir">backups/</code>. They hold the volume's secrets: keep downloads safe.</p>
<section id="create-section">
<p><button type="button" id="create">Create backup</button> <span id="create-status" role="status"></span></p>
<p id="create-error" class="error" hidden></p>
</section>
<p id="schedule" class="muted" hidden></p>
<table id="archives"><thead><tr><th>Archive</th><th>Size</th><th>Written</th><th>Kind</th><th></th></tr></thead><tbody id="rows"><tr><td colspan="5" class="muted">Loading…</td></tr></tbody></table>
<section id="original" hidden>
<h3>The original's archives</h3>
<p class="muted">Written by the original's <code>hermes backup</code> in its home. Copy one into the backups directory to check it or restore it here.</p>
<table><thead><tr><th>Archive</th><th>Where</th><th>Size</th><th>Written</th><th></th></tr></thead><tbody id="original-rows"></tbody></table>
</section>
<section id="upload-section">
<h3>Upload an archive</h3>
<form id="upload-form"><input type="file" id="upload-file" accept=".zip,application/zip"> <button type="submit" id="upload">Upload</button> <span id="upload-status" role="status"></span></form>
<p id="upload-error" class="error" hidden></p>
</section>
<section id="plan" hidden>
<h3 id="plan-title"></h3>
<p id="plan-summary"></p>
<p id="plan-schema"></p>
<p id="force-line" hidden><label><input type="checkbox" id="force"> Restore it anyway (as <code>hermes backup restore --force</code>)</label></p>
<p id="plan-restarts"></p>
<div id="plan-lists"></div>
<p><button type="button" id="confirm" class="danger">Restore</button> <button type="button" id="cancel">Cancel</button> <span id="restore-status" role="status"></span></p>
<p id="plan-error" class="error" hidden></p>
</section>"#;

/// Held while a create or a restore runs (one at a time per dashboard).
#[derive(Clone, Default)]
struct Busy {
    held: Arc<AtomicBool>,
    /// What a running create has done so far, for the list's `creating`.
    progress: Arc<Mutex<Option<Value>>>,
}

/// Frees [`Busy`] when the work ends: dropped by the blocking task, not by a client that goes
/// away.
struct BusyGuard(Busy);

impl Busy {
    fn take(&self) -> Option<BusyGuard> {
        self.held
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| BusyGuard(self.clone()))
    }

    fn set_progress(&self, value: Option<Value>) {
        if let Ok(mut p) = self.progress.lock() {
            *p = value;
        }
    }

    fn progress(&self) -> Option<Value> {
        self.progress.lock().ok().and_then(|p| p.clone())
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.set_progress(None);
        self.0.held.store(false, Ordering::Release);
    }
}

/// `/backups` and its API.
pub fn routes() -> Router<App> {
    Router::new()
        .route("/backups", get(page))
        .route("/api/backups", get(list).post(create))
        .route("/api/backups/upload", post(upload))
        .route("/api/backups/adopt", post(adopt))
        .route("/api/backups/{name}", get(download))
        .route("/api/backups/{name}/plan", post(plan))
        .route("/api/backups/{name}/restore", post(restore))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        // One lock per dashboard (this router is built once per dashboard).
        .layer(Extension(Busy::default()))
}

async fn page(State(app): State<App>, Extension(base): Extension<Base>) -> Response {
    shell(Page::Backups, &base.0, app.token(), MAIN)
}

/// The backups directory of the app's volume: where the scheduled backups write
/// (`backup.dir` of the root `config.yaml`, `HERMES_BACKUP_DIR` over it; default
/// `$HERMES_HOME/backups`), read as they read it. Invalid backup settings are a 409 with the
/// scheduler's own error line: the page does not guess another directory. Reads
/// `config.yaml`: call it on the blocking pool.
fn backups_dir(app: &App) -> Step<PathBuf> {
    settings_dir(app)
        .map_err(|e| refuse(StatusCode::CONFLICT, &hermes_errors::one_line(&e), e.hint()))
}

/// [`backups_dir`] with the settings' own error (the Overview's System view words it).
pub(crate) fn settings_dir(app: &App) -> Result<PathBuf, hermes_backup::schedule::Error> {
    let vars = app.vars.clone();
    hermes_backup::schedule::BackupSettings::load(&app.root, &|k: &str| vars(k))
        .map(|settings| settings.dir)
}

fn busy() -> Response {
    problem(
        StatusCode::CONFLICT,
        "a backup or restore is already running from this dashboard",
        Some("wait for it to finish, then try again".into()),
    )
}

/// An error of the backup library as an answer: whose fault it is decides the status.
fn backup_problem(e: &hermes_backup::Error, damaged: StatusCode) -> Box<Response> {
    use hermes_backup::Error as E;
    let status = match e {
        E::Zip { .. } | E::Verification { .. } | E::NothingToRestore { .. } => damaged,
        E::UnsafeTarget { .. }
        | E::Busy { .. }
        | E::OutputExists { .. }
        | E::NewerThanAgent { .. }
        | E::GatewayOutsideSupervisor { .. } => StatusCode::CONFLICT,
        E::Services(_) | E::Supervisor(_) => StatusCode::SERVICE_UNAVAILABLE,
        e if e.is_disk_full() => StatusCode::INSUFFICIENT_STORAGE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    refuse(status, &hermes_errors::one_line(e), e.hint())
}

fn io_problem(what: &str, e: &std::io::Error) -> Box<Response> {
    let status = if matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) {
        StatusCode::INSUFFICIENT_STORAGE
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    refuse(
        status,
        &format!("{what}: {e}"),
        Some("check that the dashboard's user may write there and that the disk has room".into()),
    )
}

/// Runs `work` on the blocking pool and answers its JSON or its refusal.
async fn answer(work: impl FnOnce() -> Step<Value> + Send + 'static) -> Response {
    match blocking(work).await {
        Ok(Ok(value)) => Json(value).into_response(),
        Ok(Err(refusal)) => *refusal,
        Err(failed) => failed,
    }
}

/// The archive name of a path, or a 400 saying why it is none.
fn name_of(path: Result<Path<String>, PathRejection>) -> Step<String> {
    let Path(name) = path.map_err(|e| refuse(StatusCode::BAD_REQUEST, &e.body_text(), None))?;
    backup_store::archive_name(&name).map_err(|why| {
        refuse(
            StatusCode::BAD_REQUEST,
            &why,
            Some("name an archive the list shows (GET /api/backups)".into()),
        )
    })?;
    Ok(name)
}

fn not_found(name: &str) -> Box<Response> {
    refuse(
        StatusCode::NOT_FOUND,
        &format!("no archive `{name}` in the backups directory"),
        Some("the Backups page lists the archives there".into()),
    )
}

/// The archive `name` of the directory, checked to be a regular file (no symlink).
fn archive_path(dir: &std::path::Path, name: &str) -> Step<(std::fs::File, u64)> {
    match backup_store::open_archive(dir, name) {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(not_found(name)),
        Err(why) => Err(refuse(
            StatusCode::BAD_REQUEST,
            &why,
            Some("only regular files in the backups directory are archives".into()),
        )),
    }
}

async fn list(State(app): State<App>, Extension(lock): Extension<Busy>) -> Response {
    answer(move || {
        let dir = backups_dir(&app)?;
        let archives = backup_store::list(&dir)
            .map_err(|e| io_problem(&format!("cannot list `{}`", dir.display()), &e))?;
        Ok(json!({
            "dir": dir,
            "archives": archives,
            "original": backup_store::list_original(&original_dirs(&app, &dir)),
            "schedule": backup_store::schedule(&dir),
            "creating": lock.progress(),
        }))
    })
    .await
}

/// Where the original's `hermes backup` leaves archives on this volume's machine.
fn original_dirs(app: &App, backups: &std::path::Path) -> Vec<PathBuf> {
    let home = (app.vars)("HOME")
        .filter(|h| h.starts_with('/'))
        .map(PathBuf::from);
    backup_store::original_dirs(&app.root, home.as_deref(), backups)
}

/// What `POST /api/backups/adopt` takes: an archive of the list's `original`.
#[derive(Deserialize)]
struct Adopt {
    dir: PathBuf,
    name: String,
}

/// `POST /api/backups/adopt`: copies one of the original's archives (the list's `original`)
/// into the backups directory, where every action of the page applies to it.
async fn adopt(State(app): State<App>, body: Result<Json<Adopt>, JsonRejection>) -> Response {
    let Ok(Json(asked)) = body else {
        return *refuse(
            StatusCode::BAD_REQUEST,
            "the body must be {\"dir\": …, \"name\": …}",
            Some("name an archive of the list's `original`".into()),
        );
    };
    answer(move || {
        let dir = backups_dir(&app)?;
        if !original_dirs(&app, &dir).contains(&asked.dir) {
            return Err(refuse(
                StatusCode::BAD_REQUEST,
                &format!(
                    "`{}` is not where the original leaves archives",
                    asked.dir.display()
                ),
                Some("name an archive of the list's `original`".into()),
            ));
        }
        let size = backup_store::copy_in(&asked.dir, &asked.name, &dir)
            .map_err(|why| refuse(StatusCode::CONFLICT, &why, None))?;
        Ok(json!({ "name": asked.name, "size": size }))
    })
    .await
}

/// This build and the installed agent, as the archive's manifest records them (as the CLI's
/// `hermes backup create` does).
fn identity(app: &App) -> hermes_backup::Identity {
    let (build, _) = hermes_diag::report::identity_and_install();
    let vars = app.vars.clone();
    hermes_backup::supervised::identity(format!("hermes {}", build.label()), &|k: &str| vars(k))
}

/// `POST /api/backups`: a new archive of the whole volume in the directory.
async fn create(State(app): State<App>, Extension(lock): Extension<Busy>) -> Response {
    let Some(guard) = lock.take() else {
        return busy();
    };
    answer(move || {
        let dir = backups_dir(&app)?;
        backup_store::ensure_dir(&dir)
            .map_err(|e| io_problem(&format!("cannot create `{}`", dir.display()), &e))?;
        let name = backup_store::new_name(&dir);
        let output = dir.join(&name);
        let identity = identity(&app);
        guard
            .0
            .set_progress(Some(json!({ "name": name, "files_done": 0 })));
        // Compressed as the scheduled archives are (`backup.compress`).
        let vars = app.vars.clone();
        let compression =
            hermes_backup::schedule::BackupSettings::load(&app.root, &|k: &str| vars(k))
                .map(|s| s.compression)
                .unwrap_or_default();
        let summary = hermes_backup::create_file(
            &app.root,
            &hermes_backup::Scope::default(),
            &identity,
            compression,
            &output,
            &mut |p| {
                guard.0.set_progress(Some(json!({
                    "name": name,
                    "files_done": p.files_done,
                    "files_total": p.files_total,
                    "bytes_done": p.bytes_done,
                    "bytes_total": p.bytes_total,
                })));
            },
        )
        .map_err(|e| backup_problem(&e, StatusCode::INTERNAL_SERVER_ERROR))?;
        drop(guard);
        Ok(json!({
            "name": name,
            "size": summary.archive_bytes,
            "files": summary.files,
            "databases": summary.databases,
            "bytes": summary.bytes,
        }))
    })
    .await
}

/// `GET /api/backups/{name}`: the archive as an attachment, streamed.
async fn download(State(app): State<App>, path: Result<Path<String>, PathRejection>) -> Response {
    let name = match name_of(path) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    let opened = {
        let name = name.clone();
        blocking(move || archive_path(&backups_dir(&app)?, &name)).await
    };
    let (file, size) = match opened {
        Ok(Ok(found)) => found,
        Ok(Err(refusal)) => return *refusal,
        Err(failed) => return failed,
    };
    let file = tokio::fs::File::from_std(file);
    let stream = futures_util::stream::unfold(Some(file), |state| async move {
        let mut file = state?;
        let mut buf = vec![0u8; CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    let mut response = Body::from_stream(stream).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/zip"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    // The name passed `archive_name`: only letters, digits, `.`, `_` and `-`.
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    response
}

/// `?name=` of an upload: the file's name on the client.
#[derive(Deserialize)]
struct UploadQuery {
    name: Option<String>,
}

/// The upload cap in bytes ([`UPLOAD_LIMIT_VAR`]).
fn upload_limit(app: &App) -> u64 {
    upload_limit_of(&app.vars)
}

/// [`upload_limit`] from the environment `vars`: a positive number of MiB, else the default.
fn upload_limit_of(vars: &crate::Vars) -> u64 {
    let mb = vars(UPLOAD_LIMIT_VAR)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|mb| *mb > 0)
        .unwrap_or(UPLOAD_LIMIT_MB);
    mb.saturating_mul(1024 * 1024)
}

fn too_large(limit: u64) -> Box<Response> {
    refuse(
        StatusCode::PAYLOAD_TOO_LARGE,
        &format!("the upload is larger than {} MiB", limit / (1024 * 1024)),
        Some(format!(
            "raise {UPLOAD_LIMIT_VAR} for the dashboard, or copy the archive into the backups directory and restore it there"
        )),
    )
}

/// `POST /api/backups/upload?name=N`: the body (the archive's bytes) written to a temporary
/// 0600 file in the directory, verified, then given its name; a damaged archive is a 400 and
/// leaves nothing behind.
async fn upload(
    State(app): State<App>,
    query: Result<Query<UploadQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match receive(app, query, headers, body).await {
        Ok(r) | Err(r) => r,
    }
}

async fn receive(
    app: App,
    query: Result<Query<UploadQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, Response> {
    let q = request::query(query, "name").map_err(|r| *r)?;
    let given = q.name.unwrap_or_else(|| "uploaded.zip".into());
    let name = backup_store::upload_name(&given).ok_or_else(|| {
        *refuse(
            StatusCode::BAD_REQUEST,
            &format!("`{given}` cannot be made an archive name"),
            Some("give the file a name such as `backup.zip`".into()),
        )
    })?;
    let limit = upload_limit(&app);
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(*too_large(limit));
    }
    let upload = blocking(move || {
        let dir = backups_dir(&app)?;
        backup_store::ensure_dir(&dir)
            .and_then(|()| backup_store::Upload::create(&dir))
            .map_err(|e| io_problem(&format!("cannot write in `{}`", dir.display()), &e))
    })
    .await?
    .map_err(|r| *r)?;
    let mut upload = upload;
    let Some(std_file) = upload.file.take() else {
        return Err(*refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the upload's file is gone",
            None,
        ));
    };
    let mut file = tokio::fs::File::from_std(std_file);
    let mut stream = body.into_data_stream();
    let mut written: u64 = 0;
    loop {
        let next = tokio::time::timeout(UPLOAD_STALL, stream.next())
            .await
            .map_err(|_| {
                *refuse(
                    StatusCode::REQUEST_TIMEOUT,
                    &format!(
                        "the upload stalled: nothing arrived for {} s",
                        UPLOAD_STALL.as_secs()
                    ),
                    Some("upload the archive again".into()),
                )
            })?;
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| {
            *refuse(
                StatusCode::BAD_REQUEST,
                &format!("the upload broke off: {e}"),
                Some("upload the archive again".into()),
            )
        })?;
        written += chunk.len() as u64;
        if written > limit {
            return Err(*too_large(limit));
        }
        file.write_all(&chunk)
            .await
            .map_err(|e| *io_problem("cannot write the upload", &e))?;
    }
    file.sync_all()
        .await
        .map_err(|e| *io_problem("cannot write the upload", &e))?;
    drop(file);
    let checked = blocking(move || {
        let verified = hermes_backup::verify::verify(&upload.path, &mut |_, _, _| {})
            .and_then(hermes_backup::verify::Verified::ok)
            .map_err(|e| backup_problem(&e, StatusCode::BAD_REQUEST))?;
        let files = verified.files.len();
        let manifest = verified
            .manifest
            .map(|m| json!({ "created": m.created, "build": m.build, "scope": m.scope }));
        let stored = match upload.keep_as(&name) {
            Ok(_) => name,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(refuse(
                    StatusCode::CONFLICT,
                    &format!("an archive `{name}` is already in the backups directory"),
                    Some("rename the file before uploading it, or restore the one there".into()),
                ));
            }
            Err(e) => return Err(io_problem("cannot name the upload", &e)),
        };
        Ok(json!({
            "name": stored,
            "size": written,
            "files": files,
            "manifest": manifest,
        }))
    })
    .await?;
    match checked {
        Ok(v) => Ok(Json(v).into_response()),
        Err(r) => Err(*r),
    }
}

/// `POST /api/backups/{name}/plan`: the dry run.
async fn plan(State(app): State<App>, path: Result<Path<String>, PathRejection>) -> Response {
    let name = match name_of(path) {
        Ok(n) => n,
        Err(r) => return *r,
    };
    answer(move || {
        let dir = backups_dir(&app)?;
        archive_path(&dir, &name)?;
        let vars = app.vars.clone();
        let shown = restore::plan(&app.root, &name, &dir.join(&name), &|k: &str| vars(k))
            .map_err(|e| backup_problem(&e, StatusCode::UNPROCESSABLE_ENTITY))?;
        Ok(restore::describe(&name, &shown))
    })
    .await
}

/// The body of a restore: the token of the plan the page showed, and whether to restore an
/// archive from a newer config schema than the installed agent's anyway.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RestoreBody {
    token: String,
    #[serde(default)]
    force: bool,
}

/// A JSON body: a missing, oversized or malformed one is a 4xx `{detail, hint}`.
fn restore_body(raw: Result<Bytes, BytesRejection>) -> Step<RestoreBody> {
    let bytes = raw.map_err(|e| {
        refuse(
            e.status(),
            &format!("cannot read the request body: {}", e.body_text()),
            Some(format!(
                "send {{\"token\": …}} of at most {BODY_LIMIT} bytes"
            )),
        )
    })?;
    serde_json::from_slice(&bytes).map_err(|e| {
        refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("the request body is not the expected JSON: {e}"),
            Some("send {\"token\": \"…\"}: the token of the plan (POST …/plan)".into()),
        )
    })
}

/// `POST /api/backups/{name}/restore` `{token}`: plans again and applies, only when the plan is
/// the one shown (the same token).
async fn restore(
    State(app): State<App>,
    Extension(lock): Extension<Busy>,
    path: Result<Path<String>, PathRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    let (name, request) = match (name_of(path), restore_body(raw)) {
        (Ok(n), Ok(b)) => (n, b),
        (Err(r), _) | (_, Err(r)) => return *r,
    };
    let Some(guard) = lock.take() else {
        return busy();
    };
    answer(move || {
        let _guard = guard;
        let dir = backups_dir(&app)?;
        archive_path(&dir, &name)?;
        let vars = app.vars.clone();
        let var = move |k: &str| vars(k);
        let shown = restore::plan(&app.root, &name, &dir.join(&name), &var)
            .map_err(|e| backup_problem(&e, StatusCode::UNPROCESSABLE_ENTITY))?;
        if !crate::secret::same(&shown.token, &request.token) {
            return Err(refuse(
                StatusCode::CONFLICT,
                "the archive or the volume changed since this plan was shown",
                Some("look at the new plan, then confirm again".into()),
            ));
        }
        let restored =
            restore::apply(&shown, request.force, &var)
            .map_err(|e| backup_problem(&e, StatusCode::UNPROCESSABLE_ENTITY))?;
        Ok(json!({
            "name": name,
            "applied": restored.applied,
            "restarted": restored.restarted,
            "start_failures": restored.start_failures.iter().map(|(service, why)| json!({ "service": service, "why": why })).collect::<Vec<_>>(),
        }))
    })
    .await
}

/// This page's part of the OpenAPI document.
pub fn api_paths() -> Value {
    let name = json!({
        "name": "name", "in": "path", "required": true, "schema": { "type": "string" },
        "description": "an archive in the backups directory: letters, digits, `.`, `_`, `-`, ending in `.zip`",
    });
    let base = json!({
        "401": { "description": "Not signed in" },
        "409": { "description": "{detail, hint}: the backup settings (backup.* in config.yaml, HERMES_BACKUP_*) are invalid" },
    });
    let mut named = base.clone();
    named["400"] = json!({ "description": "{detail, hint}: not an archive name (a `/`, `..`, a leading dot, other characters), or a symlink or non-file" });
    named["404"] = json!({ "description": "{detail, hint}: no such archive" });
    let mut planned = named.clone();
    planned["409"] = json!({ "description": "{detail, hint}: a target on the volume is a symlink or directory; or the backup settings are invalid" });
    planned["422"] = json!({ "description": "{detail, hint}: the archive is damaged or holds nothing to restore" });
    let mut restoring = planned.clone();
    restoring["409"] = json!({ "description": "{detail, hint}: the plan changed since it was shown (another token), the archive's config schema is newer than the installed agent's (without force), a gateway runs outside the supervisor, another create or restore is running, or a target is unsafe; or the backup settings are invalid" });
    restoring["503"] = json!({ "description": "{detail, hint}: the supervisor could not be asked to stop the gateways" });
    let mut creating = base.clone();
    creating["409"] = json!({ "description": "{detail, hint}: another create or restore is running; or the backup settings are invalid" });
    creating["507"] = json!({ "description": "{detail, hint}: the disk is full" });
    let mut uploading = base.clone();
    uploading["400"] = json!({ "description": "{detail, hint}: not a readable zip, or it failed verification (the error line)" });
    uploading["409"] = json!({ "description": "{detail, hint}: an archive of that name is already there; or the backup settings are invalid" });
    uploading["408"] = json!({ "description": "{detail, hint}: nothing arrived for 60 s" });
    uploading["413"] = json!({ "description": format!("{{detail, hint}}: larger than {UPLOAD_LIMIT_VAR} MiB (default {UPLOAD_LIMIT_MB})") });
    let plan_answer = "{name, token, counts: {added, replaced, unchanged, kept, skipped}, added, replaced, unchanged, kept: [path], skipped: [{path, why}], restarts: [profile], schema: {archive: {version, profile}|null, refused: string|null, hint: string|null}, manifest: {created, build, agent_version, scope, files}|null}";
    json!({
        "/api/backups": {
            "get": {
                "summary": "The archives in the backups directory, newest first, and the schedule's last result",
                "responses": responses(&base, "{dir, archives: [{name, size, modified, scheduled}], original: [{dir, archives: [{name, size, modified}]}] (the original's `hermes-backup-YYYY-MM-DD-HHMMSS.zip` in its home: the volume's root, and $HOME), schedule: {schedule, last_run, ok, error, file, size, duration_ms, next_run, last_success}|{unreadable}|null, creating: {name, files_done, files_total, bytes_done, bytes_total}|null}"),
            },
            "post": {
                "summary": "Creates an archive of the whole volume in the backups directory (as `hermes backup create`)",
                "responses": responses(&creating, "{name, size, files, databases, bytes}"),
            },
        },
        "/api/backups/upload": { "post": {
            "summary": "Uploads an archive into the backups directory: written 0600 under a temporary name, verified, then named",
            "parameters": [{ "name": "name", "in": "query", "schema": { "type": "string" }, "description": "the file's name (made plain; default uploaded.zip)" }],
            "requestBody": { "required": true, "content": { "application/zip": { "schema": { "type": "string", "format": "binary" } } } },
            "responses": responses(&uploading, "{name, size, files, manifest: {created, build, scope}|null}"),
        }},
        "/api/backups/adopt": { "post": {
            "summary": "Copies one of the original's archives (the list's `original`) into the backups directory, under its name",
            "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "properties": { "dir": { "type": "string" }, "name": { "type": "string" } } } } } },
            "responses": responses(&base, "{name, size}; 400 for a place or name the list does not give, 409 when it is already there"),
        }},
        "/api/backups/{name}": { "get": {
            "summary": "Downloads an archive (Content-Disposition: attachment)",
            "parameters": [name.clone()],
            "responses": responses(&named, "application/zip"),
        }},
        "/api/backups/{name}/plan": { "post": {
            "summary": "The dry run of restoring the archive: what is added, replaced, unchanged, kept and skipped, whose gateways restart, the config schema check, and the token a restore must carry",
            "parameters": [name.clone()],
            "responses": responses(&planned, plan_answer),
        }},
        "/api/backups/{name}/restore": { "post": {
            "summary": "Restores the archive, only if its plan is still the one shown (the plan's token); the gateways serving the profiles that change are stopped through the supervisor first and started after",
            "parameters": [name],
            "requestBody": { "required": true, "content": { "application/json": { "schema": {
                "type": "object", "required": ["token"], "properties": {
                    "token": { "type": "string", "description": "the plan's token" },
                    "force": { "type": "boolean", "description": "restore an archive from a newer config schema than the installed agent's anyway (default false)" },
                },
            }}}},
            "responses": responses(&restoring, "{name, applied: {added, replaced, unchanged, kept}, restarted: [service], start_failures: [{service, why}]}"),
        }},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_create_or_restore_at_a_time_and_its_progress_goes_with_it() {
        let busy = Busy::default();
        let guard = busy.take().unwrap();
        assert!(busy.take().is_none(), "a second one waits");
        guard.0.set_progress(Some(json!({ "files_done": 3 })));
        assert_eq!(busy.progress().unwrap()["files_done"], 3);
        drop(guard);
        assert!(busy.progress().is_none(), "no progress once it ended");
        assert!(busy.take().is_some());
    }

    #[test]
    fn the_upload_cap_is_in_mib_with_a_default() {
        let limit = |value: Option<&'static str>| {
            let vars: crate::Vars = Arc::new(move |k: &str| {
                (k == UPLOAD_LIMIT_VAR)
                    .then(|| value.map(str::to_string))
                    .flatten()
            });
            upload_limit_of(&vars)
        };
        let default = UPLOAD_LIMIT_MB * 1024 * 1024;
        assert_eq!(limit(None), default);
        assert_eq!(limit(Some("1")), 1024 * 1024);
        assert_eq!(limit(Some(" 10 ")), 10 * 1024 * 1024);
        assert_eq!(limit(Some("0")), default);
        assert_eq!(limit(Some("lots")), default);
    }
}
