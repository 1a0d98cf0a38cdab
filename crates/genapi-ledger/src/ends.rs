//! Lines' ends carried by the worker's next event.
//!
//! A line costs the ledger three events: the intent before its submission
//! leaves, the acceptance once the service answered, and its end once the
//! result is saved. The first two decide what happens next (nothing is sent
//! without an intent, nothing accepted is ever sent again), so each is
//! written at once. An end only closes the line, and a worker with several
//! tasks in flight writes another event within moments of it: so an end
//! waits up to [`CARRY_WAIT`] for the next event, whatever its line, to
//! write it in the same statement (one commit for both), and is written on
//! its own only when none came.
//!
//! The end's caller waits for that write either way: when it returns, the
//! end is stored, and an end that could not be stored is an error it sees,
//! as if it had been written alone. A statement that fails while carrying
//! ends drops them unwritten, and each waiter writes its own.
//!
//! Refusals are not carried: a refused line stays open to a retry, and the
//! next event may be that retry's intent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use tokio::sync::oneshot;

pub(crate) use crate::carried::CARRY_WAIT;

/// A statement's common table expressions `ended` and `ended_lines`,
/// storing the ends given as JSON in parameter `$param` (the text of
/// [`Carried::json`]) for batch `$1` and worker `$3`, as the plain end
/// statement would: the event, the line done, its settled charge, its hold
/// gone once one is settled (kept otherwise: it may have been charged), and
/// the line given back. They change nothing for `[]`.
macro_rules! ends_carried {
    ($param:literal) => {
        concat!(
            "ended AS (
               INSERT INTO genapi_records (batch, line, worker, record)
               SELECT $1, e.line, $3, e.record
               FROM jsonb_to_recordset(",
            $param,
            "::text::jsonb) AS e(line bigint, record jsonb, cost float8)),
             ended_lines AS (
               UPDATE genapi_lines l SET done = true,
                      charged = coalesce(greatest(e.cost, 0), l.charged),
                      hold = CASE WHEN e.cost IS NULL THEN l.hold END,
                      worker = CASE WHEN l.worker = $3 THEN NULL ELSE l.worker END,
                      lease_until = CASE WHEN l.worker = $3 THEN NULL ELSE l.lease_until END
               FROM jsonb_to_recordset(",
            $param,
            "::text::jsonb) AS e(line bigint, record jsonb, cost float8)
               WHERE l.batch = $1 AND l.line = e.line)"
        )
    };
}
pub(crate) use ends_carried;

/// One end waiting for an event to carry it.
#[derive(Debug)]
struct Waiting {
    ticket: u64,
    end: End,
    /// Told `true` once the end is stored; dropped when the statement
    /// carrying it failed.
    stored: oneshot::Sender<bool>,
}

/// What the statement needs of an end.
#[derive(Debug, serde::Serialize)]
struct End {
    line: i64,
    record: serde_json::Value,
    cost: Option<f64>,
}

/// Ends waiting for an event, in the order they came.
#[derive(Debug, Default)]
pub(crate) struct Ends {
    waiting: Mutex<Vec<Waiting>>,
    tickets: AtomicU64,
}

/// An end put to wait: its ticket, to withdraw it, and where its write is
/// told.
pub(crate) struct Queued {
    pub(crate) ticket: u64,
    pub(crate) stored: oneshot::Receiver<bool>,
}

impl Ends {
    /// Puts the end of `line` (`event`, charged `cost`) to wait for a
    /// event to carry it.
    pub(crate) fn queue(&self, line: i64, record: serde_json::Value, cost: Option<f64>) -> Queued {
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let (stored, told) = oneshot::channel();
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.push(Waiting {
                ticket,
                end: End { line, record, cost },
                stored,
            });
        }
        Queued { ticket, stored: told }
    }

    /// Takes the end of `ticket` back to write it itself; `false` when a
    /// event took it already (its write is told to the end's receiver).
    pub(crate) fn withdraw(&self, ticket: u64) -> bool {
        let Ok(mut waiting) = self.waiting.lock() else {
            return false;
        };
        match waiting.iter().position(|w| w.ticket == ticket) {
            Some(index) => {
                waiting.remove(index);
                true
            }
            None => false,
        }
    }

    /// Every waiting end but `line`'s, for one statement to carry: a
    /// statement writes a line's row once (an event of `line` carrying its
    /// end would write it twice, and PostgreSQL keeps only one).
    pub(crate) fn take_except(&self, line: i64) -> Carried {
        let Ok(mut waiting) = self.waiting.lock() else {
            return Carried::default();
        };
        let (carried, kept) = std::mem::take(&mut *waiting)
            .into_iter()
            .partition(|w| w.end.line != line);
        *waiting = kept;
        Carried(carried)
    }
}

/// Withdraws a queued end when dropped, unless [`Withdrawal::disarm`]ed:
/// an end whose caller went away (a timeout around it) is not left for a
/// later, unrelated event to write.
pub(crate) struct Withdrawal<'a> {
    ends: &'a Ends,
    ticket: Option<u64>,
}

