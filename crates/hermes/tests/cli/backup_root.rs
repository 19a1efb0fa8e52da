//! Root's `hermes backup` on a volume the service user owns (uid 10000), with that user as the
//! attacker: a planted journal and staging directory, and a process racing root's restores and
//! backups (swapping the staging directory, flipping a profile's directory to a symlink). The
//! victims are root-only files outside the volume; nothing may be written, read, moved or
//! deleted there, whatever the attacker does.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Instant;

use crate::util::{TestContext, render};

const ATTACKER: u32 = 10_000;
const SECRET: &str = "ROOT-ONLY-SECRET-7d3f";

/// Root-only files outside the volume, and what they were.
struct Victims {
    dir: PathBuf,
    before: Vec<(String, u32, u32, String)>,
}

impl Victims {
    /// `<tmp>/victim/` (root, 0700) holding `secret` and `config.yaml` (root, 0600).
    fn plant(t: &TestContext) -> Victims {
        let dir = t.dir.path().join("victim");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        for name in ["secret", "config.yaml", "SOUL.md"] {
            fs::write(dir.join(name), format!("{SECRET} {name}\n")).unwrap();
            fs::set_permissions(dir.join(name), fs::Permissions::from_mode(0o600)).unwrap();
        }
        let before = Self::read(&dir);
        Victims { dir, before }
    }

    fn read(dir: &Path) -> Vec<(String, u32, u32, String)> {
        let mut all: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let meta = fs::symlink_metadata(e.path()).unwrap();
                let text = fs::read_to_string(e.path()).unwrap_or_default();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    meta.uid(),
                    meta.mode() & 0o7777,
                    text,
                )
            })
            .collect();
        all.sort();
        all
    }

    fn assert_untouched(&self) {
        let dir_meta = fs::metadata(&self.dir).unwrap();
        assert_eq!((dir_meta.uid(), dir_meta.mode() & 0o7777), (0, 0o700));
        assert_eq!(
            Self::read(&self.dir),
            self.before,
            "the root-only files outside the volume are as they were"
        );
    }
}

