//! A batch's lines in the ledger: who works on which, and their events.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Row;

use crate::carried::{seat_changes, Notes};
use crate::ends::{ends_carried, Ends, Withdrawal, CARRY_WAIT};
use crate::link::Link;
use crate::options::seconds;
use crate::SharedSeats;
use crate::{naming, LedgerError, LedgerOptions};
use genapi_batch::{Event, Hold, SettledCost, SharedStatus, Status};

/// Every event of a batch (`$1`), in the order they were stored.
pub(crate) const EVENTS: &str = "SELECT record::text FROM genapi_records WHERE batch = $1 ORDER BY seq";

/// The events of rows [`EVENTS`] read.
pub(crate) fn events_of(rows: &[Row]) -> Result<Vec<Event>, LedgerError> {
    rows.iter()
        .map(|row| {
            let text: String = row.try_get(0).map_err(LedgerError::from_db)?;
            serde_json::from_str(&text)
                .map_err(|e| LedgerError::Database(format!("an event of the ledger cannot be read: {e}")))
        })
        .collect()
}

/// One batch in a PostgreSQL ledger, as one worker sees it.
///
/// Open it in every worker with the same batch name and job file; it is
/// the batch's [`genapi_batch::Store`].
///
/// ```no_run
/// # async fn demo(client: genapi::Client, jobs: Vec<genapi_batch::Job>) -> Result<(), Box<dyn std::error::Error>> {
/// use futures::StreamExt;
/// use genapi_batch::Batch;
/// use genapi_ledger::Ledger;
/// let ledger = Ledger::open("postgres://genapi@db.internal/genapi", "catalogue-2026-11", "9f2c0d1e").await?;
/// println!("working as {}", ledger.worker());
/// let outcomes: Vec<_> = Batch::new(client, ledger, "out")
///     .run(jobs)?
///     .collect()
///     .await;
/// # Ok(()) }
/// ```
pub struct Ledger {
    /// The connection the worker's steps share; it holds the worker's name.
    db: Arc<Link>,
    /// A connection of its own for transactions (statements of other tasks
    /// sent on the shared one would run inside them), one at a time.
    transactions: Link,
    transaction_turn: tokio::sync::Mutex<()>,
    /// Lines given back with the event of their end, so not released again.
    released: std::sync::Mutex<std::collections::HashSet<u64>>,
    batch: String,
    /// The database's own name ([`Ledger::database_id`]).
    database_id: String,
    worker: String,
    lease: Duration,
    renewal: tokio::task::JoinHandle<()>,
    /// Seats whose changes this ledger's events carry.
    seats: Option<SharedSeats>,
    /// Lines' ends waiting for the next event to carry them.
    ends: Ends,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("batch", &self.batch)
            .field("worker", &self.worker)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

/// The longest a line's giving back may take; its lease lapses otherwise.
const RELEASE_STEP: Duration = Duration::from_secs(1);

/// An event's statement, without and with what it carries: the seat
/// changes (one more parameter, `$seats`, after the event's own) and other
/// lines' ends (`$ends`): `before` a statement that has no `WITH` of its
/// own, `within` one that has (its text starting after `WITH`).
macro_rules! with_and_without_carried {
    (before $seats:literal, $ends:literal, $statement:literal) => {
        (
            $statement,
            concat!(
                "WITH ",
                seat_changes!($seats),
                ", ",
                ends_carried!($ends),
                " ",
                $statement
            ),
        )
    };
    (within $seats:literal, $ends:literal, $statement:literal) => {
        (
            concat!("WITH ", $statement),
            concat!(
                "WITH ",
                seat_changes!($seats),
                ", ",
                ends_carried!($ends),
                ", ",
                $statement
            ),
        )
    };
}

/// An intent, stored only while the worker holds the line with at least
/// `$5` seconds of its lease left by the database's clock when the
/// statement runs (`clock_timestamp()`: `now()` is the transaction's start,
/// which a statement stalled in a lock wait or a descheduled backend would
/// keep in the past). The same statement locks the line's row and renews
/// its lease to `$6` seconds, so a claim made while the intent is in flight
/// waits for it (or skips the line) and then finds the lease live: no other
/// worker can take the line between the check and the intent becoming
/// visible, and decide without it.
const INTENT: (&str, &str) = with_and_without_carried!(
    within "$7", "$8",
    "fenced AS (
       UPDATE genapi_lines
       SET lease_until = greatest(lease_until, clock_timestamp() + make_interval(secs => $6))
       WHERE batch = $1 AND line = $2 AND worker = $3
         AND lease_until > clock_timestamp() + make_interval(secs => $5)
       RETURNING line)
     INSERT INTO genapi_records (batch, line, worker, record)
     SELECT $1, $2, $3, $4::text::jsonb FROM fenced"
);

