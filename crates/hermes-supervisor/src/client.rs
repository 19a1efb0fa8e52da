//! The blocking control client used by the CLI, the dashboard and hooks: connect, send one
//! request, read one response. Every call is bounded by the timeout given to
//! [`Client::connect`].

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Error;
use crate::protocol::{Command, Frame, MAX_RESPONSE, Request, Response, take_frame};
use crate::spec::ServiceSpec;
use crate::status::ServiceStatus;

/// Socket file name inside the runtime directory.
pub const SOCKET_NAME: &str = "supervisor.sock";

/// A connection to a running supervisor.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    socket: PathBuf,
    buf: Vec<u8>,
}

impl Client {
    /// Connects to `<runtime_dir>/supervisor.sock`.
    ///
    /// # Errors
    /// [`Error::NotRunning`] when there is no socket or nobody listens,
    /// [`Error::PermissionDenied`] when the socket mode shuts us out.
    pub fn connect(runtime_dir: &Path, timeout: Duration) -> Result<Self, Error> {
        Self::connect_socket(&runtime_dir.join(SOCKET_NAME), timeout)
    }

    /// Connects to an explicit socket path.
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn connect_socket(socket: &Path, timeout: Duration) -> Result<Self, Error> {
        let stream = UnixStream::connect(socket).map_err(|e| match e.kind() {
            ErrorKind::NotFound | ErrorKind::ConnectionRefused => Error::NotRunning {
                socket: socket.to_path_buf(),
            },
            ErrorKind::PermissionDenied => Error::PermissionDenied {
                socket: socket.to_path_buf(),
            },
            _ => Error::io("connect to", socket, e),
        })?;
        let t = Some(timeout.max(Duration::from_millis(1)));
        let set = |r: std::io::Result<()>| r.map_err(|e| Error::io("configure", socket, e));
        set(stream.set_read_timeout(t))?;
        set(stream.set_write_timeout(t))?;
        Ok(Self {
            stream,
            socket: socket.to_path_buf(),
            buf: Vec::new(),
        })
    }

    /// Sends one request and reads its response (an `ok: false` response is returned as is).
    ///
    /// # Errors
    /// [`Error::Protocol`] on timeout, disconnect or an unreadable response.
    pub fn request(&mut self, request: &Request) -> Result<Response, Error> {
        let proto = |reason: String| Error::Protocol { reason };
        let mut frame = serde_json::to_vec(request)
            .map_err(|e| proto(format!("cannot encode request: {e}")))?;
        frame.push(b'\n');
        // A refusal (`forbidden`) may arrive, and the server close, before our request is
        // written: keep the write error, but read what the server said first.
        let send_error = self.stream.write_all(&frame).err();
        let socket = self.socket.display().to_string();
        let closed = |send_error: Option<std::io::Error>| match send_error {
            Some(e) => proto(format!("cannot send to `{socket}`: {e}")),
            None => proto("the supervisor closed the connection".into()),
        };
        let mut chunk = [0u8; 16 * 1024];
        loop {
            match take_frame(&mut self.buf, MAX_RESPONSE) {
                Frame::Complete(line) => {
                    return serde_json::from_slice(&line)
                        .map_err(|e| proto(format!("unreadable response: {e}")));
                }
                Frame::TooLarge => return Err(proto("response too large".into())),
                Frame::Incomplete => {}
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err(closed(send_error)),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Err(proto("timed out waiting for the supervisor".into()));
                }
                Err(e) if send_error.is_some() => {
                    let _ = e;
                    return Err(closed(send_error));
                }
                Err(e) => return Err(proto(format!("cannot read the response: {e}"))),
            }
        }
    }

    /// Sends a command; an `ok: false` answer becomes [`Error::Refused`].
    ///
    /// # Errors
    /// Transport errors as [`Client::request`], refusals as [`Error::Refused`].
    pub fn call(&mut self, command: Command) -> Result<Response, Error> {
        let r = self.request(&Request::new(command))?;
        if r.ok {
            return Ok(r);
        }
        match r.error {
            Some(e) => Err(Error::Refused {
                code: e.code,
                message: e.message,
            }),
            None => Err(Error::Protocol {
                reason: "the supervisor refused the request without saying why".into(),
            }),
        }
    }

    /// Status of all services (`None`) or one.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn status(&mut self, service: Option<&str>) -> Result<Vec<ServiceStatus>, Error> {
        let r = self.call(Command::Status {
            service: service.map(String::from),
        })?;
        Ok(r.services.unwrap_or_default())
    }

    /// Starts a service.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn start(&mut self, service: &str) -> Result<(), Error> {
        self.call(Command::Start {
            service: service.into(),
        })
        .map(drop)
    }

    /// Stops a service.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn stop(&mut self, service: &str) -> Result<(), Error> {
        self.call(Command::Stop {
            service: service.into(),
        })
        .map(drop)
    }

    /// Restarts a service.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn restart(&mut self, service: &str) -> Result<(), Error> {
        self.call(Command::Restart {
            service: service.into(),
        })
        .map(drop)
    }

    /// Registers a service at run time.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn register(&mut self, spec: ServiceSpec) -> Result<(), Error> {
        self.call(Command::Register {
            spec: Box::new(spec),
        })
        .map(drop)
    }

    /// Sets how a registered service listens and restarts from `spec` (its `listen`,
    /// `handover` and `stop_grace`; the rest of the registered spec stays as it is).
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn listen(&mut self, spec: &ServiceSpec) -> Result<(), Error> {
        self.call(Command::Listen {
            service: spec.name.clone(),
            listen: spec.listen.clone(),
            handover: spec.handover,
            stop_grace: spec.stop_grace,
            memory_max: spec.memory_max,
        })
        .map(drop)
    }

    /// Unregisters a service; returns once its process has exited. Use a timeout longer than
    /// the service's stop grace.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn unregister(&mut self, service: &str) -> Result<(), Error> {
        self.call(Command::Unregister {
            service: service.into(),
        })
        .map(drop)
    }

    /// Asks the supervisor to stop everything and exit.
    ///
    /// # Errors
    /// As [`Client::call`].
    pub fn shutdown(&mut self) -> Result<(), Error> {
        self.call(Command::Shutdown).map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_socket_is_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let e = Client::connect(dir.path(), Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, Error::NotRunning { .. }), "{e:?}");
        // A stale socket file with no listener is also "not running".
        let path = dir.path().join(SOCKET_NAME);
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let e = Client::connect(dir.path(), Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, Error::NotRunning { .. }), "{e:?}");
    }

    #[test]
    fn silent_server_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let _l = std::os::unix::net::UnixListener::bind(dir.path().join(SOCKET_NAME)).unwrap();
        let mut c = Client::connect(dir.path(), Duration::from_millis(200)).unwrap();
        let e = c.status(None).unwrap_err();
        assert!(e.to_string().contains("timed out"), "{e}");
    }
}