impl<'a> Withdrawal<'a> {
    /// Guards the end of `ticket`.
    pub(crate) fn new(ends: &'a Ends, ticket: u64) -> Withdrawal<'a> {
        Withdrawal {
            ends,
            ticket: Some(ticket),
        }
    }

    /// The end was written, or taken by a statement: nothing to withdraw.
    pub(crate) fn disarm(&mut self) {
        self.ticket = None;
    }
}

impl Drop for Withdrawal<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket {
            self.ends.withdraw(ticket);
        }
    }
}

/// Ends a statement carries. Dropped without [`Carried::stored`], they
/// tell their waiters to write their own.
#[derive(Debug, Default)]
pub(crate) struct Carried(Vec<Waiting>);

impl Carried {
    /// None.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The JSON parameter of [`ends_carried`].
    pub(crate) fn json(&self) -> String {
        let ends: Vec<&End> = self.0.iter().map(|w| &w.end).collect();
        serde_json::to_string(&ends).unwrap_or_else(|_| "[]".into())
    }

    /// The statement carrying them was committed.
    pub(crate) fn stored(self) {
        for waiting in self.0 {
            // A waiter that went away needs no answer.
            let _ = waiting.stored.send(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_carried_end_is_told_when_stored_and_a_dropped_one_is_not() {
        let ends = Ends::default();
        let first = ends.queue(1, serde_json::json!({"finished": 1}), Some(0.5));
        let second = ends.queue(2, serde_json::json!({"finished": 2}), None);
        let carried = ends.take_except(0);
        assert_eq!(
            carried.json(),
            r#"[{"line":1,"record":{"finished":1},"cost":0.5},{"line":2,"record":{"finished":2},"cost":null}]"#
        );
        assert!(!ends.withdraw(first.ticket), "taken by the statement");
        carried.stored();
        assert_eq!(first.stored.await, Ok(true));
        assert_eq!(second.stored.await, Ok(true));

        let third = ends.queue(3, serde_json::json!({}), None);
        drop(ends.take_except(0));
        assert!(third.stored.await.is_err(), "its waiter writes it");
    }

    #[test]
    fn a_records_own_line_is_not_carried_and_a_dropped_caller_withdraws_its_end() {
        let ends = Ends::default();
        let own = ends.queue(4, serde_json::json!({}), None);
        let other = ends.queue(5, serde_json::json!({}), None);
        let carried = ends.take_except(4);
        assert!(carried.json().contains("\"line\":5") && !carried.json().contains("\"line\":4"));
        drop(Withdrawal::new(&ends, own.ticket));
        assert!(ends.take_except(0).is_empty(), "withdrawn when its caller went away");
        let mut kept = Withdrawal::new(&ends, other.ticket);
        kept.disarm();
        drop(kept);
    }

    #[test]
    fn a_withdrawn_end_is_not_carried() {
        let ends = Ends::default();
        let queued = ends.queue(7, serde_json::json!({}), None);
        assert!(ends.withdraw(queued.ticket));
        assert!(!ends.withdraw(queued.ticket));
        assert!(ends.take_except(0).is_empty());
        assert_eq!(Carried::default().json(), "[]");
    }
}
