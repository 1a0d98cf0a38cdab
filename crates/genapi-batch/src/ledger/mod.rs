//! A batch, its active-task seats and its spending shared by many workers,
//! through PostgreSQL (feature `postgres`).
//!
//! One process with a [`crate::FileJournal`] already runs a batch
//! without ever paying twice. Several processes, on one machine or many,
//! share one batch through a [`Ledger`]:
//!
//! - each line is **claimed** by one worker at a time, with a lease the
//!   worker renews while it lives. A line whose lease lapsed (its worker
//!   died) is claimed by another, which reads the line's records as a
//!   restarted run reads its journal: an accepted task is polled and saved,
//!   never submitted again; a submission sent but never answered is
//!   reported unknown, never sent again on its own;
//! - the records are the file journal's ([`crate::Record`]), one row
//!   each; an intent is written only while the worker still holds the line,
//!   so a worker that lost its lease (a pause, a partition) sends nothing;
//! - [`SharedSeats`] share the active-task limit: a seat is a row, taken
//!   with `FOR UPDATE SKIP LOCKED` (never by counting rows, which races),
//!   and a dead worker's seat comes back only once its task can no longer
//!   be running;
//! - the spending cap ([`crate::Batch::max_credits`]) holds credits
//!   per line in the ledger, so all workers together stay under it;
//! - lines are claimed a block at a time, in one statement that skips the
//!   lines another worker is claiming (`FOR UPDATE SKIP LOCKED`), so
//!   workers walking the same job file do not wait on each other;
//! - a worker may keep its name from one run to the next
//!   ([`LedgerOptions::worker_name`], [`LedgerOptions::worker_for_folder`]):
//!   started again, it takes back its lines at once instead of waiting for
//!   their lease. One live process holds a name at a time;
//! - every database step has a deadline ([`LedgerOptions::step_deadline`]),
//!   and a connection that broke (the server restarted) is opened again
//!   with a growing pause, the step run again on it;
//! - a line costs the database two commits: its intent and its acceptance,
//!   each carrying the worker's seat changes
//!   ([`Ledger::carry_seat_changes`]); its end waits a moment for the next
//!   record to carry it, and its caller still waits until it is stored.
//!
//! The ledger owns its schema: numbered migrations applied on first use. It
//! never stores the API key or images.
//!
//! The connection is protected as the URL's `sslmode`, `sslrootcert` and
//! `require_auth` ask, read as libpq reads them: see [`tls`] for what each
//! checks, and when the password may be sent.

mod carried;
mod dial;
mod ends;
mod guard;
mod lines;
mod link;
mod naming;
mod options;
mod schema;
mod seats;
mod store;
pub mod tls;
mod wants;

use std::sync::Arc;
use std::time::Duration;

pub use lines::{BatchStatus, Ledger, LineView};
pub use link::DEFAULT_STEP_DEADLINE;
pub use options::LedgerOptions;
pub use seats::{SharedSeats, UNANSWERED_SEAT_HOLD};