/// An acceptance, with the cost it reported (`$5`): not a charge (a
/// service may report less there than it settles), so the hold stays until
/// the task ends, raised to the report when that is more, as the file
/// journal's budget does. A line held nothing (sent without a cap, or
/// adopted) holds the report: counted, never a price.
const ACCEPTED: (&str, &str) = with_and_without_carried!(
    within "$6", "$7",
    "stored AS (INSERT INTO genapi_records (batch, line, worker, record)
                VALUES ($1, $2, $3, $4::text::jsonb))
     UPDATE genapi_lines SET hold = CASE WHEN $5::float8 > coalesce(hold, 0) THEN $5::float8 ELSE hold END
     WHERE batch = $1 AND line = $2"
);

/// A refusal: nothing was created, the hold goes.
const REFUSED: (&str, &str) = with_and_without_carried!(
    within "$5", "$6",
    "stored AS (INSERT INTO genapi_records (batch, line, worker, record)
                VALUES ($1, $2, $3, $4::text::jsonb))
     UPDATE genapi_lines SET hold = NULL WHERE batch = $1 AND line = $2"
);

/// An end (`$5`: the line is done, and given back with it), with the cost
/// the service settled (`$6`), which replaces the hold; a line that ended
/// without one keeps its hold (it may have been charged), no longer live
/// once given back.
const FINISHED: (&str, &str) = with_and_without_carried!(
    within "$7", "$8",
    "stored AS (INSERT INTO genapi_records (batch, line, worker, record)
                VALUES ($1, $2, $3, $4::text::jsonb))
     UPDATE genapi_lines SET done = $5,
            charged = coalesce(greatest($6::float8, 0), charged),
            hold = CASE WHEN $6::float8 IS NULL AND $5 THEN hold END,
            worker = CASE WHEN $5 AND worker = $3 THEN NULL ELSE worker END,
            lease_until = CASE WHEN $5 AND worker = $3 THEN NULL ELSE lease_until END
     WHERE batch = $1 AND line = $2"
);

/// What the ledger holds for one line, for the batch to decide.
#[derive(Debug)]
pub(crate) enum Claim {
    /// This worker holds the line now; its events so far.
    Mine(Vec<Event>),
    /// The line is done; its events.
    Done(Vec<Event>),
    /// Another worker holds it.
    Held,
}

impl Ledger {
    /// Connects (applying the schema's migrations on first use) and joins
    /// batch `batch` of the job file whose digest is `jobs_digest`, creating
    /// the batch if it is new. A batch of another job file is refused.
    ///
    /// `jobs_digest` is any fingerprint of the jobs that every worker
    /// computes alike, and that changes whenever any job does, or moves to
    /// another line: the ledger refuses a batch whose jobs changed, rather
    /// than tell which line's records are which job's (a line is its job,
    /// see [`genapi_batch::Claims`]), so a fingerprint that stays the same
    /// over an edit (a constant, a count of lines) lets a job moved to
    /// another line be paid for again. `genapi batch` uses [`genapi_batch::JobFile::digest`]
    /// and names the batch `jobs:` followed by
    /// [`genapi_batch::safe_stem`] of the job file's name (`jobs:jobsjsonl`
    /// for `jobs.jsonl`), so a program joins a batch the command started by
    /// passing the same two.
    pub async fn open(url: &str, batch: &str, jobs_digest: &str) -> Result<Ledger, LedgerError> {
        Ledger::open_with(url, batch, jobs_digest, LedgerOptions::default()).await
    }

