//! The ledger as a batch's store ([`genapi_batch::Store`]): the same events
//! as a journal, each line claimed by one worker at a time, credits held in
//! the database; and the ledger opened to read only, for `--status`.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use genapi::FailureClass;
use genapi_batch::{Claim, CreditHolds, Event, Hold, Line, ReadStore, SettledCost, Status, StoreError, WriteStore};

use crate::lines::{Claim as LedgerClaim, Ledger};
use crate::LedgerError;

/// The kind of failure a ledger error is, for the line it kept from being
/// done: a database out of reach is the network's; a URL, a setting, a
/// refusal for safety or a batch of another job file is the user's to fix;
/// a table changed by hand, a name taken or the database's own error is
/// another failure.
impl From<LedgerError> for StoreError {
    fn from(error: LedgerError) -> StoreError {
        let class = match &error {
            LedgerError::Unreachable { .. } | LedgerError::Unanswered { .. } => FailureClass::Network,
            LedgerError::Credentials { .. } => FailureClass::Auth,
            LedgerError::Url { .. }
            | LedgerError::Settings { .. }
            | LedgerError::Insecure { .. }
            | LedgerError::OtherJobFile { .. }
            | LedgerError::PoolSize { .. }
            | LedgerError::WorkerTaken { .. }
            | LedgerError::SchemaTooNew { .. } => FailureClass::Validation,
            _ => FailureClass::Other,
        };
        StoreError::new(class, format!("the ledger: {error}"))
    }
}

fn claim_of(claim: LedgerClaim) -> Claim {
    match claim {
        LedgerClaim::Mine(events) => Claim::Mine(Line::of(events)),
        LedgerClaim::Done(events) => Claim::Done(Line::of(events)),
        LedgerClaim::Held => Claim::Held,
    }
}

impl ReadStore for Ledger {
    fn shared(&self) -> bool {
        true
    }

    fn lines(&self) -> BoxFuture<'_, Result<BTreeMap<u64, Line>, StoreError>> {
        Box::pin(async move { Ok(Line::of_each(Ledger::records(self).await?)) })
    }

    fn status<'a>(&'a self, job_lines: &'a [u64]) -> BoxFuture<'a, Result<Status, StoreError>> {
        let _ = job_lines;
        Box::pin(async move { Ok(Ledger::status(self).await?) })
    }
}

impl WriteStore for Ledger {
    fn claim(&self, line: u64) -> BoxFuture<'_, Result<Claim, StoreError>> {
        Box::pin(async move { Ok(claim_of(Ledger::claim(self, line).await?)) })
    }

    fn claim_many<'a>(&'a self, lines: &'a [u64]) -> BoxFuture<'a, Vec<Result<Claim, StoreError>>> {
        Box::pin(async move {
            match Ledger::claim_many(self, lines).await {
                Ok(claims) => claims.into_iter().map(|claim| Ok(claim_of(claim))).collect(),
                Err(error) => {
                    let error = StoreError::from(error);
                    lines.iter().map(|_| Err(error.clone())).collect()
                }
            }
        })
    }

    /// Small enough that no worker sits on lines the others could start
    /// while it finishes its own.
    fn claim_block(&self) -> usize {
        16
    }

    fn release(&self, line: u64) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { Ok(Ledger::release(self, line).await?) })
    }

    fn write(&self, event: Event) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { Ok(Ledger::record(self, &event).await?) })
    }

    /// An adopted task takes its line up again, with a row if it had none.
    fn write_adoption(&self, event: Event) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { Ok(Ledger::append(self, std::slice::from_ref(&event)).await?) })
    }

    /// A ledger says what a line holds only when it is claimed.
    fn earlier(&self, _line: u64) -> Option<Line> {
        None
    }
}

impl CreditHolds for Ledger {
    fn hold_credits<'a>(
        &'a self,
        line: u64,
        kind: &'a str,
        max: f64,
        learned: Option<f64>,
    ) -> BoxFuture<'a, Result<Hold, StoreError>> {
        Box::pin(async move { Ok(Ledger::hold_credits(self, line, kind, max, learned).await?) })
    }

    fn drop_hold(&self, line: u64) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { Ok(Ledger::drop_hold(self, line).await?) })
    }

    fn settle(&self, line: u64, cost: SettledCost) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move { Ok(Ledger::settle(self, line, cost).await?) })
    }

    /// The hold stays in the database, and no longer waits for an answer
    /// once the line is released.
    fn keep_unanswered(&self, _line: u64) {}
}

/// A batch of the ledger opened to read only: no migration is applied, no
/// batch created, no line claimed. It is a [`ReadStore`] alone: it has no
/// writing methods to refuse. For `--status`.
pub struct ReadOnlyLedger {
    db: Arc<tokio_postgres::Client>,
    batch: String,
}

impl std::fmt::Debug for ReadOnlyLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadOnlyLedger")
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

impl ReadOnlyLedger {
    /// Batch `batch` of the job file whose digest is `jobs_digest`, read
    /// without changing the database. `None` when the batch is not in the
    /// ledger (no worker has started it). A batch of another job file is
    /// refused as [`Ledger::open`] refuses it.
    pub async fn open(url: &str, batch: &str, jobs_digest: &str) -> Result<Option<ReadOnlyLedger>, LedgerError> {
        let Some(db) = crate::connect::connect_to_read(url).await? else {
            return Ok(None);
        };
        let recorded = db
            .query_opt("SELECT jobs_digest FROM genapi_batches WHERE name = $1", &[&batch])
            .await
            .map_err(LedgerError::from_db)?;
        match recorded.map(|row| row.try_get::<_, String>(0)).transpose() {
            Ok(None) => Ok(None),
            Ok(Some(digest)) if digest == jobs_digest => Ok(Some(ReadOnlyLedger {
                db: Arc::new(db),
                batch: batch.to_string(),
            })),
            Ok(Some(_)) => Err(LedgerError::OtherJobFile { batch: batch.into() }),
            Err(error) => Err(LedgerError::from_db(error)),
        }
    }
}

impl ReadStore for ReadOnlyLedger {
    fn shared(&self) -> bool {
        true
    }
    fn lines(&self) -> BoxFuture<'_, Result<BTreeMap<u64, Line>, StoreError>> {
        Box::pin(async move {
            let rows = self
                .db
                .query(crate::lines::EVENTS, &[&self.batch])
                .await
                .map_err(LedgerError::from_db)?;
            Ok(Line::of_each(crate::lines::events_of(&rows)?))
        })
    }
    fn status<'a>(&'a self, job_lines: &'a [u64]) -> BoxFuture<'a, Result<Status, StoreError>> {
        Box::pin(async move {
            let rows = self
                .db
                .query(crate::lines::STATUS, &[&self.batch])
                .await
                .map_err(LedgerError::from_db)?;
            let _ = job_lines;
            Ok(crate::lines::status_of(&self.batch, &rows)?)
        })
    }
}
