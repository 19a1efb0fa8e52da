//! Users and groups, read straight from the account files.
//!
//! We parse `/etc/passwd` and `/etc/group` ourselves instead of calling `getpwnam(3)`: a
//! static binary has no NSS, and the files' locations are parameters ([`SystemFiles`]) so
//! tests work on temporary copies and never on this machine's own `/etc`.
//!
//! Words:
//! * *account files*: the passwd file and the group file, as a [`SystemFiles`] pair.
//! * *identity*: everything a privilege drop needs about one user ([`Identity`]): uid,
//!   primary gid, supplementary groups, home and shell.
//! * *entry*: one colon-separated line of an account file. Lines we do not need are never
//!   interpreted, so a malformed line elsewhere (NIS `+` lines, comments) cannot break a
//!   lookup.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::Error;

/// Where the account files live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemFiles {
    /// The passwd file (`name:x:uid:gid:gecos:home:shell`).
    pub passwd: PathBuf,
    /// The group file (`name:x:gid:member,member`).
    pub group: PathBuf,
}

impl SystemFiles {
    /// The machine's own `/etc/passwd` and `/etc/group`.
    pub fn system() -> Self {
        SystemFiles {
            passwd: PathBuf::from("/etc/passwd"),
            group: PathBuf::from("/etc/group"),
        }
    }

    /// Account files at custom locations (tests, chroots).
    pub fn new(passwd: impl Into<PathBuf>, group: impl Into<PathBuf>) -> Self {
        SystemFiles {
            passwd: passwd.into(),
            group: group.into(),
        }
    }
}

/// One user as a privilege drop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// User name (also `USER` and `LOGNAME` after a drop).
    pub name: String,
    /// Numeric user id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary groups, primary gid first, no duplicates (what `initgroups(3)` would
    /// set, plus any extra groups added with [`Identity::add_groups`]).
    pub groups: Vec<u32>,
    /// Home directory from the passwd entry (`HOME` after a drop).
    pub home: PathBuf,
    /// Login shell from the passwd entry, `/bin/sh` when empty (`SHELL` after a drop).
    pub shell: PathBuf,
}

impl Identity {
    /// Looks up `name` in the account files: its passwd entry and every group that lists it
    /// as a member.
    pub fn lookup(files: &SystemFiles, name: &str) -> Result<Identity, Error> {
        let passwd = read(&files.passwd)?;
        let entry =
            find_passwd(&passwd, &files.passwd, name)?.ok_or_else(|| Error::UnknownUser {
                name: name.to_owned(),
                path: files.passwd.clone(),
            })?;
        let group = read(&files.group)?;
        let mut identity = Identity {
            name: name.to_owned(),
            uid: entry.uid,
            gid: entry.gid,
            groups: vec![entry.gid],
            home: entry.home,
            shell: entry.shell,
        };
        identity.add_groups(member_gids(&group, name));
        Ok(identity)
    }

    /// Looks up the account whose uid is `uid` (the first such passwd line), as [`lookup`]
    /// does by name; `Ok(None)` when no line has that uid.
    ///
    /// [`lookup`]: Identity::lookup
    pub fn lookup_uid(files: &SystemFiles, uid: u32) -> Result<Option<Identity>, Error> {
        let passwd = read(&files.passwd)?;
        let name = lines(&passwd).find_map(|(_, line)| {
            let f = fields(line);
            (f.len() == 7 && parse_id(f[2]) == Some(uid))
                .then(|| String::from_utf8_lossy(f[0]).into_owned())
        });
        name.map(|name| Identity::lookup(files, &name)).transpose()
    }

    /// Adds supplementary groups (for instance the gids of mounted devices), skipping any the
    /// identity already has. Order is kept so the result is deterministic.
    pub fn add_groups(&mut self, gids: impl IntoIterator<Item = u32>) {
        for gid in gids {
            if !self.groups.contains(&gid) {
                self.groups.push(gid);
            }
        }
    }