/// The volume (`volume()` of the backup tests' kind, smaller) given to the attacker's uid, with
/// the directories above it traversable.
fn attacker_volume(t: &TestContext) -> PathBuf {
    t.ok(&["profile", "create", "work", "--no-alias"]);
    let root = t.root();
    fs::write(root.join("profiles/work/notes.md"), "work notes\n").unwrap();
    fs::create_dir_all(root.join("profiles/work/memories")).unwrap();
    fs::write(root.join("profiles/work/memories/MEMORY.md"), "m\n").unwrap();
    let status = Command::new("chown")
        .args(["-R", &format!("{ATTACKER}:{ATTACKER}")])
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    fs::set_permissions(t.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    root
}

/// A Python loop run as the attacker's uid for `secs` seconds: `script` gets `R` (the volume)
/// and `V` (the victims' directory).
fn attacker(root: &Path, victims: &Path, secs: u64, script: &str) -> Child {
    let program = format!(
        "import os, sys, time, json\nR = sys.argv[1]\nV = sys.argv[2]\nEND = time.time() + {secs}\n{script}"
    );
    Command::new("python3")
        .args(["-c", &program])
        .arg(root)
        .arg(victims)
        .uid(ATTACKER)
        .gid(ATTACKER)
        .spawn()
        .unwrap()
}

#[test]
fn a_planted_journal_and_staging_steer_roots_recovery_nowhere() {
    if hermes_test_support::skip_unless_root("acting on a volume owned by another uid needs root") {
        return;
    }
    let t = TestContext::new();
    let root = attacker_volume(&t);
    let victims = Victims::plant(&t);
    // The attacker's staging: a journal that says `profiles/work/secret` was moved aside (to
    // roll back: renamed from `old/` into the volume) and `profiles/work/notes.md` added (to
    // roll back: removed), with `old/profiles/work` a symlink to the victims' directory.
    let script = r#"
st = os.path.join(R, ".restore-20260101T000000-1")
os.makedirs(os.path.join(st, "old", "profiles"))
os.symlink(V, os.path.join(st, "old", "profiles", "work"))
with open(os.path.join(st, "journal.json"), "w") as f:
    json.dump({"dirs": [], "files": [
        {"rel": "profiles/work/secret", "had_old": True},
        {"rel": "profiles/work/notes.md", "had_old": False},
    ]}, f)
"#;
    let mut planter = attacker(&root, &victims.dir, 0, script);
    assert!(planter.wait().unwrap().success());
    for args in [
        &["backup", "recover"][..],
        &["backup", "create", "-o", "ignored.zip"][..],
    ] {
        let out = t.run(args);
        // Whatever it says, it may only have acted as the volume's owner.
        victims.assert_untouched();
        assert!(
            !root.join("profiles/work/secret").exists(),
            "nothing of the victims came into the volume: {}",
            render(&out)
        );
    }
}

#[test]
fn restores_and_backups_raced_by_the_volumes_owner_touch_nothing_outside_the_volume() {
    if hermes_test_support::skip_unless_root("acting on a volume owned by another uid needs root") {
        return;
    }
    raced(&TestContext::new());
}

#[test]
fn on_a_volume_of_its_own_file_system_the_race_leads_nowhere_either() {
    // A Docker volume is a file system of its own: a rename out of it is EXDEV, but the
    // staging directory and the directories in it are still the attacker's to swap.
    if hermes_test_support::skip_unless_root("mounting a tmpfs as the volume needs root") {
        return;
    }
    let t = TestContext::new();
    let _disk = hermes_test_support::disk::SmallDisk::mount(&t.root(), "64m");
    raced(&t);
}

/// Rounds of each race: the issue's acceptance count.
const RACE_ROUNDS: usize = 200;
/// The environment variable that makes each race run that many rounds instead.
const RACE_ROUNDS_ENV: &str = "HERMES_TEST_RACE_ROUNDS";

/// Root restores and backs up `t`'s volume [`RACE_ROUNDS`] times while the volume's owner
/// races; prints how many of each succeeded.
#[allow(
    clippy::print_stdout,
    reason = "the measurement docs/security.md quotes"
)]
fn raced(t: &TestContext) {
    let rounds: usize = std::env::var(RACE_ROUNDS_ENV).map_or(RACE_ROUNDS, |v| {
        v.parse()
            .expect("HERMES_TEST_RACE_ROUNDS is a number of rounds")
    });
    let root = attacker_volume(t);
    let victims = Victims::plant(t);
    // Two archives that differ in a profile's file: each restore replaces it.
    let archives = [t.dir.path().join("a.zip"), t.dir.path().join("b.zip")];
    t.ok(&["backup", "create", "-o", archives[0].to_str().unwrap()]);
    fs::write(root.join("profiles/work/notes.md"), "changed\n").unwrap();
    t.ok(&["backup", "create", "-o", archives[1].to_str().unwrap()]);

    // Every staging directory root makes is swapped for the attacker's own, whose `new` and
    // `old` lead to the victims; `profiles/work` flips between a directory and a symlink to
    // them; planted journals appear.
    let script = r#"
def swap_staging():
    for name in os.listdir(R):
        if name.startswith(".restore-") and not name.endswith(".mine"):
            st = os.path.join(R, name)
            try:
                os.rename(st, st + ".mine")
                os.mkdir(st)
                os.symlink(V, os.path.join(st, "new"))
                os.symlink(V, os.path.join(st, "old"))
            except OSError:
                pass
def flip_profile():
    w = os.path.join(R, "profiles", "work")
    try:
        os.rename(w, w + ".real")
        os.symlink(V, w)
        time.sleep(0.0005)
        os.unlink(w)
        os.rename(w + ".real", w)
    except OSError:
        try:
            if os.path.islink(w):
                os.unlink(w)
            if os.path.isdir(w + ".real"):
                os.rename(w + ".real", w)
        except OSError:
            pass
import random
while time.time() < END:
    swap_staging()
    flip_profile()
    # Paced at random: some restores meet a symlink at the check, others get past it and
    # meet the swaps later.
    time.sleep(random.uniform(0, 0.01))
"#;
    // The attacker runs until the rounds are done (then it is killed).
    let mut racer = attacker(&root, &victims.dir, 86_400, script);
    let started = Instant::now();
    let mut attempts = 0;
    let mut outputs = Vec::new();
    let (mut restored, mut backed_up) = (0, 0);
    while attempts < rounds {
        attempts += 1;
        let archive = &archives[attempts % 2];
        let out = t.run(&["backup", "restore", archive.to_str().unwrap(), "--yes"]);
        restored += usize::from(out.status.success());
        outputs.push(render(&out));
        let made = t.dir.path().join(format!("raced-{attempts}.zip"));
        let out = t.run(&["backup", "create", "-o", made.to_str().unwrap()]);
        if out.status.success() {
            backed_up += 1;
            let bytes = fs::read(&made).unwrap();
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes())
                    && !zip_holds(&made, SECRET),
                "a root backup read a root-only file outside the volume"
            );
        }
        victims.assert_untouched();
    }
    let _ = racer.kill();
    racer.wait().unwrap();
    victims.assert_untouched();
    println!(
        "raced: {attempts} rounds in {:.1} s ({restored} restores and {backed_up} backups \
         succeeded)",
        started.elapsed().as_secs_f64(),
    );
    assert!(
        restored > 0,
        "some restore got past the checks, or the race never reached the staging: {}",
        outputs.join("\n")
    );
    // Whatever the attacker left, root's own recovery still touches nothing outside.
    let _ = t.run(&["backup", "recover"]);
    victims.assert_untouched();
}

/// Whether any entry of the zip at `path` holds `needle` once inflated.
fn zip_holds(path: &Path, needle: &str) -> bool {
    use std::io::Read;
    let Ok(mut zip) = zip::ZipArchive::new(fs::File::open(path).unwrap()) else {
        return false;
    };
    (0..zip.len()).any(|i| {
        let mut text = Vec::new();
        zip.by_index(i)
            .is_ok_and(|mut e| e.read_to_end(&mut text).is_ok())
            && text.windows(needle.len()).any(|w| w == needle.as_bytes())
    })
}
