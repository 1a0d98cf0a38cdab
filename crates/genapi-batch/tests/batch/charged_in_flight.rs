//! What a batch has been charged shows while its tasks run: an acceptance
//! that says what its task costs counts from then, not from the task's end.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, Job, MemoryJournal};
use serde_json::json;

use crate::common::*;

#[tokio::test(start_paused = true)]
async fn credits_charged_at_acceptance_count_until_the_outcomes_carry_them() {
    // Tasks of a minute: all three are accepted long before any ends.
    let mock = roomy_mock(60_000).await;
    let dir = Dir::new("charged-in-flight");
    let batch = Batch::new(mock.client().unwrap(), store(MemoryJournal::default()), &dir.0);
    let counters = batch.counters();
    let jobs: Vec<Job> = (1..=3)
        .map(|n| {
            let body = json!({"prompt": format!("charged {n}"), "width": 1024, "height": 1024});
            Job::new(n, "/v1/gen-2-pro", body).name(format!("img-{n}"))
        })
        .collect();
    let stream = batch.run(jobs).unwrap();
    tokio::pin!(stream);
    assert_eq!(counters.charged_without_outcome(), 0.0, "nothing accepted yet");
    let mut outcomes = Vec::new();
    while counters.submitted() < 3 {
        tokio::select! {
            next = stream.next() => outcomes.extend(next),
            _ = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
    // The acceptances are recorded before their waits begin.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(outcomes.is_empty(), "no task has ended: {outcomes:#?}");
    let while_running = counters.charged_without_outcome();
    outcomes.extend(stream.by_ref().collect::<Vec<_>>().await);
    assert_eq!(outcomes.len(), 3);
    let settled: f64 = outcomes.iter().filter_map(|outcome| outcome.cost).sum();
    assert!(settled > 0.0, "the mock charges a 1 MP image: {outcomes:#?}");
    assert!(
        (while_running - settled).abs() < 1e-9,
        "{while_running} counted while running, {settled} settled"
    );
    assert_eq!(counters.charged_without_outcome(), 0.0, "the outcomes carry them now");
}

#[tokio::test(start_paused = true)]
async fn a_run_dropped_while_its_tasks_run_still_says_what_they_were_charged() {
    let mock = roomy_mock(60_000).await;
    let dir = Dir::new("charged-dropped");
    let batch = Batch::new(mock.client().unwrap(), store(MemoryJournal::default()), &dir.0);
    let counters = batch.counters();
    let body = json!({"prompt": "dropped", "width": 1024, "height": 1024});
    let stream = batch.run(vec![Job::new(1, "/v1/gen-2-pro", body)]).unwrap();
    let mut stream = Box::pin(stream);
    while counters.submitted() < 1 {
        tokio::select! {
            next = stream.next() => panic!("the task runs a minute: {next:#?}"),
            _ = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let charged = counters.charged_without_outcome();
    assert!(charged > 0.0, "the mock charges a 1 MP image at acceptance");
    // No outcome ever comes out: the cost stays known.
    drop(stream);
    assert_eq!(counters.charged_without_outcome(), charged);
}
