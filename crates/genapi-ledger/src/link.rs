//! One connection to the ledger that outlives the server's restarts, and
//! never waits on it without end.
//!
//! Each step (a statement, a transaction) has a deadline: a server that
//! accepted the connection and then stopped answering fails the step when
//! the deadline passes, instead of holding the worker for ever (TCP alone
//! would notice in minutes, or never). A connection that broke (the server
//! restarted, `pg_ctl -m immediate stop`, a failover) is opened again, with
//! a growing pause between attempts, and the step is run again on it, all
//! within the same deadline.
//!
//! Running a step again is safe because every statement of the ledger may
//! be applied twice with the same effect: claims and releases name their
//! worker, holds set a value, events are read by folding, where a
//! repeated event changes nothing.
//!
//! A link may also hold a worker's name (a session advisory lock), so that
//! no two live processes work as one worker: the lock is taken again on
//! every new connection, and when another process took the name in between,
//! the steps that decide what to send are refused from then on.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error as PgError, Row, Statement};

use crate::connect::{self, Heard};
use crate::error::{describe, LedgerError};

/// How long one step may take, reconnections included, unless set
/// otherwise ([`crate::LedgerOptions::step_deadline`]).
pub const DEFAULT_STEP_DEADLINE: Duration = Duration::from_secs(30);

/// The first pause before opening a broken connection again; it doubles up
/// to [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LONGEST_PAUSE: Duration = Duration::from_secs(2);

/// The namespace of worker names' advisory locks (`hashtextextended` seed).
pub(crate) const WORKER_LOCK_SEED: i64 = 0x6765_6e61_7069_0002;

/// One open connection and the statements prepared on it.
pub(crate) struct Session {
    client: tokio_postgres::Client,
    prepared: std::sync::Mutex<std::collections::HashMap<&'static str, Statement>>,
}

impl Session {
    /// `sql`, prepared once per connection: a statement sent as text is
    /// parsed anew each time, and preparing it costs a round trip of its own.
    async fn statement(&self, sql: &'static str) -> Result<Statement, PgError> {
        if let Some(statement) = self.prepared.lock().ok().and_then(|known| known.get(sql).cloned()) {
            return Ok(statement);
        }
        let statement = self.client.prepare(sql).await?;
        if let Ok(mut known) = self.prepared.lock() {
            known.insert(sql, statement.clone());
        }
        Ok(statement)
    }

    /// Runs `sql`; the rows it changed.
    pub(crate) async fn execute(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, PgError> {
        let statement = self.statement(sql).await?;
        self.client.execute(&statement, params).await
    }

    /// Runs `sql`; its rows.
    pub(crate) async fn query(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, PgError> {
        let statement = self.statement(sql).await?;
        self.client.query(&statement, params).await
    }

    /// Runs `sql`; its one row.
    pub(crate) async fn query_one(&self, sql: &'static str, params: &[&(dyn ToSql + Sync)]) -> Result<Row, PgError> {
        let statement = self.statement(sql).await?;
        self.client.query_one(&statement, params).await
    }

    /// Runs statements given as text, without parameters (`BEGIN`, `LISTEN`).
    pub(crate) async fn batch_execute(&self, sql: &str) -> Result<(), PgError> {
        self.client.batch_execute(sql).await
    }

    /// The driver's client, for what the statements above do not cover.
    pub(crate) fn client(&self) -> &tokio_postgres::Client {
        &self.client
    }
}

/// A connection to the ledger, opened again whenever it breaks.
pub(crate) struct Link {
    /// The ledger URL. It may hold a password: never shown.
    url: String,
    step: Duration,
    /// `LISTEN` on each new connection to these channels (freed seats,
    /// workers asking for one).
    listen: &'static [&'static str],
    /// How long after the server started a gone worker keeps its lease
    /// ([`crate::LedgerOptions::rescue_grace_after_restart`]), set on each
    /// new connection.
    rescue_grace: Duration,
    /// Woken by every notification, and whenever a connection is opened
    /// again (notifications sent while it was broken were lost).
    notified: Arc<Heard>,
    /// The worker name this link's connections hold, once one is taken: its
    /// lock's key, and the name.
    name: Mutex<Option<(String, String)>>,
    /// Another process took the name while the connection was broken.
    name_lost: AtomicBool,
    current: Mutex<Option<Arc<Session>>>,
    /// One task opens a new connection at a time; the others wait for it.
    reopening: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("step", &self.step).finish_non_exhaustive()
    }
}

