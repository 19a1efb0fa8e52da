//! UID/GID remap: give the service user the operator's ids, without `usermod`.
//!
//! Words:
//! * *id request*: the uid/gid the operator asked for through `HERMES_UID`/`HERMES_GID`
//!   (or their aliases `PUID`/`PGID`; `HERMES_*` wins), after validation ([`IdRequest`]).
//!   A valid id is digits only and between 1 and 65534: 0 would make the service user root,
//!   65535 is `(uint16_t)-1`, the historical "no id". Anything else is ignored and
//!   reported as an [`IdWarning`], never an error: a typo must not stop the container.
//! * *remap*: rewriting the service user's passwd entry (uid and primary gid fields) and its
//!   group entry (gid field) to match the request ([`remap`]). Every other line, and every
//!   other field of those lines, is kept byte for byte. Each changed file is replaced
//!   atomically: temp file in the same directory, same mode and owner, fsync, rename, fsync
//!   of the directory. Nothing is written when the ids already match.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::account::{find_group, find_passwd, parse_id, read};
use crate::{Env, Error, SystemFiles};

/// Variables naming the requested uid, strongest first.
pub const UID_VARS: [&str; 2] = ["HERMES_UID", "PUID"];
/// Variables naming the requested gid, strongest first.
pub const GID_VARS: [&str; 2] = ["HERMES_GID", "PGID"];

/// Smallest id a remap accepts.
pub const MIN_ID: u32 = 1;
/// Largest id a remap accepts.
pub const MAX_ID: u32 = 65534;

/// The ids the operator asked for, after validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdRequest {
    /// Requested uid, if a valid one was given.
    pub uid: Option<u32>,
    /// Requested gid, if a valid one was given.
    pub gid: Option<u32>,
    /// Values that were given but ignored.
    pub warnings: Vec<IdWarning>,
}

/// A remap variable whose value was ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdWarning {
    /// The variable (`HERMES_UID`, `PUID`, ...).
    pub var: &'static str,
    /// Its value, verbatim.
    pub value: String,
}

impl fmt::Display for IdWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ignoring `{}={}`: expected a whole number from {MIN_ID} to {MAX_ID}",
            self.var, self.value
        )
    }
}

impl IdRequest {
    /// Reads `HERMES_UID`/`PUID` and `HERMES_GID`/`PGID` from `env`.
    ///
    /// For each id the first variable that is set and non-empty is used (an empty
    /// `HERMES_UID` falls back to `PUID`, as `${HERMES_UID:-$PUID}` did). If it is invalid
    /// the id is not requested and a warning is returned; a set-but-empty variable with no
    /// fallback is also warned about.
    pub fn from_env(env: &Env) -> Self {
        let mut warnings = Vec::new();
        let uid = pick(env, UID_VARS, &mut warnings);
        let gid = pick(env, GID_VARS, &mut warnings);
        IdRequest { uid, gid, warnings }
    }
}

fn pick(env: &Env, vars: [&'static str; 2], warnings: &mut Vec<IdWarning>) -> Option<u32> {
    let chosen = vars
        .iter()
        .find_map(|var| env.get(var).filter(|v| !v.is_empty()).map(|v| (*var, v)));
    match chosen {
        Some((var, value)) => {
            let id = validate(value);
            if id.is_none() {
                warnings.push(IdWarning {
                    var,
                    value: value.to_owned(),
                });
            }
            id
        }
        None => {
            if let Some(var) = vars.iter().find(|var| env.get(var).is_some()) {
                warnings.push(IdWarning {
                    var,
                    value: String::new(),
                });
            }
            None
        }
    }
}

/// A valid remap id: ASCII digits only (no sign, no spaces) in `MIN_ID..=MAX_ID`.
pub fn validate(value: &str) -> Option<u32> {
    parse_id(value.as_bytes()).filter(|id| (MIN_ID..=MAX_ID).contains(id))
}

/// What happened to one id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdChange {
    /// No valid id was requested; the current one stays.
    NotRequested(u32),
    /// The requested id is already the current one; nothing was written for it.
    Unchanged(u32),
    /// The id was rewritten.
    Changed {
        /// The id before.
        from: u32,
        /// The id now.
        to: u32,
    },
}

