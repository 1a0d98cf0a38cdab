//! The client-side active-task limit.
//!
//! The service refuses a submission beyond its limit of active tasks with a
//! 429 (nothing is created, so trying again later is safe); it stays the
//! arbiter. The client keeps its own count only to stay clear of 429 storms,
//! and that count must follow the service's as closely as the client can
//! know it:
//!
//! - a task counts from the moment a submission is sent (a *reservation*)
//!   and, once accepted, holds a [`Seat`]: the [`crate::Task`] owns it, and
//!   it is free when the client **sees** the task final (a wait or a poll
//!   returns a final status). Dropping a `Task` or timing out hands the seat
//!   back to the client, still taken, because the task still runs at the
//!   service and counts against the service's limit until it ends;
//! - a submission that finds no room does not wait blindly: it polls the
//!   tasks nobody is waiting for (at most once a second each), which frees
//!   the seats of those that have finished. So `submit` 100 times, then
//!   `wait` 100 times, completes; it never hangs;
//! - a task unseen for longer than the service keeps tasks is forgotten.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use reqwest::Url;
use tokio::sync::Notify;

/// A boxed future a [`SeatPool`] returns (see there).
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How often one unwatched task is polled to see whether it has finished.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);
/// How long shared seats may stay unreadable before a submission gives up.
pub(crate) const SHARED_GIVE_UP: Duration = Duration::from_secs(30);
/// After this long the service no longer knows a task; neither do we.
const FORGET_AFTER: Duration = Duration::from_secs(2 * 60 * 60);

/// Seats under an account's active-task limit shared with other processes,
/// for [`crate::ClientBuilder::shared_seats`]: a submission needs one of
/// these as well as a seat under the client's own limit. The
/// `genapi-ledger` crate's `SharedSeats` keeps them in PostgreSQL; another
/// store (a lock service, a cache) can implement the same protocol.
///
/// A seat is a number. It is taken before a submission is sent, then
/// assigned to the task the service accepted, or freed when nothing was
/// created; a seat whose submission went unanswered stays taken as long as
/// its task may run.
///
/// Its methods return `Pin<Box<dyn Future<Output = T> + Send + '_>>`, the
/// same type as `futures::future::BoxFuture<'_, T>`: an implementation may
/// write either, and return `Box::pin(async move { … })` or
/// `FutureExt::boxed`.
pub trait SeatPool: Send + Sync + std::fmt::Debug {
    /// A free seat now, if there is one; an error when the seats cannot
    /// be read.
    fn take(&self) -> BoxFuture<'_, Result<Option<i32>, Box<dyn std::error::Error + Send + Sync>>>;
    /// Wakes its waiters whenever a seat may have been freed, by any
    /// process.
    fn changes(&self) -> &Notify;
    /// Seats whose holder died while their task may still run: seat,
    /// task id, polling URL. Poll the task; when it is final, `reclaim`.
    fn lapsed(&self) -> BoxFuture<'_, Vec<(i32, String, String)>>;
    /// The task of a lapsed seat was seen final: the seat is free.
    fn reclaim(&self, seat: i32, task_id: &str);
    /// The seat now belongs to an accepted task.
    fn assign(&self, seat: i32, task_id: &str, polling_url: &Url);
    /// The seat is free.
    fn free(&self, seat: i32);
    /// A submission sent from this seat got no answer: its task may run,
    /// so the seat stays taken as long as a task may run, then is free.
    fn free_when_unanswered_expires(&self, seat: i32);
    /// How long the seats may stay unreadable (every `take` failing)
    /// before a submission waiting for one gives up with
    /// [`crate::Error::SharedLimit`], sending nothing: 30 s unless the
    /// store says otherwise.
    fn give_up_after(&self) -> Duration {
        SHARED_GIVE_UP
    }
}

#[derive(Debug)]
struct Entry {
    polling_url: Url,
    /// Its shared seat, if the limit is shared.
    shared: Option<i32>,
    accepted: Instant,
    last_checked: Instant,
    watchers: usize,
}

#[derive(Debug, Default)]
struct Ledger {
    /// Submissions sent, answer not yet known.
    reserved: usize,
    /// Accepted tasks not yet seen final, by id.
    active: HashMap<String, Entry>,
}

impl Ledger {
    fn used(&self) -> usize {
        self.reserved + self.active.len()
    }
}

/// The count of tasks believed active, shared by a client's clones.
#[derive(Debug)]
pub(crate) struct ActiveTasks {
    limit: usize,
    shared: Option<Arc<dyn SeatPool>>,
    /// One submission at a time asks for a shared seat, so a freed seat
    /// costs one query, not one per waiting submission.
    shared_turn: tokio::sync::Mutex<()>,
    ledger: Mutex<Ledger>,
    changed: Notify,
    /// Submissions and resumed tasks waiting for room now.
    waiting: std::sync::atomic::AtomicUsize,
}

