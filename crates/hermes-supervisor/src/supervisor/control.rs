//! The control server: the supervisor's side of the control socket.
//!
//! [`Supervisor::accept`] takes new clients (boundedly per wake): each gets its peer
//! credentials read; one over the client limit is answered `busy` and closed, and one whose
//! uid is not allowed gets one `forbidden` reply and is closed. [`Supervisor::service_clients`] reads what ready
//! clients sent (at most [`MAX_REQUEST`] + 1 bytes per wake), takes complete frames, answers
//! `status` at once and hands every other request to the machine, which answers through
//! [`Supervisor::reply`] — one reply per request, in order, so a client waits while a request
//! is pending. Replies queue in the client's buffer; past [`MAX_QUEUED_REPLIES`] the client is
//! not read from until it reads. A client that neither sends nor reads for the client
//! deadline is closed. Last replies on exit share [`FINAL_FLUSH`].
//!
//! [`confine_run_as`] and [`confine_log`] say what a client that is not root may register: a
//! service as itself, logging below the supervisor's log directory.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Component, Path};
use std::time::Instant;

use nix::sys::socket::{getsockopt, sockopt};
use nix::unistd::Uid;

use super::{FINAL_FLUSH, Hooks, Supervisor};
use crate::machine::{Event, Op, OpError, Outcome, RequestId};
use crate::mirror::MirrorOut;
use crate::protocol::{
    Command as Cmd, ErrorCode, Frame, MAX_QUEUED_REPLIES, MAX_REQUEST, Response, parse_request,
    take_frame,
};
use crate::spec::{LogTarget, RunAs};

/// One control client.
pub(super) struct Conn {
    pub(super) stream: UnixStream,
    /// The peer's uid and gid (SO_PEERCRED), when the kernel told us.
    pub(super) peer: Option<(u32, u32)>,
    pub(super) rbuf: Vec<u8>,
    pub(super) wbuf: Vec<u8>,
    pub(super) deadline: Instant,
    pub(super) pending: Option<RequestId>,
    pub(super) closing: bool,
    pub(super) eof: bool,
}

impl Conn {
    /// Whether to read more from this client. Not while a request waits for its reply (replies
    /// go out in order), nor while its replies pile up unread or a complete request is still
    /// buffered: what a client can make us hold stays bounded by [`MAX_QUEUED_REPLIES`] plus
    /// one read.
    pub(super) fn wants_input(&self) -> bool {
        self.pending.is_none()
            && !self.closing
            && !self.eof
            && self.wbuf.len() < MAX_QUEUED_REPLIES
            && !self.rbuf.contains(&b'\n')
    }

    /// Whether a buffered request can be processed now (the loop then does not sleep).
    pub(super) fn can_process(&self) -> bool {
        self.pending.is_none()
            && !self.closing
            && self.wbuf.len() < MAX_QUEUED_REPLIES
            && (self.rbuf.contains(&b'\n') || (self.eof && !self.rbuf.is_empty()))
    }
}

impl Supervisor {
    /// Takes the clients waiting on the listener: over [`Options::max_clients`](super::Options)
    /// one is answered `busy` and closed; one whose uid is not allowed gets one `forbidden`
    /// reply and is closed.
    pub(super) fn accept(&mut self, now: Instant) {
        // Bounded so a connect storm cannot hold the loop.
        for _ in 0..64 {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(_) => return,
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let peer = getsockopt(&stream, sockopt::PeerCredentials)
                .map(|c| (c.uid(), c.gid()))
                .ok();
            let uid = peer.map(|(uid, _)| uid);
            let mut conn = Conn {
                stream,
                peer,
                rbuf: Vec::new(),
                wbuf: Vec::new(),
                deadline: now + self.opts.client_deadline,
                pending: None,
                closing: false,
                eof: false,
            };
            if self.conns.len() >= self.opts.max_clients {
                let _ = conn.stream.write(
                    &Response::error(ErrorCode::Busy, "too many control clients; try again")
                        .to_frame(),
                );
                continue;
            }
            if !uid.is_some_and(|u| self.allowed.contains(&u)) {
                let who = uid.map_or("unknown".into(), |u| u.to_string());
                conn.wbuf = Response::error(
                    ErrorCode::Forbidden,
                    format!("uid {who} may not use the control socket"),
                )
                .to_frame();
                conn.closing = true;
            }
            self.conns.push(conn);
        }
    }

