//! An active-task limit shared by many processes: seats as rows.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_postgres::types::ToSql;
use url::Url;

use crate::carried::{seat_changes, Note, Notes, CARRY_WAIT};
use crate::connect::Heard;
use crate::link::Link;
use crate::options::seconds;
use crate::{naming, wants, LedgerError, LedgerOptions};
use genapi::SeatPool;

/// The longest a task is taken to run. A seat whose worker died comes back
/// after this long from when it was taken, even when its task cannot be
/// checked (its host unreachable, or no answer ever named the task).
pub const UNANSWERED_SEAT_HOLD: Duration = Duration::from_secs(30 * 60);

/// The longest a seat is looked for in one attempt: the client asking for
/// it tries again on its own, and gives up after a while of failures in a
/// row, which a longer attempt would stretch.
const SEAT_STEP: Duration = Duration::from_secs(5);

/// How long a pool found full is taken to stay full unless a seat is freed
/// meanwhile: seats also come back with time (a dead worker's lease).
const FULL_RECHECK: Duration = Duration::from_secs(1);

/// How often a process looks for seats whose worker died.
const LAPSED_EVERY: Duration = Duration::from_secs(2);

/// How long a seat this worker gave back waits for its next submission
/// before it is freed for all.
const SPARE_GRACE: Duration = Duration::from_millis(100);

/// `limit` seats in pool `pool` of a PostgreSQL database, shared by every
/// client given them ([`genapi::ClientBuilder::shared_seats`]) in any
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
/// use genapi_ledger::SharedSeats;
/// let seats = SharedSeats::connect("postgres://genapi@db.internal/genapi", "team-account", 24).await?;
/// let client = genapi::ClientBuilder::from_env()?
///     .shared_seats(seats.pool(), seats.limit())
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SharedSeats {
    inner: Arc<Inner>,
}

struct Inner {
    /// Listening for freed seats; opened again when it breaks.
    db: Arc<Link>,
    pool: String,
    limit: usize,
    worker: String,
    lease: Duration,
    /// Each database step's deadline.
    step: Duration,
    unanswered_hold: Duration,
    /// Dropped with the last clone: the background task then applies what
    /// is queued and ends.
    changes: tokio::sync::mpsc::UnboundedSender<Change>,
    /// Woken by the database whenever any process frees a seat.
    freed: Arc<Heard>,
    /// When the pool was last found full, and how many times the database
    /// had been heard from then: until it is heard from again (a seat freed
    /// anywhere) or [`FULL_RECHECK`] passes, the pool is taken to be full
    /// still, and not asked again.
    full: std::sync::Mutex<Option<(tokio::time::Instant, u64)>>,
    /// Until when each seat is surely this worker's.
    leases: Arc<Leases>,
    /// When dead workers' seats were last looked for.
    lapsed_checked: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// Seats this worker's tasks gave back a moment ago, still this
    /// worker's in the database: a submission of this worker takes one
    /// without a step, and one not taken within [`SPARE_GRACE`] is freed.
    spare: std::sync::Mutex<Vec<i32>>,
    /// Seats this worker holds in the database, its spares included: told
    /// to other workers when it asks for one, and compared with theirs when
    /// a seat is given back (see [`crate::wants`]).
    held: std::sync::atomic::AtomicUsize,
    /// Changes waiting for a ledger event to carry them (see
    /// [`crate::carried`]).
    notes: std::sync::Mutex<Notes>,
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
    /// The seat is free: for any worker, or for the one named.
    Free(i32, Option<String>),
    Reclaim(i32, String),
    /// Notes no ledger event carried.
    Notes(Vec<Note>),
    /// Everything before it is applied.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// Until when each of this worker's seats is surely its own: its lease as
/// the statement that last set it left it, counted from before that
/// statement was sent (the database's lease ends no sooner). Another worker
/// can take a seat only once its lease lapsed, so a seat given back a
/// moment ago is handed out again without asking the database only while
/// it is surely this worker's; after a pause, or renewals that failed, the
/// database is asked.
#[derive(Debug, Default)]
struct Leases(std::sync::Mutex<std::collections::HashMap<i32, tokio::time::Instant>>);

impl Leases {
    /// `seat` is this worker's until `until`.
    fn leased(&self, seat: i32, until: tokio::time::Instant) {
        if let Ok(mut leases) = self.0.lock() {
            leases.insert(seat, until);
        }
    }

