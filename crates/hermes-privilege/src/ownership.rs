//! Ownership repair of the data volume at boot: targeted, symlink-proof, mount-aware.
//!
//! Files on the data volume end up owned by the wrong user after a UID remap, a root
//! `docker exec` from an older image, or a restore. Repair re-owns exactly what Hermes
//! owns and nothing else:
//!
//! * the *volume root* itself, non-recursively ([`RepairPlan::chown_root`]);
//! * *top-level files* on an allowlist ([`FileRule`]): each is re-owned and made `u+rw`, or
//!   tightened to at most a mode (`.env` 0600, `config.yaml` 0640; stricter modes are kept)
//!   every boot. A file not on the list
//!   (a host secret someone dropped there) is left alone;
//! * *subtrees* (`profiles`, `logs`, ...): every entry under them is re-owned.
//!
//! The lists are the caller's ([`RepairPlan::data_volume`]): `hermes init` passes those of
//! `hermes_home::volume`, which owns the names of the files on the volume.
//!
//! Invariants, because the volume is often a bind mount of the operator's own directory:
//! * never a blanket recursive chown of the volume root;
//! * never through a symlink: paths are walked with `openat(O_NOFOLLOW)` from the root's
//!   directory fd, files are changed through an fd opened with `O_NOFOLLOW` or with
//!   `fchownat(AT_SYMLINK_NOFOLLOW)`. A named path (top-level file, subtree or one of its
//!   parents) that is a symlink is refused with the warning
//!   ``refusing <action> through symlinked path `<path>` `` and the repair continues.
//!   Symlinks met *inside* a subtree are re-owned themselves (that changes the link, never
//!   its target) and not followed, and counted in [`RepairReport::links_not_followed`];
//! * never a file with more than one hard link: the other name may be anywhere on the same
//!   filesystem (`/etc/shadow` linked into `logs/`), and re-owning the inode would hand that
//!   file to the service user. Such files are skipped with a warning and counted in
//!   [`RepairReport::hardlinks_skipped`]. Entries are inspected and changed through one
//!   `O_PATH | O_NOFOLLOW` descriptor, so the name cannot be swapped between the check and
//!   the change;
//! * never across a mount: a subtree that is itself a separate mount, or a directory below
//!   it on another filesystem, is not descended into.
//!
//! Failures (`EPERM` when started without root, a rootless container) never abort: they are
//! counted and reported as warnings. Nothing is printed; the caller renders the
//! [`RepairReport`].

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fchmod, fstat, fstatat};
use nix::unistd::{Gid, Uid, fchown, fchownat};

use crate::Error;

/// Subtrees deeper than this are not descended into (a warning says so). Each level holds
/// one open directory fd.
const MAX_DEPTH: usize = 256;

/// At most this many warnings are kept; the rest are only counted.
const MAX_WARNINGS: usize = 32;

/// One allowlisted top-level file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRule {
    /// File name directly under the volume root.
    pub name: String,
    /// The most permission bits the file may keep (owner read/write always), or `None` for
    /// "owner can read and write"
    /// (`u+rw`, other bits kept).
    pub mode: Option<u32>,
}

impl FileRule {
    /// A file that is re-owned and made `u+rw`.
    pub fn owned(name: &str) -> Self {
        FileRule {
            name: name.to_owned(),
            mode: None,
        }
    }

    /// A file that is re-owned and given exactly `mode`.
    pub fn with_mode(name: &str, mode: u32) -> Self {
        FileRule {
            name: name.to_owned(),
            mode: Some(mode),
        }
    }
}

/// What to repair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairPlan {
    /// The data volume root (`HERMES_HOME`). May itself be reached through a symlink (it is
    /// the operator's configuration); nothing below it may.
    pub root: PathBuf,
    /// Re-own the root directory itself (never recursively).
    pub chown_root: bool,
    /// Allowlisted top-level files.
    pub files: Vec<FileRule>,
    /// Subtrees to re-own recursively, relative to the root (`platforms/pairing`).
    pub subtrees: Vec<PathBuf>,
    /// Top-level subtrees that may also be a symlink the volume itself holds (the durable
    /// install target, a link to its active generation): as a link it is re-owned itself,
    /// never followed, and not reported; as a directory it is a subtree like the others.
    pub links: Vec<PathBuf>,
}