    /// [`Ledger::open`] as `options` say: the worker's name, its lease, and
    /// each database step's deadline.
    pub async fn open_with(
        url: &str,
        batch: &str,
        jobs_digest: &str,
        options: LedgerOptions,
    ) -> Result<Ledger, LedgerError> {
        let db = Arc::new(Link::open(url, options.step, true, &[], options.rescue_grace).await?);
        db.run(false, |session| async move {
            session
                .execute(
                    "INSERT INTO genapi_batches (name, jobs_digest) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
                    &[&batch, &jobs_digest],
                )
                .await
        })
        .await?;
        let recorded: String = db
            .run(false, |session| async move {
                session
                    .query_one("SELECT jobs_digest FROM genapi_batches WHERE name = $1", &[&batch])
                    .await?
                    .try_get(0)
            })
            .await?;
        if recorded != jobs_digest {
            return Err(LedgerError::OtherJobFile { batch: batch.into() });
        }
        let database_id: String = db
            .run(false, |session| async move {
                session
                    .query_one("SELECT id FROM genapi_ledger LIMIT 1", &[])
                    .await?
                    .try_get(0)
            })
            .await?;
        let lease = options.lease.max(Duration::from_secs(1));
        // A worker name is this batch's: the same name in another batch is
        // another worker.
        let worker = naming::take(&db, &format!("batch {batch}"), &options).await?;
        let renewal = tokio::spawn(renew(db.clone(), batch.to_string(), worker.clone(), lease));
        Ok(Ledger {
            db,
            transactions: Link::open(url, options.step, false, &[], options.rescue_grace).await?,
            transaction_turn: tokio::sync::Mutex::new(()),
            released: Default::default(),
            batch: batch.into(),
            database_id,
            worker,
            lease,
            renewal,
            seats: None,
            ends: Ends::default(),
        })
    }

    /// This worker's name, as the ledger shows it.
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// The batch's name.
    pub fn batch(&self) -> &str {
        &self.batch
    }

    /// The ledger database's own name: made once, with its tables, so two
    /// databases never share one however their addresses are spelt (a
    /// `host=… dbname=…` string, a URL naming the database in its query),
    /// and one database keeps it under every spelling. What a folder a
    /// batch's workers share is marked with.
    pub fn database_id(&self) -> &str {
        &self.database_id
    }

    /// Claims `line` for this worker: it is this worker's until released,
    /// or until its lease lapses. A hold the line still has is a run's that
    /// is gone (a claim takes a line no running process works on): it
    /// loses its kind, which makes it dead (counted, never waited for; see
    /// [`Ledger::hold_credits`]).
    pub(crate) async fn claim(&self, line: u64) -> Result<Claim, LedgerError> {
        let line = line as i64;
        let lease = seconds(self.lease);
        let (batch, worker) = (&self.batch, &self.worker);
        // The claim, then what the line holds, read apart: a claim that
        // waited for another worker's intent (its statement holds the
        // line's row) must read the records that intent committed. One
        // statement would read them as they stood when it began, and a
        // line whose renewed lease lapsed meanwhile would be taken without
        // its intent, and sent again.
        let row = self
            .db
            .run(true, |session| async move {
                let claimed = session
                    .query_one(
                        concat!(
                            "WITH claimed AS (
                   INSERT INTO genapi_lines AS l (batch, line, worker, lease_until)
                   VALUES ($1, $2, $3, now() + make_interval(secs => $4))
                   ON CONFLICT (batch, line) DO UPDATE
                     SET worker = excluded.worker, lease_until = excluded.lease_until,
                         kind = CASE WHEN l.hold IS NULL THEN l.kind END
                     WHERE NOT l.done AND (l.worker IS NULL OR l.worker = $3 OR l.lease_until < now() OR ",
                            name_free!("'batch ' || $1", "l.worker"),
                            ")
                   RETURNING 1)
                 SELECT EXISTS (SELECT 1 FROM claimed)"
                        ),
                        &[batch, &line, worker, &lease],
                    )
                    .await?;
                let mine: bool = claimed.try_get(0)?;
                session
                    .query_one(
                        "SELECT $3::bool,
                        coalesce((SELECT done FROM genapi_lines WHERE batch = $1 AND line = $2), false),
                        (SELECT coalesce(json_agg(r.record ORDER BY r.seq), '[]'::json)::text
                         FROM genapi_records r WHERE r.batch = $1 AND r.line = $2)",
                        &[batch, &line, &mine],
                    )
                    .await
            })
            .await?;
        let db_error = LedgerError::from_db;
        let (mine, done, text): (bool, bool, String) = (
            row.try_get(0).map_err(db_error)?,
            row.try_get(1).map_err(db_error)?,
            row.try_get(2).map_err(db_error)?,
        );
        match (mine, done) {
            (true, _) => Ok(Claim::Mine(records(&text)?)),
            (false, true) => Ok(Claim::Done(records(&text)?)),
            (false, false) => Ok(Claim::Held),
        }
    }

