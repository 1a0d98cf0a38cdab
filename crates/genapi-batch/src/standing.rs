//! Where each line of a batch stands, as its journal tells: what the next
//! run does with it. A run that stops says this, and only this, about its
//! lines, so what it says is what the next run does.

use std::collections::BTreeMap;

use serde::Serialize;

use super::line::Line;
use super::line::Standing;

/// Where a batch stands, as its store says ([`crate::ReadStore::status`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Status {
    /// How each line the store knows of stands: what the next run does with
    /// it (a line it does not know of is sent).
    pub lines: BTreeMap<u64, Standing>,
    /// For a store workers share: where the workers are, and the credits.
    pub shared: Option<SharedStatus>,
}

impl Status {
    /// The status of a store that knows these lines' states.
    pub fn of_lines(lines: &BTreeMap<u64, Line>) -> Status {
        Status {
            lines: lines.iter().map(|(number, line)| (*number, line.standing())).collect(),
            shared: None,
        }
    }

    /// The status of a store workers share.
    pub fn of_shared(lines: BTreeMap<u64, Standing>, shared: SharedStatus) -> Status {
        Status {
            lines,
            shared: Some(shared),
        }
    }
}

/// A batch shared by many workers at a glance.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SharedStatus {
    /// The batch's name.
    pub batch: String,
    /// Lines whose result was saved.
    pub done: u64,
    /// Lines that ended in a failure.
    pub failed: u64,
    /// Lines whose task runs.
    pub in_flight: u64,
    /// Lines whose submission was never answered.
    pub unknown: u64,
    /// Lines a worker reached but did not submit yet, or open to a retry.
    pub open: u64,
    /// Lines no worker has reached yet.
    pub not_started: u64,
    /// Credits the service reported charging.
    pub credits_charged: f64,
    /// Credits held for submissions whose cost is not known yet.
    pub credits_held: f64,
    /// Lines held by each live worker.
    pub workers: BTreeMap<String, Vec<u64>>,
}

impl SharedStatus {
    /// Counts one line that stands so, in the ledger's words: saved lines
    /// are done, ended ones failed, accepted ones in flight, unanswered
    /// and gone ones unknown, unsent ones open.
    pub fn count(&mut self, standing: Standing) {
        match standing {
            Standing::Saved => self.done += 1,
            Standing::Ended => self.failed += 1,
            Standing::Accepted => self.in_flight += 1,
            Standing::Unanswered | Standing::Gone => self.unknown += 1,
            Standing::Unsent => self.open += 1,
        }
    }

    /// No line of the batch `batch` of `lines` jobs reached yet.
    pub fn not_started(batch: &str, lines: u64) -> SharedStatus {
        SharedStatus {
            batch: batch.to_string(),
            not_started: lines,
            ..SharedStatus::default()
        }
    }
}
