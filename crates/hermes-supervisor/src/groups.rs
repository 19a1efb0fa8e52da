//! Process groups: what each service leaves running, and what a killed supervisor left behind.
//!
//! Every service runs in its own process group (pgid = the pid of its main process). Helpers it
//! starts stay in that group unless they leave it on purpose, so the group is the handle on
//! "everything this service started": when the main process exits, the machine SIGKILLs the
//! group and waits (briefly, see [`crate::Timing::group_exit_wait`]) for it to be empty before
//! starting the service again — a helper still holding the service's port would make the new
//! run fail with "Address already in use".
//!
//! A supervisor that is SIGKILLed cannot do that. So each group is recorded in the runtime
//! directory, `<runtime dir>/pgroups/<pgid>`, as `start=<ticks> sid=<sid> service=<name>`, and
//! the record is removed once the group is gone. At start-up, a supervisor on the same runtime
//! directory reads the records it finds and kills the groups that are provably the ones
//! recorded ([`verify`]): a pid that has been recycled is never signalled.
//!
//! Words defined here:
//! * **start time** — field 22 of `/proc/<pid>/stat`, clock ticks after boot at which the
//!   process started; together with the pid it names one process for the life of the system.
//! * **left-over group** — a recorded group that still has members when a supervisor starts.
//!
//! A descendant that calls `setsid`/`setpgid` leaves the group: a running supervisor follows
//! it through the service's tree ([`crate::tree`]); after a killed supervisor, these records
//! do not find it (it is still reaped when it exits, the supervisor being a sub-reaper or
//! PID 1).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Directory of the records, inside the runtime directory.
pub const RECORD_DIR: &str = "pgroups";
/// While a group whose main process exited is younger than this, the loop checks it often
/// (its members may not be our children, so no SIGCHLD says when they are gone).
const RECHECK_EVERY: Duration = Duration::from_millis(10);

/// The fields of `/proc/<pid>/stat` this module needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 3: `R`, `S`, `Z`, ...
    pub state: char,
    /// Field 5.
    pub pgrp: i32,
    /// Field 6.
    pub session: i32,
    /// Field 22: start time in clock ticks after boot.
    pub start: u64,
}

impl ProcStat {
    /// Parses the text of `/proc/<pid>/stat`. The command name (field 2) may contain spaces
    /// and parentheses, so fields are counted from its *last* closing parenthesis.
    pub fn parse(text: &str) -> Option<Self> {
        let rest = text.rsplit_once(')')?.1;
        let f: Vec<&str> = rest.split_whitespace().collect();
        // f[0] is field 3.
        Some(Self {
            state: f.first()?.chars().next()?,
            pgrp: f.get(2)?.parse().ok()?,
            session: f.get(3)?.parse().ok()?,
            start: f.get(19)?.parse().ok()?,
        })
    }

    /// Reads a live process's stat (`None` once it is gone).
    pub fn read(pid: i32) -> Option<Self> {
        Self::parse(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }
}

/// One recorded process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The group id: the pid of the service's main process when it was spawned.
    pub pgid: i32,
    /// That process's start time.
    pub start: u64,
    /// Its session.
    pub sid: i32,
    /// The service.
    pub service: String,
}

impl Record {
    fn to_text(&self) -> String {
        format!(
            "start={} sid={} service={}\n",
            self.start, self.sid, self.service
        )
    }

    /// Parses a record file (`pgid` is its name); `None` for anything malformed.
    pub fn parse(pgid: i32, text: &str) -> Option<Self> {
        let mut start = None;
        let mut sid = None;
        let mut service = None;
        for word in text.split_whitespace() {
            match word.split_once('=')? {
                ("start", v) => start = v.parse().ok(),
                ("sid", v) => sid = v.parse().ok(),
                ("service", v) => service = Some(v.to_string()),
                _ => return None,
            }
        }
        (pgid > 1).then_some(())?;
        Some(Self {
            pgid,
            start: start?,
            sid: sid?,
            service: service?,
        })
    }
}

/// What a record found at start-up refers to now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The recorded group, with this many live members: kill it.
    Ours(usize),
    /// No such group any more.
    Gone,
    /// The pid or group id now belongs to something else: never touch it.
    Recycled,
}