impl RepairPlan {
    /// The plan for a data volume at `root`: the root itself (never recursively), the
    /// top-level `files` and the `subtrees` (relative to the root). The caller names them —
    /// `hermes init` passes the lists of `hermes_home::volume` — and exactly those are
    /// repaired.
    pub fn data_volume<P: Into<PathBuf>>(
        root: impl Into<PathBuf>,
        files: impl IntoIterator<Item = FileRule>,
        subtrees: impl IntoIterator<Item = P>,
    ) -> Self {
        RepairPlan {
            root: root.into(),
            chown_root: true,
            files: files.into_iter().collect(),
            subtrees: subtrees.into_iter().map(Into::into).collect(),
            links: Vec::new(),
        }
    }

    /// The plan with `subtrees` added to its own.
    #[must_use]
    pub fn with_subtrees_added<P: Into<PathBuf>>(
        mut self,
        subtrees: impl IntoIterator<Item = P>,
    ) -> Self {
        self.subtrees.extend(subtrees.into_iter().map(Into::into));
        self
    }

    /// The plan with `links` (see [`RepairPlan::links`]).
    #[must_use]
    pub fn with_links<P: Into<PathBuf>>(mut self, links: impl IntoIterator<Item = P>) -> Self {
        self.links = links.into_iter().map(Into::into).collect();
        self
    }
}

/// What a repair did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Entries whose owner or group was changed.
    pub changed: usize,
    /// Entries that were already owned by the target ids.
    pub unchanged: usize,
    /// Files whose permission bits were changed.
    pub modes_set: usize,
    /// Symlinks inside subtrees that were not followed.
    pub links_not_followed: usize,
    /// Files not re-owned because they have more than one hard link.
    pub hardlinks_skipped: usize,
    /// Named paths refused because they are, or go through, a symlink.
    pub refused: usize,
    /// Operations that failed (their first few are in `warnings`).
    pub failed: usize,
    /// Human-readable warnings, at most a few dozen; the counts above are complete.
    pub warnings: Vec<String>,
    /// Warnings left out of `warnings` because it was full.
    pub warnings_not_listed: usize,
}

impl RepairReport {
    fn warn(&mut self, message: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(message);
        } else {
            self.warnings_not_listed += 1;
        }
    }

    fn fail(&mut self, what: &str, path: &Path, errno: Errno) {
        self.failed += 1;
        let hint = if errno == Errno::EPERM {
            " (not root, or a rootless container?)"
        } else {
            ""
        };
        self.warn(format!(
            "cannot {what} `{}`: {}{hint}",
            path.display(),
            errno.desc()
        ));
    }

    fn skip_hardlinked(&mut self, path: &Path, links: u64) {
        self.hardlinks_skipped += 1;
        self.warn(format!(
            "not re-owning `{}`: it has {links} hard links, and another name for it may be \
             outside the data volume",
            path.display()
        ));
    }

    fn refuse(&mut self, action: &str, path: &Path) {
        self.refused += 1;
        self.warn(format!(
            "refusing {action} through symlinked path `{}`",
            path.display()
        ));
    }
}

