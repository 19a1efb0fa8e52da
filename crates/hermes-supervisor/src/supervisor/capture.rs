//! Service output: from the pipes to the log files and the mirror.
//!
//! Each captured service has two non-blocking pipes (stdout, stderr). A wake-up reads at most
//! [`READ_CHUNK`] from a ready pipe, so one chatty service cannot starve the
//! others; [`LineBuffer`] splits the bytes into lines (an over-long line is truncated, and what
//! is cut is counted). Every line — and every `[hermes]` note about a service — goes through
//! [`Supervisor::emit`]: timestamped into the service's log file (rotated; owned by the user the
//! service runs as) and mirrored as `[service] line` through the bounded, never-blocking
//! [`MirrorOut`]. A pipe is dropped at EOF; on the way out the pipes are drained, boundedly.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use hermes_privilege::Owner;
use nix::unistd::Uid;

use super::{READ_CHUNK, Supervisor};
use crate::logs::{Chunk, LineBuffer, LogFile, timestamp};
use crate::mirror::MirrorOut;
use crate::spec::{LogTarget, ServiceSpec};

/// One output pipe of a service (its stdout or its stderr).
pub(super) struct Pipe {
    pub(super) fd: File,
    pub(super) service: String,
    pub(super) log: Option<PathBuf>,
    pub(super) lines: LineBuffer,
}

impl Supervisor {
    /// Where a service's log goes (`None`: mirrored only, or not captured at all).
    pub(super) fn log_dir_for(&self, spec: &ServiceSpec) -> Option<PathBuf> {
        match &spec.log {
            LogTarget::Default => Some(self.opts.log_dir.join(&spec.name)),
            LogTarget::Dir(d) => Some(d.clone()),
            LogTarget::MirrorOnly | LogTarget::Inherit => None,
        }
    }

    /// Reads one chunk from pipe `i` and emits the lines it completes; drops the pipe at EOF.
    pub(super) fn read_pipe(&mut self, i: usize, out: &mut MirrorOut<'_>) {
        let mut buf = vec![0u8; READ_CHUNK];
        let (chunks, eof) = {
            let p = &mut self.pipes[i];
            match p.fd.read(&mut buf) {
                Ok(0) => (p.lines.finish(), true),
                Ok(n) => (p.lines.push(&buf[..n]), false),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    (Vec::new(), false)
                }
                Err(_) => (p.lines.finish(), true),
            }
        };
        let (service, log) = (self.pipes[i].service.clone(), self.pipes[i].log.clone());
        for c in chunks {
            match c {
                Chunk::Line(l) => self.emit(&service, log.as_deref(), &l, out),
                Chunk::Truncated(mut l) => {
                    l.extend_from_slice(b" [truncated]");
                    self.emit(&service, log.as_deref(), &l, out);
                }
                Chunk::Dropped(n) => {
                    let msg = format!("[hermes] dropped {n} bytes of an over-long line");
                    self.emit(&service, log.as_deref(), msg.as_bytes(), out);
                }
            }
        }
        if eof {
            self.pipes.swap_remove(i);
        }
    }

    /// On the way out: what the pipes still hold, boundedly.
    pub(super) fn drain_pipes(&mut self, out: &mut MirrorOut<'_>) {
        // Bounded final drain: whatever is already in the pipes, at most a few chunks each.
        for _ in 0..16 {
            if self.pipes.is_empty() {
                break;
            }
            for i in (0..self.pipes.len()).rev() {
                self.read_pipe(i, out);
            }
        }
    }

    /// Who owns what a service's log creates: the user the service runs as, when a root
    /// supervisor runs it as someone else (a log the service user cannot rotate or read back
    /// through `hermes service logs` is no use, and root-owned files on the volume are what
    /// the boot would otherwise have to repair).
    fn log_owner(&self, service: &str) -> Option<Owner> {
        if !Uid::effective().is_root() {
            return None;
        }
        let ra = self.machine.spec(service)?.run_as.as_ref()?;
        Some(Owner {
            uid: ra.uid,
            gid: ra.gid,
        })
    }

    /// Writes a line to the service's log file and mirrors it as `[service] line`.
    pub(super) fn emit(
        &mut self,
        service: &str,
        log: Option<&Path>,
        line: &[u8],
        out: &mut MirrorOut<'_>,
    ) {
        if let Some(dir) = log {
            let rotation = self.opts.rotation;
            let owner = self.log_owner(service);
            let file = self
                .logs
                .entry(dir.to_path_buf())
                .or_insert_with(|| LogFile::new(dir, rotation).owned_by(owner));
            let mut rec = Vec::with_capacity(line.len() + 32);
            rec.extend_from_slice(timestamp().as_bytes());
            rec.push(b' ');
            rec.extend_from_slice(line);
            rec.push(b'\n');
            file.write_line(&rec);
        }
        out.line(service, line, Instant::now());
    }
}
