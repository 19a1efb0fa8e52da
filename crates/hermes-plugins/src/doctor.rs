//! Doctor rows for plugins: the installer rows plus the active memory provider.

use hermes_deps::{DoctorRow, Environment, InstallOptions, Status, installer_rows};
use hermes_home::Home;

use crate::discovery::Discovery;
use crate::setup::memory_status;

/// Installer state (route, Python, target writable, installer) and whether the
/// active memory provider (`memory.provider`, raw) is available.
pub fn doctor_rows(
    discovery: &Discovery,
    raw_active: Option<&str>,
    options: &InstallOptions,
) -> Vec<DoctorRow> {
    let mut rows = installer_rows(options);
    rows.push(match memory_status(discovery, raw_active, options) {
        Err(e) => DoctorRow::new("memory provider", Status::Fail, hermes_errors::one_line(&e)),
        Ok(s) => match (s.active, s.provider) {
            (None, _) => DoctorRow::new("memory provider", Status::Ok, "built-in only"),
            (Some(a), None) => DoctorRow::new(
                "memory provider",
                Status::Fail,
                format!("`{a}` is configured but no such plugin exists; run `hermes memory setup`"),
            ),
            (Some(a), Some(p)) if p.available => {
                DoctorRow::new("memory provider", Status::Ok, format!("`{a}` available"))
            }
            (Some(a), Some(p)) => {
                let mut what: Vec<String> = p
                    .dependencies
                    .iter()
                    .filter(|d| !d.installed)
                    .map(|d| d.spec.clone())
                    .collect();
                what.extend(p.env_missing.iter().cloned());
                what.extend(
                    p.external
                        .iter()
                        .filter(|e| !e.found)
                        .map(|e| e.name.clone()),
                );
                DoctorRow::new(
                    "memory provider",
                    Status::Fail,
                    format!(
                        "`{a}` not available (missing: {}); run `hermes memory setup {a}`",
                        what.join(", ")
                    ),
                )
            }
        },
    });
    for problem in &discovery.problems {
        rows.push(DoctorRow::new(
            "plugin manifest",
            Status::Warn,
            hermes_errors::one_line(problem),
        ));
    }
    rows
}

/// [`doctor_rows`] for `home`'s profile, as `hermes doctor` and the dashboard's Diagnostics
/// page show them: the installer's options from `base` with the profile's `.env` over it
/// ([`crate::profile::install_options`]). None when the profile's config or `.env` does not
/// parse: doctor already reports that as a failure, and we could not know whether installs
/// are switched off.
pub fn profile_rows(home: &Home, base: Environment) -> Vec<DoctorRow> {
    let Ok(options) = crate::profile::install_options(home, base) else {
        return Vec::new();
    };
    let raw = crate::profile::configured_provider(home).ok().flatten();
    doctor_rows(
        &crate::profile::discover_for(home),
        raw.as_deref(),
        &options,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::discover;
    use hermes_deps::Environment;

    #[test]
    fn reports_active_provider() {
        let d = discover(None);
        let o = InstallOptions::new("/nonexistent/h", true, Environment::default());
        let rows = doctor_rows(&d, None, &o);
        assert_eq!(rows.last().unwrap().detail, "built-in only");
        let rows = doctor_rows(&d, Some("mem0"), &o);
        let r = rows.last().unwrap();
        assert_eq!(r.status, Status::Fail);
        assert!(
            r.detail.contains("mem0ai") && r.detail.contains("MEM0_API_KEY"),
            "{}",
            r.detail
        );
    }

    #[test]
    fn a_profiles_rows_follow_its_config_and_none_when_it_does_not_parse() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::select(dir.path().to_path_buf(), None).unwrap();
        std::fs::write(home.config_path(), "memory:\n  provider: mem0\n").unwrap();
        let rows = profile_rows(&home, Environment::default());
        let last = rows.last().unwrap();
        assert_eq!(last.label, "memory provider");
        assert_eq!(last.status, Status::Fail, "{}", last.detail);
        assert!(rows.iter().any(|r| r.label == "installs"), "{rows:?}");

        std::fs::write(home.config_path(), "memory: [unclosed\n").unwrap();
        assert_eq!(profile_rows(&home, Environment::default()), Vec::new());
    }
}
