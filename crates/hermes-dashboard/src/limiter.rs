//! Failed logins per client, for the login rate limit: [`LOGIN_ATTEMPTS`] failures per
//! [`LOGIN_WINDOW`], then refused until the window has passed.
//!
//! The table is bounded, so a flood of failures from many addresses costs neither unbounded
//! memory nor a growing scan per request:
//! * IPv6 clients count by their /64 (one host usually has a whole /64 to pick from);
//! * at [`MAX_CLIENTS`] entries, those whose window has passed are forgotten; if the table is
//!   still full, a new client's failures count in one shared entry, so under such a flood
//!   logins from new addresses are throttled together (closed, not open).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed logins allowed per client address within [`LOGIN_WINDOW`].
pub const LOGIN_ATTEMPTS: u32 = 5;
/// The window of [`LOGIN_ATTEMPTS`].
pub const LOGIN_WINDOW: Duration = Duration::from_secs(30);
/// Clients tracked at most (about 50 kB), besides the shared entry.
const MAX_CLIENTS: usize = 1024;
/// The shared entry of clients that found the table full.
const OVERFLOW: IpAddr = IpAddr::V6(Ipv6Addr::UNSPECIFIED);

/// The failure counters: per client, when its window started and its failures in it.
#[derive(Debug, Default)]
pub struct FailedLogins {
    clients: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl FailedLogins {
    /// Whether `ip` has used up its failed logins in the window current at `now`.
    pub fn throttled(&self, ip: IpAddr, now: Instant) -> bool {
        let Ok(clients) = self.clients.lock() else {
            return true;
        };
        clients
            .get(&slot(&clients, client(ip)))
            .is_some_and(|&(start, n)| {
                now.duration_since(start) < LOGIN_WINDOW && n >= LOGIN_ATTEMPTS
            })
    }

    /// Counts a failed login of `ip` at `now`.
    pub fn record(&self, ip: IpAddr, now: Instant) {
        let Ok(mut clients) = self.clients.lock() else {
            return;
        };
        let key = client(ip);
        if !clients.contains_key(&key) && clients.len() >= MAX_CLIENTS {
            clients.retain(|_, &mut (start, _)| now.duration_since(start) < LOGIN_WINDOW);
        }
        let key = slot(&clients, key);
        let entry = clients.entry(key).or_insert((now, 0));
        if now.duration_since(entry.0) >= LOGIN_WINDOW {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

/// The address failures count under: IPv4 as it is (also when IPv4-mapped), IPv6 by its /64.
fn client(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// The entry of `key`: its own when it has one or there is room, else the shared one.
fn slot(clients: &HashMap<IpAddr, (Instant, u32)>, key: IpAddr) -> IpAddr {
    if clients.contains_key(&key) || clients.len() < MAX_CLIENTS {
        key
    } else {
        OVERFLOW
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn v4(n: u32) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + n))
    }

    #[test]
    fn a_client_is_throttled_after_its_attempts_until_the_window_passes() {
        let limiter = FailedLogins::default();
        let t = Instant::now();
        for _ in 0..LOGIN_ATTEMPTS {
            assert!(!limiter.throttled(v4(1), t));
            limiter.record(v4(1), t);
        }
        assert!(limiter.throttled(v4(1), t));
        assert!(!limiter.throttled(v4(2), t), "others are not");
        assert!(!limiter.throttled(v4(1), t + LOGIN_WINDOW));
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() {
        let limiter = FailedLogins::default();
        let t = Instant::now();
        for i in 0..LOGIN_ATTEMPTS {
            let addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, i as u16 + 1);
            limiter.record(IpAddr::V6(addr), t);
        }
        let neighbour = Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0xffff, 1, 2, 3);
        assert!(limiter.throttled(IpAddr::V6(neighbour), t));
        let other_net = Ipv6Addr::new(0x2001, 0xdb8, 1, 3, 0, 0, 0, 1);
        assert!(!limiter.throttled(IpAddr::V6(other_net), t));
        for _ in 0..LOGIN_ATTEMPTS {
            limiter.record(v4(7), t);
        }
        let mapped = Ipv4Addr::from(0x0a00_0007).to_ipv6_mapped();
        assert!(limiter.throttled(IpAddr::V6(mapped), t));
    }

    #[test]
    fn a_flood_of_addresses_stays_bounded_and_fails_closed() {
        let limiter = FailedLogins::default();
        let t = Instant::now();
        for n in 0..(MAX_CLIENTS as u32 * 4) {
            limiter.record(v4(n), t);
        }
        // Its clients and the shared entry.
        assert_eq!(limiter.clients.lock().unwrap().len(), MAX_CLIENTS + 1);
        // New addresses in the flood share one entry, which is used up.
        assert!(limiter.throttled(v4(1_000_000), t));
        // An address with its own entry keeps its own count.
        assert!(!limiter.throttled(v4(0), t));
        // Once the window has passed, the table makes room again.
        let later = t + LOGIN_WINDOW;
        limiter.record(v4(2_000_000), later);
        assert!(limiter.clients.lock().unwrap().len() <= 2);
        assert!(!limiter.throttled(v4(3_000_000), later));
    }
}