    /// The environment variables a drop to this identity sets: `HOME`, `USER`, `LOGNAME`,
    /// `SHELL` from the passwd entry, and the XDG base directories under that home.
    /// Everything else in the environment is meant to pass through unchanged.
    pub fn env_overrides(&self) -> Vec<(String, String)> {
        let home = self.home.to_string_lossy().into_owned();
        // Joined as strings so each value is exactly `$HOME/<dir>` (and a home of `/` gives
        // `/.config`, not `//.config`).
        let under = |rel: &str| {
            if home.ends_with('/') {
                format!("{home}{rel}")
            } else {
                format!("{home}/{rel}")
            }
        };
        vec![
            ("HOME".to_owned(), home.clone()),
            ("USER".to_owned(), self.name.clone()),
            ("LOGNAME".to_owned(), self.name.clone()),
            (
                "SHELL".to_owned(),
                self.shell.to_string_lossy().into_owned(),
            ),
            ("XDG_CONFIG_HOME".to_owned(), under(".config")),
            ("XDG_DATA_HOME".to_owned(), under(".local/share")),
            ("XDG_STATE_HOME".to_owned(), under(".local/state")),
            ("XDG_CACHE_HOME".to_owned(), under(".cache")),
        ]
    }
}

/// The gid of group `name`, or `None` when the group file has no such group.
pub fn group_gid(files: &SystemFiles, name: &str) -> Result<Option<u32>, Error> {
    let group = read(&files.group)?;
    Ok(find_group(&group, &files.group, name)?.map(|(_, gid)| gid))
}

/// A parsed passwd entry.
#[derive(Debug)]
pub(crate) struct PasswdEntry {
    /// 1-based line number in the passwd file.
    pub(crate) line: usize,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) home: PathBuf,
    pub(crate) shell: PathBuf,
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

/// Lines of an account file with their 1-based numbers, without the line terminator.
pub(crate) fn lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l))
}

fn fields(line: &[u8]) -> Vec<&[u8]> {
    line.split(|b| *b == b':').collect()
}

pub(crate) fn parse_id(field: &[u8]) -> Option<u32> {
    if field.is_empty() || !field.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(field).ok()?.parse().ok()
}

/// The passwd entry named `name`. Only that line is validated.
pub(crate) fn find_passwd(
    bytes: &[u8],
    path: &Path,
    name: &str,
) -> Result<Option<PasswdEntry>, Error> {
    for (line_no, line) in lines(bytes) {
        let f = fields(line);
        if f[0] != name.as_bytes() {
            continue;
        }
        let malformed = |reason| Error::MalformedEntry {
            path: path.to_owned(),
            line: line_no,
            name: name.to_owned(),
            reason,
        };
        if f.len() != 7 {
            return Err(malformed("expected 7 colon-separated fields"));
        }
        let uid = parse_id(f[2]).ok_or_else(|| malformed("uid is not a number"))?;
        let gid = parse_id(f[3]).ok_or_else(|| malformed("gid is not a number"))?;
        let shell = if f[6].is_empty() {
            PathBuf::from("/bin/sh")
        } else {
            path_of(f[6])
        };
        return Ok(Some(PasswdEntry {
            line: line_no,
            uid,
            gid,
            home: path_of(f[5]),
            shell,
        }));
    }
    Ok(None)
}

/// The group entry named `name`: its line number and gid. Only that line is validated.
pub(crate) fn find_group(
    bytes: &[u8],
    path: &Path,
    name: &str,
) -> Result<Option<(usize, u32)>, Error> {
    for (line_no, line) in lines(bytes) {
        let f = fields(line);
        if f[0] != name.as_bytes() {
            continue;
        }
        let malformed = |reason| Error::MalformedEntry {
            path: path.to_owned(),
            line: line_no,
            name: name.to_owned(),
            reason,
        };
        if f.len() != 4 {
            return Err(malformed("expected 4 colon-separated fields"));
        }
        let gid = parse_id(f[2]).ok_or_else(|| malformed("gid is not a number"))?;
        return Ok(Some((line_no, gid)));
    }
    Ok(None)
}

/// Gids of every well-formed group whose member list names `user`.
fn member_gids(bytes: &[u8], user: &str) -> Vec<u32> {
    lines(bytes)
        .filter_map(|(_, line)| {
            let f = fields(line);
            if f.len() != 4 {
                return None;
            }
            let member = f[3]
                .split(|b| *b == b',')
                .any(|m| m.trim_ascii() == user.as_bytes());
            if member { parse_id(f[2]) } else { None }
        })
        .collect()
}

