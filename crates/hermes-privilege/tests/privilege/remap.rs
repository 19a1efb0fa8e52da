//! UID/GID remap on temporary copies of passwd and group: valid requests rewrite exactly the
//! service user's fields, invalid ones are ignored with a warning and leave the files
//! byte-identical, and an unchanged request writes nothing at all.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use hermes_privilege::{Env, IdChange, IdRequest, Identity, SystemFiles, remap};

// Deliberately untidy: a comment, a NIS line, odd spacing in a gecos field, another user
// sharing the hermes gid, and a group file without a trailing newline.
const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                      # local accounts\n\
                      +@netgroup\n\
                      hermes:x:10000:10000:Hermes  Agent , ,:/opt/data:/bin/sh\n\
                      other:x:10000:10000::/home/other:/bin/false\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
const GROUP: &str = "root:x:0:\n\
                     video:x:44:hermes\n\
                     hermes:x:10000:\n\
                     nogroup:x:65534:";

fn setup(dir: &Path) -> SystemFiles {
    let files = SystemFiles::new(dir.join("passwd"), dir.join("group"));
    std::fs::write(&files.passwd, PASSWD).unwrap();
    std::fs::write(&files.group, GROUP).unwrap();
    std::fs::set_permissions(&files.passwd, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&files.group, std::fs::Permissions::from_mode(0o644)).unwrap();
    files
}

fn env(pairs: &[(&str, &str)]) -> Env {
    pairs.iter().map(|(k, v)| (*k, *v)).collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn valid_remap_rewrites_only_the_service_entries() {
    let dir = tempfile::tempdir().unwrap();
    let files = setup(dir.path());
    let request = IdRequest::from_env(&env(&[("HERMES_UID", "1000"), ("HERMES_GID", "1001")]));
    let report = remap(&files, "hermes", "hermes", &request).unwrap();

    assert_eq!(
        report.uid,
        IdChange::Changed {
            from: 10000,
            to: 1000
        }
    );
    assert_eq!(
        report.gid,
        IdChange::Changed {
            from: 10000,
            to: 1001
        }
    );
    assert!(report.changed());
    assert!(report.warnings.is_empty());
    assert_eq!(
        read(&files.passwd),
        PASSWD.replace(
            "hermes:x:10000:10000:Hermes  Agent",
            "hermes:x:1000:1001:Hermes  Agent"
        )
    );
    assert_eq!(
        read(&files.group),
        GROUP.replace("hermes:x:10000:", "hermes:x:1001:")
    );
    // Mode kept, no temp file left behind.
    let mode = std::fs::metadata(&files.passwd)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o644);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    let identity = Identity::lookup(&files, "hermes").unwrap();
    assert_eq!((identity.uid, identity.gid), (1000, 1001));
    assert_eq!(identity.groups, vec![1001, 44]);
}

#[test]
fn invalid_values_are_ignored_with_warnings_and_files_stay_byte_identical() {
    for bad in ["abc", "0", "65535", "-1", ""] {
        let dir = tempfile::tempdir().unwrap();
        let files = setup(dir.path());
        let request = IdRequest::from_env(&env(&[("HERMES_UID", bad), ("PGID", bad)]));
        let report = remap(&files, "hermes", "hermes", &request).unwrap();
        assert_eq!(report.uid, IdChange::NotRequested(10000), "{bad:?}");
        assert_eq!(report.gid, IdChange::NotRequested(10000), "{bad:?}");
        assert!(!report.changed());
        let vars: Vec<_> = report
            .warnings
            .iter()
            .map(|w| (w.var, w.value.as_str()))
            .collect();
        assert_eq!(vars, vec![("HERMES_UID", bad), ("PGID", bad)], "{bad:?}");
        assert!(
            report.warnings[0]
                .to_string()
                .starts_with("ignoring `HERMES_UID=")
        );
        assert_eq!(read(&files.passwd), PASSWD, "{bad:?}");
        assert_eq!(read(&files.group), GROUP, "{bad:?}");
    }
}

#[test]
fn unchanged_request_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let files = setup(dir.path());
    let inode = |p: &Path| std::fs::metadata(p).unwrap().ino();
    let before = (inode(&files.passwd), inode(&files.group));
    let request = IdRequest::from_env(&env(&[("PUID", "10000"), ("PGID", "10000")]));
    let report = remap(&files, "hermes", "hermes", &request).unwrap();
    assert_eq!(report.uid, IdChange::Unchanged(10000));
    assert_eq!(report.gid, IdChange::Unchanged(10000));
    assert!(!report.changed());
    // An atomic rewrite would have produced new inodes.
    assert_eq!((inode(&files.passwd), inode(&files.group)), before);
}

#[test]
fn uid_only_remap_leaves_the_group_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let files = setup(dir.path());
    let group_inode = std::fs::metadata(&files.group).unwrap().ino();
    let request = IdRequest::from_env(&env(&[("PUID", "99")]));
    let report = remap(&files, "hermes", "hermes", &request).unwrap();
    assert_eq!(
        report.uid,
        IdChange::Changed {
            from: 10000,
            to: 99
        }
    );
    assert_eq!(report.gid, IdChange::NotRequested(10000));
    assert!(read(&files.passwd).contains("\nhermes:x:99:10000:"));
    assert_eq!(std::fs::metadata(&files.group).unwrap().ino(), group_inode);
}

#[test]
fn missing_service_user_or_group_is_an_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let files = setup(dir.path());
    let request = IdRequest::from_env(&env(&[("PUID", "99")]));
    let err = remap(&files, "ghost", "hermes", &request).unwrap_err();
    assert!(err.to_string().contains("no user `ghost`"), "{err}");
    let err = remap(&files, "hermes", "ghost", &request).unwrap_err();
    assert!(err.to_string().contains("no group `ghost`"), "{err}");
    assert_eq!(read(&files.passwd), PASSWD);
}

#[test]
fn uid_remap_keeps_a_primary_gid_that_names_another_group() {
    let dir = tempfile::tempdir().unwrap();
    let files = setup(dir.path());
    // hermes's primary group is `users` (100), not the `hermes` group.
    let passwd = PASSWD.replace("hermes:x:10000:10000:", "hermes:x:10000:100:");
    std::fs::write(&files.passwd, &passwd).unwrap();
    let nothing = remap(&files, "hermes", "hermes", &IdRequest::default()).unwrap();
    assert!(!nothing.changed());
    assert_eq!(read(&files.passwd), passwd);
    let request = IdRequest::from_env(&env(&[("PUID", "1000")]));
    remap(&files, "hermes", "hermes", &request).unwrap();
    assert_eq!(
        read(&files.passwd),
        passwd.replace("hermes:x:10000:100:", "hermes:x:1000:100:")
    );
    assert_eq!(read(&files.group), GROUP);
}
