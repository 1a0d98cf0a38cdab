//! Why the ledger cannot be used, in words that say what to do.

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(LedgerError);

/// Why the ledger cannot be used. Nothing was sent to the service.
#[derive(thiserror::Error)]
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
         (lines added, removed or edited, or an image file its lines read replaced, renamed or swapped); restore it. To add jobs, put only the new ones in a job file of their \
         own and run it as a batch of its own (its own batch name and --out): this whole file under another name \
         would send every line again, paying again for those done"
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
    /// ([`crate::LedgerOptions::step_deadline`]): it stopped answering, or could
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
    pub(crate) fn from_db(error: tokio_postgres::Error) -> LedgerError {
        LedgerError::Database(describe(&error))
    }
}

/// The server's message, or the error and its cause.
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return db.message().to_string();
    }
    match std::error::Error::source(error) {
        Some(source) => format!("{error}: {source}"),
        None => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::LedgerError;

    #[test]
    fn printed_with_debug_an_error_says_what_to_do_first() {
        let error = LedgerError::Url {
            reason: "no host".into(),
        };
        assert_eq!(format!("{error:?}"), error.to_string());
        assert!(format!("{error:?}").contains("postgres://USER:PASSWORD@HOST:PORT/DATABASE"));
    }
}
