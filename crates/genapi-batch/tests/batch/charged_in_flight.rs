//! What a batch has been charged shows while its tasks run: an acceptance
//! that says what its task costs counts from then, not from the task's end.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, Event, Job, MemoryJournal};
use serde_json::json;

use crate::common::*;

// On the real clock, as the next: the run must see its acceptances, which
// a paused clock could skip past while the machine is busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credits_charged_at_acceptance_count_until_the_outcomes_carry_them() {
    // Tasks of ten minutes: all three are accepted long before any ends.
    let mock = roomy_mock(600_000).await;
    let dir = Dir::new("charged-in-flight");
    let journal = MemoryJournal::default();
    let batch = Batch::new(mock.client().unwrap(), store(journal.clone()), &dir.0);
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
    // What the three acceptances reported, as the journal recorded them.
    let accepted = || -> Vec<f64> {
        journal
            .events_so_far()
            .iter()
            .filter_map(|event| match event {
                Event::Accepted { cost, .. } => *cost,
                _ => None,
            })
            .collect()
    };
    let mut outcomes = Vec::new();
    // Each counts from its acceptance: once all three are recorded, and
    // their waits begun, the count reaches their sum, long before any ends.
    let counted = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let reported = accepted();
            if reported.len() == 3 && counters.charged_without_outcome() >= reported.iter().sum::<f64>() - 1e-9 {
                break;
            }
            tokio::select! {
                next = stream.next() => outcomes.extend(next),
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    })
    .await;
    assert!(counted.is_ok(), "counted: {}", counters.charged_without_outcome());
    assert!(outcomes.is_empty(), "no task has ended: {outcomes:#?}");
    let while_running = counters.charged_without_outcome();
    assert_eq!(accepted().len(), 3);
    // The tasks end.
    mock.advance(Duration::from_secs(601));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_dropped_while_its_tasks_run_still_says_what_they_were_charged() {
    let mock = roomy_mock(600_000).await;
    let dir = Dir::new("charged-dropped");
    let batch = Batch::new(mock.client().unwrap(), store(MemoryJournal::default()), &dir.0);
    let counters = batch.counters();
    let body = json!({"prompt": "dropped", "width": 1024, "height": 1024});
    let stream = batch.run(vec![Job::new(1, "/v1/gen-2-pro", body)]).unwrap();
    let mut stream = Box::pin(stream);
    // The mock charges a 1 MP image at acceptance.
    let counted = tokio::time::timeout(Duration::from_secs(60), async {
        while counters.charged_without_outcome() == 0.0 {
            tokio::select! {
                next = stream.next() => panic!("the task runs ten minutes: {next:#?}"),
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    })
    .await;
    assert!(counted.is_ok(), "counted from its acceptance");
    let charged = counters.charged_without_outcome();
    assert!(charged > 0.0, "counted from its acceptance");
    // No outcome ever comes out: the cost stays known.
    drop(stream);
    assert_eq!(counters.charged_without_outcome(), charged);
}

#[tokio::test(start_paused = true)]
async fn a_task_that_fails_keeps_what_its_acceptance_charged_and_a_moderated_one_costs_nothing() {
    let mock = roomy_mock(1_000).await;
    let dir = Dir::new("charged-endings");
    let journal = MemoryJournal::default();
    let jobs = || -> Vec<Job> {
        ["fails [mock:error]", "moderated [mock:content-moderated]", "fine"]
            .iter()
            .zip(1..)
            .map(|(prompt, n)| {
                let body = json!({"prompt": prompt, "width": 1024, "height": 1024});
                Job::new(n, "/v1/gen-2-pro", body).name(format!("img-{n}"))
            })
            .collect()
    };
    // As the run sees them end, and as a later run reads them back.
    for run in ["live", "from the journal"] {
        let batch = Batch::new(mock.client().unwrap(), store(journal.clone()), &dir.0);
        let counters = batch.counters();
        let outcomes = run_batch(batch, jobs()).await;
        let costs: Vec<Option<f64>> = outcomes.iter().map(|outcome| outcome.cost).collect();
        assert!(
            costs[0].is_some_and(|cost| cost > 0.0),
            "{run}: a failed task was charged: {outcomes:#?}"
        );
        assert_eq!(costs[1], None, "{run}: moderation charges nothing");
        assert_eq!(costs[0], costs[2], "{run}: both charged at acceptance alike");
        assert_eq!(counters.charged_without_outcome(), 0.0, "{run}");
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3, "sent once each");
}
