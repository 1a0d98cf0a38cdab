//! Waking a task's wait when its notification arrives.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::bounded::{Bounded, Now};
use super::event::Event;
use crate::{Output, Task};

/// Where a receiver hands over verified notifications, so that a task's wait
/// polls the moment its notification arrives instead of at the next
/// scheduled poll.
///
/// Your receiver calls [`Inbox::deliver`] with each verified [`Event`]; a
/// wait made with [`crate::WaitOptions::woken_by`] (or [`Inbox::wait`], its
/// short-hand) then polls the task at once. Polling stays the source of
/// truth: the poll's answer ends the wait or not, never the notification
/// (one may be early, replayed or, with a leaked secret, forged), and the
/// wait keeps polling on its schedule whether notifications come or not, so
/// a program still finishes when the receiver is unreachable.
///
/// A notification nobody waits for is not kept forever: at most `capacity`
/// tasks' notifications are held (the oldest goes first), none longer than
/// `max_age` ([`Inbox::DEFAULT_CAPACITY`] and [`Inbox::DEFAULT_MAX_AGE`]
/// unless set with [`Inbox::with_limits`]), and of each only that it
/// arrived, under its task id (a long one as its digest, so a sender's ids
/// cannot make the inbox hold more than a few bytes each). A waiter that
/// comes while its task's notification is held polls at once; one that comes
/// after it was dropped for age or room polls on its schedule.
///
/// ```no_run
/// # async fn demo(client: genapi::Client, inbox: std::sync::Arc<genapi::webhook::Inbox>) -> genapi::Result<()> {
/// use genapi::api::types::Gen2ProRequest;
/// let request = Gen2ProRequest::builder()
///     .prompt("a lighthouse")
///     .webhook_url("https://hooks.example.com/genapi")
///     .webhook_secret(genapi::WebhookSecret::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"));
/// let task = client.submit(request).await?;
/// let output = inbox.wait(task).await?;
/// # Ok(()) }
/// ```
pub struct Inbox {
    /// The tasks whose final notification arrived and that no waiter has
    /// taken yet. Nothing else of a notification is kept: the poll it
    /// prompts is what counts.
    arrivals: Mutex<Bounded<()>>,
    /// The waits listening now, by task id: a delivery wakes its own
    /// task's waits only, so notifications for other tasks cost the waits
    /// nothing, however many there are.
    listening: Mutex<HashMap<String, Arc<Notify>>>,
    /// Waits woken through this inbox that ended, one after the other, by
    /// a scheduled poll rather than a notification, since the last
    /// notification arrived ([`Inbox::is_heard`]).
    unheard_in_a_row: AtomicU32,
    clock: Now,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("Inbox");
        if let Ok(arrivals) = self.arrivals.lock() {
            out.field("capacity", &arrivals.capacity())
                .field("max_age", &arrivals.max_age());
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
            arrivals: Mutex::new(Bounded::new(capacity, max_age)),
            listening: Mutex::default(),
            unheard_in_a_row: AtomicU32::new(0),
            // The runtime's clock, so a paused test clock ages entries too.
            clock: Arc::new(|| tokio::time::Instant::now().into_std()),
        }
    }

    /// Uses another monotonic clock for the ages (tests).
    pub fn clock(mut self, clock: impl Fn() -> Instant + Send + Sync + 'static) -> Inbox {
        self.clock = Arc::new(clock);
        self
    }

    /// Hands over a verified event: a final one wakes the wait of its task
    /// (others are ignored).
    pub fn deliver(&self, event: Event) {
        if !event.status.is_final() {
            return;
        }
        let now = (self.clock)();
        if let Ok(mut arrivals) = self.arrivals.lock() {
            arrivals.insert(&event.task_id, (), now);
        }
        self.unheard_in_a_row.store(0, Ordering::Relaxed);
        // Woken under the lock and without a copy of the handle, so a
        // listener's count of its fellows there is exact (see `Listener`'s
        // drop).
        if let Ok(listening) = self.listening.lock() {
            if let Some(arrived) = listening.get(&event.task_id) {
                arrived.notify_waiters();
            }
        }
    }

    /// Waits ended by a scheduled poll, one after the other with no
    /// notification arriving, after which notifications no longer count as
    /// coming ([`Inbox::is_heard`]).
    pub const DEAF_AFTER: u32 = 8;

    /// Whether notifications are coming: not once [`Inbox::DEAF_AFTER`]
    /// waits woken through this inbox have ended in a row by a scheduled
    /// poll with no notification arriving meanwhile; again from the next
    /// notification. Only while heard does such a wait aim its first poll
    /// past most tasks' ends, leaving them to their notifications: an inbox
    /// nothing reaches (a receiver the service cannot call, or whose
    /// connections strangers hold) soon leaves every wait polling as it
    /// would without one, not later. (One in four tasks ends after that
    /// first poll even when every notification comes, so eight in a row
    /// happens about once in 65,000 tasks by chance.)
    ///
    /// ```
    /// let inbox = genapi::webhook::Inbox::new();
    /// assert!(inbox.is_heard(), "until waits end without notifications");
    /// ```
    pub fn is_heard(&self) -> bool {
        self.unheard_in_a_row.load(Ordering::Relaxed) < Inbox::DEAF_AFTER
    }

    /// A wait woken through this inbox ended: by its notification's poll
    /// (`notified`), or by a scheduled one.
    pub(crate) fn wait_ended(&self, notified: bool) {
        if notified {
            self.unheard_in_a_row.store(0, Ordering::Relaxed);
        } else {
            let _ = self
                .unheard_in_a_row
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| Some(n.saturating_add(1)));
        }
    }

    /// The number of tasks whose notification is held now, waiting for
    /// their waiter.
    pub fn len(&self) -> usize {
        let now = (self.clock)();
        self.arrivals.lock().map(|mut arrivals| arrivals.len(now)).unwrap_or(0)
    }

    /// Whether no notification is held now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes the notification of `task_id` out, if one is held.
    fn take(&self, task_id: &str) -> bool {
        let now = (self.clock)();
        self.arrivals
            .lock()
            .is_ok_and(|mut arrivals| arrivals.remove(task_id, now).is_some())
    }

    /// Returns once a final notification of `task_id` has arrived (at once
    /// if one is held), taking it.
    pub(crate) async fn arrival(&self, task_id: &str) {
        let listener = Listener::new(self, task_id);
        loop {
            let arrived = listener.arrived.notified();
            tokio::pin!(arrived);
            // Register before looking, so an event delivered in between wakes us.
            arrived.as_mut().enable();
            if self.take(task_id) {
                return;
            }
            arrived.await;
        }
    }

    /// Waits for the task with the client's wait options, polling at once
    /// whenever its notification arrives here: short for
    /// `task.wait_with(options.woken_by(inbox))` (see
    /// [`crate::WaitOptions::woken_by`]).
    pub async fn wait(self: &Arc<Self>, task: Task) -> crate::Result<Output> {
        task.wait_woken_by(self.clone()).await
    }
}

