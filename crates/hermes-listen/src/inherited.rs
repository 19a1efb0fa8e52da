//! The receiving side: the sockets this process was passed, each taken once.

use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::sys::socket::{SockType, SockaddrStorage, getsockname, getsockopt, sockopt};

use crate::{Error, LISTEN_FDS_START, vars};

/// Whether the fds at `LISTEN_FDS_START..` already belong to an [`Inherited`] of this process:
/// a second owner would close them twice (or close what reused their numbers).
static CLAIMED: AtomicBool = AtomicBool::new(false);

/// The sockets a supervisor passed to this process, by name.
///
/// Each fd is owned from here on: the ones not taken close when this is dropped.
#[derive(Debug, Default)]
pub struct Inherited {
    sockets: Vec<Passed>,
}

#[derive(Debug)]
struct Passed {
    name: String,
    fd: RawFd,
    /// `None` once taken.
    owned: Option<OwnedFd>,
}

impl Inherited {
    /// Nothing inherited.
    pub fn none() -> Self {
        Self::default()
    }

    /// The sockets the environment passes to this process (`LISTEN_PID` is its pid).
    ///
    /// Reads the variables once per process: a later call finds nothing, as the fds already
    /// belong to the first. Every fd taken gets `FD_CLOEXEC`, so the processes this one starts
    /// do not hold the socket open.
    pub fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|var| {
            // A value that is not UTF-8 is malformed, not absent.
            std::env::var_os(var).map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// As [`Inherited::from_env`], with the variables from `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        adopt(&lookup, LISTEN_FDS_START, std::process::id(), &CLAIMED)
    }

    /// Sockets handed over within the process (tests, a caller that bound them itself), as if
    /// they had been passed under these names.
    pub fn from_fds(fds: impl IntoIterator<Item = (String, OwnedFd)>) -> Result<Self, Error> {
        let sockets = fds
            .into_iter()
            .map(|(name, owned)| {
                let fd = owned.as_raw_fd();
                set_cloexec(owned.as_fd(), &name)?;
                Ok(Passed {
                    name,
                    fd,
                    owned: Some(owned),
                })
            })
            .collect::<Result<_, Error>>()?;
        Ok(Self { sockets })
    }

    /// Whether any socket was passed to this process (taken or not).
    pub fn is_inherited(&self) -> bool {
        !self.sockets.is_empty()
    }

    /// The names of the sockets passed, in fd order, for logs.
    pub fn names(&self) -> Vec<&str> {
        self.sockets.iter().map(|s| s.name.as_str()).collect()
    }

    /// The names of the sockets passed and not taken yet.
    pub fn untaken(&self) -> Vec<&str> {
        self.sockets
            .iter()
            .filter(|s| s.owned.is_some())
            .map(|s| s.name.as_str())
            .collect()
    }

    /// The first fd named `name` not taken yet.
    pub fn take(&mut self, name: &str) -> Option<OwnedFd> {
        self.sockets
            .iter_mut()
            .find(|s| s.name == name && s.owned.is_some())
            .and_then(|s| s.owned.take())
    }

    /// The listening TCP socket named `name`, else the one listening on `addr`; `None` when
    /// neither was passed.
    ///
    /// A socket named `name` that is not a listening TCP socket is an error, not a reason to
    /// bind another: the supervisor meant it for this. The listener is in blocking mode, as
    /// `std` binds them.
    pub fn take_listener(
        &mut self,
        name: &str,
        addr: Option<SocketAddr>,
    ) -> Result<Option<TcpListener>, Error> {
        if let Some(socket) = self
            .sockets
            .iter_mut()
            .find(|s| s.name == name && s.owned.is_some())
        {
            let listening = socket
                .owned
                .as_ref()
                .and_then(|fd| listening_on(fd.as_fd()));
            if listening.is_none() {
                return Err(Error::NotListening {
                    name: name.to_string(),
                    fd: socket.fd,
                });
            }
            return Ok(socket.owned.take().map(TcpListener::from));
        }
        let Some(addr) = addr else {
            return Ok(None);
        };
        Ok(self
            .sockets
            .iter_mut()
            .find(|s| {
                s.owned
                    .as_ref()
                    .is_some_and(|fd| listening_on(fd.as_fd()) == Some(addr))
            })
            .and_then(|s| s.owned.take())
            .map(TcpListener::from))
    }
}

