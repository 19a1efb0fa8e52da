//! Doctor rows for the installer: where installs go, whether that place is
//! writable, which Python and which installer would run.
//!
//! A *doctor row* is a label, a [`Check`] and one line of detail; the binary
//! aligns and colours them. Probing writability creates and removes a temp
//! file (mode bits lie for root and on read-only mounts); nothing else is
//! written.

use crate::generations::{Pointer, Resolution, Store};
use crate::install::InstallOptions;
use crate::python::{Interpreter, venv_python};
use crate::route::{BlockReason, Route};
use crate::target::probe_writable;

pub use hermes_report::Status;

/// One line of `hermes doctor`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DoctorRow {
    /// What was checked.
    pub label: String,
    /// The verdict.
    pub status: Status,
    /// The detail (and what to do, when not ok).
    pub detail: String,
}

impl DoctorRow {
    /// Builds a row.
    pub fn new(label: &str, status: Status, detail: impl Into<String>) -> Self {
        Self {
            label: label.to_string(),
            status,
            detail: detail.into(),
        }
    }
}

/// A row is one `hermes doctor` line: `<label>: <detail>` (the detail says what to do).
impl From<DoctorRow> for hermes_report::Check {
    fn from(row: DoctorRow) -> Self {
        hermes_report::Check {
            status: row.status,
            message: format!("{}: {}", row.label, row.detail),
            fix: None,
        }
    }
}

/// Installer rows: route, Python, target writable, installer.
pub fn installer_rows(options: &InstallOptions) -> Vec<DoctorRow> {
    let mut rows = Vec::new();
    let route = options.route();
    rows.push(match &route {
        Route::Venv {
            venv,
            managed: true,
        } => DoctorRow::new(
            "installs",
            Status::Ok,
            format!("into the Hermes-managed venv `{}`", venv.display()),
        ),
        Route::Venv {
            venv,
            managed: false,
        } => DoctorRow::new(
            "installs",
            Status::Ok,
            format!("into the core venv `{}`", venv.display()),
        ),
        Route::Target { target, .. } => DoctorRow::new(
            "installs",
            Status::Ok,
            format!("into the durable target `{}`", target.display()),
        ),
        Route::Blocked(r @ BlockReason::KillSwitch) => {
            DoctorRow::new("installs", Status::Warn, format!("{r}; {}", r.hint()))
        }
        Route::Blocked(r) => DoctorRow::new("installs", Status::Fail, format!("{r}; {}", r.hint())),
    });
    let (venv, managed) = crate::route::core_venv(&options.env, &options.hermes_home);
    let mut info = None;
    match venv_python(&venv) {
        Some(py) => match Interpreter::new(py.clone(), None, options.env.clone()).info() {
            Ok(i) => {
                rows.push(DoctorRow::new(
                    "python",
                    Status::Ok,
                    format!("`{}` ({})", py.display(), i.version),
                ));
                info = Some(i);
            }
            Err(e) => rows.push(DoctorRow::new(
                "python",
                Status::Fail,
                hermes_errors::one_line(&e),
            )),
        },
        None if managed => match options.env.which("python3") {
            Some(base) => rows.push(DoctorRow::new(
                "python",
                Status::Ok,
                format!(
                    "`{}`; the managed venv `{}` is created at the first install",
                    base.display(),
                    venv.display()
                ),
            )),
            None => rows.push(DoctorRow::new(
                "python",
                Status::Fail,
                "no `python3` on `PATH`; install Python 3",
            )),
        },
        None => rows.push(DoctorRow::new(
            "python",
            Status::Fail,
            format!(
                "`{}/bin/python3` not found; check `HERMES_VENV`",
                venv.display()
            ),
        )),
    }
    match &route {
        Route::Target { target, .. } => rows.push(match probe_store(target) {
            Ok(()) => DoctorRow::new(
                "target writable",
                Status::Ok,
                format!("`{}`", target.display()),
            ),
            Err(e) => DoctorRow::new(
                "target writable",
                Status::Fail,
                format!(
                    "{}; {}",
                    hermes_errors::one_line(&e),
                    e.hint().unwrap_or_default()
                ),
            ),
        }),
        Route::Venv { managed: false, .. } => {
            if let Some(sp) = info.as_ref().and_then(|i| i.site_packages.first()) {
                rows.push(match probe_writable(sp) {
                    Ok(()) => DoctorRow::new("venv writable", Status::Ok, format!("`{}`", sp.display())),
                    Err(_) => DoctorRow::new(
                        "venv writable",
                        Status::Fail,
                        format!("`{}` is read-only; set `HERMES_LAZY_INSTALL_TARGET` to a writable directory", sp.display()),
                    ),
                });
            }
        }
        _ => {}
    }
    if let Route::Target { target, .. } = &route {
        rows.push(generations_row(target));
    }
    rows.push(match options.uv() {
        Some(uv) => DoctorRow::new("installer", Status::Ok, format!("uv (`{}`)", uv.display())),
        None => DoctorRow::new(
            "installer",
            Status::Ok,
            "pip (uv not found; `python -m pip` is used)",
        ),
    });
    rows
}

