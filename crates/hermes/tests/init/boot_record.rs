//! PID 1 records how long its boot took (`boot.json` beside the control socket), for the
//! dashboard's `/metrics`.

use crate::util::{Sandbox, render};

#[test]
fn the_boot_records_its_duration_beside_the_control_socket() {
    let sb = Sandbox::new();
    let record = sb.runtime().join("boot.json");
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let out = sb
        .init(&["sh", "-c", &format!("cat '{}'", record.display())])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", render(&out));
    let boot: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let took = boot["boot_seconds"].as_f64().unwrap_or(-1.0);
    assert!(
        (0.0..30.0).contains(&took),
        "the main program read it: {}",
        render(&out)
    );
    let started = boot["started_at"].as_f64().unwrap_or(0.0);
    assert!((before - 1.0..before + 30.0).contains(&started), "{boot}");
}
