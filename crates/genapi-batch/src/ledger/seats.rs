//! An active-task limit shared by many processes: seats as rows.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use url::Url;

use super::{connect_listening, describe, seconds, worker_name, LedgerError, Prepared, DEFAULT_LEASE};
use genapi::SharedPlaces;

/// The longest a task is taken to run. A seat whose worker died comes back
/// after this long from when it was taken, even when its task cannot be
/// checked (its host unreachable, or no answer ever named the task).
pub const UNANSWERED_SEAT_HOLD: Duration = Duration::from_secs(30 * 60);

/// `limit` seats in pool `pool` of a PostgreSQL database, shared by every
/// client given them ([`genapi::ClientBuilder::shared_places`]) in any
/// process: together they never keep more than `limit` tasks active.
///
/// A pool has one size, kept with it in the ledger: the first to connect
/// sets it, [`SharedSeats::connect`] with another size is refused
/// ([`LedgerError::PoolSize`]), and [`SharedSeats::join`] takes the pool's.
///
/// A seat is taken for a submission and belongs to its task once accepted;
/// it is given back when the task is seen final. A worker renews its seats'
/// leases while it lives; a dead worker's seat whose task is known comes
/// back once a live client polls that task and sees it final, and any dead
/// worker's seat [`UNANSWERED_SEAT_HOLD`] after it was taken. Changes are
/// applied in the background: call [`SharedSeats::flush`] before a program
/// ends, so the seats it gave back are free at once.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use genapi_batch::ledger::SharedSeats;
/// let seats = SharedSeats::connect("postgres://genapi@db.internal/genapi", "team-account", 24).await?;
/// let client = genapi::ClientBuilder::from_env()?
///     .shared_places(seats.places(), seats.limit())
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SharedSeats {
    inner: Arc<Inner>,
}

struct Inner {
    db: Arc<tokio_postgres::Client>,
    pool: String,
    limit: usize,
    worker: String,
    lease: Duration,
    unanswered_hold: Duration,
    /// Dropped with the last clone: the background task then applies what
    /// is queued and ends.
    changes: tokio::sync::mpsc::UnboundedSender<Change>,
    /// Woken by the database whenever any process frees a seat.
    freed: Arc<tokio::sync::Notify>,
    prepared: Prepared,
}

impl std::fmt::Debug for SharedSeats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSeats")
            .field("pool", &self.inner.pool)
            .field("limit", &self.inner.limit)
            .field("worker", &self.inner.worker)
            .finish_non_exhaustive()
    }
}

