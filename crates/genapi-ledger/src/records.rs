//! Small records shared by many processes, each write made only on the
//! record its writer read: the memory a front end (`genapi proxy`) shares
//! with its peers.
//!
//! A record is a JSON value under a key, in a scope. Three rules make it
//! safe for deciding what to pay for:
//!
//! - **A record is made once.** [`SharedRecords::create`] stores a value
//!   only where no record is (or the one there is past its keeping), in one
//!   statement: of two processes making the same record, one is told it
//!   lost.
//! - **A change is made on what was read.** Every record has a version;
//!   [`SharedRecords::replace`] changes it only while its version is the
//!   one read, so a decision made on a record another process changed
//!   meanwhile is never written, and is made again.
//! - **A holder, for a while.** A write may name a holder and how long it
//!   holds the record (a lease, never renewed: the holder writes again, or
//!   its hold lapses). Readers see whether the hold still stands, and decide
//!   what a lapsed one means; [`SharedRecords::update_held`] and
//!   [`SharedRecords::remove_held`] write only while the record is still the
//!   named holder's, lapsed or not, so a holder's late word lands on its own
//!   record and never on one another process took over.
//!
//! Times are the database's: processes whose clocks disagree agree on
//! whether a hold stands. Records are forgotten once past their keeping.

use std::time::Duration;

use tokio_postgres::Row;

use crate::link::Link;
use crate::options::seconds;
use crate::LedgerError;

/// A record as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Its value.
    pub value: serde_json::Value,
    /// Its version: each write makes a new one.
    pub version: i64,
    /// Who holds it, when a write named a holder.
    pub holder: Option<String>,
    /// Whether that hold still stands (it has not lapsed).
    pub held: bool,
}

/// Who holds a record written, and for how long.
#[derive(Clone, Copy, Debug)]
pub struct RecordHold<'a> {
    /// The holder's name (a process, a claim).
    pub holder: &'a str,
    /// How long the hold stands without another write.
    pub lasting: Duration,
}

/// Records of one scope in a ledger database, shared by every process that
/// opens the same scope.
///
/// ```no_run
/// # async fn demo() -> Result<(), genapi_ledger::LedgerError> {
/// use std::time::Duration;
/// use genapi_ledger::{RecordHold, SharedRecords};
/// let records = SharedRecords::open("postgres://genapi@db.internal/genapi", "proxies", Duration::from_secs(86_400)).await?;
/// let hold = RecordHold { holder: "proxy-1/claim-7", lasting: Duration::from_secs(60) };
/// if records.create("job-digest", &serde_json::json!({"phase": "in flight"}), Some(hold)).await? {
///     // This process made the record: it alone acts on it.
/// }
/// # Ok(()) }
/// ```
pub struct SharedRecords {
    link: Link,
    scope: String,
    keep: Duration,
}

impl std::fmt::Debug for SharedRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedRecords")
            .field("scope", &self.scope)
            .field("keep", &self.keep)
            .finish_non_exhaustive()
    }
}

/// A record's columns as read: its hold judged by the database's clock.
const READ: &str =
    "SELECT value::text, version, holder, coalesce(lease_until > now(), false) FROM genapi_shared_records
     WHERE scope = $1 AND key = $2 AND kept_until > now()";

/// Made where no record is, or over one past its keeping.
const CREATE: &str =
    "INSERT INTO genapi_shared_records AS r (scope, key, version, value, holder, lease_until, kept_until)
     VALUES ($1, $2, 1, $3::text::jsonb, $4, now() + make_interval(secs => $5), now() + make_interval(secs => $6))
     ON CONFLICT (scope, key) DO UPDATE
     SET version = r.version + 1, value = excluded.value, holder = excluded.holder,
         lease_until = excluded.lease_until, kept_until = excluded.kept_until
     WHERE r.kept_until <= now()";

/// Changed only while its version is the one read.
const REPLACE: &str = "UPDATE genapi_shared_records
     SET version = version + 1, value = $4::text::jsonb, holder = $5, lease_until = now() + make_interval(secs => $6)
     WHERE scope = $1 AND key = $2 AND version = $3 AND kept_until > now()";

/// Changed only while `holder` holds it.
const UPDATE_HELD: &str = "UPDATE genapi_shared_records
     SET version = version + 1, value = $4::text::jsonb, holder = $5, lease_until = now() + make_interval(secs => $6)
     WHERE scope = $1 AND key = $2 AND holder = $3 AND kept_until > now()";

/// Removed only while `holder` holds it.
const REMOVE_HELD: &str = "DELETE FROM genapi_shared_records WHERE scope = $1 AND key = $2 AND holder = $3";

/// Records past their keeping, removed when a process opens the scope.
const FORGET_OLD: &str = "DELETE FROM genapi_shared_records WHERE scope = $1 AND kept_until <= now()";

