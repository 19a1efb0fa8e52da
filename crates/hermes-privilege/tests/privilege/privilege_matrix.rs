//! The privilege matrix: fork a child, drop it to a temporary identity, and check what the
//! kernel and the environment say afterwards — for the default ids, for remapped ids, and
//! through the root-exec shim with a device group.
//!
//! Forking while other test threads might hold locks (the allocator, the environment) would
//! make the children flaky, and the children must inherit a known environment. So the test
//! runs alone in a process of its own: [`privilege_matrix`] starts this test binary again
//! with only itself selected, one test thread and that environment ([`ALONE_VAR`] set), and
//! the cases run one after another in that process. Needs root (CI is root); prints a skip
//! reason otherwise.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;

use hermes_privilege::{
    Env, IdChange, IdRequest, Identity, SystemFiles, drop_to, remap, shim_drop,
};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::{ForkResult, fork, pipe};

const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                      daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n\
                      hermes:x:10000:10000::/opt/data:/bin/sh\n";
const GROUP: &str = "root:x:0:\n\
                     daemon:x:1:\n\
                     hermes:x:10000:\n\
                     hermes-extra:x:10001:hermes\n";

fn temp_files(dir: &Path) -> SystemFiles {
    let files = SystemFiles::new(dir.join("passwd"), dir.join("group"));
    std::fs::write(&files.passwd, PASSWD).unwrap();
    std::fs::write(&files.group, GROUP).unwrap();
    files
}

/// What a dropped child reports back, one value per field.
#[derive(Debug, PartialEq)]
struct Observed {
    uid: u32,
    euid: u32,
    gid: u32,
    groups: Vec<u32>,
    home: String,
    user: String,
    logname: String,
    xdg_state: String,
    kept: String,
    regain_root: bool,
}

fn parse(report: &str) -> Observed {
    let mut f = report.trim_end_matches('\n').split('|');
    let mut next = || {
        f.next()
            .unwrap_or_else(|| panic!("short report: {report:?}"))
            .to_owned()
    };
    let num = |s: String| {
        s.parse::<u32>()
            .unwrap_or_else(|_| panic!("bad report: {report:?}"))
    };
    Observed {
        uid: num(next()),
        euid: num(next()),
        gid: num(next()),
        groups: {
            let g = next();
            let mut v: Vec<u32> = g
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.parse().unwrap())
                .collect();
            v.sort();
            v
        },
        home: next(),
        user: next(),
        logname: next(),
        xdg_state: next(),
        kept: next(),
        regain_root: next() == "1",
    }
}

/// Runs `body` in a forked child and returns what it wrote to the pipe. The child only
/// reports through the pipe and leaves with `_exit`, so no test machinery runs twice.
fn in_child(body: impl FnOnce() -> Result<(), hermes_privilege::Error>) -> String {
    let (read_end, write_end): (OwnedFd, OwnedFd) = pipe().unwrap();
    // SAFETY (test): this process runs this one test only (see the module doc), so no other
    // thread holds a lock the child could need; the child exits with `_exit`.
    #[allow(unsafe_code)]
    match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            drop(read_end);
            let line = match body() {
                Ok(()) => observe(),
                Err(err) => format!("ERR {err}: {:?}", err.hint()),
            };
            let _ = nix::unistd::write(&write_end, line.as_bytes());
            #[allow(unsafe_code)]
            // SAFETY: `_exit` ends the child without running the parent's destructors.
            unsafe {
                libc::_exit(0)
            }
        }
        ForkResult::Parent { child } => {
            drop(write_end);
            let mut out = String::new();
            std::fs::File::from(read_end)
                .read_to_string(&mut out)
                .unwrap();
            assert_eq!(waitpid(child, None).unwrap(), WaitStatus::Exited(child, 0));
            out
        }
    }
}

/// Runs in the dropped child: what the kernel and the environment now say.
fn observe() -> String {
    let groups: Vec<String> = nix::unistd::getgroups()
        .unwrap()
        .iter()
        .map(|g| g.as_raw().to_string())
        .collect();
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let regain = nix::unistd::setuid(nix::unistd::Uid::from_raw(0)).is_ok();
    format!(
        "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
        nix::unistd::getuid(),
        nix::unistd::geteuid(),
        nix::unistd::getgid(),
        groups.join(","),
        var("HOME"),
        var("USER"),
        var("LOGNAME"),
        var("XDG_STATE_HOME"),
        var("HERMES_TEST_KEEP"),
        if regain { "1" } else { "0" },
    )
}