    /// A renewal sent at `sent` renewed `seats` for `lease`; any other seat
    /// is not this worker's any more.
    fn renewed(&self, seats: &[i32], sent: tokio::time::Instant, lease: Duration) {
        if let Ok(mut leases) = self.0.lock() {
            leases.clear();
            leases.extend(seats.iter().map(|seat| (*seat, sent + lease)));
        }
    }

    /// Whether `seat` stays this worker's for at least `margin` more.
    fn surely_ours(&self, seat: i32, margin: Duration) -> bool {
        let now = tokio::time::Instant::now();
        self.0
            .lock()
            .is_ok_and(|leases| leases.get(&seat).is_some_and(|until| *until > now + margin))
    }
}

impl SharedSeats {
    /// Connects (applying the schema on first use) to pool `pool` of
    /// `limit` seats (at least 1), making it if it is new. A pool of
    /// another size is refused ([`LedgerError::PoolSize`]).
    pub async fn connect(url: &str, pool: &str, limit: usize) -> Result<SharedSeats, LedgerError> {
        SharedSeats::connect_with(url, pool, limit, &LedgerOptions::default(), UNANSWERED_SEAT_HOLD).await
    }

    /// [`SharedSeats::connect`] with the lease, each database step's
    /// deadline and the worker's name of `options`, and another
    /// unanswered-seat time (at least a second). A worker started again
    /// under its name lets the seats of its earlier run lapse at once: each
    /// comes back as soon as its task is seen final.
    pub async fn connect_with(
        url: &str,
        pool: &str,
        limit: usize,
        options: &LedgerOptions,
        unanswered_hold: Duration,
    ) -> Result<SharedSeats, LedgerError> {
        SharedSeats::open(url, pool, limit, true, options, unanswered_hold).await
    }

    /// Connects (applying the schema on first use) to pool `pool` at the
    /// size it has, or makes it with `size_if_new` seats (at least 1).
    pub async fn join(url: &str, pool: &str, size_if_new: usize) -> Result<SharedSeats, LedgerError> {
        SharedSeats::join_with(url, pool, size_if_new, &LedgerOptions::default(), UNANSWERED_SEAT_HOLD).await
    }

    /// [`SharedSeats::join`] with the lease, each database step's deadline
    /// and the worker's name of `options`, and another unanswered-seat time
    /// (at least a second), as [`SharedSeats::connect_with`].
    pub async fn join_with(
        url: &str,
        pool: &str,
        size_if_new: usize,
        options: &LedgerOptions,
        unanswered_hold: Duration,
    ) -> Result<SharedSeats, LedgerError> {
        SharedSeats::open(url, pool, size_if_new, false, options, unanswered_hold).await
    }

    /// The pool at its size: `asked` when it is new; else, when `exact`,
    /// refused unless it is `asked`.
    async fn open(
        url: &str,
        pool: &str,
        asked: usize,
        exact: bool,
        options: &LedgerOptions,
        unanswered_hold: Duration,
    ) -> Result<SharedSeats, LedgerError> {
        let asked = asked.clamp(1, 100_000);
        let db = Arc::new(
            Link::open(
                url,
                options.step,
                true,
                &["genapi_seats", wants::CHANNEL],
                options.rescue_grace,
            )
            .await?,
        );
        let limit = size_of_pool(&db, pool, asked).await?;
        if exact && limit != asked {
            return Err(LedgerError::PoolSize {
                pool: pool.into(),
                size: limit,
                asked,
            });
        }
        make_seats(&db, pool, limit).await?;
        let worker = naming::take(&db, &format!("pool {pool}"), options).await?;
        db.notified().wants.known_as(pool, &worker);
        if options.naming.lasting() {
            lapse_earlier_runs_seats(&db, pool, &worker).await?;
        }
        let applier = Applier {
            db,
            pool: pool.into(),
            worker,
            lease: options.lease,
            leases: Arc::new(Leases::default()),
        };
        Ok(SharedSeats::start(applier, limit, options.step, unanswered_hold))
    }