impl Link {
    /// Opens the first connection, within `step`: migrated to the schema
    /// this build knows when `migrate`, then checked against it.
    pub(crate) async fn open(
        url: &str,
        step: Duration,
        migrate: bool,
        listen: &'static [&'static str],
        rescue_grace: Duration,
    ) -> Result<Link, LedgerError> {
        let link = Link {
            url: url.to_string(),
            step: step.max(Duration::from_secs(1)),
            listen,
            rescue_grace,
            notified: Arc::new(Heard::default()),
            name: Mutex::new(None),
            name_lost: AtomicBool::new(false),
            current: Mutex::new(None),
            reopening: tokio::sync::Mutex::new(()),
        };
        let deadline = Instant::now() + link.step;
        let first = async {
            let session = link.connect().await?;
            if migrate {
                crate::schema::migrate(&session.client).await?;
            }
            crate::schema::check_shape(&session.client).await?;
            Ok::<_, LedgerError>(session)
        };
        let session = tokio::time::timeout_at(deadline, first)
            .await
            .map_err(|_| link.late(None))??;
        link.keep(Arc::new(session));
        Ok(link)
    }

    /// Woken by every notification the connection gets, and when it was
    /// opened again.
    pub(crate) fn notified(&self) -> Arc<Heard> {
        self.notified.clone()
    }

    /// Takes the first of `names` (each a lock's key and a worker name) no
    /// live process holds, and keeps it for as long as this link lives: a
    /// name another connection holds is waited for up to `wait` (at most
    /// half the step deadline) before the next is tried. `None` when every
    /// one is held. Called before any other task uses the link: the wait is
    /// a transaction on its connection.
    pub(crate) async fn take_name(
        &self,
        names: &[(String, String)],
        wait: Duration,
    ) -> Result<Option<String>, LedgerError> {
        let wait = wait.min(self.step / 2);
        for (key, name) in names {
            let key_ref = key.as_str();
            let taken = self
                .run(
                    false,
                    |session| async move { lock_waiting(&session, key_ref, wait).await },
                )
                .await?;
            if taken {
                if let Ok(mut kept) = self.name.lock() {
                    *kept = Some((key.clone(), name.clone()));
                }
                return Ok(Some(name.clone()));
            }
        }
        Ok(None)
    }

    /// Whether `other` reaches the same database (by the same URL).
    pub(crate) fn same_database(&self, other: &Link) -> bool {
        self.url == other.url
    }

    /// Runs `step` on the connection, within the step deadline: opened again
    /// (with backoff) and run again while the connection breaks. With
    /// `exclusive` (a step that decides what is sent: a claim, an intent),
    /// it is refused once another process took this link's worker name.
    pub(crate) async fn run<T, F, Fut>(&self, exclusive: bool, step: F) -> Result<T, LedgerError>
    where
        F: Fn(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, PgError>>,
    {
        self.run_within(self.step, exclusive, step).await
    }

    /// [`Link::run`] within `limit` rather than the step deadline, when it
    /// is shorter: for a caller that tries again on its own.
    pub(crate) async fn run_within<T, F, Fut>(
        &self,
        limit: Duration,
        exclusive: bool,
        step: F,
    ) -> Result<T, LedgerError>
    where
        F: Fn(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, PgError>>,
    {
        let limit = limit.min(self.step);
        let deadline = Instant::now() + limit;
        let mut pause = FIRST_PAUSE;
        let mut last: Option<String> = None;
        loop {
            let session = self.session(deadline, limit, last.as_deref()).await?;
            if exclusive && self.name_lost.load(Ordering::SeqCst) {
                return Err(self.name_taken());
            }
            match tokio::time::timeout_at(deadline, step(session.clone())).await {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(error)) if broken(&error) => {
                    tracing::warn!(error = %describe(&error), "the ledger connection broke; opening it again");
                    last = Some(describe(&error));
                    self.drop_session(&session);
                }
                Ok(Err(error)) => return Err(LedgerError::from_db(error)),
                Err(_) => {
                    // A server that stopped answering: its connection is
                    // given up, so the next step opens a fresh one.
                    self.drop_session(&session);
                    return Err(self.late_after(limit, last.as_deref()));
                }
            }
            if Instant::now() + pause >= deadline {
                return Err(self.late_after(limit, last.as_deref()));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }

    /// Runs `work` in a transaction of its own on this link (whose steps
    /// must then not be shared with other tasks), rolled back on failure.
    pub(crate) async fn transaction<T, F, Fut>(&self, exclusive: bool, work: F) -> Result<T, LedgerError>
    where
        F: Fn(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<Result<T, LedgerError>, PgError>>,
    {
        let outcome = self
            .run(exclusive, |session| {
                let work = &work;
                async move {
                    session.batch_execute("BEGIN").await?;
                    let done = work(session.clone()).await;
                    let end = match &done {
                        Ok(Ok(_)) => "COMMIT",
                        _ => "ROLLBACK",
                    };
                    match (done, session.batch_execute(end).await) {
                        (Ok(value), Ok(())) => Ok(value),
                        (Err(error), _) | (_, Err(error)) => Err(error),
                    }
                }
            })
            .await?;
        outcome
    }

    /// The open connection, or a new one (with backoff) before `deadline`.
    async fn session(
        &self,
        deadline: Instant,
        limit: Duration,
        last: Option<&str>,
    ) -> Result<Arc<Session>, LedgerError> {
        if let Some(session) = self.open_session() {
            return Ok(session);
        }
        let _turn = tokio::time::timeout_at(deadline, self.reopening.lock())
            .await
            .map_err(|_| self.late_after(limit, last))?;
        if let Some(session) = self.open_session() {
            return Ok(session);
        }
        let mut pause = FIRST_PAUSE;
        let mut reason = last.map(str::to_string);
        loop {
            match tokio::time::timeout_at(deadline, self.connect()).await {
                Ok(Ok(session)) => {
                    let session = Arc::new(session);
                    self.keep(session.clone());
                    // Seats freed while it was broken were never heard of.
                    self.notified.heard();
                    return Ok(session);
                }
                // The server answered and refused: trying again would not
                // change its answer.
                Ok(Err(
                    error @ (LedgerError::Url { .. } | LedgerError::Insecure { .. } | LedgerError::Credentials { .. }),
                )) => return Err(error),
                Ok(Err(error)) => reason = Some(error.to_string()),
                Err(_) => return Err(self.late_after(limit, reason.as_deref())),
            }
            if Instant::now() + pause >= deadline {
                return Err(self.late_after(limit, reason.as_deref()));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }

    /// A new connection, listening and holding this link's name as the
    /// earlier ones did.
    async fn connect(&self) -> Result<Session, LedgerError> {
        let client = connect::open(&self.url, self.notified.clone()).await?;
        let session = Session {
            client,
            prepared: Default::default(),
        };
        for channel in self.listen {
            session
                .batch_execute(&format!("LISTEN {channel}"))
                .await
                .map_err(LedgerError::from_db)?;
        }
        // Read by the claims' test of a gone worker (`crate::liveness`).
        let grace = self.rescue_grace.as_secs_f64().to_string();
        session
            .client
            .execute("SELECT set_config('genapi.rescue_grace', $1, false)", &[&grace])
            .await
            .map_err(LedgerError::from_db)?;
        let name = self.name.lock().ok().and_then(|kept| kept.clone());
        if let Some((key, name)) = name {
            // The connection this one replaces may hold the name a moment
            // longer (its server process lets go only when it next runs):
            // the name is waited for before it is counted as taken.
            let wait = REGAIN_WAIT.min(self.step / 4);
            let held = lock_waiting(&session, &key, wait).await.map_err(LedgerError::from_db)?;
            if !held && !self.name_lost.swap(true, Ordering::SeqCst) {
                tracing::error!(
                    worker = %name,
                    "another process took this worker's name while the ledger was unreachable; this worker sends \
                     nothing more"
                );
            }
        }
        Ok(session)
    }

    fn open_session(&self) -> Option<Arc<Session>> {
        let current = self.current.lock().ok()?.clone()?;
        (!current.client.is_closed()).then_some(current)
    }

    fn keep(&self, session: Arc<Session>) {
        if let Ok(mut current) = self.current.lock() {
            *current = Some(session);
        }
    }

    /// Forgets `session` (unless another task already replaced it).
    fn drop_session(&self, session: &Arc<Session>) {
        if let Ok(mut current) = self.current.lock() {
            if current.as_ref().is_some_and(|kept| Arc::ptr_eq(kept, session)) {
                *current = None;
            }
        }
    }

    fn late(&self, last: Option<&str>) -> LedgerError {
        self.late_after(self.step, last)
    }

    fn late_after(&self, limit: Duration, last: Option<&str>) -> LedgerError {
        LedgerError::Unanswered {
            seconds: limit.as_secs(),
            last: last.map(str::to_string),
        }
    }

    fn name_taken(&self) -> LedgerError {
        LedgerError::WorkerTaken {
            worker: self
                .name
                .lock()
                .ok()
                .and_then(|kept| kept.as_ref().map(|(_, name)| name.clone()))
                .unwrap_or_default(),
        }
    }
}

/// The longest a reconnection waits for the worker's name, which a broken
/// connection of its own may still hold.
const REGAIN_WAIT: Duration = Duration::from_secs(5);

/// Takes the worker name whose lock is `key` for this session, waiting up
/// to `wait` while another session holds it. The lock is the session's: it
/// stays when the transaction that bounds the wait ends.
async fn lock_waiting(session: &Session, key: &str, wait: Duration) -> Result<bool, PgError> {
    // PostgreSQL reads a lock_timeout of 0 as no limit at all.
    let millis = wait.as_millis().clamp(1, i32::MAX as u128).to_string();
    session.batch_execute("BEGIN").await?;
    let waited = async {
        session
            .query_one("SELECT set_config('lock_timeout', $1, true)", &[&millis])
            .await?;
        session
            .execute(
                "SELECT pg_advisory_lock(hashtextextended($1, $2))",
                &[&key, &WORKER_LOCK_SEED],
            )
            .await
    }
    .await;
    match waited {
        Ok(_) => session.batch_execute("COMMIT").await.map(|()| true),
        Err(error) if error.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
            session.batch_execute("ROLLBACK").await.map(|()| false)
        }
        Err(error) => {
            // The step reports what went wrong; the rollback only leaves
            // the connection out of the failed transaction.
            let _ = session.batch_execute("ROLLBACK").await;
            Err(error)
        }
    }
}

/// Whether `error` says the connection broke (rather than the statement
/// failed): closed, an input or output error, or the server going away
/// (connection exceptions, class 08, and operator intervention, 57P).
fn broken(error: &PgError) -> bool {
    if error.is_closed() {
        return true;
    }
    if let Some(code) = error.code() {
        let code = code.code();
        return code.starts_with("08") || code.starts_with("57P");
    }
    std::error::Error::source(error).is_some_and(|source| source.is::<std::io::Error>())
}