/// Re-owns what `plan` names to `uid:gid`, following the invariants in the module doc.
///
/// Only failing to open the root is an error; everything else becomes part of the report.
pub fn repair_ownership(plan: &RepairPlan, uid: u32, gid: u32) -> Result<RepairReport, Error> {
    let root_err = |errno: Errno| Error::RepairRoot {
        path: plan.root.clone(),
        source: std::io::Error::from_raw_os_error(errno as i32),
    };
    let root = open(
        &plan.root,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(root_err)?;
    let root_stat = fstat(&root).map_err(root_err)?;
    let ids = Ids { uid, gid };
    let mut report = RepairReport::default();

    if plan.chown_root {
        ids.chown_fd(&root, &root_stat, &plan.root, &mut report);
    }
    for rule in &plan.files {
        repair_file(root.as_fd(), &plan.root, rule, ids, &mut report);
    }
    for link in &plan.links {
        if repair_link(root.as_fd(), &plan.root, link, ids, &mut report) {
            continue;
        }
        repair_subtree(
            root.as_fd(),
            &plan.root,
            link,
            root_stat.st_dev,
            ids,
            &mut report,
        );
    }
    for subtree in &plan.subtrees {
        repair_subtree(
            root.as_fd(),
            &plan.root,
            subtree,
            root_stat.st_dev,
            ids,
            &mut report,
        );
    }
    Ok(report)
}

#[derive(Debug, Clone, Copy)]
struct Ids {
    uid: u32,
    gid: u32,
}

impl Ids {
    fn owns(&self, st: &FileStat) -> bool {
        st.st_uid == self.uid && st.st_gid == self.gid
    }

    fn chown_fd(&self, fd: &OwnedFd, st: &FileStat, path: &Path, report: &mut RepairReport) {
        if self.owns(st) {
            report.unchanged += 1;
            return;
        }
        match fchown(
            fd,
            Some(Uid::from_raw(self.uid)),
            Some(Gid::from_raw(self.gid)),
        ) {
            Ok(()) => report.changed += 1,
            Err(errno) => report.fail("chown", path, errno),
        }
    }

    /// Re-owns the entry behind an `O_PATH` descriptor (a symlink itself, never its target).
    fn chown_path_fd(&self, fd: &OwnedFd, st: &FileStat, path: &Path, report: &mut RepairReport) {
        if self.owns(st) {
            report.unchanged += 1;
            return;
        }
        let (uid, gid) = (Some(Uid::from_raw(self.uid)), Some(Gid::from_raw(self.gid)));
        let flags = AtFlags::AT_EMPTY_PATH | AtFlags::AT_SYMLINK_NOFOLLOW;
        match fchownat(fd, c"", uid, gid, flags) {
            Ok(()) => report.changed += 1,
            Err(errno) => report.fail("chown", path, errno),
        }
    }
}

/// When the top-level entry `rel` is a symlink: re-owns the link itself (never its target)
/// and returns true; false when it is anything else (then it is repaired as a subtree).
fn repair_link(
    root: BorrowedFd<'_>,
    root_path: &Path,
    rel: &Path,
    ids: Ids,
    report: &mut RepairReport,
) -> bool {
    let mut parts = rel.components();
    let (Some(std::path::Component::Normal(name)), None) = (parts.next(), parts.next()) else {
        return false;
    };
    let Ok(cname) = CString::new(name.as_bytes()) else {
        return false;
    };
    let path = root_path.join(name);
    let fd = match openat(
        root,
        cname.as_c_str(),
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(_) => return false,
    };
    match fstat(&fd) {
        Ok(st) if is_kind(&st, SFlag::S_IFLNK) => {
            ids.chown_path_fd(&fd, &st, &path, report);
            true
        }
        _ => false,
    }
}

fn is_kind(st: &FileStat, kind: SFlag) -> bool {
    (st.st_mode & SFlag::S_IFMT.bits()) == kind.bits()
}

fn repair_file(
    root: BorrowedFd<'_>,
    root_path: &Path,
    rule: &FileRule,
    ids: Ids,
    report: &mut RepairReport,
) {
    let path = root_path.join(&rule.name);
    let Ok(name) = CString::new(rule.name.as_bytes()) else {
        return;
    };
    if rule.name.contains('/') {
        // Only names directly under the root are files here; deeper paths are subtrees.
        report.warn(format!(
            "skipping `{}`: not a top-level file name",
            rule.name
        ));
        return;
    }
    match fstatat(root, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => return,
        Err(errno) => return report.fail("inspect", &path, errno),
        Ok(st) if is_kind(&st, SFlag::S_IFLNK) => return report.refuse("chown/chmod", &path),
        Ok(st) if !is_kind(&st, SFlag::S_IFREG) => return,
        Ok(_) => {}
    }
    // Re-check through the fd we change: the name could be swapped for a symlink between
    // the stat and the open, and O_NOFOLLOW turns that into ELOOP instead of following it.
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd = match openat(root, name.as_c_str(), flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ELOOP) => return report.refuse("chown/chmod", &path),
        Err(errno) => return report.fail("open", &path, errno),
    };
    let st = match fstat(&fd) {
        Ok(st) if is_kind(&st, SFlag::S_IFREG) => st,
        Ok(_) => return,
        Err(errno) => return report.fail("inspect", &path, errno),
    };
    if st.st_nlink > 1 {
        return report.skip_hardlinked(&path, st.st_nlink as u64);
    }
    ids.chown_fd(&fd, &st, &path, report);
    let current = st.st_mode & 0o7777;
    // The owner may always read and write; a rule's mode is the most it may have beyond that,
    // so a file the user made stricter (the original writes `config.yaml` 0600) stays so.
    let wanted = match rule.mode {
        Some(most) => (current & most) | 0o600,
        None => current | 0o600,
    } & 0o7777;
    if wanted != current {
        match fchmod(&fd, Mode::from_bits_truncate(wanted)) {
            Ok(()) => report.modes_set += 1,
            Err(errno) => report.fail("chmod", &path, errno),
        }
    }
}