/// A change made from code that cannot wait (a drop), applied in order.
enum Change {
    Assign(i32, String, String),
    Free(i32),
    Reclaim(i32, String),
    /// Everything before it is applied.
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl SharedSeats {
    /// Connects (applying the schema on first use) to pool `pool` of
    /// `limit` seats (at least 1), making it if it is new. A pool of
    /// another size is refused ([`LedgerError::PoolSize`]).
    pub async fn connect(url: &str, pool: &str, limit: usize) -> Result<SharedSeats, LedgerError> {
        SharedSeats::connect_with(url, pool, limit, DEFAULT_LEASE, UNANSWERED_SEAT_HOLD).await
    }

    /// [`SharedSeats::connect`] with other lease and unanswered-seat times
    /// (at least a second each).
    pub async fn connect_with(
        url: &str,
        pool: &str,
        limit: usize,
        lease: Duration,
        unanswered_hold: Duration,
    ) -> Result<SharedSeats, LedgerError> {
        SharedSeats::open(url, pool, limit, true, lease, unanswered_hold).await
    }

    /// Connects (applying the schema on first use) to pool `pool` at the
    /// size it has, or makes it with `size_if_new` seats (at least 1).
    pub async fn join(url: &str, pool: &str, size_if_new: usize) -> Result<SharedSeats, LedgerError> {
        SharedSeats::join_with(url, pool, size_if_new, DEFAULT_LEASE, UNANSWERED_SEAT_HOLD).await
    }

    /// [`SharedSeats::join`] with other lease and unanswered-seat times (at
    /// least a second each).
    pub async fn join_with(
        url: &str,
        pool: &str,
        size_if_new: usize,
        lease: Duration,
        unanswered_hold: Duration,
    ) -> Result<SharedSeats, LedgerError> {
        SharedSeats::open(url, pool, size_if_new, false, lease, unanswered_hold).await
    }

    /// The pool at its size: `asked` when it is new; else, when `exact`,
    /// refused unless it is `asked`.
    async fn open(
        url: &str,
        pool: &str,
        asked: usize,
        exact: bool,
        lease: Duration,
        unanswered_hold: Duration,
    ) -> Result<SharedSeats, LedgerError> {
        let asked = asked.clamp(1, 100_000);
        let (db, freed) = connect_listening(url).await?;
        let db = Arc::new(db);
        db.batch_execute("LISTEN genapi_seats")
            .await
            .map_err(LedgerError::from_db)?;
        // The first worker sets the size; every later one reads it.
        db.execute(
            "INSERT INTO genapi_seat_pools (pool, size) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&pool, &(asked as i32)],
        )
        .await
        .map_err(LedgerError::from_db)?;
        let size: i32 = db
            .query_one("SELECT size FROM genapi_seat_pools WHERE pool = $1", &[&pool])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(LedgerError::from_db)?;
        let limit = usize::try_from(size)
            .ok()
            .filter(|size| (1..=100_000).contains(size))
            .ok_or_else(|| LedgerError::Database(format!("seat pool {pool:?} has an unusable size ({size})")))?;
        if exact && limit != asked {
            return Err(LedgerError::PoolSize {
                pool: pool.into(),
                size: limit,
                asked,
            });
        }
        db.execute(
            "INSERT INTO genapi_seats (pool, seat) SELECT $1, g FROM generate_series(1, $2) g ON CONFLICT DO NOTHING",
            &[&pool, &(limit as i32)],
        )
        .await
        .map_err(LedgerError::from_db)?;
        let worker = worker_name();
        let lease = lease.max(Duration::from_secs(1));
        let (changes, received) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(apply(db.clone(), pool.to_string(), worker.clone(), lease, received));
        Ok(SharedSeats {
            inner: Arc::new(Inner {
                db,
                pool: pool.into(),
                limit,
                worker,
                lease,
                unanswered_hold: unanswered_hold.max(Duration::from_secs(1)),
                changes,
                freed,
                prepared: Prepared::default(),
            }),
        })
    }

    /// Waits until every change made so far (seats given back, tasks
    /// assigned) is in the database. Call it before the program ends: what
    /// is still queued then is lost, and those seats wait for their lease.
    pub async fn flush(&self) {
        let (done, applied) = tokio::sync::oneshot::channel();
        self.send(Change::Flush(done));
        let _ = applied.await;
    }

    /// Seats in the pool this client uses.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Seats taken now in the pool, by any worker (live or not).
    pub async fn taken(&self) -> Result<usize, LedgerError> {
        let row = self
            .inner
            .db
            .query_one(
                "SELECT count(*) FROM genapi_seats WHERE pool = $1 AND worker IS NOT NULL",
                &[&self.inner.pool],
            )
            .await
            .map_err(LedgerError::from_db)?;
        Ok(row.get::<_, i64>(0) as usize)
    }

    /// These seats as the places a client takes under its limit, for
    /// [`genapi::ClientBuilder::shared_places`] with [`SharedSeats::limit`].
    pub fn places(&self) -> Arc<dyn SharedPlaces> {
        Arc::new(self.clone())
    }

    fn send(&self, change: Change) {
        // The receiver lives as long as `inner`: a send cannot fail while
        // `self` exists.
        let _ = self.inner.changes.send(change);
    }
}

impl SharedPlaces for SharedSeats {
    fn take(&self) -> BoxFuture<'_, Result<Option<i32>, String>> {
        Box::pin(async move {
            let inner = &self.inner;
            const TAKE: &str = "UPDATE genapi_seats SET worker = $2, lease_until = now() + make_interval(secs => $4),
                            task_id = NULL, polling_url = NULL, taken_at = now()
                     WHERE (pool, seat) = (
                       SELECT pool, seat FROM genapi_seats
                       WHERE pool = $1 AND seat <= $3
                         AND (worker IS NULL
                              OR (lease_until < now() AND taken_at < now() - make_interval(secs => $5)))
                       ORDER BY seat LIMIT 1 FOR UPDATE SKIP LOCKED)
                     RETURNING seat";
            let statement = inner.prepared.get(&inner.db, TAKE).await.map_err(|e| describe(&e))?;
            let taken = inner
                .db
                .query_opt(
                    &statement,
                    &[
                        &inner.pool,
                        &inner.worker,
                        &(inner.limit as i32),
                        &seconds(inner.lease),
                        &seconds(inner.unanswered_hold),
                    ],
                )
                .await;
            match taken {
                Ok(row) => Ok(row.and_then(|row| row.try_get(0).ok())),
                Err(error) => {
                    tracing::warn!(error = %describe(&error), "cannot take a shared seat");
                    Err(describe(&error))
                }
            }
        })
    }