    /// These seats, and the task that applies their changes and renews
    /// their leases: it ends once the last clone is dropped.
    fn start(applier: Applier, limit: usize, step: Duration, unanswered_hold: Duration) -> SharedSeats {
        let (changes, received) = tokio::sync::mpsc::unbounded_channel();
        let inner = Inner {
            db: applier.db.clone(),
            pool: applier.pool.clone(),
            limit,
            worker: applier.worker.clone(),
            lease: applier.lease,
            step,
            unanswered_hold: unanswered_hold.max(Duration::from_secs(1)),
            changes,
            freed: applier.db.notified(),
            full: std::sync::Mutex::new(None),
            leases: applier.leases.clone(),
            lapsed_checked: std::sync::Mutex::new(None),
            spare: std::sync::Mutex::new(Vec::new()),
            held: std::sync::atomic::AtomicUsize::new(0),
            notes: std::sync::Mutex::new(Notes::default()),
        };
        tokio::spawn(apply(applier, received));
        SharedSeats { inner: Arc::new(inner) }
    }

    /// Waits until every change made so far (seats given back, tasks
    /// assigned) is in the database. Call it before the program ends: what
    /// is still queued then is lost, and those seats wait for their lease.
    pub async fn flush(&self) {
        let spare: Vec<i32> = self
            .inner
            .spare
            .lock()
            .map(|mut spare| std::mem::take(&mut *spare))
            .unwrap_or_default();
        self.write_notes();
        for place in spare {
            self.give_back(place, None);
        }
        let (done, applied) = tokio::sync::oneshot::channel();
        self.send(Change::Flush(done));
        let _ = applied.await;
    }

    /// Seats in the pool this client uses.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// This worker's name in the pool, as its seats in the ledger show it.
    /// A ledger of the same worker opened under it
    /// ([`LedgerOptions::worker_name`]) keeps the worker's lines and seats
    /// under one name, even when the name it asked for was taken and it got
    /// `#2`.
    pub fn worker(&self) -> &str {
        &self.inner.worker
    }

    /// Seats taken now in the pool, by any worker (live or not).
    pub async fn taken(&self) -> Result<usize, LedgerError> {
        let pool = &self.inner.pool;
        let taken: i64 = self
            .inner
            .db
            .run(false, |session| async move {
                session
                    .query_one(
                        "SELECT count(*) FROM genapi_seats WHERE pool = $1 AND worker IS NOT NULL",
                        &[pool],
                    )
                    .await?
                    .try_get(0)
            })
            .await?;
        Ok(taken.max(0) as usize)
    }

    /// These seats as the pool a client takes a seat from for each
    /// submission, for [`genapi::ClientBuilder::shared_seats`] with
    /// [`SharedSeats::limit`].
    pub fn pool(&self) -> Arc<dyn SeatPool> {
        Arc::new(self.clone())
    }

    /// Lets a ledger's events carry this worker's seat changes (see
    /// [`crate::carried`]): called by [`crate::Ledger::carry_seat_changes`].
    pub(crate) fn carried_by_a_ledger(&self) {
        if let Ok(mut notes) = self.inner.notes.lock() {
            notes.carried = true;
        }
    }

