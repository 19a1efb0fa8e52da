//! The sockets the supervisor holds for services ([`Listen`]): bound once, kept across every
//! restart and crash of their service, and closed when it is parked (`down`, `failed`,
//! `disabled`), forgotten, or waiting out a crash loop (bound again at its next start), so a
//! service that is not coming back soon refuses connections instead of leaving them waiting
//! for nobody.
//!
//! Under systemd (`hermes up` in a unit with a socket unit), the sockets systemd passed to the
//! supervisor are used first: one named after the service, else the one listening on the
//! address, is taken instead of binding.
//!
//! A socket's address comes from the spec; when a registration or a restart brings a different
//! one, the old socket is closed and the new one bound, and the service log says so. Processes
//! still draining on the old socket keep their own copy until they exit.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};

use crate::spec::{Listen, ServiceSpec};

/// Connections the kernel queues for a held socket while no process accepts (between two
/// processes of a service); std binds with 128.
const BACKLOG: libc::c_int = 1024;

/// One held socket.
struct Held {
    name: String,
    address: String,
    listener: TcpListener,
    local: Option<SocketAddr>,
}

/// Every held socket, by service.
#[derive(Default)]
pub(super) struct Sockets {
    by_service: HashMap<String, Vec<Held>>,
    /// What systemd passed to the supervisor and no service has taken yet.
    from_systemd: hermes_listen::Inherited,
}

/// What a process of a service is handed: fds in order, with their names.
#[derive(Debug, Default)]
pub(super) struct Handed {
    pub(super) fds: Vec<RawFd>,
    pub(super) names: Vec<String>,
}

impl Sockets {
    /// Held sockets, with what systemd passed to this process to take from first.
    pub(super) fn new(from_systemd: hermes_listen::Inherited) -> Self {
        Self {
            by_service: HashMap::new(),
            from_systemd,
        }
    }

    /// Makes sure each of `spec`'s sockets is held, binding what is new or has moved; returns
    /// what to hand its next process. What had to be done differently (a re-bind, a socket
    /// that cannot be bound) is pushed onto `notes`, for the service's log.
    pub(super) fn prepare(&mut self, spec: &ServiceSpec, notes: &mut Vec<String>) -> Handed {
        let from_systemd = &mut self.from_systemd;
        let held = self.by_service.entry(spec.name.clone()).or_default();
        // Sockets no longer in the spec are closed.
        held.retain(|h| {
            let kept = spec.listen.iter().any(|l| l.name == h.name);
            if !kept {
                notes.push(format!(
                    "closed socket `{}` on {}: no longer configured",
                    h.name, h.address
                ));
            }
            kept
        });
        let mut handed = Handed::default();
        for want in &spec.listen {
            let index = held.iter().position(|h| h.name == want.name);
            if let Some(k) = index
                && held[k].address != want.address
            {
                let old = held.remove(k);
                notes.push(format!(
                    "the address of socket `{}` changed from {} to {}: re-binding",
                    want.name, old.address, want.address
                ));
            }
            if !held.iter().any(|h| h.name == want.name) {
                match take_or_bind(from_systemd, &spec.name, want) {
                    Ok(h) => held.push(h),
                    Err(e) => {
                        notes.push(format!(
                            "cannot bind socket `{}` on {}: {e}; starting without it",
                            want.name, want.address
                        ));
                        continue;
                    }
                }
            }
            if let Some(h) = held.iter().find(|h| h.name == want.name) {
                handed.fds.push(h.listener.as_raw_fd());
                handed.names.push(h.name.clone());
            }
        }
        handed
    }

    /// Closes the sockets of `service`; returns their addresses.
    pub(super) fn release(&mut self, service: &str) -> Vec<String> {
        self.by_service
            .remove(service)
            .unwrap_or_default()
            .into_iter()
            .map(|h| h.address)
            .collect()
    }