    /// Reads from the ready clients, answers what they sent, writes what is queued, and drops
    /// the finished, idle and broken ones.
    pub(super) fn service_clients(
        &mut self,
        ready: &[usize],
        now: Instant,
        hooks: &mut dyn Hooks,
        out: &mut MirrorOut<'_>,
        outcome: &mut Option<Outcome>,
    ) {
        for &k in ready {
            let Some(c) = self.conns.get_mut(k) else {
                continue;
            };
            if !c.wants_input() {
                continue;
            }
            let mut buf = [0u8; 16 * 1024];
            let mut budget = MAX_REQUEST + 1;
            while budget > 0 {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        c.eof = true;
                        break;
                    }
                    Ok(n) => {
                        c.rbuf.extend_from_slice(&buf[..n]);
                        budget = budget.saturating_sub(n);
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        for k in 0..self.conns.len() {
            self.process_frames(k, now, hooks, out, outcome);
        }
        // Write what is queued; drop finished, idle, broken connections.
        let mut keep = Vec::with_capacity(self.conns.len());
        for mut c in std::mem::take(&mut self.conns) {
            let mut broken = false;
            while !c.wbuf.is_empty() {
                match c.stream.write(&c.wbuf) {
                    Ok(0) => {
                        broken = true;
                        break;
                    }
                    Ok(n) => {
                        c.wbuf.drain(..n);
                        // Reading its replies is progress: only a client that neither sends
                        // nor reads for the deadline is idle.
                        c.deadline = now + self.opts.client_deadline;
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => {
                        broken = true;
                        break;
                    }
                }
            }
            let done = (c.closing || c.eof) && c.wbuf.is_empty() && c.pending.is_none();
            let expired = c.pending.is_none() && now >= c.deadline;
            if !(broken || done || expired) {
                keep.push(c);
            }
        }
        self.conns = keep;
    }

    /// Answers the complete requests client `k` has buffered, in order, until one has to
    /// wait for the machine (or the client's replies pile up).
    fn process_frames(
        &mut self,
        k: usize,
        now: Instant,
        hooks: &mut dyn Hooks,
        out: &mut MirrorOut<'_>,
        outcome: &mut Option<Outcome>,
    ) {
        loop {
            let c = &mut self.conns[k];
            if c.pending.is_some() || c.closing || c.wbuf.len() >= MAX_QUEUED_REPLIES {
                return;
            }
            let line = match take_frame(&mut c.rbuf, MAX_REQUEST) {
                Frame::Complete(l) => l,
                Frame::Incomplete => {
                    if c.eof && !c.rbuf.is_empty() {
                        c.rbuf.clear();
                        c.wbuf.extend(
                            Response::error(
                                ErrorCode::InvalidRequest,
                                "connection closed in the middle of a request",
                            )
                            .to_frame(),
                        );
                    }
                    return;
                }
                Frame::TooLarge => {
                    c.rbuf = Vec::new();
                    c.wbuf.extend(
                        Response::error(
                            ErrorCode::TooLarge,
                            format!("request larger than {MAX_REQUEST} bytes"),
                        )
                        .to_frame(),
                    );
                    c.closing = true;
                    return;
                }
            };
            c.deadline = now + self.opts.client_deadline;
            let req = match parse_request(&line) {
                Ok(r) => r,
                Err(resp) => {
                    c.wbuf.extend(resp.to_frame());
                    continue;
                }
            };
            let op = match req.command {
                Cmd::Status { service } => {
                    let rows = match service {
                        None => Ok(self.machine.status(now)),
                        Some(s) => self
                            .machine
                            .status_of(&s, now)
                            .map(|row| vec![row])
                            .ok_or(s),
                    };
                    let resp = match rows {
                        Ok(mut rows) => {
                            for row in &mut rows {
                                row.listening = self.sockets.listening(&row.name);
                                row.resources = self.sampler.resources(&row.name, row.pid);
                                row.memory_max = self.memory_limit(&row.name);
                                row.pids_enforced_by = self.pids_limit(&row.name).map(|(_, by)| by);
                            }
                            Response::services(rows)
                        }
                        Err(s) => Response::error(
                            ErrorCode::UnknownService,
                            format!("unknown service `{s}`"),
                        ),
                    };
                    self.conns[k].wbuf.extend(resp.to_frame());
                    continue;
                }
                Cmd::Start { service } => Op::Start(service),
                Cmd::Stop { service } => Op::Stop(service),
                Cmd::Restart { service } => Op::Restart(service),
                Cmd::Unregister { service } => Op::Unregister(service),
                Cmd::Listen {
                    service,
                    listen,
                    handover,
                    stop_grace,
                    memory_max,
                } => Op::Listen {
                    service,
                    listen,
                    handover,
                    stop_grace,
                    memory_max,
                },
                Cmd::Shutdown => Op::Shutdown,
                Cmd::Register { mut spec } => {
                    if let Err(why) = spec.validate() {
                        self.conns[k]
                            .wbuf
                            .extend(Response::error(ErrorCode::InvalidRequest, why).to_frame());
                        continue;
                    }
                    let peer = self.conns[k].peer;
                    match confine_log(spec.log.clone(), peer, &self.opts.log_dir) {
                        Ok(log) => spec.log = log,
                        Err(why) => {
                            self.conns[k]
                                .wbuf
                                .extend(Response::error(ErrorCode::Forbidden, why).to_frame());
                            continue;
                        }
                    }
                    spec.run_as =
                        confine_run_as(spec.run_as.take(), peer, self.opts.default_run_as.as_ref());
                    Op::Register(spec)
                }
            };
            let id = self.next_id;
            self.next_id += 1;
            self.conns[k].pending = Some(id);
            let acts = self.machine.handle(Event::Control { id, op }, now);
            self.execute(acts, hooks, out, outcome);
        }
    }

    /// Last replies on the way out, within [`FINAL_FLUSH`] for all clients together: a
    /// client that does not read must not hold up the exit.
    pub(super) fn flush_clients(&mut self) {
        let deadline = Instant::now() + FINAL_FLUSH;
        for c in &mut self.conns {
            let left = deadline.saturating_duration_since(Instant::now());
            if !c.wbuf.is_empty() && !left.is_zero() {
                let _ = c.stream.set_nonblocking(false);
                let _ = c.stream.set_write_timeout(Some(left));
                let _ = c.stream.write_all(&c.wbuf);
            }
        }
        self.conns.clear();
    }

    /// Delivers the machine's answer to the request `id` (a client that is gone is ignored).
    pub(super) fn reply(&mut self, id: RequestId, result: Result<(), OpError>) {
        let resp = match result {
            Ok(()) => Response::ok(),
            Err(e) => Response::error(e.code(), e.to_string()),
        };
        if let Some(c) = self.conns.iter_mut().find(|c| c.pending == Some(id)) {
            c.pending = None;
            c.wbuf.extend(resp.to_frame());
            c.deadline = Instant::now() + self.opts.client_deadline;
        }
    }
}

/// The identity a service registered over the control socket may run as.
///
/// A supervisor running as root applies `run_as` before `exec`, so a non-root client must
/// never be able to register a service that runs with more privilege than itself: whatever it
/// asked for, its service runs as its own uid and gid — with the configured service identity's
/// supplementary groups when the client *is* that user. Root may ask for anything.
pub fn confine_run_as(
    requested: Option<RunAs>,
    peer: Option<(u32, u32)>,
    default: Option<&RunAs>,
) -> Option<RunAs> {
    match peer {
        Some((0, _)) => requested,
        Some((uid, gid)) => Some(match default {
            Some(service_user) if service_user.uid == uid => service_user.clone(),
            _ => RunAs {
                uid,
                gid,
                groups: vec![gid],
            },
        }),
        // Unknown peer: such a connection is refused before it can send anything; stay safe.
        None => Some(RunAs {
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
        }),
    }
}

/// Where a service registered over the control socket may keep its log.
///
/// The supervisor writes the log itself, so a root supervisor would write wherever the request
/// says. A client that is neither root nor the supervisor's own user may therefore only name a
/// directory below the supervisor's log directory (`$HERMES_HOME/logs`, which the service user
/// owns anyway), without `..`, and may not take over the supervisor's terminal
/// ([`LogTarget::Inherit`] becomes the default log). Everything else is refused with a reason.
pub fn confine_log(
    requested: LogTarget,
    peer: Option<(u32, u32)>,
    log_root: &Path,
) -> Result<LogTarget, String> {
    let trusted = peer.is_some_and(|(uid, _)| uid == 0 || uid == Uid::effective().as_raw());
    if trusted {
        return Ok(requested);
    }
    match requested {
        LogTarget::Dir(dir) => {
            let below = dir.strip_prefix(log_root).is_ok_and(|rel| {
                rel.components().next().is_some()
                    && rel.components().all(|c| matches!(c, Component::Normal(_)))
            });
            if below {
                Ok(LogTarget::Dir(dir))
            } else {
                Err(format!(
                    "log directory `{}` is not below `{}`: a client that is not root may only \
                     keep logs there",
                    dir.display(),
                    log_root.display()
                ))
            }
        }
        LogTarget::Inherit => Ok(LogTarget::Default),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn ra(uid: u32, gid: u32, groups: &[u32]) -> RunAs {
        RunAs {
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    #[test]
    fn a_non_root_client_logs_only_below_the_log_root() {
        let root = Path::new("/opt/data/logs");
        let client = Some((10000, 10000));
        let dir = |p: &str| LogTarget::Dir(PathBuf::from(p));
        assert_eq!(
            confine_log(dir("/opt/data/logs/gateways/work"), client, root),
            Ok(dir("/opt/data/logs/gateways/work"))
        );
        for outside in [
            "/etc",
            "/opt/data/logs/../../../root",
            "/opt/data/logsx",
            "/opt/data/logs",
            "relative/logs",
        ] {
            assert!(
                confine_log(dir(outside), client, root).is_err(),
                "{outside} was accepted"
            );
        }
        assert_eq!(
            confine_log(LogTarget::Inherit, client, root),
            Ok(LogTarget::Default)
        );
        assert_eq!(
            confine_log(dir("/etc"), Some((0, 0)), root),
            Ok(dir("/etc"))
        );
        assert!(confine_log(dir("/etc"), None, root).is_err());
    }

    #[test]
    fn a_non_root_client_cannot_register_a_more_privileged_service() {
        let service_user = ra(10000, 10000, &[10000, 44]);
        // Asked for root, or for nothing (which would mean "as the supervisor": root).
        for asked in [Some(ra(0, 0, &[0])), None, Some(ra(10000, 0, &[0]))] {
            assert_eq!(
                confine_run_as(asked, Some((10000, 10000)), Some(&service_user)),
                Some(service_user.clone())
            );
            assert_eq!(
                confine_run_as(None, Some((1234, 1234)), Some(&service_user)),
                Some(ra(1234, 1234, &[1234]))
            );
        }
        assert_eq!(
            confine_run_as(Some(ra(0, 0, &[0])), Some((0, 0)), None),
            Some(ra(0, 0, &[0])),
            "root may"
        );
        assert_eq!(
            confine_run_as(None, None, None),
            Some(ra(65534, 65534, &[65534]))
        );
    }
}
