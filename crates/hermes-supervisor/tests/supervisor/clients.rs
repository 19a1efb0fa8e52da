//! Control clients that misbehave on the reply side: one that pipelines requests and never
//! reads the answers must not grow the supervisor, must not keep others from being served,
//! and is disconnected once it has made no progress for the client deadline.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code, helpers included: a failed unwrap is a failed test"
)]

use crate::common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::{Harness, WAIT, rss_kib};
use hermes_supervisor::Client;

#[test]
fn a_client_that_never_reads_its_replies_cannot_grow_the_supervisor() {
    // Ten services make each status reply a couple of KiB: 2 MiB of requests would ask for
    // ~200 MiB of replies.
    let mut config = String::from("services:\n");
    for i in 0..10 {
        config.push_str(&format!("  svc-{i}:\n    command: \"exec sleep 600\"\n"));
    }
    let h = Harness::start(&config, &["--client-deadline-ms", "3000"]);
    h.wait_for("all ten services to run", || {
        Client::connect(&h.runtime, Duration::from_secs(5))
            .and_then(|mut c| c.status(None))
            .is_ok_and(|rows| rows.len() == 10 && rows.iter().all(|r| r.pid.is_some()))
    });
    let before = rss_kib(h.pid());

    let sock = h.runtime.join("supervisor.sock");
    let hog = std::thread::spawn(move || {
        let mut s = UnixStream::connect(&sock).unwrap();
        // The supervisor stops reading from a client whose replies pile up, so our writes
        // eventually stall: that is the signal to stop.
        s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
        let request = br#"{"v":1,"op":"status"}
"#;
        let chunk: Vec<u8> = request
            .iter()
            .copied()
            .cycle()
            .take(request.len() * 3000)
            .collect();
        let mut sent = 0usize;
        while sent < 2 * 1024 * 1024 {
            match s.write(&chunk) {
                Ok(n) => sent += n,
                Err(_) => break,
            }
        }
        (s, sent)
    });
    // Meanwhile everyone else is served promptly.
    let t0 = Instant::now();
    while !hog.is_finished() {
        let t = Instant::now();
        let rows = Client::connect(&h.runtime, Duration::from_secs(5))
            .and_then(|mut c| c.status(None))
            .expect("another client is served");
        assert_eq!(rows.len(), 10);
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "status took {:?}",
            t.elapsed()
        );
        assert!(t0.elapsed() < WAIT, "the hog never finished writing");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (mut hog, sent) = hog.join().unwrap();
    let after = rss_kib(h.pid());
    assert!(
        after < before + 20 * 1024,
        "supervisor RSS grew from {before} KiB to {after} KiB after {sent} bytes of pipelined \
         requests nobody reads the answers to"
    );

    // It made no progress for the client deadline (3 s): it is disconnected. Reading now
    // yields what was queued for it (bounded) and then end-of-file.
    hog.set_read_timeout(Some(WAIT)).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 256 * 1024];
    let eof = loop {
        match hog.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got += n,
            Err(_) => break false,
        }
    };
    assert!(eof, "the hog was never disconnected ({got} bytes read)");
    assert!(got < 4 * 1024 * 1024, "{got} bytes were queued for the hog");
    let _ = hog.write_all(b"\n");
    // And the supervisor still answers.
    assert!(h.client().status(None).is_ok());
}
