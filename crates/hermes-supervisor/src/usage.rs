//! What processes use, read from `/proc`: one pass over `/proc/<pid>/stat` gives every
//! process's group, resident memory and CPU time, summed per process group ([`by_group`]).
//!
//! Every service is spawned as a group leader, so the sum over its group is what the service
//! uses, its helpers included; what left the group with `setsid` is added by the sampler from
//! the service's tree ([`crate::tree`]). Resident memory is `/proc/<pid>/stat`'s `rss` (the same pages as
//! `VmRSS` in `/proc/<pid>/status`); shared pages count in each process that maps them, as
//! `ps` and `top` count them. CPU time is `utime + stime` of each live member plus `cutime +
//! cstime` (the children it waited for), so a shell's finished commands still count.
//!
//! Words defined here:
//! * **usage** — the resident memory, CPU ticks and process count of one group ([`Usage`]).

use std::collections::HashMap;
use std::path::Path;

/// What one process group uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// CPU time, clock ticks (see [`ticks_per_second`]).
    pub cpu_ticks: u64,
    /// Processes counted.
    pub processes: u32,
}

/// One process's line of `/proc/<pid>/stat`, the fields we read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Its parent.
    pub ppid: i32,
    /// Its process group.
    pub pgrp: i32,
    /// When it started, clock ticks after boot: with the pid, it names one process.
    pub start: u64,
    /// Resident pages.
    pub rss_pages: u64,
    /// `utime + stime + cutime + cstime`, ticks.
    pub cpu_ticks: u64,
}

/// Parses a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may hold
/// spaces and parentheses itself, so the fields are counted from its *last* `)`.
pub fn parse_stat(line: &str) -> Option<ProcStat> {
    let rest = &line[line.rfind(')')? + 1..];
    // After the name: state(3) ppid(4) pgrp(5) ... utime(14) stime(15) cutime(16) cstime(17)
    // ... rss(24); `fields[0]` is field 3.
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).copied();
    let number = |n: usize| field(n)?.parse::<u64>().ok();
    // cutime and cstime are signed in the kernel's format; negative never happens in practice.
    let signed = |n: usize| field(n)?.parse::<i64>().ok().map(|v| v.max(0) as u64);
    Some(ProcStat {
        ppid: field(4)?.parse().ok()?,
        pgrp: field(5)?.parse().ok()?,
        start: number(22)?,
        rss_pages: signed(24)?,
        cpu_ticks: number(14)? + number(15)? + signed(16)? + signed(17)?,
    })
}

/// Every process group's usage, from one pass over `proc` (`/proc`). Processes that vanish
/// during the pass, or whose line does not parse, are skipped.
pub fn by_group(proc: &Path) -> HashMap<i32, Usage> {
    let mut groups: HashMap<i32, Usage> = HashMap::new();
    for stat in table(proc).values() {
        groups.entry(stat.pgrp).or_default().add(stat);
    }
    groups
}

impl Usage {
    /// Counts one more process.
    pub fn add(&mut self, stat: &ProcStat) {
        self.rss_bytes += stat.rss_pages * page_size();
        self.cpu_ticks += stat.cpu_ticks;
        self.processes += 1;
    }
}

/// Every process, by pid, from one pass over `proc` (`/proc`). Processes that vanish during
/// the pass, or whose line does not parse, are left out.
pub fn table(proc: &Path) -> HashMap<i32, ProcStat> {
    let mut table = HashMap::new();
    let Ok(entries) = std::fs::read_dir(proc) else {
        return table;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(line) = std::fs::read_to_string(proc.join(pid).join("stat")) else {
            continue; // exited since the listing
        };
        if let (Some(stat), Ok(pid)) = (parse_stat(&line), pid.parse::<i32>()) {
            table.insert(pid, stat);
        }
    }
    table
}

/// The clock ticks `/proc` counts CPU time in, per second (`sysconf(_SC_CLK_TCK)`, 100 on
/// every Linux built in this century).
pub fn ticks_per_second() -> u64 {
    sysconf(nix::unistd::SysconfVar::CLK_TCK).unwrap_or(100)
}

fn page_size() -> u64 {
    sysconf(nix::unistd::SysconfVar::PAGE_SIZE).unwrap_or(4096)
}

fn sysconf(var: nix::unistd::SysconfVar) -> Option<u64> {
    nix::unistd::sysconf(var)
        .ok()
        .flatten()
        .and_then(|v| u64::try_from(v).ok())
        .filter(|&v| v > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_parses_whatever_the_command_name_holds() {
        let line = "4242 (we (ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    30 12 5 3 20 0 1 0 100 10485760 2560 18446744073709551615 1 1 0 0 0 0 0";
        let stat = parse_stat(line).unwrap();
        assert_eq!((stat.ppid, stat.pgrp, stat.start), (1, 4242, 100));
        assert_eq!(stat.rss_pages, 2560);
        assert_eq!(stat.cpu_ticks, 30 + 12 + 5 + 3);
        assert_eq!(parse_stat("4242 (short) S 1"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_group_is_counted_as_proc_status_says() {
        let me = nix::unistd::getpgrp().as_raw();
        let usage = by_group(Path::new("/proc"))[&me];
        assert!(usage.processes >= 1);
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let vm_rss_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap();
        // The group may hold other processes (the test harness's), never less than this one.
        assert!(
            usage.rss_bytes * 10 >= vm_rss_kib * 1024 * 9,
            "{usage:?} vs VmRSS {vm_rss_kib} kB"
        );
        assert!(by_group(Path::new("/nonexistent")).is_empty());
    }
}