    /// Every waiting note, for a ledger event to write; give them back
    /// with [`SharedSeats::restore`] if that write fails.
    pub(crate) fn take_notes(&self) -> Vec<Note> {
        self.inner
            .notes
            .lock()
            .map(|mut notes| notes.drain())
            .unwrap_or_default()
    }

    /// Notes whose write failed: written later.
    pub(crate) fn restore(&self, failed: Vec<Note>) {
        if failed.is_empty() {
            return;
        }
        let first = self.inner.notes.lock().is_ok_and(|mut notes| notes.restore(failed));
        if first {
            self.write_notes_later();
        }
    }

    /// Notes a change for a ledger event to carry, when one does;
    /// `false` when none does (the caller writes it at once).
    fn note(&self, change: impl FnOnce(&mut Notes, &str, &str) -> bool) -> bool {
        let Ok(mut notes) = self.inner.notes.lock() else {
            return false;
        };
        if !notes.carried {
            return false;
        }
        if change(&mut notes, &self.inner.pool, &self.inner.worker) {
            drop(notes);
            self.write_notes_later();
        }
        true
    }

    fn forget(&self, place: i32) {
        if let Ok(mut notes) = self.inner.notes.lock() {
            notes.forget(place);
        }
    }

    /// Writes within [`CARRY_WAIT`] what no event carried by then.
    fn write_notes_later(&self) {
        let seats = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(CARRY_WAIT).await;
            seats.write_notes();
        });
    }

    fn write_notes(&self) {
        let notes = self.take_notes();
        if !notes.is_empty() {
            self.send(Change::Notes(notes));
        }
    }

    /// Whether these seats live in the database `link` reaches.
    pub(crate) fn same_database(&self, link: &Link) -> bool {
        self.inner.db.same_database(link)
    }

    /// `place` goes back to the pool, for any worker, or for the one named
    /// (who alone is told).
    fn give_back(&self, place: i32, to: Option<String>) {
        tracing::debug!(
            seat = place,
            to = to.as_deref().unwrap_or("any worker"),
            "a shared seat given back"
        );
        self.forget(place);
        self.lost();
        self.send(Change::Free(place, to));
    }

    /// One of this worker's seats is not its own any more.
    fn lost(&self) {
        let _ = self
            .inner
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| held.checked_sub(1));
    }

    fn send(&self, change: Change) {
        // The receiver lives as long as `inner`: a send cannot fail while
        // `self` exists.
        let _ = self.inner.changes.send(change);
    }
}

/// The size of pool `pool`, which is `asked` when the pool is new.
async fn size_of_pool(db: &Link, pool: &str, asked: usize) -> Result<usize, LedgerError> {
    // The first worker sets the size; every later one reads it.
    let asked_size = asked as i32;
    let size: i32 = db
        .run(false, |session| async move {
            session
                .execute(
                    "INSERT INTO genapi_seat_pools (pool, size) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    &[&pool, &asked_size],
                )
                .await?;
            session
                .query_one("SELECT size FROM genapi_seat_pools WHERE pool = $1", &[&pool])
                .await?
                .try_get(0)
        })
        .await?;
    usize::try_from(size)
        .ok()
        .filter(|size| (1..=100_000).contains(size))
        .ok_or_else(|| LedgerError::Database(format!("seat pool {pool:?} has an unusable size ({size})")))
}

/// A row for each of the pool's `limit` seats; the rows it has are kept.
async fn make_seats(db: &Link, pool: &str, limit: usize) -> Result<(), LedgerError> {
    let seats = limit as i32;
    db.run(false, |session| async move {
        session
            .execute(
                "INSERT INTO genapi_seats (pool, seat) SELECT $1, g FROM generate_series(1, $2) g
                 ON CONFLICT DO NOTHING",
                &[&pool, &seats],
            )
            .await
    })
    .await?;
    Ok(())
}