/// Why the ledger cannot be used. Nothing was sent to the service.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LedgerError {
    /// The URL cannot be read as a PostgreSQL connection URL.
    #[error("the ledger URL is not usable ({reason}); write it as postgres://USER:PASSWORD@HOST:PORT/DATABASE")]
    Url {
        /// What is wrong with it (the URL itself is not repeated: it may hold a password).
        reason: String,
    },
    /// A setting of the connection's protection cannot be used: its CA file
    /// (`sslrootcert`, `PGSSLROOTCERT`) or a libpq variable of the
    /// environment (`PGSSLMODE`, …), named in the reason.
    #[error("the ledger's connection settings are not usable: {reason}")]
    Settings {
        /// Which setting, and what is wrong with it.
        reason: String,
    },
    /// No connection could be opened.
    #[error(
        "cannot reach the ledger database at {at} ({reason}); check the host and port, and that PostgreSQL runs there"
    )]
    Unreachable {
        /// Host and port.
        at: String,
        /// What the connection attempt met.
        reason: String,
    },
    /// The connection was given up for its safety before any password was
    /// sent: TLS was required and not offered, the server's certificate was
    /// refused, or the server asked for a way of authentication the URL
    /// does not allow (by default, a clear-text password over an
    /// unencrypted connection).
    #[error("the connection to the ledger database at {at} was given up for its safety: {reason}; {fix}")]
    Insecure {
        /// Host and port.
        at: String,
        /// What happened.
        reason: String,
        /// What to change, in the URL or at the server.
        fix: String,
    },
    /// A table of the ledger is not as the migrations made it (a column
    /// dropped or renamed by hand).
    #[error(
        "the ledger's table {table} is not as genapi made it ({reason}); restore it from a backup, or give the \
         ledger a new database"
    )]
    SchemaChanged {
        /// The table.
        table: String,
        /// The server's words.
        reason: String,
    },
    /// The server refused the user or password.
    #[error(
        "the ledger database at {at} refused the credentials ({reason}); check the user and password in the ledger URL"
    )]
    Credentials {
        /// Host and port.
        at: String,
        /// The server's words.
        reason: String,
    },
    /// The batch name is taken by a batch of another job file.
    #[error(
        "batch {batch:?} in the ledger was started from another job file, or from this one before it changed \
         (lines added, removed or edited); restore it, or give this job file another batch name"
    )]
    OtherJobFile {
        /// The batch name.
        batch: String,
    },
    /// The seat pool has another size than the one asked for: a pool has
    /// one size, which all its workers share.
    #[error(
        "seat pool {pool:?} in the ledger has {size} seats, not the {asked} asked for; a pool has one size, which \
         all its workers share: ask for {size} (or join it at its size), or use another pool for {asked}"
    )]
    PoolSize {
        /// The pool's name.
        pool: String,
        /// Its size, as the ledger keeps it.
        size: usize,
        /// The size asked for.
        asked: usize,
    },
    /// The database holds a newer schema than this build knows.
    #[error("the ledger's schema is version {found}, newer than this genapi knows ({known}); upgrade genapi")]
    SchemaTooNew {
        /// The version found.
        found: i32,
        /// The newest version this build knows.
        known: i32,
    },
    /// The database did not answer within a step's deadline
    /// ([`LedgerOptions::step_deadline`]): it stopped answering, or could
    /// not be reached again after its connection broke.
    #[error(
        "the ledger database did not answer within {seconds} s{}; check that it runs and can be reached (what \
         needed it was not done, and nothing was sent for it)",
        last.as_ref().map(|l| format!(" (last: {l})")).unwrap_or_default()
    )]
    Unanswered {
        /// The step's deadline, in seconds.
        seconds: u64,
        /// What the last attempt met, if anything.
        last: Option<String>,
    },
    /// Another live process works under this worker's name: two processes
    /// with one name would take each other's lines.
    #[error(
        "another live process works as worker {worker:?} in this ledger; give each worker its own name \
         (--worker-name), or stop the other one"
    )]
    WorkerTaken {
        /// The name.
        worker: String,
    },
    /// The database answered with an error.
    #[error("the ledger database: {0}")]
    Database(String),
}

impl LedgerError {
    fn from_db(error: tokio_postgres::Error) -> LedgerError {
        LedgerError::Database(describe(&error))
    }
}

/// The server's message, or the error and its cause.
fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return db.message().to_string();
    }
    match std::error::Error::source(error) {
        Some(source) => format!("{error}: {source}"),
        None => error.to_string(),
    }
}

/// How long a worker's claims and seats last without renewal (renewed a
/// few times per lease while it lives).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// A connection to read the ledger as it is: no migration is applied.
/// `None` when the database holds no ledger yet.
pub(crate) async fn connect_to_read(url: &str) -> Result<Option<tokio_postgres::Client>, LedgerError> {
    let db = LedgerError::from_db;
    let client = open(url, Arc::new(link::Heard::default())).await?;
    let ledger = client
        .query_one("SELECT to_regclass('genapi_schema') IS NOT NULL", &[])
        .await
        .map_err(db)?;
    if !ledger.try_get::<_, bool>(0).map_err(db)? {
        return Ok(None);
    }
    let found: i32 = client
        .query_one("SELECT coalesce(max(version), 0) FROM genapi_schema", &[])
        .await
        .map_err(db)?
        .try_get(0)
        .map_err(db)?;
    if found > schema::VERSION {
        return Err(LedgerError::SchemaTooNew {
            found,
            known: schema::VERSION,
        });
    }
    Ok((found > 0).then_some(client))
}

