//! Waiting for a task by its notification instead of polling.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::bounded::{Bounded, Now};
use super::event::Event;
use crate::api::types::PollResult;
use crate::{Output, Task};

/// Where a receiver hands over verified notifications, so a program can wait
/// for a task by its webhook instead of polling.
///
/// Your receiver calls [`Inbox::deliver`] with each verified [`Event`];
/// [`Inbox::wait`] returns the task's output as soon as its final event
/// arrives (zero polls), and falls back to polling when none has arrived
/// within `fallback_after`, so a program still finishes when the receiver is
/// unreachable.
///
/// An event nobody waits for is not kept forever: at most `capacity` events
/// are held (the oldest goes first), none longer than `max_age`
/// ([`Inbox::DEFAULT_CAPACITY`] and [`Inbox::DEFAULT_MAX_AGE`] unless set
/// with [`Inbox::with_limits`]). A waiter that comes later polls instead.
///
/// ```no_run
/// # async fn demo(client: genapi::Client, inbox: std::sync::Arc<genapi::webhook::Inbox>) -> genapi::Result<()> {
/// use genapi::api::types::Gen2ProRequest;
/// let request = Gen2ProRequest::builder()
///     .prompt("a lighthouse")
///     .webhook_url("https://hooks.example.com/genapi")
///     .webhook_secret(genapi::WebhookSecret::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"));
/// let task = client.submit(request).await?;
/// let output = inbox.wait(task, std::time::Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
pub struct Inbox {
    /// What is kept of each final event: its poll-result form, without the raw
    /// body or fields nobody reads, so memory stays near the event count.
    events: Mutex<Bounded<PollResult>>,
    arrived: tokio::sync::Notify,
    clock: Now,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Inbox");
        if let Ok(events) = self.events.lock() {
            out.field("capacity", &events.capacity())
                .field("max_age", &events.max_age());
        }
        out.finish_non_exhaustive()
    }
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox::with_limits(Inbox::DEFAULT_CAPACITY, Inbox::DEFAULT_MAX_AGE)
    }
}

impl Inbox {
    /// Events held at most, by default.
    pub const DEFAULT_CAPACITY: usize = 10_000;
    /// How long an event waits for its waiter, by default.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(3600);

    /// An empty inbox with the default limits; wrap it in an `Arc` to share
    /// it between the receiver and the waiters.
    pub fn new() -> Inbox {
        Inbox::default()
    }

    /// An empty inbox holding at most `capacity` events (at least one), none
    /// longer than `max_age`; wrap it in an `Arc` to share it.
    ///
    /// ```
    /// use std::time::Duration;
    /// let inbox = std::sync::Arc::new(genapi::webhook::Inbox::with_limits(1_000, Duration::from_secs(600)));
    /// assert!(inbox.is_empty());
    /// ```
    pub fn with_limits(capacity: usize, max_age: Duration) -> Inbox {
        Inbox {
            events: Mutex::new(Bounded::new(capacity, max_age)),
            arrived: tokio::sync::Notify::new(),
            // The runtime's clock, so a paused test clock ages entries too.
            clock: Arc::new(|| tokio::time::Instant::now().into_std()),
        }
    }

    /// Uses another monotonic clock for the ages (tests).
    pub fn clock(mut self, clock: impl Fn() -> Instant + Send + Sync + 'static) -> Inbox {
        self.clock = Arc::new(clock);
        self
    }

    /// Hands over a verified event (only final ones are kept).
    pub fn deliver(&self, event: Event) {
        if !event.status.is_final() {
            return;
        }
        let now = (self.clock)();
        let task_id = event.task_id.clone();
        let kept = slim(event);
        if let Ok(mut events) = self.events.lock() {
            events.insert(&task_id, kept, now);
        }
        self.arrived.notify_waiters();
    }

    /// The number of events held now, waiting for their waiter.
    pub fn len(&self) -> usize {
        let now = (self.clock)();
        self.events.lock().map(|mut events| events.len(now)).unwrap_or(0)
    }

    /// Whether no event is held now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn take(&self, task_id: &str) -> Option<PollResult> {
        let now = (self.clock)();
        self.events.lock().ok()?.remove(task_id, now)
    }

    /// Waits for the task's final notification; polls if none arrives within
    /// `fallback_after`.
    pub async fn wait(&self, task: Task, fallback_after: Duration) -> crate::Result<Output> {
        // A fallback too far away to add to the clock means "never poll".
        let deadline = crate::wait::deadline(tokio::time::Instant::now(), Some(fallback_after));
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            // Register before looking, so an event delivered in between wakes us.
            arrived.as_mut().enable();
            if let Some(result) = self.take(task.id()) {
                // A notification is text from the service, scrubbed as an
                // answer is, of everything the task's client knows.
                let result = crate::poll::scrubbed(task.scrubber(), result);
                if let Some(outcome) = task.settle(result, Duration::ZERO) {
                    return outcome;
                }
            }
            let timed_out = match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, arrived).await.is_err(),
                None => {
                    arrived.await;
                    false
                }
            };
            if timed_out {
                tracing::debug!(task_id = task.id(), "no webhook in time; polling instead");
                return task.wait().await;
            }
        }
    }
}

/// Longest `details` kept from a notification, as JSON text.
const DETAILS_KEPT: usize = 4096;

/// An event as a poll result: the known fields of `result` only (others are
/// dropped), `details` cut when large, no raw body.
fn slim(event: Event) -> PollResult {
    let details = event.details.map(|details| {
        let text = details.to_string();
        if text.len() <= DETAILS_KEPT {
            details
        } else {
            let cut = text.char_indices().nth(DETAILS_KEPT).map_or(text.len(), |(at, _)| at);
            serde_json::Value::String(format!("{}…", &text[..cut]))
        }
    });
    PollResult {
        id: event.task_id,
        status: event.status,
        result: event.result.and_then(crate::poll::lenient_task_result),
        progress: event.progress,
        details,
        preview: None,
        cost: event.cost,
    }
}
