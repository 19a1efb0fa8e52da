//! Reaping and exit codes, as PID 1 of a new PID namespace and as a child sub-reaper.

use crate::util::*;

/// The main program's script: 100 orphans (re-parented to init when their subshell exits),
/// then wait until no zombie is left and report the count.
const ORPHANS: &str = r#"
for i in $(seq 100); do (sleep 0.05 &) ; done
n=0
while [ $n -lt 300 ]; do
  z=$(ps -eo ppid=,stat= | awk -v p="$INIT" '$1==p && $2 ~ /^Z/' | wc -l)
  [ "$z" -eq 0 ] && [ -z "$(ps -eo ppid=,comm= | awk -v p="$INIT" '$1==p && $2=="sleep"')" ] && break
  n=$((n+1)); sleep 0.1
done
echo "zombies=$z"
"#;

#[test]
fn pid1_reaps_100_orphans_and_leaves_no_zombie() {
    if skip_unless_root("a new PID namespace needs root") {
        return;
    }
    let sb = Sandbox::new();
    let script = format!(
        "[ \"$(cat /proc/1/comm)\" = hermes ] || {{ echo not-pid1; exit 9; }}\nINIT=1\n{ORPHANS}\
         echo total-zombies=$(ps -eo stat= | grep -c '^Z')"
    );
    let out = run(&mut sb.init_pid1(&["sh", "-c", &script]));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert!(text.contains("zombies=0\n"), "{}", render(&out));
    assert!(text.contains("total-zombies=0"), "{}", render(&out));
}

#[test]
fn subreaper_reaps_100_orphans_and_adopts_them() {
    let sb = Sandbox::new();
    // One long orphan shows the adoption: its parent becomes init (our $PPID).
    let script = format!(
        "INIT=$PPID\n(sleep 3 & echo $! > adopted)\nsleep 0.2\n\
         echo adopted-by=$(ps -o ppid= -p $(cat adopted) | tr -d ' ') init=$INIT\n{ORPHANS}"
    );
    let out = run(&mut sb.init(&["sh", "-c", &script]));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    assert!(text.contains("zombies=0\n"), "{}", render(&out));
    let line = text.lines().find(|l| l.starts_with("adopted-by=")).unwrap();
    let (a, b) = line.split_once(' ').unwrap();
    assert_eq!(
        a.trim_start_matches("adopted-by="),
        b.trim_start_matches("init="),
        "{line}"
    );
}

const CODES: [i32; 16] = [
    0, 1, 2, 3, 42, 64, 78, 100, 125, 126, 127, 128, 129, 200, 254, 255,
];
const SIGNALS: [(&str, i32); 6] = [
    ("TERM", 143),
    ("KILL", 137),
    ("INT", 130),
    ("HUP", 129),
    ("USR1", 138),
    ("USR2", 140),
];

fn exit_table(pid1: bool) {
    let sb = Sandbox::new();
    let cmd = |c: &str| {
        let argv = ["sh", "-c", c];
        if pid1 {
            sb.init_pid1(&argv)
        } else {
            sb.init(&argv)
        }
    };
    for code in CODES {
        let out = run(&mut cmd(&format!("exit {code}")));
        assert_eq!(
            out.status.code(),
            Some(code),
            "exit {code}: {}",
            render(&out)
        );
    }
    for (sig, want) in SIGNALS {
        // `; :` keeps the shell from treating `kill` as its last command.
        let out = run(&mut cmd(&format!("kill -{sig} $$; sleep 5; exit 3")));
        assert_eq!(out.status.code(), Some(want), "SIG{sig}: {}", render(&out));
    }
}

#[test]
fn exit_code_table_as_pid1() {
    if skip_unless_root("a new PID namespace needs root") {
        return;
    }
    exit_table(true);
}

#[test]
fn exit_code_table_as_subreaper() {
    exit_table(false);
}

#[test]
fn tini_flags_are_accepted_and_e_maps_a_code_to_zero() {
    let sb = Sandbox::new();
    let mut c = std::process::Command::new(hermes());
    c.args([
        "init", "-s", "-g", "-v", "-w", "-e", "143", "-p", "SIGKILL", "--",
    ])
    .args(["sh", "-c", "kill -TERM $$; sleep 5"])
    .env_clear()
    .envs(sb.env())
    .current_dir(sb.path());
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let out = run(&mut sb.init(&["sh", "-c", "exit 143"]));
    assert_eq!(out.status.code(), Some(143), "{}", render(&out));
}

/// Invoked as `tini` (the image's `/usr/bin/tini` is a link to `hermes`), the binary is
/// `hermes init` with tini's flags: the same command lines keep working.
#[test]
fn invoked_as_tini_it_is_init() {
    let sb = Sandbox::new();
    let tini = sb.path().join("tini");
    std::os::unix::fs::symlink(hermes(), &tini).unwrap();
    let mut c = std::process::Command::new(&tini);
    c.args([
        "-s",
        "-e",
        "143",
        "--",
        "sh",
        "-c",
        "kill -TERM $$; sleep 5",
    ])
    .env_clear()
    .envs(sb.env())
    .current_dir(sb.path());
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(0), "{}", render(&out));
    let mut c = std::process::Command::new(&tini);
    c.args(["sh", "-c", "echo tini-ran; exit 7"])
        .env_clear()
        .envs(sb.env())
        .current_dir(sb.path());
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(7), "{}", render(&out));
    assert!(stdout(&out).contains("tini-ran"), "{}", render(&out));
}

fn rss_file_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("RssFile:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn once_settled_pid1_gives_back_the_pages_only_boot_used() {
    let sb = Sandbox::new();
    let mut child = sb
        .init(&["sh", "-c", "echo up > ready; sleep 30"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the main program", || sb.path().join("ready").exists());
    let booting = rss_file_kb(child.id());
    // The loop settles 1 s after it starts; allow a loaded machine plenty more.
    let mut settled = booting;
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(200));
        settled = rss_file_kb(child.id());
        if settled * 2 < booting {
            break;
        }
    }
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let status = child.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(143),
        "still forwards and exits normally"
    );
    assert!(
        settled * 2 < booting,
        "file-backed RSS {booting} kB -> {settled} kB"
    );
}
