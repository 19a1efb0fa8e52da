use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::machine::{Action, Event, Machine, Op, Timing};
use crate::spec::{RestartPolicy, ServiceSpec};
use crate::status::{ExitStatus, StateName};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn spec(handover: bool) -> ServiceSpec {
    let mut s = ServiceSpec::shell("web", "serve");
    s.restart = RestartPolicy::OnFailure;
    s.handover = handover;
    s.stop_grace = Duration::from_secs(30);
    s
}

/// `web` booted as pid 10 and ready.
fn up(handover: bool) -> (Machine, Instant) {
    let t0 = Instant::now();
    let mut m = Machine::new(vec![spec(handover)], Timing::default(), None, t0);
    m.handle(Event::Boot, t0);
    m.handle(
        Event::Spawned {
            service: "web".into(),
            pid: 10,
        },
        t0,
    );
    m.handle(Event::Ready { pid: 10 }, t0);
    (m, t0)
}

fn restart(m: &mut Machine, t: Instant) -> Vec<Action> {
    m.handle(
        Event::Control {
            id: 1,
            op: Op::Restart("web".into()),
        },
        t,
    )
}

fn spawned(m: &mut Machine, pid: i32, t: Instant) {
    m.handle(
        Event::Spawned {
            service: "web".into(),
            pid,
        },
        t,
    );
}

fn signals(actions: &[Action], pgid: i32) -> Vec<Signal> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Kill { pgid: p, signal } if *p == pgid => Some(*signal),
            _ => None,
        })
        .collect()
}

#[test]
fn a_hand_over_starts_the_new_one_first_and_stops_the_old_one_once_it_is_ready() {
    let (mut m, t0) = up(true);
    let a = restart(&mut m, t0 + ms(100));
    assert!(a.contains(&Action::Spawn {
        service: "web".into()
    }));
    assert!(
        signals(&a, 10).is_empty(),
        "the old one is not stopped yet: {a:?}"
    );
    assert_eq!(m.replacing_pid("web"), Some(10));

    spawned(&mut m, 11, t0 + ms(110));
    let st = m.status_of("web", t0 + ms(120)).unwrap();
    assert_eq!((st.state, st.pid), (StateName::Starting, Some(11)));
    assert!(
        m.live_pids().contains(&10),
        "the old one still counts as live"
    );

    let a = m.handle(Event::Ready { pid: 11 }, t0 + ms(400));
    assert_eq!(
        signals(&a, 10),
        vec![Signal::SIGTERM, Signal::SIGCONT],
        "{a:?}"
    );
    let st = m.status_of("web", t0 + ms(400)).unwrap();
    assert_eq!((st.state, st.pid), (StateName::Up, Some(11)));
    assert_eq!(st.draining, vec![10]);
    assert_eq!(
        st.reason,
        "ready (notified); replaced pid 10 finishing its work"
    );
    let h = st.handover.unwrap();
    assert_eq!((h.from_pid, h.to_pid), (10, Some(11)));
    assert!((h.ready_secs.unwrap() - 0.3).abs() < 1e-6, "{h:?}");
    assert_eq!(h.drained_secs, None, "still draining");

    // The old one finishes its work: gone from status, its drain time recorded.
    let a = m.handle(
        Event::Exited {
            pid: 10,
            status: ExitStatus::Code(0),
        },
        t0 + ms(2400),
    );
    assert_eq!(
        signals(&a, 10),
        vec![Signal::SIGKILL],
        "its group goes: {a:?}"
    );
    let st = m.status_of("web", t0 + ms(2400)).unwrap();
    assert_eq!((st.state, st.pid), (StateName::Up, Some(11)));
    assert!(st.draining.is_empty());
    assert_eq!(
        st.last_exit, None,
        "the old one's exit is not the service's"
    );
    assert!((st.handover.unwrap().drained_secs.unwrap() - 2.0).abs() < 1e-6);
}

#[test]
fn a_successor_that_fails_before_it_is_ready_leaves_the_old_one_serving() {
    for fail in ["exit", "spawn"] {
        let (mut m, t0) = up(true);
        restart(&mut m, t0 + ms(10));
        let a = if fail == "exit" {
            spawned(&mut m, 11, t0 + ms(20));
            m.handle(
                Event::Exited {
                    pid: 11,
                    status: ExitStatus::Code(78),
                },
                t0 + ms(30),
            )
        } else {
            m.handle(
                Event::SpawnFailed {
                    service: "web".into(),
                    reason: "cannot start: no such file".into(),
                    code: 127,
                },
                t0 + ms(30),
            )
        };
        assert!(signals(&a, 10).is_empty(), "{fail}: {a:?}");
        assert!(
            !a.iter().any(|x| matches!(x, Action::Spawn { .. })),
            "{fail}: no retry"
        );
        let st = m.status_of("web", t0 + ms(30)).unwrap();
        assert_eq!((st.state, st.pid), (StateName::Up, Some(10)), "{fail}");
        assert!(st.handover.unwrap().failed.is_some(), "{fail}");
        assert_eq!(m.replacing_pid("web"), None);
    }
}