/// Whether a new generation can be made: the store beside the target (where generations are
/// built) and the target's directory (where its link is swapped) take a new file. The target
/// itself names a sealed generation, which nothing writes.
fn probe_store(target: &std::path::Path) -> Result<(), crate::Error> {
    let store = Store::for_target(target);
    if store.root().is_dir() {
        probe_writable(store.root())?;
    }
    match target.parent() {
        Some(parent) => probe_writable(parent),
        None => Ok(()),
    }
}

/// The active generation and the last check of it against this image.
fn generations_row(target: &std::path::Path) -> DoctorRow {
    let label = "plugin packages";
    let overview = crate::generations::overview(target);
    let active = overview.generations.iter().find(|g| g.active);
    let state = match (&overview.pointer, active) {
        (_, Some(g)) => format!(
            "generation {} active ({} package(s) asked for)",
            g.id,
            g.requests.len()
        ),
        (pointer, None) if matches!(Store::for_target(target).pointer(), Pointer::Foreign(_)) => {
            return DoctorRow::new(
                label,
                Status::Fail,
                format!(
                    "`{}` is {pointer}, not an install generation; move it aside (the next \
                     install makes a new generation)",
                    target.display()
                ),
            );
        }
        (pointer, None) => pointer.clone(),
    };
    match &overview.last_resolution {
        Some(report) => {
            let status = match report.resolution {
                Resolution::Unavailable { .. } => Status::Fail,
                Resolution::KeptCompatible { .. } => Status::Warn,
                _ => Status::Ok,
            };
            DoctorRow::new(label, status, format!("{state}; {}", report.summary()))
        }
        None => DoctorRow::new(label, Status::Ok, state),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Environment;
    use crate::env::{DISABLE_VAR, TARGET_VAR, VENV_VAR};

    #[test]
    fn sealed_without_target_fails_and_target_is_probed() {
        let env = Environment::default()
            .with(DISABLE_VAR, "1")
            .with(VENV_VAR, "/nonexistent/venv");
        let rows = installer_rows(&InstallOptions::new("/nonexistent/h", true, env.clone()));
        assert_eq!(rows[0].status, Status::Fail);
        assert!(rows[0].detail.contains("HERMES_LAZY_INSTALL_TARGET"));
        assert_eq!(rows[1].status, Status::Fail, "python row: {rows:?}");

        let d = tempfile::tempdir().unwrap();
        let env = env.with(TARGET_VAR, &d.path().join("lazy").to_string_lossy());
        let rows = installer_rows(&InstallOptions::new("/nonexistent/h", true, env));
        let t = rows.iter().find(|r| r.label == "target writable").unwrap();
        assert_eq!(t.status, Status::Ok);
        let line = hermes_report::Check::from(t.clone());
        assert!(line.message.starts_with("target writable: "), "{line:?}");
    }

    #[test]
    fn kill_switch_is_a_warning() {
        let rows = installer_rows(&InstallOptions::new(
            "/nonexistent/h",
            false,
            Environment::default(),
        ));
        assert_eq!(rows[0].status, Status::Warn);
    }

    #[test]
    fn unavailable_plugin_packages_fail_doctor_with_the_fix() {
        use crate::generations::{ResolutionReport, Unavailable, resolve::REPORT_FILE};
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("lazy-packages");
        let row = generations_row(&target);
        assert_eq!(row.status, Status::Ok);
        assert!(row.detail.contains("nothing installed"), "{row:?}");

        let store = Store::for_target(&target);
        store.create().unwrap();
        let report = ResolutionReport {
            at: 1,
            resolution: Resolution::Unavailable {
                from: 1,
                to: 2,
                packages: vec![Unavailable {
                    spec: "honcho-ai==2.2.0".into(),
                    why: "no package index reachable".into(),
                }],
            },
            reason: "the interpreter changed: 3.13 → 3.11".into(),
            fix: "hermes plugins repair".into(),
        };
        std::fs::write(
            store.root().join(REPORT_FILE),
            serde_json::to_string(&report).unwrap(),
        )
        .unwrap();
        let row = generations_row(&target);
        assert_eq!(row.status, Status::Fail);
        assert!(
            row.detail.contains("honcho-ai==2.2.0") && row.detail.contains("hermes plugins repair"),
            "{row:?}"
        );

        std::os::unix::fs::symlink("/etc", &target).unwrap();
        let row = generations_row(&target);
        assert_eq!(row.status, Status::Fail);
        assert!(row.detail.contains("move it aside"), "{row:?}");
    }
}