/// Seats an earlier run of this worker left: theirs no longer, and lapsed,
/// so each comes back once its task is seen final (or, with no task known,
/// once the unanswered hold is over).
async fn lapse_earlier_runs_seats(db: &Link, pool: &str, worker: &str) -> Result<(), LedgerError> {
    let earlier = format!("{worker} (earlier run)");
    let (pool, worker, earlier) = (&pool, &worker, &earlier);
    db.run(false, |session| async move {
        session
            .execute(
                "UPDATE genapi_seats SET worker = $3, lease_until = now() - interval '1 second'
                 WHERE pool = $1 AND worker = $2",
                &[pool, worker, earlier],
            )
            .await
    })
    .await?;
    Ok(())
}

impl SeatPool for SharedSeats {
    /// A seat this worker gave back a moment ago, else a free one from the
    /// database.
    fn take(&self) -> BoxFuture<'_, Result<Option<i32>, Box<dyn std::error::Error + Send + Sync>>> {
        Box::pin(async move {
            if let Some(place) = self.take_spare().await? {
                return Ok(Some(place));
            }
            let heard = self.inner.freed.count();
            if self.still_full(heard) {
                return Ok(None);
            }
            Ok(self.take_free(heard).await?)
        })
    }

    fn changes(&self) -> &tokio::sync::Notify {
        &self.inner.freed.wake
    }

    /// Looked for at most every 2 s: every process waiting for
    /// a seat asks each time one is freed anywhere, and dead workers' seats
    /// are rare.
    fn lapsed(&self) -> BoxFuture<'_, Vec<(i32, String, String)>> {
        Box::pin(async move {
            let inner = &self.inner;
            let now = tokio::time::Instant::now();
            let due = inner.lapsed_checked.lock().is_ok_and(|mut last| {
                let due = last.is_none_or(|at| now.duration_since(at) >= LAPSED_EVERY);
                if due {
                    *last = Some(now);
                }
                due
            });
            if !due {
                return Vec::new();
            }
            let (pool, limit) = (&inner.pool, inner.limit as i32);
            let rows = inner
                .db
                .run_within(SEAT_STEP, false, |session| async move {
                    session
                        .query(
                            concat!(
                                "SELECT seat, task_id, polling_url FROM genapi_seats
                             WHERE pool = $1 AND seat <= $2 AND worker IS NOT NULL
                               AND (lease_until < now() OR ",
                                name_free!("'pool ' || $1", "worker"),
                                ")
                               AND task_id IS NOT NULL AND polling_url IS NOT NULL
                             ORDER BY taken_at LIMIT 8"
                            ),
                            &[pool, &limit],
                        )
                        .await
                })
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

    /// Carried by the acceptance's event when a ledger carries it.
    fn assign(&self, place: i32, task_id: &str, polling_url: &Url) {
        let url = polling_url.as_str();
        if !self.note(|notes, pool, worker| notes.assigned(pool, worker, place, task_id, url)) {
            self.send(Change::Assign(place, task_id.to_string(), url.to_string()));
        }
    }

    /// Kept for this worker's next submission for a moment: a seat given
    /// back to the database would wake every waiting worker, and all but
    /// one would ask for it in vain.
    ///
    /// Unless another worker waits for a seat holding at least two fewer
    /// than this one: then it is given to that worker at once, so the
    /// workers that have submissions waiting hold about as many seats each.
    fn free(&self, place: i32) {
        let inner = &self.inner;
        if let Some(needier) = inner.freed.wants.neediest(inner.held.load(Ordering::SeqCst)) {
            return self.give_back(place, Some(needier));
        }
        if let Ok(mut spare) = inner.spare.lock() {
            spare.push(place);
        } else {
            return self.give_back(place, None);
        }
        self.inner.freed.wake.notify_waiters();
        let seats = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(SPARE_GRACE).await;
            let unused = seats.inner.spare.lock().is_ok_and(|mut spare| {
                let found = spare.iter().position(|kept| *kept == place);
                found.map(|at| spare.swap_remove(at)).is_some()
            });
            if unused {
                seats.give_back(place, None);
            }
        });
    }

    /// One database step's deadline ([`LedgerOptions::step_deadline`]):
    /// a submission waits no longer than that for a database it cannot
    /// reach, and the command's steps fit inside its `--timeout`.
    fn give_up_after(&self) -> Duration {
        self.inner.step
    }

    fn free_when_unanswered_expires(&self, place: i32) {
        let seats = self.clone();
        let after = self.inner.unanswered_hold;
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            seats.give_back(place, None);
        });
    }
}

