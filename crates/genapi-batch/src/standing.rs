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

/// What the workers of a shared batch share besides its lines' standings:
/// the credits, and who holds which lines. How many lines stand where is
/// counted from [`Status::lines`], the one classification.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SharedStatus {
    /// The batch's name.
    pub batch: String,
    /// Credits the service reported charging.
    pub credits_charged: f64,
    /// Credits held for submissions whose cost is not known yet.
    pub credits_held: f64,
    /// Lines held by each live worker.
    pub workers: BTreeMap<String, Vec<u64>>,
}

impl SharedStatus {
    /// The batch `batch`, with nothing charged, held or taken yet.
    pub fn new(batch: &str) -> SharedStatus {
        SharedStatus {
            batch: batch.to_string(),
            ..SharedStatus::default()
        }
    }
}
