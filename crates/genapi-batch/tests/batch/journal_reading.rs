//! A journal is read whatever it holds: an impossible time is no panic.

use genapi_batch::{Batch, MemoryJournal, Standing};
use genapi_mock::{Fault, FaultKind};
use serde_json::json;

use crate::common::*;

#[tokio::test(start_paused = true)]
async fn a_journal_with_an_impossible_time_is_read_without_a_panic() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("far-future");
    let journal = MemoryJournal::default();
    let job = literal_jobs(1, "far future").remove(0);
    // The digest the batch records, read back from a first (refused) run.
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::DropConnection).method("POST"));
    run_batch(
        Batch::new(mock.client().unwrap(), store(journal.clone()), &dir.0),
        vec![job.clone()],
    )
    .await;
    let digest = journal
        .events_so_far()
        .iter()
        .find_map(|r| match r {
            genapi_batch::Event::Intent { digest, .. } => Some(digest.clone()),
            _ => None,
        })
        .unwrap();
    let mut edited = journal.clone();
    for sent_at in [u64::MAX, 253_402_300_800] {
        genapi_batch::Journal::append(
            &mut edited,
            &serde_json::from_value(
                json!({"event": "intent", "line": 1, "name": "x", "digest": digest, "sent_at": sent_at}),
            )
            .unwrap(),
        )
        .unwrap();
        let outcome = run_batch(
            Batch::new(mock.client().unwrap(), store(journal.clone()), &dir.0),
            vec![job.clone()],
        )
        .await;
        assert_eq!(outcome[0].standing, Standing::Unanswered);
        assert!(outcome[0]
            .error
            .as_deref()
            .unwrap()
            .contains(&format!("Unix time {sent_at}")));
    }
}
