//! What a resumed run's counters say of the lines an earlier run sent:
//! sent, neither in flight before their turn nor among the lines not sent.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, Event, MemoryJournal};

use crate::common::*;

// On the real clock: the first run must see its three acceptances.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_accepted_by_an_earlier_run_count_as_sent_earlier_until_their_turn() {
    // Tasks of ten minutes: none ends before the mock's clock is moved.
    let mock = roomy_mock(600_000).await;
    let dir = Dir::new("resumed-counts");
    let journal = MemoryJournal::default();
    let first = Batch::new(mock.client().unwrap(), store(journal.clone()), &dir.0);
    let stopper = first.stopper();
    let stream = first.run(jobs(3, "resumed counts")).unwrap();
    tokio::pin!(stream);
    let accepted = || {
        journal
            .events_so_far()
            .iter()
            .filter(|event| matches!(event, Event::Accepted { .. }))
            .count()
    };
    let all_accepted = tokio::time::timeout(Duration::from_secs(60), async {
        while accepted() < 3 {
            tokio::select! {
                _ = stream.next() => {}
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    })
    .await;
    assert!(all_accepted.is_ok(), "the first run's three lines were accepted");
    stopper.stop();
    let _ = stream.collect::<Vec<_>>().await;

    // The next run follows one line at a time.
    let second = Batch::new(mock.client().unwrap(), store(journal.clone()), &dir.0).jobs_at_once(1);
    let counters = second.counters();
    let stream = second.run(jobs(3, "resumed counts")).unwrap();
    tokio::pin!(stream);
    assert_eq!(counters.sent_earlier(), 3, "all three were sent before this run");
    // Line 1 is followed; lines 2 and 3 wait their turn, sent all the same.
    let one_followed = tokio::time::timeout(Duration::from_secs(60), async {
        while counters.in_flight() == 0 {
            tokio::select! {
                _ = stream.next() => panic!("no task ends before the clock moves"),
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    })
    .await;
    assert!(one_followed.is_ok(), "line 1 is followed");
    assert_eq!((counters.in_flight(), counters.sent_earlier()), (1, 2));
    mock.advance(Duration::from_secs(601));
    let outcomes: Vec<_> = stream.collect().await;
    assert_eq!(outcomes.len(), 3);
    assert_eq!(counters.sent_earlier(), 0, "every line was taken up");
    assert_eq!(
        mock.stats().submissions.get("/v1/gen-2-pro"),
        Some(&3),
        "none was sent again"
    );
}
