//! Where a batch keeps its lines: the one seam between the runner and what
//! lasts beyond a run.
//!
//! The seam is cut by who needs what:
//!
//! - [`ReadStore`]: what anyone may read, where the lines stand
//!   ([`ReadStore::lines`], [`ReadStore::status`]). A view that only reads
//!   (`--status`, a dashboard) is a type with these methods alone:
//!   [`JournalView`] for a file journal, the ledger's read-only view.
//! - [`WriteStore`]: what a run writes, its claims on lines (what earlier
//!   runs wrote of each, and whether another worker holds it) and every
//!   step, durably, before acting on it. Adopting a task ([`crate::adopt`])
//!   writes through it too.
//! - [`CreditHolds`]: what a run holds, credits under the spending cap
//!   before each submission.
//!
//! A [`Store`] is all three, as a run needs. Two answer:
//!
//! - [`JournalStore`]: one process, over any [`Journal`] (the file journal
//!   on disk, or memory). Every line is this run's; credits are counted here.
//! - the PostgreSQL ledger (the `genapi-ledger` crate): many workers, each
//!   line claimed by one at a time, credits counted in the database.
//!
//! The runner knows neither store, and neither store knows the runner: both
//! share only the events' model ([`Event`], [`Line`]) and the one rule
//! of the cap ([`Credits::decide`]). One contract suite, generic over the
//! store, holds the file journal, the memory journal and the ledger to the
//! same answers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use genapi::FailureClass;

use crate::budget::LocalBudget;
use crate::cap::{Hold, SettledCost};
use crate::identity::Claims;
use crate::journal::{Event, Journal, Writer};
use crate::line::Line;
use crate::standing::Status;

/// What a store says of a line a run is about to work on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Claim {
    /// This run holds the line: what earlier runs wrote of it.
    Mine(Line),
    /// Another worker finished the line: what it wrote.
    Done(Line),
    /// Another worker holds the line now: try it again later.
    Held,
}

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(StoreError);

/// Why a store could not do what a run asked: in words that say what to
/// do, with the kind of failure the run reports the line as.
///
/// ```
/// use genapi::FailureClass;
/// let error = genapi_batch::StoreError::new(FailureClass::Network, "the database did not answer within 5 s");
/// assert_eq!(error.class(), FailureClass::Network);
/// assert_eq!(error.to_string(), "the database did not answer within 5 s");
/// ```
#[derive(Clone, PartialEq)]
pub struct StoreError {
    class: FailureClass,
    message: String,
}

impl StoreError {
    /// An error of this class, with this message.
    pub fn new(class: FailureClass, message: impl Into<String>) -> StoreError {
        StoreError {
            class,
            message: message.into(),
        }
    }