    /// The services that hold sockets.
    pub(super) fn services(&self) -> Vec<String> {
        self.by_service
            .iter()
            .filter(|(_, held)| !held.is_empty())
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// The local addresses held for `service` (a port 0 resolved to the port it got).
    pub(super) fn listening(&self, service: &str) -> Vec<String> {
        self.by_service.get(service).map_or_else(Vec::new, |held| {
            held.iter()
                .map(|h| h.local.map_or_else(|| h.address.clone(), |a| a.to_string()))
                .collect()
        })
    }
}

/// The socket systemd passed for `service`'s `want` (named after the service, or listening on
/// its address), else a new one.
fn take_or_bind(
    from_systemd: &mut hermes_listen::Inherited,
    service: &str,
    want: &Listen,
) -> std::io::Result<Held> {
    let addr = want.address.parse::<SocketAddr>().ok();
    match from_systemd.take_listener(service, addr) {
        Ok(Some(listener)) => Ok(Held {
            name: want.name.clone(),
            address: want.address.clone(),
            local: listener.local_addr().ok(),
            listener,
        }),
        Ok(None) => bind(want),
        Err(e) => Err(std::io::Error::other(hermes_errors::one_line(&e))),
    }
}

/// Binds `want` (std sets `SO_REUSEADDR` and close-on-exec: the supervisor's own copy never
/// leaks into a child; children get theirs by `dup2`), with a longer backlog.
fn bind(want: &Listen) -> std::io::Result<Held> {
    let listener = TcpListener::bind(want.address.as_str())?;
    // A second listen() on a listening socket only changes its backlog.
    #[allow(unsafe_code)]
    // SAFETY: a plain syscall on a descriptor the listener owns.
    unsafe {
        libc::listen(listener.as_raw_fd(), BACKLOG);
    }
    Ok(Held {
        name: want.name.clone(),
        address: want.address.clone(),
        local: listener.local_addr().ok(),
        listener,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(listen: &[(&str, &str)]) -> ServiceSpec {
        let mut s = ServiceSpec::shell("web", "x");
        s.listen = listen.iter().map(|(n, a)| Listen::new(*n, *a)).collect();
        s
    }

    #[test]
    fn a_socket_is_bound_once_and_kept_until_its_address_changes() {
        let mut sockets = Sockets::default();
        let mut notes = Vec::new();
        let first = sockets.prepare(&spec(&[("api", "127.0.0.1:0")]), &mut notes);
        let again = sockets.prepare(&spec(&[("api", "127.0.0.1:0")]), &mut notes);
        assert_eq!(first.fds, again.fds, "the same socket");
        assert!(notes.is_empty(), "{notes:?}");
        let port = sockets.listening("web")[0].clone();
        assert!(
            std::net::TcpStream::connect(&port).is_ok(),
            "it listens: {port}"
        );

        let moved = sockets.prepare(&spec(&[("api", "127.0.0.2:0")]), &mut notes);
        assert_eq!(moved.names, vec!["api"]);
        assert!(
            notes[0].contains("changed from 127.0.0.1:0 to 127.0.0.2:0"),
            "{notes:?}"
        );
        assert!(
            std::net::TcpStream::connect(&port).is_err(),
            "the old one is closed"
        );

        assert_eq!(sockets.release("web"), vec!["127.0.0.2:0"]);
        assert!(sockets.listening("web").is_empty());
    }

    #[test]
    fn a_socket_systemd_passed_is_taken_instead_of_binding() {
        let passed = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = passed.local_addr().unwrap().to_string();
        let inode = |fd: RawFd| {
            std::fs::metadata(format!("/proc/self/fd/{fd}")).map(|m| {
                use std::os::unix::fs::MetadataExt;
                m.ino()
            })
        };
        let want = inode(passed.as_raw_fd()).unwrap();
        let inherited =
            hermes_listen::Inherited::from_fds([("other".to_string(), passed.into())]).unwrap();
        let mut sockets = Sockets::new(inherited);
        let mut notes = Vec::new();
        let handed = sockets.prepare(&spec(&[("api", &addr)]), &mut notes);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(
            inode(handed.fds[0]).unwrap(),
            want,
            "the passed socket, by its address"
        );
    }

    #[test]
    fn a_socket_that_cannot_be_bound_is_said_and_left_out() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap().to_string();
        let mut sockets = Sockets::default();
        let mut notes = Vec::new();
        let handed = sockets.prepare(&spec(&[("a", &addr), ("b", "127.0.0.1:0")]), &mut notes);
        assert_eq!(handed.names, vec!["b"]);
        assert!(
            notes[0].starts_with(&format!("cannot bind socket `a` on {addr}")),
            "{notes:?}"
        );
    }
}
