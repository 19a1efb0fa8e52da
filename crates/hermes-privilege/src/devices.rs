//! Device groups: the extra gids the service user needs for mounted host devices.
//!
//! A Docker socket bind-mounted at `/var/run/docker.sock` and GPU nodes under `/dev/dri` are
//! owned by host groups the image knows nothing about. Instead of editing `/etc/group`
//! (`groupadd hostdocker; usermod -aG`), the drop simply adds the devices' gids to the
//! identity's supplementary groups ([`crate::Identity::add_groups`]). `docker run
//! --group-add` alone is not enough because a drop *sets* the group list.
//!
//! Words: a *device path* is a path that should be a socket or a device node; its *device
//! gid* is the group that owns it. Gid 0 is never returned: joining the root group would
//! give the service user far more than the device.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Where the Docker socket is mounted, in the order they are checked.
pub const DOCKER_SOCKETS: [&str; 2] = ["/var/run/docker.sock", "/run/docker.sock"];

/// Where GPU render and card nodes live.
pub const DRI_DIR: &str = "/dev/dri";

/// The Docker socket paths plus every entry of `dri_dir` (normally [`DRI_DIR`]). A missing
/// directory yields no entries.
pub fn default_device_paths(dri_dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = DOCKER_SOCKETS.iter().map(PathBuf::from).collect();
    if let Ok(entries) = std::fs::read_dir(dri_dir) {
        let mut nodes: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        nodes.sort();
        paths.extend(nodes);
    }
    paths
}

/// The gids owning the sockets and device nodes among `paths`, in order, without duplicates
/// and never 0. Paths that are missing, unreadable, or not a socket or device node are
/// skipped. Symlinks are followed (`/var/run` is usually a link to `/run`): we only read the
/// owner, never change anything.
pub fn device_gids<P: AsRef<Path>>(paths: &[P]) -> Vec<u32> {
    let mut gids = Vec::new();
    for path in paths {
        let Ok(meta) = std::fs::metadata(path) else {
            continue;
        };
        let kind = meta.file_type();
        if !(kind.is_socket() || kind.is_char_device() || kind.is_block_device()) {
            continue;
        }
        let gid = meta.gid();
        if gid != 0 && !gids.contains(&gid) {
            gids.push(gid);
        }
    }
    gids
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn missing_and_non_device_paths_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let regular = dir.path().join("docker.sock");
        std::fs::write(&regular, "not a socket").unwrap();
        let gids = device_gids(&[regular, dir.path().join("absent"), dir.path().to_owned()]);
        assert!(gids.is_empty(), "{gids:?}");
    }

    #[test]
    fn socket_gid_is_returned_and_gid_zero_never() {
        if crate::test_support::skip_unless_root("giving a socket another group needs root") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let sock = |name: &str, gid: u32| {
            let path = dir.path().join(name);
            let listener = UnixListener::bind(&path).unwrap();
            std::os::unix::fs::chown(&path, Some(0), Some(gid)).unwrap();
            (path, listener)
        };
        let (docker, _l1) = sock("docker.sock", 998);
        let (root_owned, _l2) = sock("card0", 0);
        let (render, _l3) = sock("renderD128", 64000);
        let (render_dup, _l4) = sock("renderD129", 64000);
        let gids = device_gids(&[docker, root_owned, render, render_dup]);
        assert_eq!(gids, vec![998, 64000]);
    }

    #[test]
    fn default_paths_list_docker_sockets_then_dri_nodes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("renderD128"), "").unwrap();
        std::fs::write(dir.path().join("card0"), "").unwrap();
        let paths = default_device_paths(dir.path());
        assert_eq!(paths[0], PathBuf::from("/var/run/docker.sock"));
        assert_eq!(paths[1], PathBuf::from("/run/docker.sock"));
        assert_eq!(
            &paths[2..],
            &[dir.path().join("card0"), dir.path().join("renderD128")]
        );
        let none = default_device_paths(&dir.path().join("absent"));
        assert_eq!(none.len(), 2);
    }
}

/// Records `user`'s membership of the device groups `gids` in the group file, so a session
/// started outside PID 1 (`docker exec -u hermes c sh`) gets them too — the drop already adds
/// them for services. A group that exists with that gid gains `user` as a member; a gid no
/// group has gets a new `host-gid-<gid>` group. Returns what changed, in words; the file is
/// rewritten (atomically, keeping its mode and owner) only when something changed.
///
/// # Errors
/// [`crate::Error::Read`] / [`crate::Error::Write`] for the group file.
pub fn record_device_groups(
    files: &crate::SystemFiles,
    user: &str,
    gids: &[u32],
) -> Result<Vec<String>, crate::Error> {
    let bytes = crate::account::read(&files.group)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut changes = Vec::new();
    for &gid in gids.iter().filter(|&&g| g != 0) {
        let found = lines.iter_mut().find(|line| {
            line.split(':')
                .nth(2)
                .and_then(|g| g.trim().parse::<u32>().ok())
                == Some(gid)
        });
        match found {
            Some(line) => {
                let mut fields: Vec<String> = line.split(':').map(str::to_owned).collect();
                while fields.len() < 4 {
                    fields.push(String::new());
                }
                let is_member = fields[3].split(',').any(|m| m.trim() == user);
                if !is_member {
                    if !fields[3].is_empty() {
                        fields[3].push(',');
                    }
                    fields[3].push_str(user);
                    changes.push(format!(
                        "added `{user}` to group `{}` (gid {gid})",
                        fields[0]
                    ));
                    *line = fields.join(":");
                }
            }
            None => {
                lines.push(format!("host-gid-{gid}:x:{gid}:{user}"));
                changes.push(format!(
                    "created group `host-gid-{gid}` (gid {gid}) for `{user}`"
                ));
            }
        }
    }
    if !changes.is_empty() {
        let mut out = lines.join("\n");
        out.push('\n');
        crate::remap::write_atomic(&files.group, out.as_bytes())?;
    }
    Ok(changes)
}

#[cfg(test)]
mod record_tests {
    use super::*;

    #[test]
    fn device_groups_are_recorded_once() {
        let dir = tempfile::tempdir().unwrap();
        let files = crate::SystemFiles {
            passwd: dir.path().join("passwd"),
            group: dir.path().join("group"),
        };
        std::fs::write(&files.passwd, "hermes:x:10000:10000::/opt/data:/bin/sh\n").unwrap();
        std::fs::write(
            &files.group,
            "root:x:0:\ndocker:x:999:\nvideo:x:44:alice\nhermes:x:10000:\n",
        )
        .unwrap();
        let changes = record_device_groups(&files, "hermes", &[999, 44, 123, 0]).unwrap();
        assert_eq!(changes.len(), 3, "{changes:?}");
        let text = std::fs::read_to_string(&files.group).unwrap();
        assert!(text.contains("docker:x:999:hermes\n"), "{text}");
        assert!(text.contains("video:x:44:alice,hermes\n"), "{text}");
        assert!(text.contains("host-gid-123:x:123:hermes\n"), "{text}");
        assert!(
            text.starts_with("root:x:0:\n"),
            "gid 0 is never joined: {text}"
        );
        // Again: nothing to do, nothing written.
        assert!(
            record_device_groups(&files, "hermes", &[999, 44, 123])
                .unwrap()
                .is_empty()
        );
        assert_eq!(std::fs::read_to_string(&files.group).unwrap(), text);
    }
}
