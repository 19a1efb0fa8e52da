//! How full the volume is: [`usage`] of the filesystem a path is on, and the one threshold at
//! which every report (health, the dashboard, `/health/detailed`, metrics) calls it degraded.

use std::path::Path;

/// The fraction of a filesystem in use at and above which it is reported as degraded (the
/// original's `/health/detailed` says so at 90 %).
pub const DEGRADED_AT: f64 = 0.90;

/// The space of the filesystem a path is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    /// Size of the filesystem, bytes.
    pub total_bytes: u64,
    /// Bytes an unprivileged writer can still use (`f_bavail`: what the service user has).
    pub available_bytes: u64,
    /// Bytes in use (`total - free`, root's reserve counted as free, as `df` does).
    pub used_bytes: u64,
}

impl DiskUsage {
    /// The fraction in use as `df` computes its `Use%`: used / (used + available).
    pub fn used_fraction(&self) -> f64 {
        let denominator = self.used_bytes.saturating_add(self.available_bytes);
        if denominator == 0 {
            return 0.0;
        }
        self.used_bytes as f64 / denominator as f64
    }

    /// Whether it is at or above [`DEGRADED_AT`].
    pub fn is_degraded(&self) -> bool {
        self.used_fraction() >= DEGRADED_AT
    }

    /// `42 % used, 3.1 GiB free of 8 GiB`.
    pub fn describe(&self) -> String {
        format!(
            "{:.0} % used, {} free of {}",
            self.used_fraction() * 100.0,
            hermes_errors::bytes::human(self.available_bytes),
            hermes_errors::bytes::human(self.total_bytes)
        )
    }
}

/// The usage of the filesystem `path` is on.
///
/// # Errors
/// `statvfs` failing (the path is missing or unreadable).
pub fn usage(path: &Path) -> std::io::Result<DiskUsage> {
    let st = nix::sys::statvfs::statvfs(path).map_err(std::io::Error::from)?;
    let frag = st.fragment_size() as u64;
    let frag = if frag == 0 {
        st.block_size() as u64
    } else {
        frag
    };
    let total_bytes = (st.blocks() as u64).saturating_mul(frag);
    let free_bytes = (st.blocks_free() as u64).saturating_mul(frag);
    let available_bytes = (st.blocks_available() as u64).saturating_mul(frag);
    Ok(DiskUsage {
        total_bytes,
        available_bytes,
        used_bytes: total_bytes.saturating_sub(free_bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_the_filesystems_as_df_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let u = usage(dir.path()).unwrap();
        assert!(u.total_bytes > 0);
        assert!(u.available_bytes <= u.total_bytes);
        assert!((0.0..=1.0).contains(&u.used_fraction()));
        assert!(usage(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn ninety_percent_is_degraded() {
        let at = |used: u64, available: u64| DiskUsage {
            total_bytes: used + available,
            available_bytes: available,
            used_bytes: used,
        };
        assert!(!at(89, 11).is_degraded());
        assert!(at(90, 10).is_degraded());
        assert!(at(1, 0).is_degraded());
        assert!(!at(0, 0).is_degraded());
        assert_eq!(at(90, 10).describe(), "90 % used, 10 B free of 100 B");
    }
}
