//! The ledger keeps the one contract of a batch's store
//! (genapi_test_common::store_contract), as the file and memory journals do,
//! on a real PostgreSQL: each run is a worker of its own name.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures::future::BoxFuture;
use genapi_ledger::{Ledger, LedgerOptions};
use genapi_test_common::store_contract::{self, Opener};

use crate::common::pg::Postgres;

/// Batch `batch` in the ledger at `url`, opened by a new worker each time.
struct Workers {
    url: String,
    batch: String,
    opened: AtomicUsize,
}

impl Opener for Workers {
    type Store = Ledger;

    fn open(&self) -> BoxFuture<'_, Result<Ledger, String>> {
        let run = self.opened.fetch_add(1, Ordering::SeqCst);
        let options = LedgerOptions::default().worker_name(format!("run-{run}"));
        Box::pin(async move {
            Ledger::open_with(&self.url, &self.batch, "0123456789abcdef", options)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_keeps_the_contract() {
    let Some(pg) = Postgres::start("store-contract") else {
        return;
    };
    let url = pg.url();
    store_contract::holds(|name| Workers {
        url: url.clone(),
        batch: format!("contract-{name}"),
        opened: AtomicUsize::new(0),
    })
    .await;
}
