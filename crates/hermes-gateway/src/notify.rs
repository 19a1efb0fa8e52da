//! sd_notify readiness: one datagram (`READY=1`) to the socket named by `NOTIFY_SOCKET`.
//!
//! The socket name is a filesystem path, or an abstract socket name written with a leading `@`
//! (systemd's convention). The supervisor (or systemd) learns that the gateway is listening
//! from this message instead of guessing from a pid file or polling the port.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `message` (e.g. `READY=1`) to the sd_notify socket `socket`.
///
/// # Errors
///
/// The socket cannot be created, the name is invalid, or the send fails.
pub fn notify(socket: &str, message: &str) -> io::Result<()> {
    let addr = if let Some(name) = socket.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt;
        SocketAddr::from_abstract_name(name.as_bytes())?
    } else {
        SocketAddr::from_pathname(socket)?
    };
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(message.as_bytes(), &addr)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let rx = UnixDatagram::bind(&path).unwrap();
        notify(path.to_str().unwrap(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("hermes-gateway-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        notify(&format!("@{name}"), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }

    #[test]
    fn missing_socket_is_an_error_not_a_panic() {
        assert!(notify("/nonexistent/dir/sock", "READY=1").is_err());
    }
}