/// The steps of [`SeatPool::take`].
impl SharedSeats {
    /// A seat this worker gave back a moment ago, while it is still this
    /// worker's; `None` when there is none.
    async fn take_spare(&self) -> Result<Option<i32>, LedgerError> {
        let inner = &self.inner;
        let Some(place) = inner.spare.lock().ok().and_then(|mut spare| spare.pop()) else {
            return Ok(None);
        };
        // Its last task's name goes before anything is sent from it:
        // with the intent's event when a ledger carries it, if the
        // seat is surely still this worker's (else the database
        // says, below).
        if inner.leases.surely_ours(place, inner.lease / 2)
            && self.note(|notes, pool, worker| notes.retaken(pool, worker, place))
        {
            return Ok(Some(place));
        }
        match self.retake(place).await {
            Ok(1) => {
                // What was noted of its earlier task is moot.
                self.forget(place);
                Ok(Some(place))
            }
            // No longer this worker's: a free one is looked for.
            Ok(_) => {
                self.lost();
                Ok(None)
            }
            Err(error) => {
                self.give_back(place, None);
                tracing::warn!(%error, "cannot take a shared seat");
                Err(error)
            }
        }
    }

    /// Clears the task of `place` in the database, if the seat is still
    /// this worker's there: the rows changed (1 when it is).
    async fn retake(&self, place: i32) -> Result<u64, LedgerError> {
        let (pool, worker) = (&self.inner.pool, &self.inner.worker);
        self.inner
            .db
            .run_within(SEAT_STEP, false, |session| async move {
                session
                    .execute(
                        "UPDATE genapi_seats SET task_id = NULL, polling_url = NULL, taken_at = now()
                         WHERE pool = $1 AND seat = $2 AND worker = $3",
                        &[pool, &place, worker],
                    )
                    .await
            })
            .await
    }

    /// Found full, and nothing freed since (the database heard from `heard`
    /// times, as then): asking again would find it full again (every
    /// waiting submission of every worker would ask each time one of this
    /// worker's tasks ends).
    fn still_full(&self, heard: u64) -> bool {
        self.inner
            .full
            .lock()
            .is_ok_and(|full| full.is_some_and(|(at, count)| count == heard && at.elapsed() < FULL_RECHECK))
    }

    /// A free seat from the database, or `None` when the pool is found
    /// full, which is kept with `heard` (how many times the database had
    /// been heard from before it was asked).
    async fn take_free(&self, heard: u64) -> Result<Option<i32>, LedgerError> {
        let inner = &self.inner;
        let sent = tokio::time::Instant::now();
        match self.ask_for_a_free_seat().await {
            // Taken afresh: what an earlier holding noted is moot.
            Ok(Some(place)) => {
                tracing::debug!(seat = place, "a shared seat taken");
                self.forget(place);
                inner.held.fetch_add(1, Ordering::SeqCst);
                inner.leases.leased(place, sent + inner.lease);
                Ok(Some(place))
            }
            Ok(None) => {
                tracing::debug!("the shared seats found full");
                if let Ok(mut full) = inner.full.lock() {
                    *full = Some((tokio::time::Instant::now(), heard));
                }
                Ok(None)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot take a shared seat");
                Err(error)
            }
        }
    }

