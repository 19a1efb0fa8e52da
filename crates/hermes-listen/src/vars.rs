//! Reading the protocol's variables: what was passed, before any fd is touched.

use std::os::fd::RawFd;

use crate::{Error, HANDOVER_FROM, LISTEN_FDNAMES, LISTEN_FDS, LISTEN_PID};

/// The name systemd gives a passed fd when `LISTEN_FDNAMES` is not set.
pub(crate) const UNNAMED: &str = "unknown";

/// The fds and names the variables pass to the process `pid`, fds numbered from `start`;
/// `None` when they pass nothing to it.
///
/// As `sd_listen_fds`: without `LISTEN_PID`, or when it names another process (the variables
/// were inherited from a parent they were meant for), nothing was passed to this one.
pub(crate) fn passed(
    lookup: &dyn Fn(&str) -> Option<String>,
    start: RawFd,
    pid: u32,
) -> Result<Option<Vec<(RawFd, String)>>, Error> {
    let Some(for_pid) = lookup(LISTEN_PID) else {
        return Ok(None);
    };
    if parse_pid(LISTEN_PID, &for_pid)? != pid {
        return Ok(None);
    }
    let Some(count) = lookup(LISTEN_FDS) else {
        return Ok(None);
    };
    let malformed = |reason| Error::Malformed {
        var: LISTEN_FDS,
        value: count.clone(),
        reason,
    };
    let n: usize = count
        .trim()
        .parse()
        .map_err(|_| malformed("not a number of fds"))?;
    let last = RawFd::try_from(n)
        .ok()
        .and_then(|n| start.checked_add(n))
        .ok_or_else(|| malformed("more fds than a process can have"))?;
    let names: Vec<String> = match lookup(LISTEN_FDNAMES) {
        // `"".split(':')` is one empty name; with no fd, an empty list names none.
        Some(names) if n == 0 && names.is_empty() => Vec::new(),
        Some(names) => names.split(':').map(str::to_string).collect(),
        None => vec![UNNAMED.to_string(); n],
    };
    if names.len() != n {
        return Err(Error::NameCount {
            fds: n,
            names: names.len(),
        });
    }
    Ok(Some((start..last).zip(names).collect()))
}

/// The predecessor named by `HERMES_HANDOVER_FROM`, if any (unset or empty: none).
pub(crate) fn handover_from(lookup: &dyn Fn(&str) -> Option<String>) -> Result<Option<u32>, Error> {
    match lookup(HANDOVER_FROM) {
        Some(value) if !value.trim().is_empty() => parse_pid(HANDOVER_FROM, &value).map(Some),
        _ => Ok(None),
    }
}

fn parse_pid(var: &'static str, value: &str) -> Result<u32, Error> {
    match value.trim().parse::<u32>() {
        Ok(pid) if pid > 0 && i32::try_from(pid).is_ok() => Ok(pid),
        _ => Err(Error::Malformed {
            var,
            value: value.to_string(),
            reason: "not a process id",
        }),
    }
}

/// Checks that `name` can stand in `LISTEN_FDNAMES` (systemd's rule for a fd name).
pub(crate) fn check_name(name: &str) -> Result<(), Error> {
    let bad = |reason| {
        Err(Error::BadName {
            name: name.to_string(),
            reason,
        })
    };
    if name.is_empty() || name.len() > 255 {
        return bad("it must be 1 to 255 characters long");
    }
    if name.contains(':') {
        return bad("it contains `:`, which separates the names");
    }
    if !name.bytes().all(|b| b.is_ascii_graphic()) {
        return bad("it has a character that is not printable ASCII");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn fds_are_numbered_from_start_with_their_names() {
        let lookup = vars(&[
            (LISTEN_PID, "42"),
            (LISTEN_FDS, "2"),
            (LISTEN_FDNAMES, "api:metrics"),
        ]);
        let got = passed(&lookup, 3, 42).unwrap().unwrap();
        assert_eq!(got, [(3, "api".to_string()), (4, "metrics".to_string())]);
    }

    #[test]
    fn without_names_every_fd_is_unknown_as_in_systemd() {
        let lookup = vars(&[(LISTEN_PID, "42"), (LISTEN_FDS, "2")]);
        let got = passed(&lookup, 3, 42).unwrap().unwrap();
        assert_eq!(got, [(3, UNNAMED.to_string()), (4, UNNAMED.to_string())]);
    }

    #[test]
    fn variables_meant_for_another_process_pass_nothing() {
        let lookup = vars(&[(LISTEN_PID, "41"), (LISTEN_FDS, "1")]);
        assert_eq!(passed(&lookup, 3, 42).unwrap(), None);
        let no_pid = vars(&[(LISTEN_FDS, "1"), (LISTEN_FDNAMES, "api")]);
        assert_eq!(passed(&no_pid, 3, 42).unwrap(), None);
        let no_fds = vars(&[(LISTEN_PID, "42")]);
        assert_eq!(passed(&no_fds, 3, 42).unwrap(), None);
        let none = vars(&[(LISTEN_PID, "42"), (LISTEN_FDS, "0"), (LISTEN_FDNAMES, "")]);
        assert_eq!(passed(&none, 3, 42).unwrap(), Some(vec![]));
    }

    #[test]
    fn malformed_values_are_errors_that_name_the_variable() {
        let err = passed(&vars(&[(LISTEN_PID, "me")]), 3, 42).unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed `LISTEN_PID=me`: not a process id"
        );
        let err = passed(&vars(&[(LISTEN_PID, "42"), (LISTEN_FDS, "-1")]), 3, 42).unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed `LISTEN_FDS=-1`: not a number of fds"
        );
        let huge = vars(&[(LISTEN_PID, "42"), (LISTEN_FDS, "4294967296")]);
        assert!(matches!(
            passed(&huge, 3, 42).unwrap_err(),
            Error::Malformed {
                var: LISTEN_FDS,
                ..
            }
        ));
        let names = vars(&[
            (LISTEN_PID, "42"),
            (LISTEN_FDS, "2"),
            (LISTEN_FDNAMES, "api"),
        ]);
        assert_eq!(
            passed(&names, 3, 42).unwrap_err().to_string(),
            "`LISTEN_FDNAMES` has 1 name(s) but `LISTEN_FDS` passes 2 socket(s)"
        );
    }

    #[test]
    fn the_predecessor_is_a_pid_or_nothing() {
        assert_eq!(handover_from(&vars(&[])).unwrap(), None);
        assert_eq!(handover_from(&vars(&[(HANDOVER_FROM, "")])).unwrap(), None);
        assert_eq!(
            handover_from(&vars(&[(HANDOVER_FROM, "1234")])).unwrap(),
            Some(1234)
        );
        for bad in ["0", "x", "-5", "99999999999"] {
            assert!(
                handover_from(&vars(&[(HANDOVER_FROM, bad)])).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn names_follow_systemds_rule() {
        check_name("api").unwrap();
        for bad in ["", "a:b", "a b", "é", &"x".repeat(256)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
