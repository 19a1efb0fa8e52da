//! How many client connections a server keeps, and for how long: `gateway.max_connections`,
//! `gateway.header_timeout` and `gateway.idle_timeout`, resolved by [`crate::resolve`] and
//! enforced by `hermes-http`'s accept loop.

use std::time::Duration;

/// Limits on the gateway's client connections (`gateway.*` in `config.yaml`).
///
/// A connection is *idle* when no request is in flight on it and it has sent nothing since its
/// last answer (a new connection that has sent nothing is idle too); it is *reading a head*
/// from the first byte of a request until the request's headers are complete.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most client connections served at once (`gateway.max_connections`, default 512). At
    /// the cap, a new connection takes the place of the longest-idle one (then of the oldest
    /// one still reading a head); when every connection has a request in flight it is
    /// answered `503 too_many_connections` and closed.
    pub max_connections: usize,
    /// Time from a request's first byte to its last header byte (`gateway.header_timeout`,
    /// seconds, default 10); slower connections are closed.
    pub header_timeout: Duration,
    /// Time an idle connection is kept open (`gateway.idle_timeout`, seconds, default 60).
    pub idle_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

impl ConnectionLimits {
    /// Limits with these values (tests use small ones).
    pub fn new(max_connections: usize, header_timeout: Duration, idle_timeout: Duration) -> Self {
        ConnectionLimits {
            max_connections,
            header_timeout,
            idle_timeout,
        }
    }
}

/// Descriptors kept for everything but client connections (the listener, logs, state.db, the
/// provider's connections) when the cap is fitted to `RLIMIT_NOFILE`.
pub const DESCRIPTOR_RESERVE: u64 = 64;
/// The cap never goes below this, however low the descriptor limit.
const MIN_CONNECTIONS: usize = 8;

impl ConnectionLimits {
    /// These limits with `max_connections` lowered to what an open-file limit of `soft`
    /// descriptors leaves after [`DESCRIPTOR_RESERVE`] (at least 8); unchanged when it fits.
    pub fn fitted_to(self, soft: u64) -> Self {
        let fits = usize::try_from(soft.saturating_sub(DESCRIPTOR_RESERVE))
            .unwrap_or(usize::MAX)
            .max(MIN_CONNECTIONS);
        ConnectionLimits {
            max_connections: self.max_connections.min(fits),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_a_reserve_of_the_open_file_limit_and_never_rises() {
        let limits = ConnectionLimits::default();
        assert_eq!(
            limits.fitted_to(1024).max_connections,
            512,
            "fits: unchanged"
        );
        assert_eq!(
            limits.fitted_to(256).max_connections,
            256 - DESCRIPTOR_RESERVE as usize
        );
        assert_eq!(
            limits.fitted_to(40).max_connections,
            MIN_CONNECTIONS,
            "a floor"
        );
        assert_eq!(limits.fitted_to(u64::MAX).max_connections, 512);
        let small = ConnectionLimits::new(16, Duration::from_secs(1), Duration::from_secs(5));
        assert_eq!(
            small.fitted_to(256),
            small,
            "a smaller configured cap is kept"
        );
    }
}