/// A submission (or a resumed task) counted as waiting for room until
/// dropped.
pub(crate) struct Waiting<'a>(&'a ActiveTasks);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A seat taken by a submission in flight; given back when dropped unless
/// the task was accepted.
#[derive(Debug)]
pub(crate) struct Reservation {
    tasks: Arc<ActiveTasks>,
    settled: bool,
    /// The shared seat taken with it, if the limit is shared.
    shared: Option<i32>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            self.tasks
                .update(|ledger| ledger.reserved = ledger.reserved.saturating_sub(1));
            if let (Some(shared), Some(seat)) = (&self.tasks.shared, self.shared) {
                shared.free(seat);
            }
            self.tasks.freed();
        }
    }
}

impl Reservation {
    /// The submission was sent and no answer came: the service may have
    /// created the task. The local seat is given back (the service's 429
    /// stays the arbiter), but a shared seat stays taken for as long as
    /// such a task may run, since other processes count on it.
    pub(crate) fn unanswered(mut self) {
        if let (Some(shared), Some(seat)) = (&self.tasks.shared, self.shared.take()) {
            shared.free_when_unanswered_expires(seat);
        }
    }

    /// The submission was accepted (or a task accepted earlier is taken up
    /// again): the seat now belongs to the task.
    pub(crate) fn accepted(mut self, id: &str, polling_url: &Url) -> Seat {
        self.settled = true;
        let now = Instant::now();
        let shared = self.shared;
        // One look at the ledger: a task it already counts (taken up again,
        // or a service repeating an id) keeps its seat, and this one is free.
        let already_counted = self.tasks.update(|ledger| {
            ledger.reserved = ledger.reserved.saturating_sub(1);
            if ledger.active.contains_key(id) {
                return true;
            }
            ledger.active.insert(
                id.to_string(),
                Entry {
                    polling_url: polling_url.clone(),
                    shared,
                    accepted: now,
                    last_checked: now,
                    watchers: 0,
                },
            );
            false
        });
        if let (Some(shared_seats), Some(seat)) = (&self.tasks.shared, shared) {
            if already_counted {
                shared_seats.free(seat);
            } else {
                shared_seats.assign(seat, id, polling_url);
            }
        }
        if already_counted {
            self.tasks.freed();
        }
        Seat {
            tasks: self.tasks.clone(),
            id: id.to_string(),
        }
    }
}

/// The seat of one accepted task under the limit, owned by its
/// [`crate::Task`].
///
/// It is freed when the task is seen final, by whoever sees it. Dropping it
/// before then does not free it: the task still runs at the service, so the
/// seat stays taken, and submissions waiting for room poll the task (at
/// most once a second) until it ends.
#[derive(Debug)]
pub(crate) struct Seat {
    tasks: Arc<ActiveTasks>,
    id: String,
}

impl Seat {
    /// Someone waits for this task: submissions need not poll it.
    pub(crate) fn watch(&self) -> Watch {
        self.tasks.watch(&self.id)
    }
}

/// Marks a task as being waited for; the waiter will see it finish, so
/// submissions need not poll it.
#[derive(Debug)]
pub(crate) struct Watch {
    tasks: Arc<ActiveTasks>,
    id: String,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.tasks.update(|ledger| {
            if let Some(entry) = ledger.active.get_mut(&self.id) {
                entry.watchers = entry.watchers.saturating_sub(1);
                entry.last_checked = Instant::now();
            }
        });
    }
}

