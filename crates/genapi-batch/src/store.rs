//! Where a batch keeps its lines: the one interface the runner talks to.
//!
//! A run asks its store for each line before working on it (what earlier
//! runs recorded, and whether another worker holds it), records every step
//! durably before acting on it, and holds credits under the spending cap
//! before each submission. Two stores answer:
//!
//! - [`JournalStore`]: one process, over any [`Journal`] (the file journal
//!   on disk, or memory). Every line is this run's; credits are counted here.
//! - the PostgreSQL ledger (`ledger::Ledger`, feature `postgres`): many
//!   workers, each line claimed by one at a time, credits counted in the
//!   database.
//!
//! The runner knows neither store, and neither store knows the runner: both
//! share only the records' model (the journal's [`Record`] and
//! [`LineState`]) and the one rule of the cap (`budget`).

use std::collections::HashMap;
use std::io;
use std::sync::Mutex;

use futures::future::BoxFuture;

use crate::budget::{Hold, LocalBudget};
use crate::journal::{fold, Journal, LineState, Record, Recorder};

/// What a store says of a line a run is about to work on.
// Only a shared store (the ledger) says `Done` or `Held`.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) enum Claim {
    /// This run holds the line: what earlier runs recorded of it.
    Mine(LineState),
    /// Another worker finished the line: what it recorded.
    Done(LineState),
    /// Another worker holds the line now: try it again later.
    Held,
}

/// The runner's view of where the batch lives.
pub(crate) trait Store: Send + Sync {
    /// Takes `line` for this run, with what was recorded of it. An error
    /// means nothing may be sent for it.
    fn claim(&self, line: u64) -> BoxFuture<'_, Result<Claim, String>>;
    /// [`Store::claim`] for each of `lines`, in their order: a shared store
    /// takes the free ones at once, in one step, and skips those another
    /// worker is taking now.
    fn claim_many<'a>(&'a self, lines: &'a [u64]) -> BoxFuture<'a, Vec<Result<Claim, String>>> {
        Box::pin(async move {
            let mut claims = Vec::with_capacity(lines.len());
            for line in lines {
                claims.push(self.claim(*line).await);
            }
            claims
        })
    }
    /// How many lines a run asks [`Store::claim_many`] for at once.
    fn claim_block(&self) -> usize {
        1
    }
    /// Lets go of a line this run claimed, once its outcome is known.
    fn release(&self, line: u64) -> BoxFuture<'_, Result<(), String>>;
    /// Stores a record durably before the run acts on it.
    fn record(&self, record: Record) -> BoxFuture<'_, io::Result<()>>;
    /// Holds credits for a submission of `line` of price kind `kind` under
    /// a cap of `max` over the whole batch.
    fn hold_credits<'a>(&'a self, line: u64, kind: &'a str, max: f64) -> BoxFuture<'a, Result<Hold, String>>;
    /// The submission of `line` was not sent: its hold is given back.
    fn drop_hold(&self, line: u64) -> BoxFuture<'_, Result<(), String>>;
    /// The submission of `line` was sent and never answered: its hold stays
    /// (it may have been charged) but no longer waits for an answer.
    fn keep_unanswered(&self, line: u64);
    /// What earlier runs left of `line`, when the store knows it before a
    /// claim (a journal read at start); `None` otherwise.
    fn earlier(&self, line: u64) -> Option<LineState>;
    /// Whether other workers share the batch, so a finished line's file may
    /// be in another worker's folder.
    fn shared(&self) -> bool;
}

/// A store that workers share, for [`crate::Batch::ledger`]: made from a
/// `ledger::Ledger` (feature `postgres`) with `.into()`, or given as the
/// ledger itself.
#[derive(Clone)]
pub struct SharedStore(pub(crate) std::sync::Arc<dyn Store>);

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedStore")
    }
}

/// A batch kept by this process alone, in a [`Journal`].
pub(crate) struct JournalStore {
    recorder: Recorder,
    /// What the journal held at start, by line; a line leaves when claimed.
    lines: Mutex<HashMap<u64, LineState>>,
    /// Credits under the cap, when there is one.
    budget: Option<Mutex<LocalBudget>>,
}

impl JournalStore {
    /// Reads `journal`, then keeps it open for this run's records (closed,
    /// and a file journal unlocked, when the store is dropped). `capped`:
    /// the batch has a spending cap, so credits are counted.
    pub(crate) fn open<J: Journal>(mut journal: J, capped: bool) -> io::Result<JournalStore> {
        let lines = fold(journal.replay()?);
        let budget = capped.then(|| Mutex::new(LocalBudget::from_lines(lines.iter())));
        Ok(JournalStore {
            recorder: Recorder::start(journal)?,
            lines: Mutex::new(lines),
            budget,
        })
    }

    /// Every line's digest as the journal recorded it, by digest.
    pub(crate) fn recorded(&self) -> HashMap<String, Vec<u64>> {
        let mut recorded: HashMap<String, Vec<u64>> = HashMap::new();
        if let Ok(lines) = self.lines.lock() {
            for (line, state) in lines.iter() {
                if let Some(digest) = &state.digest {
                    recorded.entry(digest.clone()).or_default().push(*line);
                }
            }
        }
        recorded
    }

    /// Changes the credits, when the batch has a cap.
    fn with_budget<T>(&self, change: impl FnOnce(&mut LocalBudget) -> T) -> Option<T> {
        let mut budget = self.budget.as_ref()?.lock().ok()?;
        Some(change(&mut budget))
    }
}

impl Store for JournalStore {
    fn claim(&self, line: u64) -> BoxFuture<'_, Result<Claim, String>> {
        let state = self
            .lines
            .lock()
            .ok()
            .and_then(|mut lines| lines.remove(&line))
            .unwrap_or_default();
        Box::pin(futures::future::ready(Ok(Claim::Mine(state))))
    }

    fn release(&self, _line: u64) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(futures::future::ready(Ok(())))
    }

    fn record(&self, record: Record) -> BoxFuture<'_, io::Result<()>> {
        self.with_budget(|budget| budget.note(&record));
        Box::pin(self.recorder.record(record))
    }

    fn hold_credits<'a>(&'a self, line: u64, kind: &'a str, max: f64) -> BoxFuture<'a, Result<Hold, String>> {
        // Without its count of credits (a poisoned lock), nothing more is
        // sent rather than sent uncounted.
        let hold = self
            .with_budget(|budget| budget.hold(line, kind, max))
            .unwrap_or(Hold::CapReached);
        Box::pin(futures::future::ready(Ok(hold)))
    }

    fn drop_hold(&self, line: u64) -> BoxFuture<'_, Result<(), String>> {
        self.with_budget(|budget| budget.drop_hold(line));
        Box::pin(futures::future::ready(Ok(())))
    }

    fn keep_unanswered(&self, line: u64) {
        self.with_budget(|budget| budget.keep_unanswered(line));
    }

    fn earlier(&self, line: u64) -> Option<LineState> {
        self.lines.lock().ok()?.get(&line).cloned()
    }

    fn shared(&self) -> bool {
        false
    }
}