fn path_of(field: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(field))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                          +nis-line\n\
                          hermes:x:10000:10000::/opt/data:\n\
                          other:x:1000:1000:Other:/home/other:/bin/zsh\n";
    const GROUP: &str = "root:x:0:\n\
                         video:x:44:hermes,other\n\
                         hermes:x:10000:\n\
                         extra:x:10001:other, hermes\n\
                         broken-line\n\
                         docker:x:999:other\n";

    fn files(dir: &Path) -> SystemFiles {
        let files = SystemFiles::new(dir.join("passwd"), dir.join("group"));
        std::fs::write(&files.passwd, PASSWD).unwrap();
        std::fs::write(&files.group, GROUP).unwrap();
        files
    }

    #[test]
    fn lookup_reads_passwd_and_memberships() {
        let dir = tempfile::tempdir().unwrap();
        let id = Identity::lookup(&files(dir.path()), "hermes").unwrap();
        assert_eq!(id.uid, 10000);
        assert_eq!(id.gid, 10000);
        assert_eq!(id.groups, vec![10000, 44, 10001]);
        assert_eq!(id.home, PathBuf::from("/opt/data"));
        // An empty shell field means /bin/sh, as login(1) does.
        assert_eq!(id.shell, PathBuf::from("/bin/sh"));
    }

    #[test]
    fn lookup_by_uid_finds_the_same_account() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        let by_uid = Identity::lookup_uid(&files, 10000).unwrap().unwrap();
        assert_eq!(by_uid, Identity::lookup(&files, "hermes").unwrap());
        assert_eq!(Identity::lookup_uid(&files, 4242).unwrap(), None);
    }

    #[test]
    fn unknown_user_is_a_typed_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Identity::lookup(&files(dir.path()), "nobody-here").unwrap_err();
        assert!(matches!(err, Error::UnknownUser { ref name, .. } if name == "nobody-here"));
    }

    #[test]
    fn malformed_target_line_is_reported_with_its_line_number() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        std::fs::write(
            &files.passwd,
            "root:x:0:0:root:/root:/bin/sh\nhermes:x:abc:1::/h:\n",
        )
        .unwrap();
        let err = Identity::lookup(&files, "hermes").unwrap_err();
        assert!(
            matches!(err, Error::MalformedEntry { line: 2, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn missing_file_is_a_read_error() {
        let files = SystemFiles::new("/nonexistent/passwd", "/nonexistent/group");
        assert!(matches!(
            Identity::lookup(&files, "hermes"),
            Err(Error::Read { .. })
        ));
    }

    #[test]
    fn env_overrides_come_from_the_entry() {
        let id = Identity {
            name: "hermes".into(),
            uid: 10000,
            gid: 10000,
            groups: vec![10000],
            home: "/opt/data".into(),
            shell: "/bin/sh".into(),
        };
        let env = id.env_overrides();
        let get = |k: &str| {
            env.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("HOME"), Some("/opt/data"));
        assert_eq!(get("USER"), Some("hermes"));
        assert_eq!(get("LOGNAME"), Some("hermes"));
        assert_eq!(get("SHELL"), Some("/bin/sh"));
        assert_eq!(get("XDG_CONFIG_HOME"), Some("/opt/data/.config"));
        assert_eq!(get("XDG_DATA_HOME"), Some("/opt/data/.local/share"));
        assert_eq!(get("XDG_STATE_HOME"), Some("/opt/data/.local/state"));
        assert_eq!(get("XDG_CACHE_HOME"), Some("/opt/data/.cache"));
        assert_eq!(env.len(), 8, "nothing else is overridden");
    }

    #[test]
    fn add_groups_skips_duplicates() {
        let mut id = Identity {
            name: "u".into(),
            uid: 1,
            gid: 1,
            groups: vec![1, 44],
            home: "/".into(),
            shell: "/bin/sh".into(),
        };
        id.add_groups([44, 990, 1, 990]);
        assert_eq!(id.groups, vec![1, 44, 990]);
        // A home of `/` does not produce a double slash.
        let env = id.env_overrides();
        assert!(env.contains(&("XDG_CACHE_HOME".to_owned(), "/.cache".to_owned())));
    }

    #[test]
    fn group_gid_finds_groups_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let files = files(dir.path());
        assert_eq!(group_gid(&files, "docker").unwrap(), Some(999));
        assert_eq!(group_gid(&files, "absent").unwrap(), None);
    }
}