/// Takes ownership of the fds the variables pass to `pid`, numbered from `start`, unless
/// `claimed` says an earlier call has.
fn adopt(
    lookup: &dyn Fn(&str) -> Option<String>,
    start: RawFd,
    pid: u32,
    claimed: &AtomicBool,
) -> Result<Inherited, Error> {
    let passed = match vars::passed(lookup, start, pid)? {
        Some(passed) if !passed.is_empty() => passed,
        _ => return Ok(Inherited::none()),
    };
    if claimed.swap(true, Ordering::SeqCst) {
        return Ok(Inherited::none());
    }
    // Every fd is checked before one is owned: on an error none is closed, so no number that
    // something else may reuse is closed either.
    for (fd, name) in &passed {
        if let Err(source) = fd_flags(*fd) {
            return Err(Error::Fd {
                fd: *fd,
                name: name.clone(),
                source,
            });
        }
    }
    let mut sockets = Vec::with_capacity(passed.len());
    for (fd, name) in passed {
        #[allow(unsafe_code)]
        // SAFETY: the fd is open (checked above) and was passed to this process for it to own
        // (`LISTEN_PID` is its pid); `claimed` makes this the only owner in the process.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        set_cloexec(owned.as_fd(), &name)?;
        sockets.push(Passed {
            name,
            fd,
            owned: Some(owned),
        });
    }
    Ok(Inherited { sockets })
}

/// `fcntl(fd, F_GETFD)` of a number that may not be open.
fn fd_flags(fd: RawFd) -> std::io::Result<libc::c_int> {
    #[allow(unsafe_code)]
    // SAFETY: F_GETFD reads the flags of a number and touches nothing; a closed one is EBADF.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(flags)
}

fn set_cloexec(fd: BorrowedFd<'_>, name: &str) -> Result<(), Error> {
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
        .map(drop)
        .map_err(|errno| Error::Fd {
            fd: fd.as_raw_fd(),
            name: name.to_string(),
            source: errno.into(),
        })
}