/// A wait listening for its task's notification, from the moment it starts
/// to look until it stops (a wake-up, or the sleep it raced ending first).
struct Listener<'a> {
    inbox: &'a Inbox,
    task_id: &'a str,
    arrived: Arc<Notify>,
}

impl<'a> Listener<'a> {
    fn new(inbox: &'a Inbox, task_id: &'a str) -> Listener<'a> {
        let arrived = match inbox.listening.lock() {
            Ok(mut listening) => listening.entry(task_id.to_string()).or_default().clone(),
            // Never woken then: the wait polls on its schedule.
            Err(_) => Arc::default(),
        };
        Listener {
            inbox,
            task_id,
            arrived,
        }
    }
}

impl Drop for Listener<'_> {
    fn drop(&mut self) {
        if let Ok(mut listening) = self.inbox.listening.lock() {
            // Only the map and this listener hold it: no other wait of the
            // task listens (counts change only under this lock).
            let alone = |arrived: &Arc<Notify>| Arc::ptr_eq(arrived, &self.arrived) && Arc::strong_count(arrived) == 2;
            if listening.get(self.task_id).is_some_and(alone) {
                listening.remove(self.task_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::Scheme;
    use crate::TaskStatus;

    fn ready(task_id: &str) -> Event {
        Event {
            task_id: task_id.into(),
            status: TaskStatus::Ready,
            result: None,
            details: None,
            progress: None,
            cost: None,
            scheme: Scheme::SharedSecret,
            message_id: None,
            raw: serde_json::Value::Null,
        }
    }

    /// Two waits of one task listen together; the one that stops leaves the
    /// other listening, and the last to stop leaves nothing behind.
    #[tokio::test(start_paused = true)]
    async fn a_task_is_listened_for_while_any_of_its_waits_listens() {
        let inbox = Inbox::new();
        let patient = inbox.arrival("t-1");
        tokio::pin!(patient);
        let brief = tokio::time::timeout(Duration::from_millis(10), inbox.arrival("t-1"));
        tokio::select! {
            _ = &mut patient => panic!("nothing was delivered"),
            ended = brief => assert!(ended.is_err()),
        }
        assert_eq!(
            inbox.listening.lock().unwrap().len(),
            1,
            "the patient wait still listens"
        );
        inbox.deliver(ready("someone-else"));
        inbox.deliver(ready("t-1"));
        patient.await;
        assert!(inbox.listening.lock().unwrap().is_empty(), "no listener left behind");
        assert_eq!(inbox.len(), 1, "only the other task's notification is held");
    }
}
