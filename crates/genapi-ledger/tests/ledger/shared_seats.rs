//! Seats shared through the ledger keep an account's active tasks under its
//! limit whatever the service or the database does: programs sharing a
//! pool, odd rows, a database that goes away, a task id repeated, an answer
//! lost, a dead worker's seat.

use std::time::Duration;

use genapi_mock::{MockConfig, MockService};
use serde_json::json;

use crate::common::pg::Postgres;
use crate::common::{hostile, roomy_mock};

/// A seat row with a NULL where a value belongs (odd database contents):
/// skipped, never a panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_null_in_a_seat_row_is_skipped_without_a_panic() {
    let Some(pg) = Postgres::start("null-seat") else { return };
    let mock = roomy_mock(100).await;
    let seats = genapi_ledger::SharedSeats::connect(&pg.url(), "odd", 1).await.unwrap();
    pg.sql(
        "UPDATE genapi_seats SET worker = 'ghost', lease_until = now() - interval '1 hour', task_id = 't', \
         polling_url = NULL, taken_at = now() WHERE pool = 'odd'",
    );
    let client = mock
        .client_builder()
        .shared_seats(seats.pool(), seats.limit())
        .build()
        .unwrap();
    let submitting = tokio::spawn(async move {
        let request = genapi::api::types::Gen2ProRequest::builder()
            .prompt("odd")
            .width(64)
            .height(64);
        client.submit(request).await.map(|_| ())
    });
    // Still waiting for the only seat (its ghost's task cannot be
    // checked), and never a panic.
    let outcome = tokio::time::timeout(Duration::from_secs(5), submitting).await;
    assert!(outcome.is_err(), "{outcome:?}");
}

/// The database goes away (a restart, a failover): a submission waiting
/// for a seat gives up with an error that says so, instead of waiting for
/// ever, and sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_database_fails_a_shared_seat_submission_and_sends_nothing() {
    let Some(pg) = Postgres::start("database-gone") else {
        return;
    };
    let mock = roomy_mock(100).await;
    // Each step within 2 s: the submission gives up after one step.
    let options = genapi_ledger::LedgerOptions::default().step_deadline(Duration::from_secs(2));
    let hold = genapi_ledger::UNANSWERED_SEAT_HOLD;
    // Connected while the database is there: a step of 2 s may not be
    // enough on a slow machine, so a step that ran late is tried again (a
    // hang detector bounds it); the verdict below is on a database gone.
    let mut tries = 0;
    let seats = loop {
        match genapi_ledger::SharedSeats::connect_with(&pg.url(), "gone", 4, &options, hold).await {
            Ok(seats) => break seats,
            Err(error) if tries < 60 => {
                tries += 1;
                eprintln!("connecting again: {error}");
            }
            Err(error) => panic!("no connection in 60 tries: {error}"),
        }
    };
    let client = mock
        .client_builder()
        .shared_seats(seats.pool(), seats.limit())
        .build()
        .unwrap();
    drop(pg);
    let request = genapi::api::types::Gen2ProRequest::builder()
        .prompt("gone")
        .width(64)
        .height(64);
    let submitted = tokio::time::timeout(Duration::from_secs(120), client.submit(request)).await;
    let error = submitted
        .expect("still waiting for a seat after 120 s with the database gone")
        .unwrap_err();
    assert!(matches!(error, genapi::Error::SharedLimit { .. }), "{error}");
    assert!(error.to_string().contains("nothing was sent"), "{error}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);
}

/// A hostile service answering two submissions with the same task id:
/// one task, one seat, freed when it is seen final; no seat leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_id_the_service_repeats_keeps_one_seat() {
    let Some(pg) = Postgres::start("repeated-id") else {
        return;
    };
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => hostile::accepted(base, "dup"),
        "/v1/get_result" => hostile::json(200, json!({"id": "dup", "status": "Error", "result": null})),
        _ => hostile::json(404, json!({})),
    })
    .await;
    let seats = genapi_ledger::SharedSeats::connect(&pg.url(), "dup", 2).await.unwrap();
    let client = service
        .client_builder()
        .shared_seats(seats.pool(), seats.limit())
        .build()
        .unwrap();
    let request = || {
        genapi::api::types::Gen2ProRequest::builder()
            .prompt("dup")
            .width(64)
            .height(64)
    };
    let a = client.submit(request()).await.unwrap();
    let b = client.submit(request()).await.unwrap();
    let _ = a.wait().await;
    let _ = b.wait().await;
    // Seats seen free are given back to the database by a task of their
    // own: once it has written every change made so far, the count is
    // final, however slowly the database answers.
    seats.flush().await;
    assert_eq!(
        seats.taken().await.unwrap(),
        0,
        "both tasks were seen final; a seat stays taken"
    );
}

/// A submission whose answer never came (the service created the task)
/// keeps its shared seat, so the next one does not go out into a full
/// account and meet a 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_submission_keeps_its_shared_seat() {
    let Some(pg) = Postgres::start("unanswered-seat") else {
        return;
    };
    let config = MockConfig::default()
        .default_duration(Duration::from_secs(5))
        .max_active_tasks(1)
        .request_log_capacity(1_000);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    mock.inject(genapi_mock::Fault::on("/v1/gen-2-pro", genapi_mock::FaultKind::LoseAnswer).method("POST"));
    let seats = genapi_ledger::SharedSeats::connect(&pg.url(), "unanswered", 1)
        .await
        .unwrap();
    let client = mock
        .client_builder()
        .shared_seats(seats.pool(), seats.limit())
        .build()
        .unwrap();
    let request = |p: &str| {
        genapi::api::types::Gen2ProRequest::builder()
            .prompt(p)
            .width(64)
            .height(64)
    };
    assert!(client.submit(request("lost")).await.is_err(), "the answer was lost");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let taken = seats.taken().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(2), client.submit(request("next"))).await;
    let refused = mock.stats().too_many_requests;
    assert_eq!(taken, 1, "the lost submission's task runs, yet its seat was given back");
    assert_eq!(
        refused, 0,
        "the next submission went out into a full account: {second:?}"
    );
}