/// The address `fd` listens on, when it is a listening TCP socket.
fn listening_on(fd: BorrowedFd<'_>) -> Option<SocketAddr> {
    if !getsockopt(&fd, sockopt::AcceptConn).ok()?
        || getsockopt(&fd, sockopt::SockType).ok()? != SockType::Stream
    {
        return None;
    }
    let addr: SockaddrStorage = getsockname(fd.as_raw_fd()).ok()?;
    if let Some(v4) = addr.as_sockaddr_in() {
        return Some(SocketAddr::V4((*v4).into()));
    }
    addr.as_sockaddr_in6()
        .map(|v6| SocketAddr::V6((*v6).into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LISTEN_FDNAMES, LISTEN_FDS, LISTEN_PID};
    use std::collections::HashMap;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::os::unix::net::{UnixListener, UnixStream};

    /// Puts a copy of each fd at `at`, `at + 1`, … without `FD_CLOEXEC`, as a supervisor
    /// passes them. Each test uses its own high range, so tests in parallel do not meet.
    fn place(fds: &[BorrowedFd<'_>], at: RawFd) {
        for (i, fd) in fds.iter().enumerate() {
            #[allow(unsafe_code)]
            // SAFETY: the target numbers are far above what the test process opens.
            let placed = unsafe { libc::dup2(fd.as_raw_fd(), at + i as RawFd) };
            assert_eq!(placed, at + i as RawFd);
        }
    }

    fn vars(fds: usize, names: &str, pid: u32) -> impl Fn(&str) -> Option<String> {
        let map = HashMap::from([
            (LISTEN_PID.to_string(), pid.to_string()),
            (LISTEN_FDS.to_string(), fds.to_string()),
            (LISTEN_FDNAMES.to_string(), names.to_string()),
        ]);
        move |k| map.get(k).cloned()
    }

    fn adopt_at(at: RawFd, fds: usize, names: &str) -> Result<Inherited, Error> {
        adopt(
            &vars(fds, names, std::process::id()),
            at,
            std::process::id(),
            &AtomicBool::new(false),
        )
    }

    fn answers(listener: TcpListener) {
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            conn.write_all(b"hi").unwrap();
        });
        let mut client = TcpStream::connect(addr).unwrap();
        let mut got = String::new();
        client.read_to_string(&mut got).unwrap();
        server.join().unwrap();
        assert_eq!(got, "hi");
    }

    #[test]
    fn passed_listeners_are_taken_by_name_or_address_once_and_closed_on_exec() {
        let api = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let other_addr = other.local_addr().unwrap();
        place(&[api.as_fd(), other.as_fd()], 900);
        assert_eq!(fd_flags(900).unwrap() & libc::FD_CLOEXEC, 0);

        let mut inherited = adopt_at(900, 2, "api:metrics").unwrap();
        assert!(inherited.is_inherited());
        assert_eq!(inherited.names(), ["api", "metrics"]);
        for fd in [900, 901] {
            assert_ne!(fd_flags(fd).unwrap() & libc::FD_CLOEXEC, 0, "fd {fd}");
        }

        let taken = inherited.take_listener("api", None).unwrap().unwrap();
        assert_eq!(taken.local_addr().unwrap(), api.local_addr().unwrap());
        assert!(inherited.take_listener("api", None).unwrap().is_none());
        assert_eq!(inherited.untaken(), ["metrics"]);
        answers(taken);

        // Not under the name asked for, but on the address.
        let unknown: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert!(
            inherited
                .take_listener("web", Some(unknown))
                .unwrap()
                .is_none()
        );
        let by_addr = inherited
            .take_listener("web", Some(other_addr))
            .unwrap()
            .unwrap();
        assert_eq!(by_addr.local_addr().unwrap(), other_addr);
        assert!(inherited.untaken().is_empty());
    }

    #[test]
    fn a_named_socket_that_is_not_a_tcp_listener_is_refused() {
        let dir = std::env::temp_dir().join(format!("hermes-listen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("unix.sock");
        let _ = std::fs::remove_file(&path);
        let unix = UnixListener::bind(&path).unwrap();
        let (pair, _peer) = UnixStream::pair().unwrap();
        let unbound = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        place(&[unix.as_fd(), pair.as_fd(), unbound.as_fd()], 910);

        let mut inherited = adopt_at(910, 3, "api:pair:udp").unwrap();
        let err = inherited.take_listener("api", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the inherited socket `api` (fd 910) is not a listening TCP socket"
        );
        assert!(inherited.take_listener("udp", None).is_err());
        // Matching by address skips what is not a TCP listener.
        let addr = unbound.local_addr().unwrap();
        assert!(
            inherited
                .take_listener("web", Some(addr))
                .unwrap()
                .is_none()
        );
        // The raw fd is still there for a caller that wants it as it is.
        assert!(inherited.take("pair").is_some());
        assert!(inherited.take("pair").is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn variables_for_another_process_leave_the_fds_alone() {
        let api = TcpListener::bind("127.0.0.1:0").unwrap();
        place(&[api.as_fd()], 920);
        let other_pid = std::process::id() + 1;
        let inherited = adopt(
            &vars(1, "api", other_pid),
            920,
            std::process::id(),
            &AtomicBool::new(false),
        )
        .unwrap();
        assert!(!inherited.is_inherited());
        drop(inherited);
        // Neither closed nor marked.
        assert_eq!(fd_flags(920).unwrap() & libc::FD_CLOEXEC, 0);
        #[allow(unsafe_code)]
        // SAFETY: 920 is this test's copy, open (checked above) and owned by nothing else.
        drop(unsafe { OwnedFd::from_raw_fd(920) });
    }

    #[test]
    fn a_passed_fd_that_is_not_open_is_an_error_and_closes_none() {
        let api = TcpListener::bind("127.0.0.1:0").unwrap();
        place(&[api.as_fd()], 930);
        // 931 is not open.
        let err = adopt_at(930, 2, "api:metrics").unwrap_err();
        assert_eq!(
            hermes_errors::one_line(&err),
            "cannot use the inherited fd 931 (`metrics`): bad file descriptor"
        );
        assert!(fd_flags(930).is_ok(), "fd 930 was closed");
    }

    #[test]
    fn untaken_fds_close_with_the_set_and_a_second_claim_finds_none() {
        let api = TcpListener::bind("127.0.0.1:0").unwrap();
        place(&[api.as_fd()], 940);
        let claimed = AtomicBool::new(false);
        let lookup = vars(1, "api", std::process::id());
        let first = adopt(&lookup, 940, std::process::id(), &claimed).unwrap();
        let second = adopt(&lookup, 940, std::process::id(), &claimed).unwrap();
        assert!(first.is_inherited());
        assert!(!second.is_inherited());
        drop(first);
        assert!(fd_flags(940).is_err(), "fd 940 is still open");
    }

    #[test]
    fn sockets_handed_over_in_process_are_marked_close_on_exec() {
        let api = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = api.local_addr().unwrap();
        let fd = OwnedFd::from(api.try_clone().unwrap());
        let raw = fd.as_raw_fd();
        let mut inherited = Inherited::from_fds([("api".to_string(), fd)]).unwrap();
        assert_ne!(fd_flags(raw).unwrap() & libc::FD_CLOEXEC, 0);
        let taken = inherited.take_listener("api", None).unwrap().unwrap();
        assert_eq!(taken.local_addr().unwrap(), addr);
    }
}