    /// The kind of failure: [`FailureClass::Write`] for a journal that
    /// cannot be written, [`FailureClass::Network`] for a database out of
    /// reach, and so on.
    pub fn class(&self) -> FailureClass {
        self.class
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StoreError {}

/// A journal that cannot be read or written.
impl From<io::Error> for StoreError {
    fn from(error: io::Error) -> StoreError {
        StoreError::new(FailureClass::Write, error.to_string())
    }
}

/// What anyone may read of a batch: where its lines stand. A view that
/// reads only (`--status`, a dashboard) is a type with these methods alone.
pub trait ReadStore: Send + Sync {
    /// Every line the store holds events of, with its state.
    fn lines(&self) -> BoxFuture<'_, Result<BTreeMap<u64, Line>, StoreError>>;

    /// Where the batch stands, for the lines of its job file: what the next
    /// run does with each line the store knows ([`crate::Standing`]), and
    /// for a shared store where its workers are.
    fn status<'a>(&'a self, job_lines: &'a [u64]) -> BoxFuture<'a, Result<Status, StoreError>> {
        Box::pin(async move {
            let lines = self.lines().await?;
            let _ = job_lines;
            Ok(Status::of_lines(&lines))
        })
    }

    /// Whether other workers share the batch, so a finished line's file may
    /// be in another worker's folder.
    fn shared(&self) -> bool {
        false
    }
}

/// What a run writes: its claims on lines, and their events.
///
/// Every method that can fail says why with a [`StoreError`]; a run never
/// sends a submission whose intent a store could not write.
pub trait WriteStore: ReadStore {
    /// Takes `line` for this run, with what was written of it. An error
    /// means nothing may be sent for it.
    fn claim(&self, line: u64) -> BoxFuture<'_, Result<Claim, StoreError>>;

    /// [`WriteStore::claim`] for each of `lines`, in their order: a shared
    /// store takes the free ones at once, in one step, and skips those
    /// another worker is taking now.
    fn claim_many<'a>(&'a self, lines: &'a [u64]) -> BoxFuture<'a, Vec<Result<Claim, StoreError>>> {
        Box::pin(async move {
            let mut claims = Vec::with_capacity(lines.len());
            for line in lines {
                claims.push(self.claim(*line).await);
            }
            claims
        })
    }

    /// How many lines a run asks [`WriteStore::claim_many`] for at once.
    fn claim_block(&self) -> usize {
        1
    }

    /// Lets go of a line this run claimed, once its outcome is known.
    fn release(&self, line: u64) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Writes an event durably before the run acts on it.
    fn write(&self, event: Event) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Writes an event made outside a run (an adoption, [`crate::adopt`]):
    /// the line is taken up again if it had ended. An intent is written by
    /// runs only.
    fn write_adoption(&self, event: Event) -> BoxFuture<'_, Result<(), StoreError>> {
        self.write(event)
    }

    /// What earlier runs left of `line`, when the store knows it before a
    /// claim (a journal read at start); `None` otherwise.
    fn earlier(&self, line: u64) -> Option<Line>;

    /// The lines whose records may hold a task, by the job each sent
    /// ([`crate::Claims`]), when the store knows them before a
    /// claim: a job whose claim is left behind under another line is
    /// refused rather than paid for again. A store that refuses a changed
    /// job file (the ledger) knows none.
    fn known_digests(&self) -> Claims {
        Claims::default()
    }
}

/// What a run holds under a spending cap: credits for its submissions.
pub trait CreditHolds: Send + Sync {
    /// Holds credits for a submission of `line` of price kind `kind` under
    /// a cap of `max` over the whole batch, by [`crate::Credits::decide`]:
    /// the kind is priced by the costs the service settled for its lines
    /// (never by an acceptance's report), as the store counts them.
    /// `learned` is the kind's price learned before ([`crate::Prices`]),
    /// [`crate::Credits::learned_price`]: never held at.
    fn hold_credits<'a>(
        &'a self,
        line: u64,
        kind: &'a str,
        max: f64,
        learned: Option<f64>,
    ) -> BoxFuture<'a, Result<Hold, StoreError>>;

    /// The submission of `line` was not sent: its hold is given back.
    fn drop_hold(&self, line: u64) -> BoxFuture<'_, Result<(), StoreError>>;

    /// `line`'s task ended and the service settled its `cost`: it replaces
    /// the line's hold and prices its kind at once, before the task's seat
    /// can serve another submission (a price that rose must be seen by the
    /// next hold, not after the result is saved). The line's end, written
    /// later, settles it again to the same cost.
    fn settle(&self, line: u64, cost: SettledCost) -> BoxFuture<'_, Result<(), StoreError>>;

    /// The submission of `line` was sent and never answered: its hold stays
    /// (it may have been charged) but no longer waits for an answer.
    fn keep_unanswered(&self, line: u64);
}

/// Where a batch keeps its lines (see the module documentation): all a run
/// needs, what it reads ([`ReadStore`]), writes ([`WriteStore`]) and holds
/// ([`CreditHolds`]). Any type with the three is a store.
pub trait Store: WriteStore + CreditHolds {}

impl<T: WriteStore + CreditHolds + ?Sized> Store for T {}

/// A batch kept by this process alone, in a [`Journal`].
///
/// ```no_run
/// # fn demo() -> std::io::Result<()> {
/// use genapi_batch::{FileJournal, JournalStore};
/// std::fs::create_dir_all("out")?;
/// let store = JournalStore::open(FileJournal::open("out/journal.jsonl")?)?;
/// # Ok(()) }
/// ```
pub struct JournalStore {
    writer: Writer,
    /// What the journal held at start, by line, and events written before
    /// the line is claimed (an adoption); a line leaves when claimed.
    lines: Mutex<HashMap<u64, Line>>,
    /// Every line's state as written, claimed or not, for adoption and
    /// status.
    states: Mutex<BTreeMap<u64, Line>>,
    /// The lines this run holds: claimed and not released. An intent is
    /// written for these alone, as the ledger writes one only under the
    /// worker's claim.
    held: Mutex<HashSet<u64>>,
    /// Credits under the cap, counted from `states` the first time they
    /// are needed (so an adoption written before the run is in them).
    budget: Mutex<Option<LocalBudget>>,
}

impl std::fmt::Debug for JournalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalStore").finish_non_exhaustive()
    }
}