impl IdChange {
    /// The id in force after the remap.
    pub fn current(&self) -> u32 {
        match *self {
            IdChange::NotRequested(id) | IdChange::Unchanged(id) => id,
            IdChange::Changed { to, .. } => to,
        }
    }

    fn decide(current: u32, requested: Option<u32>) -> Self {
        match requested {
            None => IdChange::NotRequested(current),
            Some(id) if id == current => IdChange::Unchanged(current),
            Some(to) => IdChange::Changed { from: current, to },
        }
    }
}

/// The result of a [`remap`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemapReport {
    /// The service user's uid.
    pub uid: IdChange,
    /// The service group's gid.
    pub gid: IdChange,
    /// Ignored values, from the request.
    pub warnings: Vec<IdWarning>,
}

impl RemapReport {
    /// Whether any account file was rewritten (then ownership repair should run).
    pub fn changed(&self) -> bool {
        matches!(self.uid, IdChange::Changed { .. }) || matches!(self.gid, IdChange::Changed { .. })
    }
}

/// Rewrites `user`'s passwd entry and `group`'s group entry to the requested ids.
///
/// When the group's gid changes, the passwd entry's primary gid follows it (as `groupmod -g`
/// does for a user whose primary group it is). Files are only written when something
/// changes; after a change, re-run [`crate::Identity::lookup`] and ownership repair.
pub fn remap(
    files: &SystemFiles,
    user: &str,
    group: &str,
    request: &IdRequest,
) -> Result<RemapReport, Error> {
    let passwd = read(&files.passwd)?;
    let (pw_line, pw_uid, pw_gid) = find_passwd_line(&passwd, &files.passwd, user)?;
    let group_bytes = read(&files.group)?;
    let (gr_line, gr_gid) =
        find_group(&group_bytes, &files.group, group)?.ok_or_else(|| Error::UnknownGroup {
            name: group.to_owned(),
            path: files.group.clone(),
        })?;

    let uid = IdChange::decide(pw_uid, request.uid);
    let gid = IdChange::decide(gr_gid, request.gid);
    // The passwd entry's primary gid follows a changed group gid; when the group is not
    // remapped the field is left exactly as it is, even if it names another group.
    let new_pw_gid = match gid {
        IdChange::Changed { to, .. } => to,
        _ => pw_gid,
    };

    if uid.current() != pw_uid || new_pw_gid != pw_gid {
        let rewritten = replace_fields(
            &passwd,
            pw_line,
            &[(2, uid.current().to_string()), (3, new_pw_gid.to_string())],
        );
        write_atomic(&files.passwd, &rewritten)?;
    }
    if let IdChange::Changed { to, .. } = gid {
        let rewritten = replace_fields(&group_bytes, gr_line, &[(2, to.to_string())]);
        write_atomic(&files.group, &rewritten)?;
    }
    Ok(RemapReport {
        uid,
        gid,
        warnings: request.warnings.clone(),
    })
}

/// Line number, uid and gid of `user`'s passwd entry.
fn find_passwd_line(bytes: &[u8], path: &Path, user: &str) -> Result<(usize, u32, u32), Error> {
    let entry = find_passwd(bytes, path, user)?.ok_or_else(|| Error::UnknownUser {
        name: user.to_owned(),
        path: path.to_owned(),
    })?;
    Ok((entry.line, entry.uid, entry.gid))
}

/// `bytes` with fields of line `line_no` (1-based) replaced; everything else verbatim.
fn replace_fields(bytes: &[u8], line_no: usize, replacements: &[(usize, String)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + 8);
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        if i + 1 != line_no {
            out.extend_from_slice(line);
            continue;
        }
        for (j, field) in line.split(|b| *b == b':').enumerate() {
            if j > 0 {
                out.push(b':');
            }
            match replacements.iter().find(|(k, _)| *k == j) {
                Some((_, value)) => out.extend_from_slice(value.as_bytes()),
                None => out.extend_from_slice(field),
            }
        }
    }
    out
}

