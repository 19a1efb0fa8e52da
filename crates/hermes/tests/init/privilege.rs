//! Privilege: who the main program runs as, the `--user` guard, the root-exec shim, and boot
//! surviving hostile or damaged volumes. Each test runs in a private mount namespace with a
//! temp copy of `/etc` (a `hermes` user, uid/gid 10000) bind-mounted over the real one.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use crate::util::*;

const WHO: &str = "echo \"who=$(id -u) $(id -g) $(id -G) $HOME $USER\"";

fn who(out: &std::process::Output) -> String {
    stdout(out)
        .lines()
        .find_map(|l| l.strip_prefix("who=").map(str::to_owned))
        .unwrap_or_else(|| panic!("no who= line: {}", render(out)))
}

#[test]
fn privilege_matrix_default_and_remapped_ids() {
    if skip_unless_root("mount namespaces and privilege drops need root") {
        return;
    }
    let sb = Sandbox::new();
    let etc = sb.etc_copy(true);
    let h = hermes();
    // Default ids.
    let out = run(&mut sb.in_mount_ns(&etc, false, &[h, "init", "--", "sh", "-c", WHO]));
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert_eq!(who(&out), "10000 10000 10000 20000 /opt/data hermes");
    let meta = fs::metadata(sb.home()).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (10000, 10000),
        "the volume root is the service user's"
    );
    let env = fs::metadata(sb.home().join(".env")).unwrap();
    assert_eq!((env.uid(), env.mode() & 0o777), (10000, 0o600));
    // Remapped with HERMES_UID/HERMES_GID: the account copy is rewritten, files follow.
    let mut c = sb.in_mount_ns(&etc, false, &[h, "init", "--", "sh", "-c", WHO]);
    c.env("HERMES_UID", "12345").env("HERMES_GID", "12346");
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert_eq!(who(&out), "12345 12346 12346 20000 /opt/data hermes");
    assert!(
        stderr(&out).contains("changed `hermes` uid 10000 -> 12345"),
        "{}",
        render(&out)
    );
    let env = fs::metadata(sb.home().join(".env")).unwrap();
    assert_eq!((env.uid(), env.gid()), (12345, 12346));
    // PUID/PGID are aliases; HERMES_* wins.
    let mut c = sb.in_mount_ns(&etc, false, &[h, "init", "--", "sh", "-c", WHO]);
    c.env("PUID", "1000")
        .env("PGID", "1000")
        .env("HERMES_UID", "11001");
    let out = run(&mut c);
    assert_eq!(
        who(&out),
        "11001 1000 1000 20000 /opt/data hermes",
        "{}",
        render(&out)
    );
    // The real /etc was never touched.
    assert!(
        !fs::read_to_string("/etc/passwd")
            .unwrap()
            .contains("hermes:x:")
    );
}

#[test]
fn user_guard_refuses_a_foreign_uid_and_allows_the_service_uid() {
    if skip_unless_root("mount namespaces need root") {
        return;
    }
    let sb = Sandbox::new();
    let etc = sb.etc_copy(true);
    let h = hermes();
    let as_uid = |uid: &str| {
        let (u, g) = (format!("--reuid={uid}"), format!("--regid={uid}"));
        run(&mut sb.in_mount_ns(
            &etc,
            true,
            &[
                "setpriv",
                &u,
                &g,
                "--clear-groups",
                h,
                "init",
                "--",
                "sh",
                "-c",
                "echo REACHED",
            ],
        ))
    };
    let out = as_uid("1000");
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(!stdout(&out).contains("REACHED"));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: ") && err.contains("HERMES_UID=1000"),
        "{err}"
    );
    assert!(err.contains("the `hermes` user, uid 10000"), "{err}");
    // The original image's words, which its tests and operators' scripts grep for.
    assert!(err.contains("not supported"), "{err}");
    // As the service uid boot goes on without root powers; where `/run` belongs to root (as
    // in the image) the control socket goes to the next place of the one rule (`/tmp/hermes`,
    // else the volume's `run/`), and says so.
    let mut c = sb.in_mount_ns(
        &etc,
        true,
        &[
            "setpriv",
            "--reuid=10000",
            "--regid=10000",
            "--clear-groups",
            h,
            "init",
            "--",
            "sh",
            "-c",
            "echo REACHED as $(id -u)",
        ],
    );
    c.env_remove("HERMES_RUNTIME_DIR");
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert!(
        stdout(&out).contains("REACHED as 10000"),
        "{}",
        render(&out)
    );
    assert!(
        stderr(&out).contains("control socket in `"),
        "{}",
        render(&out)
    );
}