    /// Claims the free ones of `lines` for this worker, in one statement,
    /// and says what each of them holds: a line no worker has reached yet
    /// is made and claimed; a free one, or one whose worker's lease lapsed,
    /// is claimed unless another worker is claiming it at this very moment
    /// (`FOR UPDATE SKIP LOCKED`: no worker waits on another's claim); a
    /// line done is read back; any other is held. A claimed line's hold
    /// dies, as with [`Ledger::claim`].
    pub(crate) async fn claim_many(&self, lines: &[u64]) -> Result<Vec<Claim>, LedgerError> {
        if lines.is_empty() {
            return Ok(Vec::new());
        }
        let wanted: Vec<i64> = lines.iter().map(|line| *line as i64).collect();
        let lease = seconds(self.lease);
        let (batch, worker, wanted_ref) = (&self.batch, &self.worker, &wanted);
        let rows = self
            .db
            .run(true, |session| async move {
                session
                    .query(
                        concat!(
                            "WITH wanted AS (SELECT DISTINCT unnest($2::bigint[]) AS line),
                         fresh AS (
                           INSERT INTO genapi_lines (batch, line, worker, lease_until)
                           SELECT $1, line, $3, now() + make_interval(secs => $4) FROM wanted
                           ON CONFLICT (batch, line) DO NOTHING
                           RETURNING line),
                         free AS (
                           SELECT l.line FROM genapi_lines l
                           WHERE l.batch = $1 AND l.line = ANY($2) AND NOT l.done
                             AND (l.worker IS NULL OR l.worker = $3 OR l.lease_until < now() OR ",
                            name_free!("'batch ' || $1", "l.worker"),
                            ")
                           FOR UPDATE SKIP LOCKED),
                         taken AS (
                           UPDATE genapi_lines l SET worker = $3, lease_until = now() + make_interval(secs => $4),
                                  kind = CASE WHEN l.hold IS NULL THEN l.kind END
                           FROM free WHERE l.batch = $1 AND l.line = free.line
                           RETURNING l.line),
                         seen AS (
                           SELECT w.line,
                                  w.line IN (SELECT line FROM fresh UNION ALL SELECT line FROM taken) AS mine,
                                  coalesce((SELECT d.done FROM genapi_lines d
                                            WHERE d.batch = $1 AND d.line = w.line), false) AS done
                           FROM wanted w)
                         SELECT s.line, s.mine, s.done,
                                CASE WHEN s.mine OR s.done THEN
                                  (SELECT coalesce(json_agg(r.record ORDER BY r.seq), '[]'::json)::text
                                   FROM genapi_records r WHERE r.batch = $1 AND r.line = s.line)
                                END
                         FROM seen s"
                        ),
                        &[batch, wanted_ref, worker, &lease],
                    )
                    .await
            })
            .await?;
        let db = LedgerError::from_db;
        let mut found = std::collections::HashMap::with_capacity(rows.len());
        for row in rows {
            let line: i64 = row.try_get(0).map_err(db)?;
            let (mine, done): (bool, bool) = (row.try_get(1).map_err(db)?, row.try_get(2).map_err(db)?);
            let text: Option<String> = row.try_get(3).map_err(db)?;
            let claim = match (mine, done, text) {
                (true, _, Some(text)) => Claim::Mine(records(&text)?),
                (false, true, Some(text)) => Claim::Done(records(&text)?),
                _ => Claim::Held,
            };
            found.insert(line, claim);
        }
        Ok(wanted
            .iter()
            .map(|line| found.remove(line).unwrap_or(Claim::Held))
            .collect())
    }

    /// Gives `line` back (its work in this run is over, done or not). A
    /// line whose end was written was given back with it.
    ///
    /// Within [`RELEASE_STEP`]: giving a line back only spares other
    /// workers its lease, and its line's report waits for it (a database
    /// that stopped answering would hold the report of a line it kept from
    /// being sent for a whole step more).
    pub(crate) async fn release(&self, line: u64) -> Result<(), LedgerError> {
        if self.released.lock().is_ok_and(|mut released| released.remove(&line)) {
            return Ok(());
        }
        let (batch, worker, line) = (&self.batch, &self.worker, line as i64);
        self.db
            .run_within(RELEASE_STEP, false, |session| async move {
                session
                    .execute(
                        "UPDATE genapi_lines SET worker = NULL, lease_until = NULL
                         WHERE batch = $1 AND line = $2 AND worker = $3",
                        &[batch, &line, worker],
                    )
                    .await
            })
            .await?;
        Ok(())
    }

    /// Writes `seats`' changes (a seat taken again, the task accepted on
    /// it) in the statements of this ledger's events, so a line costs the
    /// database two commits (its intent and its acceptance, the end going
    /// with a later event) rather than five: see the modules `carried`
    /// and `ends`. The seats must be in the ledger's database, opened with
    /// the same URL ([`LedgerError::Database`] otherwise).
    ///
    /// ```no_run
    /// # async fn demo(url: &str) -> Result<(), genapi_ledger::LedgerError> {
    /// use genapi_ledger::{Ledger, SharedSeats};
    /// let seats = SharedSeats::join(url, "team-account", 24).await?;
    /// let mut ledger = Ledger::open(url, "nightly", "0123456789abcdef").await?;
    /// ledger.carry_seat_changes(&seats)?;
    /// # Ok(()) }
    /// ```
    pub fn carry_seat_changes(&mut self, seats: &SharedSeats) -> Result<(), LedgerError> {
        if !seats.same_database(&self.db) {
            return Err(LedgerError::Database(
                "the seats' changes can be carried only by a ledger opened with the seats' URL".into(),
            ));
        }
        seats.carried_by_a_ledger();
        self.seats = Some(seats.clone());
        Ok(())
    }

    /// Stores one event of a line this worker holds. An intent is stored
    /// only while the claim is this worker's and its lease live (else
    /// [`LedgerError::Database`] says the claim was lost and nothing may be
    /// sent), and renews the lease; the other events are stored whatever
    /// happened to the claim, since they say what the service did.
    pub(crate) async fn record(&self, record: &Event) -> Result<(), LedgerError> {
        let line = record.line() as i64;
        let text = serde_json::to_string(record).map_err(|e| LedgerError::Database(e.to_string()))?;
        let (batch, worker, text) = (&self.batch, &self.worker, &text);
        match record {
            Event::Intent { .. } => {
                let lease = seconds(self.lease);
                // Live is enough: the statement renews the lease to a whole
                // one under the line's row lock, so the request leaves with a
                // whole lease ahead however little was left. (A margin asked
                // more of a worker the machine had slowed, and bought nothing.)
                let margin = 0.0_f64;
                // Exclusive: a worker whose name another process took sends
                // nothing more.
                let stored = self
                    .write(line, true, INTENT, &[batch, &line, worker, text, &margin, &lease])
                    .await?;
                if stored == 0 {
                    return Err(LedgerError::Database(format!(
                        "line {line} is no longer held by this worker (its lease lapsed); nothing was sent"
                    )));
                }
            }
            Event::Accepted { cost, .. } => {
                self.write(line, false, ACCEPTED, &[batch, &line, worker, text, cost])
                    .await?;
            }
            Event::Refused { .. } => {
                self.write(line, false, REFUSED, &[batch, &line, worker, text]).await?;
            }
            Event::Finished { status, cost, .. } if status != "Refused" => {
                // A figure that is no price settles nothing: the line stays
                // counted at what it held, as the journal counts it.
                let cost = cost.and_then(SettledCost::of).map(SettledCost::credits);
                // An ending the service charges nothing for (moderation)
                // gives its hold back, as the journal's budget counts it;
                // other endings without a settled cost keep theirs.
                if genapi_batch::FailedStatus::from_word(status).charged_nothing() {
                    self.drop_hold(line as u64).await?;
                }
                // A line done is given back with its end: nothing more is
                // done on it, and a release would be one more step.
                self.end(line, record, cost).await?;
                if let Ok(mut released) = self.released.lock() {
                    released.insert(line as u64);
                }
            }
            Event::Finished { cost, .. } => {
                // A refusal created no task: the line stays open to a retry.
                self.write(line, false, FINISHED, &[batch, &line, worker, text, &false, cost])
                    .await?;
            }
            Event::Damaged { .. } => {}
        }
        Ok(())
    }

    /// Stores the end of `line`, done: carried by the next event of this
    /// worker if one comes within [`CARRY_WAIT`], else written by itself
    /// (see the module `ends`). Returns once it is stored.
    async fn end(&self, line: i64, record: &Event, cost: Option<f64>) -> Result<(), LedgerError> {
        let value = serde_json::to_value(record).map_err(|e| LedgerError::Database(e.to_string()))?;
        let mut queued = self.ends.queue(line, value, cost);
        let mut withdrawal = Withdrawal::new(&self.ends, queued.ticket);
        let carried = tokio::select! {
            told = &mut queued.stored => told.unwrap_or(false),
            () = tokio::time::sleep(CARRY_WAIT) => {
                // Still waiting: written here. Else a statement carries it
                // now, and says how that went.
                !self.ends.withdraw(queued.ticket) && queued.stored.await.unwrap_or(false)
            }
        };
        withdrawal.disarm();
        if carried {
            return Ok(());
        }
        let text = serde_json::to_string(record).map_err(|e| LedgerError::Database(e.to_string()))?;
        let (batch, worker, text) = (&self.batch, &self.worker, &text);
        self.write(line, false, FINISHED, &[batch, &line, worker, text, &true, &cost])
            .await?;
        Ok(())
    }

    /// Runs an event's statement for `line`: `plain` with `params`, or,
    /// when seat changes ([`Ledger::carry_seat_changes`]) or other lines'
    /// ends wait, `carrying` with them as two more parameters (never
    /// `line`'s own end: a statement writes a line's row once). If the
    /// database refuses what it carries, the ends go back to their waiters,
    /// each written alone, and an `exclusive` step (an intent: it decides
    /// what is sent) is tried again without them; an intent whose seat
    /// changes are refused fails (nothing is sent from a seat not written),
    /// while any other event says what the service did and is written
    /// alone, its seat changes going back to the seats, which report what
    /// they cannot write.
    async fn write(
        &self,
        line: i64,
        exclusive: bool,
        (plain, carrying): (&'static str, &'static str),
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, LedgerError> {
        let notes = self.seats.as_ref().map(SharedSeats::take_notes).unwrap_or_default();
        let mut ends = self.ends.take_except(line);
        while !notes.is_empty() || !ends.is_empty() {
            let (seat_changes, ended) = (Notes::json(&notes), ends.json());
            let with_carried: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                .iter()
                .copied()
                .chain([&seat_changes as _, &ended as _])
                .collect();
            let with_carried = &with_carried;
            let written = self
                .db
                .run(exclusive, |session| async move {
                    session.execute(carrying, with_carried).await
                })
                .await;
            let error = match written {
                Ok(written) => {
                    ends.stored();
                    return Ok(written);
                }
                Err(error) => error,
            };
            // Other lines' ends go back to their waiters, each written alone.
            let carried_ends = !std::mem::take(&mut ends).is_empty();
            match error {
                // An intent is not kept from being sent by another line's
                // end the database refused: tried again without the ends.
                LedgerError::Database(reason) if exclusive && carried_ends => {
                    tracing::warn!(%reason, "other lines' ends cannot go with an intent; written apart");
                }
                LedgerError::Database(reason) if !exclusive => {
                    tracing::warn!(%reason, "what a record carries cannot go with it; written apart");
                    if let Some(seats) = &self.seats {
                        seats.restore(notes);
                    }
                    break;
                }
                error => {
                    if let Some(seats) = &self.seats {
                        seats.restore(notes);
                    }
                    return Err(error);
                }
            }
        }
        self.db
            .run(exclusive, |session| async move { session.execute(plain, params).await })
            .await
    }

    /// Every event of the batch, line by line in the order stored (for
    /// [`genapi_batch::adopt`] and the status view).
    pub(crate) async fn records(&self) -> Result<Vec<Event>, LedgerError> {
        let batch = &self.batch;
        let rows = self
            .db
            .run(false, |session| async move { session.query(EVENTS, &[batch]).await })
            .await?;
        events_of(&rows)
    }

    /// Stores events made outside a run (an adoption), as a run would. The
    /// line gets a row if it has none. Intents are written by runs only.
    pub(crate) async fn append(&self, records: &[Event]) -> Result<(), LedgerError> {
        for record in records {
            if let Event::Intent { line, .. } = record {
                return Err(LedgerError::Database(format!(
                    "line {line}: an intent is recorded only by a run, just before it sends"
                )));
            }
            // An adopted task reopens its line.
            let reopen = matches!(record, Event::Accepted { .. });
            let (batch, line) = (&self.batch, record.line() as i64);
            self.db
                .run(false, |session| async move {
                    session
                        .execute(
                            "INSERT INTO genapi_lines AS l (batch, line) VALUES ($1, $2)
                             ON CONFLICT (batch, line) DO UPDATE SET done = l.done AND NOT $3",
                            &[batch, &line, &reopen],
                        )
                        .await
                })
                .await?;
            self.record(record).await?;
        }
        Ok(())
    }

    /// Holds credits for a submission of `line` under a cap of `max` in all
    /// over the batch, by the cap's one rule ([`genapi_batch::Credits`]).
    /// The kind's price is the most a line of it was settled at (a line's
    /// `charged` is only ever a settled cost; a line whose hold died at a
    /// claim has no kind, so its cost prices none); `learned` is its price
    /// learned before the batch. A hold is live while its line's lease is
    /// and it has a kind: a hold of a run that is gone is counted, never
    /// waited for, so no submission waits on a line claimed but not yet
    /// worked on.
    pub(crate) async fn hold_credits(
        &self,
        line: u64,
        kind: &str,
        max: f64,
        learned: Option<f64>,
    ) -> Result<Hold, LedgerError> {
        let (batch, worker, line) = (&self.batch, &self.worker, line as i64);
        let _turn = self.transaction_turn.lock().await;
        self.transactions
            .transaction(true, |session| async move {
                // One decision at a time over the batch, each on fresh totals.
                session
                    .execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 7))", &[batch])
                    .await?;
                let row = session
                    .query_one(
                        "SELECT coalesce(sum(charged), 0), coalesce(sum(hold), 0),
                                max(charged) FILTER (WHERE kind = $2),
                                count(*) FILTER (WHERE hold IS NOT NULL AND kind IS NOT NULL
                                                   AND lease_until > now()) > 0,
                                coalesce(max(charged), 0)
                         FROM genapi_lines WHERE batch = $1",
                        &[batch, &kind],
                    )
                    .await?;
                let (charged, held, settled, live, largest): (f64, f64, Option<f64>, bool, f64) = (
                    row.try_get(0)?,
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                    row.try_get(4)?,
                );
                let hold = genapi_batch::Credits {
                    max,
                    charged,
                    held,
                    live_holds: live,
                    settled_price: settled,
                    learned_price: learned,
                    largest,
                }
                .decide();
                if let Hold::Held(amount) = hold {
                    let held = session
                        .execute(
                            "UPDATE genapi_lines SET hold = $3, kind = $4
                             WHERE batch = $1 AND line = $2 AND worker = $5",
                            &[batch, &line, &amount, &kind, worker],
                        )
                        .await?;
                    if held == 0 {
                        return Ok(Err(LedgerError::Database(format!(
                            "line {line} is no longer held by this worker (its lease lapsed); nothing was sent"
                        ))));
                    }
                }
                Ok(Ok(hold))
            })
            .await
    }

