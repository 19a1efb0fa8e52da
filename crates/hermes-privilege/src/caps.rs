//! Which capabilities this process has: [`Capabilities`], read from `/proc/self/status`.
//!
//! A container started with `--cap-drop` keeps uid 0 but loses powers the boot relies on:
//! `CAP_CHOWN` (ownership repair, the control socket's group) and `CAP_SETUID`/`CAP_SETGID`
//! (switching to the service user). Asking first lets the boot say once what it skips, instead
//! of one failure per file.

/// The effective capability set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    effective: u64,
}

const CAP_CHOWN: u32 = 0;
const CAP_SETGID: u32 = 6;
const CAP_SETUID: u32 = 7;

impl Capabilities {
    /// This process's effective set; everything when it cannot be read (not Linux, no
    /// `/proc`), so a missing `/proc` never disables a stage that would have worked.
    pub fn current() -> Self {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| Self::parse(&s))
            .unwrap_or(Capabilities {
                effective: u64::MAX,
            })
    }

    /// Parses the `CapEff:` line of a `/proc/<pid>/status` text.
    pub fn parse(status: &str) -> Option<Self> {
        let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
        let effective = u64::from_str_radix(hex.trim(), 16).ok()?;
        Some(Capabilities { effective })
    }

    fn has(self, cap: u32) -> bool {
        self.effective & (1 << cap) != 0
    }

    /// `CAP_CHOWN`: may give files to another user.
    pub fn can_chown(self) -> bool {
        self.has(CAP_CHOWN)
    }

    /// `CAP_SETUID` and `CAP_SETGID`: may become another user.
    pub fn can_switch_user(self) -> bool {
        self.has(CAP_SETUID) && self.has(CAP_SETGID)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_effective_set() {
        let all = Capabilities::parse("Name:\tx\nCapEff:\t000001ffffffffff\n").unwrap();
        assert!(all.can_chown() && all.can_switch_user());
        // Docker's default set minus CHOWN (bit 0).
        let no_chown = Capabilities::parse("CapEff:\t00000000a80425fa\n").unwrap();
        assert!(!no_chown.can_chown());
        assert!(no_chown.can_switch_user());
        let none = Capabilities::parse("CapEff:\t0000000000000000\n").unwrap();
        assert!(!none.can_chown() && !none.can_switch_user());
        assert_eq!(Capabilities::parse("no such line"), None);
    }
}