#[test]
fn without_hand_over_a_restart_stops_first() {
    let (mut m, t0) = up(false);
    let a = restart(&mut m, t0 + ms(10));
    assert_eq!(signals(&a, 10), vec![Signal::SIGTERM, Signal::SIGCONT]);
    assert!(!a.iter().any(|x| matches!(x, Action::Spawn { .. })));
    assert_eq!(m.status_of("web", t0).unwrap().state, StateName::Stopping);
}

#[test]
fn a_retiring_process_past_its_grace_is_killed_and_shutdown_waits_for_it() {
    let (mut m, t0) = up(true);
    restart(&mut m, t0);
    spawned(&mut m, 11, t0);
    m.handle(Event::Ready { pid: 11 }, t0 + ms(10));
    assert_eq!(
        m.next_deadline(),
        Some(t0 + ms(10) + Duration::from_secs(30))
    );
    let a = m.handle(Event::Tick, t0 + Duration::from_secs(31));
    assert_eq!(signals(&a, 10), vec![Signal::SIGKILL], "{a:?}");

    // Shutdown: the new one is stopped; the loop ends only when the old one is gone too.
    let a = m.handle(Event::Terminate, t0 + Duration::from_secs(32));
    assert!(signals(&a, 11).contains(&Signal::SIGTERM));
    let a = m.handle(
        Event::Exited {
            pid: 11,
            status: ExitStatus::Code(0),
        },
        t0 + Duration::from_secs(33),
    );
    assert!(!a.iter().any(|x| matches!(x, Action::Finished(_))), "{a:?}");
    let a = m.handle(
        Event::Exited {
            pid: 10,
            status: ExitStatus::Signal(9),
        },
        t0 + Duration::from_secs(33),
    );
    assert!(a.iter().any(|x| matches!(x, Action::Finished(_))), "{a:?}");
}

#[test]
fn a_stop_during_a_hand_over_stops_both() {
    let (mut m, t0) = up(true);
    restart(&mut m, t0);
    spawned(&mut m, 11, t0);
    let a = m.handle(
        Event::Control {
            id: 2,
            op: Op::Stop("web".into()),
        },
        t0 + ms(5),
    );
    assert!(signals(&a, 10).contains(&Signal::SIGTERM), "{a:?}");
    assert!(signals(&a, 11).contains(&Signal::SIGTERM), "{a:?}");
    m.handle(
        Event::Exited {
            pid: 11,
            status: ExitStatus::Code(0),
        },
        t0 + ms(6),
    );
    let st = m.status_of("web", t0 + ms(6)).unwrap();
    assert_eq!(st.state, StateName::Down);
    assert_eq!(st.draining, vec![10]);
}

#[test]
fn the_old_one_dying_while_the_new_one_starts_is_not_a_failure() {
    let (mut m, t0) = up(true);
    restart(&mut m, t0);
    spawned(&mut m, 11, t0);
    let a = m.handle(
        Event::Exited {
            pid: 10,
            status: ExitStatus::Signal(9),
        },
        t0 + ms(5),
    );
    assert!(
        !a.iter().any(|x| matches!(x, Action::Spawn { .. })),
        "{a:?}"
    );
    let st = m.status_of("web", t0 + ms(5)).unwrap();
    assert_eq!((st.state, st.pid), (StateName::Starting, Some(11)));
    let a = m.handle(Event::Ready { pid: 11 }, t0 + ms(9));
    assert!(signals(&a, 10).is_empty(), "nothing left to retire: {a:?}");
}

#[test]
fn a_restart_during_a_hand_over_does_not_start_a_third() {
    let (mut m, t0) = up(true);
    restart(&mut m, t0);
    spawned(&mut m, 11, t0);
    let a = restart(&mut m, t0 + ms(5));
    assert!(
        !a.iter()
            .any(|x| matches!(x, Action::Spawn { .. } | Action::Kill { .. })),
        "{a:?}"
    );
    assert!(a.contains(&Action::Reply {
        id: 1,
        result: Ok(())
    }));
}