/// Replaces `path` with `contents` atomically, keeping its mode and owner. A symlinked
/// account file is resolved first, so the link survives and its target is replaced.
pub(crate) fn write_atomic(path: &Path, contents: &[u8]) -> Result<(), Error> {
    let fail = |source: io::Error| Error::Write {
        path: path.to_owned(),
        source,
    };
    let real = fs::canonicalize(path).map_err(fail)?;
    let meta = fs::metadata(&real).map_err(fail)?;
    let dir = real
        .parent()
        .map(Path::to_owned)
        .unwrap_or_else(|| PathBuf::from("/"));
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.hermes-tmp.{}", std::process::id()));

    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        file.write_all(contents)?;
        file.set_permissions(fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        std::os::unix::fs::fchown(&file, Some(meta.uid()), Some(meta.gid()))?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, &real)?;
        File::open(&dir)?.sync_all()
    })();
    if result.is_err() {
        // Best effort: a leftover temp file is harmless but untidy.
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Env {
        pairs.iter().map(|(k, v)| (*k, *v)).collect()
    }

    #[test]
    fn valid_ids_are_taken() {
        let req = IdRequest::from_env(&env(&[("HERMES_UID", "1000"), ("HERMES_GID", "65534")]));
        assert_eq!((req.uid, req.gid), (Some(1000), Some(65534)));
        assert!(req.warnings.is_empty());
        assert_eq!(validate("1"), Some(1));
    }

    #[test]
    fn hermes_vars_win_over_puid_pgid() {
        let req = IdRequest::from_env(&env(&[
            ("HERMES_UID", "2000"),
            ("PUID", "1000"),
            ("HERMES_GID", "2001"),
            ("PGID", "1001"),
        ]));
        assert_eq!((req.uid, req.gid), (Some(2000), Some(2001)));
        let req = IdRequest::from_env(&env(&[("PUID", "99"), ("PGID", "100")]));
        assert_eq!((req.uid, req.gid), (Some(99), Some(100)));
    }

    #[test]
    fn invalid_values_are_ignored_with_a_warning() {
        for bad in [
            "abc",
            "0",
            "65535",
            "-1",
            "",
            " 1000",
            "1e3",
            "+5",
            "99999999999",
        ] {
            let req = IdRequest::from_env(&env(&[("HERMES_UID", bad)]));
            assert_eq!(req.uid, None, "{bad:?} accepted");
            assert_eq!(
                req.warnings,
                vec![IdWarning {
                    var: "HERMES_UID",
                    value: bad.to_owned()
                }],
                "{bad:?}"
            );
        }
        let w = IdWarning {
            var: "PGID",
            value: "abc".into(),
        };
        assert_eq!(
            w.to_string(),
            "ignoring `PGID=abc`: expected a whole number from 1 to 65534"
        );
    }

    #[test]
    fn empty_hermes_var_falls_back_to_alias_and_invalid_one_does_not() {
        let req = IdRequest::from_env(&env(&[("HERMES_UID", ""), ("PUID", "1000")]));
        assert_eq!(req.uid, Some(1000));
        assert!(req.warnings.is_empty());
        let req = IdRequest::from_env(&env(&[("HERMES_UID", "abc"), ("PUID", "1000")]));
        assert_eq!(req.uid, None);
        assert_eq!(req.warnings.len(), 1);
    }

    #[test]
    fn nothing_set_means_nothing_requested() {
        let req = IdRequest::from_env(&Env::default());
        assert_eq!(req, IdRequest::default());
    }

    #[test]
    fn replace_fields_touches_only_the_target_line() {
        let input = b"a:x:1:1::/a:/bin/sh\nhermes:x:10000:10000::/opt/data:\nz:x:3:3\n";
        let out = replace_fields(input, 2, &[(2, "1000".into()), (3, "100".into())]);
        assert_eq!(
            out,
            b"a:x:1:1::/a:/bin/sh\nhermes:x:1000:100::/opt/data:\nz:x:3:3\n"
        );
        // No trailing newline stays no trailing newline.
        let out = replace_fields(b"g:x:5:", 1, &[(2, "6".into())]);
        assert_eq!(out, b"g:x:6:");
    }
}