    fn changes(&self) -> &tokio::sync::Notify {
        &self.inner.freed
    }

    fn lapsed(&self) -> BoxFuture<'_, Vec<(i32, String, String)>> {
        Box::pin(async move {
            let inner = &self.inner;
            let rows = inner
                .db
                .query(
                    "SELECT seat, task_id, polling_url FROM genapi_seats
                     WHERE pool = $1 AND seat <= $2 AND worker IS NOT NULL AND lease_until < now()
                       AND task_id IS NOT NULL AND polling_url IS NOT NULL
                     ORDER BY taken_at LIMIT 8",
                    &[&inner.pool, &(inner.limit as i32)],
                )
                .await
                .unwrap_or_default();
            // A row another version or a hand wrote may hold NULLs: skipped.
            rows.iter()
                .filter_map(|row| {
                    let place: i32 = row.try_get(0).ok()?;
                    let task: Option<String> = row.try_get(1).ok()?;
                    let url: Option<String> = row.try_get(2).ok()?;
                    Some((place, task?, url?))
                })
                .collect()
        })
    }

    fn reclaim(&self, place: i32, task_id: &str) {
        self.send(Change::Reclaim(place, task_id.to_string()));
    }

    fn assign(&self, place: i32, task_id: &str, polling_url: &Url) {
        self.send(Change::Assign(place, task_id.to_string(), polling_url.to_string()));
    }

    fn free(&self, place: i32) {
        self.send(Change::Free(place));
    }

    fn free_when_unanswered_expires(&self, place: i32) {
        let seats = self.clone();
        let after = self.inner.unanswered_hold;
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            seats.send(Change::Free(place));
        });
    }
}

/// Applies changes in order, and renews this worker's seats while it lives.
async fn apply(
    db: Arc<tokio_postgres::Client>,
    pool: String,
    worker: String,
    lease: Duration,
    mut changes: tokio::sync::mpsc::UnboundedReceiver<Change>,
) {
    let mut every = tokio::time::interval(lease / 3);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let prepared = Prepared::default();
    loop {
        let result = tokio::select! {
            change = changes.recv() => match change {
                None => return,
                Some(Change::Flush(done)) => {
                    let _ = done.send(());
                    continue;
                }
                Some(Change::Assign(seat, task, url)) => prepared.execute(
                    &db,
                    "UPDATE genapi_seats SET task_id = $4, polling_url = $5
                     WHERE pool = $1 AND seat = $2 AND worker = $3",
                    &[&pool, &seat, &worker, &task, &url],
                ).await,
                // Every process waiting for a seat hears of a freed one.
                Some(Change::Free(seat)) => prepared.execute(
                    &db,
                    "WITH freed AS (
                       UPDATE genapi_seats SET worker = NULL, lease_until = NULL, task_id = NULL, polling_url = NULL
                       WHERE pool = $1 AND seat = $2 AND worker = $3 RETURNING seat)
                     SELECT pg_notify('genapi_seats', $1) FROM freed",
                    &[&pool, &seat, &worker],
                ).await,
                Some(Change::Reclaim(seat, task)) => prepared.execute(
                    &db,
                    "WITH freed AS (
                       UPDATE genapi_seats SET worker = NULL, lease_until = NULL, task_id = NULL, polling_url = NULL
                       WHERE pool = $1 AND seat = $2 AND task_id = $3 AND lease_until < now() RETURNING seat)
                     SELECT pg_notify('genapi_seats', $1) FROM freed",
                    &[&pool, &seat, &task],
                ).await,
            },
            _ = every.tick() => prepared.execute(
                    &db,
                "UPDATE genapi_seats SET lease_until = now() + make_interval(secs => $3)
                 WHERE pool = $1 AND worker = $2",
                &[&pool, &worker, &seconds(lease)],
            ).await,
        };
        if let Err(error) = result {
            tracing::warn!(error = %describe(&error), "cannot update the shared seats");
        }
    }
}