impl SharedRecords {
    /// Opens the records of `scope` in the ledger database at `url` (its
    /// tables made or brought up to date on first use), each kept for
    /// `keep` after it was made.
    pub async fn open(url: &str, scope: &str, keep: Duration) -> Result<SharedRecords, LedgerError> {
        let link = Link::open(
            url,
            crate::DEFAULT_STEP_DEADLINE,
            true,
            &[],
            crate::DEFAULT_RESCUE_GRACE,
        )
        .await?;
        let records = SharedRecords {
            link,
            scope: scope.to_string(),
            keep,
        };
        let scope = records.scope.as_str();
        records
            .link
            .run(
                false,
                |session| async move { session.execute(FORGET_OLD, &[&scope]).await },
            )
            .await?;
        Ok(records)
    }

    /// The record under `key`, unless there is none (or it is past its
    /// keeping).
    pub async fn read(&self, key: &str) -> Result<Option<Record>, LedgerError> {
        let scope = self.scope.as_str();
        let rows = self
            .link
            .run(
                false,
                |session| async move { session.query(READ, &[&scope, &key]).await },
            )
            .await?;
        rows.first().map(record_of).transpose()
    }

    /// Stores `value` under `key` unless a record is there: whether it was
    /// stored (`false`: another process made it first).
    pub async fn create(
        &self,
        key: &str,
        value: &serde_json::Value,
        hold: Option<RecordHold<'_>>,
    ) -> Result<bool, LedgerError> {
        let (scope, keep) = (self.scope.as_str(), seconds(self.keep));
        let (holder, lasting) = held_by(hold);
        let value = value.to_string();
        let value = value.as_str();
        let stored = self
            .link
            .run(false, |session| async move {
                session
                    .execute(CREATE, &[&scope, &key, &value, &holder, &lasting, &keep])
                    .await
            })
            .await?;
        Ok(stored == 1)
    }

    /// Replaces the record under `key` with `value`, if its version is
    /// still `version`: whether it was replaced (`false`: it changed since,
    /// or is gone; read it again).
    pub async fn replace(
        &self,
        key: &str,
        version: i64,
        value: &serde_json::Value,
        hold: Option<RecordHold<'_>>,
    ) -> Result<bool, LedgerError> {
        let scope = self.scope.as_str();
        let (holder, lasting) = held_by(hold);
        let value = value.to_string();
        let value = value.as_str();
        let replaced = self
            .link
            .run(false, |session| async move {
                session
                    .execute(REPLACE, &[&scope, &key, &version, &value, &holder, &lasting])
                    .await
            })
            .await?;
        Ok(replaced == 1)
    }

    /// Replaces the record under `key` with `value` if `holder` holds it
    /// (its hold lapsed or not): whether it did.
    ///
    /// It writes over whatever the record holds now. That suits a holder
    /// that writes from one place at a time. A holder whose words come from
    /// several tasks at once (an acceptance from one, its caller's going
    /// away from another) must write each on the version it read, with
    /// [`SharedRecords::replace`]: else a word made on an old reading lands
    /// over a newer one.
    pub async fn update_held(
        &self,
        key: &str,
        holder: &str,
        value: &serde_json::Value,
        hold: Option<RecordHold<'_>>,
    ) -> Result<bool, LedgerError> {
        let scope = self.scope.as_str();
        let (next, lasting) = held_by(hold);
        let value = value.to_string();
        let value = value.as_str();
        let updated = self
            .link
            .run(false, |session| async move {
                session
                    .execute(UPDATE_HELD, &[&scope, &key, &holder, &value, &next, &lasting])
                    .await
            })
            .await?;
        Ok(updated == 1)
    }

    /// Removes the record under `key` if `holder` holds it: whether it did.
    pub async fn remove_held(&self, key: &str, holder: &str) -> Result<bool, LedgerError> {
        let scope = self.scope.as_str();
        let removed = self
            .link
            .run(false, |session| async move {
                session.execute(REMOVE_HELD, &[&scope, &key, &holder]).await
            })
            .await?;
        Ok(removed == 1)
    }
}

/// A hold as the statements take it: no holder is a hold of no time.
fn held_by(hold: Option<RecordHold<'_>>) -> (Option<&str>, f64) {
    match hold {
        Some(hold) => (Some(hold.holder), seconds(hold.lasting)),
        None => (None, 0.0),
    }
}

fn record_of(row: &Row) -> Result<Record, LedgerError> {
    let text: String = row.try_get(0).map_err(LedgerError::from_db)?;
    Ok(Record {
        value: serde_json::from_str(&text)
            .map_err(|e| LedgerError::Database(format!("a shared record of the ledger cannot be read: {e}")))?,
        version: row.try_get(1).map_err(LedgerError::from_db)?,
        holder: row.try_get(2).map_err(LedgerError::from_db)?,
        held: row.try_get(3).map_err(LedgerError::from_db)?,
    })
}