fn repair_subtree(
    root: BorrowedFd<'_>,
    root_path: &Path,
    rel: &Path,
    root_dev: u64,
    ids: Ids,
    report: &mut RepairReport,
) {
    // Walk each component with O_NOFOLLOW so `platforms -> /etc` cannot redirect us.
    let mut path = root_path.to_owned();
    let mut current: Option<OwnedFd> = None;
    for component in rel.components() {
        let std::path::Component::Normal(part) = component else {
            report.warn(format!(
                "skipping subtree `{}`: not a plain relative path",
                rel.display()
            ));
            return;
        };
        path.push(part);
        let Ok(name) = CString::new(part.as_bytes()) else {
            return;
        };
        let dir = current.as_ref().map(|fd| fd.as_fd()).unwrap_or(root);
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        match openat(dir, name.as_c_str(), flags, Mode::empty()) {
            Ok(fd) => current = Some(fd),
            Err(Errno::ENOENT) => return,
            Err(errno @ (Errno::ELOOP | Errno::ENOTDIR)) => {
                // O_NOFOLLOW|O_DIRECTORY on a symlink gives ELOOP or ENOTDIR depending on
                // the kernel; look at the entry itself to tell a symlink from a file.
                match fstatat(dir, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(st) if is_kind(&st, SFlag::S_IFLNK) => {
                        report.refuse("recursive chown", &path)
                    }
                    _ => report.fail("open directory", &path, errno),
                }
                return;
            }
            Err(errno) => return report.fail("open directory", &path, errno),
        }
    }
    let Some(top) = current else { return };
    let st = match fstat(&top) {
        Ok(st) => st,
        Err(errno) => return report.fail("inspect", &path, errno),
    };
    if st.st_dev != root_dev {
        report.warn(format!(
            "not re-owning `{}`: it is a separate mount, not part of the data volume",
            path.display()
        ));
        return;
    }
    ids.chown_fd(&top, &st, &path, report);
    walk(top, &path, root_dev, ids, 1, report);
}