    /// Lets go of the credits held for `line` (its submission was not sent).
    pub(crate) async fn drop_hold(&self, line: u64) -> Result<(), LedgerError> {
        let (batch, worker, line) = (&self.batch, &self.worker, line as i64);
        self.db
            .run(false, |session| async move {
                session
                    .execute(
                        "UPDATE genapi_lines SET hold = NULL WHERE batch = $1 AND line = $2 AND worker = $3",
                        &[batch, &line, worker],
                    )
                    .await
            })
            .await?;
        Ok(())
    }

    /// `line`'s task ended at a settled `cost`: charged and its hold gone
    /// at once, so the kind's price (the most its lines were charged) is
    /// the next hold's; the end, stored later, sets the same charge.
    pub(crate) async fn settle(&self, line: u64, cost: SettledCost) -> Result<(), LedgerError> {
        let (batch, line, cost) = (&self.batch, line as i64, cost.credits());
        self.db
            .run(false, |session| async move {
                session
                    .execute(
                        "UPDATE genapi_lines SET charged = greatest($3::float8, 0), hold = NULL
                         WHERE batch = $1 AND line = $2",
                        &[batch, &line, &cost],
                    )
                    .await
            })
            .await?;
        Ok(())
    }

    /// Where the batch stands (a line no worker has reached is not in it:
    /// it is unsent).
    pub(crate) async fn status(&self) -> Result<Status, LedgerError> {
        let batch = &self.batch;
        let rows = self
            .db
            .run(false, |session| async move {
                session.client().query(STATUS, &[batch]).await
            })
            .await?;
        status_of(batch, &rows)
    }
}