/// A dead worker's seat whose task cannot be checked (its host is gone)
/// comes back once a task taken then can no longer be running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_workers_seat_whose_task_cannot_be_checked_comes_back_in_time() {
    let Some(pg) = Postgres::start("uncheckable-seat") else {
        return;
    };
    let mock = roomy_mock(100).await;
    let seats = genapi_ledger::SharedSeats::connect_with(
        &pg.url(),
        "stranded",
        1,
        &genapi_ledger::LedgerOptions::default().lease(Duration::from_secs(1)),
        Duration::from_secs(3),
    )
    .await
    .unwrap();
    // The seat is taken (by the database's clock) after this: however long
    // the client below takes to build, the hold cannot begin before it.
    let started = std::time::Instant::now();
    pg.sql(
        "UPDATE genapi_seats SET worker = 'gone', lease_until = now() - interval '1 second', task_id = 't', \
         polling_url = 'http://127.0.0.1:1/v1/get_result?id=t', taken_at = now() WHERE pool = 'stranded'",
    );
    let client = mock
        .client_builder()
        .shared_seats(seats.pool(), seats.limit())
        .build()
        .unwrap();
    let request = genapi::api::types::Gen2ProRequest::builder()
        .prompt("stranded")
        .width(64)
        .height(64);
    let task = tokio::time::timeout(Duration::from_secs(30), client.submit(request))
        .await
        .expect("the stranded seat never came back")
        .unwrap();
    assert!(started.elapsed() >= Duration::from_secs(2), "not before the hold");
    task.wait().await.unwrap();
    // Given back at once when the program says it is done.
    seats.flush().await;
    assert_eq!(seats.taken().await.unwrap(), 0);
}

/// How long each program's first task lasts on the mock clock: until the
/// test moves it.
const FIRST_TASK: Duration = Duration::from_secs(3600);

/// The prompt of program `tag`'s task `n`: its first task lasts
/// [`FIRST_TASK`], the others the mock's half second.
fn prompt(tag: &str, n: u32) -> String {
    match n {
        0 => format!("{tag} {n} [mock:duration_ms={}]", FIRST_TASK.as_millis()),
        _ => format!("{tag} {n}"),
    }
}

/// Waits until a task was created after both programs' first tasks, which
/// run until the mock clock moves: the three seats were then surely taken at
/// once, however slowly the programs sent. Then ends those first tasks.
async fn release_the_first_tasks_once_a_task_ran_beside_them(mock: &MockService) {
    let held = [prompt("first", 0), prompt("second", 0)];
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            std::time::Instant::now() < give_up,
            "no task was sent beside the first two"
        );
        let created = mock.created_tasks();
        let last_held = created.iter().rposition(|task| held.contains(&task.prompt));
        let both_held = created.iter().filter(|task| held.contains(&task.prompt)).count() == 2;
        if both_held && last_held.is_some_and(|at| at + 1 < created.len()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    mock.advance(FIRST_TASK + Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_programs_sharing_seats_keep_the_accounts_active_tasks_under_the_limit() {
    let Some(pg) = Postgres::start("shared-seats") else {
        return;
    };
    // Tasks ended before the clock moves past the first tasks stay known.
    let config = MockConfig::default()
        .default_duration(Duration::from_millis(500))
        .task_ttl(3 * FIRST_TASK)
        .price_per_mp(1.5)
        .request_log_capacity(100_000);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let seats = || async {
        genapi_ledger::SharedSeats::connect(&pg.url(), "account", 3)
            .await
            .unwrap()
    };
    let (first_seats, second_seats) = (seats().await, seats().await);
    // Waits poll every half second: the first tasks' hour, which the
    // clients learn, does not aim their later waits an hour out.
    let program = |seats: &genapi_ledger::SharedSeats| {
        mock.client_builder()
            .shared_seats(seats.pool(), seats.limit())
            .wait_options(genapi::WaitOptions::default().fixed_interval(Duration::from_millis(500)))
            .build()
            .unwrap()
    };
    let (first, second) = (program(&first_seats), program(&second_seats));
    assert_eq!(first.max_active_tasks(), Some(3));
    let run = |client: genapi::Client, tag: &'static str| async move {
        let mut tasks = Vec::new();
        for n in 0..8 {
            let request = genapi::api::types::Gen2ProRequest::builder()
                .prompt(prompt(tag, n))
                .width(64)
                .height(64);
            tasks.push(client.submit(request).await.unwrap());
        }
        for task in tasks {
            task.wait().await.unwrap();
        }
    };
    tokio::join!(
        run(first, "first"),
        run(second, "second"),
        release_the_first_tasks_once_a_task_ran_beside_them(&mock)
    );
    let stats = mock.stats();
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 16);
    assert!(stats.peak_active_tasks <= 3, "peak {}", stats.peak_active_tasks);
    assert_eq!(stats.peak_active_tasks, 3, "the seats were used");
}