/// Re-owns every entry below the directory `dir` (already re-owned by the caller).
fn walk(dir: OwnedFd, path: &Path, dev: u64, ids: Ids, depth: usize, report: &mut RepairReport) {
    if depth > MAX_DEPTH {
        report.warn(format!(
            "not descending into `{}`: deeper than {MAX_DEPTH} levels",
            path.display()
        ));
        return;
    }
    let mut dir = match Dir::from_fd(dir) {
        Ok(dir) => dir,
        Err(errno) => return report.fail("list", path, errno),
    };
    let mut names: Vec<CString> = Vec::new();
    for entry in dir.iter() {
        match entry {
            Ok(entry) => {
                let name = entry.file_name();
                if name.to_bytes() != b"." && name.to_bytes() != b".." {
                    names.push(name.to_owned());
                }
            }
            Err(errno) => {
                report.fail("list", path, errno);
                break;
            }
        }
    }
    let fd = dir.as_fd();
    for name in names {
        let child = path.join(OsStr::from_bytes(name.to_bytes()));
        // One descriptor for the entry itself (a symlink is opened as the link): what is
        // inspected is what is changed.
        let entry = match openat(
            fd,
            name.as_c_str(),
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(entry) => entry,
            Err(Errno::ENOENT) => continue,
            Err(errno) => {
                report.fail("inspect", &child, errno);
                continue;
            }
        };
        let st = match fstat(&entry) {
            Ok(st) => st,
            Err(errno) => {
                report.fail("inspect", &child, errno);
                continue;
            }
        };
        if !is_kind(&st, SFlag::S_IFDIR) && st.st_nlink > 1 {
            report.skip_hardlinked(&child, st.st_nlink as u64);
            continue;
        }
        ids.chown_path_fd(&entry, &st, &child, report);
        if is_kind(&st, SFlag::S_IFLNK) {
            report.links_not_followed += 1;
            continue;
        }
        if !is_kind(&st, SFlag::S_IFDIR) {
            continue;
        }
        if st.st_dev != dev {
            report.warn(format!(
                "not descending into `{}`: separate mount",
                child.display()
            ));
            continue;
        }
        // Through the entry's own descriptor: the directory we inspected, whatever its
        // name points to now.
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        match openat(&entry, c".", flags, Mode::empty()) {
            Ok(sub) => walk(sub, &child, dev, ids, depth + 1, report),
            Err(errno) => report.fail("open directory", &child, errno),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_volume_plan_is_exactly_what_it_is_given() {
        let plan = RepairPlan::data_volume(
            "/opt/data",
            [
                FileRule::with_mode(".env", 0o600),
                FileRule::owned("SOUL.md"),
            ],
            ["profiles", "platforms/pairing"],
        );
        assert!(plan.chown_root);
        assert_eq!(plan.root, PathBuf::from("/opt/data"));
        assert_eq!(
            plan.files,
            [
                FileRule::with_mode(".env", 0o600),
                FileRule::owned("SOUL.md")
            ]
        );
        assert_eq!(
            plan.subtrees,
            [
                PathBuf::from("profiles"),
                PathBuf::from("platforms/pairing")
            ]
        );
    }

    #[test]
    fn warnings_are_capped_but_counted() {
        let mut report = RepairReport::default();
        for i in 0..(MAX_WARNINGS + 8) {
            report.fail("chown", Path::new(&format!("/v/{i}")), Errno::EPERM);
        }
        assert_eq!(report.failed, MAX_WARNINGS + 8);
        assert_eq!(report.warnings.len(), MAX_WARNINGS);
        assert_eq!(report.warnings_not_listed, 8);
        assert!(
            report.warnings[0].starts_with("cannot chown `/v/0`"),
            "{:?}",
            report.warnings[0]
        );
        assert!(report.warnings[0].contains("rootless"));
    }

    #[test]
    fn unusual_subtree_and_file_names_are_skipped_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let (uid, gid) = (
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        );
        let plan = RepairPlan {
            root: dir.path().to_owned(),
            chown_root: false,
            files: vec![FileRule::owned("a/b")],
            subtrees: vec![PathBuf::from("../escape"), PathBuf::from("/abs")],
            links: Vec::new(),
        };
        let report = repair_ownership(&plan, uid, gid).unwrap();
        assert_eq!(report.warnings.len(), 3, "{report:?}");
        assert_eq!(report.changed, 0);
    }
}
