//! A batch keeps as many tasks active as the client allows and no more,
//! counting tasks taken up from the journal and retried refusals.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, MemoryJournal, Standing};
use genapi_mock::{Fault, FaultKind};

use crate::common::*;

#[tokio::test(start_paused = true)]
async fn refusals_that_surely_created_nothing_are_retried_and_in_flight_stays_under_the_limit() {
    let mock = roomy_mock(200).await;
    let client = mock.client().unwrap();
    let dir = Dir::new("limit");
    // Two 429s: the service surely did not accept them; tried again in the run.
    mock.inject(Fault::status("/v1/gen-2-pro", 429).method("POST").times(2));
    let batch = Batch::new(client, store(MemoryJournal::default()), &dir.0).jobs_at_once(4);
    let counters = batch.counters();
    let stream = batch.run(jobs(12, "limit")).unwrap();
    tokio::pin!(stream);
    let mut peak = 0;
    let mut outcomes = Vec::new();
    loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(outcome) => outcomes.push(outcome),
                None => break,
            },
            _ = tokio::time::sleep(Duration::from_millis(5)) => peak = peak.max(counters.in_flight()),
        }
    }
    assert_eq!(outcomes.len(), 12);
    assert!(outcomes.iter().all(|o| o.standing == Standing::Saved), "{outcomes:#?}");
    assert!((1..=4).contains(&peak), "peak in flight {peak}");
    assert_eq!(counters.submitted(), 12);
    let posts = posts_by_prompt(&mock);
    assert_eq!(posts.values().sum::<usize>(), 14, "12 accepted + 2 refused with 429");
}

#[tokio::test(start_paused = true)]
async fn a_batch_keeps_as_many_tasks_active_as_the_clients_limit_and_no_more() {
    // The one limit is the client's: the batch adds none of its own.
    let mock = roomy_mock(2_000).await;
    let client = mock.client_builder().max_active_tasks(40).build().unwrap();
    let dir = Dir::new("client-limit");
    let outcomes = run_batch(
        Batch::new(client, store(MemoryJournal::default()), &dir.0),
        jobs(90, "limit 40"),
    )
    .await;
    assert!(outcomes.iter().all(|o| o.standing == Standing::Saved), "{outcomes:#?}");
    assert_eq!(
        mock.stats().peak_active_tasks,
        40,
        "the service saw the client's limit reached, not passed"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 90);
}

#[tokio::test(start_paused = true)]
async fn tasks_taken_up_from_the_journal_hold_places_under_the_clients_limit() {
    // Tasks long enough that the first run's stop (which waits a while,
    // on the paused clock, for answers in flight) leaves them running.
    let mock = roomy_mock(120_000).await;
    let limited = || mock.client_builder().max_active_tasks(3).build().unwrap();
    let dir = Dir::new("resumed-limit");
    let journal = MemoryJournal::default();
    // A first run is stopped once its three tasks were accepted; they run on.
    let first = Batch::new(limited(), store(journal.clone()), &dir.0);
    let stopper = first.stopper();
    let running = tokio::spawn(run_batch(first, jobs(3, "resumed")));
    while mock.count("POST", "/v1/gen-2-pro") < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    stopper.stop();
    let first = running.await.unwrap();
    assert!(first.iter().all(|o| o.standing == Standing::Accepted), "{first:#?}");
    // The next run (a new client, as a new process has) takes them up
    // before it submits three more: never more than three active at once.
    let batch = Batch::new(limited(), store(journal), &dir.0);
    let counters = batch.counters();
    let stream = batch.run(jobs(6, "resumed")).unwrap();
    tokio::pin!(stream);
    let (mut second, mut taken_up) = (Vec::new(), None);
    loop {
        tokio::select! {
            biased;
            next = stream.next() => match next {
                Some(outcome) => second.push(outcome),
                None => break,
            },
            // Looked at on every turn, without letting time pass, until the
            // three are taken up (they cannot have ended by then).
            () = tokio::task::yield_now(), if taken_up.is_none() => {
                if counters.resumed() == 3 {
                    taken_up = Some((counters.in_flight(), second.len()));
                }
            }
        }
    }
    assert!(second.iter().all(|o| o.standing == Standing::Saved), "{second:#?}");
    // While the three taken up are polled, progress counts them in flight.
    let (in_flight, done_by_then) = taken_up.expect("the three were taken up");
    assert_eq!(done_by_then, 0);
    assert!(in_flight >= 3, "the three polled are in flight, not 0: {in_flight}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 6, "none submitted twice");
    assert_eq!(mock.stats().peak_active_tasks, 3);
}

/// Progress counts a job waiting for a seat apart from one in flight: with
/// room for two tasks and six jobs at once, the four that wait for room are
/// not in flight, and no job is counted twice. (A job whose task ended
/// stays in flight while its result is saved, after its seat is free, so
/// in flight may pass two then.)
#[tokio::test(start_paused = true)]
async fn jobs_waiting_for_a_seat_are_not_counted_in_flight() {
    let mock = roomy_mock(2_000).await;
    let client = mock.client_builder().max_active_tasks(2).build().unwrap();
    let dir = Dir::new("waiting-for-room");
    let batch = Batch::new(client, store(MemoryJournal::default()), &dir.0).jobs_at_once(6);
    let counters = batch.counters();
    let stream = batch.run(jobs(8, "seats")).unwrap();
    tokio::pin!(stream);
    let (mut samples, mut done) = (Vec::new(), 0);
    loop {
        tokio::select! {
            next = stream.next() => match next {
                Some(_) => done += 1,
                None => break,
            },
            _ = tokio::time::sleep(Duration::from_millis(50)) => {
                samples.push((counters.in_flight(), counters.waiting_for_room()));
            }
        }
    }
    assert_eq!(done, 8);
    assert!(
        samples.contains(&(2, 4)),
        "six at once, two seated, four waiting: {samples:?}"
    );
    for (in_flight, waiting) in &samples {
        assert!(in_flight + waiting <= 6, "a job counted twice: {samples:?}");
        assert!(*waiting <= 4, "at most four without a seat: {samples:?}");
    }
    assert_eq!((counters.in_flight(), counters.waiting_for_room()), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_seat_goes_to_the_next_line_when_its_task_is_seen_ended_not_after_the_download() {
    // One seat: the second line can only be sent once the first task's
    // place is free. Its result's download is held for five minutes of the
    // mock's clock, far longer than anything else here takes; the seat must
    // not be held with it. No bound on time is asserted: which comes first,
    // the second submission or the first download, is the whole claim.
    let mock = roomy_mock(1_000).await;
    let client = mock.client_builder().max_active_tasks(1).build().unwrap();
    let dir = Dir::new("seat-before-download");
    let held = FaultKind::Delay(Duration::from_secs(300));
    mock.inject(Fault::on("/mock/results/", held).method("GET").times(1));
    let batch = Batch::new(client, store(MemoryJournal::default()), &dir.0);
    let running = tokio::spawn(run_batch(batch, jobs(2, "seat")));
    while mock.count("POST", "/v1/gen-2-pro") < 2 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        mock.stats().downloads,
        0,
        "the second line was sent only after the first result was downloaded"
    );
    mock.advance(Duration::from_secs(300));
    let outcomes = running.await.unwrap();
    assert!(outcomes.iter().all(|o| o.standing == Standing::Saved), "{outcomes:#?}");
    assert_eq!(mock.stats().peak_active_tasks, 1);
}