/// `hermes profile list` seeds `HERMES_HOME`: the owner of its `.env` says who ran it.
fn shim_case(
    sb: &Sandbox,
    etc: &std::path::Path,
    marker: bool,
    env: &[(&str, &str)],
    as_hermes: bool,
) -> (Option<i32>, Option<u32>, String) {
    let home = sb.path().join(format!("home-{}", rand_suffix()));
    let h = hermes();
    let mut argv = vec![];
    if as_hermes {
        argv.extend([
            "setpriv",
            "--reuid=10000",
            "--regid=10000",
            "--clear-groups",
        ]);
    }
    argv.extend([h, "profile", "list"]);
    let mut c = sb.in_mount_ns(etc, marker, &argv);
    c.env("HERMES_HOME", &home).envs(env.iter().copied());
    let out = run(&mut c);
    let owner = fs::metadata(home.join(".env")).ok().map(|m| m.uid());
    (out.status.code(), owner, render(&out))
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    N.fetch_add(1, Ordering::Relaxed).to_string()
}

#[test]
fn root_exec_shim_truth_table() {
    if skip_unless_root("mount namespaces and privilege drops need root") {
        return;
    }
    let sb = Sandbox::new();
    let etc = sb.etc_copy(true);
    const OPT: &str = "HERMES_DOCKER_EXEC_AS_ROOT";
    // (marker, opt-out value, run as hermes) -> expected owner
    let cases: &[(bool, Option<&str>, bool, u32)] = &[
        (true, None, false, 10000),
        (true, Some("1"), false, 0),
        (true, Some("TRUE"), false, 0),
        (true, Some(" yes "), false, 0),
        (true, Some("0"), false, 10000),
        (true, Some("false"), false, 10000),
        (true, Some("garbage"), false, 10000),
        (true, Some(""), false, 10000),
        (false, None, false, 0),
        (true, None, true, 10000),
    ];
    for &(marker, opt, as_hermes, want) in cases {
        let env: Vec<(&str, &str)> = opt.map(|v| (OPT, v)).into_iter().collect();
        let (code, owner, text) = shim_case(&sb, &etc, marker, &env, as_hermes);
        let label = format!("marker={marker} {OPT}={opt:?} as_hermes={as_hermes}");
        assert_eq!(code, Some(0), "{label}: {text}");
        assert_eq!(owner, Some(want), "{label}: {text}");
    }
}

#[test]
fn root_exec_shim_exits_126_when_no_hermes_user_exists() {
    if skip_unless_root("mount namespaces need root") {
        return;
    }
    let sb = Sandbox::new();
    let etc = sb.etc_copy(false);
    let (code, owner, text) = shim_case(&sb, &etc, true, &[], false);
    assert_eq!(code, Some(126), "{text}");
    assert_eq!(owner, None, "nothing may run as root: {text}");
    assert!(
        text.contains("error: ") && text.contains("HERMES_DOCKER_EXEC_AS_ROOT=1"),
        "{text}"
    );
    // `hermes init` inside the image without the user refuses to run everything as root.
    let out = run(&mut sb.in_mount_ns(
        &etc,
        true,
        &[hermes(), "init", "--", "sh", "-c", "echo REACHED"],
    ));
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(!stdout(&out).contains("REACHED"));
}