/// Decides what a record refers to, from the recorded group's leader (if a process with that
/// pid exists) and the processes currently in a group with that id.
///
/// * The leader still runs with the recorded start time: the group is ours (a group id cannot
///   be reused while its leader's pid is alive).
/// * A process with that pid runs with another start time: the pid was recycled, so our group
///   had emptied before; whatever carries that group id now is someone else's.
/// * No such process: the group is ours if every member is in the recorded session and
///   started no earlier than the recorded leader (the group id stays taken while any member
///   lives, so only a group that had emptied, and whose id was then recycled, could fail this).
pub fn verify(record: &Record, leader: Option<ProcStat>, members: &[ProcStat]) -> Verdict {
    let live: Vec<&ProcStat> = members.iter().filter(|m| m.state != 'Z').collect();
    match leader {
        Some(l) if l.start == record.start => Verdict::Ours(live.len().max(1)),
        Some(_) => Verdict::Recycled,
        None if live.is_empty() => Verdict::Gone,
        None if live
            .iter()
            .all(|m| m.session == record.sid && m.start >= record.start) =>
        {
            Verdict::Ours(live.len())
        }
        None => Verdict::Recycled,
    }
}

/// Every process whose group id is `pgid`.
fn members_of(pgid: i32) -> Vec<ProcStat> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(ProcStat::read)
        .filter(|s| s.pgrp == pgid)
        .collect()
}

/// Whether a process group still has members (zombies included: ours are reaped promptly).
fn group_exists(pgid: i32) -> bool {
    pgid > 1 && killpg(Pid::from_raw(pgid), None::<Signal>) != Err(Errno::ESRCH)
}

/// A left-over group that was killed at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    /// The service it was recorded for.
    pub service: String,
    /// Its group id.
    pub pgid: i32,
    /// How many live processes it had.
    pub processes: usize,
}

struct Tracked {
    record: Record,
    /// When its main process was reaped (or, for a left-over, killed).
    leader_gone: Option<Instant>,
    /// A previous supervisor's group: its members are not our children, so their zombies
    /// wait for another reaper (which may never come) and only live members count.
    leftover: bool,
}

/// The records of a running supervisor.
pub(crate) struct Groups {
    dir: PathBuf,
    tracked: Vec<Tracked>,
    recheck_for: Duration,
}

