//! Stage 3b: a restore killed midway is rolled back at the next boot, before any service reads
//! the half-restored volume.

use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

use crate::util::{Sandbox, hermes, render};

#[test]
fn the_boot_rolls_back_a_restore_that_a_kill_interrupted() {
    let sb = Sandbox::new();
    let home = sb.home();
    fs::create_dir_all(home.join("memories")).unwrap();
    fs::write(home.join("SOUL.md"), "soul\n").unwrap();
    fs::write(home.join("memories/MEMORY.md"), "before the backup\n").unwrap();
    fs::write(home.join("notes.md"), "before the backup\n").unwrap();
    let archive = sb.path().join("a.zip");
    let backup = |args: &[&str], fault: Option<&str>| {
        let mut c = Command::new(hermes());
        c.arg("backup").args(args).env_clear().envs(sb.env());
        if let Some(point) = fault {
            c.env("HERMES_BACKUP_FAULT", point);
        }
        c.output().unwrap()
    };
    let made = backup(&["create", "-o", archive.to_str().unwrap()], None);
    assert!(made.status.success(), "{}", render(&made));
    for file in ["memories/MEMORY.md", "notes.md"] {
        fs::write(home.join(file), "after the backup\n").unwrap();
    }
    // Killed with one of the two files swapped in.
    let killed = backup(
        &["restore", archive.to_str().unwrap(), "--yes"],
        Some("swapped:1"),
    );
    assert_eq!(killed.status.signal(), Some(9), "{}", render(&killed));
    assert_eq!(
        fs::read_to_string(home.join("memories/MEMORY.md")).unwrap(),
        "before the backup\n",
        "half restored"
    );

    let out = sb
        .init(&[
            "sh",
            "-c",
            "cat \"$HERMES_HOME/memories/MEMORY.md\" \"$HERMES_HOME/notes.md\"",
        ])
        .output()
        .unwrap();
    let text = render(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("rolled back an interrupted restore"),
        "the boot says so: {text}"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .matches("after the backup")
            .count(),
        2,
        "both files are as they were before the restore: {text}"
    );
    assert!(
        !fs::read_dir(&home).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".restore-")),
        "the staging directory is gone"
    );
}