    /// Takes the first free seat, or a dead worker's whose lease lapsed and
    /// whose unanswered hold is over, in one statement.
    async fn ask_for_a_free_seat(&self) -> Result<Option<i32>, LedgerError> {
        // Found full, this worker says it waits, in the same statement,
        // when another worker holds at least two seats more (see
        // `wants`): a notification costs a transaction of every
        // listening connection, and no worker would give way otherwise.
        const TAKE: &str = concat!(
            "WITH taken AS (
                   UPDATE genapi_seats SET worker = $2, lease_until = now() + make_interval(secs => $4),
                          task_id = NULL, polling_url = NULL, taken_at = now()
                   WHERE (pool, seat) = (
                     SELECT pool, seat FROM genapi_seats
                     WHERE pool = $1 AND seat <= $3
                       AND (worker IS NULL
                            OR ((lease_until < now() OR ",
            name_free!("'pool ' || $1", "worker"),
            ") AND taken_at < now() - make_interval(secs => $5)))
                     ORDER BY seat LIMIT 1 FOR UPDATE SKIP LOCKED)
                   RETURNING seat),
                 most AS (
                   SELECT count(*) AS held FROM genapi_seats
                   WHERE pool = $1 AND seat <= $3 AND worker IS NOT NULL AND worker <> $2
                     AND lease_until >= now()
                   GROUP BY worker ORDER BY 1 DESC LIMIT 1),
                 asked AS (
                   SELECT pg_notify('genapi_seat_wants', $6)
                   WHERE NOT EXISTS (SELECT 1 FROM taken) AND (SELECT held FROM most) >= $7::bigint + 2)
                 SELECT seat FROM taken UNION ALL SELECT NULL::integer FROM asked"
        );
        let inner = &self.inner;
        let (pool, worker, limit) = (&inner.pool, &inner.worker, inner.limit as i32);
        let (lease, hold) = (seconds(inner.lease), seconds(inner.unanswered_hold));
        let held = inner.held.load(Ordering::SeqCst);
        let asking = &wants::want(pool, worker, held);
        let held = &i64::try_from(held).unwrap_or(i64::MAX);
        let rows = inner
            .db
            .run_within(SEAT_STEP, false, |session| async move {
                session
                    .query(TAKE, &[pool, worker, &limit, &lease, &hold, asking, held])
                    .await
            })
            .await?;
        let place: Option<i32> = rows.first().and_then(|row| row.try_get(0).ok().flatten());
        Ok(place)
    }
}

/// What the task applying this worker's changes works with: the database,
/// and whose seats in which pool it changes and renews.
struct Applier {
    db: Arc<Link>,
    pool: String,
    worker: String,
    lease: Duration,
    /// Until when each seat is surely this worker's, set by each renewal.
    leases: Arc<Leases>,
}

/// Applies changes in order, and renews this worker's seats while it lives.
/// A change that cannot be applied now (the database restarting) is tried
/// again until it is: a seat given back and lost would stay taken for as
/// long as this worker renews its seats.
async fn apply(applier: Applier, mut changes: tokio::sync::mpsc::UnboundedReceiver<Change>) {
    let mut every = tokio::time::interval(applier.lease / 3);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let change = tokio::select! {
            change = changes.recv() => match change {
                None => return,
                Some(Change::Flush(done)) => {
                    let _ = done.send(());
                    continue;
                }
                Some(change) => Some(change),
            },
            _ = every.tick() => None,
        };
        match change {
            Some(change) => applier.apply_until_answered(&change).await,
            None => applier.renew().await,
        }
    }
}

impl Applier {
    /// Applies `change`, trying again while the database cannot be reached
    /// in time.
    async fn apply_until_answered(&self, change: &Change) {
        loop {
            match self.apply_once(change).await {
                Ok(_) => return,
                // The database could not be reached in time: tried again.
                Err(error @ LedgerError::Unanswered { .. }) => {
                    tracing::warn!(%error, "cannot update the shared seats yet; trying again");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                // It answered with a refusal, which trying again would not
                // change: the seat waits for its lease.
                Err(error) => {
                    tracing::warn!(%error, "cannot update the shared seats");
                    return;
                }
            }
        }
    }

    /// One attempt at `change`.
    async fn apply_once(&self, change: &Change) -> Result<u64, LedgerError> {
        match change {
            Change::Assign(seat, task, url) => self.assign(*seat, task, url).await,
            // Every process waiting for a seat hears of a freed one.
            Change::Free(seat, to) => self.free(*seat, to.as_deref()).await,
            Change::Reclaim(seat, task) => self.reclaim(*seat, task).await,
            Change::Notes(notes) => self.write_notes(notes).await,
            // Answered by `apply` before it gets here.
            Change::Flush(_) => Ok(0),
        }
    }

    /// `seat`, still this worker's, belongs to task `task`, polled at `url`.
    async fn assign(&self, seat: i32, task: &str, url: &str) -> Result<u64, LedgerError> {
        self.execute(
            "UPDATE genapi_seats SET task_id = $4, polling_url = $5
             WHERE pool = $1 AND seat = $2 AND worker = $3",
            &[&self.pool, &seat, &self.worker, &task, &url],
        )
        .await
    }

    /// This worker's `seat` is free: for any worker, or for the one named
    /// `to`.
    async fn free(&self, seat: i32, to: Option<&str>) -> Result<u64, LedgerError> {
        let told = wants::freed_for(&self.pool, to);
        self.execute(
            "WITH freed AS (
               UPDATE genapi_seats
               SET worker = NULL, lease_until = NULL, task_id = NULL, polling_url = NULL
               WHERE pool = $1 AND seat = $2 AND worker = $3 RETURNING seat)
             SELECT pg_notify('genapi_seats', $4) FROM freed",
            &[&self.pool, &seat, &self.worker, &told],
        )
        .await
    }