/// Every line of batch `$1` with what its [`Status`] shows of it.
pub(crate) const STATUS: &str = "SELECT l.line, l.worker, l.lease_until > now(), l.charged, l.hold,
                             (SELECT coalesce(json_agg(r.record ORDER BY r.seq), '[]'::json)::text
                              FROM genapi_records r WHERE r.batch = l.batch AND r.line = l.line)
                      FROM genapi_lines l WHERE l.batch = $1 ORDER BY l.line";

/// [`Ledger::status`] of batch `batch`, from the [`STATUS`] rows.
pub(crate) fn status_of(batch: &str, rows: &[Row]) -> Result<Status, LedgerError> {
    let db = LedgerError::from_db;
    let mut status = SharedStatus::new(batch);
    let mut standings = BTreeMap::new();
    for row in rows {
        let line = row.try_get::<_, i64>(0).map_err(db)? as u64;
        let worker: Option<String> = row.try_get(1).map_err(db)?;
        let live = row.try_get::<_, Option<bool>>(2).map_err(db)?.unwrap_or(false);
        let charged: Option<f64> = row.try_get(3).map_err(db)?;
        let hold: Option<f64> = row.try_get(4).map_err(db)?;
        let records = records(&row.try_get::<_, String>(5).map_err(db)?)?;
        let standing = genapi_batch::Line::of(records).standing();
        standings.insert(line, standing);
        status.credits_charged += charged.unwrap_or(0.0);
        status.credits_held += hold.unwrap_or(0.0);
        if let (Some(worker), true) = (worker, live) {
            status.workers.entry(worker).or_default().push(line);
        }
    }
    status.credits_charged = without_float_noise(status.credits_charged);
    status.credits_held = without_float_noise(status.credits_held);
    Ok(Status::of_shared(standings, status))
}