#[test]
fn boot_refuses_symlinks_and_survives_damaged_state() {
    if skip_unless_root("mount namespaces and ownership repair need root") {
        return;
    }
    let sb = Sandbox::new();
    let etc = sb.etc_copy(true);
    let home = sb.home();
    fs::create_dir_all(home.join("profiles/work")).unwrap();
    fs::create_dir_all(home.join("profiles/locked")).unwrap();
    // A symlinked auth.json pointing at a root-owned file outside the volume.
    let outside = sb.path().join("outside-secret.json");
    fs::write(&outside, "{}").unwrap();
    std::os::unix::fs::symlink(&outside, home.join("auth.json")).unwrap();
    // A corrupt state file and an unreadable profile.
    fs::write(home.join("SOUL.md"), "soul").unwrap();
    fs::write(home.join("gateway_state.json"), "{not json").unwrap();
    fs::write(home.join("profiles/work/SOUL.md"), "soul").unwrap();
    fs::write(
        home.join("profiles/work/gateway_state.json"),
        r#"{"gateway_state":"stopped"}"#,
    )
    .unwrap();
    fs::write(home.join("profiles/locked/SOUL.md"), "soul").unwrap();
    fs::set_permissions(
        home.join("profiles/locked"),
        fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let mut c = sb.in_mount_ns(
        &etc,
        false,
        &[hermes(), "init", "--", "sh", "-c", "echo MAIN-RAN"],
    );
    c.env("HERMES_AUTH_JSON_BOOTSTRAP", "{\"providers\":{}}");
    let out = run(&mut c);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert!(stdout(&out).contains("MAIN-RAN"));
    assert!(
        err.lines()
            .any(|l| l.contains("refusing") && l.contains("auth.json")),
        "{}",
        render(&out)
    );
    assert!(
        fs::symlink_metadata(home.join("auth.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let o = fs::metadata(&outside).unwrap();
    assert_eq!(
        (o.uid(), fs::read_to_string(&outside).unwrap().as_str()),
        (0, "{}")
    );
    assert!(err.contains("ignoring `gateway_state.json`"), "{err}");
    let log = fs::read_to_string(home.join("logs/container-boot.log")).unwrap();
    assert!(
        log.contains(" profile=default prior_state=None action=registered"),
        "{log}"
    );
    assert!(
        log.contains(" profile=work prior_state=stopped action=registered"),
        "{log}"
    );
    fs::set_permissions(
        home.join("profiles/locked"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
}

/// The service user owns the volume and plants symlinks where PID 1 (root) writes logs: the
/// gateway's `current` pointing at a root-only file, and a service's log directory pointing
/// at a root-only directory. The boot and the gateway's first lines must write through
/// neither, and every log entry PID 1 creates must belong to the service user.
#[test]
fn pid1_never_writes_through_the_volumes_symlinks() {
    if skip_unless_root("mount namespaces and a service user need root") {
        return;
    }
    let sb = Sandbox::new();
    let etc = sb.etc_copy(true);
    let home = sb.home();
    let victim = sb.path().join("root-bashrc");
    fs::write(&victim, "# root's shell start-up\n").unwrap();
    fs::set_permissions(&victim, fs::Permissions::from_mode(0o600)).unwrap();
    let root_only = sb.path().join("root-only");
    fs::create_dir(&root_only).unwrap();
    fs::set_permissions(&root_only, fs::Permissions::from_mode(0o700)).unwrap();
    fs::create_dir_all(home.join("profiles/work")).unwrap();
    fs::write(home.join("SOUL.md"), "soul").unwrap();
    fs::write(
        home.join("config.yaml"),
        "gateway:\n  command: \"echo default-gw-line; exec sleep 60\"\n",
    )
    .unwrap();
    fs::write(
        home.join("gateway_state.json"),
        r#"{"gateway_state":"running"}"#,
    )
    .unwrap();
    fs::write(home.join("profiles/work/SOUL.md"), "soul").unwrap();
    fs::write(
        home.join("profiles/work/config.yaml"),
        "gateway:\n  command: \"echo work-gw-line; touch work-started; exec sleep 60\"\n",
    )
    .unwrap();
    fs::write(
        home.join("profiles/work/gateway_state.json"),
        r#"{"gateway_state":"running"}"#,
    )
    .unwrap();
    // The attacker's moves, as the service user would make them (ownership is fixed below by
    // the boot's own repair, exactly as on a real volume).
    let gw_default = home.join("logs/gateways/default");
    fs::create_dir_all(&gw_default).unwrap();
    std::os::unix::fs::symlink(&victim, gw_default.join("current")).unwrap();
    std::os::unix::fs::symlink(&root_only, home.join("logs/gateways/work")).unwrap();

    let wait_for_line = "for i in $(seq 400); do \
         grep -q default-gw-line logs/gateways/default/current 2>/dev/null \
         && [ -e profiles/work/work-started ] && exit 0; sleep 0.05; done; exit 9";
    let mut c = sb.in_mount_ns(
        &etc,
        false,
        &[hermes(), "init", "--", "sh", "-c", wait_for_line],
    );
    c.current_dir(&home);
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let log = fs::read_to_string(gw_default.join("current")).unwrap();
    assert!(log.contains("default-gw-line"), "{log}");
    assert!(log.contains("replaced `current`"), "{log}");
    // The refused log directory costs the file, not the console: lines are still mirrored...
    assert!(stdout(&out).contains("work-gw-line"), "{}", render(&out));
    // ...and neither root-only target was written.
    assert_eq!(
        fs::read_to_string(&victim).unwrap(),
        "# root's shell start-up\n"
    );
    assert_eq!(fs::read_dir(&root_only).unwrap().count(), 0);
    // Everything under logs/ is the service user's, links included.
    let mut stack = vec![home.join("logs")];
    while let Some(p) = stack.pop() {
        let m = fs::symlink_metadata(&p).unwrap();
        assert_eq!(
            m.uid(),
            10000,
            "`{}` is not the service user's",
            p.display()
        );
        if m.is_dir() {
            stack.extend(fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
}

/// A data volume mounted read-only cannot keep anything: the boot stops with one line that
/// says so and what to do, and the main program never runs.
#[test]
fn a_read_only_volume_stops_the_boot_with_one_clear_line() {
    if skip_unless_root("mount namespaces need root") {
        return;
    }
    let sb = Sandbox::new();
    let etc = sb.etc_copy(true);
    let home = sb.home();
    fs::create_dir_all(&home).unwrap();
    fs::write(home.join("SOUL.md"), "soul").unwrap();
    let h = home.display().to_string();
    let remount =
        format!("mount --bind '{h}' '{h}' && mount -o remount,bind,ro '{h}' && exec \"$@\"");
    let out = run(&mut sb.in_mount_ns(
        &etc,
        true,
        &[
            "sh",
            "-c",
            &remount,
            "sh",
            hermes(),
            "init",
            "--",
            "sh",
            "-c",
            "echo REACHED",
        ],
    ));
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(!stdout(&out).contains("REACHED"), "{}", render(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "error: the data volume `{h}` is not writable by uid 10000"
        )),
        "{err}"
    );
    assert!(err.contains("hint: mount the volume read-write"), "{err}");
}

/// `--cap-drop CHOWN`: no ownership repair and no group on the control socket, said once
/// each; the boot goes on and the main program runs. `--cap-drop ALL`: root cannot become the
/// service user, so the boot stops with one line naming `--user`.
#[test]
fn dropped_capabilities_degrade_or_stop_with_one_clear_line() {
    if skip_unless_root("mount namespaces and capability sets need root") {
        return;
    }
    let sb = Sandbox::new();
    let etc = sb.etc_copy(true);
    // A volume that is already the service user's, as a named volume of the image is:
    // without CAP_CHOWN nothing could make it so.
    fs::create_dir_all(sb.home()).unwrap();
    std::os::unix::fs::chown(sb.home(), Some(10000), Some(10000)).unwrap();
    let h = hermes();
    let with_bounding = |set: &str| {
        run(&mut sb.in_mount_ns(
            &etc,
            true,
            &[
                "setpriv",
                "--bounding-set",
                set,
                h,
                "init",
                "--",
                "sh",
                "-c",
                "echo main-ran",
            ],
        ))
    };
    let out = with_bounding("-chown");
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert!(stdout(&out).contains("main-ran"), "{}", render(&out));
    let err = stderr(&out);
    assert!(err.contains("no CAP_CHOWN"), "{err}");
    assert!(err.contains("mode 0666"), "{err}");
    assert!(err.matches("warning").count() <= 3, "{err}");

    // A gateway's log directory, created on the volume by root without CAP_CHOWN, still
    // belongs to the service user (created as that user, not chowned afterwards).
    fs::write(
        sb.home().join("config.yaml"),
        "gateway:\n  command: \"echo gw-logged; exec sleep 30\"\n",
    )
    .unwrap();
    fs::write(
        sb.home().join("gateway_state.json"),
        r#"{"gateway_state":"running"}"#,
    )
    .unwrap();
    let current = sb.home().join("logs/gateways/default/current");
    let wait_for_log = format!(
        "for i in $(seq 100); do grep -q gw-logged {} 2>/dev/null && break; sleep 0.1; done; \
         echo main-ran",
        current.display()
    );
    let out = run(&mut sb.in_mount_ns(
        &etc,
        true,
        &[
            "setpriv",
            "--bounding-set",
            "-chown",
            h,
            "init",
            "--",
            "sh",
            "-c",
            &wait_for_log,
        ],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    for p in [
        "logs/gateways",
        "logs/gateways/default",
        "logs/gateways/default/current",
    ] {
        let m = fs::metadata(sb.home().join(p)).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_eq!((m.uid(), m.gid()), (10000, 10000), "{p}: {}", render(&out));
    }
    assert!(fs::read_to_string(&current).unwrap().contains("gw-logged"));

    let out = with_bounding("-all");
    assert_eq!(out.status.code(), Some(1), "{}", render(&out));
    assert!(!stdout(&out).contains("main-ran"), "{}", render(&out));
    let err = stderr(&out);
    assert!(err.contains("without CAP_SETUID and CAP_SETGID"), "{err}");
    assert!(err.contains("--user 10000:10000"), "{err}");
}

/// A mounted Docker socket's group is joined by the drop and recorded in the image's group
/// file, so a `docker exec -u hermes` session has it too.
#[test]
fn device_groups_are_joined_and_recorded_in_the_group_file() {
    if skip_unless_root("mount namespaces need root") {
        return;
    }
    let sb = Sandbox::new();
    let etc = sb.etc_copy(true);
    // A private /run holding a "Docker socket" owned by group 64000.
    let plant = "mount -t tmpfs tmpfs /run && python3 -c \"import socket; \
                 socket.socket(socket.AF_UNIX).bind('/run/docker.sock')\" && \
                 chgrp 64000 /run/docker.sock && exec \"$@\"";
    let out = run(&mut sb.in_mount_ns(
        &etc,
        true,
        &[
            "sh",
            "-c",
            plant,
            "sh",
            hermes(),
            "init",
            "--",
            "sh",
            "-c",
            WHO,
        ],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert!(who(&out).contains(" 64000 "), "{}", render(&out));
    let group = fs::read_to_string(etc.join("group")).unwrap();
    assert!(group.contains("host-gid-64000:x:64000:hermes\n"), "{group}");
    // A second boot finds it recorded and changes nothing.
    let out = run(&mut sb.in_mount_ns(
        &etc,
        true,
        &["sh", "-c", plant, "sh", hermes(), "init", "--", "true"],
    ));
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert!(!stderr(&out).contains("created group"), "{}", render(&out));
    assert_eq!(fs::read_to_string(etc.join("group")).unwrap(), group);
}
