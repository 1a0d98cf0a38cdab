//! Where each line of a batch stands, as its journal tells: what the next
//! run does with it. A run that stops says this, and only this, about its
//! lines, so what it says is what the next run does.

use std::collections::BTreeMap;

use serde::Serialize;

use super::journal::{Event, LineState};
pub use super::line::Standing;

impl Standing {
    /// The standing of a line in this state.
    pub fn of(state: &LineState) -> Standing {
        match &state.finished {
            Some(Event::Finished { status, .. }) if status == "Ready" => Standing::Saved,
            Some(_) => Standing::Ended,
            None if state.ephemeral && (state.accepted.is_some() || state.unanswered) => Standing::Gone,
            None if state.accepted.is_some() => Standing::Accepted,
            None if state.unanswered => Standing::Unanswered,
            None => Standing::Unsent,
        }
    }
}

/// Where a batch stands, as its store says ([`crate::Store::status`]).
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
    pub fn of_lines(lines: &BTreeMap<u64, LineState>) -> Status {
        Status {
            lines: lines.iter().map(|(line, state)| (*line, Standing::of(state))).collect(),
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
    /// No line of the batch `batch` of `lines` jobs reached yet.
    pub fn not_started(batch: &str, lines: u64) -> SharedStatus {
        SharedStatus {
            batch: batch.to_string(),
            not_started: lines,
            ..SharedStatus::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(line: u64, ephemeral: bool) -> Event {
        Event::Intent {
            line,
            name: format!("l{line}"),
            digest: "d".into(),
            sent_at: None,
            ephemeral,
        }
    }

    fn accepted(line: u64, adopted: bool) -> Event {
        Event::Accepted {
            line,
            id: format!("t{line}"),
            polling_url: format!("http://127.0.0.1:1/v1/get_result?id=t{line}"),
            cost: None,
            adopted,
        }
    }

    #[test]
    fn tasks_of_a_service_that_ended_are_gone_unless_they_ended_first() {
        let finished = Event::Finished {
            line: 3,
            status: "Ready".into(),
            file: Some("l3.jpg".into()),
            seed: None,
            cost: None,
            duration: None,
            error: None,
            class: None,
        };
        let lines = Status::of_lines(&LineState::of_each(vec![
            intent(1, true),
            accepted(1, false),
            intent(2, true),
            intent(3, true),
            accepted(3, false),
            finished,
            intent(4, false),
            accepted(4, false),
            intent(5, true),
            accepted(5, true),
        ]))
        .lines;
        assert_eq!(lines[&1], Standing::Gone);
        assert_eq!(lines[&2], Standing::Gone, "unanswered on a mock that ended");
        assert_eq!(lines[&3], Standing::Saved);
        assert_eq!(lines[&4], Standing::Accepted);
        assert_eq!(lines[&5], Standing::Accepted, "a task adopted later is the user's");
    }
}
