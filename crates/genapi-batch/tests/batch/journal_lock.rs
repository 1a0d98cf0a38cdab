//! A file journal is locked while its batch runs, and free again the moment
//! the batch's stream has ended, so a program can run the batch again at once.
//!
//! This lives in a test binary that starts no child processes: a process
//! started while a journal is open keeps a copy of its locked file until the
//! process replaces itself with its program, and could hold the lock a moment
//! past the journal's close.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, FileJournal, Job, Standing};
use genapi_mock::{MockConfig, MockService};
use serde_json::json;

use crate::common::{store, Dir};

#[tokio::test(start_paused = true)]
async fn the_journal_is_free_again_as_soon_as_the_stream_has_ended() {
    let config = MockConfig::default().default_duration(Duration::from_millis(50));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new("unlocked");
    let path = dir.join("journal.jsonl");
    let jobs = || {
        (1..=2).map(|n| {
            Job::new(
                n,
                "/v1/gen-2-pro",
                json!({"prompt": format!("unlocked {n}"), "width": 64, "height": 64}),
            )
            .name(format!("img-{n}"))
        })
    };
    for round in 0..3 {
        let journal = FileJournal::open(&path).unwrap();
        let mut outcomes = Batch::new(mock.client().unwrap(), store(journal), &dir.0)
            .run(jobs())
            .unwrap();
        while let Some(outcome) = outcomes.next().await {
            assert_eq!(outcome.standing, Standing::Saved, "round {round}");
        }
        // The stream is still in scope: its end closed the journal.
        if let Err(e) = FileJournal::open(&path) {
            panic!("round {round}: {e}");
        }
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2);
}
