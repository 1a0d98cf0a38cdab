//! Opening a connection to the ledger's database: as the URL asks (its TLS
//! options read by `tls`, dialled by `dial`), its notifications heard
//! ([`Heard`]), and, to only read, without changing anything.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{describe, LedgerError};
use crate::{dial, schema, tls};

/// A connection to read the ledger as it is: no migration is applied.
/// `None` when the database holds no ledger yet.
pub(crate) async fn connect_to_read(url: &str) -> Result<Option<tokio_postgres::Client>, LedgerError> {
    let db = LedgerError::from_db;
    let client = open(url, Arc::new(Heard::default())).await?;
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
pub(crate) async fn open(url: &str, notified: Arc<Heard>) -> Result<tokio_postgres::Client, LedgerError> {
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

/// What the database told a link's connections (a `NOTIFY` it listens
/// for) or may have told them unheard (the connection was opened again):
/// waiters are woken, and each time is counted, so a reader can tell
/// whether anything was heard since it last looked.
#[derive(Debug, Default)]
pub(crate) struct Heard {
    /// Woken each time.
    pub(crate) wake: tokio::sync::Notify,
    count: std::sync::atomic::AtomicU64,
    /// Workers heard asking for a seat, and whose freed seats are this
    /// worker's to take (see [`crate::wants`]).
    pub(crate) wants: crate::wants::Wants,
}

impl Heard {
    /// A notification on `channel`: a worker asking for a seat is noted
    /// (no seat was freed); a seat freed for another worker is not heard.
    pub(crate) fn hear(&self, channel: &str, payload: &str) {
        if channel == crate::wants::CHANNEL {
            self.wants.heard(payload);
        } else if self.wants.is_for_me(payload) {
            self.heard();
        }
    }

    /// Something was heard.
    pub(crate) fn heard(&self) {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_waiters();
    }

    /// How many times something was heard so far.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }
}