/// A connection as the URL asks, not migrated; `notified` is woken by each
/// notification it gets (`LISTEN`).
async fn open(url: &str, notified: Arc<link::Heard>) -> Result<tokio_postgres::Client, LedgerError> {
    let (mut config, security) = tls::read_url(url)?;
    // A database that goes away mid-statement (a partition) is noticed in
    // about a minute rather than hours, even by a step without a deadline.
    config.keepalives(true).keepalives_idle(Duration::from_secs(30));
    #[cfg(target_os = "linux")]
    config.tcp_user_timeout(Duration::from_secs(60));
    if config.get_options().is_none() {
        config.options("-c statement_timeout=60000");
    }
    let (client, mut connection) = dial::connect(&config, security).await?;
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = futures::StreamExt::next(&mut messages).await {
            match message {
                Ok(tokio_postgres::AsyncMessage::Notification(note)) => notified.hear(note.channel(), note.payload()),
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(error = %describe(&error), "the ledger connection closed");
                    break;
                }
            }
        }
    });
    Ok(client)
}

/// Reads every column the ledger uses, so a table changed by hand is found
/// now, before anything is sent.
async fn check_shape(client: &tokio_postgres::Client) -> Result<(), LedgerError> {
    for (table, columns) in schema::SHAPE {
        if let Err(error) = client
            .batch_execute(&format!("SELECT {columns} FROM {table} LIMIT 0"))
            .await
        {
            return Err(LedgerError::SchemaChanged {
                table: table.to_string(),
                reason: describe(&error),
            });
        }
    }
    Ok(())
}

/// Applies the migrations this database lacks, one process at a time.
async fn migrate(client: &tokio_postgres::Client) -> Result<(), LedgerError> {
    let db = LedgerError::from_db;
    client.batch_execute("BEGIN").await.map_err(db)?;
    let applied = async {
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&schema::MIGRATION_LOCK])
            .await
            .map_err(db)?;
        client
            .batch_execute("CREATE TABLE IF NOT EXISTS genapi_schema (version integer NOT NULL)")
            .await
            .map_err(db)?;
        let found: i32 = client
            .query_opt("SELECT max(version) FROM genapi_schema", &[])
            .await
            .map_err(db)?
            .and_then(|row| row.get::<_, Option<i32>>(0))
            .unwrap_or(0);
        if found > schema::VERSION {
            return Err(LedgerError::SchemaTooNew {
                found,
                known: schema::VERSION,
            });
        }
        for (index, migration) in schema::MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
            client.batch_execute(migration).await.map_err(db)?;
            let version = index as i32 + 1;
            client
                .execute("INSERT INTO genapi_schema (version) VALUES ($1)", &[&version])
                .await
                .map_err(db)?;
        }
        Ok(())
    }
    .await;
    let end = if applied.is_ok() { "COMMIT" } else { "ROLLBACK" };
    client.batch_execute(end).await.map_err(db)?;
    applied
}

/// A name for this process among the workers: host, process id and a
/// random part (a restarted process is a new worker).
pub(crate) fn worker_name() -> String {
    // 64 random bits: containers sharing a host name and a process id are
    // still told apart.
    format!("{}-{}-{:016x}", host_name(), std::process::id(), fastrand::u64(..))
}

/// This machine's name, as far as it can be known.
pub(crate) fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| {
            name.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
                .take(64)
                .collect()
        })
        .filter(|name: &String| !name.is_empty())
        .unwrap_or_else(|| "host".into())
}

/// `lease` in seconds, as PostgreSQL takes an interval.
fn seconds(lease: Duration) -> f64 {
    lease.as_secs_f64()
}
