//! The exit codes that carry a meaning from one Hermes process to another: what a gateway (or
//! any supervised service) asks of whoever supervises it, with the numbers of `sysexits.h`.
//!
//! | code | name          | a supervisor (ours, or systemd through the unit we write) |
//! |------|---------------|-----------------------------------------------------------|
//! | [`TEMPFAIL`] 75 | `EX_TEMPFAIL` | restarts it at once, whatever its restart policy |
//! | [`CONFIG`] 78   | `EX_CONFIG`   | parks it as failed: restarting cannot fix a configuration (`RestartPreventExitStatus=78`) |
//!
//! Every other code is an ordinary failure (or 0, success). Each process picks its code from
//! its error with these constants; a test may spell the number out where it checks the wire
//! value.

/// `EX_TEMPFAIL`: "restart me now" (a gateway asked to restart, e.g. by `/restart`).
pub const TEMPFAIL: u8 = 75;

/// `EX_CONFIG`: "bad configuration, do not restart me" (an error restarting cannot fix).
pub const CONFIG: u8 = 78;

#[cfg(test)]
mod tests {
    #[test]
    fn the_codes_are_those_of_sysexits() {
        // The supervisor, systemd units and the original agent agree on these numbers.
        assert_eq!((super::TEMPFAIL, super::CONFIG), (75, 78));
    }
}
