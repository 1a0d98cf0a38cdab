//! Journals written before a line's life was a type keep working: the
//! fixture (`fixtures/journal-0.1.0.jsonl`, in the words release 0.1.0
//! writes) holds a line in every situation, and each stands where that
//! release said it stood; a batch stopped before the change resumes after
//! it and pays nothing twice.

use std::collections::BTreeMap;

use genapi_batch::{Batch, FileJournal, ReadStore, Standing};
use serde_json::json;

use crate::common::*;

const FIXTURE: &str = include_str!("fixtures/journal-0.1.0.jsonl");

#[tokio::test]
async fn a_journal_of_the_earlier_release_stands_as_that_release_said() {
    let dir = Dir::new("earlier-journal");
    let path = dir.join("journal.jsonl");
    std::fs::write(&path, FIXTURE).unwrap();
    let store = store(FileJournal::open(&path).unwrap());
    let status = store.status(&[]).await.unwrap();
    use Standing::*;
    let expected: BTreeMap<u64, Standing> = [
        (1, Saved),
        (2, Unanswered),
        (3, Accepted),
        (4, Unsent),
        (5, Refused),
        (6, Ended),
        (7, Ended),
        (8, Ended),
        (9, Ended),
        (10, Ended),
        (11, Gone),
        (12, Gone),
        (13, Accepted),
        (14, Accepted),
        (15, Saved),
    ]
    .into_iter()
    .collect();
    assert_eq!(status.lines, expected);
    let lines = store.lines().await.unwrap();
    assert_eq!(lines[&3].task().map(|task| task.id.as_str()), Some("task-3"));
    assert_eq!(lines[&2].sent().and_then(|sent| sent.sent_at), Some(1_764_000_002));
    assert!(lines[&5].refused() && !lines[&6].refused());
    assert!(lines[&13].task().is_some_and(|task| task.adopted));
}

/// A run of the earlier release stopped while its task ran: the journal it
/// left (in that release's words) is resumed, the task polled and saved,
/// and nothing submitted again.
#[tokio::test(start_paused = true)]
async fn a_batch_stopped_by_the_earlier_release_resumes_without_paying_twice() {
    let mock = roomy_mock(200).await;
    let client = mock.client().unwrap();
    let job = &jobs(1, "resumed")[0];
    let task = client.submit_raw("/v1/gen-2-pro", job.body.clone()).await.unwrap();
    let dir = Dir::new("earlier-stopped");
    let path = dir.join("journal.jsonl");
    // The header as that release wrote it, then the acceptance.
    let header = FIXTURE.lines().next().unwrap();
    let accepted = json!({"event": "accepted", "line": 1, "id": task.id(), "polling_url": task.polling_url().as_str(), "cost": 1.5});
    let text = format!("{header}\n{accepted}\n");
    std::fs::write(&path, text).unwrap();
    let batch = Batch::new(client, store(FileJournal::open(&path).unwrap()), &dir.0);
    let outcomes = run_batch(batch, jobs(1, "resumed")).await;
    assert_eq!(outcomes[0].standing, Standing::Saved, "{outcomes:#?}");
    assert!(outcomes[0].resumed);
    // Its result line says so: its cost was charged by the run that sent it.
    assert_eq!(outcomes[0].to_json()["resumed"], true);
    assert_eq!(outcomes[0].task.as_ref().map(|t| t.id.as_str()), Some(task.id()));
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        1,
        "submitted once, before the change"
    );
    assert!(dir.join("img-1.jpg").is_file());
}