impl JournalStore {
    /// Reads `journal`, then keeps it open for this run's events (closed,
    /// and a file journal unlocked, when the store is dropped).
    pub fn open<J: Journal + 'static>(mut journal: J) -> io::Result<JournalStore> {
        journal.take_for_a_run()?;
        let lines: HashMap<u64, Line> = Line::of_each(journal.events()?).into_iter().collect();
        let states = lines.iter().map(|(line, state)| (*line, state.clone())).collect();
        Ok(JournalStore {
            writer: Writer::start(journal)?,
            lines: Mutex::new(lines),
            states: Mutex::new(states),
            held: Mutex::new(HashSet::new()),
            budget: Mutex::new(None),
        })
    }

    /// Changes the credits, counting them from every line's state first if
    /// they were not needed yet.
    fn with_budget<T>(&self, change: impl FnOnce(&mut LocalBudget) -> T) -> Option<T> {
        let mut budget = self.budget.lock().ok()?;
        if budget.is_none() {
            let states = self.states.lock().ok()?;
            *budget = Some(LocalBudget::from_lines(states.iter()));
        }
        budget.as_mut().map(change)
    }

    /// Notes a durable event in the credits, once they are counted (until
    /// then the lines' states hold it).
    fn note_credits(&self, event: &Event) {
        if let Ok(mut budget) = self.budget.lock() {
            if let Some(budget) = budget.as_mut() {
                budget.note(event);
            }
        }
    }
}

impl ReadStore for JournalStore {
    fn lines(&self) -> BoxFuture<'_, Result<BTreeMap<u64, Line>, StoreError>> {
        let lines = self.states.lock().map(|states| states.clone()).map_err(|_| unusable());
        Box::pin(futures::future::ready(lines))
    }
}

impl WriteStore for JournalStore {
    fn claim(&self, line: u64) -> BoxFuture<'_, Result<Claim, StoreError>> {
        // Without what the journal holds (a lock poisoned by a panic), the
        // line could look new and be paid for again: nothing is sent for it.
        let claim = match (self.lines.lock(), self.held.lock()) {
            (Ok(mut lines), Ok(mut held)) => {
                held.insert(line);
                Ok(Claim::Mine(lines.remove(&line).unwrap_or_default()))
            }
            _ => Err(unusable()),
        };
        // A line is claimed as it is worked on (one at a time, as room
        // frees up): a task an earlier run left in flight may settle now.
        self.with_budget(|budget| budget.claimed(line));
        Box::pin(futures::future::ready(claim))
    }

    fn release(&self, line: u64) -> BoxFuture<'_, Result<(), StoreError>> {
        if let Ok(mut held) = self.held.lock() {
            held.remove(&line);
        }
        self.with_budget(|budget| budget.released(line));
        Box::pin(futures::future::ready(Ok(())))
    }

    fn write(&self, event: Event) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            // The request leaves after its intent: never for a line this run
            // does not hold.
            if matches!(event, Event::Intent { .. }) && !self.held.lock().is_ok_and(|held| held.contains(&event.line()))
            {
                return Err(StoreError::new(
                    FailureClass::Other,
                    format!("line {} is not held by this run; nothing was sent", event.line()),
                ));
            }
            // What is known of the line changes once the event is durable:
            // an adoption that could not be written is not polled.
            self.writer.write(event.clone()).await.map_err(StoreError::from)?;
            self.note_credits(&event);
            if let Ok(mut states) = self.states.lock() {
                states.entry(event.line()).or_default().apply(event.clone());
            }
            // A line not claimed yet (an adoption before the run) is claimed
            // with what was written of it since.
            if let Ok(mut lines) = self.lines.lock() {
                if let Some(state) = lines.get_mut(&event.line()) {
                    state.apply(event);
                }
            }
            Ok(())
        })
    }

    fn earlier(&self, line: u64) -> Option<Line> {
        // A poisoned lock says the line is known (an empty state): it is
        // then claimed, and the claim refuses it.
        match self.lines.lock() {
            Ok(lines) => lines.get(&line).cloned(),
            Err(_) => Some(Line::default()),
        }
    }

    fn known_digests(&self) -> Claims {
        match self.lines.lock() {
            Ok(lines) => Claims::of(lines.iter().map(|(number, line)| (*number, line))),
            Err(_) => Claims::default(),
        }
    }
}

