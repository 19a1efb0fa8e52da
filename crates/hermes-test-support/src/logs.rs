//! What the code under test logged: a `tracing` subscriber that keeps each event as one line,
//! `LEVEL target message key=value ...`, with the thread it came from.
//!
//! It is the process's global subscriber, installed on first use: a thread's own default
//! subscriber (`tracing::subscriber::with_default`) misses events while other tests of the
//! same binary register the same call sites at the same time. A test reads the lines of its
//! own thread ([`Lines::of_this_thread`]), so an async test that reads them runs on a
//! current-thread runtime.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::ThreadId;

/// Every event logged since the capture was installed, with its thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<(ThreadId, String)>>>);

/// The global capture, installed on first use.
fn captured() -> &'static Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let c = Captured::default();
        // Another global subscriber in the same test binary would take the events instead.
        if tracing::subscriber::set_global_default(c.clone()).is_err() {
            panic!("a global tracing subscriber is already set in this test binary");
        }
        c
    })
}

/// The lines of one thread, from the moment of [`Lines::of_this_thread`] on.
pub struct Lines {
    thread: ThreadId,
    from: usize,
}

impl Lines {
    /// Starts reading what the current thread logs from now on.
    pub fn of_this_thread() -> Lines {
        let from = lock(captured()).len();
        Lines {
            thread: std::thread::current().id(),
            from,
        }
    }

    /// The lines this thread logged since [`Lines::of_this_thread`].
    pub fn all(&self) -> Vec<String> {
        lock(captured())
            .iter()
            .skip(self.from)
            .filter(|(t, _)| *t == self.thread)
            .map(|(_, l)| l.clone())
            .collect()
    }
}

fn lock(c: &Captured) -> std::sync::MutexGuard<'_, Vec<(ThreadId, String)>> {
    c.0.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The message, then every other field as ` key=value`.
#[derive(Default)]
struct LineVisitor {
    message: String,
    fields: String,
}

impl tracing::field::Visit for LineVisitor {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

impl tracing::Subscriber for Captured {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut v = LineVisitor::default();
        event.record(&mut v);
        let meta = event.metadata();
        let line = format!(
            "{} {} {}{}",
            meta.level(),
            meta.target(),
            v.message,
            v.fields
        );
        lock(self).push((std::thread::current().id(), line));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_reads_its_own_lines_from_when_it_started() {
        tracing::warn!("before");
        let lines = Lines::of_this_thread();
        tracing::warn!(variable = "X", "said {}", 1);
        std::thread::spawn(|| tracing::info!("elsewhere"))
            .join()
            .unwrap();
        let all = lines.all();
        assert_eq!(all.len(), 1, "{all:?}");
        assert!(all[0].starts_with("WARN "), "{all:?}");
        assert!(all[0].ends_with(" said 1 variable=\"X\""), "{all:?}");
    }
}