impl Groups {
    /// Records live in `<runtime_dir>/pgroups` (created, mode 0700).
    pub(crate) fn open(runtime_dir: &Path, recheck_for: Duration) -> io::Result<Self> {
        let dir = runtime_dir.join(RECORD_DIR);
        fs::create_dir_all(&dir)?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))?;
        Ok(Self {
            dir,
            tracked: Vec::new(),
            recheck_for,
        })
    }

    /// Records the group of a service just spawned (`pid` = its pgid).
    pub(crate) fn record(&mut self, service: &str, pid: i32) -> io::Result<()> {
        let stat = ProcStat::read(pid).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let record = Record {
            pgid: pid,
            start: stat.start,
            sid: stat.session,
            service: service.to_string(),
        };
        fs::write(self.dir.join(pid.to_string()), record.to_text())?;
        self.tracked.push(Tracked {
            record,
            leader_gone: None,
            leftover: false,
        });
        Ok(())
    }

    /// A pid was reaped; if it led a recorded group, that group is now checked for emptiness.
    pub(crate) fn reaped(&mut self, pid: i32, now: Instant) {
        for t in &mut self.tracked {
            if t.record.pgid == pid && t.leader_gone.is_none() {
                t.leader_gone = Some(now);
            }
        }
    }

    /// Groups (whose main process is gone) that have no member left: their records are
    /// removed and their ids returned.
    ///
    /// A left-over group is looked at only for [`Groups::open`]'s `recheck_for` (scanning
    /// `/proc` for live members is not for every wake-up); one still there after that keeps
    /// its record for the next start and is no longer waited for.
    pub(crate) fn gone(&mut self, now: Instant) -> Vec<i32> {
        let mut gone = Vec::new();
        let recheck_for = self.recheck_for;
        self.tracked.retain(|t| {
            let Some(since) = t.leader_gone else {
                return true;
            };
            let pgid = t.record.pgid;
            let empty = !group_exists(pgid)
                || t.leftover && members_of(pgid).iter().all(|m| m.state == 'Z');
            if empty {
                let _ = fs::remove_file(self.dir.join(pgid.to_string()));
                gone.push(pgid);
                return false;
            }
            !(t.leftover && now >= since + recheck_for)
        });
        gone
    }

    /// When the loop should look again, while a group is young enough to be waited for.
    pub(crate) fn recheck_at(&self, now: Instant) -> Option<Instant> {
        self.tracked
            .iter()
            .filter_map(|t| t.leader_gone)
            .any(|gone| now < gone + self.recheck_for)
            .then(|| now + RECHECK_EVERY)
    }

    /// At start-up: kills what the records of a previous supervisor still name (after
    /// [`verify`]), forgets the rest. Killed groups are tracked until they are empty.
    pub(crate) fn stop_leftovers(&mut self, now: Instant) -> Vec<Leftover> {
        let Ok(dir) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut killed = Vec::new();
        for entry in dir.flatten() {
            let Some(pgid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue; // not a record of ours
            };
            let path = entry.path();
            let record = fs::read_to_string(&path)
                .ok()
                .and_then(|text| Record::parse(pgid, &text));
            let Some(record) = record else {
                let _ = fs::remove_file(&path);
                continue;
            };
            match verify(&record, ProcStat::read(pgid), &members_of(pgid)) {
                Verdict::Ours(processes) => {
                    let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
                    killed.push(Leftover {
                        service: record.service.clone(),
                        pgid,
                        processes,
                    });
                    self.tracked.push(Tracked {
                        record,
                        leader_gone: Some(now),
                        leftover: true,
                    });
                }
                Verdict::Gone | Verdict::Recycled => {
                    let _ = fs::remove_file(&path);
                }
            }
        }
        killed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(state: char, pgrp: i32, session: i32, start: u64) -> ProcStat {
        ProcStat {
            state,
            pgrp,
            session,
            start,
        }
    }

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let line = "4242 (evil) 1 2 (x) S 1 4242 4100 34816 4242 4194560 150 0 0 0 1 2 0 0 20 0 1 \
                    0 987654 1000 200 18446744073709551615";
        assert_eq!(ProcStat::parse(line), Some(st('S', 4242, 4100, 987654)));
        let me = ProcStat::read(std::process::id() as i32).expect("our own stat");
        assert_eq!(me.pgrp, nix::unistd::getpgrp().as_raw());
        assert_eq!(me.session, nix::unistd::getsid(None).unwrap().as_raw());
        assert!(me.start > 0);
        assert!(ProcStat::parse("garbage").is_none());
        assert!(ProcStat::parse("1 (x) S 1").is_none());
    }

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let r = Record {
            pgid: 77,
            start: 123,
            sid: 9,
            service: "gateway-work".into(),
        };
        assert_eq!(Record::parse(77, &r.to_text()), Some(r));
        for bad in [
            "",
            "start=1 sid=2",
            "start=x sid=2 service=a",
            "rm -rf /",
            "start=1 sid=2 service=a extra=1",
        ] {
            assert_eq!(Record::parse(77, bad), None, "{bad}");
        }
        assert_eq!(
            Record::parse(1, "start=1 sid=2 service=a"),
            None,
            "never group 1"
        );
    }

    #[test]
    fn only_the_recorded_group_is_ever_ours() {
        let rec = Record {
            pgid: 500,
            start: 1000,
            sid: 40,
            service: "s".into(),
        };
        // Leader alive, same start: ours.
        assert_eq!(
            verify(
                &rec,
                Some(st('S', 500, 40, 1000)),
                &[st('S', 500, 40, 1000)]
            ),
            Verdict::Ours(1)
        );
        // A process with that pid but another start time: recycled, whatever is in the group.
        assert_eq!(
            verify(
                &rec,
                Some(st('S', 500, 40, 5000)),
                &[st('S', 500, 40, 5000)]
            ),
            Verdict::Recycled
        );
        // Leader gone, helpers of the recorded session that started after it: ours.
        assert_eq!(
            verify(
                &rec,
                None,
                &[st('S', 500, 40, 1001), st('R', 500, 40, 1500)]
            ),
            Verdict::Ours(2)
        );
        // A member from another session, or older than the leader: not ours.
        assert_eq!(
            verify(&rec, None, &[st('S', 500, 41, 1001)]),
            Verdict::Recycled
        );
        assert_eq!(
            verify(&rec, None, &[st('S', 500, 40, 999)]),
            Verdict::Recycled
        );
        // Nothing, or only zombies: gone.
        assert_eq!(verify(&rec, None, &[]), Verdict::Gone);
        assert_eq!(verify(&rec, None, &[st('Z', 500, 40, 1001)]), Verdict::Gone);
    }
}
