//! The file journal and the memory journal keep the one contract of a
//! batch's store (genapi_test_common::store_contract), as the ledger does.

use futures::future::BoxFuture;
use genapi_batch::{FileJournal, JournalStore, MemoryJournal};
use genapi_test_common::store_contract::{self, Opener};

use crate::common::Dir;

/// A file journal in a folder of its own.
struct FileJournals(Dir);

impl Opener for FileJournals {
    type Store = JournalStore;

    fn open(&self) -> BoxFuture<'_, Result<JournalStore, String>> {
        let path = self.0.join("journal.jsonl");
        Box::pin(async move {
            let journal = FileJournal::open(&path).map_err(|e| e.to_string())?;
            JournalStore::open(journal).map_err(|e| e.to_string())
        })
    }
}

/// One memory journal, opened by each run through a clone.
struct MemoryJournals(MemoryJournal);

impl Opener for MemoryJournals {
    type Store = JournalStore;

    fn open(&self) -> BoxFuture<'_, Result<JournalStore, String>> {
        let journal = self.0.clone();
        Box::pin(async move { JournalStore::open(journal).map_err(|e| e.to_string()) })
    }
}

#[tokio::test]
async fn the_file_journal_keeps_the_contract() {
    store_contract::holds(|name| FileJournals(Dir::new(&format!("contract-file-{name}")))).await;
}

#[tokio::test]
async fn the_memory_journal_keeps_the_contract() {
    store_contract::holds(|_| MemoryJournals(MemoryJournal::default())).await;
}
