//! A run stopped right after its task was accepted, and run again at once,
//! may find the service not knowing the task yet (a 404 for a short while
//! after the acceptance): sent so recently, as the journal says, the line
//! rides that out and its result is saved, never submitted again.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, Event, Journal, MemoryJournal, Standing};

use crate::common::*;

/// Runs a batch of one line of `tag` until the journal records its
/// acceptance, then drops the run, as a run killed right then.
async fn accepted_then_killed(mock: &genapi_mock::MockService, journal: &MemoryJournal, dir: &Dir, tag: &str) {
    let batch = Batch::new(mock.client().unwrap(), store(journal.clone()), &dir.0);
    let mut stream = Box::pin(batch.run(jobs(1, tag)).unwrap());
    let accepted = || {
        journal
            .events_so_far()
            .iter()
            .any(|event| matches!(event, Event::Accepted { .. }))
    };
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        while !accepted() {
            tokio::select! {
                next = stream.next() => panic!("the task runs ten minutes: {next:#?}"),
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "accepted by the first run");
}

// On the real clock: the first run must see its acceptance, which a paused
// clock could skip past while the machine is busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_sent_only_just_rides_out_a_passing_not_found() {
    let mock = roomy_mock(600_000).await;
    let dir = Dir::new("resumed-just-sent");
    let journal = MemoryJournal::default();
    accepted_then_killed(&mock, &journal, &dir, "just sent").await;
    // The service does not know the task for its next two polls; then it
    // has ended.
    mock.inject(genapi_mock::Fault::status("/v1/get_result", 404).times(2));
    mock.advance(Duration::from_secs(601));
    let batch = Batch::new(mock.client().unwrap(), store(journal.clone()), &dir.0);
    let outcomes = run_batch(batch, jobs(1, "just sent")).await;
    assert_eq!(outcomes[0].standing, Standing::Saved, "{outcomes:#?}");
    assert!(outcomes[0].resumed);
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "sent once");
}

/// A journal's sending time is a file's word: one past the end of time is
/// no time, and the line is polled and saved as any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sending_time_past_the_end_of_time_is_no_time() {
    let mock = roomy_mock(600_000).await;
    let dir = Dir::new("resumed-sent-at-end-of-time");
    let first = MemoryJournal::default();
    accepted_then_killed(&mock, &first, &dir, "end of time").await;
    let mut journal = MemoryJournal::default();
    for event in first.events_so_far() {
        let event = match event {
            Event::Intent {
                line,
                name,
                digest,
                ephemeral,
                ..
            } => Event::Intent {
                line,
                name,
                digest,
                sent_at: Some(u64::MAX),
                ephemeral,
            },
            other => other,
        };
        journal.append(&event).unwrap();
    }
    mock.advance(Duration::from_secs(601));
    let batch = Batch::new(mock.client().unwrap(), store(journal), &dir.0);
    let outcomes = run_batch(batch, jobs(1, "end of time")).await;
    assert_eq!(outcomes[0].standing, Standing::Saved, "{outcomes:#?}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "sent once");
}
