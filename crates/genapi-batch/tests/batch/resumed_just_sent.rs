//! A run stopped right after its task was accepted, and run again at once,
//! may find the service not knowing the task yet (a 404 for a short while
//! after the acceptance): sent so recently, as the journal says, the line
//! rides that out and its result is saved, never submitted again.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, Event, MemoryJournal, Standing};

use crate::common::*;

// On the real clock: the first run must see its acceptance, which a paused
// clock could skip past while the machine is busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_sent_only_just_rides_out_a_passing_not_found() {
    let mock = roomy_mock(600_000).await;
    let dir = Dir::new("resumed-just-sent");
    let journal = MemoryJournal::default();
    let batch = Batch::new(mock.client().unwrap(), store(journal.clone()), &dir.0);
    let mut stream = Box::pin(batch.run(jobs(1, "just sent")).unwrap());
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
    drop(stream);
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
