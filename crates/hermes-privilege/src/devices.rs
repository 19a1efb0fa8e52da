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