/// Set in the process [`run_alone`] starts: the matrix runs there.
const ALONE_VAR: &str = "HERMES_PRIVILEGE_MATRIX_ALONE";

/// Runs [`privilege_matrix`] in a process of its own (this test binary again, only that test,
/// one thread), with the variables the children check: `HERMES_TEST_KEEP` proves that
/// variables other than the overrides pass through a drop unchanged.
fn run_alone() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "privilege_matrix::privilege_matrix",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(ALONE_VAR, "1")
        .env("HERMES_TEST_KEEP", "kept")
        .env("HOME", "/root")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the privilege matrix in its own process:\n{stdout}\n{stderr}"
    );
}

#[test]
fn privilege_matrix() {
    if hermes_test_support::skip_unless_root(
        "the privilege matrix forks children that drop from root",
    ) {
        return;
    }
    if std::env::var_os(ALONE_VAR).is_none() {
        return run_alone();
    }
    let dir = tempfile::tempdir().unwrap();
    let files = temp_files(dir.path());

    // 1. Default ids: 10000/10000 with supplementary group 10001 from the group file.
    let identity = Identity::lookup(&files, "hermes").unwrap();
    let seen = parse(&in_child(|| drop_to(&identity)));
    assert_eq!(
        seen,
        Observed {
            uid: 10000,
            euid: 10000,
            gid: 10000,
            groups: vec![10000, 10001],
            home: "/opt/data".into(),
            user: "hermes".into(),
            logname: "hermes".into(),
            xdg_state: "/opt/data/.local/state".into(),
            kept: "kept".into(),
            regain_root: false,
        }
    );

    // 2. Remapped ids (PUID/PGID style), applied to the temp account files, then dropped to.
    let env: Env = [("PUID", "11001"), ("PGID", "11002")].into_iter().collect();
    let report = remap(&files, "hermes", "hermes", &IdRequest::from_env(&env)).unwrap();
    assert_eq!(
        report.uid,
        IdChange::Changed {
            from: 10000,
            to: 11001
        }
    );
    assert_eq!(
        report.gid,
        IdChange::Changed {
            from: 10000,
            to: 11002
        }
    );
    let identity = Identity::lookup(&files, "hermes").unwrap();
    let seen = parse(&in_child(|| drop_to(&identity)));
    assert_eq!((seen.uid, seen.euid, seen.gid), (11001, 11001, 11002));
    assert_eq!(seen.groups, vec![10001, 11002]);
    assert_eq!(
        (seen.home.as_str(), seen.user.as_str()),
        ("/opt/data", "hermes")
    );
    assert!(!seen.regain_root);

    // 3. The root-exec shim path, with the gids of mounted devices: a "docker socket" owned
    //    by gid 64000 is added, a node owned by gid 0 never is.
    let sock = |name: &str, gid: u32| {
        let path = dir.path().join(name);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::os::unix::fs::chown(&path, Some(0), Some(gid)).unwrap();
        (path, listener)
    };
    let (docker, _l1) = sock("docker.sock", 64000);
    let (card, _l2) = sock("card0", 0);
    let extra = hermes_privilege::device_gids(&[docker, card]);
    assert_eq!(extra, vec![64000]);
    let seen = parse(&in_child(|| {
        shim_drop(&files, "hermes", &extra).map(|_| ())
    }));
    assert_eq!((seen.uid, seen.gid), (11001, 11002));
    assert_eq!(seen.groups, vec![10001, 11002, 64000]);
    assert_eq!(seen.home, "/opt/data");

    // 4. A drop that cannot happen reports the 126 error instead of running as root.
    let missing = SystemFiles::new(dir.path().join("absent-passwd"), dir.path().join("group"));
    let out = in_child(|| shim_drop(&missing, "hermes", &[]).map(|_| ()));
    assert!(out.starts_with("ERR refusing to run as root"), "{out}");
    assert!(out.contains("--user hermes"), "{out}");
}
