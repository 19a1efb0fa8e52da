//! Service logs: where they are ([`service_log_dir`]).
//!
//! Words: a service's **log** is `current` in its log directory — a profile's gateway in
//! `<home>/logs/gateways/<profile>/`, any other service in `<home>/logs/<service>/` (the
//! supervisor's default) — plus the archives the supervisor rotates it into. Each line is
//! `<UTC timestamp> <what the service printed>`.

use std::path::{Path, PathBuf};

use crate::gateway::{GATEWAY_PREFIX, gateway_log_dir};

/// Where a supervised service of `home` logs (module doc). `None` for a name no service can
/// have.
pub fn service_log_dir(home: &Path, service: &str) -> Option<PathBuf> {
    if !hermes_supervisor::spec::is_valid_name(service) {
        return None;
    }
    Some(match service.strip_prefix(GATEWAY_PREFIX) {
        Some(profile) => gateway_log_dir(home, profile),
        None => home.join("logs").join(service),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_logs_live_where_the_supervisor_writes_them() {
        let home = Path::new("/data");
        assert_eq!(
            service_log_dir(home, "gateway-work"),
            Some(PathBuf::from("/data/logs/gateways/work"))
        );
        assert_eq!(
            service_log_dir(home, "llama"),
            Some(PathBuf::from("/data/logs/llama"))
        );
        for bad in ["", "../etc", "a/b", ".hidden"] {
            assert_eq!(service_log_dir(home, bad), None, "{bad}");
        }
    }
}
