//! The ledger's tables, as numbered migrations applied in order on first use.
//!
//! A database holds many batches and many seat pools. The ledger keeps what
//! a batch's file journal keeps (its events, one row each) plus who works
//! on which line; never the API key, never an image.

use crate::error::{describe, LedgerError};

/// Each migration, by its version (its index + 1). Applied ones are never
/// edited: a change is a new migration at the end.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: batches, their lines and events, shared seats.
    "CREATE TABLE genapi_batches (
        name text PRIMARY KEY,
        jobs_digest text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE genapi_lines (
        batch text NOT NULL REFERENCES genapi_batches (name) ON DELETE CASCADE,
        line bigint NOT NULL,
        worker text,
        lease_until timestamptz,
        done boolean NOT NULL DEFAULT false,
        -- Credits: what the service reported charging for the line's task,
        -- and what is held for a submission whose cost is not known yet.
        kind text,
        charged double precision,
        hold double precision,
        PRIMARY KEY (batch, line)
    );
    CREATE TABLE genapi_records (
        seq bigserial PRIMARY KEY,
        batch text NOT NULL,
        line bigint NOT NULL,
        worker text NOT NULL,
        at timestamptz NOT NULL DEFAULT now(),
        record jsonb NOT NULL,
        FOREIGN KEY (batch, line) REFERENCES genapi_lines (batch, line) ON DELETE CASCADE
    );
    CREATE INDEX genapi_records_line ON genapi_records (batch, line, seq);
    CREATE TABLE genapi_seats (
        pool text NOT NULL,
        seat integer NOT NULL,
        worker text,
        lease_until timestamptz,
        task_id text,
        polling_url text,
        taken_at timestamptz,
        PRIMARY KEY (pool, seat)
    );",
    // 2: each seat pool's one size, set by the first worker that joins it
    // (a pool made before this version gets it from its next worker).
    "CREATE TABLE genapi_seat_pools (
        pool text PRIMARY KEY,
        size integer NOT NULL CHECK (size > 0),
        created_at timestamptz NOT NULL DEFAULT now()
    );",
    // 3: a line's `charged` is a cost the service settled, and nothing
    // else. Release 0.1.0 also wrote there the cost an acceptance reported,
    // on a line not done yet: that report is a hold now, counted but never
    // the price of its kind. (A line done holds its settled cost, or 0.)
    "UPDATE genapi_lines SET hold = greatest(charged, hold), charged = NULL
     WHERE NOT done AND charged > 0;",
    // 4: small records shared by the processes of a scope (the memory of
    // proxies sharing what they sent), each with a version, a holder whose
    // hold lapses, and a time after which it is forgotten.
    "CREATE TABLE genapi_shared_records (
        scope text NOT NULL,
        key text NOT NULL,
        version bigint NOT NULL,
        value jsonb NOT NULL,
        holder text,
        lease_until timestamptz,
        kept_until timestamptz NOT NULL,
        PRIMARY KEY (scope, key)
    );",
    // 5: the database's own name, made once: two databases never share one,
    // however their addresses are spelt.
    "CREATE TABLE genapi_ledger (id text PRIMARY KEY);
    INSERT INTO genapi_ledger (id) VALUES (gen_random_uuid()::text);",
];

/// Every table and the columns the ledger reads or writes, checked each
/// time a ledger is opened: a table changed by hand is refused before
/// anything is sent, rather than found when a paid task cannot be written.
pub(crate) const SHAPE: &[(&str, &str)] = &[
    ("genapi_batches", "name, jobs_digest, created_at"),
    (
        "genapi_lines",
        "batch, line, worker, lease_until, done, kind, charged, hold",
    ),
    ("genapi_records", "seq, batch, line, worker, at, record"),
    (
        "genapi_seats",
        "pool, seat, worker, lease_until, task_id, polling_url, taken_at",
    ),
    ("genapi_seat_pools", "pool, size, created_at"),
    (
        "genapi_shared_records",
        "scope, key, version, value, holder, lease_until, kept_until",
    ),
    ("genapi_ledger", "id"),
];

/// The newest schema version this build knows.
pub(crate) const VERSION: i32 = MIGRATIONS.len() as i32;

/// Serialises migrations between processes (`pg_advisory_xact_lock`).
pub(crate) const MIGRATION_LOCK: i64 = 0x6765_6e61_7069_0001;

/// Reads every column the ledger uses, so a table changed by hand is found
/// now, before anything is sent.
pub(crate) async fn check_shape(client: &tokio_postgres::Client) -> Result<(), LedgerError> {
    for (table, columns) in SHAPE {
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
pub(crate) async fn migrate(client: &tokio_postgres::Client) -> Result<(), LedgerError> {
    let db = LedgerError::from_db;
    client.batch_execute("BEGIN").await.map_err(db)?;
    let applied = async {
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
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
        if found > VERSION {
            return Err(LedgerError::SchemaTooNew { found, known: VERSION });
        }
        for (index, migration) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
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