impl ActiveTasks {
    pub(crate) fn new(limit: usize, shared: Option<Arc<dyn SeatPool>>) -> Arc<ActiveTasks> {
        Arc::new(ActiveTasks {
            limit: limit.max(1),
            shared,
            shared_turn: tokio::sync::Mutex::new(()),
            ledger: Mutex::new(Ledger::default()),
            changed: Notify::new(),
            waiting: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Counts a caller as waiting for room until the guard is dropped.
    pub(crate) fn wait_for_room(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Waiting(self)
    }

    /// How many callers wait for room now.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn update<T>(&self, change: impl FnOnce(&mut Ledger) -> T) -> T {
        // A poisoned lock still holds a usable count.
        let mut ledger = self.ledger.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        change(&mut ledger)
    }

    /// A seat was freed: wake the submissions waiting for one.
    fn freed(&self) {
        self.changed.notify_waiters();
    }

    /// A seat, if there is room now (forgetting tasks too old to matter).
    pub(crate) fn try_reserve(self: &Arc<Self>) -> Option<Reservation> {
        let now = Instant::now();
        let reserved = self.update(|ledger| {
            ledger.active.retain(|_, entry| {
                let keep = now.duration_since(entry.accepted) < FORGET_AFTER;
                if let (false, Some(shared), Some(seat)) = (keep, &self.shared, entry.shared) {
                    shared.free(seat);
                }
                keep
            });
            (ledger.used() < self.limit).then(|| ledger.reserved += 1).is_some()
        });
        reserved.then(|| Reservation {
            tasks: self.clone(),
            settled: false,
            shared: None,
        })
    }

    /// Adds a shared seat to a local one: waits for its turn among this
    /// process's submissions, then for a seat freed by any process.
    /// Meanwhile the tasks nobody waits for, this process's and those of
    /// dead workers, are checked (`check` polls one: final?), so their
    /// seats come back when they end: this never waits forever.
    ///
    /// Fails when the seats cannot be read for
    /// [`SeatPool::give_up_after`] in a row
    /// (the database is gone): waiting would never end.
    pub(crate) async fn take_shared<F, Fut>(&self, reservation: &mut Reservation, check: F) -> Result<(), String>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let Some(shared) = &self.shared else { return Ok(()) };
        let _turn = self.shared_turn.lock().await;
        let mut failing_since: Option<Instant> = None;
        loop {
            // Registered before asking, so a seat freed in between wakes us.
            let changed = shared.changes().notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            // Counted from when the failing attempt began: one attempt may
            // itself wait a while (a database being reconnected to).
            let attempt = Instant::now();
            match shared.take().await {
                Ok(Some(seat)) => {
                    reservation.shared = Some(seat);
                    return Ok(());
                }
                Ok(None) => failing_since = None,
                Err(reason) => {
                    let since = *failing_since.get_or_insert(attempt);
                    if since.elapsed() >= shared.give_up_after() {
                        return Err(reason.to_string());
                    }
                }
            }
            // This process's own tasks nobody waits for hold seats too.
            while let Some((id, polling_url)) = self.next_due() {
                if check(polling_url.to_string()).await {
                    self.finished(&id);
                }
            }
            for (seat, id, polling_url) in shared.lapsed().await {
                if check(polling_url).await {
                    shared.reclaim(seat, &id);
                }
            }
            let _ = tokio::time::timeout(RECHECK, changed).await;
        }
    }

    /// The oldest task nobody waits for and nobody checked in the last
    /// second; it is marked as checked now.
    pub(crate) fn next_due(&self) -> Option<(String, Url)> {
        let now = Instant::now();
        let mut ledger = self.ledger.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (id, entry) = ledger
            .active
            .iter_mut()
            .filter(|(_, entry)| entry.watchers == 0 && now.duration_since(entry.last_checked) >= RECHECK)
            .min_by_key(|(_, entry)| entry.accepted)?;
        entry.last_checked = now;
        Some((id.clone(), entry.polling_url.clone()))
    }

    /// A future that completes when the count next changes. Make it (and
    /// enable it) *before* looking at the count, so a change in between is
    /// not missed.
    pub(crate) fn next_change(&self) -> tokio::sync::futures::Notified<'_> {
        self.changed.notified()
    }

    /// The task was seen final: its seat is free.
    pub(crate) fn finished(&self, id: &str) {
        if let Some(entry) = self.update(|ledger| ledger.active.remove(id)) {
            if let (Some(shared), Some(seat)) = (&self.shared, entry.shared) {
                shared.free(seat);
            }
            self.freed();
        }
    }

    /// Someone waits for this task.
    fn watch(self: &Arc<Self>, id: &str) -> Watch {
        self.update(|ledger| {
            if let Some(entry) = ledger.active.get_mut(id) {
                entry.watchers += 1;
            }
        });
        Watch {
            tasks: self.clone(),
            id: id.to_string(),
        }
    }

    /// Tasks active at most.
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Tasks believed active, reservations included.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.ledger.lock().map(|l| l.used()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("http://127.0.0.1:1/v1/get_result?id=x").unwrap()
    }

    #[test]
    fn reservations_count_until_refused_or_seen_final() {
        let tasks = ActiveTasks::new(2, None);
        let first = tasks.try_reserve().unwrap();
        let second = tasks.try_reserve().unwrap();
        assert!(tasks.try_reserve().is_none(), "full");
        drop(second); // the submission failed: its seat is back
        assert_eq!(tasks.in_use(), 1);
        first.accepted("a", &url());
        let third = tasks.try_reserve().unwrap();
        third.accepted("b", &url());
        assert!(tasks.try_reserve().is_none());
        tasks.finished("a");
        assert!(tasks.try_reserve().is_some(), "a finished task frees its seat");
    }

    #[test]
    fn only_unwatched_tasks_are_due_for_a_check_and_at_most_once_a_second() {
        let tasks = ActiveTasks::new(4, None);
        let watched = tasks.try_reserve().unwrap().accepted("watched", &url());
        let left = tasks.try_reserve().unwrap().accepted("left", &url());
        drop(left);
        let watch = watched.watch();
        // Fresh entries were just "checked" (accepted): none due yet.
        assert!(tasks.next_due().is_none());
        tasks.update(|ledger| {
            for entry in ledger.active.values_mut() {
                entry.last_checked -= RECHECK;
            }
        });
        assert_eq!(tasks.next_due().map(|(id, _)| id).as_deref(), Some("left"));
        assert!(tasks.next_due().is_none(), "checked just now");
        drop(watch);
        drop(watched);
        assert_eq!(tasks.in_use(), 2, "dropping a wait or a seat does not free the seat");
    }
}