/// A sum of prices as the service states prices: the noise of adding them
/// as floats (26.399999999999917 for 26.4) is rounded away at a billionth
/// of a credit, far below any price.
fn without_float_noise(sum: f64) -> f64 {
    (sum * 1e9).round() / 1e9
}

/// Renews this worker's claims while it lives.
async fn renew(db: Arc<Link>, batch: String, worker: String, lease: Duration) {
    let mut every = tokio::time::interval(lease / 3);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (batch, worker, lease) = (&batch, &worker, seconds(lease));
    loop {
        every.tick().await;
        let renewed = db
            .run(false, |session| async move {
                session
                    .execute(
                        "UPDATE genapi_lines SET lease_until = now() + make_interval(secs => $3)
                         WHERE batch = $1 AND worker = $2",
                        &[batch, worker, &lease],
                    )
                    .await
            })
            .await;
        if let Err(error) = renewed {
            tracing::warn!(%error, "cannot renew this worker's claims in the ledger");
        }
    }
}

fn records(text: &str) -> Result<Vec<Event>, LedgerError> {
    serde_json::from_str(text).map_err(|e| LedgerError::Database(format!("a record of the ledger cannot be read: {e}")))
}

#[cfg(test)]
mod tests {
    use super::without_float_noise;

    #[test]
    fn a_sum_of_prices_shows_no_float_noise() {
        let added = (0..264).fold(0.0, |sum, _| sum + 0.1);
        assert_ne!(added, 26.4, "the noise this removes");
        assert_eq!(without_float_noise(added), 26.4);
        assert_eq!(without_float_noise(1.58 + 1.58 + 1.58), 4.74);
        assert_eq!(without_float_noise(0.0), 0.0);
        assert_eq!(
            without_float_noise(0.123_456_789),
            0.123_456_789,
            "a real price is kept whole"
        );
    }
}
