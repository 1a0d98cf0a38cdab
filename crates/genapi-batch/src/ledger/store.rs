//! The ledger as a batch's store: the same records as a journal, each line
//! claimed by one worker at a time, credits held in the database.

use std::io;
use std::sync::Arc;

use futures::future::BoxFuture;

use super::lines::{Claim as LedgerClaim, Ledger};
use crate::budget::Hold;
use crate::journal::{LineState, Record};
use crate::store::{Claim, SharedStore, Store};

impl From<Ledger> for SharedStore {
    fn from(ledger: Ledger) -> SharedStore {
        SharedStore(Arc::new(ledger))
    }
}

impl Store for Ledger {
    fn claim(&self, line: u64) -> BoxFuture<'_, Result<Claim, String>> {
        Box::pin(async move {
            match Ledger::claim(self, line).await {
                Ok(LedgerClaim::Mine(records)) => Ok(Claim::Mine(crate::line_state(records))),
                Ok(LedgerClaim::Done(records)) => Ok(Claim::Done(crate::line_state(records))),
                Ok(LedgerClaim::Held) => Ok(Claim::Held),
                Err(error) => Err(format!("the ledger: {error}")),
            }
        })
    }

    fn claim_many<'a>(&'a self, lines: &'a [u64]) -> BoxFuture<'a, Vec<Result<Claim, String>>> {
        Box::pin(async move {
            match Ledger::claim_many(self, lines).await {
                Ok(claims) => claims
                    .into_iter()
                    .map(|claim| {
                        Ok(match claim {
                            LedgerClaim::Mine(records) => Claim::Mine(crate::line_state(records)),
                            LedgerClaim::Done(records) => Claim::Done(crate::line_state(records)),
                            LedgerClaim::Held => Claim::Held,
                        })
                    })
                    .collect(),
                Err(error) => lines.iter().map(|_| Err(format!("the ledger: {error}"))).collect(),
            }
        })
    }

    /// Small enough that no worker sits on lines the others could start
    /// while it finishes its own.
    fn claim_block(&self) -> usize {
        16
    }

    fn release(&self, line: u64) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move { Ledger::release(self, line).await.map_err(|e| e.to_string()) })
    }

    fn record(&self, record: Record) -> BoxFuture<'_, io::Result<()>> {
        Box::pin(async move { Ledger::record(self, &record).await.map_err(io::Error::other) })
    }

    fn hold_credits<'a>(&'a self, line: u64, kind: &'a str, max: f64) -> BoxFuture<'a, Result<Hold, String>> {
        Box::pin(async move {
            Ledger::hold_credits(self, line, kind, max)
                .await
                .map_err(|e| format!("in the ledger: {e}"))
        })
    }

    fn drop_hold(&self, line: u64) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move { Ledger::drop_hold(self, line).await.map_err(|e| e.to_string()) })
    }

    /// The hold stays in the database, and no longer waits for an answer
    /// once the line is released.
    fn keep_unanswered(&self, _line: u64) {}

    /// A ledger says what a line holds only when it is claimed.
    fn earlier(&self, _line: u64) -> Option<LineState> {
        None
    }

    fn shared(&self) -> bool {
        true
    }
}
