//! Recognising a notification already processed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::bounded::{Bounded, Now};
use super::event::Event;

/// Remembers notifications already processed, so a captured one replayed
/// later is recognised. Keys are forgotten after `ttl`; at most `capacity`
/// are kept (the oldest goes first). Each call costs O(log n).
///
/// ```
/// let guard = genapi::webhook::DuplicateGuard::new(10_000, std::time::Duration::from_secs(3600));
/// assert!(guard.first_time("task-1:Ready"));
/// assert!(!guard.first_time("task-1:Ready"));
/// assert_eq!(guard.len(), 1);
/// ```
pub struct DuplicateGuard {
    seen: Mutex<Bounded<()>>,
    clock: Now,
}

impl std::fmt::Debug for DuplicateGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("DuplicateGuard");
        if let Ok(seen) = self.seen.lock() {
            out.field("ttl", &seen.max_age()).field("capacity", &seen.capacity());
        }
        out.finish_non_exhaustive()
    }
}

impl DuplicateGuard {
    /// A guard keeping at most `capacity` keys (at least one), each for
    /// `ttl` (the same order as [`super::Inbox::with_limits`]).
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        DuplicateGuard {
            seen: Mutex::new(Bounded::new(capacity, ttl)),
            // The runtime's clock, so a paused test clock ages entries too.
            clock: Arc::new(|| tokio::time::Instant::now().into_std()),
        }
    }

    /// Uses another monotonic clock (tests).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use std::time::{Duration, Instant};
    /// let now = Arc::new(Mutex::new(Instant::now()));
    /// let reading = now.clone();
    /// let guard = genapi::webhook::DuplicateGuard::new(100, Duration::from_secs(60))
    ///     .clock(move || *reading.lock().unwrap());
    /// assert!(guard.first_time("a"));
    /// *now.lock().unwrap() += Duration::from_secs(60);
    /// assert!(guard.first_time("a"), "forgotten after the ttl");
    /// ```
    pub fn clock(mut self, clock: impl Fn() -> Instant + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// True the first time `key` is seen within the ttl.
    pub fn first_time(&self, key: &str) -> bool {
        let now = (self.clock)();
        let Ok(mut seen) = self.seen.lock() else { return false };
        if seen.contains(key, now) {
            return false;
        }
        seen.insert(key, (), now);
        true
    }

    /// Checks an event: the message id when signed, else task id and status.
    pub fn first_time_event(&self, event: &Event) -> bool {
        match &event.message_id {
            Some(id) => self.first_time(id),
            None => self.first_time(&format!("{}:{}", event.task_id, event.status)),
        }
    }

    /// The number of keys remembered now.
    pub fn len(&self) -> usize {
        let now = (self.clock)();
        self.seen.lock().map(|mut seen| seen.len(now)).unwrap_or(0)
    }

    /// Whether no key is remembered now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