impl CreditHolds for JournalStore {
    fn hold_credits<'a>(
        &'a self,
        line: u64,
        kind: &'a str,
        max: f64,
        learned: Option<f64>,
    ) -> BoxFuture<'a, Result<Hold, StoreError>> {
        // Without its count of credits (a poisoned lock), nothing more is
        // sent rather than sent uncounted.
        let hold = self
            .with_budget(|budget| budget.hold(line, kind, max, learned))
            .unwrap_or(Hold::CapReached);
        Box::pin(futures::future::ready(Ok(hold)))
    }

    fn drop_hold(&self, line: u64) -> BoxFuture<'_, Result<(), StoreError>> {
        self.with_budget(|budget| budget.drop_hold(line));
        Box::pin(futures::future::ready(Ok(())))
    }

    fn settle(&self, line: u64, cost: SettledCost) -> BoxFuture<'_, Result<(), StoreError>> {
        self.with_budget(|budget| budget.settle(line, cost.credits()));
        Box::pin(futures::future::ready(Ok(())))
    }

    fn keep_unanswered(&self, line: u64) {
        self.with_budget(|budget| budget.keep_unanswered(line));
    }
}

/// What a store says when a panic left its lines unusable.
fn unusable() -> StoreError {
    StoreError::new(
        FailureClass::Other,
        "the journal's lines are unusable after a panic; nothing more is sent",
    )
}

/// A file journal read without taking it: where its batch stands, even
/// while a run holds the journal. It only reads, so it has no writing
/// methods: nothing is created, locked or changed.
///
/// ```
/// use genapi_batch::{JournalView, ReadStore};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let view = JournalView::new("out/journal.jsonl");
/// // No journal there yet: it says so.
/// assert!(view.lines().await.is_err());
/// # });
/// ```
#[derive(Clone, Debug)]
pub struct JournalView {
    path: std::path::PathBuf,
}

impl JournalView {
    /// The journal at `path`, read each time it is asked (by
    /// [`crate::FileJournal::read`]).
    pub fn new(path: impl Into<std::path::PathBuf>) -> JournalView {
        JournalView { path: path.into() }
    }
}

impl ReadStore for JournalView {
    fn lines(&self) -> BoxFuture<'_, Result<BTreeMap<u64, Line>, StoreError>> {
        let events = crate::FileJournal::read(&self.path);
        Box::pin(futures::future::ready(
            events.map(Line::of_each).map_err(StoreError::from),
        ))
    }
}

/// A store behind a `Box` (to choose one at run time, `Box<dyn Store>`) or
/// an `Arc` (to keep a handle for [`ReadStore::status`] or [`crate::adopt`]
/// while a batch runs over it) is a store too, and likewise each of its
/// parts.
macro_rules! store_behind {
    ($pointer:ident) => {
        impl<S: ReadStore + ?Sized> ReadStore for $pointer<S> {
            fn lines(&self) -> BoxFuture<'_, Result<BTreeMap<u64, Line>, StoreError>> {
                (**self).lines()
            }
            fn status<'a>(&'a self, job_lines: &'a [u64]) -> BoxFuture<'a, Result<Status, StoreError>> {
                (**self).status(job_lines)
            }
            fn shared(&self) -> bool {
                (**self).shared()
            }
        }

        impl<S: WriteStore + ?Sized> WriteStore for $pointer<S> {
            fn claim(&self, line: u64) -> BoxFuture<'_, Result<Claim, StoreError>> {
                (**self).claim(line)
            }
            fn claim_many<'a>(&'a self, lines: &'a [u64]) -> BoxFuture<'a, Vec<Result<Claim, StoreError>>> {
                (**self).claim_many(lines)
            }
            fn claim_block(&self) -> usize {
                (**self).claim_block()
            }
            fn release(&self, line: u64) -> BoxFuture<'_, Result<(), StoreError>> {
                (**self).release(line)
            }
            fn write(&self, event: Event) -> BoxFuture<'_, Result<(), StoreError>> {
                (**self).write(event)
            }
            fn write_adoption(&self, event: Event) -> BoxFuture<'_, Result<(), StoreError>> {
                (**self).write_adoption(event)
            }
            fn earlier(&self, line: u64) -> Option<Line> {
                (**self).earlier(line)
            }
            fn known_digests(&self) -> Claims {
                (**self).known_digests()
            }
        }

        impl<S: CreditHolds + ?Sized> CreditHolds for $pointer<S> {
            fn hold_credits<'a>(
                &'a self,
                line: u64,
                kind: &'a str,
                max: f64,
                learned: Option<f64>,
            ) -> BoxFuture<'a, Result<Hold, StoreError>> {
                (**self).hold_credits(line, kind, max, learned)
            }
            fn drop_hold(&self, line: u64) -> BoxFuture<'_, Result<(), StoreError>> {
                (**self).drop_hold(line)
            }
            fn settle(&self, line: u64, cost: SettledCost) -> BoxFuture<'_, Result<(), StoreError>> {
                (**self).settle(line, cost)
            }
            fn keep_unanswered(&self, line: u64) {
                (**self).keep_unanswered(line)
            }
        }
    };
}

store_behind!(Box);
store_behind!(Arc);