    /// `seat`, lapsed, is free once its task `task` was seen final.
    async fn reclaim(&self, seat: i32, task: &str) -> Result<u64, LedgerError> {
        self.execute(
            concat!(
                "WITH freed AS (
               UPDATE genapi_seats
               SET worker = NULL, lease_until = NULL, task_id = NULL, polling_url = NULL
               WHERE pool = $1 AND seat = $2 AND task_id = $3 AND (lease_until < now() OR ",
                name_free!("'pool ' || $1", "worker"),
                ")
               RETURNING seat)
             SELECT pg_notify('genapi_seats', $1) FROM freed"
            ),
            &[&self.pool, &seat, &task],
        )
        .await
    }

    /// Notes no ledger event carried.
    async fn write_notes(&self, notes: &[Note]) -> Result<u64, LedgerError> {
        let json = Notes::json(notes);
        self.execute(concat!("WITH ", seat_changes!("$1"), " SELECT 1"), &[&json])
            .await
    }

    /// Runs `sql` as one step: the rows it changed.
    async fn execute(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, LedgerError> {
        self.db
            .run(false, |session| async move { session.execute(sql, params).await })
            .await
    }

    /// Renews the leases of this worker's seats.
    async fn renew(&self) {
        let (pool, worker, lease) = (&self.pool, &self.worker, seconds(self.lease));
        let sent = tokio::time::Instant::now();
        let renewed = self
            .db
            .run(false, |session| async move {
                session
                    .query(
                        "UPDATE genapi_seats SET lease_until = now() + make_interval(secs => $3)
                         WHERE pool = $1 AND worker = $2 RETURNING seat",
                        &[pool, worker, &lease],
                    )
                    .await
            })
            .await;
        match renewed {
            Ok(rows) => {
                let seats: Vec<i32> = rows.iter().filter_map(|row| row.try_get(0).ok()).collect();
                self.leases.renewed(&seats, sent, self.lease);
            }
            // A renewal is made again at the next tick.
            Err(error) => tracing::warn!(%error, "cannot renew this worker's shared seats"),
        }
    }
}
