//! Results whose signed address expired are fetched again by polling the
//! same task, never by submitting again.

use std::time::Duration;

use genapi_batch::{Batch, Standing};

use crate::common::*;

#[tokio::test(start_paused = true)]
async fn expired_results_are_fetched_again_by_polling_without_resubmitting() {
    let (mock, client, dir, journal) = setup(100, "expiry").await;
    // First run: the output "directory" is a file, so no result can be saved.
    let blocked = dir.join("out");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let first = run_batch(
        Batch::new(client.clone(), store(journal.clone()), &blocked),
        jobs(3, "expiry"),
    )
    .await;
    assert!(first.iter().all(|o| o.standing == Standing::Accepted), "{first:#?}");
    assert!(first.iter().all(|o| o.task.is_some()));
    assert!(first[0].error.as_deref().unwrap().contains("not submitted again"));
    // The result addresses of the first run expire.
    std::fs::remove_file(&blocked).unwrap();
    std::fs::create_dir(&blocked).unwrap();
    mock.advance(Duration::from_secs(601));
    let polls_before = mock.count("GET", "/v1/get_result");
    let second = run_batch(
        Batch::new(client.clone(), store(journal.clone()), &blocked),
        jobs(3, "expiry"),
    )
    .await;
    for (before, after) in first.iter().zip(&second) {
        assert_eq!(after.standing, Standing::Saved, "{after:#?}");
        assert!(after.resumed);
        assert_eq!(before.task, after.task, "the same task, polled again");
        let file = after.file.as_ref().unwrap();
        assert_eq!(crate::common::dimensions(&std::fs::read(file).unwrap()), Some((64, 64)));
    }
    assert!(
        mock.count("GET", "/v1/get_result") >= polls_before + 3,
        "fresh addresses come from polls"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3, "nothing was submitted twice");
    // A third run downloads nothing and sends nothing.
    let downloads = mock
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/mock/results/"))
        .count();
    let third = run_batch(Batch::new(client, store(journal), &blocked), jobs(3, "expiry")).await;
    assert!(third.iter().all(|o| o.standing == Standing::Saved && o.from_journal));
    let after = mock
        .requests()
        .iter()
        .filter(|r| r.path.starts_with("/mock/results/"))
        .count();
    assert_eq!((after, mock.count("POST", "/v1/gen-2-pro")), (downloads, 3));
}

// On the real clock: the test waits for the run's download to be held,
// which a paused clock could skip past while the machine is busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_the_client_calls_expired_while_saved_leaves_the_line_for_the_next_run_to_poll() {
    let (mock, client, dir, journal) = setup(100, "expiry-while-saved").await;
    // The download is held until the task itself has expired at the service.
    mock.inject(genapi_mock::Fault::on(
        "/mock/results/",
        genapi_mock::FaultKind::Delay(Duration::from_secs(3 * 60 * 60)),
    ));
    let jobs = || sized_jobs(1, "expiry-while-saved", 1024, 1024);
    let run = tokio::spawn(run_batch(
        Batch::new(client.clone(), store(journal.clone()), &dir.0),
        jobs(),
    ));
    let held = tokio::time::timeout(Duration::from_secs(60), async {
        while !mock.requests().iter().any(|r| r.path.starts_with("/mock/results/")) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(held.is_ok(), "the run's download reached the mock");
    mock.advance(Duration::from_secs(3 * 60 * 60));
    let first = run.await.unwrap();
    let outcome = &first[0];
    // The client's word "expired" rests on one refusal and one poll: only
    // the next run's polls end the line.
    assert_eq!(outcome.standing, Standing::Accepted, "{outcome:#?}");
    let error = outcome.error.as_deref().unwrap();
    assert!(error.contains("run the batch again"), "{error}");
    assert!(!error.contains("submit the task again"), "one advice, not two: {error}");
    assert!(
        outcome.cost.is_some_and(|cost| cost > 0.0),
        "the task was charged: {outcome:#?}"
    );
    // The task is gone at the service: the next run polls it and ends the
    // line, without submitting it again.
    let polls = mock.count("GET", "/v1/get_result");
    let second = run_batch(Batch::new(client, store(journal), &dir.0), jobs()).await;
    assert_eq!(second[0].standing, Standing::Ended, "{:#?}", second[0]);
    assert!(mock.count("GET", "/v1/get_result") > polls, "polled again");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "submitted once");
}
